"""A config's tables, each parsed and checked: [problem] (and a suite's [[layer]]s), [[setting]]s and
[[space]]s (value lists, device.* values, named constraints). config.py puts them together."""

from __future__ import annotations

import warnings

from ..core.device_refs import NAMES as DEVICE_NAMES, check_ref, is_ref
from ..core.errors import UserError
from ..core.expr import ExprError, parse
from ..core.problem import ACTIVATIONS, Problem
from ..core.space import Setting, Space
from .checker import NAME, REQUIRED, Checker, is_int_or_pair, is_name, is_shape

PROBLEM_KEYS = {"input", "weight", "stride", "padding", "dilation", "groups", "bias", "activation", "pool"}
SETTING_KEYS = {"name", "family", "params", "builtin"}
SPACE_KEYS = {"family", "params", "constraints"}
LAYER_KEYS = PROBLEM_KEYS | {"name", "kind"}
LAYER_KINDS = ("dense", "depthwise")
DEFAULT_FAMILY = "conv2d"


def named_tables(c: Checker, data: dict, key: str, allowed: set):
    """(where, table, name) for each [[key]] table, with unknown keys and duplicate names refused."""
    entries = c.get(data, key, list, "", [], lambda v: all(isinstance(e, dict) for e in v), f"[[{key}]] tables")
    seen = set()
    for i, t in enumerate(entries):
        where = f"{key}[{i}]."
        c.unknown(t, allowed, where)
        name = c.get(t, "name", str, where, REQUIRED, is_name, NAME)
        if name in seen:
            c.fail(f"{where}name", f"duplicate {key} name {name!r}; names must be unique")
        seen.add(name)
        yield where, t, name


def layer_tables(c: Checker, data: dict) -> list:
    out = []
    for where, t, name in named_tables(c, data, "layer", LAYER_KEYS):
        kind = c.get(t, "kind", str, where, "dense", lambda v: v in LAYER_KINDS, f"one of {', '.join(LAYER_KINDS)}")
        out.append((name, kind, problem_table(c, {k: v for k, v in t.items() if k not in ("name", "kind")}, where)))
    return out


def problem_table(c: Checker, t: dict, where: str = "problem.") -> Problem:
    c.unknown(t, PROBLEM_KEYS, where)
    shape = "a list of 4 positive ints"
    x = c.get(t, "input", list, where, REQUIRED, is_shape, shape + " [N, C, H, W]")
    w = c.get(t, "weight", list, where, REQUIRED, is_shape, shape + " [K, C/groups, R, S]")
    pair1 = "an int >= 1 or a pair [h, w]"
    stride = c.get(t, "stride", (int, list), where, 1, is_int_or_pair(1), pair1)
    padding = c.get(t, "padding", (int, list), where, 0, is_int_or_pair(0), "an int >= 0 or a pair [h, w]")
    dilation = c.get(t, "dilation", (int, list), where, 1, is_int_or_pair(1), pair1)
    groups = c.get(t, "groups", int, where, 1, lambda v: v >= 1, "an int >= 1")
    bias = c.get(t, "bias", bool, where, True, expected="true or false")
    activation = c.get(t, "activation", str, where, "none", lambda v: v in ACTIVATIONS,
                       f"one of {', '.join(ACTIVATIONS)}")
    pool = c.get(t, "pool", int, where, 1, lambda v: v in (1, 2), "1 (none) or 2 (2x2 max-pool, stride 2)")
    try:
        return Problem.from_shapes(x, w, tuple(stride) if isinstance(stride, list) else stride,
                                   tuple(padding) if isinstance(padding, list) else padding,
                                   tuple(dilation) if isinstance(dilation, list) else dilation,
                                   groups, bias, activation, pool)
    except ValueError as exc:
        c.fail(where.rstrip("."), str(exc))


def _family(c: Checker, entry: dict, where: str, default) -> tuple:
    """(name, Family) of a [[setting]]'s or [[space]]'s `family` (else `default`)."""
    from ..workloads import get_family  # the families (40 ms of imports): loaded when a config names one

    name = c.get(entry, "family", str, where, default, expected="a kernel family name")
    try:
        return name, get_family(name)
    except UserError as exc:
        c.fail(f"{where}family", str(exc))


