"""cltune bench: the numpy baseline is right, and a tiny suite tunes, races and tabulates."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cltune.bench import suite as bench
from cltune.measure.race import numpy_conv2d
from cltune.bench.suite import geomean
from cltune.cli.commands import main

from .conftest import HAS_TORCH
from cltune.core.problem import Problem, reference_conv2d


@pytest.mark.parametrize("shapes", [
    dict(input_shape=(2, 3, 9, 8), weight_shape=(4, 3, 3, 2), stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
    dict(input_shape=(1, 6, 7, 7), weight_shape=(6, 1, 3, 3), stride=2, padding=1, groups=6),
    dict(input_shape=(1, 4, 5, 6), weight_shape=(8, 2, 1, 1), groups=2, bias=False),
])
def test_numpy_baseline_matches_the_reference(shapes):
    p = Problem.from_shapes(**shapes)
    x, w, b = p.make_inputs(1)
    np.testing.assert_allclose(numpy_conv2d(p, x, w, b), reference_conv2d(p, x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shapes", [
    dict(input_shape=(2, 3, 9, 8), weight_shape=(4, 3, 3, 2), stride=(2, 1), padding=(1, 2), dilation=(2, 1)),
    dict(input_shape=(1, 6, 7, 7), weight_shape=(6, 1, 3, 3), stride=2, padding=1, groups=6, activation="relu6"),
    dict(input_shape=(1, 4, 8, 6), weight_shape=(8, 2, 1, 1), groups=2, bias=False, activation="relu", pool=2),
])
@pytest.mark.parity
def test_torch_baseline_matches_the_reference_call_after_call(shapes):
    """torch writes into one output it keeps (and applies the epilogue in place): every call's
    result is still the layer's, not the previous call's transformed again."""
    pytest.importorskip("torch")
    from cltune.measure.race import torch_contender

    p = Problem.from_shapes(**shapes)
    x, w, b = p.make_inputs(1)
    b = b if p.bias else None
    expected = reference_conv2d(p, x, w, b)  # the epilogue included
    call = torch_contender(p, x, w, b).call
    for _ in range(3):
        np.testing.assert_allclose(call().numpy(), expected, rtol=1e-4, atol=1e-4)


def test_race_groups_visit_every_group_in_every_round():
    """A suite's layers share the rounds: each layer's calls spread over the whole race."""
    from cltune.measure.race import Contender, race_groups

    log = []
    groups = [[Contender(f"{g}{c}", lambda n=f"{g}{c}": log.append(n)) for c in "xy"] for g in "AB"]
    times = race_groups(groups, rounds=3, block=2, warm_s=0.0)
    assert log == (["Ax"] * 3 + ["Ay"] * 3 + ["Bx"] * 3 + ["By"] * 3) * 3  # a round: 1 untimed + 2 timed each
    assert [sorted(t) for t in times] == [["Ax", "Ay"], ["Bx", "By"]]
    assert all(len(v) == 6 for t in times for v in t.values())


def test_each_family_races_on_with_the_finalist_that_won_its_heat():
    finalists = {"direct": [{"setting": "a"}, {"setting": "b"}], "winograd": [{"setting": "c"}]}
    heat = {"cltune:direct": [0.9, 0.7], "cltune:direct#2": [0.8, 0.6], "cltune:winograd": [1.0], "torch": [1.0]}
    assert bench.heat_winners(finalists, heat) == {"direct": 1, "winograd": 0}


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
    assert {"cltune:conv2d", "numpy"} | ({"torch"} if HAS_TORCH else set()) <= set(df["contender"])
    assert not df["contender"].str.contains("#").any()  # the heat's losers do not race on
    assert (df["ms"] > 0).all() and (df["ms_median"] >= df["ms"]).all() and df["best_cltune"].sum() == 2
    assert "geometric mean over 2 dense layers" in res.output
    assert (tmp_path / "bench" / "suite-tiny.csv").exists()


def test_unknown_layer_is_one_line(tmp_path):
    res = CliRunner().invoke(main, ["bench", "--layers", "nope"])
    assert res.exit_code == 2 and "unknown layer(s) nope" in res.output


def test_resume_tunes_what_is_missing_and_reuses_what_is_there(tmp_path):
    # --resume on a fresh directory used to write the tuning file elsewhere and then fail to read it.
    suite = tmp_path / "one.toml"
    suite.write_text("[run]\nrepeat = 1\nwarmup = 0\n[[layer]]\nname = 'l'\ninput = [1, 2, 6, 6]\n"
                     "weight = [2, 2, 3, 3]\npadding = 1\n[[setting]]\nname = 'u'\nbuiltin = 'unroll_s1'\n")
    out = tmp_path / "b.csv"
    args = ["bench", str(suite), "--rounds", "1", "--resume", "--out", str(out)]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    tuned = tmp_path / "b" / "one-l.csv"
    before = tuned.read_text()
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert tuned.read_text() == before  # nothing measured twice


FAULTS = """
import resource, sys
import torch
if sys.argv[1] == "keep":
    from cltune.measure.race import keep_freed_memory
    assert keep_freed_memory()
torch.set_num_threads(2)
x, w = torch.randn(1, 32, 112, 112), torch.randn(64, 32, 1, 1)
for _ in range(5):
    torch.nn.functional.conv2d(x, w)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    torch.nn.functional.conv2d(x, w)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


@pytest.mark.parity
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="glibc's mallopt")
def test_the_race_keeps_freed_memory_so_torch_reuses_its_pages():
    """torch allocates its output on every call; glibc hands the pages back and faults fresh ones in
    (about 1,900 faults a call for this layer) unless the race keeps freed memory in the process."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    def faults(mode):
        out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    keep = faults("keep")
    assert keep < 5 and keep < faults("plain")
