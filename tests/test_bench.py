"""cltune bench: the numpy baseline is right, and a tiny suite tunes, races and tabulates."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cltune.bench import geomean, numpy_conv2d
from cltune.cli import main
from cltune.problem import Problem, reference_conv2d


@pytest.mark.parametrize("shapes", [
    dict(input_shape=(2, 3, 9, 8), weight_shape=(4, 3, 3, 2), stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
    dict(input_shape=(1, 6, 7, 7), weight_shape=(6, 1, 3, 3), stride=2, padding=1, groups=6),
    dict(input_shape=(1, 4, 5, 6), weight_shape=(8, 2, 1, 1), groups=2, bias=False),
])
def test_numpy_baseline_matches_the_reference(shapes):
    p = Problem.from_shapes(**shapes)
    x, w, b = p.make_inputs(1)
    np.testing.assert_allclose(numpy_conv2d(p, x, w, b), reference_conv2d(p, x, w, b), rtol=1e-4, atol=1e-4)


def test_geomean_ignores_missing_values():
    assert geomean([2.0, 8.0, float("nan"), None]) == pytest.approx(4.0)


def test_bench_tunes_races_and_writes_a_table(tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text("""
[run]
repeat = 2
warmup = 0
budget = 2
strategy = "random"
[[layer]]
name = "tiny"
input = [1, 4, 8, 8]
weight = [4, 4, 3, 3]
padding = 1
[[layer]]
name = "tiny_1x1"
input = [1, 8, 6, 6]
weight = [4, 8, 1, 1]
[[space]]
family = "conv2d"
[space.params]
MACROS = [0, 4]
UNROLL = [0, 1]
[space.constraints]
unroll = "UNROLL == 0 or MACROS >= 1"
""")
    out = tmp_path / "bench.csv"
    res = CliRunner().invoke(main, ["bench", str(suite), "--rounds", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    df = pd.read_csv(out)
    assert set(df["layer"]) == {"tiny", "tiny_1x1"}
    assert {"cltune:conv2d", "numpy", "torch"} <= set(df["contender"])
    assert (df["ms_median"] > 0).all() and df["best_cltune"].sum() == 2
    assert "geometric mean over 2 dense layers" in res.output
    assert (tmp_path / "bench" / "suite-tiny.csv").exists()


def test_unknown_layer_is_one_line(tmp_path):
    res = CliRunner().invoke(main, ["bench", "--layers", "nope"])
    assert res.exit_code == 2 and "unknown layer(s) nope" in res.output
