"""Typed access to a TOML file's tables: every mistake is one line, `file: key: expected ..., got ...`."""

from __future__ import annotations

import math

from ..core.errors import UserError


class Checker:
    """Typed access to TOML tables that reports `file: key: expected ..., got ...`."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, msg: str):
        raise UserError(f"{self.path}: {key}: {msg}")

    def unknown(self, table: dict, allowed: set, where: str):
        for key in table:
            if key not in allowed:  # a key TOML quoted ("a\nb") is shown quoted: the error stays one line
                shown = key if key.isprintable() else repr(key)
                self.fail(f"{where}{shown}", f"unknown key; expected one of {', '.join(sorted(allowed))}")

    def get(self, table: dict, key: str, kinds, where: str, default=None, check=None, expected=""):
        if key not in table:
            if default is REQUIRED:
                self.fail(f"{where}{key}", f"missing; expected {expected}")
            return default
        value = table[key]
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        bad_bool = isinstance(value, bool) and bool not in kinds
        if not isinstance(value, kinds) or bad_bool or (check and not check(value)):
            self.fail(f"{where}{key}", f"expected {expected}, got {value!r}")
        return value


REQUIRED = object()
NAME = "a non-empty string without control characters"


def is_name(v: str) -> bool:
    return v.strip() != "" and v.isprintable()


def finite(test):
    """A number check that also refuses NaN and infinity (TOML has both: nan, inf)."""
    return lambda v: math.isfinite(v) and test(v)


def is_shape(v) -> bool:
    return (isinstance(v, list) and len(v) == 4
            and all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in v))


def is_int_or_pair(min_value: int):
    def ok(v):
        items = v if isinstance(v, list) else [v]
        return (len(items) in (1, 2) and (isinstance(v, list) == (len(items) == 2))
                and all(isinstance(i, int) and not isinstance(i, bool) and i >= min_value for i in items))
    return ok
