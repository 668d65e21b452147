"""A warm `cltune sweep` through the command's entry point (its worker started before the parent's
imports, cltune/cli/entry.py) against the same sweep with the worker started after them, side by side.

    python benchmarks/startup.py [--device D] [--config bench_repeat] [--pairs 5]

One sweep fills the kernel caches (a temporary folder's); then `--pairs` times, alternating, the
same sweep runs as `python -m cltune sweep ...` (early worker) and as a script that imports
cltune.cli.commands first and calls its main (late worker: the order before cli/entry.py). Printed: each run's
process wall, the median of each way and their ratio. Nothing else should run on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LATE = "import sys; from cltune.cli.commands import main; sys.argv[0] = 'cltune'; main(prog_name='cltune')"


def sweep(way: str, args: list[str], env: dict) -> float:
    """One sweep's process wall in s, interpreter start included."""
    from kernel_tuner_compare import timed_process  # beside this script

    cmd = [sys.executable, "-m", "cltune", *args] if way == "early" else [sys.executable, "-c", LATE, *args]
    return timed_process(f"{way} sweep", cmd, env, ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="device index or name (default: cltune's choice)")
    ap.add_argument("--config", default="bench_repeat")
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    if args.pairs < 1:
        raise SystemExit(f"--pairs: expected at least 1, got {args.pairs}")
    with tempfile.TemporaryDirectory(prefix="cltune-startup-") as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache"), "POCL_CACHE_DIR": str(tmp / "cache" / "pocl"),
               "CLTUNE_HOME": str(tmp / "cache" / "cltune"), "PYTHONPATH": str(ROOT)}
        env.pop("CLTUNE_FARM", None)
        device = ["--device", args.device] if args.device is not None else []

        def args_for(label: str) -> list[str]:
            return ["sweep", args.config, *device, "--out", str(tmp / f"{label}.csv")]

        sweep("early", args_for("fill"), env)  # kernel caches filled: every timed sweep is warm
        walls: dict = {"early": [], "late": []}
        for i in range(args.pairs):
            for way in (("early", "late") if i % 2 == 0 else ("late", "early")):
                walls[way].append(sweep(way, args_for(f"{way}{i}"), env))
                print(f"  {way} worker, run {i}: {walls[way][-1]:.3f} s", flush=True)
    early, late = statistics.median(walls["early"]), statistics.median(walls["late"])
    print(f"warm `cltune sweep {args.config}`, process wall (median of {args.pairs}): worker started "
          f"early {early:.3f} s, late {late:.3f} s, ratio {early / late:.2f}")


if __name__ == "__main__":
    main()
