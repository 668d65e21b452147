"""One sweep of a config: pick the measuring backend, resume, run settings and spaces, re-rank."""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from ..core.config import SEED_MAX
from ..core.errors import UserError
from ..core.paths import stamped_path
from ..core.records import Measurement, Timing
from ..core.space import Setting
from ..measure.backend import DEFAULT_TIMEOUT_S
from ..results import rows as results
from ..results import schema
from ..workloads import get_family
from .sweep import Budget, Outcome, Sweep


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


@dataclass
class Result:
    path: Path
    rows: list = field(default_factory=list)
    ranking: list = field(default_factory=list)  # rows of the final ranking, fastest first
    baseline_ms: float | None = None


def check_options(opts: Options) -> None:
    """What can be refused before a device is opened: conflicting or pointless file options."""
    if opts.out and opts.resume:
        raise UserError("--out and --resume both name the results file; give one")
    if opts.seed is not None and not (isinstance(opts.seed, int) and 0 <= opts.seed <= SEED_MAX):
        raise UserError(f"seed: expected an int in [0, {SEED_MAX}], got {opts.seed!r}")
    for name in ("timeout_s", "time_limit_s"):
        v = getattr(opts, name)
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise UserError(f"{name}: expected a finite number of seconds > 0, got {v!r}")
    if opts.retry_failed and not opts.resume:
        raise UserError("--retry-failed measures again the failed rows of a file: give it with --resume FILE")
    out = Path(opts.out) if opts.out else None
    if out is not None and out.is_file() and out.stat().st_size:
        raise UserError(f"{out}: already holds results; resume it with --resume {out}, "
                        "or choose another --out")


def default_timeout(baseline_wall_ms: float | None) -> float:
    """Per-setting timeout: ten times the baseline's whole measurement, at least a minute."""
    if not baseline_wall_ms or baseline_wall_ms != baseline_wall_ms:
        return DEFAULT_TIMEOUT_S
    return max(60.0, 10.0 * baseline_wall_ms / 1e3)


def open_backend(cfg, opts: Options):
    """This machine's backend for a sweep of cfg: an isolated worker, or this process with
    --no-isolation (a farm's backends are made per device kind by farm.sweep)."""
    from ..measure.backend import measuring, open_local

    kwargs, timeout_s = measuring(cfg, opts)
    return open_local(opts.device, isolated=opts.isolation, modules=opts.modules, timeout_s=timeout_s, **kwargs)


def default_path(cfg, info) -> Path:
    """results/<config>_<device>_<time>.csv, inside results/ whatever the names hold."""
    return stamped_path(cfg.name, info.name, suffix=".csv")


