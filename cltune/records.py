"""The values that flow between stages: status, one timed round, one setting's measurement."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from .space import Setting


class Status(str, Enum):
    OK = "ok"
    WRONG_RESULT = "wrong_result"
    BUILD_ERROR = "build_error"
    LAUNCH_ERROR = "launch_error"
    INVALID = "invalid"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    ERROR = "error"  # an exception in cltune's host code for this setting: its type and message in `error`

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Round:
    """One launch of a setting (all its parts), from the OpenCL profiling events, in ms.

    queue = submit - queued, submit = start - submit, run = end - start, total = end - queued,
    taken from the first part's queued/submit/start and the last part's end.
    """

    queue_ms: float
    submit_ms: float
    run_ms: float
    total_ms: float
    parts: tuple = ()  # (part name, run_ms) per kernel, when a setting has several

    @classmethod
    def from_events(cls, profiles: list[tuple[str, int, int, int, int]]) -> "Round":
        """profiles: (part, queued_ns, submit_ns, start_ns, end_ns) per kernel, in enqueue order."""
        _, queued_ns, submit_ns, start_ns, _ = profiles[0]
        end_ns = max(p[4] for p in profiles)
        ms = 1e-6
        parts = tuple((p[0], (p[4] - p[3]) * ms) for p in profiles) if len(profiles) > 1 else ()
        return cls((submit_ns - queued_ns) * ms, (start_ns - submit_ns) * ms,
                   (end_ns - start_ns) * ms, (end_ns - queued_ns) * ms, parts)


@dataclass(frozen=True)
class Timing:
    """How to time a setting: warm-up launches (at least `warmup`, and at least `warmup_ms` of kernel
    time when warmup >= 1), then at least `repeat` launches and `min_time_ms`.

    Adaptive repeats (`adaptive`, given the sweep's best median so far as `incumbent_ms`): a point
    whose fastest of its first `first_look` launches is above `stop_margin` x the incumbent stops
    there (its row's `n` says how many it got); a point within `top_margin` of the incumbent gets
    `top_repeat` launches instead of `repeat`, so the launches saved on slow points go to the top.
    """

    warmup: int = 1
    repeat: int = 5
    min_time_ms: float = 0.0
    max_repeat: int = 1000
    noisy_cv: float = 0.10  # coefficient of variation of run times above which a row is `noisy`
    warmup_ms: float = 0.0
    adaptive: bool = False
    incumbent_ms: float | None = None
    stop_margin: float = 1.5
    first_look: int = 2
    top_margin: float = 1.15
    top_repeat: int = 10

    def stops_early(self, runs: list[float]) -> bool:
        """Whether a point is clearly slower than the incumbent after its first look."""
        return (self.adaptive and self.incumbent_ms is not None and len(runs) >= self.first_look
                and len(runs) < self.repeat and min(runs) > self.stop_margin * self.incumbent_ms)

    def wanted(self, runs: list[float]) -> int:
        """How many timed launches this point should get in all, given those so far."""
        if self.stops_early(runs):
            return len(runs)
        n = self.repeat
        if self.adaptive and self.incumbent_ms is not None and runs and (
                min(runs) <= self.top_margin * self.incumbent_ms):
            n = max(n, self.top_repeat)
        elif self.adaptive and self.incumbent_ms is not None and len(runs) < self.first_look:
            n = min(n, self.first_look)  # look first, then decide
        if self.min_time_ms and runs and sum(runs) < self.min_time_ms:
            mean = sum(runs) / len(runs)
            n = max(n, len(runs) + math.ceil((self.min_time_ms - sum(runs)) / max(mean, 1e-6)))
        return min(max(n, len(runs)), self.max_repeat)

    def queue_more(self, runs: list[float], queued: int) -> bool:
        """Whether to enqueue another timed launch now, `queued` being in flight. At the first look
        one more goes in speculatively, so a point that goes on does not wait for the decision
        (a point that stops wastes that one launch)."""
        want, n = self.wanted(runs), len(runs) + queued
        first_look = self.adaptive and self.incumbent_ms is not None and want == self.first_look
        return n < want or (first_look and n == want and len(runs) < want)

    def warmed(self, launches: int, run_ms: float) -> bool:
        """Whether `launches` warm-up launches taking `run_ms` of kernel time are enough."""
        return launches >= self.warmup and (self.warmup == 0 or run_ms >= self.warmup_ms)


@dataclass(frozen=True)
class Measurement:
    setting: Setting
    status: Status
    error: str = ""
    build_options: str = ""
    source_hash: str = ""
    build_ms: float | None = None
    first_launch_ms: float | None = None
    max_abs_err: float | None = None
    rounds: tuple = field(default=())
    wall_ms: float | None = None  # the whole measurement, build included, as the host saw it
    device_ms: float | None = None  # kernel run time of all its launches (verify, warm-up, timed)
    stopped_early: bool = False  # adaptive repeats: clearly slower than the incumbent after a first look
    worker: str = ""  # the farm worker that measured it ("" in a local sweep)
    # What the setting's family says it moves and computes (Family.figures), set when it is prepared
    bytes_model: int | None = None
    real_flops: int | None = None
    weight_bytes: int | None = None
