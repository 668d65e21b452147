"""One sweep of a config: pick the measuring backend, resume, run settings and spaces, re-rank."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Callable

from . import results, schema
from .config import SEED_MAX
from .errors import UserError
from .paths import slug
from .records import Measurement, Timing
from .space import Setting
from .sweep import Budget, Outcome, Sweep
from .workloads import get_family

DEFAULT_TIMEOUT_S = 600.0  # until the baseline's time is known


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
    kwargs = dict(rtol=cfg.rtol, atol=cfg.atol, seed=cfg.seed if opts.seed is None else opts.seed,
                  prebuild=opts.prebuild)
    for name in opts.modules:
        __import__(name)
    if not opts.isolation:
        from .measure import Runner

        return Runner(opts.device, **kwargs)
    from .worker import WorkerRunner

    return WorkerRunner(opts.device, modules=opts.modules,
                        timeout_s=opts.timeout_s or cfg.timeout_s or DEFAULT_TIMEOUT_S, **kwargs)


def default_path(cfg, info) -> Path:
    """results/<config>_<device>_<time>.csv, inside results/ whatever the names hold."""
    stem = f"{slug(cfg.name)}_{slug(info.name).lower()[:40]}_{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    path = Path("results") / f"{stem}.csv"
    n = 1
    while path.exists():  # two sweeps in the same second
        n += 1
        path = Path("results") / f"{stem}-{n}.csv"
    return path


def run(cfg, opts: Options, on_row: Callable[[dict], None] = lambda row: None, backend=None) -> Result:
    """Measure the config's settings, then search its spaces, then re-rank the best few."""
    timing = cfg.timing
    if opts.warmup is not None:
        timing = replace(timing, warmup=opts.warmup)
    if opts.repeat is not None:  # a fixed count: adaptive repeats off
        timing = replace(timing, repeat=opts.repeat, max_repeat=max(opts.repeat, timing.max_repeat),
                         adaptive=False)
    check_options(opts)
    own = backend is None
    backend = backend or open_backend(cfg, opts)
    try:
        return _run(cfg, opts, timing, backend, on_row)
    finally:
        if own:
            backend.close()


def _identity(info, problem):
    def ident(setting: Setting) -> dict:
        family = get_family(setting.family)
        options = " ".join(family.options(problem, family.resolve(setting.values)))
        source_hash = family.source_hash()
        return {"build_options": options, "source_hash": source_hash,
                "key": results.resume_key(info, problem, setting, options, source_hash)}
    return ident


def _run(cfg, opts: Options, timing: Timing, backend, on_row) -> Result:
    from . import peakstore
    from .device_values import bind_config

    info, problem = backend.info, cfg.problem
    refusal = problem.size_refusal(info)  # before any file is written
    if refusal:
        raise UserError(refusal)
    cfg = bind_config(cfg, info)  # device.* values in its spaces and built-in settings
    peaks = peakstore.lookup(info.name, info.platform, info.driver)
    path = Path(opts.resume or opts.out or default_path(cfg, info))
    ident = _identity(info, problem)
    res = Result(path)
    header = schema.make_header(cfg.name, problem.key, info)
    with results.ResultsFile(path, header, resume=bool(opts.resume)) as sink:
        results.save_device_info(path, info)
        resumed, had_rerank = _resumed(path, opts.retry_failed) if opts.resume else ({}, False)
        strategy = ["listed"]

        def record(m: Measurement, phase: str) -> Outcome:
            extra = {"phase": phase, "strategy": strategy[0], "seq": len(res.rows),
                     "baseline": cfg.baseline or "", **ident(m.setting)}
            row = results.to_row(m, info, problem, cfg.name, timing.noisy_cv, extra, peaks)
            sink.append(row)
            res.rows.append(row)
            on_row(row)
            return Outcome(m.setting, row["status"], row["run_ms_median"] if row["status"] == "ok" else None)

        def timing_now() -> Timing:
            return replace(timing, incumbent_ms=sweep.incumbent()) if timing.adaptive else timing

        def measure(setting: Setting, upcoming) -> Measurement:
            return backend.measure(problem, setting, timing_now(), upcoming)

        sweep = Sweep(measure, lambda s: ident(s)["key"], record, resumed)
        if hasattr(backend, "measure_many"):  # a farm: settings in parallel over its workers
            sweep.measure_many = lambda settings: backend.measure_many(problem, timing_now, settings)
            sweep.batch = backend.batch
        settings = sorted(cfg.settings, key=lambda s: s.name != cfg.baseline)  # baseline first
        outcomes = sweep.run_settings(settings[:1])
        if not (opts.timeout_s or cfg.timeout_s) and hasattr(backend, "timeout_s") and settings:
            backend.timeout_s = default_timeout(_wall_ms(res.rows, path, ident(settings[0])["key"]))
        outcomes += sweep.run_settings(settings[1:])
        res.baseline_ms = outcomes[0].cost if outcomes else None
        budget = Budget(opts.budget or cfg.budget, opts.time_limit_s or cfg.time_limit_s)
        for space in cfg.spaces:
            strategy[0] = opts.strategy or cfg.strategy
            sweep.search(space, problem, info, strategy[0], budget, cfg.seed if opts.seed is None else opts.seed)
        top = sweep.top(cfg.rerank if opts.rerank is None else opts.rerank)
        if top and outcomes and outcomes[0].cost is not None and outcomes[0] not in top:
            top.append(outcomes[0])  # the baseline runs beside them, so the speedup is side by side
        strategy[0] = "rerank"
        nothing_new = had_rerank and not res.rows  # a finished sweep resumed: measure nothing again
        if len(top) >= 2 and not nothing_new:
            rerank_timing = Timing(warmup=1, repeat=cfg.rerank_repeat, noisy_cv=timing.noisy_cv)
            for m in backend.measure_interleaved(problem, [o.setting for o in top], rerank_timing):
                record(m, "rerank")
            final = [r for r in res.rows if r["phase"] == "rerank" and r["status"] == "ok"]
        elif nothing_new:
            df = results.load(path)
            final = results.ok_rows(df[df["phase"] == "rerank"]).to_dict("records")
        else:
            keys = {ident(o.setting)["key"] for o in top}
            final = [r for r in res.rows if r["key"] in keys]
        res.ranking = sorted(final, key=lambda r: r["run_ms_median"])
        base = [r for r in final if r["setting"] == cfg.baseline]
        if base:  # measured beside the others: the speedup is side by side
            res.baseline_ms = base[0]["run_ms_median"]
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


def _resumed(path: Path, retry_failed: bool = False) -> tuple[dict, bool]:
    """Outcomes of the search rows already in the file, by key, and whether it holds a re-ranking.
    With retry_failed the rows that are not ok are left out, so those settings are measured again."""
    if not path.exists() or path.stat().st_size == 0:
        return {}, False
    df = results.load(path)
    out = {}
    for row in df[df["phase"] == "search"].to_dict("records"):
        if retry_failed and row["status"] != "ok":
            continue
        setting = Setting.make(row["setting"], row["family"], json.loads(row["params"]))
        cost = row["run_ms_median"] if row["status"] == "ok" else None
        out[row["key"]] = Outcome(setting, row["status"], cost)
    return out, bool((df["phase"] == "rerank").any())


def _wall_ms(rows: list, path: Path, key: str) -> float | None:
    for row in rows:
        if row["key"] == key:
            return row["wall_ms"]
    if path.exists():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # _resumed() has warned about this file's bad lines
            df = results.load(path)
        hit = df[df["key"] == key]
        if len(hit):
            return float(hit["wall_ms"].iloc[0])
    return None
