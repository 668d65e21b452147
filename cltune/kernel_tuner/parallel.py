"""tune_kernel(parallel=...): where Kernel Tuner starts Ray workers, cltune measures on its Dask
farm (`cltune sweep --farm`): `local:N` workers on this machine, or a scheduler's address. Each
worker is an isolated process on its own device; the rows come back to one results file per
device kind, and the first kind's are the results."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..core.paths import stamped_path
from ..farm.cluster import check_spec
from .results import ranking
from .run import Run, results_folder, row_handler


def measure_on_farm(cfg, opts, spec: str, knobs, metrics, printer, writer) -> Run:
    from ..farm import sweep as farm  # pandas (1.1 s) comes with it: imported on first use

    spec = check_spec(spec, "parallel")
    space = cfg.spaces[0]
    size = len(space.valid_settings(cfg.problem)) if space.countable else space.size
    folder = results_folder()
    folder.mkdir(parents=True, exist_ok=True)
    opts = replace(opts, out=stamped_path(cfg.name, "farm", suffix=".csv", folder=folder))
    printer.start(f"the Dask farm {spec}", size, size)
    by_key: dict = {}
    outcomes = farm.sweep(cfg, opts, spec, row_handler(knobs, metrics, printer, writer, by_key))
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    if not done:
        raise outcomes[0]
    res = done[0]
    run = Run(path=Path(res.path))
    run.rows = [r for r in res.rows if r["phase"] == "search"]
    run.results = [by_key[r["key"]] for r in run.rows if r["key"] in by_key]
    first = run.rows[0] if run.rows else {}
    run.device = {"device_name": first.get("device"), "platform_name": first.get("platform")}
    run.ranking = ranking(res.ranking)
    run.winner = run.ranking[0]["params"] if run.ranking else None
    return run
