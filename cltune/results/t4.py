"""T4 results JSON (the auto-tuning community's format, which Kernel Tuner writes and the autotuning
methodology tools read): one entry per measured setting. `to_t4` turns a cltune results file into
it; `entry`, `timings` and `document` are the pieces cltune.kernel_tuner.file_utils shares."""

from __future__ import annotations

import json
import math

from ..core.records import TIMED
from . import schema

SCHEMA_VERSION = "1.0.0"
# cltune's statuses -> T4's invalidity
INVALIDITY = {"ok": "correct", "unverified": "correct", "wrong_result": "correctness", "build_error": "compile",
              "launch_error": "runtime", "out_of_bounds": "runtime", "crashed": "runtime", "error": "runtime",
              "timeout": "timeout", "invalid": "constraints"}


def timings(compilation, runtimes, benchmark, framework=0.0, search_algorithm=0.0, validation=0.0) -> dict:
    """An entry's `times` (ms). The compile time is under both names in use: the schema's
    `compilation_time` and `compilation`, which Kernel Tuner writes and its tools read."""
    compilation = _ms(compilation)
    return {"compilation_time": compilation, "compilation": compilation, "runtimes": [float(t) for t in runtimes],
            "benchmark": _ms(benchmark), "framework": _ms(framework), "search_algorithm": _ms(search_algorithm),
            "validation": _ms(validation)}


def entry(configuration: dict, times: dict, invalidity: str, measurements: list, objectives: list,
          timestamp=None) -> dict:
    """One setting's T4 entry; `correctness` is 0 only for a wrong answer."""
    out = {"timestamp": str(timestamp)} if timestamp not in (None, "") else {}
    out.update(configuration=configuration, times=times, invalidity=invalidity,
               correctness=0 if invalidity == "correctness" else 1, measurements=measurements,
               objectives=list(objectives))
    return out


def measurement(name: str, value, unit: str) -> dict | None:
    """{name, value, unit}, or None for a value T4 cannot hold or that says nothing (None, NaN,
    infinity, an empty string)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if value is None or value == "" or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return {"name": name, "value": value, "unit": unit}


def document(entries: list) -> dict:
    return {"schema_version": SCHEMA_VERSION, "results": entries, "metadata": {"timeunit": "milliseconds"}}


def to_t4(df) -> dict:
    """The search rows of a results DataFrame (results.load) as a T4 results document."""
    rows = df[df["phase"] == "search"] if "phase" in df else df
    families = set(rows["family"]) if "family" in rows else set()
    out = []
    for _, r in rows.iterrows():
        conf = json.loads(r["params"])
        if len(families) > 1:
            conf = {"family": r["family"], **conf}
        runtimes = schema.samples(r)
        measurements = []
        if r["status"] in TIMED:
            for name, col, unit in (("time", schema.TIME, "ms"), ("time_median", "run_ms_median", "ms"),
                                    ("GFLOP/s", "gflops", "GFLOP/s"), ("GB/s", "gbps", "GB/s")):
                measurements.append(measurement(name, _number(r.get(col)), unit))
        out.append(entry(conf, timings(r.get("build_ms"), runtimes, sum(runtimes)),
                         INVALIDITY.get(r["status"], "runtime"), [m for m in measurements if m], ["time"],
                         r.get("time", "")))
    return document(out)


def _number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _ms(v) -> float:
    v = _number(v)
    return v if v is not None and math.isfinite(v) else 0.0
