"""The values that flow between stages: status, one timed round, one setting's measurement."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
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
    OUT_OF_BOUNDS = "out_of_bounds"  # a user kernel wrote into a guard band around an argument (named in `error`)
    UNVERIFIED = "unverified"  # ran and was timed; no reference to check it against (a user kernel without one)

    def __str__(self) -> str:
        return self.value


# The statuses whose time counts: ranked, re-ranked, a strategy's cost. `unverified` rows only come
# from a user kernel without a reference, whose every row is unverified.
TIMED = (Status.OK.value, Status.UNVERIFIED.value)


def timed(status) -> bool:
    """Whether a row or measurement of this status has a time that ranks."""
    return str(status) in TIMED


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
    window: int = 0  # the timing window of its point it was launched in (Timing.windows)

    @classmethod
    def from_events(cls, profiles: list[tuple[str, int, int, int, int]], ready_ns: int = 0) -> "Round":
        """profiles: (part, queued_ns, submit_ns, start_ns, end_ns) per kernel, in enqueue order.
        `ready_ns`: when the launch before it on the queue ended; a launch enqueued behind others
        (interleaved rounds are enqueued at once) is queued from then, not from its enqueue, so
        `queue` is its own wait, not theirs."""
        _, queued_ns, submit_ns, start_ns, _ = profiles[0]
        queued_ns = min(max(queued_ns, ready_ns), submit_ns)
        end_ns = max(p[4] for p in profiles)
        ms = 1e-6
        parts = tuple((p[0], (p[4] - p[3]) * ms) for p in profiles) if len(profiles) > 1 else ()
        return cls((submit_ns - queued_ns) * ms, (start_ns - submit_ns) * ms,
                   (end_ns - start_ns) * ms, (end_ns - queued_ns) * ms, parts)


@dataclass(frozen=True)
class Timing:
    """How to time a setting: warm-up, then timed launches.

    Warm-up: the verification launch is always the first untimed launch; warm-up goes on until
    `warmup` launches (the verification one included) and, when warmup >= 1, `warmup_ms` of kernel
    time. `--warmup 0` times right after the verification launch.

    Fixed count (`adaptive` off, as with `--repeat`): at least `repeat` timed launches and
    `min_time_ms` of timed kernel time, up to `max_repeat`.

    Adaptive (the default; `incumbent_ms` is the sweep's best time so far):
    - a point stops after `first_look` launches when its fastest is above `stop_margin` x the
      incumbent (clearly slower; `stopped_early` says so);
    - it stops as soon as it is settled (two launches at least): a second launch within `precision`
      of its fastest, so the minimum it reports (schema.TIME) is one the machine gave twice, not a
      lucky outlier;
    - otherwise goes on, up to the fixed count, or `top_repeat` when its fastest launch is within
      `top_margin` of the incumbent: the launches that settled points save go to unsettled ones,
      most to those near the top.

    Windows (`second_window_s` > 0, adaptive only; set by the sweep, which owns the clock): a
    point's first window is its verification launch, timed (`time_verification`, `limit` 1; after
    more warm-up when `warmup` > 1 or the device is new, one launch after it); the rest come in up
    to `windows` - 1 more windows, each at least `second_window_s` after the point's last, the rules
    above applied to the launches of all its windows so far. Each window but the last gets an even
    share of what the point still wants (`window_timing`); the last gets all of it. A slow phase of
    a shared machine (a core gone for half a second, or a busy host slowing every kernel by 1.2-1.7x
    for seconds) then has to hit a point in every window, seconds apart, to be taken for its speed.
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
    first_look: int = 2  # config: FIRST_LOOK
    top_margin: float = 1.15
    top_repeat: int = 10
    precision: float = 0.01
    second_window_s: float = 0.0
    windows: int = 2  # the most windows an adaptive point's launches are spread over (config: 10)
    limit: int | None = None  # at most this many timed launches in all, whatever the rules above say
    time_verification: bool = False  # the verification launch is timed, unless more warm-up is asked
    settle_windows: bool = False  # settled only by a launch of another window (see settled)

    def stops_early(self, runs: list[float]) -> bool:
        """Whether a point is clearly slower than the incumbent after its first look."""
        return (self.adaptive and self.incumbent_ms is not None and len(runs) >= self.first_look
                and len(runs) < self.repeat and min(runs) > self.stop_margin * self.incumbent_ms)

    def settled(self, runs: list[float], wins: list | None = None) -> bool:
        """Whether an adaptive point's time is known well enough: its two fastest launches within
        `precision` of each other. With `settle_windows` and the window of each launch (`wins`),
        the fastest must be matched by a launch of another window: two launches of one window can
        agree within 1% while a busy host slows both (seconds long slow phases, windows a second
        apart)."""
        if not self.adaptive or len(runs) < 2:
            return False
        order = sorted(range(len(runs)), key=runs.__getitem__)
        fastest = runs[order[0]]
        if self.settle_windows and wins is not None:
            others = [runs[i] for i in order[1:] if wins[i] != wins[order[0]]]
            return bool(others) and others[0] <= (1.0 + self.precision) * fastest
        return runs[order[1]] <= (1.0 + self.precision) * fastest

    def wanted(self, runs: list[float], wins: list | None = None) -> int:
        """How many timed launches this point should get in all, given those so far (and their
        windows, `wins`)."""
        if self.stops_early(runs) or self.settled(runs, wins):
            return len(runs)
        n = self.repeat
        if self.adaptive and self.incumbent_ms is not None and runs and (
                min(runs) <= self.top_margin * self.incumbent_ms):
            n = max(n, self.top_repeat)
        if self.min_time_ms and runs and sum(runs) < self.min_time_ms:
            mean = sum(runs) / len(runs)
            n = max(n, len(runs) + math.ceil((self.min_time_ms - sum(runs)) / max(mean, 1e-6)))
        n = min(max(n, len(runs), 1), self.max_repeat)
        return n if self.limit is None else min(n, max(self.limit, len(runs)))

    def queue_more(self, runs: list[float], queued: int, wins: list | None = None) -> bool:
        """Whether to enqueue another timed launch now, `queued` being in flight: only one the point
        is sure to get, so none is wasted. A fixed count is known from the start; an adaptive point
        is sure of the launches before the first that may stop it (the second, which may settle it,
        or the `first_look`-th, which may stop it early), then of one launch at a time (the device
        idles for the host's decision, which leaves the kernels' run times unchanged)."""
        certain = self.wanted(runs, wins)
        if self.adaptive:
            certain = min(certain, max(min(self.first_look, 2), len(runs) + 1))
        return len(runs) + queued < certain

    def second_window(self, first: tuple, rounds: tuple) -> tuple:
        """A two-window point's rounds once its second window is done: its verification launch,
        timed in the first, is dropped when it ran slower than (1 + precision) x the second window's
        fastest (it usually runs cold: 1.2-1.9x on kernels under 3 ms), so that the medians and the
        `noisy` flag speak of warm launches; the fastest launch is the same either way."""
        later = rounds[len(first):]
        if first and later and first[0].run_ms > (1.0 + self.precision) * min(r.run_ms for r in later):
            return rounds[1:]
        return rounds

    def window_timing(self, runs: list[float], windows_done: int, wins: list | None = None) -> "Timing":
        """The timing of a point's next window after `windows_done` windows gave `runs`: in the last
        window all the point still wants, in one before it an even share of that (at least one)."""
        if windows_done + 1 >= self.windows:
            return self
        share = math.ceil(max(0, self.wanted(runs, wins) - len(runs)) / (self.windows - windows_done))
        return replace(self, limit=len(runs) + max(1, share))

    def wants_window(self, m: "Measurement") -> bool:
        """Whether an adaptive point, after its windows so far, gets another one."""
        runs, wins = [r.run_ms for r in m.rounds], [r.window for r in m.rounds]
        return self.adaptive and bool(runs) and m.windows < self.windows and len(runs) < self.wanted(runs, wins)

    def warmed(self, launches: int, run_ms: float, more_ms: float = 0.0) -> bool:
        """Whether `launches` untimed launches (the verification one first) taking `run_ms` of
        kernel time are enough; `more_ms` raises the time asked for (a device's first launches)."""
        return launches >= max(self.warmup, 1) and (
            self.warmup == 0 or run_ms >= max(self.warmup_ms, more_ms))


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
    verification_timed: bool = False  # rounds[0] is the verification launch (a two-window point's first)
    windows: int = 1  # the windows its timed launches came in (Timing.windows)
    worker: str = ""  # the farm worker that measured it ("" in a local sweep)
    # What the setting's family says it moves and computes (Family.figures), set when it is prepared
    bytes_model: int | None = None
    real_flops: int | None = None
    weight_bytes: int | None = None


DEVICE_FIELDS = ("name", "vendor", "platform", "platform_version", "version", "driver", "target",
                 "opencl_c", "compute_units")


def device_identity(info) -> dict:
    """The device and runtime (driver and code target) rows are measured on: what a results file's
    header holds and a resume must match, and what makes a farm's workers one kind."""
    return {f: getattr(info, f) for f in DEVICE_FIELDS if hasattr(info, f)}
