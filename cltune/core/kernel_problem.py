"""A user's own kernel as a problem: its source, named problem sizes, launch geometry, arguments,
reference and metrics. A value (no OpenCL here): a config's [kernel] table (kernel_table.py) or
`cltune.tune_kernel` makes one; workloads/kernel.py builds and launches it, measure/kernel_data.py
holds its buffers and checks its outputs.

Its `key` is a hash of what decides the kernel's work: source, sizes, geometry, defines, options and
the arguments (their contents where given), so two runs of the same kernel on the same problem
share resume keys and best-config entries, and a changed source or argument never does.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .expr import ExprError, parse
from .user_functions import function_text

# dtype name -> (numpy dtype, the OpenCL C type of its elements)
DTYPES = {"float32": ("float32", "float"), "float16": ("float16", "half"), "float64": ("float64", "double"),
          "int32": ("int32", "int"), "uint32": ("uint32", "uint"), "int8": ("int8", "char"),
          "uint8": ("uint8", "uchar"), "int16": ("int16", "short"), "uint16": ("uint16", "ushort"),
          "int64": ("int64", "long"), "uint64": ("uint64", "ulong")}
FILLS = ("random", "zeros", "arange", "nan")


@dataclass(frozen=True)
class Arg:
    """One kernel argument, in the kernel's parameter order."""

    name: str
    kind: str  # "buffer" (a __global pointer), "scalar" (passed by value) or "local" (a __local buffer)
    dtype: str = ""  # a DTYPES name (buffers and scalars)
    shape: tuple = ()  # expression texts over the problem sizes (buffers)
    fill: object = None  # "random", "zeros", "arange", "nan", a number, a .npy path or an array; None: default
    output: bool = False  # checked against the reference after the verification launch
    value: str = ""  # expression text over sizes, knobs and device values (scalars)
    local: str = ""  # bytes, expression text over sizes, knobs and device values (local buffers)
    order: str = "C"  # a buffer's memory layout: "F" (Fortran) goes to the device as laid out, never re-laid

    @property
    def np_dtype(self):
        return np.dtype(DTYPES[self.dtype][0])

    @property
    def cl_type(self) -> str:
        return DTYPES[self.dtype][1]


@dataclass(frozen=True)
class Reference:
    """How the outputs' expected values are known: a Python function, .npy files, a trusted setting
    run first on the device, or arrays given to tune_kernel (Kernel Tuner's `answer`)."""

    kind: str  # "python", "npy", "setting" or "arrays"
    path: str = ""  # python: the module's file
    function: str = ""  # python: the function's name
    files: tuple = ()  # npy: ((output name, path), ...)
    setting: tuple = ()  # setting: its knob values, ((name, value), ...)
    arrays: tuple = ()  # arrays: ((output name, ndarray), ...)
    rtol: tuple = ()  # ((output name, rtol), ...); a name "" applies to every output
    atol: tuple = ()
    # Kernel Tuner's `verify(answer, outputs, atol=None) -> bool`, called instead of the comparison
    # with `answer` as given (one entry per argument) and the checked arguments' contents (None elsewhere)
    verify: object = None
    answer: tuple = ()

    def tolerance(self, output: str, rtol: float, atol: float) -> tuple[float, float]:
        r, a = dict(self.rtol), dict(self.atol)
        return r.get(output, r.get("", rtol)), a.get(output, a.get("", atol))


