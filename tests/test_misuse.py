"""Misuses a careless user makes (issue 40): each is refused in one line naming the argument, key or
file, or recorded with a status that says what happened; nothing measured is lost."""

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from cltune.loader import config
from cltune.core.errors import UserError
from cltune.core.records import Status
from cltune.measure.backend import FIRST_POINT_TIMEOUT_S
from cltune.results import rows as results
from cltune.drive import tune

from .fakes import FakeBackend
from .test_tuning import make_config
from .test_user_kernels import FAULTY, write_config


@dataclass
class LimitBackend(FakeBackend):
    """A fake whose points take `scale` times longer, which notes the timeout each one was given."""

    scale: float = 1.0
    limits: list = field(default_factory=list)
    walls: list = field(default_factory=list)

    def measure(self, problem, setting, timing, upcoming=()):
        self.limits.append(self.timeout_s)
        m = super().measure(problem, setting, timing, upcoming)
        m = replace(m, wall_ms=m.wall_ms * self.scale) if m.wall_ms else m
        self.walls.append(m.wall_ms)
        return m


def test_a_space_only_sweep_waits_the_first_point_limit_then_ten_times_the_first_timed_point(tmp_path):
    # The bug: with no [[setting]] there is no baseline, and every point waited 600 s.
    cfg = make_config(budget=4, settings=False, rerank=0)
    opts = tune.Options(isolation=False, strategy="exhaustive", out=tmp_path / "r.csv")
    dry = FakeBackend()
    tune.run(cfg, replace(opts, out=tmp_path / "dry.csv"), backend=dry)
    backend = LimitBackend(scale=1e4, fail={dry.measured[0].params_json: Status.CRASHED})
    res = tune.run(cfg, opts, backend=backend)
    assert [r["status"] for r in res.rows] == ["crashed", "ok", "ok", "ok"]
    # the failed first point sets nothing; the first timed one sets 10x its measurement
    want = tune.default_timeout(backend.walls[1])
    assert want == 10 * backend.walls[1] / 1e3 > FIRST_POINT_TIMEOUT_S
    assert backend.limits == [FIRST_POINT_TIMEOUT_S, FIRST_POINT_TIMEOUT_S, want, want]


def test_the_limit_is_at_least_a_minute_and_a_given_timeout_overrides_it(tmp_path):
    cfg = make_config(budget=3, settings=False, rerank=0)
    quick = LimitBackend()
    tune.run(cfg, tune.Options(isolation=False, out=tmp_path / "a.csv"), backend=quick)
    assert quick.limits == [FIRST_POINT_TIMEOUT_S, 60.0, 60.0]
    given = LimitBackend(scale=1e4)
    tune.run(cfg, tune.Options(isolation=False, out=tmp_path / "b.csv", timeout_s=7), backend=given)
    assert given.limits == [7, 7, 7]


def test_a_failed_baseline_leaves_the_limit_to_the_first_timed_point(tmp_path):
    # Before: a baseline that failed set the 600 s default for the whole sweep.
    cfg = make_config(budget=2, rerank=0)
    normal = cfg.settings[0]
    backend = LimitBackend(scale=1e4, fail={normal.params_json: Status.BUILD_ERROR})
    tune.run(cfg, tune.Options(isolation=False, out=tmp_path / "r.csv"), backend=backend)
    want = tune.default_timeout(backend.walls[1])
    assert backend.limits == [FIRST_POINT_TIMEOUT_S, FIRST_POINT_TIMEOUT_S, want]


def test_a_resumed_space_only_sweep_takes_its_limit_from_the_file(tmp_path):
    cfg = make_config(budget=2, settings=False, rerank=0)
    path = tmp_path / "r.csv"
    first = tune.run(cfg, tune.Options(isolation=False, out=path), backend=LimitBackend(scale=1e4))
    backend = LimitBackend()
    tune.run(make_config(budget=4, settings=False, rerank=0), tune.Options(isolation=False, resume=path),
             backend=backend)
    assert backend.limits == [tune.default_timeout(first.rows[0]["wall_ms"])] * 2


