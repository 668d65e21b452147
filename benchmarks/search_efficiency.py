"""How few measurements a search needs: cltune's strategies and Kernel Tuner 1.5's, replayed over
the same recorded spaces with the same budgets and seeds, side by side in one table.

    pip install -e '.[peers]'      # Kernel Tuner 1.5.0 (the test extra has it too)
    python benchmarks/search_efficiency.py [SPACE ...] [--seeds 20] [--budgets 25,50,100,200]
        [--cltune random,tpe,...] [--kt random_sample,genetic_algorithm,...] [--no-kt] [--out FILE.csv]

SPACE: Kernel Tuner cache files (.json/.json.gz), T4 results or cltune results files of an
exhaustive sweep, or run folders of `benchmarks/net_schedule.py record` (each task's file is a
space). Default: the FAIR Benchmark Hub's six spaces in ../shared/peers/benchmark_hub/ when they
are there, else tests/fixtures/hub/.

For each space, each strategy and each seed 0..seeds-1: the distinct points it measures, in order
(cltune's through `cltune.drive.replay`, the sweep's own loop; Kernel Tuner's in its simulation
mode, restricted to the recorded points, seeded through `random` and `numpy.random`). Printed per
strategy: the median over seeds of optimum time / best time found within each budget, with its
quartiles; the evaluations to 90% and 95% of the optimum (median); the share of failed points it
measured; cltune's own time per proposal. Scores count only: no timing of kernels here, so a busy
machine changes how long it takes, never what it prints.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cltune.results import recorded as rec  # noqa: E402
from cltune.drive import replay  # noqa: E402

HUB = ROOT.parent / "shared" / "peers" / "benchmark_hub"
KT_STRATEGIES = ("random_sample", "genetic_algorithm", "dual_annealing", "simulated_annealing", "pso", "mls",
                 "greedy_ils", "firefly_algorithm")


def default_spaces() -> list[Path]:
    hub = sorted(HUB.glob("*/*.json.gz"))
    return hub or sorted((ROOT / "tests" / "fixtures" / "hub").glob("*.json.gz"))


def expand(paths) -> list[tuple[str, Path]]:
    """(label, file): a net recording's folder gives one space per task file."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += [(f"{p.name}/{f.stem}", f) for f in sorted(p.glob("*.csv")) if f.name != "network.csv"]
        else:
            out.append((str(p.relative_to(HUB)) if p.is_relative_to(HUB) else p.name, p))
    return out


def cltune_traces(space, strategy: str, seeds: int, budget: int) -> tuple[list, float]:
    """cltune's traces, and its own time per proposal (ms)."""
    t0, traces = time.process_time(), []
    for seed in range(seeds):
        traces.append(replay.replay(space, strategy, seed, budget))
    n = sum(len(t.times) for t in traces)
    return traces, (time.process_time() - t0) * 1e3 / max(n, 1)


def kt_traces(path: Path, space, strategy: str, seeds: int, budget: int) -> list | None:
    """Kernel Tuner 1.5's traces in simulation mode over the same file (None: it cannot run here)."""
    try:
        import kernel_tuner
        import numpy as np
    except ImportError:
        return None
    data = _kt_cache(path, space)
    names = [n for n, _ in space.params]
    valid = {",".join(map(str, k)) for k in space.points}

    def restrict(*args):
        vals = [args[0][k] for k in names] if len(args) == 1 and isinstance(args[0], dict) else list(args)
        return ",".join(map(str, vals)) in valid

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
        json.dump(data, tmp)
    traces = []
    try:
        for seed in range(seeds):
            random.seed(seed)
            np.random.seed(seed)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                try:
                    res, _ = kernel_tuner.tune_kernel(
                        data.get("kernel_name", "k"), "__global__ void k(){}", tuple(data.get("problem_size", [1])),
                        [], data["tune_params"], lang="CUDA", simulation_mode=True, cache=tmp.name,
                        strategy=strategy, strategy_options={"max_fevals": budget}, restrictions=restrict,
                        verbose=False, quiet=True)
                except Exception:  # noqa: BLE001 - a strategy that cannot run here is left out
                    return None
            trace, seen = replay.Trace(f"kt:{strategy}", seed), set()
            for r in res:
                key = tuple(r[n] for n in names)
                if key in seen or key not in space.points:
                    continue
                seen.add(key)
                trace.times.append(space.points[key].time)
                trace.seconds.append(0.0)
            traces.append(trace)
    finally:
        os.unlink(tmp.name)
    return traces


