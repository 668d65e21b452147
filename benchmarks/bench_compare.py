"""Two `cltune bench` runs of the same suite, layer by layer: how far cltune's best kernel moved
between them, beside how far torch moved on the same layers in the same runs. On a busy host every
contender moves; the question is whether cltune moves more than torch does.

    cltune bench bench_suite --out A/race.csv ; cltune bench bench_suite --out B/race.csv
    python benchmarks/bench_compare.py A/race.csv B/race.csv

Printed per layer: cltune's best kernel's fastest call in each run and their ratio (B / A), torch's
ratio, and whether the winning family is the same. Then the spread of each column's ratios (the
largest |log ratio| and the median one, as a factor), the same for cltune's ratio to torch (what
moved beyond a host that sped up or slowed down between the runs), and how many layers kept their
family. Last, on PoCL, the host's noise as it is now, right after the runs
(benchmarks/pocl_affinity.py's short kernel, pinned; `--no-noise` skips it).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import pandas as pd


def best_rows(path: str) -> pd.DataFrame:
    df = pd.read_csv(path)
    best = df[df["best_cltune"]].set_index("layer")
    torch = df[df["contender"] == "torch"].set_index("layer")["ms"] if "torch" in set(df["contender"]) else None
    out = pd.DataFrame({"cltune_ms": best["ms"], "family": best["family"]})
    if torch is not None:
        out["torch_ms"] = torch
    return out


def spread(ratios) -> tuple[float, float]:
    """(the largest, the median) |log ratio|, as factors >= 1."""
    logs = [abs(math.log(r)) for r in ratios if r and r == r]
    if not logs:
        return math.nan, math.nan
    return math.exp(max(logs)), math.exp(statistics.median(logs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--device", type=int, default=None, help="the device the host noise is measured on")
    ap.add_argument("--no-noise", action="store_true", help="do not measure the host's noise")
    args = ap.parse_args()
    a, b = best_rows(args.first), best_rows(args.second)
    layers = [layer for layer in a.index if layer in b.index]
    if not layers:
        sys.exit("the two runs share no layer")
    rows = []
    for layer in layers:
        row = {"layer": layer, "cltune A": a.at[layer, "cltune_ms"], "cltune B": b.at[layer, "cltune_ms"]}
        row["cltune B/A"] = row["cltune B"] / row["cltune A"]
        if "torch_ms" in a and "torch_ms" in b:
            row["torch B/A"] = b.at[layer, "torch_ms"] / a.at[layer, "torch_ms"]
        row["family A"], row["family B"] = a.at[layer, "family"], b.at[layer, "family"]
        rows.append(row)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    worst, typical = spread(table["cltune B/A"])
    line = f"cltune's ratio B/A: at most {worst:.3f}x, median {typical:.3f}x"
    if "torch B/A" in table:
        tw, tt = spread(table["torch B/A"])
        line += f"; torch's: at most {tw:.3f}x, median {tt:.3f}x ({'no wider' if worst <= tw else 'WIDER'})"
        # A host that sped up or slowed down between the runs moves both alike; what is left of it:
        rw, rt = spread(table["cltune B/A"] / table["torch B/A"])
        line += f"\ncltune's x torch, B/A: at most {rw:.3f}x, median {rt:.3f}x (what moved beyond the host)"
    kept = int((table["family A"] == table["family B"]).sum())
    print(line)
    print(f"winning family kept on {kept} of {len(table)} layers")
    if not args.no_noise:
        print(noise_now(args.device))


def noise_now(device) -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from cltune.measure import device as dev
    from pocl_affinity import host_noise  # beside this script

    _, info = dev.select(device)
    if "Portable Computing Language" not in info.platform:
        return f"host noise: not measured ({info.platform} is not PoCL)"
    return host_noise(info.index) + " (measured now, after the runs)"


if __name__ == "__main__":
    main()
