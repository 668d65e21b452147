"""A user's own kernel as a kernel family: every knob of its space a `-D NAME=value` macro, its
launch geometry and arguments from the KernelProblem (core/kernel_problem.py). One family per
problem, registered under the problem's `family` name (`kernel:<name>`) wherever that problem is
loaded: the config, a session, a worker's Runner.
"""

from __future__ import annotations

import math
import re

from ..core.device_values import values
from ..core.errors import UserError
from ..core.expr import ExprError
from ..core.kernel_problem import KernelProblem, evaluate, whole
from ..core.sources import whole_file
from .base import CL_STD, Family
from .kernel_args import signature_mismatch
from .launch import Launch
from .registry import FAMILIES, register

KNOB = re.compile(r"[A-Za-z_]\w*$")
SIZE_T_MAX = 2**64 - 1  # what clEnqueueNDRangeKernel's sizes are (pyopencl: std::bad_cast above it)
ARG_INFO = "-cl-kernel-arg-info"  # the driver keeps the argument types: checked against [[kernel.arg]]


def register_problem(problem: KernelProblem) -> "KernelFamily":
    """The problem's family, registered (again) under its name: the one its settings name."""
    family = FAMILIES.get(problem.family)
    if not isinstance(family, KernelFamily) or family.problem != problem:
        family = register(KernelFamily(problem))
    return family


def register_if_kernel(problem) -> None:
    """A session's problem, when it is a user kernel: its family registered for this process."""
    if isinstance(problem, KernelProblem):
        register_problem(problem)


class KernelFamily(Family):
    """Settings of one user kernel: its knobs are free names (what the config's spaces give)."""

    standard = False  # not a conv: never wrapped as diagonalwise

    def __init__(self, problem: KernelProblem):
        super().__init__(name=problem.family)
        self.problem = problem

    # What a family is asked ------------------------------------------------------------------
    def resolve(self, values: dict, where: str = "") -> dict:
        for key, value in values.items():
            if not KNOB.match(str(key)):
                raise UserError(f"{where}knob {key!r} is not a macro name (letters, digits, _)")
            if isinstance(value, (list, dict)) or value is None:
                raise UserError(f"{where}knob {key} must be a number, a string or a boolean, got {value!r}")
        return dict(values)

    def source(self) -> str:
        return self.problem.source

    def setting_source(self, p: dict) -> str:
        """The kernel's source; a generator's (problem.generator) is the one of setting `p`
        (ValueError naming the generator when it fails or gives no text)."""
        gen = self.problem.generator
        if gen is None:
            return self.problem.source
        try:
            text = gen(dict(p))
        except Exception as exc:  # noqa: BLE001 (the user's function: its failure is this setting's row)
            raise ValueError(f"kernel_source: the generator raised {type(exc).__name__}: {exc}") from None
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"kernel_source: the generator returned {type(text).__name__}, not source text")
        return text

    def source_hash(self, p: dict | None = None) -> str:
        try:
            return super().source_hash(p)
        except ValueError:
            return ""  # a generator that fails for this setting: no source, its row says why

    def source_lines(self, p: dict | None = None) -> tuple:
        """The config's files and lines (core/sources.py); tune_kernel's text is `<kernel_source>`."""
        if getattr(self.problem, "generator", None) is not None or not self.problem.source_lines:
            return whole_file("<kernel_source>")
        return self.problem.source_lines

    def options(self, problem, p: dict) -> list[str]:
        macros = {**self.implicit_macros(problem, p), **self.given_macros(problem, p)[0], **p}
        std = [] if any(o.startswith("-cl-std") for o in problem.options) else [CL_STD]
        return [*std, *problem.options, ARG_INFO] + [f"-D{k}={_macro(v)}" for k, v in sorted(macros.items())]

    def reject_reason(self, problem, p: dict, device) -> str | None:
        failed = self.given_macros(problem, p)[1]
        if failed:
            return failed
        try:
            glob, local = self.geometry(problem, p, device)
        except ExprError as exc:
            if device is None and "device." in str(exc):
                return None  # device.* values: checked once the device is known
            return f"launch geometry: {exc}"
        for key, sizes in (("global_size", glob), ("local_size", local or ())):
            for i, n in enumerate(sizes):
                if n > SIZE_T_MAX:
                    return f"{key}[{i}] = {n} does not fit in size_t (at most 2^64 - 1)"
        if local is not None:
            for dim, (g, l) in enumerate(zip(glob, local)):
                if l < 1 or g % l:
                    return (f"global size {g} is not a multiple of local size {l} in dimension {dim} "
                            f"(global {list(glob)}, local {list(local)})")
        if any(g < 1 for g in glob):
            return f"global size {list(glob)} has an empty dimension"
        return work_group_refusal(local, device) or local_bytes_refusal(problem, p, device)

    def figures(self, problem, p: dict) -> dict:
        return {"bytes_model": problem.min_bytes, "real_flops": problem.flops, "weight_bytes": None}

    def tolerance(self, problem, p: dict, rtol: float, atol: float) -> tuple[float, float]:
        return rtol, atol  # per output: the reference's own (kernel_data.py)

    def plan(self, ctx, queue, problem, p: dict, bufs) -> list[Launch]:
        glob, local = self.geometry(problem, p, bufs.device_env)
        env = {**problem.env(), **p, **bufs.device_env}
        args = []
        for a in problem.args:
            if a.kind == "buffer":
                args.append(bufs.views[a.name])
            elif a.kind == "scalar":
                args.append(a.np_dtype.type(evaluate(a.value, env, f"argument {a.name}")))
            else:
                import pyopencl as cl  # pyopencl (0.7 s): only where this process opens a device

                args.append(cl.LocalMemory(max(1, whole(a.local, env, f"argument {a.name} local bytes"))))
        return [Launch(problem.name, problem.name, args, glob, local)]

    def check_kernels(self, problem, kernels: dict, device) -> str | None:
        """The built kernel's signature against [[kernel.arg]]: a mismatch is the config's mistake,
        the same for every setting."""
        return signature_mismatch(problem, kernels[problem.name], device)

    # Helpers -----------------------------------------------------------------------------------
    def given_macros(self, problem, p: dict) -> tuple[dict, str | None]:
        """(the problem's fixed macros for setting `p`, why one could not be made): a value that is
        a function of the knob dict (Kernel Tuner's `defines`) is called; one that fails is left
        out, and the setting refused with its reason."""
        out, failed = {}, None
        for name, value in problem.defines:
            if callable(value):
                try:
                    value = value(dict(p))
                except Exception as exc:  # noqa: BLE001 (the user's function: this setting's row says why)
                    failed = failed or f"defines[{name!r}] raised {type(exc).__name__}: {exc}"
                    continue
            out[name] = value.item() if hasattr(value, "item") else value
        return out, failed

    def implicit_macros(self, problem, p: dict) -> dict:
        """Kernel Tuner's macros beside the knobs, where the problem names its block sizes: each
        block size (1 where the launch has no such dimension), grid_size_x/y/z (work-groups per
        dimension) and kernel_tuner=1; none for a setting whose geometry cannot be evaluated (its
        row says why)."""
        if not problem.block_names:
            return {}
        try:
            glob, local = self.geometry(problem, p, None)
        except ExprError:
            return {}
        local = local or (1,) * len(glob)
        out = {"kernel_tuner": 1}
        for d in range(3):
            out[problem.block_names[d]] = local[d] if d < len(local) else 1
            out[f"grid_size_{'xyz'[d]}"] = glob[d] // max(local[d], 1) if d < len(glob) else 1
        return out

    def geometry(self, problem, p: dict, device) -> tuple[tuple, tuple | None]:
        """(global size, local size or None) of a setting; ExprError when an expression fails."""
        env = {**problem.env(), **p, **derived(problem, p), **_device_env(device)}
        glob = tuple(whole(t, env, f"global_size[{i}]") for i, t in enumerate(problem.global_size))
        local = None
        if problem.local_size is not None:
            local = tuple(whole(t, env, f"local_size[{i}]") for i, t in enumerate(problem.local_size))
        return glob, local