@pytest.mark.parametrize("body, how", [
    ("import sys\n\ndef add(a, b):\n    sys.exit(3)\n", "it called sys.exit(3)"),
    ("import os\n\ndef add(a, b):\n    os._exit(3)\n", "worker exited with status 3"),
])
def test_a_reference_that_exits_is_one_line_before_any_row(tmp_path, device, body, how):
    # The bug: every setting was a `crashed` row, blamed on the kernels (the worker that computed the
    # reference exited, and so did each fresh one).
    cfg = config.load(str(write_config(tmp_path, modes=(0, 1))))
    (tmp_path / "ref.py").write_text(body)
    out = tmp_path / "rows.csv"
    with pytest.raises(UserError) as caught:
        tune.run(cfg, tune.Options(out=out, device=str(device.index)))
    message = str(caught.value)
    assert "ref.py:add failed" in message and how in message and "\n" not in message
    assert not out.exists() or results.load(out).empty


def test_a_global_size_over_size_t_is_refused_before_building(tmp_path):
    # The bug: an `error` row `RuntimeError: std::bad_cast` per point (pyopencl's size_t conversion).
    path = write_config(tmp_path, modes=(0,))
    path.write_text(path.read_text().replace('global_size = ["(N + WG - 1) // WG * WG"]',
                                             'global_size = ["N * 18446744073709551616"]'))
    out = tmp_path / "rows.csv"
    with pytest.raises(UserError) as caught:
        tune.run(config.load(str(path)), tune.Options(out=out))
    message = str(caught.value)
    assert "global_size[0] = 18446744073709551616000 does not fit in size_t" in message, message
    assert str(path) in message and "\n" not in message and not out.exists()


def test_tune_kernel_refuses_a_problem_size_over_size_t():
    import cltune

    with pytest.raises(UserError, match=r"^problem_size: expected .*below 2\^64.* got 18446744073709551616$"):
        cltune.tune_kernel("vector_add", VECTOR_ADD, 2**64, vector_args(10), {"block_size_x": [8]})


VECTOR_ADD = """__kernel void vector_add(__global const float* a, __global const float* b, __global float* c,
                         const int n) {
    const int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
"""


def vector_args(n: int) -> list:
    a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    return [a, b, np.zeros(n, np.float32), np.int32(n)]


def test_tune_kernel_with_a_name_the_source_does_not_define_is_one_line(tmp_path):
    # The bug: a launch_error row (INVALID_KERNEL_NAME) per setting, where a config says this.
    import cltune

    with pytest.raises(UserError, match=r"^kernel_name: no kernel 'vector_ad' in the source "
                                        r"\(kernels found: vector_add\)$"):
        cltune.tune_kernel("vector_ad", VECTOR_ADD, 10, vector_args(10), {"block_size_x": [8]},
                           out=tmp_path / "r.csv")
    assert not (tmp_path / "r.csv").exists()
    with pytest.raises(UserError, match=r"^kernel_name: expected the kernel function's name, got 3$"):
        cltune.tune_kernel(3, VECTOR_ADD, 10, vector_args(10), {"block_size_x": [8]})


@pytest.mark.parametrize("budget", [-1, 0, 2.5, True])
def test_a_budget_below_one_is_refused_in_one_line(tmp_path, budget):
    # The bug: tune_kernel(..., budget=-1) returned an empty frame without a word.
    import cltune

    want = rf"^budget: expected an int >= 1 \(settings per space\), got {budget!r}$"
    with pytest.raises(UserError, match=want):
        cltune.tune_kernel("vector_add", VECTOR_ADD, 10, vector_args(10), {"block_size_x": [8]}, budget=budget,
                           out=tmp_path / "r.csv")
    assert not (tmp_path / "r.csv").exists()
    with pytest.raises(UserError, match=want):
        tune.run(make_config(), tune.Options(isolation=False, budget=budget, out=tmp_path / "r.csv"),
                 backend=FakeBackend())


def local_config(tmp_path, wgs) -> Path:
    """The add kernel with a __local argument of WG * 4 - 100 bytes: negative below WG = 25."""
    src = FAULTY.replace("const int n)", "const int n, __local float* scratch)")
    path = write_config(tmp_path, source=src, modes=(0,))
    path.write_text(path.read_text().replace(
        "[kernel.reference]", '[[kernel.arg]]\nname = "scratch"\nlocal = "WG * 4 - 100"\n[kernel.reference]')
        .replace("WG = [8]", f"WG = {list(wgs)}"))
    return path


