"""Settings per second on a farm of one worker against two, on the same space, side by side.

Each worker is a `local:N` Dask worker whose PoCL uses one thread (POCL_MAX_PTHREAD_COUNT=1), so
two workers on a 2-core machine should measure close to twice as many settings per second. The
kernel cache is off (POCL_KERNEL_CACHE=0), so every round builds its kernels as the first did;
rounds alternate 1 2, 2 1, 1 2 ... so drift on a shared machine hits both alike. The time counted is
the sweep's (settings, search, no re-ranking), not the cluster's start. A control at the end
runs two plain local sweeps at once, without Dask: on a shared machine, the ceiling for two workers.
Each round also prints how much of the sweep its workers spent idle (from Dask's task stream): a
figure a busy machine hardly moves, unlike settings per second.

    python benchmarks/farm_speedup.py [--config gemm_pointwise] [--strategy random] [--budget 60]
                                      [--rounds 3] [--min-time-ms 20]

The default sweep is 123 settings of the GEMM families on a MobileNet 1x1 layer (60 random points
of each space and the built-ins; builds of 0.1-0.5 s, as a board's are), about 50 s on one worker.
A short sweep shows the fixed costs instead: `--config tune_small --strategy exhaustive --budget 0`
(31 settings, 3-5 s) spends a tenth of its time with one worker idle while the baseline, measured
alone because its time sets the per-setting timeout, and the last setting run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cltune.loader import config
from cltune.farm import cluster as farm
from cltune.drive import tune  # noqa: E402
from cltune.farm.backend import FarmBackend  # noqa: E402


def idle_fraction(task_stream: list, start: float, stop: float, workers: int) -> tuple[float, float]:
    """(the share of the sweep's time, start to stop, that its workers spent not measuring -- between
    two settings, waiting for the baseline, at the end --; the median gap between two settings on a
    worker, ms), from Dask's task stream (each task's compute start and stop on its worker). Far less
    sensitive to a busy machine than settings per second."""
    spans: dict[str, list] = {}
    for task in task_stream:
        for ss in task.get("startstops", ()):
            if ss["action"] == "compute":
                spans.setdefault(task["worker"], []).append((ss["start"], ss["stop"]))
    busy, gaps = 0.0, []
    for intervals in spans.values():
        intervals.sort()
        busy += sum(b - a for a, b in intervals)
        gaps += [max(0.0, b - a) for (_, a), (b, _) in zip(intervals, intervals[1:])]
    total = (stop - start) * workers
    return max(0.0, 1 - busy / total), (statistics.median(gaps) * 1e3 if gaps else 0.0)


def options(out: Path, search: tuple[str, int]) -> "tune.Options":
    """One pass over the space (or `budget` settings of it by `strategy`), no re-ranking."""
    strategy, budget = search
    return tune.Options(out=out, rerank=0, strategy=strategy, budget=budget or 10**6)


def one_round(cfg, workers: int, out: Path, search: tuple[str, int]) -> tuple[float, int, str, dict, float, tuple]:
    """(settings per second, settings, device, settings per worker, the share of a core this
    process -- client and scheduler -- used, (worker idle fraction, median gap ms)) of one sweep of
    cfg on `workers` local workers."""
    from distributed import get_task_stream

    f = farm.Farm(f"local:{workers}")
    try:
        kind = f.kinds[0]
        opts = options(out, search)
        backend = FarmBackend(f, kind, cfg, opts)
        with get_task_stream(client=f.client) as ts:
            t0, cpu0, w0 = time.perf_counter(), time.process_time(), time.time()
            res = tune.run(cfg, opts, backend=backend)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        idle = idle_fraction(ts.data, w0, w0 + seconds, workers)
    finally:
        f.close()
    spread = Counter(r["worker"] for r in res.rows)
    return (len(res.rows) / seconds, len(res.rows), kind.describe(), dict(sorted(spread.items())),
            cpu / seconds, idle)


def ceiling(cfg, out_dir: Path, search: tuple[str, int]) -> float:
    """Settings per second of two plain local sweeps (no Dask) of the same space at once, each in
    its own measuring process: what this machine gives two single-thread workers right now."""
    import threading

    opts = [options(out_dir / f"plain{i}.csv", search) for i in range(2)]
    backends = [tune.open_backend(cfg, o) for o in opts]  # devices opened before the clock starts
    counts = [0, 0]

    def one(i):
        counts[i] = len(tune.run(cfg, opts[i], backend=backends[i]).rows)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    for b in backends:
        b.close()
    return sum(counts) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="gemm_pointwise")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--strategy", default="random", choices=("exhaustive", "random"),
                    help="How the sweep walks the space (both are the same settings every round).")
    ap.add_argument("--budget", type=int, default=60,
                    help="Settings each space of a sweep measures (0: the whole space).")
    ap.add_argument("--min-time-ms", type=float, default=20.0,
                    help="Timed kernel time per setting at least (the config's, if larger).")
    args = ap.parse_args()
    search = (args.strategy, args.budget)
    os.environ.update(POCL_MAX_PTHREAD_COUNT="1", POCL_CPU_MAX_CU_COUNT="1", POCL_KERNEL_CACHE="0")
    cfg = config.load(args.config)
    if cfg.timing.min_time_ms < args.min_time_ms:
        from dataclasses import replace

        cfg = replace(cfg, timing=replace(cfg.timing, min_time_ms=args.min_time_ms))
    rates: dict[int, list[float]] = {1: [], 2: []}
    idles: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for n in ((1, 2) if r % 2 == 0 else (2, 1)):
                out = Path(tmp) / f"r{r}_w{n}.csv"
                rate, count, device, spread, client, (idle, gap_ms) = one_round(cfg, n, out, search)
                rates[n].append(rate)
                idles[n].append(idle)
                print(f"round {r + 1}: {n} worker(s): {count} settings, {rate:.2f} settings/s, "
                      f"per worker {spread}, workers idle {idle:.1%} of the sweep (median gap between settings {gap_ms:.1f} ms), "
                      f"client and scheduler {client:.0%} of a core", flush=True)
        plain = ceiling(cfg, Path(tmp), search)
    load = os.getloadavg()
    print(f"\nspace: {cfg.name}, {count} settings a sweep ({args.strategy}, no re-ranking), "
          f"min_time_ms {cfg.timing.min_time_ms:g}")
    print(f"device: {device}; host {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"{'workers':>8} {'settings/s (median)':>20} {'idle (median)':>14} {'rounds':>30}")
    for n, med in ((1, one), (2, two)):
        print(f"{n:>8} {med:>20.2f} {statistics.median(idles[n]):>14.1%} "
              f"{' '.join(f'{v:.2f}' for v in rates[n]):>30}")
    print(f"two workers / one: {two / one:.2f}x")
    print(f"control, no Dask: two plain local sweeps at once, {plain:.2f} settings/s in all: "
          f"{plain / one:.2f}x one farm worker (what the machine's free cores allow now)")


if __name__ == "__main__":
    from cltune.core.errors import script

    script(main)
