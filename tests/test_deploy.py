"""cltune deploy without a device: the rules that pick a setting per device and shape (exact, nearest
tuned shape, default across devices), the header's lookup compiled and run by the system's C
compiler, and each bad input as one line with nothing written."""

import json
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.deploy import model
from cltune.deploy.header import to_header
from cltune.deploy.tuning_json import to_flat
from cltune.results.nearest import problem_from_key
from cltune.workloads import get_family

P8 = "n1_c8_h16_w16_k8_r3_s3_st1x1_p1x1_d1x1_g1"
P16 = "n1_c16_h16_w16_k16_r3_s3_st1x1_p1x1_d1x1_g1"  # 2 from P8: in and out channels 2x
P64 = "n1_c64_h16_w16_k64_r3_s3_st1x1_p1x1_d1x1_g1"  # 6 from P8
P5 = "n1_c8_h16_w16_k8_r5_s5_st1x1_p2x2_d1x1_g1"  # another filter: never near a 3x3
A = {"MACROS": 4, "UNROLL": 1}
B = {"MACROS": 4}
C = {}


def m(device, params, ms, problem=P8, driver="1.0", measured="2026-01-02", rerank=False, family="conv2d"):
    name = "normal" if not params else f"{family}[{','.join(f'{k}={v}' for k, v in sorted(params.items()))}]"
    return {"device": device, "driver": driver, "platform": "P", "problem": problem, "family": family,
            "setting": name, "params": params, "run_ms": ms, "build_options": None, "measured": measured,
            "rerank": rerank, "source": "test"}


# X's best is A, Y's best is C; B wins nowhere but is within 10% of the best on both.
TWO_DEVICES = [m("X", A, 1.0), m("X", B, 1.1), m("X", C, 3.0), m("Y", A, 2.0), m("Y", B, 1.05), m("Y", C, 1.0)]


def entry(dep, device, problem):
    entries = dep["default"]["entries"] if device is None else \
        next(d for d in dep["devices"] if d["device"] == device)["entries"]
    return next((e for e in entries if e["problem"] == problem), None)


def test_exact_is_each_devices_fastest_with_the_options_cltune_builds():
    dep = model.build(TWO_DEVICES, "conv2d")
    x, y = entry(dep, "X", P8), entry(dep, "Y", P8)
    assert (x["match"], x["params"], y["params"]) == ("exact", A, C)
    family = get_family("conv2d")
    assert x["options"] == " ".join(family.options(problem_from_key(P8), family.resolve(A)))
    assert x["defines"]["IN_C"] == "8" and x["launches"][0]["global"] == [16, 16, 8]


def test_the_default_is_the_best_geometric_mean_across_devices_not_any_devices_winner():
    # The bug this guards against: taking the first device's winner (A) or the most common winner.
    dep = model.build(TWO_DEVICES, "conv2d")
    assert dep["default"]["rule"] == "geomean"
    assert entry(dep, None, P8)["params"] == B


def test_with_winners_only_the_default_is_the_setting_that_won_most_entries():
    db = [m("X", A, 1.0, rerank=True), m("Y", A, 2.0, rerank=True), m("Z", B, 1.0, rerank=True),
          m("X", A, 1.0, P16, rerank=True)]
    dep = model.build(db, "conv2d")
    assert dep["default"]["rule"] == "most_wins" and entry(dep, None, P8)["params"] == A


def test_an_untuned_shape_gets_the_nearest_tuned_shapes_setting_with_options_for_its_own_shape():
    dep = model.build(TWO_DEVICES, "conv2d", [P16])
    e = entry(dep, "X", P16)
    assert (e["match"], e["tuned_problem"], e["params"]) == ("nearest", P8, A)
    assert e["defines"]["IN_C"] == "16", "the tuned shape's baked channels would compute a wrong answer"
    assert entry(dep, None, P16)["params"] == B


def test_a_shape_no_tuned_shape_is_near_enough_to_is_one_line():
    for shape in (P64, P5):
        with pytest.raises(UserError, match=f"--shape {shape}: no tuned shape is near enough"):
            model.build(TWO_DEVICES, "conv2d", [shape])
    assert entry(model.build(TWO_DEVICES, "conv2d", [P64], max_distance=6.0), "X", P64)["match"] == "nearest"


def test_the_newest_driver_of_a_device_counts_and_rerank_rows_rank_first():
    rows = [m("X", C, 0.5, driver="0.9", measured="2026-01-01"), m("X", A, 1.0), m("X", B, 0.9),
            m("X", A, 1.2, rerank=True), m("X", B, 1.3, rerank=True)]
    dep = model.build(rows, "conv2d")
    assert dep["devices"][0]["driver"] == "1.0" and entry(dep, "X", P8)["params"] == A


def test_options_other_than_those_the_row_was_built_with_are_refused():
    rows = [dict(m("X", A, 1.0), build_options="-cl-std=CL1.2 -DUNROLL=1")]
    with pytest.raises(UserError, match="was built with '-cl-std=CL1.2 -DUNROLL=1', this cltune builds"):
        model.build(rows, "conv2d")


def test_the_flat_form_holds_every_entry_and_the_default_as_star():
    dep = model.build(TWO_DEVICES, "conv2d", [P16])
    lines = [ln.split("\t") for ln in to_flat(dep).splitlines() if not ln.startswith("#")]
    assert sorted((ln[0], ln[2], ln[3]) for ln in lines) == sorted([
        ("X", P8, "exact"), ("X", P16, "nearest"), ("Y", P8, "exact"), ("Y", P16, "nearest"),
        ("*", P8, "default"), ("*", P16, "default")])
    launches = next(ln for ln in lines if ln[:3] == ["X", "1.0", P8])[8]
    assert launches == "conv2d|16,16,8|0,0,0|x w b out 1 8 16 16 8 16 16 3 3 1 1 1 1 1 1"


