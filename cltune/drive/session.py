"""One results file and the measuring that fills it: `session` opens the file's Recorder (the only
writer of rows) and gives `Steps`, which holds the Sweep and the timing rules, for a sweep, a
network's task or tune_kernel."""

from __future__ import annotations

import json
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from ..core.records import Measurement, Timing, timed
from ..core.space import Setting
from ..measure.backend import FIRST_POINT_TIMEOUT_S
from ..results import library, peakstore, rows as results, schema
from ..search.warm import plan as warm_plan
from ..workloads import get_family
from ..workloads.kernel import register_if_kernel
from .sweep import LISTED, Budget, Dispatch, Outcome, Sweep


@dataclass
class Result:
    path: Path
    rows: list = field(default_factory=list)
    ranking: list = field(default_factory=list)  # rows of the final ranking, fastest first
    baseline_ms: float | None = None
    held: list = field(default_factory=list)  # the search rows a resumed file held


def default_timeout(wall_ms: float | None) -> float:
    """Per-setting timeout: ten times a timed point's whole measurement (the baseline's, else the
    first timed one's), at least a minute; before there is one, the first-point limit."""
    if not wall_ms or wall_ms != wall_ms:
        return FIRST_POINT_TIMEOUT_S
    return max(60.0, 10.0 * wall_ms / 1e3)


def first_timed_wall(held, baseline: str | None) -> float | None:
    """The whole measurement (ms) of a resumed file's baseline when it was timed, else of its first
    timed search row: what sets a resumed sweep's timeout."""
    if held is None:
        return None
    rows = held[(held["phase"] == "search") & held["status"].map(timed).astype(bool)]  # pandas 4: no bool & object
    rows = rows[rows["wall_ms"].notna()]
    base = rows[rows["setting"] == baseline] if baseline else rows.iloc[:0]
    rows = base if len(base) else rows
    return float(rows["wall_ms"].iloc[0]) if len(rows) else None


def setting_identity(info, problem) -> Callable[[Setting], dict]:
    """What a session prepares once per setting, before measuring it: its build options, source hash
    and family figures (results.PREPARED, for a row whose worker could not report them) and its resume key."""
    done: dict = {}

    def ident(setting: Setting) -> dict:
        if setting.key not in done:
            family = get_family(setting.family)
            values = family.resolve(setting.values)
            options = " ".join(family.options(problem, values))
            source_hash = family.source_hash(values)
            done[setting.key] = {"build_options": options, "source_hash": source_hash,
                                 **family.figures(problem, values),
                                 "key": results.resume_key(info, problem, setting, options, source_hash)}
        return done[setting.key]
    return ident


@contextmanager
def session(cfg, backend, path: Path, resume: bool = False, retry_failed: bool = False,
            on_row: Callable[[dict], None] = lambda row: None, known: tuple = ()) -> Iterator["Steps"]:
    """One results file and the measuring that fills it: its Recorder (the only writer of rows)
    and its Steps (the Sweep, the timing rules), for a sweep, a network's task or the API. `cfg`
    is bound to the device; with `resume` the rows the file holds are not measured again, nor the
    `known` outcomes measured elsewhere (Kernel Tuner's cache: kernel_tuner/run.py). Points
    still waiting for a timing window when the block ends are measured (or, on an exception,
    recorded with the launches they have)."""
    register_if_kernel(cfg.problem)  # a user kernel's family: the one its settings name
    info = backend.info
    recorder = results.Recorder(path, info, cfg.problem, cfg.name, setting_identity(info, cfg.problem),
                                cfg.timing.noisy_cv, peakstore.lookup(info.name, info.platform, info.driver),
                                cfg.baseline or "", on_row)
    header = schema.make_header(cfg.name, cfg.problem.key, info)
    header.update(getattr(backend, "header_fields", {}))  # a farm's: how it was reached (insecure: true)
    with recorder.open(header, resume=resume):
        steps = Steps(cfg, backend, recorder, retry_failed, known)
        with steps.sweep.finishing():
            yield steps


