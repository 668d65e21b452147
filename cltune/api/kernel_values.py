"""Kernel Tuner's value forms, made into what a KernelProblem and a Space hold: `tune_params` of
any sequence (numpy scalars as Python values), `problem_size` and `grid_div_*` as numbers,
expressions or functions of the knob dict, `kernel_source` as text, a file, a list of files or a
generator function. Both `cltune.tune_kernel` and the Kernel Tuner surface read their arguments
through these, so a form works in both or in neither. Meanings as Kernel Tuner 1.5's: the global
size is ceil(problem size / the product of the grid divisors) x the block size; a divisor left None
is the block size's knob (1 without one), `[]` divides by nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..core.errors import UserError
from ..core.expr import ExprError, parse
from ..core.user_functions import UserFunction, shippable
from ..loader.config import default_timing

SIZE_NAMES = ("problem_size_x", "problem_size_y", "problem_size_z")
BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
DEFAULT_BLOCK = (256, 1, 1)  # Kernel Tuner's, for a block size the space does not name
AXES = "xyz"


def plain(value):
    """A numpy scalar (or 0-d array) as the Python value it holds; anything else unchanged."""
    return value.item() if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0 else value


def knob_values(tune_params) -> dict:
    """knob -> tuple of Python values, from a dict whose values are lists, tuples, ranges or numpy
    arrays (numpy scalars anywhere become ints, floats, bools and strings)."""
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise UserError("tune_params: expected a dict of knob names and non-empty value lists")
    out = {}
    for name, values in tune_params.items():
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise UserError(f"tune_params[{name!r}]: expected a list, tuple, range or numpy array of values, "
                            f"got {type(values).__name__}")
        vals = tuple(plain(v) for v in np.ravel(values)) if isinstance(values, np.ndarray) else \
            tuple(plain(v) for v in values)
        bad = [v for v in vals if not isinstance(v, (int, float, str, bool))]
        if not vals or bad:
            raise UserError(f"tune_params[{name!r}]: expected a non-empty list of numbers, strings or booleans"
                            + (f", got {bad[0]!r}" if bad else ""))
        out[str(name)] = vals
    return out


def first_setting(knobs: dict) -> dict:
    """The first value of each knob: the setting a generator's source is read at for names."""
    return {k: v[0] for k, v in knobs.items()}


# Problem size and launch geometry ------------------------------------------------------------
def geometry(problem_size, knobs: dict, block_size_names, grid_div) -> tuple:
    """(sizes, global size texts, local size texts, derived, block names) for KernelProblem: `sizes`
    the named integers of the problem, `derived` ((name, function of the knob dict), ...) for what
    is given as a function, evaluated per setting; the 3 block size names."""
    blocks = tuple(block_size_names or BLOCK_NAMES)
    if len(blocks) > 3 or not all(isinstance(b, str) for b in blocks):
        raise UserError(f"block_size_names: expected 1 to 3 knob names, got {block_size_names!r}")
    blocks = blocks + BLOCK_NAMES[len(blocks):]
    sizes, texts, derived = _problem_sizes(problem_size, knobs)
    # Kernel Tuner launches in 3 dimensions; here as many as the problem has, or a block knob names
    dims = max([len(texts)] + [d + 1 for d in range(3) if blocks[d] in knobs])
    glob, local = [], []
    for d in range(dims):
        block = blocks[d] if blocks[d] in knobs else str(DEFAULT_BLOCK[d])
        given = grid_div[d] if d < len(grid_div) else None
        div = _divisor(given if given is not None else ([blocks[d]] if blocks[d] in knobs else []),
                       f"grid_div_{AXES[d]}", knobs, derived)
        size = texts[d] if d < len(texts) else "1"
        glob.append(f"({size} + ({div}) - 1) // ({div}) * ({block})")
        local.append(block)
    return tuple(sizes), tuple(glob), tuple(local), tuple(derived), blocks


def _problem_sizes(problem_size, knobs: dict) -> tuple[list, list, list]:
    """(named integers, one text per dimension, derived) of a problem size."""
    what = "problem_size"
    if callable(problem_size):
        fn = shippable(problem_size, what)
        derived = [(SIZE_NAMES[d], UserFunction(fn.fn, what, part=d)) for d in range(3)]
        return [], list(SIZE_NAMES), derived
    entries = tuple(problem_size) if isinstance(problem_size, (list, tuple, np.ndarray)) else (problem_size,)
    if not 1 <= len(entries) <= 3:
        raise UserError(f"{what}: expected an int, an expression or a function of the knobs, or a tuple of "
                        f"1 to 3 ints or expressions, got {problem_size!r}")
    sizes, texts = [], []
    for d, s in enumerate(entries):
        if isinstance(s, str):
            texts.append(_expression(s, f"{what}[{d}]" if len(entries) > 1 else what, knobs))
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and 0 < s < 2**64:
            sizes.append((SIZE_NAMES[d], int(s)))
            texts.append(SIZE_NAMES[d])
        else:
            raise UserError(f"{what}: expected ints > 0 (below 2^64, a size_t) or expressions over the knobs, "
                            f"got {problem_size!r}")
    return sizes, texts, []


