"""Kernel Tuner's integration helpers: `store_results` keeps the best settings of each tuning
(per device and problem size) in one JSON results file (Kernel Tuner's format 1.0, so either tool
reads the other's), and `create_device_targets` turns that file into a C header that defines the
knobs for the device named at compile time (-DTARGET_<device>), or a default that does well on all."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from ..core.errors import UserError
from ..results.guard import check_output
from ..results.ktcache import load, plain
from .util import get_instance_string, get_objective_defaults

VERSION = "1.0"


def device_label(name: str) -> str:
    """A device name as the file and the header's TARGET_ macros write it: each run of characters
    other than letters and digits becomes one underscore."""
    return re.sub("[^0-9a-zA-Z]+", "_", str(name).strip())


def size_label(problem_size) -> str:
    """A problem size as the file writes it: its dimensions joined by "x" ("1024x1024")."""
    if isinstance(problem_size, str):
        return problem_size
    if not isinstance(problem_size, (list, tuple)):
        problem_size = (problem_size,)
    return "x".join(str(v) for v in problem_size)


class TuneResults:
    """A results file written by store_results (or Kernel Tuner's): `meta`, `data` (one entry per
    stored setting), `objective`, `objective_higher_is_better`."""

    def __init__(self, results_filename):
        path = Path(results_filename)
        if not path.is_file():
            raise UserError(f"{path}: no such results file")
        self.meta, self.data = _read(path)
        if not self.data:
            raise UserError(f"{path}: data: the file holds no results")
        self.objective = self.meta["objective"]
        self.objective_higher_is_better = bool(self.meta.get("objective_higher_is_better", False))

    def get_best_config(self, gpu_name="default", problem_size=None) -> dict:
        """The knobs of the best stored setting for this device and problem size; without a problem
        size (or one not stored), the setting stored most often for the device, the best of those in
        total; for a device not in the file, the same over every device."""
        rows = [r for r in self.data if r["device_name"] == device_label(gpu_name)]
        if not rows:
            return _most_common(self.data, self.objective, self.objective_higher_is_better)
        size = size_label(problem_size) if problem_size else None
        exact = [r for r in rows if size is not None and r["problem_size"] == size]
        if exact:
            pick = max if self.objective_higher_is_better else min
            return dict(pick(exact, key=lambda r: r[self.objective])["tunable_parameters"])
        return _most_common(rows, self.objective, self.objective_higher_is_better)


def _most_common(rows: list, objective: str, higher: bool) -> dict:
    count, total, params = {}, {}, {}
    for r in rows:
        key = get_instance_string(r["tunable_parameters"])
        count[key] = count.get(key, 0) + 1
        total[key] = total.get(key, 0) + r[objective]
        params[key] = r["tunable_parameters"]
    top = max(count.values())
    best = (max if higher else min)((k for k in count if count[k] == top), key=lambda k: total[k])
    return dict(params[best])


def store_results(results_filename, kernel_name, kernel_string, tune_params, problem_size, results, env, top=3,
                  objective=None, objective_higher_is_better=None) -> None:
    """Adds to `results_filename` the settings within `top` percent of the best `objective` (a
    failed one never), for env["device_name"] and this problem size, replacing what the file held
    for that pair. A new file also keeps the kernel's source."""
    objective, higher = get_objective_defaults(objective, objective_higher_is_better)
    path = Path(results_filename)
    if not isinstance(env, dict) or not env.get("device_name"):
        raise UserError("env: expected tune_kernel's env, with device_name")
    good = [r for r in results if "__error__" not in r and _finite(r.get(objective))]
    if not good:
        raise UserError(f"results: no setting has a {objective!r} to store (did every one fail?)")
    best = (max if higher else min)(r[objective] for r in good)
    margin = top / 100.0
    keep = [r for r in good if (r[objective] >= best * (1 - margin) if higher else r[objective] <= best * (1 + margin))]
    if path.is_file():
        meta, data = _read(path)
        _check_same(path, meta, kernel_name, tune_params, objective)
    else:
        meta, data = _new_meta(kernel_name, kernel_string, tune_params, objective, higher), []
    device, size = device_label(env["device_name"]), size_label(problem_size)
    data = [d for d in data if not (d["device_name"] == device and d["problem_size"] == size)]
    for r in keep:
        missing = [k for k in tune_params if k not in r]
        if missing:
            raise UserError(f"results: a result lacks the knob {missing[0]!r} of tune_params")
        data.append({"device_name": device, "problem_size": size,
                     "tunable_parameters": {k: r[k] for k in tune_params}, objective: r[objective]})
    _write(path, {**meta, "data": data})


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_same(path: Path, meta: dict, kernel_name, tune_params, objective) -> None:
    if meta["kernel_name"] != kernel_name:
        raise UserError(f"{path}: kernel_name: the file holds results of kernel {meta['kernel_name']!r}, "
                        f"not {kernel_name!r}")
    extra = [k for k in tune_params if k not in meta["tunable_parameters"]]
    if extra:
        raise UserError(f"{path}: tunable_parameters: the file's are {meta['tunable_parameters']}, which lack "
                        f"{extra[0]!r} of tune_params")
    if meta["objective"] != objective:
        raise UserError(f"{path}: objective: the file ranks by {meta['objective']!r}, not {objective!r}")


