"""What the host adds to a kernel call in the race: `Runner.launcher`'s call (arguments set once,
its enqueues, one wait) beside the call it replaced (`Runner._enqueue`, which sets every kernel's
arguments on every call, then the same wait), interleaved in one process on the same layers.

    python benchmarks/launch_overhead.py [--network mobilenet_v2] [--size 14] [--calls 300] [--rounds 4]

The layers are the network's 1x1 tasks of at most --size x --size (MobileNet v2's 14x14 and 7x7
pointwise convs, whose kernels run 0.05-0.3 ms), each with every built-in setting the device's kind
has for it (one kernel, or two: a padding, im2col or layout copy before the conv). Per setting and
path: the median host time of a call, the median of the events' kernel time (end - start, summed
over its kernels) and the median of the per-call difference, the host's overhead. Where PoCL's
event clock is the host's CLOCK_MONOTONIC_RAW (it is on Linux), the new path's overhead is split
into: before the first command is queued (Python and argument setting), queued to the first kernel's
start (PoCL waking its worker threads), gaps between a setting's kernels, and the last kernel's end
to the call's return (the waiting host thread woken).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from cltune.measure.device import machine_line  # noqa: E402
from cltune.measure.runner import Runner  # noqa: E402
from cltune.net.tables import load  # noqa: E402
from cltune.net.tasks import make_tasks  # noqa: E402
from cltune.results.nearest import builtins  # noqa: E402


def clock() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)


def old_call(runner: Runner, problem, setting):
    """The launcher's call before this change: `_enqueue` (set_args, then enqueue, per kernel) and
    the last event waited for."""
    runner.load_problem(problem)
    prep = runner._prepare(problem, setting)

    def call():
        events = runner._enqueue(prep)
        events[-1].wait()
        return events
    return call


def timed(call, n: int, warm_s: float = 0.05) -> np.ndarray:
    """n calls after `warm_s` of untimed ones; per call: host start, host end and each event's
    queued, start and end stamps (ns)."""
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        call()
    rows = []
    for _ in range(n):
        t0 = clock()
        events = call()
        t1 = clock()
        rows.append([t0, t1] + [v for e in events for v in (e.profile.queued, e.profile.start, e.profile.end)])
    return np.array(rows, dtype=np.int64)


def figures(rows: np.ndarray) -> dict:
    """Medians (us) of the host time, the kernels' time, their difference and its parts."""
    t0, t1, q, s, e = rows[:, 0], rows[:, 1], rows[:, 2::3], rows[:, 3::3], rows[:, 4::3]
    kern = (e - s).sum(axis=1)
    out = {"host": t1 - t0, "kernel": kern, "overhead": t1 - t0 - kern}
    if np.mean((t0 <= q[:, 0]) & (e[:, -1] <= t1)) > 0.99:  # the event clock is the host's
        out.update(to_queued=q[:, 0] - t0, to_start=s[:, 0] - q[:, 0],
                   gaps=(s[:, 1:] - e[:, :-1]).sum(axis=1), to_return=t1 - e[:, -1])
    return {k: float(np.median(v)) / 1e3 for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--network", default="mobilenet_v2")
    ap.add_argument("--size", type=int, default=14, help="1x1 tasks of at most this output height")
    ap.add_argument("--calls", type=int, default=300, help="timed calls per path, setting and round")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=None, help="only the first N of those tasks")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()

    runner = Runner(args.device)
    print(machine_line(runner.info))
    tasks = [t for t in make_tasks(load(args.network))
             if t.problem.filter_h == t.problem.filter_w == 1 and t.problem.out_h <= args.size][:args.tasks]
    pairs = [(t, s, {"old": old_call(runner, t.problem, s), "new": runner.launcher(t.problem, s)})
             for t in tasks for s in builtins(t.problem, runner.info)]
    rows = {(i, path): [] for i in range(len(pairs)) for path in ("old", "new")}
    for r in range(args.rounds):  # rounds of old, new (new, old every other round) over every setting
        for i, (_, _, calls) in enumerate(pairs):
            for path in ("old", "new") if r % 2 == 0 else ("new", "old"):
                rows[i, path].append(timed(calls[path], args.calls))
    print(f"{args.network}: {len(tasks)} 1x1 tasks at <= {args.size}x{args.size}, {len(pairs)} settings, "
          f"{args.rounds} rounds x {args.calls} calls per path; medians in us")
    head = (f"{'task':<34} {'setting':<24} {'k':>1} {'kernel':>7} {'host old':>8} {'host new':>8} "
            f"{'ovh old':>7} {'ovh new':>7} | {'to_queued':>9} {'to_start':>8} {'gaps':>5} {'to_return':>9}")
    print(head)
    summary = []  # (kernels, old figures, new figures) per setting
    for i, (t, s, _) in enumerate(pairs):
        f = {path: figures(np.concatenate(rows[i, path])) for path in ("old", "new")}
        n = (rows[i, "new"][0].shape[1] - 2) // 3  # kernels per call
        summary.append((n, f["old"], f["new"]))
        parts = " ".join(f"{f['new'].get(k, float('nan')):{w}.1f}" for k, w in
                         (("to_queued", 9), ("to_start", 8), ("gaps", 5), ("to_return", 9)))
        print(f"{t.name:<34} {s.name:<24} {n:>1} {f['new']['kernel']:7.1f} {f['old']['host']:8.1f} "
              f"{f['new']['host']:8.1f} {f['old']['overhead']:7.1f} {f['new']['overhead']:7.1f} | {parts}")
    print("host overhead per call, over the settings (us): kernels, settings, mean old, mean new, "
          "median of old - new; the new path's mean parts")
    for n in sorted({k for k, _, _ in summary}):
        sel = [(o, w) for k, o, w in summary if k == n]
        parts = ", ".join(f"{k} {statistics.mean(w.get(k, float('nan')) for _, w in sel):.1f}"
                          for k in ("to_queued", "to_start", "gaps", "to_return"))
        old, new = statistics.mean(o["overhead"] for o, _ in sel), statistics.mean(w["overhead"] for _, w in sel)
        print(f"  {n} kernel{'s' if n > 1 else ' '} {len(sel):3d}: old {old:.1f}, new {new:.1f}, "
              f"old - new {statistics.median(o['overhead'] - w['overhead'] for o, w in sel):+.1f}; {parts}")


if __name__ == "__main__":
    main()