def expected_rows(cfg, opts: Options) -> int:
    """Rows a sweep will write: its settings, each space's budget (or valid size), the re-ranking."""
    cfg = cfg.with_overrides(opts)
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
    best few; each row is written as it is measured and handed to on_row."""
    check_options(opts)
    cfg = cfg.with_overrides(opts)
    own = backend is None
    backend = backend or open_backend(cfg, opts)
    try:
        return _run(cfg, opts, backend, on_row)
    finally:
        if own:
            backend.close()


def identity(info, problem) -> Callable[[Setting], dict]:
    """What a session prepares once per setting, before measuring it: its build options, source hash
    and family figures (results.PREPARED, for a row whose worker could not report them) and its resume key."""
    done: dict = {}

    def ident(setting: Setting) -> dict:
        if setting.key not in done:
            family = get_family(setting.family)
            values = family.resolve(setting.values)
            options = " ".join(family.options(problem, values))
            source_hash = family.source_hash()
            done[setting.key] = {"build_options": options, "source_hash": source_hash,
                                 **family.figures(problem, values),
                                 "key": results.resume_key(info, problem, setting, options, source_hash)}
        return done[setting.key]
    return ident


@contextmanager
def session(cfg, backend, path: Path, resume: bool = False, retry_failed: bool = False,
            on_row: Callable[[dict], None] = lambda row: None) -> Iterator["Steps"]:
    """One results file and the measuring that fills it: its Recorder (the only writer of rows)
    and its Steps (the Sweep, the timing rules), for a sweep, a network's task or the API. `cfg`
    is bound to the device; with `resume` the rows the file holds are not measured again. Points
    still waiting for a timing window when the block ends are measured (or, on an exception,
    recorded with the launches they have)."""
    from ..results import peakstore

    info = backend.info
    recorder = results.Recorder(path, info, cfg.problem, cfg.name, identity(info, cfg.problem),
                                cfg.timing.noisy_cv, peakstore.lookup(info.name, info.platform, info.driver),
                                cfg.baseline or "", on_row)
    with recorder.open(schema.make_header(cfg.name, cfg.problem.key, info), resume=resume):
        steps = Steps(cfg, backend, recorder, retry_failed)
        with steps.sweep.finishing():
            yield steps


def _run(cfg, opts: Options, backend, on_row) -> Result:
    from ..core.device_values import bind_config

    info, problem = backend.info, cfg.problem
    refusal = problem.size_refusal(info)  # before any file is written
    if refusal:
        raise UserError(refusal)
    cfg = bind_config(cfg, info)  # device.* values in its spaces and built-in settings
    path = Path(opts.resume or opts.out or default_path(cfg, info))
    with session(cfg, backend, path, bool(opts.resume), opts.retry_failed, on_row) as steps:
        outcomes = steps.baseline() + steps.listed()
        steps.search()
        return steps.rerank(outcomes)


class Steps:
    """The phases of one sweep, in order: the baseline (which sets the per-setting timeout), the
    config's other listed settings, the search of its spaces, the re-ranking of the best few."""

    def __init__(self, cfg, backend, recorder, retry_failed: bool):
        self.cfg, self.backend, self.rec = cfg, backend, recorder
        self.strategies: dict = {}  # key -> the strategy that asked for a point (Steps.evaluate)
        self.settings = sorted(cfg.settings, key=lambda s: s.name != cfg.baseline)  # baseline first
        resumed = resumed_outcomes(recorder.held, retry_failed) if recorder.held is not None else {}
        self.sweep = Sweep(self._measure, lambda s: recorder.prepare(s)["key"], self._record, resumed)
        if backend.caps.parallel:  # a farm: settings in parallel over its workers
            self.sweep.measure_many = lambda settings: backend.measure_many(cfg.problem, self._timing, settings)
            self.sweep.batch = backend.batch
        elif cfg.timing.adaptive and cfg.timing.second_window_s > 0 and backend.caps.windows:
            self.sweep.measure_more = lambda firsts: backend.measure_more(cfg.problem, firsts, self._timing())
            self.sweep.window_gap_s = cfg.timing.second_window_s
            self.sweep.wants_window = lambda m: self._timing().wants_window(m)

    def _timing(self, first_window: bool = False) -> Timing:
        t = self.cfg.timing
        if not t.adaptive:
            return t
        if first_window:
            return replace(t, incumbent_ms=self.sweep.incumbent(), limit=1, time_verification=True)
        return replace(t, incumbent_ms=self.sweep.incumbent())

    def _measure(self, setting: Setting, upcoming) -> Measurement:
        timing = self._timing(first_window=self.sweep.measure_more is not None)
        return self.backend.measure(self.cfg.problem, setting, timing, upcoming)

    def _record(self, m: Measurement, phase: str) -> Outcome:
        row = self.rec.record(m, phase, self.strategies.pop(self.rec.prepare(m.setting)["key"], None))
        return Outcome(m.setting, row["status"], row[schema.TIME] if row["status"] == "ok" else None)

    def evaluate(self, setting: Setting, upcoming=(), strategy: str | None = None) -> Outcome:
        """One setting measured into the file (or its outcome, when already measured or resumed),
        its rows' `strategy` column set to `strategy`: what a network's scheduler asks for."""
        if strategy is not None:
            self.rec.strategy = strategy
            # a point that waits for more timing windows is recorded later, under this strategy still
            self.strategies.setdefault(self.rec.prepare(setting)["key"], strategy)
        return self.sweep.evaluate(setting, upcoming)

    def measure_again(self, setting: Setting, strategy: str) -> Outcome:
        """A setting measured and recorded once more, whatever the file holds (a drift check)."""
        self.rec.strategy = strategy
        return self._record(self.backend.measure(self.cfg.problem, setting, self._timing(), ()), "search")

    @property
    def measured(self) -> int:
        """Rows this session wrote."""
        return len(self.rec.rows)

    def baseline(self) -> list[Outcome]:
        """The baseline (else the first listed setting); without a configured timeout, its time sets
        the worker's per-setting timeout."""
        outcomes = self.sweep.run_settings(self.settings[:1])
        if not self.cfg.timeout_s and self.backend.caps.timeout and self.settings:
            row = self.rec.row(self.rec.prepare(self.settings[0])["key"])
            self.backend.timeout_s = default_timeout(row["wall_ms"] if row is not None else None)
        return outcomes

    def listed(self) -> list[Outcome]:
        return self.sweep.run_settings(self.settings[1:])

    def search(self) -> None:
        cfg, info = self.cfg, self.backend.info
        budget = Budget(cfg.budget, cfg.time_limit_s)
        self.rec.strategy = cfg.strategy
        for space in cfg.spaces:
            self.sweep.search(space, cfg.problem, info, cfg.strategy, budget, cfg.seed)

    def rerank(self, outcomes: list[Outcome]) -> Result:
        """The best few and the baseline measured again, interleaved, so their ranking and speedup
        are side by side; a finished sweep resumed measures nothing again."""
        cfg, rec = self.cfg, self.rec
        res = Result(rec.path, rec.rows, baseline_ms=outcomes[0].cost if outcomes else None)
        top = self.sweep.top(cfg.rerank, per_family=cfg.rerank_per_family)
        if top and outcomes and outcomes[0].cost is not None and outcomes[0] not in top:
            top.append(outcomes[0])  # the baseline runs beside them, so the speedup is side by side
        rec.strategy = "rerank"
        nothing_new = rec.held_rerank and not rec.rows
        if len(top) >= 2 and not nothing_new:
            timing = Timing(warmup=1, repeat=cfg.rerank_repeat, noisy_cv=cfg.timing.noisy_cv)
            for m in self.backend.measure_interleaved(cfg.problem, [o.setting for o in top], timing):
                rec.record(m, "rerank")
            final = [r for r in rec.rows if r["phase"] == "rerank" and r["status"] == "ok"]
        elif nothing_new:
            final = results.ok_rows(rec.held[rec.held["phase"] == "rerank"]).to_dict("records")
        else:
            keys = {rec.prepare(o.setting)["key"] for o in top}
            final = [r for r in rec.rows if r["key"] in keys]
        res.ranking = sorted(final, key=lambda r: r[schema.TIME])
        base = [r for r in final if r["setting"] == cfg.baseline]
        if base:  # measured beside the others: the speedup is side by side
            res.baseline_ms = base[0][schema.TIME]
        return res


