"""One sweep of a config: pick the measuring backend, resume, run settings and spaces, re-rank."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..loader.config import SEED_MAX
from ..core.errors import UserError
from ..core.paths import stamped_path
from ..core.records import timed
from ..measure import backend as backend_mod
from ..results import guard, recorded
from ..search import warm
from .session import Result, Steps, default_timeout, resumed_outcomes, setting_identity, session  # noqa: F401
from ..loader.bind import bind_config
import warnings


@dataclass
class Options:
    """What the command line (or a caller) may override in a config's run."""

    device: str | None = None
    out: str | Path | None = None
    resume: str | Path | None = None
    strategy: str | None = None
    budget: int | None = None
    time_limit_s: float | None = None
    seed: int | None = None
    isolation: bool = True
    timeout_s: float | None = None
    warmup: int | None = None
    repeat: int | None = None
    rerank: int | None = None
    retry_failed: bool = False  # with resume: measure again the settings whose rows are not ok
    prebuild: bool | None = None
    modules: tuple = ()  # extra modules that register kernel families (imported by the worker too)
    farm: str | None = None  # a Dask scheduler's address or local:N (backend.farm_spec); None: this machine
    backend: str | None = None  # a spec for measure/backend.open_backend; None: from farm and isolation
    tls: str | None = None  # the farm's credentials folder (--tls; else $CLTUNE_TLS)
    insecure: bool = False  # plain tcp to a farm beyond loopback (--insecure): recorded in the header
    warm: tuple = ()  # results of other devices whose fastest settings each space measures first (--warm)
    cold: bool = False  # no warm start, not even the library's (--cold; without it and warm: results/library)


def check_options(opts: Options) -> None:
    """What can be refused before a device is opened: conflicting or pointless file options."""
    if opts.out and opts.resume:
        raise UserError("--out and --resume both name the results file; give one")
    if opts.seed is not None and not (isinstance(opts.seed, int) and 0 <= opts.seed <= SEED_MAX):
        raise UserError(f"seed: expected an int in [0, {SEED_MAX}], got {opts.seed!r}")
    if opts.budget is not None and not (isinstance(opts.budget, numbers.Integral) and not isinstance(opts.budget, bool)
                                        and opts.budget >= 1):
        raise UserError(f"budget: expected an int >= 1 (settings per space), got {opts.budget!r}")
    for name in ("timeout_s", "time_limit_s"):
        v = getattr(opts, name)
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise UserError(f"{name}: expected a finite number of seconds > 0, got {v!r}")
    if opts.warm and opts.cold:
        raise UserError("--warm and --cold: expected one of them (--cold: no warm start at all)")
    if opts.retry_failed and not opts.resume:
        raise UserError("--retry-failed measures again the failed rows of a file: give it with --resume FILE")
    if opts.out:
        check_out(opts.out)


def check_out(out) -> None:
    """A new results file: refused when it holds anything (a results file is resumed, never written over)."""
    out = Path(out)
    if out.is_file() and out.stat().st_size:
        if guard.holds(out) == guard.RESULTS:
            raise UserError(f"{out}: already holds results; resume it with --resume {out}, "
                            "or choose another --out")
        raise UserError(f"{out}: already exists and is not a cltune results file (a sweep writes only a "
                        "new or empty file); choose another --out")


def merge(cfg, opts: Options):
    """A run's config: the options checked before any device (check_options) and merged into cfg
    (Config.with_overrides), once per run, by whoever starts it (run, `cltune sweep`, tune_kernel);
    the stages below (open_backend, expected_rows, sweep, the farm's sweep) take it as it is."""
    check_options(opts)
    cfg = replace(cfg.with_overrides(opts), library=not (opts.cold or opts.warm))
    # read before any device, so that a file it cannot use is refused before anything is measured
    return replace(cfg, warm=tuple(recorded.load(path) for path in opts.warm)) if opts.warm else cfg


def open_backend(cfg, opts: Options):
    """The backend for a sweep of cfg (merged with opts) that opts name, opened by the chooser: an
    isolated worker, this process with --no-isolation, a farm of one device kind (farm/sweep.py opens
    one per kind)."""
    return backend_mod.open_backend(backend_mod.spec_of(opts), cfg, opts)


def default_path(cfg, info) -> Path:
    """results/<config>_<device>_<time>.csv, inside results/ whatever the names hold."""
    return stamped_path(cfg.name, info.name, suffix=".csv")