def _divisor(div, what: str, knobs: dict, derived: list) -> str:
    """A grid divisor's text: a number, one expression (a string is never split into letters), a
    function of the knob dict (derived), or a list of these multiplied ([] is 1)."""
    if callable(div):
        fn = shippable(div, what)
        name = f"{what}_{len(derived)}"
        derived.append((name, fn))
        return name
    if isinstance(div, str):
        return _expression(div, what, knobs)
    if isinstance(div, (int, np.integer)) and not isinstance(div, bool) and div > 0:
        return str(int(div))
    if isinstance(div, (list, tuple, np.ndarray)):
        return " * ".join(f"({_divisor(plain(x), what, knobs, derived)})" for x in div) or "1"
    raise UserError(f"{what}: expected a list of knob names, expressions, ints or functions of the knobs, "
                    f"one of these, or None, got {div!r}")


def _expression(text: str, what: str, knobs: dict) -> str:
    """An expression over the knobs, as Kernel Tuner evaluates it (int() of its value: floored)."""
    try:
        parse(text, set(knobs))
    except ExprError as exc:
        raise UserError(f"{what}: {exc} in {text!r}") from None
    return text.strip() if text.strip() in knobs else f"floor({text})"


# Kernel source -------------------------------------------------------------------------------
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$', re.M)


def source_forms(kernel_source, knobs: dict) -> tuple[str, object]:
    """(source text, generator or None). A function is a generator f(knob dict) -> source, called per
    setting (the text returned is its source at the space's first setting). A list: the first is
    the kernel, the others only files it may `#include "..."`: inlined where it includes them."""
    if callable(kernel_source):
        gen = shippable(kernel_source, "kernel_source")
        try:
            text = gen(first_setting(knobs))
        except Exception as exc:  # noqa: BLE001 (the user's function)
            raise UserError(f"kernel_source: the generator raised {type(exc).__name__}: {exc} for the first "
                            f"setting {first_setting(knobs)}") from None
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"kernel_source: the generator returned {type(text).__name__}, not source text")
        return text, gen
    if isinstance(kernel_source, (list, tuple)):
        if not kernel_source or callable(kernel_source[0]) and len(kernel_source) > 1:
            raise UserError("kernel_source: expected the kernel's source, a file or a list of files")
        deps = {str(d): Path(d) for d in kernel_source[1:]}
        deps.update({Path(d).name: p for d, p in list(deps.items())})
        return _text(kernel_source[0], deps), None
    return _text(kernel_source, {}), None


def _text(source, deps: dict) -> str:
    if isinstance(source, Path) or (isinstance(source, str) and looks_like_a_file(source)):
        return _inlined(Path(source), deps, ())
    if not isinstance(source, str) or not source.strip():
        raise UserError("kernel_source: expected the kernel's source text, a file, a list of files or a "
                        f"generator function, got {type(source).__name__}")
    return source


def looks_like_a_file(text: str) -> bool:
    """A short line without code's punctuation that names a file, or ends as a source file does."""
    if len(text) > 250 or "\n" in text or any(c in text for c in "();{}\\"):
        return False
    return Path(text).is_file() or text.strip().endswith((".cl", ".c", ".h", ".opencl"))


def _inlined(path: Path, deps: dict, seen: tuple) -> str:
    """A file's text with each `#include "name"` of a listed dependency (by the name as listed or
    its file name) or of a file beside it replaced by that file's text, as the compiler would
    include it (PoCL compiles a copy elsewhere, where a relative include is not found)."""
    if path.resolve() in seen:
        raise UserError(f"kernel_source: {path} includes itself (through {' -> '.join(p.name for p in seen)})")

    def inline(m):
        name = m.group(1)
        found = deps.get(name) or (path.parent / name if (path.parent / name).is_file() else None)
        if found is None:
            return m.group(0)
        return f"// #include \"{name}\"\n" + _inlined(Path(found), deps, (*seen, path.resolve()))

    return INCLUDE.sub(inline, _read(path))


def _read(path) -> str:
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"kernel_source: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def timing(iterations=None):
    """The sweep's default timing, or with `iterations` Kernel Tuner's: after the warm-up, exactly that
    many timed launches per setting (no adaptive stop), each kept in the row's run_ms_samples."""
    base = default_timing()
    if iterations is None:
        return base
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise UserError(f"iterations: expected an int >= 1, got {iterations!r}")
    n = int(iterations)
    return replace(base, adaptive=False, repeat=n, max_repeat=n, top_repeat=n, min_time_ms=0.0)


def memory_order(array: np.ndarray, what: str) -> str:
    """How an argument's memory is laid out: "C", or "F" for a Fortran-order array, which goes to the
    device as its raw memory (as Kernel Tuner passes it), never re-laid out. A strided view is
    neither: one line, since its raw memory is not the array."""
    if array.flags.c_contiguous:
        return "C"
    if array.flags.f_contiguous:
        return "F"
    raise UserError(f"{what}: a strided view, not contiguous in memory; pass np.ascontiguousarray() or "
                    "np.asfortranarray() of it")


def macros(defines) -> tuple:
    """Fixed macros, name -> value, as KernelProblem.defines: numpy scalars as Python values, a
    function of the knob dict (Kernel Tuner's `defines`) kept to be called per setting."""
    if defines is None:
        return ()
    if not isinstance(defines, Mapping):
        raise UserError(f"defines: expected a dict of macro name -> value, got {type(defines).__name__}")
    return tuple((str(k), shippable(v, f"defines[{k!r}]") if callable(v) else plain(v)) for k, v in defines.items())
