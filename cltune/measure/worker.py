"""Measurement in a worker process: a hang or a crash costs one setting, never the sweep.

The worker owns the OpenCL context and answers requests over a pipe; the parent owns the results
file. A request that gets no answer within the timeout kills the worker (status `timeout`); a worker
that dies (segfault, abort, OOM kill) is noticed through the pipe (status `crashed`, with its signal).
Either way the next request starts a fresh worker.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import sys
import time
import types
import warnings

from ..core.errors import UserError, first_line
from ..core.records import Measurement, Status
from .protocol import Capabilities
from .shipping import ProblemCache, ProblemRef, shipped, spilled

START_TIMEOUT_S = 120.0  # opening the device and uploading the problem
MAX_WAIT_S = 1e6  # the longest wait for an answer (timeouts times settings can exceed what poll takes)


def _die_with_parent() -> None:
    """Linux: ask the kernel to SIGKILL this worker when the parent dies, even by kill -9."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def serve(conn, parent_pid: int, device_spec, runner_kwargs: dict, modules: tuple, building=None) -> None:
    """The worker's loop: (method, args) in, ("ok", value), ("user_error", message) or ("error",
    "Type: message") out."""
    _die_with_parent()
    # Ctrl-C reaches the whole process group: the parent says what was kept and stops this worker;
    # a KeyboardInterrupt here would only print a traceback between its lines.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.getppid() != parent_pid:
        return
    for name in modules:
        importlib.import_module(name)
    from .device import DeviceSkipped  # pyopencl (0.7 s): only where this process opens a device
    from .runner import Runner  # pyopencl (0.7 s): only where this process opens a device

    try:
        with warnings.catch_warnings(record=True) as caught:  # devices skipped: the parent says so
            warnings.simplefilter("always", DeviceSkipped)
            runner = Runner(device_spec, **runner_kwargs)
    except UserError as exc:
        conn.send(("user_error", str(exc)))
        return
    runner.builder.building = building
    conn.send(("ok", (runner.info, [str(w.message) for w in caught if w.category is DeviceSkipped])))
    problems = ProblemCache()
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            return
        if method == "stop":
            return
        try:
            conn.send(("ok", getattr(runner, method)(*problems.resolve(args))))
        except UserError as exc:
            conn.send(("user_error", str(exc)))
        except Exception as exc:  # noqa: BLE001  (a bug or bad value: the row says which, the worker lives on)
            conn.send(("error", first_line(f"{type(exc).__name__}: {exc}", 500)))


class WorkerDied(Exception):
    """The worker could not answer with a measurement: it hung, died, or raised (status ERROR)."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker stopped answering"
    if code < 0:
        try:
            return f"worker died with {signal.Signals(-code).name} (signal {-code})"
        except ValueError:
            return f"worker died with signal {-code}"
    return f"worker exited with status {code}"


def _loading(problem) -> str:
    """What loading a problem runs that is the user's: their reference, else cltune's own."""
    ref = getattr(problem, "reference", None)
    where = getattr(problem, "where", "the problem")
    if ref is not None and ref.kind == "python":
        return f"{where}: the reference {ref.path}:{ref.function}"
    if ref is not None and ref.kind == "setting":
        return f"{where}: the reference setting"
    return f"{where}: uploading the inputs and computing the reference"


def _spawn(device_spec, runner_kwargs: dict, modules: tuple):
    """A worker process opening `device_spec`, started and not waited for: (process, pipe, building flag)."""
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    building = ctx.Value("b", 0, lock=False)  # set by the worker's Builder
    proc = ctx.Process(target=serve, name="cltune-worker", daemon=True,
                       args=(child, os.getpid(), device_spec, runner_kwargs, modules, building))
    # A spawned child re-runs the parent's main script unless it is guarded by
    # `if __name__ == "__main__"`; the worker needs nothing from it, so it is not handed over.
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        proc.start()
    finally:
        sys.modules["__main__"] = main
    child.close()
    return proc, conn, building


_early: dict = {}  # device spec -> a worker started by start_early, not yet adopted


def start_early(device_spec) -> None:
    """Start the worker for `device_spec` now, before the caller imports the rest of cltune and reads
    its config: the worker's interpreter, imports and device opening (0.4-0.5 s on PoCL) then overlap
    the parent's (0.25-0.3 s). The first WorkerRunner for the same device adopts it and sends it the
    config's tolerances, seed and modules; one that is never adopted dies with the parent (a daemon)."""
    if device_spec not in _early:
        _early[device_spec] = _spawn(device_spec, {}, ())


# What Runner.configure can set on a worker started before the config was read.
_CONFIGURABLE = {"rtol", "atol", "seed", "prebuild"}


def _adopt_early(device_spec, runner_kwargs: dict):
    """The worker start_early began for this device, if any and if configure can give it these
    keyword arguments; any other early worker is stopped."""
    early = _early.pop(device_spec, None)
    others = list(_early.values())
    _early.clear()
    if early is not None and not set(runner_kwargs) <= _CONFIGURABLE:
        others.append(early)
        early = None
    for proc, conn, _ in others:
        proc.kill()
        proc.join(5)
        conn.close()
    return early


