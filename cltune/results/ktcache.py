"""Kernel Tuner's cache file as text: one JSON object whose last key, "cache", maps each setting's
key (its knob values joined by commas) to its result, written a line per result as a tuning goes,
so a file whose run was killed lacks its closing braces. Read here (closing such a file as Kernel
Tuner does) by `cltune replay` (results/recorded.py) and by cltune.kernel_tuner.cache."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

from ..core.errors import UserError

# Kernel Tuner's error classes, by the name its cache stores for a failed setting
ERRORS = ("ErrorConfig", "InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig")
CLOSING = "}\n}"  # what closes the "cache" object and the file


def read_text(path: Path) -> str:
    """The file's text (.gz read through gzip); a one-line UserError when it cannot be read."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            return fh.read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot be read: {exc}") from None


def closed(text: str) -> str:
    """An unfinished cache's text closed as Kernel Tuner closes it (a trailing comma dropped, the
    two braces added); a finished one as it is."""
    text = text.strip()
    if not text or text[-3:] in (CLOSING, "}}}"):
        return text
    return (text[:-1] if text.endswith(",") else text) + CLOSING


def parse(text: str, path: Path):
    """The JSON in `text`; an unfinished cache is closed first, and when the run was killed in the
    middle of a line, that line is dropped (the results before it are kept)."""
    try:
        return json.loads(text)
    except ValueError as exc:
        first = exc
    for attempt in (text, text.rstrip().rsplit("\n", 1)[0]):
        try:
            return json.loads(closed(attempt))
        except ValueError:
            continue
    raise UserError(f"{path}: not JSON (a Kernel Tuner cache, T4 or results file): {first}")


def load(path: str | Path):
    """A JSON file, or an unfinished Kernel Tuner cache, as Python values."""
    path = Path(path)
    return parse(read_text(path), path)


def is_cache(data) -> bool:
    return isinstance(data, dict) and "cache" in data and "tune_params" in data


def checked(data, path: Path) -> dict:
    """`data` when it has a cache's keys in their types; else a one-line UserError naming the key."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a Kernel Tuner cache (a JSON object), got {type(data).__name__}")
    for key, kind, what in (("cache", dict, "an object of results by key"),
                            ("tune_params", dict, "an object of knob -> values")):
        if not isinstance(data.get(key), kind):
            got = "nothing" if key not in data else type(data[key]).__name__
            raise UserError(f"{path}: {key}: expected {what}, got {got}")
    keys = data.get("tune_params_keys", list(data["tune_params"]))
    if not isinstance(keys, list) or any(k not in data["tune_params"] for k in keys):
        raise UserError(f"{path}: tune_params_keys: expected the list of tune_params' names, got {keys!r}")
    return data


def knob_names(data: dict) -> list:
    return list(data.get("tune_params_keys") or data["tune_params"])


def error_name(entry: dict) -> str | None:
    """The name of the error class a cache entry records (`__error__`, or as older caches wrote it,
    the objective's value), or None for a setting that ran."""
    for value in ([entry.get("__error__")] + list(entry.values())):
        if isinstance(value, str) and value in ERRORS:
            return value
    return None


def key(values) -> str:
    """Kernel Tuner's key of a setting: its knob values, in tune_params' order, joined by commas."""
    return ",".join(str(v) for v in values)


def plain(obj):
    """A numpy value, range or tuple as JSON can write it."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (range, tuple, set)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def header_text(meta: dict) -> str:
    """The file's beginning: `meta`'s keys, then `"cache": {` left open for the entries."""
    text = json.dumps({**{k: v for k, v in meta.items() if k != "cache"}, "cache": {}}, indent="", default=plain)
    return text[: -len(CLOSING)]  # json.dumps ends it with `{}\n}`: the cache's "}" and the file's


def entry_text(entry_key: str, entry: dict) -> str:
    """One result as the line Kernel Tuner appends: a newline, `"key": {...}` and a comma."""
    return "\n" + json.dumps({entry_key: entry}, default=plain)[1:-1] + ","


def finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
