"""A user's own kernel, through a config's [kernel] table and through cltune.tune_kernel: the three
examples tuned on every PoCL device and every ok row checked again by hand; wrong answers, hangs,
crashes and out-of-bounds writes each cost one setting; bad input is one line."""

import dataclasses
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cltune.loader import config
from cltune.core.errors import UserError
from cltune.core.space import Setting
from cltune.results import rows as results
from cltune.drive import tune

EXAMPLES = Path(__file__).parent.parent / "examples"
SMALL = {"sgemm/sgemm.toml": {"M": 64, "N": 64, "K": 64},
         "stencil/convolution.toml": {"W": 64, "H": 32, "FW": 5, "FH": 5},
         "reduction/reduce.toml": {"N": 65536}}


def small(cfg, sizes):
    problem = dataclasses.replace(cfg.problem, sizes=tuple(sizes.items()))
    return dataclasses.replace(cfg, problem=problem)


def outputs(runner, problem, setting) -> dict:
    """A setting's outputs computed again in this process, from the initial contents."""
    runner.load_problem(problem)
    prep = runner._prepare(problem, setting)
    assert prep.failed is None, prep.failed
    runner.data.before_verification(runner.queue)
    for evt in runner._enqueue(prep):
        evt.wait()
    return runner.data.outputs_now(runner.queue)


# The answers, written here again in numpy (not the examples' reference.py files)
ANSWERS = {
    "sgemm/sgemm.toml": lambda h: {"C": h["A"].astype(np.float64) @ h["B"]},
    "stencil/convolution.toml": lambda h: {"out": np.einsum("yxij,ij->yx", np.lib.stride_tricks.sliding_window_view(
        h["in"].astype(np.float64), h["filter"].shape), h["filter"])},
    "reduction/reduce.toml": lambda h: {"result": np.array([h["x"].astype(np.float64).sum()])},
}


@pytest.mark.parametrize("example", sorted(SMALL))
def test_each_example_tunes_and_every_ok_row_is_right(example, device, tmp_path):
    """Guards against a row that says ok for outputs that are not the reference's (the check done
    again here, outside the sweep, on the setting the row names)."""
    from cltune.measure.runner import Runner

    cfg = small(config.load(str(EXAMPLES / example)), SMALL[example])
    out = tmp_path / "rows.csv"
    tune.run(cfg, tune.Options(device=device.index, out=out, budget=5, rerank=0, strategy="random"))
    df = results.load(out)
    assert len(df) >= 5 and set(df["status"]) <= {"ok", "invalid"}, df[["setting", "status", "error"]]
    ok = df[df["status"] == "ok"]
    assert len(ok) >= 3
    assert (ok["gflops"] > 0).all() and (ok["gbps"] > 0).all()
    runner = Runner(device.index)
    problem = cfg.problem
    ref = problem.reference
    want = ANSWERS[example](problem.host_arrays(cfg.seed))
    for _, row in ok.head(3).iterrows():
        got = outputs(runner, problem, Setting.make(row["setting"], row["family"], json.loads(row["params"])))
        for name, arr in want.items():
            r, a = ref.tolerance(name, 1e-3, 1e-3)
            np.testing.assert_allclose(got[name], np.asarray(arr).reshape(got[name].shape), rtol=r, atol=a)


FAULTY = r"""
__kernel void add(__global const float* a, __global const float* b, __global float* c, const int n) {
    const int i = get_global_id(0);
    if (i >= n) return;
#if MODE == 1
    c[i] = a[i] - b[i];                     /* a wrong answer */
#elif MODE == 2
    c[i] = a[i] + b[i];
    if (i == n - 1) c[n + 3] = 0.0f;        /* writes past the end of c */
#elif MODE == 3
    volatile __global const float* p = a;
    while (p[0] == p[0]) { }                /* never returns */
#elif MODE == 4
    c[i + (1L << 40)] = 1.0f;               /* 4 TiB away: the worker dies */
#elif MODE == 5
    c[i] = a[i] + b[i];
    if (i == 0) c[-2] = 0.0f;               /* writes before the start of c */
#else
    c[i] = a[i] + b[i];
#endif
}
"""


