"""A user kernel's data on the device: each buffer argument inside a larger allocation whose two
guard bands hold a canary pattern, so a write outside the argument is caught (an `out_of_bounds`
row naming it); the outputs checked against the reference, each with its own tolerance."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from ..core.device_values import values
from ..core.errors import UserError
from ..core.kernel_problem import KernelProblem
from ..core.records import Status
from ..core.space import Setting
from ..workloads.kernel import register_problem
from .verify import compare

CANARY = 0xCB  # every guard byte
GUARD_BYTES = 4096  # each side of an argument, at least (rounded up to the device's alignment)


@dataclass
class KernelBuffers:
    """What the kernel family's launch takes: each buffer argument's view, the device's values."""

    views: dict  # argument name -> the sub-buffer the kernel gets
    device_env: dict
    cache: dict = field(default_factory=dict)


class KernelData:
    """Buffers with guard bands, initial contents, expected outputs and the check."""

    def __init__(self, ctx, problem: KernelProblem, seed: int, inputs=None, reference: bool = True,
                 host_blas=contextlib.nullcontext, device=None, info=None):
        register_problem(problem)
        self.problem, self.ctx = problem, ctx
        device = device or ctx.devices[0]
        if any(a.dtype == "float64" for a in problem.args) and "cl_khr_fp64" not in device.extensions:
            raise UserError(f"{problem.where}: float64 arguments need a device with cl_khr_fp64; "
                            f"{device.name} has none")
        align = max(1, device.mem_base_addr_align // 8)
        self.guard = -(-GUARD_BYTES // align) * align
        self.host = inputs if inputs is not None else problem.host_arrays(seed)
        self.parents, views = {}, {}
        for a in problem.buffers:
            n = max(1, self.host[a.name].nbytes)
            parent = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 2 * self.guard + n)
            self.parents[a.name] = parent
            views[a.name] = parent.get_sub_region(self.guard, n)
        self.bufs = KernelBuffers(views, values(info) if info is not None else {})
        self.expected = None
        self.reference_setting = None  # a trusted setting the Runner runs first (Reference.kind "setting")
        ref = problem.reference
        if reference and ref is not None:
            if ref.kind == "setting":
                self.reference_setting = dict(ref.setting)
            elif ref.verify is not None:
                self.expected = {}  # the user's verify compares; `answer` need not match the outputs
            else:
                with host_blas():
                    self.expected = expected_outputs(problem, self.host)

    @property
    def verified(self) -> bool:
        return self.problem.reference is not None

    def before_verification(self, queue) -> None:
        """Every buffer back to its initial contents (a kernel may read what it writes, or a setting
        before may have written where it should not), the guard bands to the canary; written from
        the host arrays in place, no copy of them made."""
        band = np.full(self.guard, CANARY, np.uint8)
        self._keep = [band]  # alive until the copies are done (the queue is in order)
        for a in self.problem.buffers:
            body = raw_bytes(self.host[a.name])
            self._keep.append(body)
            after = self.guard + max(1, body.nbytes)  # an empty argument has one byte of its own
            for offset, part in ((0, band), (self.guard, body), (after, band)):
                if part.nbytes:
                    cl.enqueue_copy(queue, self.parents[a.name], part, dst_offset=offset, is_blocking=False)

    def read(self, queue, everything: bool = False) -> tuple[list, object]:
        """Each buffer's (guard before, contents, guard after), copied back without waiting; the
        contents only of the outputs (what check compares) unless `everything`, else None: an input
        of gigabytes is not copied back to check 8 KB of guards."""
        out, last = [], None
        for a in self.problem.buffers:
            g, n = self.guard, max(1, self.host[a.name].nbytes)
            if everything or a.output:
                whole = np.empty(2 * g + n, np.uint8)
                last = cl.enqueue_copy(queue, whole, self.parents[a.name], is_blocking=False)
                out.append((whole[:g], whole[g:g + n], whole[g + n:]))
                continue
            before, after = np.empty(g, np.uint8), np.empty(g, np.uint8)
            cl.enqueue_copy(queue, before, self.parents[a.name], is_blocking=False)
            last = cl.enqueue_copy(queue, after, self.parents[a.name], src_offset=g + n, is_blocking=False)
            out.append((before, None, after))
        return out, last

    def check(self, copies: list, rtol: float, atol: float) -> tuple[Status, float, str]:
        """(status, max abs error, message): out_of_bounds first (a guard byte changed), then each
        output against the reference; `unverified` when there is no reference."""
        worst, msgs = 0.0, []
        for a, (before, _, after) in zip(self.problem.buffers, copies):
            bad_before = int(np.count_nonzero(before != CANARY))
            bad_after = int(np.count_nonzero(after != CANARY))
            if bad_before or bad_after:
                side = " and ".join(s for s, k in (("before its start", bad_before), ("after its end", bad_after)) if k)
                return Status.OUT_OF_BOUNDS, float("nan"), \
                    f"argument {a.name}: {bad_before + bad_after} guard byte(s) written {side}"
        if self.expected is None:
            return Status.UNVERIFIED, None, "no reference: the outputs were not checked"
        if self.problem.reference.verify is not None:
            return self._verify(copies, atol)
        for a, (_, body, _) in zip(self.problem.buffers, copies):
            if a.name not in self.expected or body is None:
                continue
            got = self._output(a, body)
            r, t = self.problem.reference.tolerance(a.name, rtol if got.dtype.kind == "f" else 0.0,
                                                    atol if got.dtype.kind == "f" else 0.0)
            ok, err = compare(got, self.expected[a.name], r, t)
            worst = max(worst, err)
            if not ok:
                msgs.append(f"{a.name}: max abs error {err:.3g} exceeds rtol={r:g} atol={t:g}"
                            + _where(got, self.expected[a.name], r, t))
        if msgs:
            return Status.WRONG_RESULT, worst, "; ".join(msgs)
        return Status.OK, worst, ""

    def _verify(self, copies: list, atol: float) -> tuple[Status, float, str]:
        """Kernel Tuner's verify(answer, outputs, atol): falsy is a wrong result, an exception an error row."""
        ref = self.problem.reference
        got = {a.name: self._output(a, body).copy() for a, (_, body, _) in zip(self.problem.buffers, copies)
               if a.output}
        outputs = [got.get(a.name) if a.kind == "buffer" else None for a in self.problem.args]
        fn = ref.verify
        try:
            takes_atol = "atol" in inspect.signature(fn).parameters
        except (TypeError, ValueError):
            takes_atol = False
        try:
            ok = fn(list(ref.answer), outputs, atol=atol) if takes_atol else fn(list(ref.answer), outputs)
        except Exception as exc:  # noqa: BLE001 (the user's function: its failure is this setting's row)
            return Status.ERROR, None, f"verify raised {_failure(exc)}"
        if not bool(np.all(ok)):
            return Status.WRONG_RESULT, None, f"verify({getattr(fn, '__name__', 'verify')}) returned {ok!r}"
        return Status.OK, None, ""

    def _output(self, a, body: np.ndarray) -> np.ndarray:
        """An output as the caller's array holds it: the argument's bytes (`body`, read back) in its
        own layout, C or Fortran."""
        host = self.host[a.name]
        got = body[:host.nbytes].view(a.np_dtype)
        return got.reshape(host.shape, order="F" if a.order == "F" else "C")

    def arguments_now(self, queue) -> dict:
        """Every buffer argument's contents as they are now, in its own dtype and layout, waited
        for (Kernel Tuner's run_kernel returns them all)."""
        raws, last = self.read(queue, everything=True)
        if last is not None:
            last.wait()
        return {a.name: self._output(a, body).copy() for a, (_, body, _) in zip(self.problem.buffers, raws)}

    def outputs_now(self, queue) -> dict:
        """Every output's contents as they are now, waited for (a reference setting's answer)."""
        out = {}
        for a in self.problem.outputs:
            host = np.empty_like(self.host[a.name])
            cl.enqueue_copy(queue, host, self.bufs.views[a.name]).wait()
            out[a.name] = host.astype(np.float64)
        return out

    def result(self, queue) -> dict:
        return {name: arr for name, arr in self.outputs_now(queue).items()}


def raw_bytes(arr: np.ndarray) -> np.ndarray:
    """An array's memory as bytes, in the order it is laid out (a Fortran-order array's columns
    first): what the device gets, as Kernel Tuner passes it."""
    return arr.ravel(order="A").view(np.uint8)


def _where(got, expected, rtol, atol) -> str:
    """Where the first wrong element is."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got.astype(np.float64) - expected) <= atol + rtol * np.abs(expected))
    idx = np.argwhere(bad)
    if not len(idx):
        return ""
    i = tuple(int(v) for v in idx[0])
    return f" (first at {list(i)}: {got[i]}, expected {expected[i]})"  # numbers, not np.float32(...)


def expected_outputs(problem: KernelProblem, host: dict) -> dict:
    """Each output's expected values (float64 for floats), from a Python function or .npy files or
    the arrays given; a reference that fails or answers the wrong shape is one line naming it."""
    ref = problem.reference
    shapes = {a.name: host[a.name].shape for a in problem.outputs}
    if ref.kind == "python":
        got = _call_python(problem, host)
        where = f"{ref.path}:{ref.function}"
    elif ref.kind == "npy":
        got = {}
        for name, path in ref.files:
            try:
                got[name] = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise UserError(f"{problem.where}: kernel.reference.npy.{name}: cannot read {path}: {exc}") from None
        where = "kernel.reference.npy"
    else:
        got, where = dict(ref.arrays), "answer"
    out = {}
    for name, value in got.items():
        if name not in shapes:
            raise UserError(f"{problem.where}: {where} gave {name!r}, which is not an output argument "
                            f"(outputs: {', '.join(shapes) or 'none'})")
        arr = np.asarray(value)
        # tune_kernel's answer is matched by size alone, as Kernel Tuner matches it
        transposed = ref.kind != "arrays" and _other_grid(arr.shape, shapes[name])
        if arr.size != int(np.prod(shapes[name])) or transposed:
            raise UserError(f"{problem.where}: {where} gave {name} with shape {list(arr.shape)}, expected "
                            f"{list(shapes[name])}")
        out[name] = arr.reshape(shapes[name]).astype(np.float64)
    return out


def _other_grid(got: tuple, want: tuple) -> bool:
    """Two shapes of as many elements that lay them out differently: both of two or more
    dimensions (size-1 ones aside) and unequal, as a transposed [R, C] for [C, R]. A flat answer
    for a shaped argument, or the other way round, is the same elements in order: taken."""
    got, want = (tuple(d for d in s if d != 1) for s in (got, want))
    return len(got) > 1 and len(want) > 1 and got != want


def _failure(exc: BaseException) -> str:
    """How a user's reference failed, in words (sys.exit included: it would end the worker)."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


def _call_python(problem: KernelProblem, host: dict) -> dict:
    ref = problem.reference
    try:
        spec = importlib.util.spec_from_file_location(f"cltune_reference_{abs(hash(ref.path))}", ref.path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, ref.function)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 (the user's file: any failure is theirs, one line)
        raise UserError(f"{problem.where}: kernel.reference.python: cannot load {ref.path}:{ref.function}: "
                        f"{_failure(exc)}") from None
    given = {**{k: v.copy() for k, v in host.items()}, **problem.scalar_env(), **problem.env()}
    params = inspect.signature(fn).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        given = {k: v for k, v in given.items() if k in params}
    try:
        got = fn(**given)
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise UserError(f"{problem.where}: the reference {ref.path}:{ref.function} failed: "
                        f"{_failure(exc)}") from None
    outputs = [a.name for a in problem.outputs]
    if isinstance(got, dict):
        return got
    if isinstance(got, (list, tuple)) and len(got) == len(outputs) and len(outputs) != 1:
        return dict(zip(outputs, got))
    if len(outputs) == 1:
        return {outputs[0]: got}
    raise UserError(f"{problem.where}: the reference {ref.path}:{ref.function} returned "
                    f"{type(got).__name__}; expected a dict of the outputs ({', '.join(outputs)}) or "
                    f"{len(outputs)} arrays in that order")


def run_reference(runner, problem: KernelProblem) -> None:
    """A trusted setting of a user kernel, run once from the initial contents: its outputs become
    what every setting is checked against (Kernel Tuner's answer)."""
    data = runner.data
    prep = runner._prepare(problem, Setting.make("reference", problem.family, data.reference_setting))
    if prep.failed:
        runner._problem = None
        raise UserError(f"{problem.where}: kernel.reference.setting cannot run: {prep.failed.status}: "
                        f"{prep.failed.error}")
    data.before_verification(runner.queue)
    for evt in runner._enqueue(prep):
        evt.wait()
    data.expected = data.outputs_now(runner.queue)
