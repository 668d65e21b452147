"""Kernel Tuner's value forms through cltune.tune_kernel on PoCL (issue 42, items 2 and 3): tiny
kernels, 2-4 settings each. Each test names the bug it guards against."""

import json
import pickle

import numpy as np
import pytest

import cltune
from cltune.api import kernel_values as kv
from cltune.core.errors import UserError
from cltune.results import schema

ADD = """__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i] * SCALE + OFFSET;
}"""


def vector_add(n=100):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    return a, b, np.zeros_like(a), np.int32(n)


def search(df):
    return df[df["phase"] == "search"]


def test_fortran_order_arrays_go_as_their_memory_and_come_back_in_the_callers_layout(tmp_path):
    """Guards against Fortran-order arrays re-laid out as C order on the way in or out (every row
    wrong_result where Kernel Tuner passes the raw memory)."""
    rows, cols = 6, 5
    src = """__kernel void colmajor(__global float *b, __global const float *a, int R, int n) {
        int f = get_global_id(0);  // column-major: element f is row f % R, column f / R
        if (f < n) b[f] = a[f] + 100.0f * (f / R);
    }"""
    a = np.asfortranarray(np.arange(rows * cols, dtype=np.float32).reshape(rows, cols))
    b = np.asfortranarray(np.zeros((rows, cols), np.float32))
    want = a + 100.0 * np.arange(cols, dtype=np.float32)[None, :]
    df, _ = cltune.tune_kernel("colmajor", src, rows * cols, [b, a, np.int32(rows), np.int32(rows * cols)],
                               {"block_size_x": [8, 16]}, answer=[want, None, None, None], out=tmp_path / "f.csv")
    assert set(search(df)["status"]) == {"ok"}, df[["status", "error"]]
    with pytest.raises(UserError, match=r"arguments\[1\] \(a\): a strided view"):
        cltune.tune_kernel("colmajor", src, rows * cols, [b, np.zeros((rows, 2 * cols), np.float32)[:, ::2],
                                                          np.int32(rows), np.int32(rows * cols)], {"block_size_x": [8]})


def test_64_and_16_bit_integer_and_double_arguments(tmp_path):
    """Guards against int64/uint64/int16/uint16 (and float64 on a device with fp64) refused as
    dtypes, or 64-bit values cut to 32 bits on the way to the kernel."""
    src = """__kernel void ints(__global long *a, __global ulong *b, __global short *c, __global ushort *d,
                               __global double *e, long s, ulong u, short h, ushort k, int n) {
        int i = get_global_id(0);
        if (i < n) { a[i] += s; b[i] += u; c[i] += h; d[i] += k; e[i] *= 0.5; }
    }"""
    n = 20
    a = np.arange(n, dtype=np.int64) - 2**40
    b = np.arange(n, dtype=np.uint64) + 2**63
    c, d = np.arange(n, dtype=np.int16) - 300, np.arange(n, dtype=np.uint16) + 60000
    e = np.linspace(0, 1, n)
    s, u, h, k = np.int64(-2**41), np.uint64(2**40), np.int16(-7), np.uint16(5)
    answer = [a + s, b + u, c + h, d + k, e * 0.5] + [None] * 5
    df, _ = cltune.tune_kernel("ints", src, n, [a, b, c, d, e, s, u, h, k, np.int32(n)], {"block_size_x": [4, 8]},
                               answer=answer, out=tmp_path / "i.csv")
    assert set(search(df)["status"]) == {"ok"}, df[["status", "error"]]


def test_tune_params_of_any_sequence_and_numpy_scalars_become_python_values(tmp_path):
    """Guards against np.arange/range/tuple values refused ("expected ... value lists"), and numpy
    scalars reaching the CSV (np.int64 is no JSON), the -D options (np.float32(0.5)) or a
    restriction function."""
    a, b, c, n = vector_add()
    seen = []

    def plain(p):
        return all(type(v) in (int, float) for v in p.values())

    def only_plain(p):
        seen.append(dict(p))
        return plain(p)

    df, _ = cltune.tune_kernel("vector_add", ADD, np.int64(100), [c, a, b, n],
                               {"block_size_x": np.arange(16, 48, 16), "SCALE": range(2, 3),
                                "OFFSET": (np.float32(0.5),)},
                               answer=[a + 2 * b + 0.5, None, None, None], restrictions=[only_plain],
                               out=tmp_path / "s.csv")
    rows = search(df)
    assert sorted(rows["block_size_x"]) == [16, 32] and set(rows["status"]) == {"ok"}, df[["status", "error"]]
    assert seen and all(plain(p) for p in seen)
    assert json.loads(rows["params"].iloc[0])["OFFSET"] == 0.5
    assert "-DOFFSET=0.5" in rows["build_options"].iloc[0].split()
    with pytest.raises(UserError, match=r"tune_params\['SCALE'\]: expected a list, tuple, range or numpy array"):
        cltune.tune_kernel("vector_add", ADD, 100, [c, a, b, n], {"block_size_x": [16], "SCALE": "12"})


