"""Builds of the next settings overlap the current measurement, and change no result."""

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.measure.runner import Runner
from cltune.workloads import build_options, get_family


def test_upcoming_settings_are_built_in_the_background():
    runner = Runner(prebuild=True, rtol=1e-4, atol=1e-4)
    problem = Problem.from_shapes((1, 3, 9, 9), (4, 3, 3, 3), padding=1)
    settings = [Setting.make(f"m{i}", "conv2d", {"MACROS": i}) for i in range(4)]
    first = runner.measure(problem, settings[0], Timing(0, 2), upcoming=settings[1:])
    family = get_family("conv2d")
    queued = {(family.source(), tuple(build_options(family.defines(problem, family.resolve(s.values)))))
              for s in settings[1:]}
    assert queued <= set(runner.builder._pending) | set(runner.builder._done)
    later = [runner.measure(problem, s, Timing(0, 2)) for s in settings[1:]]
    assert all(m.status == Status.OK for m in [first, *later])
    assert not runner.builder._pending  # every background build was taken up


def test_prebuild_is_off_by_default_on_a_cpu_device(runner):
    assert runner.prebuild == ("CPU" not in runner.info.type)
