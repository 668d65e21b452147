"""The measuring backend: what a sweep, a race or the API needs of the device side, and the one
place that chooses which backend measures (this process, an isolated worker process, a farm).

Every backend opens its device when it is made, then measures a setting and several settings
interleaved; what more it can do it declares in `caps`, and callers read `caps` (never probe
with hasattr). Runner (in this process), WorkerRunner (a worker process), FarmBackend (a Dask
farm's workers of one device kind) and replay's RecordedSpace implement it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, Sequence

FARM_ENV = "CLTUNE_FARM"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond measure / measure_interleaved / close."""

    parallel: bool = False  # measure_many + batch: several settings in flight (a farm's workers)
    windows: bool = False  # measure_more: more launches of points measured earlier (adaptive windows)
    timeout: bool = False  # timeout_s: a per-setting deadline the sweep may set (a killable worker)
    in_process: bool = False  # load_problem, launcher, run_once: the device is in this process


class Backend(Protocol):
    """Measures settings on one device (or one device kind): failures come back as Measurements."""

    info: object  # the DeviceInfo rows and resume keys carry
    caps: Capabilities

    def measure(self, problem, setting, timing, upcoming: Sequence = ()) -> object: ...

    def measure_interleaved(self, problem, settings, timing) -> list: ...

    def close(self) -> None: ...


class Parallel(Backend, Protocol):
    """caps.parallel: settings pulled lazily, one per free worker, measurements as they finish."""

    batch: int

    def measure_many(self, problem, timing_now: Callable, settings: Iterator) -> Iterator: ...


class Windowed(Backend, Protocol):
    """caps.windows: the next window of points measured before (their earlier rounds kept)."""

    def measure_more(self, problem, firsts: list, timing) -> list: ...


class InProcess(Backend, Protocol):
    """caps.in_process: the device's buffers and kernels live here (the race and the API)."""

    def load_problem(self, problem, inputs=None, reference: bool = True) -> None: ...

    def launcher(self, problem, setting) -> Callable[[], list]: ...

    def run_once(self, problem, setting): ...


def farm_spec(option: str | None = None) -> str | None:
    """The farm a command measures on: its --farm, else $CLTUNE_FARM, else none (this machine)."""
    return option or os.environ.get(FARM_ENV) or None


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
