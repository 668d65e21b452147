"""PoCL's threads pinned (POCL_AFFINITY=1, cltune's default) or left to the OS, side by side: a short
kernel launched one at a time, as adaptive repeats launch it, in fresh processes that alternate.

    python benchmarks/pocl_affinity.py [--device D] [--launches 3000] [--pairs 2]

Each process launches the implicit-GEMM kernel on MobileNet's first pointwise layer ([1,32,112,112]
x [64,32,1,1], about 0.23 ms on a 2-core VM) and waits for it, `--launches` times, and reports the
fastest launch, the median, the share of launches over 1.3x the fastest and the longest run of such
launches in a row. A run of slow launches longer than a point's measurement is what makes a tuner
record a point at the machine's speed instead of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SLOW = 1.3
PARAMS = {"LWS_X": 4, "LWS_Y": 4, "ORDER": "kp", "TM": 8, "TN": 16, "VEC_DIM": "p", "VW": 16,
          "WLAYOUT": "blocked"}


def child(device: int | None, launches: int) -> None:
    import numpy as np

    from cltune.measure.runner import Runner
    from cltune.core.problem import Problem
    from cltune.core.space import Setting

    problem = Problem.from_shapes((1, 32, 112, 112), (64, 32, 1, 1))
    runner = Runner(device, rtol=1e-3, atol=1e-3)
    launch = runner.launcher(problem, Setting.make("implicit", "implicit_gemm", PARAMS))
    runs = []
    for i in range(launches + 50):  # the first 50: the process's warm-up
        events = launch()  # one at a time: the threads go back to sleep between launches
        if i >= 50:
            runs.append(sum(e.profile.end - e.profile.start for e in events) * 1e-6)
    t = np.array(runs)
    slow = t > SLOW * t.min()
    longest = run = 0
    for s in slow:
        run = run + 1 if s else 0
        longest = max(longest, run)
    print(json.dumps({"min": float(t.min()), "median": float(np.median(t)), "slow": float(slow.mean()),
                      "longest": longest}))


def run_child(device: int, launches: int, pinned: str) -> dict:
    """One fresh process's figures (`child`), POCL_AFFINITY=pinned; RuntimeError with its last line
    of output when it fails. benchmarks/kernel_tuner_compare.py measures the host's noise with it."""
    cmd = [sys.executable, __file__, "--child", "--device", str(device), "--launches", str(launches)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, POCL_AFFINITY=pinned))
    if out.returncode != 0:
        raise RuntimeError(((out.stderr or out.stdout).strip().splitlines() or ["no output"])[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


NOISE_LAUNCHES = 2000  # of a 0.2-0.3 ms kernel on a 2-core VM: about a second


def host_noise(device: int, launches: int = NOISE_LAUNCHES) -> str:
    """One line on the host's launch-to-launch noise: the child's kernel launched one at a time in
    a fresh process, pinned (the benchmarks print it beside their figures)."""
    try:
        r = run_child(device, launches, "1")
    except RuntimeError as exc:
        return f"host noise: not measured ({exc})"
    return (f"host noise: a {r['min']:.2f} ms kernel launched {launches} times one at a time, "
            f"{100 * r['slow']:.1f}% of launches over 1.3x its fastest, median {r['median'] / r['min']:.2f}x "
            f"the fastest, longest slow run {r['longest']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=None, help="flat device index (default: cltune's choice)")
    ap.add_argument("--launches", type=int, default=3000)
    ap.add_argument("--pairs", type=int, default=2, help="processes of each kind, alternating")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.device, args.launches)
        return
    from cltune.measure import device as dev

    _, info = dev.select(args.device)
    print(dev.machine_line(info))
    if "Portable Computing Language" not in info.platform:
        raise SystemExit(f"device {info.index} is not PoCL ({info.platform}): POCL_AFFINITY means nothing to it")
    print(f"{'POCL_AFFINITY':>13}  {'fastest ms':>10}  {'median ms':>9}  {'> 1.3x fastest':>14}  {'longest run':>11}")
    for _ in range(args.pairs):
        for pinned in ("1", "0"):
            try:
                r = run_child(info.index, args.launches, pinned)
            except RuntimeError as exc:
                raise SystemExit(str(exc)) from None
            print(f"{pinned:>13}  {r['min']:10.3f}  {r['median']:9.3f}  {100 * r['slow']:13.1f}%  {r['longest']:11d}")


if __name__ == "__main__":
    main()
