"""`Runner.launcher`: the race's call sets its kernels' arguments once, when it is made, not on every
call. Guards against a launcher whose arguments another launcher (another layer's buffers) or a
tuning's launches overwrote: it would compute into the wrong buffers, its time still plausible."""

import numpy as np

from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.results.nearest import builtins


def _check(runner, data, call) -> tuple:
    """Run `call` into outputs filled with NaN and check them against `data`'s reference."""
    data.before_verification(runner.queue)
    events = call()
    outputs, copied = data.read(runner.queue)
    copied.wait()
    return events, data.check(outputs, runner.rtol, runner.atol)


def test_a_launcher_computes_its_own_layer_after_others_ran_and_returns_its_profiled_events(runner):
    small = Problem.from_shapes((1, 16, 7, 7), (32, 16, 1, 1), activation="relu6")
    other = Problem.from_shapes((1, 8, 9, 9), (8, 8, 3, 3), padding=1)
    settings = builtins(small, runner.info)
    calls = []
    for s in settings:
        call = runner.launcher(small, s)
        calls.append((call, runner.data, len(runner._prepare(small, s).launches)))
    assert any(kernels > 1 for _, _, kernels in calls)  # a two-kernel setting too
    other_call, other_data = runner.launcher(other, builtins(other, runner.info)[0]), runner.data
    # the same settings measured (their own kernels, their arguments set on every launch) in between
    for s in settings[:2]:
        assert runner.measure(small, s, Timing(warmup=0, repeat=1)).status == Status.OK
    for call, data, kernels in calls:
        other_call()
        events, (status, max_err, msg) = _check(runner, data, call)
        assert status == Status.OK, msg
        assert len(events) == kernels
        assert all(e.profile.end >= e.profile.start >= e.profile.queued for e in events)
    events, (status, _, msg) = _check(runner, other_data, other_call)
    assert status == Status.OK, msg
    assert np.isfinite(sum(e.profile.end - e.profile.start for e in events))
