"""What a deployment holds: per device and per shape the setting to run, and a default for devices
nobody tuned. The rules (docs/deploy.md):

- a device is matched by its name; when its rows come from several drivers, the newest driver's;
- exact: the device's fastest verified setting for the shape (the re-ranking's rows first);
- nearest: for a shape the device has no entry for, the entry of its nearest tuned shape (the rule of
  `setting="best"`: results/nearest.py) whose family accepts the shape, when within MAX_DISTANCE;
- default: the setting with the best geometric mean, over the shapes every device measured, of its
  time relative to each device's best (as CLBlast and Kernel Tuner choose); when no setting was
  timed on every such pair (a database holds winners only), the setting that won most entries.
Each entry's options are computed for its own shape by the family (realize.py), never copied from
another shape: conv families bake the shape into their macros."""

from __future__ import annotations

import json
import math

from ..core.errors import UserError
from ..core.space import Setting
from ..core.version import __version__
from ..results.nearest import accepts, nearest, problem_from_key
from .realize import defines_of, realize
from .user_kernel import realize_kernel

# 2: a kernel of your own deployed with its config has launches (arguments local:BYTES too)
SCHEMA_VERSION = 2
# Nearest: the log2 distance of in/out channels and height/width, summed (plus 0.5 for another
# activation, 1 for another pooling); 4 allows e.g. each of the four within 2x.
MAX_DISTANCE = 4.0


def ident(m: dict) -> tuple[str, str]:
    return m["family"], json.dumps(m["params"], sort_keys=True)


def newest_driver(ms: list[dict]) -> dict[str, list[dict]]:
    """{device name: its measurements of the newest driver it was measured with}."""
    by_device: dict[str, list[dict]] = {}
    for m in ms:
        by_device.setdefault(m["device"], []).append(m)
    out = {}
    for name, rows in sorted(by_device.items()):
        driver = max(rows, key=lambda m: m["measured"] or "")["driver"]
        out[name] = [m for m in rows if m["driver"] == driver]
    return out


def winners(rows: list[dict]) -> dict[str, dict]:
    """{problem: its fastest measurement}, re-ranking rows first."""
    out: dict[str, dict] = {}
    for prob in sorted({m["problem"] for m in rows}):
        group = [m for m in rows if m["problem"] == prob]
        group = [m for m in group if m.get("rerank")] or group
        out[prob] = min(group, key=lambda m: m["run_ms"])
    return out


def shape_of(key: str, where: str) -> object:
    problem = problem_from_key(key)
    if problem is None:
        raise UserError(f"{where}: {key!r} is not a conv problem key "
                        f"(such as n1_c8_h16_w16_k8_r3_s3_st1x1_p1x1_d1x1_g1)")
    return problem


def raw_entry(m: dict) -> dict:
    """A setting of a kernel that is no conv problem: with its config (a kernel of your own,
    `--config`), made concrete by user_kernel.py, options checked against the row's; without one
    (or Kernel Tuner's), the options it was measured with, as recorded, and no launches."""
    if m.get("kernel_problem") is not None:
        return same_options(m, realize_kernel(m["kernel_problem"], m["setting"], m["params"]))
    options = m.get("build_options") or ""
    return {"options": options, "defines": defines_of(options.split()), "sources": m.get("sources") or [],
            "source_hash": m.get("source_hash"), "launches": None}


def same_options(m: dict, entry: dict) -> dict:
    """`entry`, when its options are those the row was built with (or the row records none)."""
    if m.get("build_options") and m["build_options"] != entry["options"]:
        raise UserError(f"{m['source']}: {m['setting']} on {m['problem']} was built with "
                        f"{m['build_options']!r}, this cltune builds {entry['options']!r}: tune again with it")
    return entry


def exact_entry(m: dict) -> dict:
    if m.get("raw"):
        return {"problem": m["problem"], "match": "exact", "setting": m["setting"], "family": m["family"],
                "params": m["params"], "run_ms": m["run_ms"], **raw_entry(m)}
    entry = same_options(m, realize(m["family"], m["params"], shape_of(m["problem"], m["source"])))
    return {"problem": m["problem"], "match": "exact", "setting": m["setting"], "family": m["family"],
            "params": m["params"], "run_ms": m["run_ms"], **entry}


def near_entry(key: str, best: dict[str, dict], max_distance: float) -> dict | None:
    """The entry for an untuned shape from the nearest tuned one, or None when none is near enough."""
    problem = shape_of(key, "--shape")
    hit = nearest(problem, list(best.values()))
    if hit is None or hit[1] > max_distance:
        return None
    m, d = hit
    return {"problem": key, "match": "nearest", "tuned_problem": m["problem"], "distance": round(d, 3),
            "setting": m["setting"], "family": m["family"], "params": m["params"], "run_ms": m["run_ms"],
            **realize(m["family"], m["params"], problem)}


