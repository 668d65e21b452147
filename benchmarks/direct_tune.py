"""Time `direct` settings side by side with torch's CPU conv2d (and optionally the ladder's `normal`)
on one layer, interleaved over rounds so a slow phase of a shared machine hits every candidate.

    PYTHONPATH=. python benchmarks/direct_tune.py --layer study --rounds 3 \
        --try '{"BLOCK_K": 16, "BLOCK_W": 6}' --named --normal

Each --try is a JSON dict of knob values laid over `direct_cpu`. Prints, per candidate, the median
and min run time (ms) over all its timed launches, GFLOP/s and the ratio to torch, and the CPU time
per run (both cores summed): on a shared machine the CPU time ranks candidates more steadily than
the wall-clock times, which other processes stretch.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time

import numpy as np

from cltune.core.device_values import bind_setting, describe
from cltune.measure.hostgemm import host_cpu
from cltune.measure.runner import Runner
from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.workloads.direct import NAMED

LAYERS = {
    "study": dict(input_shape=(1, 512, 13, 13), weight_shape=(1024, 512, 3, 3), padding=1),
    "r18_64": dict(input_shape=(1, 64, 56, 56), weight_shape=(64, 64, 3, 3), padding=1),
    "r18_128": dict(input_shape=(1, 128, 28, 28), weight_shape=(128, 128, 3, 3), padding=1),
    "r18_256": dict(input_shape=(1, 256, 14, 14), weight_shape=(256, 256, 3, 3), padding=1),
    "r18_512": dict(input_shape=(1, 512, 7, 7), weight_shape=(512, 512, 3, 3), padding=1),
    "r18_s2": dict(input_shape=(1, 128, 56, 56), weight_shape=(256, 128, 3, 3), stride=2, padding=1),
    "r18_1x1": dict(input_shape=(1, 256, 14, 14), weight_shape=(256, 256, 1, 1)),
    "mb_pw": dict(input_shape=(1, 512, 14, 14), weight_shape=(512, 512, 1, 1)),
}


def cpu_ms() -> float:
    """CPU time this process has used (all threads, PoCL's workers included), in ms."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e3


def cpu_per_run(fn, repeat: int) -> float:
    """CPU ms per call of fn: robust to other processes taking the cores (unlike wall time)."""
    fn()
    t0 = cpu_ms()
    for _ in range(repeat):
        fn()
    return (cpu_ms() - t0) / repeat


def torch_call(problem: Problem):
    import torch

    x, w, b = (torch.from_numpy(a) for a in problem.make_inputs(0))
    kw = dict(stride=(problem.stride_h, problem.stride_w), padding=(problem.pad_h, problem.pad_w),
              dilation=(problem.dilation_h, problem.dilation_w))
    return lambda: torch.nn.functional.conv2d(x, w, b, **kw)


def torch_ms(problem: Problem, repeat: int) -> list[float]:
    import torch

    x, w, b = (torch.from_numpy(a) for a in problem.make_inputs(0))
    kw = dict(stride=(problem.stride_h, problem.stride_w), padding=(problem.pad_h, problem.pad_w),
              dilation=(problem.dilation_h, problem.dilation_w))
    torch.nn.functional.conv2d(x, w, b, **kw)
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        torch.nn.functional.conv2d(x, w, b, **kw)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def candidates(args) -> list[Setting]:
    out = []
    if args.normal:
        out.append(Setting.make("normal", "conv2d", {}))
    if args.named:
        out += [Setting.make(name, "direct", params) for name, params in NAMED.items()]
    for i, text in enumerate(args.try_ or ()):
        params = dict(NAMED["direct_cpu"], **json.loads(text))
        out.append(Setting.make(f"try{i}", "direct", params))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", choices=sorted(LAYERS), default="study")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5, help="timed launches per candidate per round")
    ap.add_argument("--try", dest="try_", action="append", help="JSON knob values over direct_cpu")
    ap.add_argument("--named", action="store_true", help="include the family's named settings")
    ap.add_argument("--normal", action="store_true", help="include the ladder's normal (slow)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    problem = Problem.from_shapes(**LAYERS[args.layer])
    runner = Runner(rtol=1e-3, atol=1e-3)
    settings = [bind_setting(s, runner.info) for s in candidates(args)]  # direct_cpu's device.* values
    print(f"device {runner.info.index}: {runner.info.name} ({runner.info.platform}, driver "
          f"{runner.info.driver}): {describe(runner.info)}; host {host_cpu()}")
    times: dict[str, list[float]] = {s.name: [] for s in settings}
    times["torch"] = []
    cpu: dict[str, list[float]] = {name: [] for name in times}
    for _ in range(args.rounds):
        for s in settings:
            reps = 1 if s.family == "conv2d" else args.repeat
            m = runner.measure(problem, s, Timing(warmup=1 if reps > 1 else 0, repeat=reps))
            if m.status != Status.OK:
                print(f"{s.name}: {m.status} {m.error}")
                times.pop(s.name, None)
                continue
            times.get(s.name, []).extend(r.run_ms for r in m.rounds)
            cpu[s.name].append(cpu_per_run(lambda: runner.run_once(problem, s), reps))
        times["torch"] += torch_ms(problem, args.repeat)
        cpu["torch"].append(cpu_per_run(torch_call(problem), args.repeat))
        settings = [s for s in settings if s.name in times]
    report(problem, settings, times, cpu)


def report(problem: Problem, settings, times, cpu) -> None:
    """Median and min run ms (events; torch: wall clock) and the median CPU ms per run."""
    print(args_line(problem))
    t_torch, c_torch = statistics.median(times["torch"]), statistics.median(cpu["torch"])
    print(f"{'name':>12} {'median':>9} {'min':>9} {'cpu':>9} {'GFLOP/s':>7} {'torch/this':>10} "
          f"{'(cpu)':>6}")
    for s in [Setting.make("torch", "torch", {})] + settings:
        t, c = statistics.median(times[s.name]), statistics.median(cpu[s.name])
        print(f"{s.name:>12} {t:9.3f} {min(times[s.name]):9.3f} {c:9.3f} "
              f"{problem.flops / t / 1e6:7.1f} {t_torch / t:10.2f} {c_torch / c:6.2f}  "
              f"{'' if s.family == 'torch' else s.describe()}")


def args_line(problem: Problem) -> str:
    return f"{problem.describe()} ({problem.flops / 1e9:.3f} GFLOP)"


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
