"""Settings measured one after another are built together in one program (build.py's batches):
every family's template batches without falling back, each copy computes its own setting, and a
setting that fails to build fails alone."""

import pyopencl as cl
import pytest

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.measure.build import Builder, batch_source, batchable, top_level_names
from cltune.workloads import builtin_settings
from tests.conftest import measure_each

QUICK = Timing(warmup=0, repeat=1)
DENSE = Problem.from_shapes((1, 8, 10, 10), (8, 8, 3, 3), padding=1)
DEPTHWISE = Problem.from_shapes((1, 8, 10, 10), (8, 1, 3, 3), padding=1, groups=8)
FAMILIES = {"conv2d": DENSE, "direct": DENSE, "im2col_gemm": DENSE, "implicit_gemm": DENSE,
            "winograd": DENSE, "depthwise": DEPTHWISE}


def test_top_level_names_cover_each_kind_of_declaration():
    source = """
#define INLINE inline
typedef union { float4 v; float s[4]; } lanes_t;
typedef CAT(float, VW) floatv;
typedef union {
    float8 v;
} wide_t;  // a comment (x)
__constant float table[3] = {1, 2, 3};
INLINE void accumulate(__global const float *p,
                       float4 *acc) { }
inline __global const float *b_ptr(__global const float *img) { return img; }
__attribute__((always_inline)) inline void store_pixels(__global float *out) { }
__kernel __attribute__((reqd_work_group_size(LX, LY, 1))) void gemm(__global float *a) {
    helper(a);
}
/* void not_a_declaration(
   spanning lines) */
"""
    assert top_level_names(source) == ("lanes_t", "floatv", "wide_t", "table", "accumulate", "b_ptr",
                                       "store_pixels", "gemm")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_familys_named_settings_build_as_one_batch_and_each_verifies(device, family):
    from cltune.measure.runner import Runner

    runner = Runner(device.index, rtol=1e-4, atol=1e-4)
    problem = FAMILIES[family]
    settings = [Setting.make(name, fam, params) for name, (fam, params) in builtin_settings().items()
                if fam == family]
    assert len(settings) >= 2
    ms = measure_each(runner, problem, settings, QUICK)
    ran = [m for m in ms if m.status != Status.INVALID]
    assert len(ran) >= 2 and all(m.status == Status.OK for m in ran), [(m.setting.name, m.error) for m in ran]
    assert runner.builder.fallbacks == 0
    batches = [b.batch for b in runner.builder._done.values() if not isinstance(b, Exception)]
    assert set(batches) == {len(runner.builder._done)} and len(batches) > 1  # all from the first program


# A template whose settings with BAD=1 fail to build and the others store VALUE.
ONE_BAD = """
__kernel void k(__global float *out) {
#if BAD
    this does not compile;
#endif
    out[get_global_id(0)] = VALUE;
}
"""


def test_a_setting_that_fails_to_build_fails_alone_and_the_others_build(runner):
    source = ONE_BAD
    builder = Builder(runner.ctx)
    options = [["-cl-std=CL1.2", f"-DVALUE={v}.0f", f"-DBAD={int(v == 2)}"] for v in range(4)]
    together = [(source, o) for o in options[1:]]
    first = builder.build(source, options[0], together)
    # The batch failed, then its half without the bad setting built as one program, the other
    # half failed and was built one setting at a time.
    assert builder.fallbacks == 2 and first.batch == 2 and builder.build(source, options[3]).batch == 1
    assert not builder.unbatchable  # one setting's own error explains it: batching goes on
    with pytest.raises(cl.Error, match="this|does|error"):
        builder.build(source, options[2])
    out = cl.Buffer(runner.ctx, cl.mem_flags.READ_WRITE, 4)
    for v in (0, 1, 3):
        import numpy as np

        k = builder.build(source, options[v]).kernel("k")
        k(runner.queue, (1,), None, out)
        got = np.empty(1, np.float32)
        cl.enqueue_copy(runner.queue, got, out)
        assert got[0] == v


def test_a_failed_batch_is_halved_until_the_bad_setting_is_alone(runner):
    source = ONE_BAD
    builder = Builder(runner.ctx)
    options = [["-cl-std=CL1.2", f"-DVALUE={v}.0f", f"-DBAD={int(v == 5)}"] for v in range(8)]
    builder.build(source, options[0], [(source, o) for o in options[1:]])
    sizes = {v: getattr(builder._done[(source, tuple(o))], "batch", None) for v, o in enumerate(options)}
    # 8 fail; 0-3 build; 4-7 fail; 4-5 fail; 4 alone, 5 its own error; 6-7 build.
    assert sizes == {0: 4, 1: 4, 2: 4, 3: 4, 4: 1, 5: None, 6: 2, 7: 2} and builder.fallbacks == 3
    assert not builder.unbatchable


def test_a_batch_keeps_each_copys_macros_and_names_apart():
    source = "#define TWICE (2 * VALUE)\n__kernel void k(__global float *o) { o[0] = TWICE; }\n"
    text = batch_source(source, [["-DVALUE=1"], ["-DVALUE=2", "-DFLAG"]])
    assert text.count("#define k k__b0") == 1 and text.count("#define k k__b1") == 1
    assert "#define FLAG 1" in text
    first, second = text.split("#define k k__b1")
    assert "#undef TWICE" in first and "#undef VALUE" in first and "#undef k" in first


def test_a_template_that_cannot_be_batched_is_built_one_setting_per_program(runner):
    # An indented helper is not found as a declaration: two copies define it twice.
    source = """
  float twice(float x) { return 2.0f * x; }
__kernel void k(__global float *out) { out[0] = twice(VALUE); }
"""
    builder = Builder(runner.ctx)
    options = [["-cl-std=CL1.2", f"-DVALUE={v}.0f"] for v in range(6)]
    first = builder.build(source, options[0], [(source, o) for o in options[1:3]])
    assert builder.fallbacks == 2 and builder.unbatchable == {source} and first.batch == 1  # 3, then 2
    later = builder.build(source, options[3], [(source, o) for o in options[4:]])
    assert builder.fallbacks == 2 and later.batch == 1  # no second batch was tried


def test_a_source_that_includes_a_file_is_not_batched():
    assert not batchable('#include "helpers.cl"\n__kernel void k() { }\n')
    assert batchable('// #include "helpers.cl" in a comment\n__kernel void k() { }\n')