def test_a_negative_local_size_is_refused_before_building_never_a_row(tmp_path):
    # The bug: an `error` row (ExprError from the launch plan) that a resume kept as measured.
    from cltune.drive.tune import RefusedPoints

    cfg = config.load(str(local_config(tmp_path, [8, 32])))
    with pytest.warns(RefusedPoints, match=r"kernel.arg\[4\].local \(scratch\) = WG \* 4 - 100 is -68, "
                                           r"not a whole number of bytes >= 0"):
        res = tune.run(cfg, tune.Options(out=tmp_path / "r.csv"))
    assert [(json.loads(r["params"])["WG"], r["status"]) for r in res.rows] == [(32, "ok")]
    path = local_config(tmp_path, [8])
    with pytest.raises(UserError, match=r"none of its 1 points can run .*kernel.arg\[4\].local \(scratch\)"):
        tune.run(config.load(str(path)), tune.Options(out=tmp_path / "none.csv"))
    assert not (tmp_path / "none.csv").exists()


KT = {"tune_params_keys": ["a", "b"], "tune_params": {"a": [1, 2], "b": [3, 4]},
      "cache": {"1,3": {"a": 1, "b": 3, "time": 1.0}, "2,4": {"a": 2, "b": 4, "time": 2.0}}}
T4_ROW = {"configuration": {"a": 1}, "times": {"runtimes": [1.0]}}


@pytest.mark.parametrize("name, data, key, expected", [
    ("list_cache.json", {**KT, "cache": [1, 2]}, "cache", "expected an object"),
    ("string_params.json", {**KT, "tune_params": "ab"}, "tune_params", "expected an object"),
    ("scalar_values.json", {**KT, "tune_params": {"a": 3, "b": [3, 4]}}, "tune_params", "expected an object of"),
    ("short_key.json", {**KT, "cache": {"1": {"time": 1.0}}}, "cache key '1'", "expected 2 values (a, b)"),
    ("t4_lists.json", {"results": [T4_ROW, {**T4_ROW, "configuration": {"a": [1, 2]}}]},
     "results[1].configuration.a", "expected a number, a string or a boolean, got a list"),
    ("t4_times.json", {"results": [{**T4_ROW, "times": [1.0]}]}, "results[0].times", "expected an object"),
])
def test_a_malformed_replay_file_is_one_line_naming_the_file_and_key(tmp_path, name, data, key, expected):
    # The bug: raw AttributeError / TypeError / KeyError text, naming no file.
    from click.testing import CliRunner

    from cltune.cli.commands import main
    from cltune.results import recorded

    path = tmp_path / name
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as caught:
        recorded.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {key}: ") and expected in message and "\n" not in message, message
    res = CliRunner().invoke(main, ["replay", str(path), "--seeds", "1", "--budget", "2"])
    assert res.exit_code == 2 and res.output.strip() == f"Error: {message}", res.output


def test_a_resume_whose_new_settings_all_fail_is_judged_on_the_whole_file(tmp_path):
    # The bug: `nothing measured` (exit 1) because the remaining settings all timed out, though
    # the file held ok rows; the best of the file is what the sweep found.
    path = tmp_path / "r.csv"
    opts = tune.Options(isolation=False, strategy="exhaustive")
    first = tune.run(make_config(budget=2, settings=False), replace(opts, out=path), backend=FakeBackend())
    held = {r["params"] for r in first.rows if r["phase"] == "search"}
    cfg = make_config(budget=4, settings=False)
    dry = FakeBackend()
    tune.run(cfg, replace(opts, out=tmp_path / "dry.csv"), backend=dry)
    hang = {s.params_json: Status.TIMEOUT for s in dry.measured if s.params_json not in held}
    res = tune.run(cfg, replace(opts, resume=path), backend=FakeBackend(fail=hang))
    assert [r["status"] for r in res.rows if r["phase"] == "search"] == ["timeout", "timeout"]
    assert tune.failure(res, cfg.baseline) is None
    assert res.ranking and {r["params"] for r in res.ranking} <= held
    # a file whose every row failed still says so, counting them all
    bad = tmp_path / "bad.csv"
    tune.run(make_config(budget=1, settings=False), replace(opts, out=bad), backend=FakeBackend(fail=hang | {
        s.params_json: Status.CRASHED for s in dry.measured}))
    again = tune.run(make_config(budget=2, settings=False), replace(opts, resume=bad), backend=FakeBackend(fail=hang | {
        s.params_json: Status.CRASHED for s in dry.measured}))
    assert tune.failure(again, None).startswith("all 2 settings failed")


