"""Source + -D options -> cl.Program, cached; settings measured one after another built together in
one program; failures kept as data; optional builds ahead of use.

A setting's -D macros reach the compiler as `#define` lines at the top of its source, alone or
batched (with_defines); its rows' `build_options` still list them as -D.

Why batches: PoCL answers a repeated build of the same source from its kernel cache, but only after
preprocessing the source against its OpenCL headers to find the entry, 20-25 ms a program however
small the kernel (measured on PoCL 3.1, a 2-core EPYC). Five settings of a template in one program
(each copy's kernels and helpers renamed, its macros undefined after it) cost 30 ms from the cache
instead of 115, and a cold build shares the headers' parse too. A program that fails to build as a
batch is built again in halves, down to one setting, so a setting's build error is its own.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyopencl as cl

from ..core.errors import first_line

warnings.filterwarnings("ignore", category=cl.CompilerWarning)
_QUIET = {"lock": threading.Lock(), "depth": 0, "saved": None}


@contextlib.contextmanager
def compiler_quiet():
    """The process's stderr (fd 2) sent to /dev/null while a program builds: PoCL's clang writes
    "N warnings generated." there, which the build log (kept in the rows) already says. Builds in
    several threads share one redirection; the last one out restores fd 2."""
    with _QUIET["lock"]:
        if _QUIET["depth"] == 0:
            try:
                sys.stderr.flush()
                _QUIET["saved"] = os.dup(2)
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 2)
                os.close(null)
            except OSError:
                _QUIET["saved"] = None
        _QUIET["depth"] += 1
    try:
        yield
    finally:
        with _QUIET["lock"]:
            _QUIET["depth"] -= 1
            if _QUIET["depth"] == 0 and _QUIET["saved"] is not None:
                os.dup2(_QUIET["saved"], 2)
                os.close(_QUIET["saved"])
                _QUIET["saved"] = None


def first_error_line(exc: BaseException) -> str:
    """The line of a build log or OpenCL error that says what went wrong."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() and not ln.lower().startswith("clbuildprogram failed"):
            return ln[:300]
    return first_line(lines[0], 300) if lines else type(exc).__name__


@dataclass(frozen=True)
class Built:
    """One setting's program: alone (suffix "") or one copy in a batch (its kernels end in suffix)."""

    program: cl.Program
    suffix: str
    ms: float  # the build's wall time; a batch's is shared evenly among its settings
    batch: int = 1  # settings in the program

    def kernel(self, name: str) -> cl.Kernel:
        return cl.Kernel(self.program, name + self.suffix)


# Batched sources --------------------------------------------------------------------------------
def _strip_comments(source: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), source, flags=re.S))


def _strip_attributes(line: str) -> str:
    """`__attribute__((...))` removed, nested parentheses included."""
    while (i := line.find("__attribute__")) >= 0:
        j, depth = line.find("(", i), 0
        if j < 0:
            break
        k = j
        for k in range(j, len(line)):
            depth += {"(": 1, ")": -1}.get(line[k], 0)
            if depth == 0:
                break
        line = line[:i] + line[k + 1:]
    return line


@functools.lru_cache(maxsize=64)
def top_level_names(source: str) -> tuple[str, ...]:
    """Names the template declares at file scope (kernels, helpers, typedefs, variables): each
    copy in a batch renames them. A declaration starts in column 0, as in every template here."""
    names: list[str] = []
    for line in _strip_comments(source).splitlines():
        if not line or line[0].isspace() or line[0] in "#{":
            continue
        line = _strip_attributes(line)
        if line.startswith("typedef") and ";" in line:
            m = re.search(r"(\w+)\s*;\s*$", line)
        elif line.startswith("}"):
            m = re.match(r"}\s*(\w+)\s*;", line)
        else:
            m = re.search(r"(\w+)\s*\(", line) or re.search(r"(\w+)\s*(?:\[|=|;)", line)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    return tuple(names)


@functools.lru_cache(maxsize=64)
def defined_macros(source: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(re.findall(r"^\s*#\s*define\s+(\w+)", _strip_comments(source), re.M)))


@functools.lru_cache(maxsize=64)
def batchable(source: str) -> bool:
    """A source with #include is built one setting per program: an included file's declarations
    and include guard would be shared by the copies, its code compiled with the first copy's macros."""
    return re.search(r"^\s*#\s*include\b", _strip_comments(source), re.M) is None


def _define(option: str) -> tuple[str, str]:
    name, _, value = option[2:].partition("=")
    return name.strip(), value if value else "1"


def with_defines(source: str, macros) -> str:
    """`source` with its -D macros as `#define` lines at its top, as a batch defines them: after the
    OpenCL headers the compiler includes first, so a knob named like a header word (`read_only`)
    builds alone as it builds batched (`-Dread_only=0` on the command line breaks PoCL's header).
    `#line 1` keeps the build log's line numbers those of the source."""
    if not macros:
        return source
    return "".join(f"#define {k} {v}\n" for k, v in map(_define, macros)) + "#line 1\n" + source