def write_config(tmp_path, body: str = "", args: str | None = None, reference: str | None = None,
                 source: str = FAULTY, modes=(0, 1, 2, 5)) -> Path:
    (tmp_path / "add.cl").write_text(source)
    (tmp_path / "ref.py").write_text("def add(a, b):\n    return a + b\n")
    args = args if args is not None else textwrap.dedent("""
        [[kernel.arg]]
        name = "a"
        dtype = "float32"
        shape = ["N"]
        [[kernel.arg]]
        name = "b"
        dtype = "float32"
        shape = ["N"]
        [[kernel.arg]]
        name = "c"
        dtype = "float32"
        shape = ["N"]
        output = true
        [[kernel.arg]]
        name = "n"
        dtype = "int32"
        value = "N"
    """)
    reference = reference if reference is not None else '[kernel.reference]\npython = "ref.py:add"\n'
    text = textwrap.dedent("""
        name = "add"
        [kernel]
        source = "add.cl"
        name = "add"
        problem = { N = 1000 }
        global_size = ["(N + WG - 1) // WG * WG"]
        local_size = ["WG"]
    """) + args + reference + textwrap.dedent(f"""
        [run]
        rerank = 0
        [[space]]
        params = {{ WG = [8], MODE = {list(modes)} }}
    """) + body
    path = tmp_path / "add.toml"
    path.write_text(text)
    return path


def test_wrong_answers_and_out_of_bounds_writes_are_rows_and_the_sweep_goes_on(tmp_path):
    """Guards against an out-of-bounds write going unnoticed (the commonest bug in hand-tiled
    kernels: it corrupts a neighbour, often silently) and against one bad setting ending the sweep."""
    cfg = config.load(str(write_config(tmp_path)))
    out = tmp_path / "rows.csv"
    tune.run(cfg, tune.Options(out=out))
    df = results.load(out)
    status = {json.loads(p)["MODE"]: (s, e) for p, s, e in zip(df["params"], df["status"], df["error"])}
    assert status[0] == ("ok", "") or status[0][0] == "ok"
    assert status[1][0] == "wrong_result" and status[1][1].startswith("c: max abs error")
    assert "(first at [0]: " in status[1][1] and "np.float" not in status[1][1]  # numbers, not numpy reprs
    assert status[2] == ("out_of_bounds", "argument c: 4 guard byte(s) written after its end")
    assert status[5] == ("out_of_bounds", "argument c: 4 guard byte(s) written before its start")


def test_a_hang_and_a_crash_cost_one_setting_each(tmp_path):
    cfg = config.load(str(write_config(tmp_path, modes=(3, 4, 0))))
    out = tmp_path / "rows.csv"
    # 12 s: the ok setting, measured by a worker restarted after the hang and the crash, took 2.4-4.8 s
    # on a quiet 2-core VM and ran past 6 s under a cold-cache CI run
    tune.run(cfg, tune.Options(out=out, timeout_s=12))
    df = results.load(out)
    status = {json.loads(p)["MODE"]: s for p, s in zip(df["params"], df["status"])}
    assert status == {3: "timeout", 0: "ok", 4: "crashed"}


def test_without_a_reference_rows_say_unverified_and_still_rank(tmp_path):
    cfg = config.load(str(write_config(tmp_path, reference="", modes=(0, 1))))
    res = tune.run(cfg, tune.Options(out=tmp_path / "rows.csv"))
    assert {r["status"] for r in res.rows} == {"unverified"}
    assert res.ranking == [] or res.ranking[0]["status"] == "unverified"
    assert tune.failure(res, cfg.baseline) is None