HELPER = """// helper.h
#if MODE == 1
#define LOAD(p, i) (p[i] + undefined_name)
#else
#define LOAD(p, i) (p[i])
#endif
inline float twice(float x) { return 2.0f * x; }
#if MODE == 2
float broken(void) { return no_such_thing; }
#endif
"""


def test_a_build_error_names_the_users_file_and_line_not_the_compilers_copy(tmp_path):
    # The bug: `…/pocl/kcache/tempfile_wAXI8p.cl:3:37: ...`, a file the user never wrote.
    source = FAULTY.replace("__kernel", '#include "helper.h"\n__kernel', 1).replace(
        "#else\n    c[i] = a[i] + b[i];", "#else\n    c[i] = LOAD(a, i) + b[i];")
    (tmp_path / "helper.h").write_text(HELPER)
    cfg = config.load(str(write_config(tmp_path, source=source, modes=(0, 2))))
    res = tune.run(cfg, tune.Options(out=tmp_path / "r.csv"))
    errors = {json.loads(r["params"])["MODE"]: (r["status"], r["error"]) for r in res.rows if r["phase"] == "search"}
    assert errors[0][0] == "ok"
    status, error = errors[2]
    assert status == "build_error" and "tempfile" not in error, error
    assert f"{tmp_path}/helper.h:9:29: " in error and "no_such_thing" in error, error


def test_tune_kernel_build_errors_name_kernel_source(tmp_path):
    import cltune

    source = VECTOR_ADD.replace("if (i < n)", "if (i < n + block_size_x - 8 + oops)")
    df, _ = cltune.tune_kernel("vector_add", source, 10, vector_args(10), {"block_size_x": [8]},
                               out=tmp_path / "r.csv")
    [error] = df[df["phase"] == "search"]["error"]
    assert "<kernel_source>:4:" in error and "oops" in error and "tempfile" not in error, error


def test_a_built_in_familys_build_error_names_its_kernels_file():
    from cltune.core.sources import named
    from cltune.workloads import get_family
    from cltune.workloads.base import read_kernel

    family = get_family("conv2d")
    epilogue = read_kernel("epilogue.cl").count("\n") + 1
    log = "error: /root/.cache/pocl/kcache/tempfile_wAXI8p.cl:{}:37: use of undeclared identifier"
    assert named(log.format(epilogue + 3), family.source_lines()) == \
        "error: kernels/conv2d.cl:3:37: use of undeclared identifier"
    assert named(log.format(2), family.source_lines()).startswith("error: kernels/epilogue.cl:2:37: ")
    assert named("<source>:5:1: error: x", family.source_lines()) == "kernels/epilogue.cl:5:1: error: x"
    # A macro's spelling note named the temporary file too, and ate the text before it:
    # `<kernel_source>:20:20 <kernel_source>:8:28>: invalid value '0'` (a #pragma unroll of a knob at 0).
    note = "error: /root/.cache/pocl/kcache/tempfile_Sb.cl:{}:18 <Spelling=/root/.cache/pocl/kcache/tempfile_Sb.cl:2:28>: x"
    assert named(note.format(epilogue + 3), family.source_lines()) == "error: kernels/conv2d.cl:3:18: x"
    beyond = family.source().count("\n") + 5  # text a subclass appends is not conv2d.cl's
    assert named(log.format(beyond), family.source_lines()) == log.format(beyond)


