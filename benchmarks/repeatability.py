"""Does a tuning run repeat, and what does a setting cost? Runs the same space three times on one
device -- cold kernel caches in a worker process, warm caches in a worker, warm caches in-process --
each a pass over every setting in turn followed by cltune's final ranking (every setting re-measured
in interleaved rounds), and prints the Spearman rank correlation of the runs' times (their fastest
launches, what cltune ranks by) for both, the wall time per setting, the share of wall time the
device spent running kernels, and the worker process's overhead per setting.

    python benchmarks/repeatability.py [--config bench_repeat] [--device D]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cltune.loader import config
from cltune.results import rows as results, schema
from cltune.drive import tune  # noqa: E402
from kernel_tuner_compare import spearman  # noqa: E402  (this folder is the script's sys.path[0])


def one_run(cfg, label: str, isolation: bool, out_dir: Path, device) -> dict:
    every = len(cfg.spaces[0].valid_settings(cfg.problem)) if cfg.spaces else len(cfg.settings)
    opts = tune.Options(device=device, out=out_dir / f"{label}.csv", isolation=isolation, rerank=every)
    backend = tune.open_backend(cfg, opts)
    t0 = time.perf_counter()
    try:
        tune.run(cfg, opts, backend=backend)
    finally:
        wall_ms = (time.perf_counter() - t0) * 1e3
        backend.close()
    df = results.load(opts.out)
    device_share = df["device_ms"].sum() / wall_ms
    rerank = results.ok_rows(df[df["phase"] == "rerank"])
    rerank_ms = rerank["wall_ms"].sum()
    df = df[df["phase"] == "search"]
    ok = results.ok_rows(df)
    overhead = getattr(backend, "overhead_ms", [])
    return {"run": label, "settings": len(df), "ok": len(ok),
            "wall_per_setting_ms": (wall_ms - rerank_ms) / len(df),  # the first pass, builds included
            "build_ms_mean": df["build_ms"].mean(),
            "device_share": device_share,  # kernel run time / wall time, the whole run
            "worker_overhead_ms": sum(overhead) / len(overhead) if overhead else float("nan"),
            "rerank_s": rerank_ms / 1e3,
            "times": ok.set_index("key")[schema.TIME],  # what cltune ranks by: the fastest launch
            "interleaved": rerank.set_index("key")[schema.TIME]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="bench_repeat")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    cfg = config.load(args.config)
    with tempfile.TemporaryDirectory(prefix="cltune-bench-") as tmp:
        tmp = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")  # PoCL's and pyopencl's kernel caches
        os.environ["POCL_CACHE_DIR"] = str(tmp / "cache" / "pocl")
        runs = [one_run(cfg, "cold_worker", True, tmp, args.device),
                one_run(cfg, "warm_worker", True, tmp, args.device),
                one_run(cfg, "warm_inprocess", False, tmp, args.device)]
    table = pd.DataFrame([{k: v for k, v in r.items() if k not in ("times", "interleaved")} for r in runs])
    print(f"space: {cfg.name}, {cfg.problem.describe()}")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    med = runs[0]["times"]
    print(f"spread of times (slowest / fastest, first run): {med.max() / med.min():.2f}x")
    for i, j in ((0, 1), (1, 2), (0, 2)):
        pair = f"{runs[i]['run']} vs {runs[j]['run']}"
        print(f"Spearman {pair}: one pass, settings in turn {spearman(runs[i]['times'], runs[j]['times']):.3f}; "
              f"final ranking, interleaved {spearman(runs[i]['interleaved'], runs[j]['interleaved']):.3f}")
    extra = runs[1]["wall_per_setting_ms"] - runs[2]["wall_per_setting_ms"]
    print(f"worker vs in-process, wall per setting: {extra:+.1f} ms "
          f"(round-trip overhead inside it: {runs[1]['worker_overhead_ms']:.2f} ms)")


if __name__ == "__main__":
    from cltune.core.errors import script

    script(main)