def test_a_trusted_setting_is_the_reference(tmp_path):
    """Kernel Tuner's `answer` from a known-good setting of the same kernel."""
    cfg = config.load(str(write_config(tmp_path, reference="[kernel.reference]\nsetting = { WG = 8, MODE = 0 }\n",
                                       modes=(0, 1))))
    res = tune.run(cfg, tune.Options(out=tmp_path / "rows.csv", isolation=False))
    status = {json.loads(r["params"])["MODE"]: r["status"] for r in res.rows}
    assert status == {0: "ok", 1: "wrong_result"}


@pytest.mark.parametrize("args, message", [
    ("[[kernel.arg]]\nname = 'a'\ndtype = 'float32'\nshape = ['N']\n",
     "kernel add takes 4 argument(s), the config declares 1 (a)"),
    ("[[kernel.arg]]\nname = 'a'\ndtype = 'float32'\nshape = ['N']\n[[kernel.arg]]\nname = 'b'\ndtype = 'float32'\n"
     "shape = ['N']\n[[kernel.arg]]\nname = 'c'\ndtype = 'int32'\nshape = ['N']\noutput = true\n"
     "[[kernel.arg]]\nname = 'n'\ndtype = 'int32'\nvalue = 'N'\n",
     "argument 2 (c): the kernel's buffer holds float, the config's dtype int32"),
    ("[[kernel.arg]]\nname = 'a'\ndtype = 'float32'\nshape = ['N']\n[[kernel.arg]]\nname = 'b'\ndtype = 'float32'\n"
     "shape = ['N']\n[[kernel.arg]]\nname = 'c'\ndtype = 'float32'\nshape = ['N']\noutput = true\n"
     "[[kernel.arg]]\nname = 'n'\ndtype = 'float32'\nshape = ['N']\n",
     "argument 3 (n): the kernel takes a value int, the config a float32 buffer"),
])
def test_arguments_that_do_not_match_the_signature_are_one_line(tmp_path, args, message):
    cfg = config.load(str(write_config(tmp_path, args=args, reference="", modes=(0,))))
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tune.run(cfg, tune.Options(out=tmp_path / "rows.csv"))


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('source = "add.cl"', 'source = "missing.cl"'), "kernel.source: cannot read"),
    (lambda t: t.replace('name = "add"\nproblem', 'name = "sub"\nproblem'),
     "kernel.name: no kernel 'sub' in the source"),
    (lambda t: t.replace('shape = ["N"]\n[[kernel.arg]]\nname = "b"', 'shape = ["N / Q"]\n[[kernel.arg]]\nname = "b"'),
     "kernel.arg[0].shape[0]"),
    (lambda t: t.replace('python = "ref.py:add"', 'python = "ref.py:ad"'), "ref.py defines no function 'ad'"),
    (lambda t: t.replace('python = "ref.py:add"', 'python = "nope.py:add"'), "kernel.reference.python: cannot read"),
    (lambda t: t.replace('shape = ["N"]\n[[kernel.arg]]\nname = "b"', 'shape = ["N"]\nfill = "x.npy"\n[[kernel.arg]]\nname = "b"'),
     "kernel.arg[0].fill: x.npy holds 3 values (shape [3]), the argument 1000"),
    (lambda t: t.replace("problem = { N = 1000 }", "problem = { N = 1000, WG = 3 }"),
     "kernel.problem: WG is both a problem size and a knob"),
    (lambda t: t.replace('global_size = ["(N + WG - 1) // WG * WG"]', 'global_size = ["N * Z"]'),
     "kernel.global_size[0]: unknown name(s) Z"),
])
def test_bad_input_is_one_line_naming_the_key(tmp_path, edit, message):
    path = write_config(tmp_path)
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    path.write_text(edit(path.read_text()))
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")) as caught:
        config.load(str(path))
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("ref, message", [
    ("def add(a, b):\n    raise RuntimeError('no answer today')\n", "ref.py:add failed: RuntimeError: no answer today"),
    ("def add(a, b):\n    return a[:3]\n", "ref.py:add gave c with shape [3], expected [1000]"),
])
def test_a_failing_or_misshapen_reference_is_one_line(tmp_path, ref, message):
    cfg = config.load(str(write_config(tmp_path, modes=(0,))))
    (tmp_path / "ref.py").write_text(ref)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        tune.run(cfg, tune.Options(out=tmp_path / "rows.csv"))