def failure(result: Result, baseline: str | None) -> str | None:
    """Why a sweep measured nothing usable (its baseline, or every setting, failed), else None.
    The rows stay in the file; the command says this in one line and exits non-zero."""
    first = [r for r in result.rows if r["phase"] == "search"]
    if not first:
        return None  # a resumed sweep with nothing left to measure
    ok = [r for r in first if r["status"] == "ok"]
    base = next((r for r in first if r["setting"] == baseline), None)
    if ok and (base is None or base["status"] == "ok"):
        return None
    bad = base if base is not None and base["status"] != "ok" else first[0]
    what = (f"the baseline {bad['setting']} failed" if bad is base and ok
            else f"all {len(first)} settings failed")
    return f"{what} ({bad['status']}: {bad['error']}); the rows are in {result.path}"


def resumed_outcomes(df, retry_failed: bool = False) -> dict:
    """Outcomes of the search rows a file held, by key. With retry_failed the rows that are not ok
    are left out, so those settings are measured again."""
    out = {}
    for row in df[df["phase"] == "search"].to_dict("records"):
        if retry_failed and row["status"] != "ok":
            continue
        setting = Setting.make(row["setting"], row["family"], json.loads(row["params"]))
        cost = row[schema.TIME] if row["status"] == "ok" else None
        out[row["key"]] = Outcome(setting, row["status"], cost)
    return out