class Steps:
    """The phases of one sweep, in order: the baseline (which sets the per-setting timeout), the
    config's other listed settings, the search of its spaces, the re-ranking of the best few."""

    def __init__(self, cfg, backend, recorder, retry_failed: bool, known=()):
        self.cfg, self.backend, self.rec = cfg, backend, recorder
        self.settings = sorted(cfg.settings, key=lambda s: s.name != cfg.baseline)  # baseline first
        resumed = resumed_outcomes(recorder.held, retry_failed) if recorder.held is not None else {}
        resumed.update((recorder.prepare(o.setting)["key"], o) for o in known)
        self.sweep = Sweep(self._dispatch(), lambda s: recorder.prepare(s)["key"], self._record, resumed)
        # The per-setting timeout: the configured one, else the first-point limit until a timed
        # point (the baseline first of all) sets 10x its time; a resumed file's rows set it at once.
        held_wall = first_timed_wall(recorder.held, cfg.baseline)
        self.limit_known = bool(cfg.timeout_s) or held_wall is not None
        self.limit_s = cfg.timeout_s or default_timeout(held_wall)
        self._limit()

    def _dispatch(self) -> Dispatch:
        """In parallel over a farm's workers; in timing windows where the backend has them and the
        timing is adaptive; else one setting at a time."""
        backend, problem, timing = self.backend, self.cfg.problem, self.cfg.timing
        if backend.caps.parallel:
            return Dispatch(self._measure, measure_many=self._measure_many, batch=backend.batch)
        if timing.adaptive and timing.second_window_s > 0 and backend.caps.windows:
            return Dispatch(self._measure, window_gap_s=timing.second_window_s,
                            measure_more=lambda firsts: backend.measure_more(problem, firsts, self._limit()),
                            wants_window=lambda m: self._timing().wants_window(m))
        return Dispatch(self._measure)

    def _limit(self) -> Timing:
        """This session's timeout on the backend (sessions of a network share one), and the timing."""
        if self.backend.caps.timeout:
            self.backend.timeout_s = self.limit_s
        return self._timing()

    def _timing(self, first_window: bool = False) -> Timing:
        t = self.cfg.timing
        if not t.adaptive:
            return t
        if first_window:
            return replace(t, incumbent_ms=self.sweep.incumbent(), limit=1, time_verification=True)
        return replace(t, incumbent_ms=self.sweep.incumbent())

    def _measure(self, setting: Setting, upcoming) -> Measurement:
        self._limit()
        timing = self._timing(first_window=self.sweep.dispatch.measure_more is not None)
        m = self.backend.measure(self.cfg.problem, setting, timing, upcoming)
        self._learn_limit(m.status, m.wall_ms)  # its first window, before it waits for more
        return m

    def _learn_limit(self, status, wall_ms: float | None) -> None:
        """The first timed point (the baseline, listed first) sets the timeout, unless one was given."""
        if not self.limit_known and timed(status) and wall_ms:
            self.limit_known, self.limit_s = True, default_timeout(wall_ms)
            self._limit()

    def _measure_many(self, settings):
        self._limit()
        return self.backend.measure_many(self.cfg.problem, self._timing, settings)

    def _record(self, m: Measurement, strategy: str) -> Outcome:
        row = self.rec.record(m, "search", strategy)
        self._learn_limit(row["status"], row.get("wall_ms"))
        return Outcome(m.setting, row["status"], row[schema.TIME] if timed(row["status"]) else None)

    def evaluate(self, setting: Setting, upcoming=(), strategy: str = LISTED) -> Outcome:
        """One setting measured into the file (or its outcome, when already measured or resumed),
        its rows' `strategy` column set to `strategy`: what a network's scheduler asks for."""
        return self.sweep.evaluate(setting, upcoming, strategy)

    def measure_again(self, setting: Setting, strategy: str) -> Outcome:
        """A setting measured and recorded once more, whatever the file holds (a drift check)."""
        return self._record(self.backend.measure(self.cfg.problem, setting, self._limit(), ()), strategy)

    @property
    def measured(self) -> int:
        """Rows this session wrote."""
        return len(self.rec.rows)

    def baseline(self) -> list[Outcome]:
        """The baseline (else the first listed setting); without a configured timeout, its time
        (else the first timed point's, _record) sets the per-setting timeout."""
        return self.sweep.run_settings(self.settings[:1])

    def listed(self) -> list[Outcome]:
        return self.sweep.run_settings(self.settings[1:])

    def search(self) -> None:
        cfg, info = self.cfg, self.backend.info
        budget = Budget(cfg.budget, cfg.time_limit_s)
        for space in cfg.spaces:
            sources = cfg.warm or (library.for_space(space, info.name) if cfg.library else ())
            first, later = warm_plan(space, sources, cfg.problem, info) if sources else ((), ())
            self.sweep.search(space, cfg.problem, info, cfg.search_strategy, budget, cfg.seed, first, later)

    def rerank(self, outcomes: list[Outcome]) -> Result:
        """The best few (the `rerank` fastest and those close behind them, config.RERANK_WITHIN) and
        the baseline measured again, interleaved, so their ranking and speedup are side by side; a
        finished sweep resumed measures nothing again."""
        cfg, rec = self.cfg, self.rec
        searched = rec.held[rec.held["phase"] == "search"].to_dict("records") if rec.held is not None else []
        res = Result(rec.path, rec.rows, baseline_ms=outcomes[0].cost if outcomes else None, held=searched)
        top = self.sweep.top(cfg.rerank, cfg.rerank_per_family, cfg.rerank_within, cfg.rerank_max)
        # Of each family's (or the whole run's) share of `top`, its first `rerank` are the plain top.
        groups = Counter(o.setting.family if cfg.rerank_per_family else None for o in top)
        rounds = rerank_rounds(cfg.rerank_repeat, sum(min(cfg.rerank, n) for n in groups.values()), len(top))
        if top and outcomes and outcomes[0].cost is not None and outcomes[0] not in top:
            top.append(outcomes[0])  # the baseline runs beside them, so the speedup is side by side
        # A finished sweep resumed: its re-ranking stands, unless the file lost part of it (a row
        # cut by a crash): then the whole re-ranking is measured again, side by side.
        last = results.last_rerank(rec.held) if rec.held_rerank else None  # a re-ranking measured again: its last
        held = set(last[last["phase"] == "rerank"]["key"]) if last is not None else set()
        whole = bool(held) and all(rec.prepare(o.setting)["key"] in held for o in top)
        nothing_new = whole and not rec.rows
        if len(top) >= 2 and not nothing_new:
            timing = Timing(warmup=1, repeat=rounds, noisy_cv=cfg.timing.noisy_cv)
            self._limit()
            for m in self.backend.measure_interleaved(cfg.problem, [o.setting for o in top], timing):
                rec.record(m, "rerank", "rerank")
            final = [r for r in rec.rows if r["phase"] == "rerank" and timed(r["status"])]
        elif nothing_new:
            final = results.ok_rows(last[last["phase"] == "rerank"]).to_dict("records")
        else:
            keys = {rec.prepare(o.setting)["key"] for o in top}  # the file's rows: a resumed best too
            final = list({r["key"]: r for r in [*searched, *rec.rows] if r["key"] in keys}.values())
        res.ranking = sorted(final, key=lambda r: r[schema.TIME])
        base = [r for r in final if r["setting"] == cfg.baseline]
        if base:  # measured beside the others: the speedup is side by side
            res.baseline_ms = base[0][schema.TIME]
        return res


def rerank_rounds(repeat: int, plain: int, close: int, least: int = 3) -> int:
    """Rounds of a re-ranking of `close` settings where `plain` (the `rerank` fastest) get `repeat`
    rounds each: the same launches in all, shared out (at least `least` each), so the points close
    behind the fastest cost no more time than the top few did."""
    if close <= plain or not close:
        return repeat
    return max(min(least, repeat), -(-repeat * plain // close))


def resumed_outcomes(df, retry_failed: bool = False) -> dict:
    """Outcomes of the search rows a file held, by key. With retry_failed the rows that are not ok
    are left out, so those settings are measured again."""
    out = {}
    for row in df[df["phase"] == "search"].to_dict("records"):
        if retry_failed and not timed(row["status"]):
            continue
        setting = Setting.make(row["setting"], row["family"], json.loads(row["params"]))
        cost = row[schema.TIME] if timed(row["status"]) else None
        out[row["key"]] = Outcome(setting, row["status"], cost)
    return out
