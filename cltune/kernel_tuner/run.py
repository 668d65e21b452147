"""The tuning behind cltune.kernel_tuner.tune_kernel: the session a sweep runs (search, then the
interleaved re-ranking) into cltune's results file in its cache folder, with Kernel Tuner's cache
file read first (its settings are not measured again) and written as results come; or, in
simulation mode, the search replayed over a cache file alone, with no device."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..loader.bind import bind_config
from ..core.errors import UserError
from ..core.paths import home, stamped_path
from ..core.space import Setting
from ..search.strategies import BudgetExhausted, Search, get
from ..drive.sweep import Outcome
from .cache import cache_key
from .results import InvalidConfig, ranking, to_result


@dataclass
class Run:
    """What a tuning gave: results in the order the search asked for them, the rows written, the
    re-ranking's winner (knobs), the device."""

    results: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    winner: dict | None = None
    ranking: list = field(default_factory=list)  # the re-ranking, fastest first (results.ranking)
    device: dict = field(default_factory=dict)
    path: Path | None = None


def results_folder() -> Path:
    """Where this surface keeps cltune's own results files: cltune's cache folder, never the cwd."""
    return home() / "kernel_tuner"


def measure(cfg, opts, knobs, metrics, printer, cached: dict, writer, tune_params: dict) -> Run:
    """Open the device, search, re-rank cfg (merged with opts: tune.merge); each search row becomes a
    result (printed, cached)."""
    from ..drive import tune  # pandas (1.1 s) comes with it: imported on first use
    from ..drive.session import session  # pandas (1.1 s) comes with it: imported on first use

    backend = tune.open_backend(cfg, opts)
    run = Run()
    try:
        info = backend.info
        run.device = {"device_name": info.name, "platform_name": info.platform,
                      "platform_version": getattr(info, "platform_version", None),
                      "device_version": getattr(info, "version", None)}
        if writer is not None:
            writer.set_device(info.name)  # a cache of another device is refused, as Kernel Tuner does
        refusal = cfg.problem.size_refusal(info)
        if refusal:
            raise UserError(refusal)
        cfg = bind_config(cfg, info)
        space = cfg.spaces[0]
        valid = space.valid_settings(cfg.problem, info) if space.countable else None
        printer.start(info.name, len(valid) if valid is not None else space.size, tune.expected_rows(cfg))
        run.path = Path(opts.out or stamped_path(cfg.name, info.name, suffix=".csv", folder=results_folder()))
        run.path.parent.mkdir(parents=True, exist_ok=True)
        by_key: dict = {}
        on_row = row_handler(knobs, metrics, printer, writer, by_key)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tune.RefusedPoints)  # the space's size is printed instead
            seeds = _cached(space, cached, valid, tune_params)
            known = tuple(Outcome(s, "ok" if "__error__" not in r else "error",
                                  r["time"] if "__error__" not in r else None) for s, r in seeds)
            with session(cfg, backend, run.path, False, False, on_row, known) as steps:
                by_key.update((steps.rec.prepare(s)["key"], r) for s, r in seeds)
                steps.search()
                res = steps.rerank([])
        run.rows = [r for r in res.rows if r["phase"] == "search"]
        run.results = [by_key[k] for k in steps.sweep.outcomes if k in by_key]
        run.ranking = ranking(res.ranking)
        run.winner = run.ranking[0]["params"] if run.ranking else None
    finally:
        backend.close()
    return run


def row_handler(knobs, metrics, printer, writer, by_key: dict):
    """on_row for a session: each search row becomes a result (by its key), printed and cached;
    the re-ranking's rows only move the progress bar."""
    clock = [time.perf_counter()]

    def on_row(row: dict) -> None:
        now = time.perf_counter()
        if row["phase"] != "search":
            printer.other_row()
            return
        result = to_result(row, knobs, metrics, 1e3 * (now - clock[0]))
        clock[0] = now
        by_key[row["key"]] = result
        printer.result(result)
        if writer is not None:
            if writer.cache.device_name is None:  # a farm's: known from its first row
                writer.set_device(row["device"])
            writer.add(result)
    return on_row


def _cached(space, cached: dict, valid, tune_params: dict) -> list:
    """(setting, result) of each cache entry that is a point of the space (timings zeroed, as
    Kernel Tuner reads its cache)."""
    if not cached:
        return []

    out = []
    for setting in valid if valid is not None else ():
        key = cache_key(setting.values, tune_params)
        if key in cached:
            entry = dict(cached[key])
            entry.update(compile_time=0, verification_time=0, benchmark_time=0)
            out.append((setting, entry))
    return out


def simulate(cfg, knobs, printer, cached: dict, device_name: str, budget, time_limit, seed,
             tune_params: dict) -> Run:
    """The search over the cache alone (no device): each point it asks for is the cache's entry,
    or an InvalidConfig when the cache lacks it."""
    space, problem = cfg.spaces[0], cfg.problem
    valid = space.valid_settings(problem)
    printer.start(f"{device_name} (simulated from the cache)", len(valid), budget or len(valid))
    run, seen = Run(device={"device_name": device_name}), {}
    start = time.monotonic()
    hits = dict(_cached(space, cached, valid, tune_params))

    def evaluate(setting: Setting, upcoming=()):
        if setting.key in seen:
            return seen[setting.key]
        if (budget is not None and len(seen) >= budget) or (time_limit and time.monotonic() - start > time_limit):
            raise BudgetExhausted
        result = hits.get(setting)
        if result is None:
            result = {**{k: setting.values[k] for k in knobs}, "time": float("inf"), "__error__": InvalidConfig()}
        run.results.append(result)
        printer.result(result)
        seen[setting.key] = result["time"] if "__error__" not in result else None
        return seen[setting.key]

    search = Search(space, problem, None, seed, evaluate, lambda s: s.key in seen)
    try:
        get(cfg.search_strategy)(search)
    except BudgetExhausted:
        pass
    return run
