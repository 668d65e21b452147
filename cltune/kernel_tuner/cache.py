"""Kernel Tuner's `cache=` file, read and written in its format (results/ktcache.py) so that
Kernel Tuner and cltune resume each other's runs: a header (device, kernel, problem size, knobs,
objective), then one line per result, appended and flushed as it comes, so the file of a killed
run keeps every result written before it died and still loads."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import UserError
from ..results import ktcache
from .results import (CompilationFailedConfig, ErrorConfig, InvalidConfig, RuntimeFailedConfig,
                      WrongResultConfig)

ERROR_CLASSES = {c.__name__: c for c in (ErrorConfig, InvalidConfig, CompilationFailedConfig, RuntimeFailedConfig)}
WRONG = "wrong_result"  # the `status` by which a wrong answer (stored as RuntimeFailedConfig) is told apart


def cache_key(params: dict, tune_params: dict) -> str:
    """Kernel Tuner's key of a setting: its values in tune_params' order, as text, joined by commas."""
    try:
        return ktcache.key(params[k] for k in tune_params)
    except KeyError as exc:
        raise UserError(f"cache key: the setting {params!r} has no value for the knob {exc.args[0]!r}") from None


def cache_path(path) -> Path:
    """The file Kernel Tuner uses for `cache=path`: the name with ".json" added when it lacks it."""
    text = str(Path(path))
    return Path(text if text.endswith(".json") else text + ".json")


@dataclass
class KTCache:
    """What a cache file holds: results by key (a failed one with `__error__`, an ErrorConfig, and
    `time` = inf), and the header it was written with."""

    path: Path
    entries: dict = field(default_factory=dict)
    tune_params: dict = field(default_factory=dict)
    problem_size: object = None
    kernel_name: str | None = None
    device_name: str | None = None
    objective: str = "time"

    def check(self, kernel_name=None, problem_size=None, tune_params=None, device_name=None) -> None:
        """Refuse, as Kernel Tuner does (one line, a ValueError), a cache whose results belong to
        another device, kernel, problem size or list of knobs. An argument left None is not checked."""
        where = self.path
        if device_name is not None and self.device_name != device_name:
            raise UserError(f"{where}: device_name: the cache holds results for {self.device_name!r}, this run "
                            f"is on {device_name!r}; use another cache file")
        if kernel_name is not None and self.kernel_name != kernel_name:
            raise UserError(f"{where}: kernel_name: the cache holds results for kernel {self.kernel_name!r}, "
                            f"this run tunes {kernel_name!r}")
        mine, theirs = _size(problem_size), _size(self.problem_size)
        if mine is not None and theirs is not None and mine != theirs:
            raise UserError(f"{where}: problem_size: the cache holds results for {self.problem_size!r}, "
                            f"this run has {problem_size!r}")
        if tune_params is not None:
            _check_knobs(where, list(self.tune_params), list(tune_params))


def _size(problem_size):
    """A problem size as a comparable list (an int is a list of one); None for a function."""
    if problem_size is None or callable(problem_size):
        return None
    if isinstance(problem_size, str) or not hasattr(problem_size, "__iter__"):
        problem_size = [problem_size]
    return [v.item() if hasattr(v, "item") else v for v in problem_size]


def _check_knobs(where, cached: list, given: list) -> None:
    if cached == given:
        return
    if sorted(map(str, cached)) == sorted(map(str, given)):
        raise UserError(f"{where}: tune_params_keys: the cache has the knobs in the order {cached}, tune_params "
                        f"in {given}; the order must be the same (a cache key is the values in that order)")
    raise UserError(f"{where}: tune_params_keys: the cache holds results for the knobs {cached}, tune_params "
                    f"has {given}")


def read_cache(path, problem_size=None, tune_params=None) -> KTCache:
    """A cache file (finished, or cut off by a killed run); problem_size and tune_params, when
    given, are checked against it (KTCache.check)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such cache file")
    raw = ktcache.checked(ktcache.load(path), path)
    found = _from_raw(path, raw)
    found.check(problem_size=problem_size, tune_params=tune_params)
    return found


