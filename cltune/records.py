"""The values that flow between stages: status, one timed round, one setting's measurement."""

from __future__ import annotations

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
    """How to time a setting: warm-up launches, then at least `repeat` launches and `min_time_ms`."""

    warmup: int = 1
    repeat: int = 5
    min_time_ms: float = 0.0
    max_repeat: int = 1000
    noisy_cv: float = 0.10  # coefficient of variation of run times above which a row is `noisy`


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
