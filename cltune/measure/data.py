"""A problem's data on the device: its inputs uploaded once, its outputs, the reference they are
checked against, and the check itself. The Runner times settings; what it verifies with is here,
one class per kind of problem (`open_data` picks it by the problem's type): ConvData here, a user
kernel's KernelData in kernel_data.py."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from ..core.kernel_problem import KernelProblem
from ..core.problem import Problem, reference_conv2d
from ..core.records import Status
from ..workloads.buffers import upload
from .kernel_data import KernelData
from .verify import compare


@dataclass
class Buffers:
    """A conv problem's tensors on the device, and on the host for families that repack them."""

    x: cl.Buffer
    w: cl.Buffer
    b: cl.Buffer
    out: cl.Buffer
    x_host: np.ndarray
    w_host: np.ndarray
    b_host: np.ndarray
    out_nbytes: int
    cache: dict = field(default_factory=dict)  # families keep repacked weights and scratch here
    shared: dict | None = None  # scratch shared with other layers of a network (workloads/buffers.scratch)


class ConvData:
    """A conv2d problem (core.problem.Problem): x, w, b in, one float32 output checked against
    a float64 reference computed on the host."""

    reference_setting = None  # its reference is computed on the host

    def __init__(self, ctx, problem: Problem, seed: int, inputs=None, reference: bool = True,
                 host_blas=contextlib.nullcontext, device=None, info=None):
        self.problem = problem
        x, w, b = inputs if inputs is not None else problem.make_inputs(seed)
        b = b if b is not None else np.zeros(problem.out_c, np.float32)
        out_nbytes = 4 * math.prod(problem.output_shape)
        self.bufs = Buffers(upload(ctx, x), upload(ctx, w), upload(ctx, b),
                            cl.Buffer(ctx, cl.mem_flags.READ_WRITE, out_nbytes), x, w, b, out_nbytes)
        self.expected = None
        if reference:
            with host_blas():
                self.expected = reference_conv2d(problem, x, w, b if problem.bias else None)

    def before_verification(self, queue) -> None:
        """Fill the output with NaN, so an element no work-item writes fails the check."""
        cl.enqueue_fill_buffer(queue, self.bufs.out, np.float32(np.nan), 0, self.bufs.out_nbytes)

    def read(self, queue) -> tuple[list, object]:
        """The outputs' host copies, enqueued without waiting, and the event of the last copy."""
        out = np.empty(self.bufs.out_nbytes // 4, np.float32)
        return [out], cl.enqueue_copy(queue, out, self.bufs.out, is_blocking=False)

    def check(self, outputs: list, rtol: float, atol: float) -> tuple[Status, float, str]:
        """(status, max abs error, message) of the outputs `read` copied, once their copy is done."""
        ok, max_err = compare(outputs[0].reshape(self.problem.output_shape), self.expected, rtol, atol)
        if ok:
            return Status.OK, max_err, ""
        return Status.WRONG_RESULT, max_err, f"max abs error {max_err:.3g} exceeds rtol={rtol:g} atol={atol:g}"

    def result(self, queue) -> np.ndarray:
        """The output as it is now, waited for (the API's path)."""
        out = np.empty(self.problem.output_shape, np.float32)
        cl.enqueue_copy(queue, out, self.bufs.out).wait()
        return out


def open_data(ctx, problem, seed: int, inputs=None, reference: bool = True, host_blas=contextlib.nullcontext,
              device=None, info=None):
    """The data of `problem` on `device` (of ctx): a conv's, or a user kernel's (kernel_data.py)."""
    if isinstance(problem, KernelProblem):
        return KernelData(ctx, problem, seed, inputs, reference, host_blas, device, info)
    return ConvData(ctx, problem, seed, inputs, reference, host_blas, device, info)


def host_blas(device):
    """Host BLAS on one thread when the device is the CPU: OpenBLAS's threads busy-wait about
    0.1 s after a call, on the cores the kernels run on. Measured on PoCL (2 cores), a kernel
    timed right after a 2-thread 600x600 matmul ran 1.4-1.5x slow on average over its next 40
    launches (most at 2x), and 1.02-1.08x after the same matmul on one thread."""
    if device.type & cl.device_type.CPU:
        from threadpoolctl import threadpool_limits  # threadpoolctl: only when the host BLAS is timed

        return threadpool_limits(1, user_api="blas")
    return contextlib.nullcontext()
