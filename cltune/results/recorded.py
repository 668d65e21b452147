"""Recorded tuning spaces, read as a replay sees them: the knobs' value lists, every valid point
(what was recorded), and each point's time, or its failure, with the compile and run time it
cost. Three formats: Kernel Tuner's cache (.json or .json.gz, the FAIR Benchmark Hub's spaces),
the community's T4 results JSON, and a cltune results file of an exhaustive sweep."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import UserError
from ..core.records import TIMED
from . import ktcache


@dataclass(frozen=True)
class Point:
    time: float | None  # ms, None: the point failed (build, launch or run)
    cost_s: float  # what measuring it cost: its recorded compile and benchmark time, in seconds


@dataclass
class Recorded:
    """A recorded space: knob names and value lists, and the points, keyed by their value tuple."""

    name: str
    params: list  # [(knob, (value, ...)), ...]
    points: dict = field(default_factory=dict)  # tuple of values, in params order -> Point
    kernel: str = ""  # the kernel's name, where the file says it (a Kernel Tuner cache's kernel_name)
    device: str = ""  # the device's name, where the file says it (a cache's device_name, a results file's)

    @property
    def optimum(self) -> float:
        times = [p.time for p in self.points.values() if p.time is not None]
        if not times:
            raise UserError(f"{self.name}: no point of the recorded space ran; nothing to replay")
        return min(times)

    @property
    def failed(self) -> int:
        return sum(p.time is None for p in self.points.values())

    def describe(self) -> str:
        product = math.prod(len(v) for _, v in self.params)
        return (f"{self.name}: {len(self.points)} valid points of {product}, {self.failed} failed, "
                f"optimum {self.optimum:.4g} ms")


def load(path: str | Path) -> Recorded:
    """A recorded space from a Kernel Tuner cache, a T4 results file or a cltune results CSV."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if path.suffix == ".csv":
        return _from_cltune(path)
    data = ktcache.load(path)  # a Kernel Tuner cache whose run was killed is closed as Kernel Tuner does
    if ktcache.is_cache(data):
        return _from_kernel_tuner(path, ktcache.checked(data, path))
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return _from_t4(path, data)
    raise UserError(f"{path}: neither a Kernel Tuner cache (tune_params, cache) nor T4 results (results)")


def _from_kernel_tuner(path: Path, data: dict) -> Recorded:
    keys = ktcache.knob_names(data)
    _kt_shapes(path, data, keys)
    rec = Recorded(_stem(path), [(k, tuple(data["tune_params"][k])) for k in keys],
                   kernel=_text(data.get("kernel_name")), device=_text(data.get("device_name")))
    index = {k: {str(v): v for v in vals} for k, vals in rec.params}
    for key, entry in data["cache"].items():
        if not isinstance(entry, dict):
            continue
        parts = key.split(",")
        if len(parts) != len(keys):
            raise UserError(f"{path}: cache key {key!r}: expected {len(keys)} values ({', '.join(keys)}) "
                            f"joined with ',', got {len(parts)}")
        try:
            values = tuple(entry[k] if _scalar(entry.get(k, [])) else index[k][s] for k, s in zip(keys, parts))
        except KeyError:
            continue  # a value tune_params does not list: not a point of this space
        error = ktcache.error_name(entry)
        if error == "InvalidConfig":
            continue  # refused by its restrictions: not a point of the space
        t = entry.get("time") if error is None else None
        cost = (_num(entry.get("compile_time")) + _num(entry.get("benchmark_time"))
                + _num(entry.get("verification_time"))) / 1e3
        ok = isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t < 1e19
        rec.points[values] = Point(float(t) if ok else None, cost)
    return rec


def _kt_shapes(path: Path, data: dict, keys: list) -> None:
    """A Kernel Tuner cache's tune_params and cache in the shapes read here (else one line naming
    the file and the key)."""
    params = data["tune_params"]
    if not isinstance(params, dict) or not all(isinstance(params.get(k), list) and params[k]
                                               and all(_scalar(x) for x in params[k]) for k in keys):
        raise UserError(f"{path}: tune_params: expected an object of knob names and non-empty lists of "
                        f"numbers, strings or booleans, got {_what(params)}")
    if not isinstance(data["cache"], dict):
        raise UserError(f"{path}: cache: expected an object of points, each keyed by its knob values joined "
                        f"with ',', got {_what(data['cache'])}")


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _scalar(value) -> bool:
    return value is None or isinstance(value, (int, float, str))


