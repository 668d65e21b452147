"""The one place that chooses which backend (protocol.py) measures: this process, an isolated
worker process, or a farm's workers (--farm / $CLTUNE_FARM)."""

from __future__ import annotations

import os

from .protocol import Backend, InProcess

FARM_ENV = "CLTUNE_FARM"
# Per setting, until a timed point (the baseline, else the first) gives a sweep its own limit: the
# first point also pays the worker's first build (a batch of settings, cold cache) and the inputs'
# upload and reference, so a minute, the least a measured limit may be, is doubled.
FIRST_POINT_TIMEOUT_S = 120.0


def farm_spec(option: str | None = None) -> str | None:
    """The farm a command measures on: its --farm, else $CLTUNE_FARM, else none (this machine)."""
    return option or os.environ.get(FARM_ENV) or None


def measuring(cfg, opts) -> tuple[dict, float]:
    """What a measuring backend (local, isolated or a farm's) takes from a config and a sweep's
    options: the Runner's keyword arguments and the per-setting timeout."""
    cfg = cfg.with_overrides(opts)
    kwargs = dict(rtol=cfg.rtol, atol=cfg.atol, seed=cfg.seed, prebuild=opts.prebuild)
    return kwargs, cfg.timeout_s or FIRST_POINT_TIMEOUT_S


def open_local(device=None, *, isolated: bool = True, modules: tuple = (), timeout_s: float | None = None,
               **runner_kwargs) -> Backend:
    """A backend on one of this machine's devices: in a worker process (a hang or a crash costs
    one setting), or with `isolated=False` in this process (the race, the API, --no-isolation)."""
    import importlib

    for name in modules:
        importlib.import_module(name)
    if not isolated:
        from .runner import Runner

        return Runner(device, **runner_kwargs)
    from .worker import WorkerRunner

    return WorkerRunner(device, modules=tuple(modules), timeout_s=timeout_s, **runner_kwargs)


def in_process(device=None, **runner_kwargs) -> InProcess:
    """A backend whose device lives in this process: what a race (host clocks around each call)
    and the API (arrays in, arrays out) need."""
    backend = open_local(device, isolated=False, **runner_kwargs)
    assert backend.caps.in_process
    return backend