def split_options(options) -> tuple[tuple, tuple]:
    """(the -D macros, the other options): settings share a program only when the others agree."""
    return tuple(o for o in options if o.startswith("-D")), tuple(o for o in options if not o.startswith("-D"))


def batch_source(source: str, option_lists) -> str:
    """One program holding `source` once per option list, copy i with its -D macros defined, its
    file-scope names ending in __b<i>, and every macro undefined again after it."""
    names, macros = top_level_names(source), defined_macros(source)
    parts = []
    for i, options in enumerate(option_lists):
        defines = [_define(o) for o in split_options(options)[0]]
        parts += [f"#define {n} {n}__b{i}" for n in names]
        parts += [f"#define {k} {v}" for k, v in defines]
        parts.append(source)
        parts += [f"#undef {m}" for m in dict.fromkeys([*names, *(k for k, _ in defines), *macros])]
    return "\n".join(parts)


class Builder:
    """Builds each (source, options) once. `build` builds the setting asked for together with the
    announced ones (`together`) that share its source and non-macro options, in one program when
    `batch` is on. `prefetch` starts builds on a background thread so they overlap the measurement
    of the current setting (pyopencl releases the GIL while building)."""

    def __init__(self, ctx: cl.Context, batch: bool = True):
        self.ctx, self.batch = ctx, batch
        self.fallbacks = 0  # batches that failed and were built one setting at a time
        self.unbatchable: set[str] = set()  # sources whose batches failed though each setting builds
        # Shared with a worker's parent (worker.py): 1 while a batch is being built, so a crash or
        # hang there is not blamed on the setting being measured alone.
        self.building = None
        self._done: dict = {}  # key -> Built | cl.Error
        self._pending: dict[tuple, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    def _one(self, source: str, options: tuple) -> Built | cl.Error:
        t0 = time.perf_counter()
        macros, plain = split_options(options)
        try:
            with compiler_quiet():
                prg = cl.Program(self.ctx, with_defines(source, macros)).build(options=list(plain))
        except cl.Error as exc:
            return exc
        return Built(prg, "", (time.perf_counter() - t0) * 1e3)

    def _group(self, keys: list[tuple]) -> dict:
        """key -> Built | cl.Error for keys of one source and one set of non-macro options. A batch
        that fails is built again in halves, down to single settings: a setting's build error is
        its own, and the others stay in batches."""
        if len(keys) == 1:
            return {keys[0]: self._one(*keys[0])}
        source, plain = keys[0][0], split_options(keys[0][1])[1]
        t0 = time.perf_counter()
        try:
            with compiler_quiet():
                prg = cl.Program(self.ctx, batch_source(source, [k[1] for k in keys])).build(options=list(plain))
        except cl.Error:
            self.fallbacks += 1
            half = len(keys) // 2
            results = {**self._group(keys[:half]), **self._group(keys[half:])}
            if all(isinstance(r, Built) and r.batch == 1 for r in results.values()):
                # Each builds alone and no two together, so the template cannot be batched (a
                # declaration this module does not find, e.g. an indented one): its settings are
                # built one per program from now on.
                self.unbatchable.add(source)
            return results
        ms = (time.perf_counter() - t0) * 1e3 / len(keys)
        return {k: Built(prg, f"__b{i}", ms, len(keys)) for i, k in enumerate(keys)}

    def _build_keys(self, keys: list[tuple]) -> dict:
        flag = self.building if len(keys) > 1 else None
        if flag is not None:
            flag.value = 1
        try:
            return self._group(keys)
        finally:
            if flag is not None:
                flag.value = 0

    def _members(self, key: tuple, together) -> list[tuple]:
        keys = [key]
        if not self.batch or key[0] in self.unbatchable or not batchable(key[0]):
            return keys
        plain = split_options(key[1])[1]
        for source, options in together:
            k = (source, tuple(options))
            if source == key[0] and split_options(k[1])[1] == plain and k not in keys \
                    and k not in self._done and k not in self._pending:
                keys.append(k)
        return keys

    def prefetch(self, source: str, options: list[str], together=()) -> None:
        key = (source, tuple(options))
        if key in self._done or key in self._pending:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cltune-build")
        keys = self._members(key, together)
        future = self._pool.submit(self._build_keys, keys)
        for k in keys:
            self._pending[k] = future

    def build(self, source: str, options: list[str], together=()) -> Built:
        """The setting's program, or raises its build's cl.Error (remembered, not retried)."""
        key = (source, tuple(options))
        if key not in self._done:
            future = self._pending.pop(key, None)
            results = future.result() if future else self._build_keys(self._members(key, together))
            for k, built in results.items():
                self._done[k] = built
                self._pending.pop(k, None)
        built = self._done[key]
        if isinstance(built, Exception):
            raise built
        return built
