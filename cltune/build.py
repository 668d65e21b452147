"""Source + -D options -> cl.Program, cached; failures kept as data; optional builds ahead of use."""

from __future__ import annotations

import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor

import pyopencl as cl

warnings.filterwarnings("ignore", category=cl.CompilerWarning)


def first_error_line(exc: BaseException) -> str:
    """The line of a build log or OpenCL error that says what went wrong."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() and not ln.lower().startswith("clbuildprogram failed"):
            return ln[:300]
    return (lines[0] if lines else type(exc).__name__)[:300]


class Builder:
    """Builds each (source, options) once. `prefetch` starts builds on a background thread so they
    overlap the measurement of the current setting (pyopencl releases the GIL while building)."""

    def __init__(self, ctx: cl.Context):
        self.ctx = ctx
        self._done: dict = {}  # key -> (program | cl.Error, build ms)
        self._pending: dict[tuple, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    def _build(self, source: str, options: tuple) -> tuple:
        t0 = time.perf_counter()
        try:
            prg = cl.Program(self.ctx, source).build(options=list(options))
        except cl.Error as exc:
            prg = exc
        return prg, (time.perf_counter() - t0) * 1e3

    def prefetch(self, source: str, options: list[str]) -> None:
        key = (source, tuple(options))
        if key in self._done or key in self._pending:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cltune-build")
        self._pending[key] = self._pool.submit(self._build, source, key[1])

    def build(self, source: str, options: list[str]) -> tuple[cl.Program, float]:
        """(program, build ms), or raises the build's cl.Error (remembered, not retried)."""
        key = (source, tuple(options))
        if key not in self._done:
            future = self._pending.pop(key, None)
            self._done[key] = future.result() if future else self._build(source, key[1])
        prg, ms = self._done[key]
        if isinstance(prg, Exception):
            raise prg
        return prg, ms
