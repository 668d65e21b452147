"""Load and validate a TOML sweep file into a frozen Config; every mistake names file, key and expectation."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .checker import NAME, REQUIRED, Checker, finite, is_name
from .config_tables import (  # noqa: F401
    ConstraintWarning,
    layer_tables,
    problem_table,
    setting_tables,
    space_tables,
)
from ..core.device_info import DeviceInfo
from ..core.errors import UserError
from ..core.paths import data_dir
from ..core.problem import Problem
from ..core.records import Timing
from ..core.space import Setting, Space
from ..search.strategies import STRATEGIES

DEFAULT_CONFIG = "mali_t860_conv3x3"
TOP_KEYS = {"name", "description", "problem", "kernel", "run", "setting", "space", "layer"}
# The strategy of a config's spaces when neither it nor the command names one: every point when
# nothing limits the search, the strategy that won the replays of recorded spaces (docs/tuning.md)
# under a budget or a time limit.
DEFAULT_STRATEGY = "exhaustive"
SEARCH_STRATEGY = "model"
RUN_KEYS = {"warmup", "repeat", "min_time_ms", "max_repeat", "noisy_cv", "rtol", "atol", "seed",
            "baseline", "strategy", "budget", "time_limit_s", "rerank", "rerank_repeat", "timeout_s",
            "warmup_ms", "adaptive", "top_repeat", "precision", "second_window_s", "windows",
            "settle_across_windows", "first_look", "rerank_within", "rerank_max"}
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
# An adaptive point settles when its fastest launch is matched within `precision` by another launch;
# with this on, only by a launch of another window (see Timing.settled).
SETTLE_ACROSS_WINDOWS = False
# A point clearly slower than the incumbent stops after this many launches (one a window). On the
# busy Intel VM, kt_compare's 48 points launched in 14 passes of 6 back to back: the fastest of a
# point's first launch in 3 passes ranked the space at Spearman 0.812 (median of 5) against the
# other 7 passes' fastest, of 2 passes at 0.749, Kernel Tuner's mean of 5 back to back at 0.782,
# with ranges of 0.69-0.90 for each. 3 in kt_compare cost 25-35 more timed launches (162-167 a
# sweep), and its warm wall 0.57x Kernel Tuner's, over the 0.5x bar; so 2.
FIRST_LOOK = 2
# The final re-ranking takes the `rerank` fastest and every other point within RERANK_WITHIN of the
# fastest, at most RERANK_MAX in all. On the busy Intel VM the reference's five fastest points of
# kt_compare lay within 1.03-1.08x of each other while a sweep's times of its top points were off by
# 5-10%: the true best was often 4th-7th in the sweep, out of a top 3's reach.
RERANK_WITHIN = 1.1
RERANK_MAX = 8
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
    strategy: str | None = None  # None: DEFAULT_STRATEGY, or SEARCH_STRATEGY under a budget or time limit
    budget: int | None = None  # settings per space
    time_limit_s: float | None = None  # seconds per space
    rerank: int = 3  # the top settings re-measured interleaved at the end
    rerank_repeat: int = 10
    rerank_within: float = RERANK_WITHIN  # ... and every other within this factor of the fastest
    rerank_max: int = RERANK_MAX  # ... up to this many in all (per family with rerank_per_family)
    rerank_per_family: bool = False  # the top `rerank` of each family (`cltune bench`), not overall
    timeout_s: float | None = None  # per setting; None: derived from the baseline's time
    layers: tuple = ()  # a benchmark suite's [[layer]]s: (name, kind, Problem)
    device: DeviceInfo | None = None  # the device its device.* values are bound to (bind.bind_config)
    warm: tuple = field(default=(), compare=False)  # other devices' recorded spaces (--warm, drive/tune.merge)
    library: bool = field(default=True, compare=False)  # without warm: results/library's spaces of its kernel

    @property
    def search_strategy(self) -> str:
        """The strategy that searches the spaces: the named one, else the default for the limits."""
        if self.strategy:
            return self.strategy
        return SEARCH_STRATEGY if self.budget or self.time_limit_s else DEFAULT_STRATEGY

    def with_overrides(self, opts) -> "Config":
        """This config with what a caller's tune.Options override (None: the config's own value), once
        per run (drive/tune.merge; net's run). Idempotent. A fixed --repeat turns adaptive repeats off."""
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
    c = Checker(path)
    c.unknown(data, TOP_KEYS, "")
    name = c.get(data, "name", str, "", Path(path).stem, is_name, NAME)
    description = c.get(data, "description", str, "", "", expected="a string")
    layers = layer_tables(c, data)
    kernel = c.get(data, "kernel", dict, "", None, expected="a [kernel] table (a kernel of your own)")
    if kernel is not None:
        if "problem" in data or layers:
            c.fail("kernel", "a config tunes either its own [kernel] or a conv [problem] (or [[layer]]s), not both")
        # the families (40 ms of imports): loaded when a config names one
        from ..workloads.kernel import register_problem
        from .kernel_table import parse_kernel  # a [kernel] table's parser: loaded only for a config with one

        problem = parse_kernel(c, kernel, Path(path).resolve().parent)
        register_problem(problem)  # its settings' and spaces' family
    else:
        table = c.get(data, "problem", dict, "", None if layers else REQUIRED, expected="a [problem] table")
        problem = problem_table(c, table) if table is not None else layers[0][2]
    run = c.get(data, "run", dict, "", {}, expected="a [run] table")
    c.unknown(run, RUN_KEYS, "run.")
    pos_int = lambda v: v >= 1  # noqa: E731
    nonneg = lambda v: v >= 0  # noqa: E731
    fnonneg = finite(nonneg)
    positive = finite(lambda v: v > 0)
    timing = run_timing(c, run)
    rtol = float(c.get(run, "rtol", (int, float), "run.", 1e-3, fnonneg, "a finite number >= 0"))
    atol = float(c.get(run, "atol", (int, float), "run.", 1e-3, fnonneg, "a finite number >= 0"))
    seed = c.get(run, "seed", int, "run.", 0, lambda v: 0 <= v <= SEED_MAX, f"an int in [0, {SEED_MAX}]")
    family = problem.family if kernel is not None else None  # a kernel's settings and spaces are its own
    settings = setting_tables(c, data, family)
    spaces = space_tables(c, data, problem, whole=not layers, default_family=family)
    if kernel is not None:
        from .kernel_table import check_names  # a [kernel] table's parser: loaded only for a config with one

        check_names(c, problem, {k for s in settings for k in s.values} | {k for sp in spaces for k, _ in sp.params})
    names = [s.name for s in settings]
    baseline = c.get(run, "baseline", str, "run.", names[0] if names else None, expected="a setting name")
    if baseline is not None and baseline not in names:
        c.fail("run.baseline", f"expected the name of a [[setting]] ({', '.join(names) or 'none defined'}), "
                               f"got {baseline!r}")
    if not settings and not spaces:
        c.fail("setting", "expected at least one [[setting]] or [[space]]")
    strategy = c.get(run, "strategy", str, "run.", None, lambda v: v in STRATEGIES,
                     f"one of {', '.join(sorted(STRATEGIES))}")
    search = dict(
        spaces=tuple(spaces), strategy=strategy,
        budget=c.get(run, "budget", int, "run.", None, pos_int, "an int >= 1 (settings per space)"),
        time_limit_s=c.get(run, "time_limit_s", (int, float), "run.", None, positive, "a finite number > 0"),
        rerank=c.get(run, "rerank", int, "run.", 3, nonneg, "an int >= 0"),
        rerank_repeat=c.get(run, "rerank_repeat", int, "run.", 10, pos_int, "an int >= 1"),
        rerank_within=float(c.get(run, "rerank_within", (int, float), "run.", RERANK_WITHIN,
                                  finite(lambda v: v >= 1), "a finite number >= 1")),
        rerank_max=c.get(run, "rerank_max", int, "run.", RERANK_MAX, pos_int, "an int >= 1"),
        timeout_s=c.get(run, "timeout_s", (int, float), "run.", None, positive, "a finite number > 0"),
    )
    return Config(name, path, problem, tuple(settings), timing, rtol, atol, seed, baseline, description,
                  **search, layers=tuple(layers))


def run_timing(c: Checker, run: dict) -> Timing:
    """How a [run] table times each setting (its defaults where it says nothing)."""
    pos_int = lambda v: v >= 1  # noqa: E731
    nonneg = lambda v: v >= 0  # noqa: E731
    fnonneg = finite(nonneg)
    positive = finite(lambda v: v > 0)
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
        settle_windows=c.get(run, "settle_across_windows", bool, "run.", SETTLE_ACROSS_WINDOWS,
                             expected="true or false"),
        first_look=c.get(run, "first_look", int, "run.", FIRST_LOOK, pos_int, "an int >= 1"),
    )
    timing = replace(timing, top_repeat=c.get(run, "top_repeat", int, "run.", 2 * timing.repeat, pos_int,
                                              "an int >= 1"))
    if timing.max_repeat < timing.repeat:
        c.fail("run.max_repeat", f"expected >= run.repeat ({timing.repeat}), got {timing.max_repeat}")
    return timing


def default_timing() -> Timing:
    """A config's timing when its [run] table says nothing (what tune_kernel uses)."""
    return run_timing(Checker("<defaults>"), {})
