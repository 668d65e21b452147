"""Time GEMM-family candidates side by side with torch's CPU conv2d, interleaved, in one process.

    PYTHONPATH=. python benchmarks/gemm_candidates.py LAYER [--rounds N] [--cand FAMILY:K=V,K=V ...]

LAYER is a name from LAYERS below. The CPU named settings of both families run, plus any --cand.
Each round times every candidate `--repeat` times (wall clock and process CPU time, which resists a
busy machine better), interleaved with torch.nn.functional.conv2d; prints medians over the rounds,
GFLOP/s and the ratio torch/candidate (above 1: faster than torch).
"""

from __future__ import annotations

import argparse
import statistics
import time

from cltune.measure import Runner
from cltune.problem import Problem
from cltune.records import Timing
from cltune.space import Setting
from cltune.workloads import builtin_settings

LAYERS = {
    "study": ((1, 512, 13, 13), (1024, 512, 3, 3), 1, 1),
    "r18_64": ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    "r18_128": ((1, 128, 28, 28), (128, 128, 3, 3), 1, 1),
    "r18_256": ((1, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    "r18_512": ((1, 512, 7, 7), (512, 512, 3, 3), 1, 1),
    "s2": ((1, 128, 56, 56), (128, 128, 3, 3), 2, 1),
    "r18_ds": ((1, 64, 56, 56), (128, 64, 1, 1), 2, 0),
    "pw_32": ((1, 32, 112, 112), (64, 32, 1, 1), 1, 0),
    "pw_128": ((1, 128, 56, 56), (128, 128, 1, 1), 1, 0),
    "pw_256": ((1, 256, 28, 28), (256, 256, 1, 1), 1, 0),
    "pw_512": ((1, 512, 14, 14), (512, 512, 1, 1), 1, 0),
    "pw_1024": ((1, 1024, 7, 7), (1024, 1024, 1, 1), 1, 0),
}


def parse_cand(text: str) -> Setting:
    family, _, body = text.partition(":")
    params = {}
    for item in filter(None, body.split(",")):
        k, v = item.split("=")
        params[k] = int(v) if v.lstrip("-").isdigit() else v
    return Setting.make(text, family, params)


def clocked(fn, reps: int) -> tuple[float, float]:
    """Median wall ms and median process CPU ms per call of fn (CPU time resists a busy machine)."""
    fn()
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def torch_call(x, w, b, stride, padding):
    import torch

    tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)

    def run():
        with torch.no_grad():
            torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=padding)
    return run


def cl_call(runner, problem, setting):
    """A function that runs one round of the setting (measure() verified it first), or None."""
    from cltune.workloads import get_family
    import pyopencl as cl

    m = runner.measure(problem, setting, Timing(warmup=1, repeat=1))
    if m.status != "ok":
        print(f"{setting.name}: {m.status} {m.error}")
        return None
    family = get_family(setting.family)
    p = family.resolve(setting.values)
    prg, _ = runner.build(family, m.build_options.split())
    launches = family.launches(runner.ctx, runner.queue, problem, p, runner.bufs)
    kernels = {la.kernel: cl.Kernel(prg, la.kernel) for la in launches}
    return lambda: runner._round(kernels, launches)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layer", choices=sorted(LAYERS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cand", nargs="*", help="extra candidates, FAMILY:KNOB=V,KNOB=V")
    ap.add_argument("--only", action="store_true", help="the --cand candidates only, no named settings")
    ap.add_argument("--normal", action="store_true", help="also time the ladder's `normal` setting")
    args = ap.parse_args()
    xs, ws, stride, padding = LAYERS[args.layer]
    problem = Problem.from_shapes(xs, ws, stride=stride, padding=padding)
    cands = [parse_cand(c) for c in args.cand or []]
    if not args.only:
        cands += [Setting.make(n, f, p) for n, (f, p) in builtin_settings().items()
                  if f in ("im2col_gemm", "implicit_gemm") and not n.endswith("_mali")]
    if args.normal:
        cands.append(Setting.make("normal", "conv2d", {}))
    runner = Runner()
    runner.load_problem(problem)
    x, w, b = runner.bufs.x_host, runner.bufs.w_host, runner.bufs.b_host
    calls = {"torch": torch_call(x, w, b, stride, padding)}
    for c in cands:
        fn = cl_call(runner, problem, c)
        if fn is not None:
            calls[c.name] = fn
    wall = {name: [] for name in calls}
    cpu = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, fn in calls.items():
            w_ms, c_ms = clocked(fn, args.repeat)
            wall[name].append(w_ms)
            cpu[name].append(c_ms)
    ref_w, ref_c = (statistics.median(d["torch"]) for d in (wall, cpu))
    print(f"{args.layer}: {problem.describe()}  {problem.flops / 1e9:.3f} GFLOP")
    print("  wall ms  GFLOP/s torch/this |  cpu ms  torch/this | name")
    for name in sorted(calls, key=lambda n: statistics.median(cpu[n])):
        mw, mc = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"{mw:9.3f} {problem.flops / mw / 1e6:8.1f} {ref_w / mw:6.2f}     | {mc:8.2f} "
              f"{ref_c / mc:6.2f}     | {name}")


if __name__ == "__main__":
    main()
