"""`Runner.launcher`: a setting as a plain call for the races. It sets its kernels' arguments once,
when it is made, not on every call as a tuning's launches do: it owns its kernels, their arguments
are fixed. Given `x` or `out` (device buffers of the problem's input and output sizes), it reads and
writes those instead of the problem's own: the whole network's race chains its layers that way, one
layer's output the next one's input; given `data` (a problem's data, measure/data.py), it runs on that
data instead of the problem's seeded one: each layer of a network its own weights."""

from __future__ import annotations

import pyopencl as cl

from ..core.errors import UserError
from ..core.space import Setting


def launcher(runner, problem, setting: Setting, x=None, out=None, data=None):
    """A function that runs one inference with this setting, waits for it (wait=False: the network
    race enqueues its layers back to back, one wait at the end) and returns its events."""
    if data is None:
        runner.load_problem(problem)
    else:
        runner.use_data(data)
    prep = runner._prepare(problem, setting)
    if prep.failed:
        raise UserError(f"setting {setting.name!r} cannot run {problem.describe()}: "
                        f"{prep.failed.status}: {prep.failed.error}")
    bufs = runner.data.bufs
    swap = [(bufs.x, x), (bufs.out, out)]
    for la in prep.launches:  # a prepared setting is this launcher's own: its launches may change
        la.args = [next((new for old, new in swap if new is not None and a is old), a) for a in la.args]
    steps = [(prep.kernels[la.kernel], la.global_size, la.local_size) for la in prep.launches]
    once = len({la.kernel for la in prep.launches}) == len(steps)  # else a kernel runs twice, with two sets
    for la in prep.launches if once else ():
        prep.kernels[la.kernel].set_args(*la.args)
    queue, enqueue = runner.queue, cl.enqueue_nd_range_kernel

    def call(wait: bool = True) -> list:
        events = [enqueue(queue, k, g, l) for k, g, l in steps] if once else runner._enqueue(prep)
        if wait:
            events[-1].wait()  # an in-order queue: the last one done means all are
        return events  # profiled: their start/end times are the launch's kernel time
    return call
