"""Load and validate a TOML sweep file into a frozen Config; every mistake names file, key and expectation."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .device_values import NAMES as DEVICE_NAMES
from .device_values import check_ref, is_ref
from .errors import UserError
from .paths import data_dir
from .problem import ACTIVATIONS, Problem
from .records import Timing
from .space import PROBLEM_NAMES, Setting, Space

DEFAULT_CONFIG = "mali_t860_conv3x3"
TOP_KEYS = {"name", "description", "problem", "run", "setting", "space", "layer"}
PROBLEM_KEYS = {"input", "weight", "stride", "padding", "dilation", "groups", "bias", "activation", "pool"}
RUN_KEYS = {"warmup", "repeat", "min_time_ms", "max_repeat", "noisy_cv", "rtol", "atol", "seed",
            "baseline", "strategy", "budget", "time_limit_s", "rerank", "rerank_repeat", "timeout_s",
            "warmup_ms", "adaptive", "top_repeat", "precision", "second_window_s", "windows"}
# Warm-up by kernel time as well as by count (see Timing), off by default: the verification launch
# warms a setting up, the device's first DEVICE_WARMUP_MS in a process warm the device up, and the
# ranking takes each point's fastest launch. On PoCL 3.1 (2 cores), 5 warm sweeps of kt_compare each
# way gave run-vs-run Spearman 0.957-0.980 with no more warm-up and 0.907-0.978 with 10 ms per
# setting; cold sweeps were no better with it (0.787-0.912 against 0.690-0.952).
WARMUP_MS = 0.0
# Adaptive points are timed in windows at least this many seconds apart (see Timing). On PoCL 3.1 (2-core
# VM), the slow phases seen in cold sweeps of kt_compare lasted 0.3-0.6 s and covered 3-4 points in
# a row, at 1.2-2.3x; 0 times each point in one window.
SECOND_WINDOW_S = 1.0
# ... in up to this many windows: a point near the top that never settles (top_repeat launches) gets
# one launch a window. On a 2-core Intel Xeon VM of a busy host (every kernel 1.1-1.7x slower for
# seconds at a time), kt_compare's 48 points with the same 12 launches each in 1, 3 or 12 passes over
# the space repeated at Spearman 0.77-0.82, 0.75-0.93 and 0.98-0.99 (benchmarks/window_passes.py);
# cltune's sweeps (cold, warm, warm) at 0.69-0.97 with 10 windows (two trios), 0.71-0.87 with 4 or 6
# (three), 0.64-0.88 with 2 (two), with no more launches or wall.
WINDOWS = 10
SETTING_KEYS = {"name", "family", "params", "builtin"}
SPACE_KEYS = {"family", "params", "constraints"}
LAYER_KEYS = PROBLEM_KEYS | {"name", "kind"}
LAYER_KINDS = ("dense", "depthwise")
DEFAULT_FAMILY = "conv2d"
SEED_MAX = 2**32 - 1  # numpy's and Optuna's samplers take seeds in [0, 2**32)


@dataclass(frozen=True)
class Config:
    name: str
    path: str
    problem: Problem
    settings: tuple[Setting, ...]
    timing: Timing = field(default_factory=Timing)
    rtol: float = 1e-3
    atol: float = 1e-3
    seed: int = 0
    baseline: str | None = None
    description: str = ""
    spaces: tuple[Space, ...] = ()
    strategy: str = "exhaustive"
    budget: int | None = None  # settings per space
    time_limit_s: float | None = None  # seconds per space
    rerank: int = 3  # the top settings re-measured interleaved at the end
    rerank_repeat: int = 10
    rerank_per_family: bool = False  # the top `rerank` of each family (`cltune bench`), not overall
    timeout_s: float | None = None  # per setting; None: derived from the baseline's time
    layers: tuple = ()  # a benchmark suite's [[layer]]s: (name, kind, Problem)

    def with_overrides(self, opts) -> "Config":
        """This config with what a caller's tune.Options override (None: the config's own value).
        Idempotent, so every stage that meets options may apply it. A fixed --repeat turns adaptive
        repeats off."""
        timing = self.timing
        if opts.warmup is not None:
            timing = replace(timing, warmup=opts.warmup)
        if opts.repeat is not None:
            timing = replace(timing, repeat=opts.repeat, max_repeat=max(opts.repeat, timing.max_repeat),
                             adaptive=False)
        return replace(self, timing=timing, strategy=opts.strategy or self.strategy,
                       budget=opts.budget or self.budget, time_limit_s=opts.time_limit_s or self.time_limit_s,
                       seed=self.seed if opts.seed is None else opts.seed,
                       rerank=self.rerank if opts.rerank is None else opts.rerank,
                       timeout_s=opts.timeout_s or self.timeout_s)


class _Checker:
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
            if default is _REQUIRED:
                self.fail(f"{where}{key}", f"missing; expected {expected}")
            return default
        value = table[key]
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        bad_bool = isinstance(value, bool) and bool not in kinds
        if not isinstance(value, kinds) or bad_bool or (check and not check(value)):
            self.fail(f"{where}{key}", f"expected {expected}, got {value!r}")
        return value


_REQUIRED = object()
NAME = "a non-empty string without control characters"


def _is_name(v: str) -> bool:
    return v.strip() != "" and v.isprintable()


def _finite(test):
    """A number check that also refuses NaN and infinity (TOML has both: nan, inf)."""
    return lambda v: math.isfinite(v) and test(v)


def _is_shape(v) -> bool:
    return (isinstance(v, list) and len(v) == 4
            and all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in v))


def _is_int_or_pair(min_value: int):
    def ok(v):
        items = v if isinstance(v, list) else [v]
        return (len(items) in (1, 2) and (isinstance(v, list) == (len(items) == 2))
                and all(isinstance(i, int) and not isinstance(i, bool) and i >= min_value for i in items))
    return ok


def resolve_path(name_or_path: str | None) -> Path:
    """A config file path, or the name of a bundled config (with or without .toml)."""
    if not name_or_path:
        name_or_path = DEFAULT_CONFIG
    path = Path(name_or_path)
    if path.exists():
        return path
    bundled = data_dir("configs") / (path.name if path.suffix == ".toml" else path.name + ".toml")
    if bundled.exists():
        return bundled
    raise UserError(f"{name_or_path}: no such config file (bundled configs: "
                    f"{', '.join(sorted(p.stem for p in data_dir('configs').glob('*.toml')))})")


def load(name_or_path: str | None = None) -> Config:
    path = resolve_path(name_or_path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UserError(f"{path}: not a sweep config: arrays or tables nested too deeply") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read: {exc}") from None
    return parse(data, str(path))


def parse(data: dict, path: str = "<config>") -> Config:
    c = _Checker(path)
    c.unknown(data, TOP_KEYS, "")
    name = c.get(data, "name", str, "", Path(path).stem, _is_name, NAME)
    description = c.get(data, "description", str, "", "", expected="a string")
    layers = _layers(c, data)
    table = c.get(data, "problem", dict, "", None if layers else _REQUIRED, expected="a [problem] table")
    problem = _problem(c, table) if table is not None else layers[0][2]
    run = c.get(data, "run", dict, "", {}, expected="a [run] table")
    c.unknown(run, RUN_KEYS, "run.")
    pos_int = lambda v: v >= 1  # noqa: E731
    nonneg = lambda v: v >= 0  # noqa: E731
    fnonneg = _finite(nonneg)
    positive = _finite(lambda v: v > 0)
    timing = Timing(
        warmup=c.get(run, "warmup", int, "run.", 1, nonneg, "an int >= 0"),
        repeat=c.get(run, "repeat", int, "run.", 5, pos_int, "an int >= 1"),
        min_time_ms=float(c.get(run, "min_time_ms", (int, float), "run.", 0.0, fnonneg, "a finite number >= 0")),
        max_repeat=c.get(run, "max_repeat", int, "run.", 1000, pos_int, "an int >= 1"),
        noisy_cv=float(c.get(run, "noisy_cv", (int, float), "run.", 0.10, fnonneg, "a finite number >= 0")),
        warmup_ms=float(c.get(run, "warmup_ms", (int, float), "run.", WARMUP_MS, fnonneg,
                              "a finite number >= 0")),
        adaptive=c.get(run, "adaptive", bool, "run.", True, expected="true or false"),
        precision=float(c.get(run, "precision", (int, float), "run.", 0.01, positive, "a finite number > 0")),
        second_window_s=float(c.get(run, "second_window_s", (int, float), "run.", SECOND_WINDOW_S, fnonneg,
                                    "a finite number >= 0")),
        windows=c.get(run, "windows", int, "run.", WINDOWS, lambda v: v >= 2, "an int >= 2"),
    )
    timing = replace(timing, top_repeat=c.get(run, "top_repeat", int, "run.", 2 * timing.repeat, pos_int,
                                              "an int >= 1"))
    if timing.max_repeat < timing.repeat:
        c.fail("run.max_repeat", f"expected >= run.repeat ({timing.repeat}), got {timing.max_repeat}")
    rtol = float(c.get(run, "rtol", (int, float), "run.", 1e-3, fnonneg, "a finite number >= 0"))
    atol = float(c.get(run, "atol", (int, float), "run.", 1e-3, fnonneg, "a finite number >= 0"))
    seed = c.get(run, "seed", int, "run.", 0, lambda v: 0 <= v <= SEED_MAX, f"an int in [0, {SEED_MAX}]")
    settings = _settings(c, data)
    spaces = _spaces(c, data, problem, whole=not layers)
    names = [s.name for s in settings]
    baseline = c.get(run, "baseline", str, "run.", names[0] if names else None, expected="a setting name")
    if baseline is not None and baseline not in names:
        c.fail("run.baseline", f"expected the name of a [[setting]] ({', '.join(names) or 'none defined'}), "
                               f"got {baseline!r}")
    if not settings and not spaces:
        c.fail("setting", "expected at least one [[setting]] or [[space]]")
    from ..search import strategies

    strategy = c.get(run, "strategy", str, "run.", "exhaustive", lambda v: v in strategies.STRATEGIES,
                     f"one of {', '.join(sorted(strategies.STRATEGIES))}")
    search = dict(
        spaces=tuple(spaces), strategy=strategy,
        budget=c.get(run, "budget", int, "run.", None, pos_int, "an int >= 1 (settings per space)"),
        time_limit_s=c.get(run, "time_limit_s", (int, float), "run.", None, positive, "a finite number > 0"),
        rerank=c.get(run, "rerank", int, "run.", 3, nonneg, "an int >= 0"),
        rerank_repeat=c.get(run, "rerank_repeat", int, "run.", 10, pos_int, "an int >= 1"),
        timeout_s=c.get(run, "timeout_s", (int, float), "run.", None, positive, "a finite number > 0"),
    )
    return Config(name, path, problem, tuple(settings), timing, rtol, atol, seed, baseline, description,
                  **search, layers=tuple(layers))


def _named(c: _Checker, data: dict, key: str, allowed: set):
    """(where, table, name) for each [[key]] table, with unknown keys and duplicate names refused."""
    entries = c.get(data, key, list, "", [], lambda v: all(isinstance(e, dict) for e in v), f"[[{key}]] tables")
    seen = set()
    for i, t in enumerate(entries):
        where = f"{key}[{i}]."
        c.unknown(t, allowed, where)
        name = c.get(t, "name", str, where, _REQUIRED, _is_name, NAME)
        if name in seen:
            c.fail(f"{where}name", f"duplicate {key} name {name!r}; names must be unique")
        seen.add(name)
        yield where, t, name


def _layers(c: _Checker, data: dict) -> list:
    out = []
    for where, t, name in _named(c, data, "layer", LAYER_KEYS):
        kind = c.get(t, "kind", str, where, "dense", lambda v: v in LAYER_KINDS, f"one of {', '.join(LAYER_KINDS)}")
        out.append((name, kind, _problem(c, {k: v for k, v in t.items() if k not in ("name", "kind")}, where)))
    return out


def _problem(c: _Checker, t: dict, where: str = "problem.") -> Problem:
    c.unknown(t, PROBLEM_KEYS, where)
    shape = "a list of 4 positive ints"
    x = c.get(t, "input", list, where, _REQUIRED, _is_shape, shape + " [N, C, H, W]")
    w = c.get(t, "weight", list, where, _REQUIRED, _is_shape, shape + " [K, C/groups, R, S]")
    pair1 = "an int >= 1 or a pair [h, w]"
    stride = c.get(t, "stride", (int, list), where, 1, _is_int_or_pair(1), pair1)
    padding = c.get(t, "padding", (int, list), where, 0, _is_int_or_pair(0), "an int >= 0 or a pair [h, w]")
    dilation = c.get(t, "dilation", (int, list), where, 1, _is_int_or_pair(1), pair1)
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


def _settings(c: _Checker, data: dict) -> list[Setting]:
    from ..workloads import builtin_settings, get_family

    out = []
    for where, entry, name in _named(c, data, "setting", SETTING_KEYS):
        named = c.get(entry, "builtin", str, where, None, expected="the name of a built-in setting")
        if named is not None:
            known = builtin_settings()
            if named not in known or {"family", "params"} & set(entry):
                c.fail(f"{where}builtin", f"expected a built-in setting name ({', '.join(known)}) and no "
                                          f"family or params beside it, got {named!r}")
            out.append(Setting.make(name, *known[named]))
            continue
        family_name = c.get(entry, "family", str, where, DEFAULT_FAMILY, expected="a kernel family name")
        try:
            family = get_family(family_name)
        except UserError as exc:
            c.fail(f"{where}family", str(exc))
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


def _spaces(c: _Checker, data: dict, problem, whole: bool = True) -> list[Space]:
    from .expr import ExprError, parse
    from ..workloads import get_family

    entries = c.get(data, "space", list, "", [], lambda v: all(isinstance(e, dict) for e in v),
                    "[[space]] tables")
    out = []
    for i, entry in enumerate(entries):
        where = f"space[{i}]."
        c.unknown(entry, SPACE_KEYS, where)
        family_name = c.get(entry, "family", str, where, _REQUIRED, expected="a kernel family name")
        try:
            family = get_family(family_name)
        except UserError as exc:
            c.fail(f"{where}family", str(exc))
        table = c.get(entry, "params", dict, where, _REQUIRED, lambda v: len(v) > 0,
                      "a non-empty table of parameter value lists")
        params = [(key, _space_values(c, family, f"{where}params.{key}", key, values))
                  for key, values in table.items()]
        known = set(table) | set(PROBLEM_NAMES) | set(DEVICE_NAMES)
        constraints = []
        for cname, text in c.get(entry, "constraints", dict, where, {}, expected="a table of named expressions").items():
            if not isinstance(text, str):
                c.fail(f"{where}constraints.{cname}", f"expected an expression string, got {text!r}")
            try:
                constraints.append((cname, parse(text, known)))
            except ExprError as exc:
                c.fail(f"{where}constraints.{cname}", f"{exc} in {text!r}")
        out.append(Space(family_name, tuple(params), tuple(constraints)))
        if not out[-1].device_refs:  # else checked when bound to a device
            _check_constraints(c, where, out[-1], problem, whole)
    return out


class ConstraintWarning(UserWarning):
    """A space's constraint could not be evaluated for some points (they are skipped)."""


CHECKED_POINTS = 20000  # a larger space is checked on its first points only


def _check_constraints(c: _Checker, where: str, space: Space, problem, whole: bool) -> None:
    """Say once when a constraint errors for some points; refuse a space no point of which passes
    the constraints (checked exactly for spaces of up to CHECKED_POINTS points)."""
    import warnings

    n, passed, errors, first = space.check_constraints(problem, CHECKED_POINTS)
    if whole and not passed and space.size <= CHECKED_POINTS:
        c.fail(f"{where}constraints", f"reject every one of the space's {space.size} points"
                                      + (f" (first: {first[1]})" if first else ""))
    if first:
        point = " ".join(f"{k}={v}" for k, v in first[0].items())
        warnings.warn(f"{c.path}: {where}constraints: {first[1]} at {point} ({errors} of the {n} points "
                      "checked fail to evaluate; they are skipped)", ConstraintWarning, stacklevel=2)


def _space_values(c: _Checker, family, where: str, key: str, values) -> tuple:
    """A knob's value list: explicit values, expressions over device.* values among them, or one
    device value naming a whole list (`VEC = "device.vector_widths"`), resolved when bound."""
    from .expr import ExprError

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