@pytest.mark.parametrize("replace_it", [False, True])
def test_a_best_config_database_deleted_or_replaced_during_a_net_run_is_said(tmp_path, replace_it):
    # The bug: deleted while `cltune net` ran, the database came back holding this run's entries
    # only, exit 0 and no warning: the entries it held were lost without a word.
    from cltune.net import run as netrun
    from cltune.results import store

    from .test_edges_misc import ENTRY
    from .test_net_schedule import NetFake, small_net

    db = tmp_path / "best.sqlite"
    store.put_best([ENTRY], db)
    said = []

    def echo(line):
        said.append(line)
        if line.startswith("[1]"):  # the first measurement: the database goes meanwhile
            db.unlink()
            if replace_it:
                store.put_best([{**ENTRY, "problem": "key-b"}], db)

    netrun.run(small_net(), netrun.NetOptions(out=tmp_path / "run", budget=8, rounds=0, best_db=db), echo=echo,
               backend=NetFake())
    assert said[-1].startswith(f"warning: the best-config database {db} was deleted or replaced while the run "
                               "went on: 1 of the 1 entries it held are gone; the run's "), said[-1]
    assert ENTRY["problem"] not in {e["problem"] for e in store.all_best(db)} and len(store.all_best(db)) > 1


def test_a_net_run_whose_database_stays_says_only_what_it_recorded(tmp_path):
    from cltune.net import run as netrun
    from cltune.results import store

    from .test_edges_misc import ENTRY
    from .test_net_schedule import NetFake, small_net

    db = tmp_path / "best.sqlite"
    store.put_best([ENTRY], db)
    said = []
    netrun.run(small_net(), netrun.NetOptions(out=tmp_path / "run", budget=8, rounds=0, best_db=db),
               echo=said.append, backend=NetFake())
    assert said[-1].startswith(f"best-config database {db}: ") and said[-1].endswith(" tasks recorded"), said[-1]


def two_rerank_blocks(tmp_path) -> Path:
    """A finished sweep whose re-ranking was cut (its last row lost), resumed: the re-ranking measured
    again, twice as slow, after the cut one."""
    cfg = make_config(budget=4, settings=False)
    path = tmp_path / "r.csv"
    opts = tune.Options(isolation=False, strategy="exhaustive")
    tune.run(cfg, replace(opts, out=path), backend=FakeBackend())
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # a crash mid-re-ranking
    tune.run(cfg, replace(opts, resume=path), backend=FakeBackend(jitter=(2.0,)))
    return path


def test_best_reads_only_the_last_re_ranking_of_a_file(tmp_path):
    # The bug: `cltune best` ranked the cut re-ranking's rows with the one that replaced it.
    from cltune.results import best, schema

    path = two_rerank_blocks(tmp_path)
    df = results.load(path)
    rerank = df[df["phase"] == "rerank"]
    assert len(rerank) == 2 + 3  # the cut block (2 of 3 rows), then the whole one
    _, [entry] = best.update([path], tmp_path / "b.sqlite")
    assert entry["run_ms"] == rerank[schema.TIME].iloc[2:].min() == 2 * rerank[schema.TIME].iloc[:2].min()


def test_show_says_which_rows_are_a_superseded_re_ranking(tmp_path):
    from click.testing import CliRunner

    from cltune.cli.commands import main

    path = two_rerank_blocks(tmp_path)
    res = CliRunner().invoke(main, ["show", str(path)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].split()[:3] == ["setting", "status", "phase"]
    phases = [line.split()[2] for line in lines[1:]]
    assert phases == ["search"] * 4 + ["rerank-superseded"] * 2 + ["rerank"] * 3, res.output


def test_a_resumed_best_alone_is_the_ranking_when_the_new_settings_fail(tmp_path):
    path = tmp_path / "r.csv"
    opts = tune.Options(isolation=False, strategy="exhaustive")
    first = tune.run(make_config(budget=2, settings=False, rerank=1), replace(opts, out=path), backend=FakeBackend())
    held = {r["params"] for r in first.rows}
    cfg = make_config(budget=4, settings=False, rerank=1)
    dry = FakeBackend()
    tune.run(cfg, replace(opts, out=tmp_path / "dry.csv"), backend=dry)
    hang = {s.params_json: Status.TIMEOUT for s in dry.measured if s.params_json not in held}
    res = tune.run(cfg, replace(opts, resume=path), backend=FakeBackend(fail=hang))
    assert [r["setting"] for r in res.ranking] == [r["setting"] for r in first.ranking] != []