def _from_raw(path: Path, raw: dict) -> KTCache:
    names = ktcache.knob_names(raw)
    entries = {k: _entry(v) for k, v in raw["cache"].items() if isinstance(v, dict)}
    return KTCache(path, entries, {k: raw["tune_params"][k] for k in names}, raw.get("problem_size"),
                   raw.get("kernel_name"), raw.get("device_name"), raw.get("objective") or "time")


def _entry(stored: dict) -> dict:
    """A stored result as a result dict: its error name as an ErrorConfig, a failure's time inf."""
    out = dict(stored)
    name = ktcache.error_name(stored)
    if name is not None:
        out["__error__"] = WrongResultConfig() if stored.get("status") == WRONG else ERROR_CLASSES[name]()
        if not ktcache.finite(out.get("time")):
            out["time"] = math.inf
    return out


def _stored(result: dict) -> dict:
    """A result dict as Kernel Tuner stores it: errors by their class name (a wrong answer, which
    Kernel Tuner has no class for, as RuntimeFailedConfig), no time for a failure."""
    out = {}
    for k, v in result.items():
        if isinstance(v, ErrorConfig) or type(v).__name__ in ERROR_CLASSES:
            name = type(v).__name__
            if isinstance(v, WrongResultConfig):
                out.setdefault("status", WRONG)
            v = name if name in ERROR_CLASSES else "RuntimeFailedConfig"
        out[k] = v
    if "__error__" in out and not ktcache.finite(out.get("time")):
        out.pop("time", None)
    return out


class CacheWriter:
    """Opens (or continues) a cache file in Kernel Tuner's format and appends results to it. The
    file is written from the first `add` (or `close`) once the device is known: `device_name`
    here, or `set_device` after the device is opened. `kernel_string` is not stored (Kernel
    Tuner's cache does not hold it)."""

    def __init__(self, path, kernel_name, kernel_string, problem_size, tune_params, device_name=None,
                 objective="time"):
        self.path = Path(path)
        self.tune_params = dict(tune_params)
        self._fh, self._raw, self._done = None, None, False
        if self.path.is_file() and self.path.stat().st_size:
            self._raw = ktcache.checked(ktcache.load(self.path), self.path)
            self.cache = _from_raw(self.path, self._raw)
            self.cache.check(kernel_name, problem_size, self.tune_params)
        else:
            size = "callable" if callable(problem_size) else problem_size
            self.cache = KTCache(self.path, {}, self.tune_params, size, kernel_name, None, objective or "time")
        self.written = set(self.cache.entries)
        if device_name is not None:
            self.set_device(device_name)

    def set_device(self, device_name: str) -> None:
        """The device the results come from; a continued file must hold results of the same one."""
        if self._raw is not None:
            self.cache.check(device_name=device_name)
        self.cache.device_name = device_name

    def add(self, result: dict) -> None:
        """Appends one result (skipped when its setting is in the file already, as Kernel Tuner
        skips it), flushed and synced to disk before returning."""
        if self._done:
            raise ValueError(f"{self.path}: the cache writer is closed")
        key = cache_key(result, self.tune_params)
        if key in self.written:
            return
        self._open()
        self._fh.write(ktcache.entry_text(key, _stored(result)).encode())
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.written.add(key)

    def close(self) -> None:
        """Closes the JSON (an empty cache stays open, as Kernel Tuner leaves it, so that it can
        continue it) and the file."""
        if self._done or (self._fh is None and (self._raw is not None or self.cache.device_name is None)):
            return
        self._done = True
        self._open()
        self._fh.close()
        if self.written:
            with open(self.path, "r+b") as fh:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) == b",":  # the last entry's comma, replaced by the closing braces
                    fh.seek(-1, os.SEEK_END)
                    fh.write(ktcache.CLOSING.encode())
                    fh.truncate()
        self._fh = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open(self) -> None:
        """Writes the header and the entries the file held (an open cache, ready for appending),
        through a temporary file, then keeps it open for appending."""
        if self._fh is not None:
            return
        c = self.cache
        meta = dict(self._raw) if self._raw is not None else {
            "device_name": c.device_name, "kernel_name": c.kernel_name, "problem_size": c.problem_size,
            "tune_params_keys": list(c.tune_params), "tune_params": c.tune_params, "objective": c.objective}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(ktcache.header_text(meta))
            for key, stored in (self._raw or {}).get("cache", {}).items():
                fh.write(ktcache.entry_text(key, stored))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._fh = open(self.path, "ab")