class WorkerRunner:
    """The Runner's measuring methods, served by a worker process, with timeouts and restarts."""

    caps = Capabilities(windows=True, timeout=True)

    def __init__(self, device_spec=None, modules: tuple = (), timeout_s: float | None = None, **runner_kwargs):
        self.device_spec, self.modules, self.kwargs = device_spec, tuple(modules), runner_kwargs
        self.timeout_s = timeout_s
        self.restarts = 0
        self.overhead_ms: list[float] = []  # per setting: the parent's wait minus the worker's own time
        self._proc = self._conn = self._building = None
        self.info = self._start()

    def _start(self):
        self._held: set = set()  # keys of the problems this worker process holds (ProblemRef)
        early = _adopt_early(self.device_spec, self.kwargs) if self.restarts == 0 else None
        if early is not None:
            self._proc, self._conn, self._building = early
        else:
            self._proc, self._conn, self._building = _spawn(self.device_spec, self.kwargs, self.modules)
        info, skipped = self._receive(START_TIMEOUT_S)
        if early is not None:  # started before the config was read: its tolerances, seed and modules
            self.configure(self.modules)
        if self.restarts == 0:
            from .device import DeviceSkipped  # pyopencl (0.7 s): only where this process opens a device

            for line in skipped:
                warnings.warn(line, DeviceSkipped, stacklevel=3)
        self.device_spec = info.index  # a restarted worker opens the same device, unprobed choices aside
        return info

    def _receive(self, timeout: float | None):
        if timeout is not None:
            timeout = min(timeout, MAX_WAIT_S)  # the wait beneath takes at most about 24.8 days
        try:
            ready = self._conn.poll(timeout)
        except (EOFError, OSError):
            ready = True
        if not ready:
            self._kill()
            raise WorkerDied(Status.TIMEOUT, f"no answer after {timeout:.3g} s; worker killed")
        try:
            kind, value = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join(5)
            code = self._proc.exitcode
            self._kill()
            raise WorkerDied(Status.CRASHED, _describe_exit(code)) from None
        if kind == "user_error":
            raise UserError(value)
        if kind == "error":
            raise WorkerDied(Status.ERROR, value)
        return value

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def call(self, method: str, *args, timeout: float | None = None):
        if self._proc is None:
            self.restarts += 1
            self._start()
        sent = [a.key for a in args if shipped(a)]
        self._conn.send((method, tuple(ProblemRef(a.key) if shipped(a) and a.key in self._held else spilled(a)
                                       for a in args)))
        self._held.update(sent)  # a new worker starts with none (_start)
        if len(self._held) > ProblemCache.KEEP:
            self._held = set(sent)  # the worker forgot the older ones: send them again when asked
        return self._receive(timeout if timeout is not None else self.timeout_s)

    def configure(self, modules: tuple = (), **runner_kwargs) -> None:
        """New tolerances, seed and modules for the live worker and for any worker started later."""
        self.modules, self.kwargs = tuple(modules), {**self.kwargs, **runner_kwargs}
        if self._proc is not None:
            k = self.kwargs
            self.call("configure", k.get("rtol", 1e-3), k.get("atol", 1e-3), k.get("seed", 0),
                      k.get("prebuild"), self.modules)

    def load_problem(self, problem) -> None:
        """The problem's inputs and reference made ready before any setting is measured: a reference
        that kills, hangs or fails its worker is one line, not a crashed row for every setting."""
        try:
            self.call("load_problem", problem, timeout=max(self.timeout_s or 0.0, START_TIMEOUT_S))
        except WorkerDied as exc:
            raise UserError(f"{_loading(problem)} failed before any setting was measured: {exc.message}") from None

    def measure(self, problem, setting, timing, upcoming=()) -> Measurement:
        t0 = time.perf_counter()
        try:
            m = self.call("measure", problem, setting, timing, tuple(upcoming))
            if m.wall_ms is not None:
                self.overhead_ms.append((time.perf_counter() - t0) * 1e3 - m.wall_ms)
            return m
        except WorkerDied as exc:
            if exc.status != Status.ERROR and self._building is not None and self._building.value:
                # It hung or died building the announced settings with this one (build.py's
                # batches): the fault may be one of theirs. From now on every worker builds one
                # setting per program, and this setting is measured again on its own.
                self.kwargs["batch_builds"] = False
                return self.measure(problem, setting, timing, upcoming)
            return Measurement(setting=setting, status=exc.status, error=exc.message,
                               wall_ms=(time.perf_counter() - t0) * 1e3)

    def measure_more(self, problem, firsts, timing) -> list[Measurement]:
        """Second windows (Runner.measure_more); a worker that dies or hangs in them costs only
        the launches it was making: the first windows' stand."""
        timeout = None if self.timeout_s is None else self.timeout_s * max(1, len(firsts))
        try:
            return self.call("measure_more", problem, list(firsts), timing, timeout=timeout)
        except WorkerDied:
            return list(firsts)

    def measure_interleaved(self, problem, settings, timing) -> list[Measurement]:
        timeout = None if self.timeout_s is None else self.timeout_s * max(1, len(settings))
        try:
            return self.call("measure_interleaved", problem, list(settings), timing, timeout=timeout)
        except WorkerDied as exc:
            return [Measurement(setting=s, status=exc.status, error=exc.message) for s in settings]

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(("stop", ()))
            except OSError:
                pass
            self._proc.join(5)
        self._kill()