READ_ONLY = """__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
#if read_only
    if (i < n) c[i] = a[i] + b[i];
#else
    if (i < n) c[i] = a[i] - b[i];
#endif
}"""


def test_a_knob_named_like_an_opencl_header_word_builds_alone_and_batched(tmp_path):
    """Guards against `-Dread_only=0` on the command line (PoCL's header uses the word): a
    build_error when the setting is built alone, though it builds batched (#define in the source)."""
    from cltune.measure import device as dev
    from cltune.measure.build import Builder

    device, _ = dev.select()
    ctx, _ = dev.open_queue(device)
    options = [["-cl-std=CL1.2", f"-Dread_only={v}"] for v in (0, 1)]
    alone = Builder(ctx, batch=False)
    for o in options:
        assert alone.build(READ_ONLY, o).batch == 1
    together = Builder(ctx, batch=True)
    assert together.build(READ_ONLY, options[0], [(READ_ONLY, options[1])]).batch == 2
    a, b, c, n = vector_add()
    df, _ = cltune.tune_kernel("vector_add", READ_ONLY, 100, [c, a, b, n], {"block_size_x": [32], "read_only": [0]},
                               answer=[a - b, None, None, None], out=tmp_path / "r.csv")
    assert list(search(df)["status"]) == ["ok"], df[["status", "error"]]


def test_iterations_times_each_setting_exactly_that_many_times(tmp_path):
    """Guards against `iterations` ignored (adaptive repeats stop at 2, Kernel Tuner's `time` is the
    mean of `iterations` launches) or its launches' times lost (only the minimum kept)."""
    a, b, c, n = vector_add()
    df, _ = cltune.tune_kernel("vector_add", ADD, 100, [c, a, b, n], {"block_size_x": [16, 32], "SCALE": [1],
                                                                      "OFFSET": [0]},
                               answer=[a + b, None, None, None], iterations=3, out=tmp_path / "it.csv")
    rows = search(df)
    assert list(rows["n"]) == [3, 3]
    assert all(len(schema.samples(r)) == 3 for _, r in rows.iterrows())
    with pytest.raises(UserError, match="iterations: expected an int >= 1"):
        cltune.tune_kernel("vector_add", ADD, 100, [c, a, b, n], {"block_size_x": [16]}, iterations=0)


PAIRS = """__kernel void pairs(__global float *c, __global const float *a, int n) {
    int i = 2 * get_global_id(0);  // two elements a work-item
    if (i < n) c[i] = 2.0f * a[i];
    if (i + 1 < n) c[i + 1] = 2.0f * a[i + 1];
}"""


def test_problem_size_and_grid_divisors_as_expressions_and_functions(tmp_path):
    """Guards against a string problem size (KT's reduction passes "num_blocks") or a function of
    the knobs refused, a bare-string grid divisor split into letters, a function divisor refused,
    and grid divisors passed positionally (Kernel Tuner's order) taken for other arguments."""
    n = 64
    a = np.arange(n, dtype=np.float32)
    args = [np.zeros(n, np.float32), a, np.int32(n)]
    knobs = {"block_size_x": [8, 16], "num_blocks": [4]}
    answer = [2 * a, None, None]
    # 64 / (2 x block size) blocks of 8 or 16 work-items, two elements each: all 64 covered
    df, _ = cltune.tune_kernel("pairs", PAIRS, "num_blocks * 16", args, knobs, "block_size_x * 2", None, None,
                               None, answer, out=tmp_path / "a.csv")
    assert set(search(df)["status"]) == {"ok"}, df[["status", "error"]]
    df, _ = cltune.tune_kernel("pairs", PAIRS, lambda p: (np.int64(n),), args, knobs,
                               grid_div_x=lambda p: 2 * p["block_size_x"], answer=answer, out=tmp_path / "b.csv")
    assert set(search(df)["status"]) == {"ok"}, df[["status", "error"]]
    knobs["num_blocks"] = [2]  # num_blocks x block size work-items: 16 (32 elements: wrong) or 32
    df, _ = cltune.tune_kernel("pairs", PAIRS, "num_blocks", args, knobs, grid_div_x=[], answer=answer,
                               out=tmp_path / "c.csv")
    assert dict(zip(search(df)["block_size_x"], search(df)["status"])) == {8: "wrong_result", 16: "ok"}