def setting_tables(c: Checker, data: dict, default_family: str | None = None) -> list[Setting]:
    """[[setting]]s; `default_family`: the one they default to (a user kernel's), else conv2d."""
    from ..workloads import builtin_settings  # the families (40 ms of imports): loaded when a config names one

    out = []
    for where, entry, name in named_tables(c, data, "setting", SETTING_KEYS):
        named = c.get(entry, "builtin", str, where, None, expected="the name of a built-in setting")
        if named is not None:
            known = builtin_settings()
            if named not in known or {"family", "params"} & set(entry):
                c.fail(f"{where}builtin", f"expected a built-in setting name ({', '.join(known)}) and no "
                                          f"family or params beside it, got {named!r}")
            out.append(Setting.make(name, *known[named]))
            continue
        family_name, family = _family(c, entry, where, default_family or DEFAULT_FAMILY)
        params = c.get(entry, "params", dict, where, {}, expected="a table of parameter values")
        try:
            family.resolve({k: v for k, v in params.items() if not is_ref(v)})
            for v in filter(is_ref, params.values()):
                check_ref(v)
        except UserError as exc:
            c.fail(f"{where}params", str(exc))
        except ValueError as exc:  # ExprError: a device expression that does not parse
            c.fail(f"{where}params", f"{exc} in a device.* value")
        out.append(Setting.make(name, family_name, params))
    return out


def space_tables(c: Checker, data: dict, problem, whole: bool = True,
                 default_family: str | None = None) -> list[Space]:
    """[[space]]s; `default_family`: the one a space without `family` tunes (a user kernel's)."""
    from ..workloads import get_family  # the families (40 ms of imports): loaded when a config names one

    entries = c.get(data, "space", list, "", [], lambda v: all(isinstance(e, dict) for e in v),
                    "[[space]] tables")
    out = []
    for i, entry in enumerate(entries):
        where = f"space[{i}]."
        c.unknown(entry, SPACE_KEYS, where)
        family_name, family = _family(c, entry, where, default_family or REQUIRED)
        table = c.get(entry, "params", dict, where, REQUIRED, lambda v: len(v) > 0,
                      "a non-empty table of parameter value lists")
        params = [(key, space_values(c, family, f"{where}params.{key}", key, values))
                  for key, values in table.items()]
        known = set(table) | set(problem.env()) | set(DEVICE_NAMES)
        constraints = []
        for cname, text in c.get(entry, "constraints", dict, where, {}, expected="a table of named expressions").items():
            if not isinstance(text, str):
                c.fail(f"{where}constraints.{cname}", f"expected an expression string, got {text!r}")
            try:
                constraints.append((cname, parse(text, known)))
            except ExprError as exc:
                c.fail(f"{where}constraints.{cname}", f"{exc} in {text!r}")
        out.append(Space(family_name, tuple(params), tuple(constraints), families=get_family))
        if not out[-1].device_refs:  # else checked when bound to a device
            check_constraints(c, where, out[-1], problem, whole)
    return out


class ConstraintWarning(UserWarning):
    """A space's constraint could not be evaluated for some points (they are skipped)."""


CHECKED_POINTS = 20000  # a larger space is checked on its first points only


def check_constraints(c: Checker, where: str, space: Space, problem, whole: bool) -> None:
    """Say once when a constraint errors for some points; refuse a space no point of which passes
    the constraints (checked exactly for spaces of up to CHECKED_POINTS points)."""
    n, passed, errors, first = space.check_constraints(problem, CHECKED_POINTS)
    if whole and not passed and space.size <= CHECKED_POINTS:
        c.fail(f"{where}constraints", f"reject every one of the space's {space.size} points"
                                      + (f" (first: {first[1]})" if first else ""))
    if first:
        point = " ".join(f"{k}={v}" for k, v in first[0].items())
        warnings.warn(f"{c.path}: {where}constraints: {first[1]} at {point} ({errors} of the {n} points "
                      "checked fail to evaluate; they are skipped)", ConstraintWarning, stacklevel=2)


def space_values(c: Checker, family, where: str, key: str, values) -> tuple:
    """A knob's value list: explicit values, expressions over device.* values among them, or one
    device value naming a whole list (`VEC = "device.vector_widths"`), resolved when bound."""
    if is_ref(values):
        values = [values]
    if not isinstance(values, list) or not values:
        c.fail(where, f"expected a non-empty list of values or a device.* value, got {values!r}")
    if len(set(map(repr, values))) != len(values):
        c.fail(where, f"expected distinct values, got {values!r}")
    for v in values:
        try:
            if is_ref(v):
                check_ref(v)
            else:
                family.resolve({key: v})
        except ExprError as exc:
            c.fail(where, f"{exc} in {v!r}")
        except UserError as exc:
            c.fail(where, str(exc))
    return tuple(values)