def setting_times(devices: dict[str, list[dict]]) -> dict:
    """{(device, problem, ident): ms}: a setting's fastest time, its re-ranking's when it was
    re-ranked (as winners() ranks)."""
    times: dict = {}
    for name, rows in devices.items():
        for m in sorted(rows, key=lambda m: not m.get("rerank")):  # re-ranking rows first
            k = (name, m["problem"], ident(m))
            if k not in times or m.get("rerank") or not times[k][1]:
                times[k] = (min(times[k][0], m["run_ms"]) if k in times else m["run_ms"], bool(m.get("rerank")))
    return {k: t for k, (t, _) in times.items()}


def default_ranking(devices: dict[str, list[dict]]) -> tuple[str, list[dict]]:
    """(the rule used, candidate settings best first) for devices nobody tuned."""
    times = setting_times(devices)
    best = {(d, p): min(t for (d2, p2, _), t in times.items() if (d2, p2) == (d, p)) for d, p, _ in times}
    common = set.intersection(*({m["problem"] for m in rows} for rows in devices.values()))
    pairs = [(d, p) for d in devices for p in sorted(common)]
    first = {ident(m): m for rows in devices.values() for m in rows}
    scored = []
    for i, m in first.items():
        rel = [times.get((d, p, i), math.nan) / best[(d, p)] for d, p in pairs]
        if pairs and not any(math.isnan(r) for r in rel):
            scored.append((math.exp(sum(map(math.log, rel)) / len(rel)), i))
    wins: dict = {}
    for rows in devices.values():
        for m in winners(rows).values():
            wins[ident(m)] = wins.get(ident(m), 0) + 1
    rest = sorted((i for i in first if i not in {s[1] for s in scored}), key=lambda i: (-wins.get(i, 0), i))
    ranked = [dict(first[i], score=round(s, 4)) for s, i in sorted(scored)] + [first[i] for i in rest]
    return ("geomean" if scored else "most_wins"), ranked


def default_entry(key: str, ranked: list[dict], ms: list[dict]) -> dict | None:
    """The first ranked setting whose family accepts the shape, made concrete for it (a raw kernel's:
    the first measured on the shape, with the options it was measured with)."""
    if ranked and ranked[0].get("raw"):
        measured = {ident(m): m for m in ms if m["problem"] == key}
        hit = next((measured[ident(m)] for m in ranked if ident(m) in measured), None)
        return hit and {"problem": key, "match": "default", "setting": hit["setting"], "family": hit["family"],
                        "params": hit["params"], **raw_entry(hit)}
    problem = shape_of(key, "--shape")
    for m in ranked:
        if accepts(Setting.make(m["setting"], m["family"], m["params"]), problem, None):
            return {"problem": key, "match": "default", "setting": m["setting"], "family": m["family"],
                    "params": m["params"], **realize(m["family"], m["params"], problem)}
    return None


def build(ms: list[dict], kernel: str, shapes=(), max_distance: float = MAX_DISTANCE) -> dict:
    """The deployment of one kernel (the JSON tuning file's content) from its measurements."""
    raw = any(m.get("raw") for m in ms)
    if raw and shapes:
        raise UserError(f"--shape {shapes[0]}: the nearest tuned shape is for conv kernels; {kernel}'s shapes "
                        f"are not conv problems (deploy its tuned shapes only)")
    devices = newest_driver(ms)
    bests = {name: winners(rows) for name, rows in devices.items()}
    keys = sorted({p for b in bests.values() for p in b} | set(shapes))
    out_devices = []
    for name, rows in devices.items():
        entries = []
        for key in keys:
            entry = exact_entry(bests[name][key]) if key in bests[name] else \
                None if raw else near_entry(key, bests[name], max_distance)
            if entry is not None:
                entries.append(entry)
        out_devices.append({"device": name, "driver": rows[0]["driver"], "platform": rows[0]["platform"],
                            "entries": entries})
    for key in shapes:
        if not any(e["problem"] == key for d in out_devices for e in d["entries"]):
            raise UserError(f"--shape {key}: no tuned shape is near enough on any device (same filter, stride, "
                            f"dilation and kind, distance <= {max_distance:g}); tune it, or raise --max-distance")
    rule, ranked = default_ranking(devices)
    defaults = [e for e in (default_entry(k, ranked, ms) for k in keys) if e is not None]
    return {"schema_version": SCHEMA_VERSION, "generator": f"cltune {__version__}", "kernel": kernel,
            "max_distance": max_distance, "device_names": "kernel_tuner" if any(m.get("kt") for m in ms) else "cltune",
            "devices": out_devices,
            "default": {"rule": rule, "entries": defaults}}