@dataclass(frozen=True, eq=False)
class KernelProblem:
    """What a user's kernel computes, and how it is launched and checked (see the module's doc)."""

    name: str  # the kernel function
    source: str  # the source files, concatenated, their #include "..." inlined
    sizes: tuple  # (("M", 512), ...): the problem's named integers
    global_size: tuple  # expression texts, one per dimension
    local_size: tuple | None  # expression texts, or None: the driver chooses
    args: tuple  # Arg, in the kernel's parameter order
    defines: tuple = ()  # ((name, value), ...): fixed -D macros
    options: tuple = ()  # other compiler options
    reference: Reference | None = None  # None: rows are `unverified`
    flops_expr: str = ""
    bytes_expr: str = ""
    where: str = "kernel"  # the config file (or tune_kernel), for error lines
    source_lines: tuple = ()  # where each line of `source` came from (core/sources.py); not in the key
    # A function of the knob dict returning the source text (Kernel Tuner's code generator): each
    # setting is built from its own source, and its rows' source_hash is that source's
    generator: object = None
    # ((name, function of the knob dict), ...): per-setting values the geometry's expressions name
    # (a problem size or grid divisor given as a function)
    derived: tuple = ()
    # Kernel Tuner's block size names (x, y, z): given, each setting also gets KT's implicit macros,
    # its block and grid sizes under those names and grid_size_x/y/z, and kernel_tuner=1
    block_names: tuple = ()
    key: str = field(init=False, default="")

    def __post_init__(self):
        object.__setattr__(self, "key", self._make_key())

    def __eq__(self, other) -> bool:
        return isinstance(other, KernelProblem) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def _make_key(self) -> str:
        h = hashlib.sha1()
        parts = [self.name, self.source, self.sizes, self.global_size, self.local_size, self.defines, self.options]
        # what older problems lack only when given, so their keys (resume, best) stay as they were
        parts += [p for p in (function_text(self.generator), [(n, function_text(f)) for n, f in self.derived],
                              self.block_names) if p]
        for part in parts:
            h.update(json.dumps(part, default=str).encode())
        for a in self.args:
            fill = a.fill
            if isinstance(fill, np.ndarray):  # its bytes in C order, read in place when laid out so
                flat = fill.reshape(-1).view(np.uint8) if fill.flags.c_contiguous else np.ascontiguousarray(fill).tobytes()
                fill = hashlib.sha1(flat).hexdigest() + str(fill.dtype)
            elif isinstance(fill, str) and fill.endswith(".npy"):
                try:
                    with open(fill, "rb") as f:
                        fill = hashlib.sha1(f.read()).hexdigest()
                except OSError:
                    pass  # a missing file is refused when the config is read
            h.update(json.dumps([a.name, a.kind, a.dtype, a.shape, fill, a.output, a.value, a.local]
                                + ([a.order] if a.order != "C" else []), default=str).encode())
        sizes = "_".join(f"{k}{v}" for k, v in self.sizes)
        stem = re.sub(r"[^A-Za-z0-9_]+", "", f"{self.name}_{sizes}")[:60]
        return f"kernel_{stem}_{h.hexdigest()[:10]}"

    # What every kind of problem offers the rest of cltune ----------------------------------------
    @property
    def family(self) -> str:
        """The name its settings' family goes by (workloads/kernel.py registers it)."""
        return f"kernel:{self.name}"

    def env(self) -> dict:
        """The problem's values under the names expressions use."""
        return dict(self.sizes)

    @property
    def flops(self) -> int | None:
        return self._metric(self.flops_expr)

    @property
    def min_bytes(self) -> int | None:
        """The `bytes` metric, else every buffer argument read once."""
        if self.bytes_expr:
            return self._metric(self.bytes_expr)
        return sum(self.nbytes(a) for a in self.buffers)

    def _metric(self, text: str) -> int | None:
        return int(evaluate(text, self.env(), "metric")) if text else None

    def row_fields(self) -> dict:
        """The conv columns of a results row: a kernel's buffers' shapes, the rest empty."""
        shapes = " ".join(f"{a.name}:{'x'.join(map(str, self.shape(a)))}" for a in self.buffers)
        return {"input_shape": shapes, "weight_shape": "", "stride": "", "padding": "", "dilation": "",
                "groups": None}

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes)
        return f"kernel {self.name}({', '.join(a.name for a in self.args)}) with {sizes or 'no sizes'}"

    def size_refusal(self, info) -> str | None:
        for a in self.buffers:
            if self.nbytes(a) > info.max_alloc_bytes:
                return (f"{self.where}: argument {a.name} takes {self.nbytes(a)} bytes, more than "
                        f"{info.name}'s largest allocation ({info.max_alloc_bytes} bytes)")
        total = sum(self.nbytes(a) for a in self.buffers)
        if total > info.global_mem_bytes:
            return f"{self.where}: the arguments take {total} bytes, more than {info.name}'s memory"
        return None

    # Buffers ------------------------------------------------------------------------------------
    @property
    def buffers(self) -> list[Arg]:
        return [a for a in self.args if a.kind == "buffer"]

    @property
    def outputs(self) -> list[Arg]:
        return [a for a in self.args if a.kind == "buffer" and a.output]

    def shape(self, arg: Arg) -> tuple[int, ...]:
        return tuple(int(evaluate(t, self.env(), f"arg {arg.name} shape")) for t in arg.shape)

    def nbytes(self, arg: Arg) -> int:
        return math.prod(self.shape(arg)) * arg.np_dtype.itemsize

    def host_arrays(self, seed: int) -> dict:
        """Every buffer argument's initial contents: name -> an array of its dtype, laid out in
        memory as the argument's `order` says (C, or F: Fortran)."""
        return {a.name: filled(a, self.shape(a), seed + i) for i, a in enumerate(self.args) if a.kind == "buffer"}

    def scalar_env(self) -> dict:
        """The scalars whose value the problem alone decides (what a Python reference is given)."""
        out = {}
        for a in self.args:
            if a.kind == "scalar":
                try:
                    out[a.name] = a.np_dtype.type(evaluate(a.value, self.env(), f"arg {a.name} value")).item()
                except (ExprError, KeyError):
                    pass  # names a knob: differs per setting
        return out


