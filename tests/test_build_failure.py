"""A setting that fails to build is a measurement with status build_error; the next one builds."""

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads import FAMILIES, register
from cltune.workloads.conv2d import Conv2dFamily


class BrokenWhenAsked(Conv2dFamily):
    """The study kernel, plus a `BREAK` knob that injects a syntax error into the source."""

    def source(self):
        return super().source() + "\n#if BREAK\nthis is not OpenCL C;\n#endif\n"

    def defines(self, problem, p):
        return {**super().defines(problem, p), "BREAK": p["BREAK"]}


def test_build_error_is_recorded_and_sweep_continues(runner):
    from cltune.workloads import Param, get_family

    base = get_family("conv2d")
    register(BrokenWhenAsked(name="broken_test", sources=base.sources,
                             params=base.params + (Param("BREAK", (0, 1), 0, "inject a syntax error"),)))
    try:
        problem = Problem.from_shapes((1, 2, 6, 6), (2, 2, 3, 3), padding=1)
        settings = [Setting.make("before", "broken_test", {}), Setting.make("bad", "broken_test", {"BREAK": 1}),
                    Setting.make("after", "broken_test", {"MACROS": 1})]
        out = [runner.measure(problem, s, Timing(0, 1)) for s in settings]
        assert [m.status for m in out] == [Status.OK, Status.BUILD_ERROR, Status.OK]
        assert "error" in out[1].error.lower() and "\n" not in out[1].error
    finally:
        FAMILIES.pop("broken_test")