def test_kernel_tuners_grid_meanings_without_a_device():
    """Guards against the default divisor, [] and a missing block knob meaning other than in
    Kernel Tuner's util.get_grid_dimensions (ceil(size / product of divisors) x block size)."""
    from cltune.core.kernel_problem import evaluate

    def glob(size, divs, knobs, p):
        _, g, _, derived, _ = kv.geometry(size, kv.knob_values(knobs), None, divs)
        env = {"problem_size_x": size if isinstance(size, int) else 0, **p,
               **{k: f(p) for k, f in derived}}
        return evaluate(g[0], env, "x")

    assert glob(100, (None, None, None), {"block_size_x": [32]}, {"block_size_x": 32}) == 128
    assert glob(100, ([], None, None), {"block_size_x": [32]}, {"block_size_x": 32}) == 3200
    assert glob(100, (None, None, None), {"t": [1]}, {"t": 1}) == 25600  # block 256, divisor 1
    assert glob(100, ("block_size_x * t", None, None), {"block_size_x": [8], "t": [4]},
                {"block_size_x": 8, "t": 4}) == 4 * 8  # ceil(100 / 32) blocks of 8
    assert glob(100, ([lambda p: 3, 2], None, None), {"block_size_x": [4]}, {"block_size_x": 4}) == 17 * 4
    with pytest.raises(UserError, match="grid_div_x: expected a list"):
        kv.geometry(100, {"block_size_x": (8,)}, None, (2.5, None, None))


def test_a_generator_source_is_built_and_hashed_per_setting(tmp_path):
    """Guards against a code generator refused as kernel_source, called once (every setting built
    from the first one's source) or its rows sharing one source_hash; a generator that fails for
    a setting is that setting's build_error row, not a crash."""
    def generator(params):
        if params["block_size_x"] == 64:
            raise ValueError("no 64 here")
        return ("__kernel void vector_add(__global float *c, __global const float *a, __global const float *b, "
                "int n) { int i = get_local_id(0) + get_group_id(0) * %d; if (i < n) c[i] = a[i] + b[i]; }"
                % params["block_size_x"])

    a, b, c, n = vector_add()
    df, _ = cltune.tune_kernel("vector_add", generator, 100, [c, a, b, n], {"block_size_x": [16, 32, 64]},
                               answer=[a + b, None, None, None], out=tmp_path / "g.csv")
    rows = search(df).set_index("block_size_x")
    assert rows.loc[16, "status"] == rows.loc[32, "status"] == "ok", rows[["status", "error"]]
    assert rows.loc[16, "source_hash"] != rows.loc[32, "source_hash"]
    assert rows.loc[64, "status"] == "build_error" and "no 64 here" in rows.loc[64, "error"]


def test_a_list_of_files_is_the_kernel_and_the_files_it_includes(tmp_path):
    """Guards against every file of the list concatenated (Kernel Tuner compiles the first, the
    others only where it includes them), a file name taken for source text, or a relative
    #include not found because PoCL compiles a copy of the source in its cache folder."""
    (tmp_path / "helper.h").write_text("#define TWICE(x) (2.0f * (x))\n")
    (tmp_path / "unused.cl").write_text("this is not OpenCL C\n")
    (tmp_path / "main.cl").write_text('#include "helper.h"\n' + PAIRS.replace("2.0f * a[i]", "TWICE(a[i])"))
    a = np.arange(16, dtype=np.float32)
    source, gen = kv.source_forms([str(tmp_path / "main.cl"), str(tmp_path / "helper.h"),
                                   str(tmp_path / "unused.cl")], {})
    assert gen is None and "#define TWICE" in source and "not OpenCL" not in source
    # alone, a file beside it is included as the compiler would (PoCL builds a copy elsewhere)
    assert "#define TWICE" in kv.source_forms(str(tmp_path / "main.cl"), {})[0]
    df, _ = cltune.tune_kernel("pairs", [tmp_path / "main.cl", tmp_path / "helper.h"], 16,
                               [np.zeros(16, np.float32), a, np.int32(16)], {"block_size_x": [4]},
                               grid_div_x=["block_size_x", 2], answer=[2 * a, None, None], out=tmp_path / "l.csv")
    assert list(search(df)["status"]) == ["ok"], df[["status", "error"]]