def _new_meta(kernel_name, kernel_string, tune_params, objective, higher) -> dict:
    meta = {"version_number": VERSION, "kernel_name": kernel_name}
    source = _source_text(kernel_string)
    if source is not None:
        meta["kernel_string"] = source
    return {**meta, "objective": objective, "objective_higher_is_better": bool(higher),
            "tunable_parameters": list(tune_params)}


def _source_text(kernel_string):
    """The kernel's text: as given, or read from the file it names; None for a function or a list."""
    if isinstance(kernel_string, Path) or (isinstance(kernel_string, str) and len(kernel_string) < 250
                                           and "\n" not in kernel_string and Path(kernel_string).is_file()):
        return Path(kernel_string).read_text()
    return kernel_string if isinstance(kernel_string, str) and kernel_string else None


def _write(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, indent="", default=plain))
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"{path}: cannot be written: {exc.strerror or exc}") from None


def _read(path: Path) -> tuple[dict, list]:
    """(meta, data) of a results file, each key checked: a one-line UserError naming the file and key."""
    doc = load(path)
    if not isinstance(doc, dict) or "version_number" not in doc:
        raise UserError(f"{path}: version_number: missing; not a results file of store_results")
    if doc["version_number"] != VERSION:
        raise UserError(f"{path}: version_number: {doc['version_number']!r}, expected {VERSION!r}")
    for key, kind in (("kernel_name", str), ("objective", str), ("tunable_parameters", list), ("data", list)):
        if not isinstance(doc.get(key), kind):
            raise UserError(f"{path}: {key}: expected a {kind.__name__}, got {type(doc.get(key)).__name__}")
    knobs, objective = doc["tunable_parameters"], doc["objective"]
    for i, entry in enumerate(doc["data"]):
        need = {"device_name": str, "problem_size": str, "tunable_parameters": dict, objective: (int, float)}
        for key, kind in need.items():
            if not isinstance(entry, dict) or not isinstance(entry.get(key), kind):
                raise UserError(f"{path}: data[{i}].{key}: missing or not a {getattr(kind, '__name__', 'number')}")
        lacking = [k for k in knobs if k not in entry["tunable_parameters"]]
        if lacking:
            raise UserError(f"{path}: data[{i}].tunable_parameters: lacks {lacking[0]!r}")
    meta = {k: v for k, v in doc.items() if k != "data"}
    return meta, doc["data"]


def create_device_targets(header_filename, results_filename, objective=None, objective_higher_is_better=None):
    """Writes a C header choosing the knobs per device: `#ifdef TARGET_<device>` blocks (compile
    with -DTARGET_<device>), else a default that does well across devices and sizes; all inside
    `#ifndef kernel_tuner`, so a tuning's own defines win. The file's objective ranks."""
    get_objective_defaults(objective, objective_higher_is_better)  # the same checks as store_results
    results = TuneResults(results_filename)
    check_output(header_filename, [results_filename], option="header_filename")
    devices = sorted({r["device_name"] for r in results.data})
    blocks = []
    for i, device in enumerate(devices):
        test = f"#ifdef TARGET_{device}" if i == 0 else f"#elif defined(TARGET_{device})"
        blocks.append(test + "\n" + _defines(results.get_best_config(device)))
    default = _defines(_most_common(results.data, results.objective, results.objective_higher_is_better))
    text = ("/* header file generated by cltune (Kernel Tuner's create_device_targets), do not modify by hand */\n"
            "#pragma once\n#ifndef kernel_tuner /* only use these when not tuning */\n\n"
            + "\n".join(blocks) + "\n#else /* default configuration */\n" + default
            + "#endif /* GPU TARGETS */\n\n#endif /* kernel_tuner */\n")
    try:
        Path(header_filename).write_text(text)
    except OSError as exc:
        raise UserError(f"{header_filename}: cannot be written: {exc.strerror or exc}") from None


def _defines(params: dict) -> str:
    return "".join(f"#define {k} {_c_value(v)}\n" for k, v in params.items())


def _c_value(v) -> str:
    """A knob's value as C reads it: a bool as 1 or 0, a number as Python writes it, text as it is."""
    return str(int(v)) if isinstance(v, bool) else str(v)
