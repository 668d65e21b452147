"""Roofline figures of one results row: a pure function of plain values (no pandas, no OpenCL)."""

from __future__ import annotations

import math
from typing import Mapping

from .schema import TIME

COLUMNS = ("intensity", "gflops", "gbps", "peak_gflops", "peak_gbps", "roof_gflops",
           "compute_share", "bandwidth_share", "roof_share", "bound")


def _num(value) -> float | None:
    """A positive finite float, else None (missing, NaN, zero: a failed row has no times)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def roof(intensity: float, peak_gflops: float, peak_gbps: float) -> float:
    """The attainable GFLOP/s at this arithmetic intensity (FLOP/byte): min(compute, bandwidth)."""
    return min(peak_gflops, intensity * peak_gbps)


def figures(row: Mapping, peaks: Mapping | None = None) -> dict:
    """Intensity (flops / min_bytes), achieved GFLOP/s and GB/s from the ranking time (TIME), and with peaks
    ({"gflops", "gbps"}) the shares (fractions, 1.0 = at the peak) of peak compute, of peak
    bandwidth and of the roof at this intensity, plus which roof bounds it ("compute"/"memory")."""
    out: dict = dict.fromkeys(COLUMNS)
    flops, nbytes, ms = _num(row.get("flops")), _num(row.get("min_bytes")), _num(row.get(TIME))
    if flops and nbytes:
        out["intensity"] = flops / nbytes
    if ms:
        out["gflops"] = flops / (ms * 1e6) if flops else None
        out["gbps"] = nbytes / (ms * 1e6) if nbytes else None
    pf = _num(peaks.get("gflops")) if peaks else None
    pb = _num(peaks.get("gbps")) if peaks else None
    out["peak_gflops"], out["peak_gbps"] = pf, pb
    if pf and pb and out["intensity"]:
        out["roof_gflops"] = roof(out["intensity"], pf, pb)
        out["bound"] = "compute" if out["intensity"] * pb >= pf else "memory"
    if out["gflops"] is not None:
        out["compute_share"] = out["gflops"] / pf if pf else None
        out["roof_share"] = out["gflops"] / out["roof_gflops"] if out["roof_gflops"] else None
    if out["gbps"] is not None and pb:
        out["bandwidth_share"] = out["gbps"] / pb
    return out