TWO_D = """
    [[kernel.arg]]
    name = "a"
    dtype = "float32"
    shape = ["N / 50", "50"]
    [[kernel.arg]]
    name = "b"
    dtype = "float32"
    shape = ["N / 50", "50"]
    [[kernel.arg]]
    name = "c"
    dtype = "float32"
    shape = ["N / 50", "50"]
    output = true
    [[kernel.arg]]
    name = "n"
    dtype = "int32"
    value = "N"
"""


@pytest.mark.parametrize("ref, refused", [
    ("def add(a, b):\n    return (a + b).T\n", True),           # [50, 20] for a [20, 50] output
    ("def add(a, b):\n    return (a + b).reshape(-1)\n", False),  # flat: the same elements in order
    ("def add(a, b):\n    return (a + b)[None]\n", False),        # [1, 20, 50]: a size-1 axis aside, the same
])
def test_a_reference_of_the_right_size_laid_out_otherwise_is_one_line(tmp_path, ref, refused):
    """Guards against a transposed answer of as many elements being reshaped into the output's
    shape: every row a wrong_result (and a sweep ending 'nothing measured') for a mistake in the
    reference, not the kernel."""
    cfg = config.load(str(write_config(tmp_path, args=textwrap.dedent(TWO_D), modes=(0,))))
    (tmp_path / "ref.py").write_text(ref)
    if refused:
        with pytest.raises(UserError, match=r"ref.py:add gave c with shape \[50, 20\], expected \[20, 50\]"):
            tune.run(cfg, tune.Options(out=tmp_path / "rows.csv"))
    else:
        res = tune.run(cfg, tune.Options(out=tmp_path / "rows.csv"))
        assert [r["status"] for r in res.rows] == ["ok"]


def test_a_size_expression_that_cannot_be_evaluated_names_its_key_once(tmp_path):
    # Bug guarded: `kernel.arg[0].shape[0]: kernel.arg[0].shape[0]: 'N / Q' names Q, ...`
    path = write_config(tmp_path)
    for shape, message in (('["N / Q"]', "kernel.arg[0].shape[0]: 'N / Q' names Q, which has no value here"),
                           ('["N / 3"]', "kernel.arg[0].shape[0] = N / 3 is 333.3333333333333, not a whole number")):
        path.write_text(write_config(tmp_path).read_text().replace('shape = ["N"]', f"shape = {shape}", 1))
        with pytest.raises(UserError) as caught:
            config.load(str(path))
        assert str(caught.value).startswith(f"{path}: {message}"), caught.value
        assert str(caught.value).count("kernel.arg[0].shape[0]") == 1


def test_a_user_kernel_on_a_local_farm_of_two(tmp_path):
    from cltune.farm import sweep as farm

    cfg = config.load(str(write_config(tmp_path, modes=(0, 1, 2, 5))))
    out = tmp_path / "farm.csv"
    [res] = farm.sweep(cfg, tune.Options(out=out), "local:2", grace_s=60)  # nothing to merge
    df = results.load(out)
    status = {json.loads(p)["MODE"]: s for p, s in zip(df["params"], df["status"])}
    assert status == {0: "ok", 1: "wrong_result", 2: "out_of_bounds", 5: "out_of_bounds"}
    assert df["worker"].str.len().gt(0).all()