LOOKUP_MAIN = r"""
#include <stdio.h>
#include "cltune_NAME.h"
int main(int argc, char **argv) {
    const cltune_setting *s = cltune_NAME_lookup(argv[1], argv[2]);
    (void)argc;
    if (!s) { printf("NULL\n"); return 0; }
    printf("%s|%s|%s|%s|%d\n", s->device, s->match, s->tuned_problem, s->options, s->n_launches);
    return 0;
}
"""


def compiled_lookup(tmp_path, dep, name="conv2d"):
    """The header's lookup, compiled into a program: (device, problem) -> its printed entry fields."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine: scripts/system-deps installs one in CI")
    (tmp_path / f"cltune_{name}.h").write_text(to_header(dep, name))
    (tmp_path / "main.c").write_text(LOOKUP_MAIN.replace("NAME", name))
    out = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I", str(tmp_path), "-o",
                          str(tmp_path / "lookup"), str(tmp_path / "main.c")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return lambda device, problem: subprocess.run([str(tmp_path / "lookup"), device, problem], capture_output=True,
                                                  text=True, check=True).stdout.strip().split("|")


def test_the_header_is_c99_and_its_lookup_picks_exact_nearest_default_then_null(tmp_path):
    odd = 'Mali-T860 "r1p0"??= é\\'  # quotes, a trigraph, a backslash and UTF-8 in a device's name
    rows = TWO_DEVICES + [m(odd, A, 1.0)]
    dep = model.build(rows, "conv2d", [P16])
    lookup = compiled_lookup(tmp_path, dep)
    assert lookup("X", P8)[:2] == ["X", "exact"]
    assert lookup("Y", P16)[:3] == ["Y", "nearest", P8]
    assert lookup(odd, P8)[:2] == [odd, "exact"]
    default = lookup("Mali-G78", P16)
    assert default[:2] == ["", "default"] and default[3] == entry(dep, None, P16)["options"]
    assert default[4] == "1"
    assert lookup("X", P64) == ["NULL"]


def db(tmp_path, rows):
    from cltune.results import store

    entries = [dict(r, target="", measured="2026-01-01", speedup=None) for r in rows]
    return str(store.put_best(entries, tmp_path / "best.sqlite"))


@pytest.mark.parametrize("args, message", [
    (["--kernel", "direct"], "no entry for kernel 'direct' (it holds conv2d, im2col_gemm)"),
    ([], "holds results of several kernels (conv2d, im2col_gemm); pick one with --kernel"),
    (["--kernel", "conv2d", "--name", "my-conv"], "--name 'my-conv': not a valid C identifier"),
    (["--kernel", "conv2d", "--shape", P64], f"--shape {P64}: no tuned shape is near enough"),
    (["--kernel", "conv2d", "--shape", "n1_c8"], "--shape: 'n1_c8' is not a conv problem key"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    path = db(tmp_path, [m("X", A, 1.0), m("Y", {"TM": 4}, 2.0, family="im2col_gemm")])
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["deploy", "--db", path, "-o", str(out), *args])
    assert res.exit_code == 2 and message in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not out.exists() or not list(out.iterdir())


def test_an_output_that_holds_measured_data_is_refused(tmp_path):
    path = db(tmp_path, [m("X", A, 1.0)])
    (tmp_path / "cltune_conv2d.json").write_text(json.dumps({"results": [], "schema_version": "1.0.0"}))
    res = CliRunner().invoke(main, ["deploy", "--db", path, "-o", str(tmp_path)])
    assert res.exit_code == 2 and "cltune_conv2d.json: already holds T4 results" in res.output, res.output
    assert not (tmp_path / "cltune_conv2d.h").exists()


def test_deploy_from_the_database_writes_the_three_files_and_again_replaces_them(tmp_path):
    path = db(tmp_path, [m("X", A, 1.0), m("Y", C, 1.0)])
    for _ in range(2):  # the second run replaces its own outputs: they hold no measured data
        res = CliRunner().invoke(main, ["deploy", "--db", path, "-o", str(tmp_path / "o"), "--shape", P16])
        assert res.exit_code == 0, res.output
    dep = json.loads((tmp_path / "o" / "cltune_conv2d.json").read_text())
    assert dep["schema_version"] == 2 and [d["device"] for d in dep["devices"]] == ["X", "Y"]
    assert "X (1.0):" in res.output and f"{P16}: conv2d[MACROS=4,UNROLL=1] (nearest from {P8})" in res.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["cltune_conv2d.h", "cltune_conv2d.json",
                                                                  "cltune_conv2d.tsv"]


def test_db_alone_reads_cltune_home_and_an_input_is_needed(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path))
    res = CliRunner().invoke(main, ["deploy", "--db", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "cltune.sqlite: no best-config database there" in res.output, res.output
    db(tmp_path, [m("X", A, 1.0)]) and (tmp_path / "best.sqlite").rename(tmp_path / "cltune.sqlite")
    res = CliRunner().invoke(main, ["deploy", "--db", "-o", str(tmp_path / "o")])
    assert res.exit_code == 0 and f"{P8}: conv2d[MACROS=4,UNROLL=1] (exact)" in res.output, res.output
    res = CliRunner().invoke(main, ["deploy", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "give RESULTS files (cltune CSV or Kernel Tuner results JSON) or --db" in res.output
