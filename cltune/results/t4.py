"""A cltune results file as T4 results JSON (the auto-tuning community's format, which Kernel
Tuner writes and the autotuning methodology tools read): one entry per measured setting."""

from __future__ import annotations

import json

from ..core.records import TIMED

SCHEMA_VERSION = "1.0.0"
# cltune's statuses -> T4's invalidity
INVALIDITY = {"ok": "correct", "unverified": "correct", "wrong_result": "correctness", "build_error": "compile",
              "launch_error": "runtime", "out_of_bounds": "runtime", "crashed": "runtime", "error": "runtime",
              "timeout": "timeout", "invalid": "constraints"}


def to_t4(df) -> dict:
    """The search rows of a results DataFrame (results.load) as a T4 results document."""
    from . import schema

    rows = df[df["phase"] == "search"] if "phase" in df else df
    families = set(rows["family"]) if "family" in rows else set()
    out = []
    for _, r in rows.iterrows():
        conf = json.loads(r["params"])
        if len(families) > 1:
            conf = {"family": r["family"], **conf}
        runtimes = schema.samples(r)
        ok = r["status"] in TIMED
        measurements = []
        if ok:
            measurements.append({"name": "time", "value": float(r[schema.TIME]), "unit": "ms"})
            for name, col, unit in (("time_median", "run_ms_median", "ms"), ("GFLOP/s", "gflops", "GFLOP/s"),
                                    ("GB/s", "gbps", "GB/s")):
                v = r.get(col)
                if v == v and v is not None:
                    measurements.append({"name": name, "value": float(v), "unit": unit})
        out.append({
            "timestamp": str(r.get("time", "")),
            "configuration": conf,
            "times": {"compilation_time": _ms(r.get("build_ms")), "runtimes": runtimes,
                      "benchmark": float(sum(runtimes)), "framework": 0.0, "search_algorithm": 0.0,
                      "validation": 0.0},
            "invalidity": INVALIDITY.get(r["status"], "runtime"),
            "correctness": 0 if r["status"] == "wrong_result" else 1,
            "measurements": measurements,
            "objectives": ["time"],
        })
    return {"schema_version": SCHEMA_VERSION, "results": out}


def _ms(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return 0.0
    return v if v == v else 0.0