def derived(problem, p: dict) -> dict:
    """The problem's per-setting values (problem.derived: a problem size or a grid divisor given as
    a function of the knobs) for setting `p`; ExprError naming the function when one fails."""
    out = {}
    for name, fn in problem.derived:
        try:
            value = fn(dict(p))
        except Exception as exc:  # noqa: BLE001 (the user's function: this setting's row says why)
            raise ExprError(f"{getattr(fn, 'what', name)} raised {type(exc).__name__}: {exc}") from None
        if hasattr(value, "item"):
            value = value.item()  # a numpy number
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ExprError(f"{getattr(fn, 'what', name)} returned {value!r}, not a number")
        out[name] = value
    return out


def work_group_refusal(local, device) -> str | None:
    """A work-group larger than the device's CL_DEVICE_MAX_WORK_GROUP_SIZE, refused before building
    (as Kernel Tuner leaves such settings out of its space), once the device is known."""
    limit = _device_env(device).get("device.max_work_group_size")
    if local is None or limit is None:
        return None
    items = 1
    for n in local:
        items *= n
    if items > limit:
        return f"device limit: work-group of {items} ({' x '.join(map(str, local))}) > max work-group size {limit}"
    return None


def local_bytes_refusal(problem, p: dict, device) -> str | None:
    """A __local argument whose bytes are negative or fractional for setting `p` (an expression
    that cannot be evaluated is left to the launch plan, whose row names it)."""
    env = {**problem.env(), **p, **_device_env(device)}
    for i, a in enumerate(problem.args):
        if a.kind != "local":
            continue
        try:
            value = evaluate(a.local, env, f"kernel.arg[{i}].local")
        except ExprError:
            continue
        if isinstance(value, float) or value < 0:
            return f"kernel.arg[{i}].local ({a.name}) = {a.local} is {value!r}, not a whole number of bytes >= 0"
    return None


def _device_env(device) -> dict:
    if device is None:
        return {}
    if isinstance(device, dict):
        return device

    return values(device)


def _macro(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return str(value)