def test_user_functions_reach_the_worker_by_value():
    """Guards against a lambda or a function defined inside another (KT's reduction defines its
    verify inside tune()) failing to pickle on its way to the worker process."""
    from cltune.core.user_functions import shippable

    scale = 3
    fn = pickle.loads(pickle.dumps(shippable(lambda p: p["x"] * scale, "problem_size")))
    assert fn({"x": 2}) == 6
    with pytest.raises(UserError, match="kernel_source: expected a function"):
        shippable("text", "kernel_source")


def test_kernel_tuners_implicit_macros_beside_the_knobs():
    """Guards against a kernel that uses Kernel Tuner's implicit macros (an untuned block_size_y,
    grid_size_x, kernel_tuner) failing to build here: KT defines them for every setting."""
    from cltune.api.kernel import kernel_config
    from cltune.workloads.kernel import register_problem

    a, b, c, n = vector_add()
    cfg = kernel_config("vector_add", ADD, (100, 3), [c, a, b, n], {"block_size_x": [16], "SCALE": [1],
                                                                     "OFFSET": [0]})
    options = register_problem(cfg.problem).options(cfg.problem, {"block_size_x": 16, "SCALE": 1, "OFFSET": 0})
    for macro in ("-Dblock_size_x=16", "-Dblock_size_y=1", "-Dblock_size_z=1", "-Dgrid_size_x=7",
                  "-Dgrid_size_y=3", "-Dgrid_size_z=1", "-Dkernel_tuner=1", "-DSCALE=1"):
        assert macro in options


def test_float64_on_a_device_without_fp64_is_one_line_naming_it():
    """Guards against a float64 argument reaching a device without cl_khr_fp64 (a build error per
    setting, or garbage) instead of one line before any row."""
    from types import SimpleNamespace

    from cltune.api.kernel import kernel_config
    from cltune.measure.kernel_data import KernelData

    e = np.linspace(0, 1, 8)
    cfg = kernel_config("half", "__kernel void half(__global double *e) { e[get_global_id(0)] *= 0.5; }", 8, [e],
                        {"block_size_x": [8]})
    mali = SimpleNamespace(name="Mali-T860", extensions="cl_khr_fp16 cl_khr_int64_base_atomics")
    with pytest.raises(UserError, match="float64 arguments need a device with cl_khr_fp64; Mali-T860 has none"):
        KernelData(None, cfg.problem, 0, device=mali)


def test_defines_may_be_functions_of_the_knobs():
    """Guards against Kernel Tuner's `defines` with a function value refused (it is called per
    setting), and one that fails for a setting crashing the run instead of refusing that setting."""
    from cltune.api.kernel import kernel_config
    from cltune.workloads.kernel import register_problem

    a, b, c, n = vector_add()
    cfg = kernel_config("vector_add", ADD, 100, [c, a, b, n], {"block_size_x": [16, 0]},
                        defines={"SCALE": lambda p: 64 // p["block_size_x"], "OFFSET": np.float32(0.5)})
    family = register_problem(cfg.problem)
    assert {"-DSCALE=4", "-DOFFSET=0.5"} <= set(family.options(cfg.problem, {"block_size_x": 16}))
    assert "defines['SCALE'] raised ZeroDivisionError" in family.reject_reason(cfg.problem, {"block_size_x": 0}, None)


def test_a_problems_key_follows_what_its_functions_close_over():
    """Guards against two generators of the same code over different values sharing a problem key
    (the worker keeps problems by key: the second call would run the first one's source)."""
    from cltune.api.kernel import kernel_config

    def make(width):  # the first setting's source the same for every width
        return lambda params: ADD.replace("OFFSET", str(width if params["block_size_x"] == 32 else 0))

    a, b, c, n = vector_add()
    keys = {kernel_config("vector_add", make(w), 100, [c, a, b, n], {"block_size_x": [16, 32], "SCALE": [1]})
            .problem.key for w in (1, 2)}
    assert len(keys) == 2