def _kt_cache(path: Path, space) -> dict:
    """The file as Kernel Tuner's cache (a T4 or cltune file rewritten as one)."""
    if path.name.endswith((".json.gz", ".json")):
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as fh:
            data = json.load(fh)
        if "cache" in data:  # entries as Kernel Tuner writes them, whatever a trimmed file left out
            keys = data.get("tune_params_keys") or list(data["tune_params"])
            for key, entry in data["cache"].items():
                for k, v in zip(keys, key.split(",")):
                    entry.setdefault(k, next(x for x in data["tune_params"][k] if str(x) == v))
                for f in ("compile_time", "benchmark_time", "verification_time", "strategy_time", "framework_time"):
                    entry.setdefault(f, 0)
                entry.setdefault("times", [])
            return data
    names = [n for n, _ in space.params]
    cache = {}
    for key, p in space.points.items():
        entry = dict(zip(names, key))
        entry.update(time=p.time if p.time is not None else "RuntimeFailedConfig", compile_time=0,
                     benchmark_time=0, verification_time=0, strategy_time=0, framework_time=0, times=[])
        cache[",".join(map(str, key))] = entry
    return {"device_name": space.name, "kernel_name": "k", "problem_size": [1], "tune_params_keys": names,
            "tune_params": {n: list(v) for n, v in space.params}, "objective": "time", "cache": cache}


def main() -> None:
    from cltune.loader.config import SEARCH_STRATEGY
    from cltune.measure.hostgemm import host_cpu

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spaces", nargs="*")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budgets", default="25,50,100,200")
    ap.add_argument("--cltune", default=f"random,tpe,local,{SEARCH_STRATEGY}")
    ap.add_argument("--kt", default=",".join(KT_STRATEGIES))
    ap.add_argument("--no-kt", action="store_true")
    ap.add_argument("--out", default=None, help="CSV of every score")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    print(f"host {host_cpu()}; {args.seeds} seeds; budgets {budgets} (scores count measurements only)")
    table = []
    for label, path in expand(args.spaces or default_spaces()):
        space = rec.load(path)
        print(f"\n== {label}: {space.describe()}")
        print(f"{'strategy':<24}" + "".join(f"{'B=' + str(b):>20}" for b in budgets)
              + f"{'e90':>6}{'e95':>6}{'failed':>8}{'ms/prop':>9}")
        runs = [(s, *cltune_traces(space, s, args.seeds, max(budgets))) for s in args.cltune.split(",") if s]
        if not args.no_kt:
            for s in args.kt.split(","):
                traces = kt_traces(path, space, s, args.seeds, max(budgets)) if s else None
                if traces is not None:
                    runs.append((f"kt:{s}", traces, math.nan))
        for name, traces, ms in runs:
            for t in traces:
                t.strategy = name if name.startswith("kt:") else t.strategy
            [row] = replay.summarize(space, traces, budgets)
            cells = "".join(f"{row[f'B={b}'][0]:>9.3f} [{row[f'B={b}'][1]:.2f},{row[f'B={b}'][2]:.2f}]"
                            for b in budgets)
            ev = "".join(f"{(str(int(row[k])) if math.isfinite(row[k]) else '>' + str(max(budgets))):>6}"
                         for k in ("e90", "e95"))
            print(f"{name:<24}{cells}{ev}{row['failed']:>8.1%}{ms:>9.2f}", flush=True)
            table.append({"space": label, "strategy": name, **{f"B={b}": row[f"B={b}"][0] for b in budgets},
                          "e90": row["e90"], "e95": row["e95"], "failed": row["failed"], "ms_per_proposal": ms})
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