def expected_rows(cfg) -> int:
    """Rows a sweep of cfg (merged with its options) will write: its settings, each space's budget (or
    valid size), the re-ranking."""
    n = len(cfg.settings)
    for space in cfg.spaces:
        if not space.countable:  # never listed just to size a progress bar: the budget, else the size
            n += cfg.budget or space.size
            continue
        valid = len(space.valid_settings(cfg.problem))
        n += min(valid, cfg.budget) if cfg.budget else valid
    families = {s.family for s in (*cfg.spaces, *cfg.settings)} if cfg.rerank_per_family else {None}
    return n + (cfg.rerank * len(families) + 1 if cfg.rerank else 0)


def run(cfg, opts: Options, on_row: Callable[[dict], None] = lambda row: None, backend=None) -> Result:
    """Measure the config's settings (the baseline first), then search its spaces, then re-rank the
    best few; each row is written as it is measured and handed to on_row. cfg as loaded: merged with
    opts here; the backend opened here when none is given."""
    cfg = merge(cfg, opts)
    own = backend is None
    backend = backend or open_backend(cfg, opts)
    try:
        return sweep(cfg, opts, backend, on_row)
    finally:
        if own:
            backend.close()


def sweep(cfg, opts: Options, backend, on_row: Callable[[dict], None] = lambda row: None) -> Result:
    """run's sweep of a merged config on an open backend (`cltune sweep` opens it first to print the
    device; the farm opens one per device kind)."""
    info, problem = backend.info, cfg.problem
    refusal = problem.size_refusal(info)  # before any file is written
    if refusal:
        raise UserError(refusal)
    cfg = bind_config(cfg, info)  # device.* values in its spaces and built-in settings
    for space in cfg.spaces:  # a --warm file of other knobs: one line before any row
        warm.check(space, cfg.warm)
    for i, space in enumerate(cfg.spaces):
        if space.countable:
            say_refused(cfg.path, i, space, problem, info)
    if hasattr(backend, "load_problem"):  # the reference runs (and fails) before any row
        backend.load_problem(cfg.problem)
    path = Path(opts.resume or opts.out or default_path(cfg, info))
    with session(cfg, backend, path, bool(opts.resume), opts.retry_failed, on_row) as steps:
        outcomes = steps.baseline() + steps.listed()
        steps.search()
        return steps.rerank(outcomes)


def failure(result: Result, baseline: str | None) -> str | None:
    """Why a sweep's file holds nothing usable (its baseline, or every setting, failed), else None:
    a resumed file is judged whole, each setting by its last row. The rows stay in the file; the
    command says this in one line and exits non-zero."""
    new = [r for r in result.rows if r["phase"] == "search"]
    if not new:
        return None  # a resumed sweep with nothing left to measure
    first = list({r["key"]: r for r in [*result.held, *new]}.values())
    ok = [r for r in first if timed(r["status"])]
    base = next((r for r in first if r["setting"] == baseline), None)
    if ok and (base is None or timed(base["status"])):
        return None
    bad = base if base is not None and not timed(base["status"]) else new[0]
    what = (f"the baseline {bad['setting']} failed" if bad is base and ok
            else f"all {len(first)} settings failed")
    return f"{what} ({bad['status']}: {bad['error']}); the rows are in {result.path}"


class RefusedPoints(UserWarning):
    """Points of a space the family or the device refuses before anything is built (a user
    kernel's global size that its local size does not divide): said once per space, never rows."""


def say_refused(path: str, index: int, space, problem, info) -> None:
    """Once per space, before anything is measured: how many of its points the family or the device
    refuse (a warning), or that none is left (one line, the sweep does not start)."""
    by_constraints, by_family, first = space.refused(problem, info)
    left = space.size - by_constraints - by_family
    if by_family and not left:
        raise UserError(f"{path}: space[{index}] ({space.family}): none of its {space.size} points can run on "
                        f"{info.name}: {by_family} refused before they are built ({first}; and the like), "
                        f"{by_constraints} by its constraints")
    if by_family:
        warnings.warn(f"space {space.family}: {by_family} of its {space.size} points are refused before they are "
                      f"built ({first}; and the like), {by_constraints} by its constraints; {left} left to search",
                      RefusedPoints, stacklevel=2)