def filled(arg: Arg, shape: tuple, seed: int) -> np.ndarray:
    """An argument's initial contents (see Arg.fill); an output without a fill starts as NaN
    (floats) or a canary value (ints), so an element no work-item writes fails the check."""
    arr = _filled(arg, shape, seed)
    return np.asfortranarray(arr) if arg.order == "F" else np.ascontiguousarray(arr)


def _filled(arg: Arg, shape: tuple, seed: int) -> np.ndarray:
    dtype, fill = arg.np_dtype, arg.fill
    if fill is None:
        fill = "nan" if arg.output else "random"
    if isinstance(fill, np.ndarray):
        return fill.reshape(shape).astype(dtype, copy=False)
    if isinstance(fill, str) and fill.endswith(".npy"):
        # mapped, copy on write: a large array (shipping.spilled) is read from the page cache, not held twice
        return np.load(fill, mmap_mode="c", allow_pickle=False).reshape(shape).astype(dtype, copy=False)
    if fill == "zeros":
        return np.zeros(shape, dtype)
    if fill == "arange":
        return np.arange(math.prod(shape)).reshape(shape).astype(dtype)
    if fill == "nan":
        return np.full(shape, np.nan if dtype.kind == "f" else canary(dtype), dtype)
    if fill == "random":
        rng = np.random.default_rng(seed)
        if dtype.kind == "f":
            return rng.uniform(-1.0, 1.0, shape).astype(dtype)
        low, high = (-64, 64) if dtype.kind == "i" else (0, 128)
        return rng.integers(low, high, shape).astype(dtype)
    return np.full(shape, fill, dtype)  # a number


def canary(dtype) -> int:
    """The value an int output starts as: unlikely to be the right answer anywhere."""
    return {1: 0x5A, 2: 0x5A5A, 4: 0x5A5A5A5A, 8: 0x5A5A5A5A5A5A5A5A}[np.dtype(dtype).itemsize] & \
        np.iinfo(dtype).max


def evaluate(text: str, env: dict, what: str):
    """An expression's value; a float that is a whole number becomes an int. Any failure (a name
    missing from env, a division by zero) is an ExprError naming `what`."""
    try:
        value = _compiled(str(text))(env)
    except KeyError as exc:
        raise ExprError(f"{what}: {text!r} names {exc.args[0]}, which has no value here") from None
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as exc:
        if isinstance(exc, ExprError):
            raise
        raise ExprError(f"{what}: {text!r} cannot be evaluated: {exc}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExprError(f"{what}: {text!r} is {value!r}, not a number")
    return value


@lru_cache(maxsize=4096)
def _compiled(text: str):
    return parse(text)


def whole(text: str, env: dict, what: str) -> int:
    """An expression that must be a whole number >= 0 (a size)."""
    value = evaluate(text, env, what)
    if isinstance(value, float) or value < 0:
        raise ExprError(f"{what} = {text} is {value!r}, not a whole number >= 0")
    return value