def test_resume_best_and_the_reading_commands_take_a_user_kernels_rows(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cltune.cli.commands import main

    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    path = write_config(tmp_path, modes=(0, 1))
    out = tmp_path / "rows.csv"
    cli = CliRunner()
    first = cli.invoke(main, ["sweep", str(path), "--out", str(out)])
    assert first.exit_code == 0, first.output
    again = cli.invoke(main, ["sweep", str(path), "--resume", str(out)])
    assert again.exit_code == 0 and "wrote" in again.output
    assert len(results.load(out)) == 2  # nothing measured twice
    for args in (["show", str(out)], ["best", str(out)], ["report", str(out), "--out", str(tmp_path / "r.html")],
                 ["plot", str(out), "--kind", "ladder", "--out", str(tmp_path / "p.png")]):
        res = cli.invoke(main, args)
        assert res.exit_code == 0, (args, res.output)
    problem = results.load(out)["problem"].iloc[0]
    assert problem.startswith("kernel_add_N1000_")


def test_tune_kernel_takes_kernel_tuners_arguments(tmp_path):
    """Kernel Tuner's vector_add, with only the import changed."""
    import cltune

    n = np.int32(1000)
    a, b = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
    c = np.zeros_like(b)
    source = FAULTY.replace("#if MODE == 1", "#if 0").replace("__kernel void add", "__kernel void vector_add")
    df, env = cltune.tune_kernel("vector_add", source, int(n), [a, b, c, n], {"block_size_x": [8, 16, 32, 2048]},
                                 answer=[None, None, a + b, None], restrictions=["block_size_x <= 1024"],
                                 out=tmp_path / "kt.csv")
    search = df[df["phase"] == "search"]
    assert sorted(search["block_size_x"]) == [8, 16, 32] and set(search["status"]) == {"ok"}
    assert (df["time"] > 0).all() and env["device_name"] and env["results_file"] == str(tmp_path / "kt.csv")
    df2, _ = cltune.tune_kernel("vector_add", source, int(n), [a, b, c, n], {"block_size_x": [8, 16, 32, 64]},
                                answer=[None, None, a + b, None], out=tmp_path / "kt.csv",
                                restrictions=lambda p: p["block_size_x"] != 16)
    assert sorted(df2[df2["phase"] == "search"]["block_size_x"]) == [8, 16, 32, 64]  # 8, 16, 32 resumed


def test_tune_kernel_refuses_bad_arguments_in_one_line():
    import cltune

    with pytest.raises(UserError, match=r"arguments\[1\] \(b\): expected a numpy array or scalar"):
        cltune.tune_kernel("vector_add", FAULTY.replace("void add", "void vector_add"), 10,
                           [np.zeros(10, np.float32), [1, 2], np.zeros(10, np.float32), np.int32(10)],
                           {"block_size_x": [8]})
    with pytest.raises(UserError, match="answer: expected a list as long as arguments"):
        cltune.tune_kernel("vector_add", FAULTY, 10, [np.zeros(10, np.float32)], {"block_size_x": [8]},
                           answer=[None, None])


def test_a_global_size_the_local_size_does_not_divide_is_refused_once_never_launched(tmp_path):
    """Guards against such a point reaching clEnqueueNDRangeKernel (CL_INVALID_WORK_GROUP_SIZE, a
    launch_error row per point) or being refused silently."""
    from cltune.drive.tune import RefusedPoints

    path = write_config(tmp_path, modes=(0,))
    path.write_text(path.read_text().replace('global_size = ["(N + WG - 1) // WG * WG"]', 'global_size = ["N"]')
                    .replace("WG = [8]", "WG = [8, 24, 40, 7]"))
    cfg = config.load(str(path))
    with pytest.warns(RefusedPoints) as caught:
        res = tune.run(cfg, tune.Options(out=tmp_path / "rows.csv"))
    assert len(caught) == 1
    assert "2 of its 4 points are refused before they are built (global size 1000 is not a multiple of " \
           "local size 24 in dimension 0" in str(caught[0].message)
    assert sorted(json.loads(r["params"])["WG"] for r in res.rows if r["phase"] == "search") == [8, 40]
