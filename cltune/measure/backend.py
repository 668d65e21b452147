"""The one chooser: a backend (protocol.py) opened from a spec through one table, as TVM's
`Runner.create`. `local` (or None: a worker process on this machine), `inproc` (this process),
`farm:SCHEDULER|local:N` (a Dask farm's workers of one device kind); `local:D` / `inproc:D` pick
device D. A new backend (a board over adb or ssh) is a module with an opener and one line in KINDS."""

from __future__ import annotations

import importlib
import os

from ..core.errors import UserError
from .protocol import Backend, InProcess
from .worker import WorkerRunner

FARM_ENV = "CLTUNE_FARM"
# Per setting, until a timed point (the baseline, else the first) gives a sweep its own limit: the
# first point also pays the worker's first build (a batch of settings, cold cache) and the inputs'
# upload and reference, so a minute, the least a measured limit may be, is doubled.
FIRST_POINT_TIMEOUT_S = 120.0

# kind -> its opener, `opener(arg, cfg, opts, **kwargs) -> Backend` (arg: what follows "kind:"), named
# "module:function" so that a kind's module (and what it needs: distributed for the farm) is imported
# only when that kind is opened, and the farm's folder, which builds on this one, is not imported here.
KINDS = {
    "local": "cltune.measure.backend:open_worker",
    "inproc": "cltune.measure.backend:open_here",
    "farm": "cltune.farm.backend:open_farm",
}


def open_backend(spec: str | None = None, cfg=None, opts=None, **kwargs) -> Backend:
    """The backend a spec names, opened for a sweep of cfg with opts (tune.Options), or with the
    Runner's keyword arguments (device, rtol, atol, ...) where there is no sweep (the API, a race)."""
    kind, _, arg = (spec or "local").partition(":")
    opener = KINDS.get(kind)
    if opener is None:
        raise UserError(f"backend {spec!r}: expected one of {', '.join(k + ':...' for k in KINDS)}")
    if isinstance(opener, str):
        module, _, name = opener.partition(":")
        opener = getattr(importlib.import_module(module), name)
    return opener(arg, cfg, opts, **kwargs)


def spec_of(opts) -> str:
    """The spec a sweep's options name: --backend, else --farm, else --no-isolation, else local."""
    if getattr(opts, "backend", None):
        return opts.backend
    if opts.farm:
        return "farm:" + opts.farm
    return "local" if opts.isolation else "inproc"


def farm_spec(option: str | None = None) -> str | None:
    """The farm a command measures on: its --farm, else $CLTUNE_FARM, else none (this machine)."""
    return option or os.environ.get(FARM_ENV) or None


def measuring(cfg, opts) -> tuple[dict, float]:
    """What a measuring backend (local, isolated or a farm's) takes from a config (merged with the
    sweep's options: drive/tune.merge) and the options: the Runner's keyword arguments and the
    per-setting timeout."""
    kwargs = dict(rtol=cfg.rtol, atol=cfg.atol, seed=cfg.seed, prebuild=opts.prebuild)
    return kwargs, cfg.timeout_s or FIRST_POINT_TIMEOUT_S


def open_worker(arg: str = "", cfg=None, opts=None, *, isolated: bool = True, **kwargs) -> Backend:
    """`local[:DEVICE]`: a device of this machine measured in a worker process (a hang or a crash
    costs one setting)."""
    if opts is not None:
        runner_kwargs, timeout_s = measuring(cfg, opts)
        kwargs = dict(device=opts.device, modules=opts.modules, timeout_s=timeout_s, **runner_kwargs, **kwargs)
    if arg:
        kwargs["device"] = arg
    return open_local(isolated=isolated, **kwargs)


def open_here(arg: str = "", cfg=None, opts=None, **kwargs) -> InProcess:
    """`inproc[:DEVICE]`: a device of this machine in this process (the race, the API, --no-isolation)."""
    backend = open_worker(arg, cfg, opts, isolated=False, **kwargs)
    assert backend.caps.in_process
    return backend


def open_local(device=None, *, isolated: bool = True, modules: tuple = (), timeout_s: float | None = None,
               **runner_kwargs) -> Backend:
    """A backend on one of this machine's devices: in a worker process, or with `isolated=False`
    in this process."""
    for name in modules:
        importlib.import_module(name)
    if not isolated:
        from .runner import Runner  # pyopencl: loaded only when this process measures

        return Runner(device, **runner_kwargs)
    return WorkerRunner(device, modules=tuple(modules), timeout_s=timeout_s, **runner_kwargs)


def in_process(device=None, **runner_kwargs) -> InProcess:
    """A backend whose device lives in this process: what a race (host clocks around each call)
    and the API (arrays in, arrays out) need."""
    return open_backend("inproc", device=device, **runner_kwargs)
