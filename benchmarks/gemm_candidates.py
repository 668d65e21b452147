"""Time GEMM-family settings side by side with torch's CPU conv2d, interleaved, in one process.

    PYTHONPATH=. python benchmarks/gemm_candidates.py [LAYER ...] [--threads N] [--rounds R]
        [--repeat K] [--cand FAMILY:KNOB=V,KNOB=V ...] [--only] [--normal]

LAYERs are names from LAYERS (default: all). Per layer the CPU named settings of both families run,
plus the knob values the sweeps of issue 5 found best there (TUNED), plus any --cand. Each round
times every candidate K times, interleaved with torch.nn.functional.conv2d, by wall clock and by
process CPU time; the tables give medians over the rounds and torch/candidate (above 1: faster than
torch). `--threads 1` runs PoCL and torch on one thread each: on a shared, busy machine that CPU
time is the steadier per-core comparison (torch's OpenMP threads stall badly when a core is taken).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

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

G4 = "LWS_X=4,LWS_Y=4"
NHWC = "IN_LAYOUT=nhwc"
TUNED = {  # beyond the named settings: the winners of single-thread sweeps (PoCL 3.0, AVX2)
    "study": [f"implicit_gemm:TM=24,TN=4,{NHWC},{G4}", f"implicit_gemm:UNROLL_K=2,{G4}"],
    "r18_64": [f"implicit_gemm:MSUB=4,KC=64,{NHWC},{G4}", f"implicit_gemm:ORDER=kp,{G4}"],
    "r18_128": [f"implicit_gemm:MSUB=4,KC=64,{G4}", f"implicit_gemm:TN=5,{G4}"],
    "r18_256": [f"implicit_gemm:TN=5,ORDER=kp,{NHWC},{G4}", f"implicit_gemm:UNROLL_K=2,{G4}"],
    "r18_512": [f"implicit_gemm:ORDER=kp,{NHWC},{G4}", f"implicit_gemm:TN=5,ORDER=kp,{NHWC},{G4}"],
    "s2": [f"implicit_gemm:ORDER=kp,{NHWC},{G4}", f"implicit_gemm:MSUB=4,KC=64,{NHWC},{G4}"],
    "r18_ds": [f"implicit_gemm:UNROLL_K=2,{G4}", f"implicit_gemm:ORDER=kp,{G4}"],
    "pw_32": [f"implicit_gemm:TM=8,TN=8,VEC_DIM=p,ORDER=kp,{G4}"],
    "pw_128": [f"implicit_gemm:TM=6,TN=16,VEC_DIM=p,ORDER=kp,{G4}",
               f"implicit_gemm:UNROLL_K=2,{G4}"],
    "pw_256": [f"implicit_gemm:TM=24,TN=4,ORDER=kp,{G4}", f"implicit_gemm:TM=24,TN=4,{G4}"],
    "pw_512": [f"implicit_gemm:ORDER=kp,{NHWC},{G4}", f"implicit_gemm:MSUB=4,KC=64,{NHWC},{G4}"],
    "pw_1024": [f"implicit_gemm:TN=5,{NHWC},{G4}", f"implicit_gemm:MSUB=4,KC=64,{NHWC},{G4}"],
}


def parse_cand(text: str):
    from cltune.core.space import Setting

    family, _, body = text.partition(":")
    params = {}
    for item in filter(None, body.split(",")):
        k, v = item.split("=")
        params[k] = int(v) if v.lstrip("-").isdigit() else v
    return Setting.make(text, family, params)


def clocked(fn, reps: int) -> tuple[float, float]:
    """Median wall ms and median process CPU ms per call of fn."""
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
    """A function that runs one round of the setting (measure() verifies it first), or None."""
    from cltune.core.records import Timing

    m = runner.measure(problem, setting, Timing(warmup=1, repeat=1))
    if m.status != "ok":
        print(f"  {setting.name}: {m.status} {m.error}")
        return None
    return runner.launcher(problem, setting)


def candidates(layer: str, args) -> list:
    from cltune.core.space import Setting
    from cltune.workloads import builtin_settings

    cands = [parse_cand(c) for c in args.cand or []]
    if not args.only:
        cands += [Setting.make(n, f, p) for n, (f, p) in builtin_settings().items()
                  if f in ("im2col_gemm", "implicit_gemm") and not n.endswith("_mali")]
        cands += [parse_cand(c) for c in TUNED.get(layer, [])]
    if args.normal:
        cands.append(Setting.make("normal", "conv2d", {}))
    return cands


def bench_layer(runner, layer: str, args) -> tuple[str, float, float]:
    """Print the layer's table; return (best setting, its ms, torch's ms) by the chosen clock."""
    from cltune.core.problem import Problem

    xs, ws, stride, padding = LAYERS[layer]
    problem = Problem.from_shapes(xs, ws, stride=stride, padding=padding)
    runner.load_problem(problem)
    bufs = runner.bufs
    calls = {"torch": torch_call(bufs.x_host, bufs.w_host, bufs.b_host, stride, padding)}
    for c in candidates(layer, args):
        fn = cl_call(runner, problem, c)
        if fn is not None:
            calls[c.name] = fn
    wall = {name: [] for name in calls}
    cpu = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, fn in calls.items():
            w_ms, c_ms = clocked(fn, 1 if name == "normal" else args.repeat)
            wall[name].append(w_ms)
            cpu[name].append(c_ms)
    clock = cpu if args.threads == 1 else wall
    med = {name: statistics.median(v) for name, v in clock.items()}
    print(f"{layer}: {problem.describe()}  {problem.flops / 1e9:.3f} GFLOP")
    print(f"  {'cpu' if args.threads == 1 else 'wall'} ms  GFLOP/s  torch/this  "
          f"(other clock ms) name")
    other = wall if clock is cpu else cpu
    for name in sorted(calls, key=med.get):
        ms = med[name]
        print(f"  {ms:8.3f} {problem.flops / ms / 1e6:8.1f} {med['torch'] / ms:8.2f}"
              f"     ({statistics.median(other[name]):8.3f}) {name}")
    best = min((n for n in med if n not in ("torch", "normal")), key=med.get)
    return best, med[best], med["torch"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layers", nargs="*", help=f"default: all of {', '.join(LAYERS)}")
    ap.add_argument("--threads", type=int, default=0, help="1: PoCL and torch on one thread each")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cand", nargs="*", help="extra candidates, FAMILY:KNOB=V,KNOB=V")
    ap.add_argument("--only", action="store_true", help="the --cand candidates only")
    ap.add_argument("--normal", action="store_true", help="also time the ladder's `normal` setting")
    args = ap.parse_args()
    unknown = set(args.layers) - set(LAYERS)
    if unknown:
        ap.error(f"unknown layers {sorted(unknown)}; known: {', '.join(LAYERS)}")
    if args.threads:
        os.environ["POCL_MAX_PTHREAD_COUNT"] = str(args.threads)  # before PoCL starts
        import torch

        torch.set_num_threads(args.threads)
    from cltune.measure.runner import Runner

    runner = Runner()
    summary = [(layer, *bench_layer(runner, layer, args)) for layer in args.layers or LAYERS]
    print("\nlayer      best cltune ms  torch ms  torch/best  best setting")
    for layer, best, ms, t_ms in summary:
        print(f"{layer:10} {ms:14.3f} {t_ms:9.3f} {t_ms / ms:10.2f}  {best}")
    gmean = math.exp(statistics.fmean(math.log(t / m) for _, _, m, t in summary))
    print(f"geometric mean torch/best: {gmean:.2f}")


if __name__ == "__main__":
    main()
