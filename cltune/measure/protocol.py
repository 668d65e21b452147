"""What a measuring backend is: the methods every backend has, and the capabilities it declares.

Every backend opens its device when it is made, then measures a setting and several settings
interleaved; what more it can do it declares in `caps`, and callers read `caps` (never probe with
hasattr). Runner (in this process), WorkerRunner (a worker process), FarmBackend (a Dask farm's
workers of one device kind) implement it; backend.py chooses and opens one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, Sequence

from ..core.device_info import DeviceInfo


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond measure / measure_interleaved / close."""

    parallel: bool = False  # measure_many + batch: several settings in flight (a farm's workers)
    windows: bool = False  # measure_more: more launches of points measured earlier (adaptive windows)
    timeout: bool = False  # timeout_s: a per-setting deadline the sweep may set (a killable worker)
    in_process: bool = False  # load_problem, launcher, run_once: the device is in this process


class Backend(Protocol):
    """Measures settings on one device (or one device kind): failures come back as Measurements."""

    info: DeviceInfo  # what its rows, resume keys and device.* values carry
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