def _what(value) -> str:
    return f"a {type(value).__name__}" if isinstance(value, (dict, list)) else repr(value)[:60]


def _t4_checked(path: Path, i: int, r: dict) -> None:
    """One T4 result's configuration values and times in the shapes read here (else one line)."""
    for name, value in r["configuration"].items():
        if not _scalar(value):
            raise UserError(f"{path}: results[{i}].configuration.{name}: expected a number, a string or a "
                            f"boolean, got {_what(value)}")
    times = r.get("times") or {}
    if not isinstance(times, dict) or not isinstance(times.get("runtimes") or [], list):
        raise UserError(f"{path}: results[{i}].times: expected an object with a list of runtimes, got {_what(times)}")


def _from_t4(path: Path, data: dict) -> Recorded:
    rows = []
    for i, r in enumerate(data["results"]):
        if isinstance(r, dict) and isinstance(r.get("configuration"), dict):
            _t4_checked(path, i, r)
            rows.append(r)
    if not rows:
        raise UserError(f"{path}: T4 results without any configuration")
    names = list(dict.fromkeys(n for r in rows for n in r["configuration"]))  # a knob a row lacks: None
    values: dict = {n: [] for n in names}
    rec = Recorded(_stem(path), [])
    for r in rows:
        conf = {n: r["configuration"].get(n) for n in names}
        if r.get("invalidity") == "constraints":
            continue
        for n in names:
            if conf[n] not in values[n]:
                values[n].append(conf[n])
        times = r.get("times") or {}
        cost = (_num(times.get("compilation_time", times.get("compilation"))) + _num(times.get("benchmark"))
                + sum(_num(x) for x in times.get("runtimes") or [] if not times.get("benchmark"))) / 1e3
        t = _t4_time(r) if r.get("invalidity", "correct") == "correct" else None
        rec.points[tuple(conf[n] for n in names)] = Point(t, cost)
    rec.params = [(n, tuple(sorted(values[n], key=_order))) for n in names]
    return rec


def _t4_time(r: dict) -> float | None:
    wanted = (r.get("objectives") or ["time"])[0]
    for m in r.get("measurements") or []:
        if isinstance(m, dict) and m.get("name") == wanted and isinstance(m.get("value"), (int, float)):
            return float(m["value"])
    runtimes = (r.get("times") or {}).get("runtimes")
    return float(min(runtimes)) if runtimes else None


def _from_cltune(path: Path) -> Recorded:
    from . import rows, schema  # pandas (1.1 s) comes with it: imported on first use

    df = rows.load(path)
    df = df[df["phase"] == "search"] if "phase" in df else df
    df = df[df["status"] != "invalid"]
    if not len(df):
        raise UserError(f"{path}: no measured rows to replay")
    families = sorted(set(df["family"]))
    points, names = [], []
    for _, row in df.iterrows():
        values = json.loads(row["params"])
        if len(families) > 1:
            values = {"family": row["family"], **values}
        names += [n for n in values if n not in names]
        timed = row["status"] in TIMED and row.get(schema.TIME) == row.get(schema.TIME)
        cost = (_num(row.get("wall_ms")) or _num(row.get("build_ms")) + sum(schema.samples(row))) / 1e3
        points.append((values, float(row[schema.TIME]) if timed else None, cost))
    devices = sorted(set(df["device"].dropna())) if "device" in df else []
    rec = Recorded(_stem(path), [], kernel=families[0].removeprefix("kernel:") if len(families) == 1 else "",
                   device=devices[0] if len(devices) == 1 else "")
    seen: dict = {n: [] for n in names}
    for values, t, cost in points:
        key = tuple(values.get(n) for n in names)
        for n, v in zip(names, key):
            if v not in seen[n]:
                seen[n].append(v)
        old = rec.points.get(key)
        if old is None or (t is not None and (old.time is None or t < old.time)):
            rec.points[key] = Point(t, cost)
    rec.params = [(n, tuple(sorted(seen[n], key=_order))) for n in names]
    return rec


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".csv"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return f"{path.parent.name}/{name}" if path.parent.name else name


def _num(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def _order(value):
    """Numbers before strings, each in their own order (a value list as a config would write it)."""
    if value is None:
        return (-1, 0, "")
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def median_quartiles(values: list) -> tuple:
    """(median, first quartile, third quartile)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q[0], q[2]
