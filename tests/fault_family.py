"""A kernel family for fault-injection tests: the study kernel, then a kernel that misbehaves.

FAULT: 0 nothing, 1 loop forever, 2 write far out of bounds, 3 fail to build, 4 raise a Python
ValueError in the host code (planning the launches), 5 crash the process that builds it (a
compiler crash, alone or in a batch with other settings: build.py).
Imported by the worker process through `modules=("tests.fault_family",)`.
"""

import os
import signal

from cltune.measure.build import Builder
from cltune.workloads import FAMILIES, Launch, Param, get_family, register
from cltune.workloads.conv2d import Conv2dFamily

FAULT_SOURCE = r"""
#ifndef FAULT
#define FAULT 0
#endif
#if FAULT == 3
#error "injected build failure"
#endif
__kernel void fault(__global float *out, volatile __global int *flag) {
#if FAULT == 1
    while (flag[0] == 0) { }                      /* flag stays 0: never returns */
#elif FAULT == 2
    out[(1L << 40) + get_global_id(0)] = 1.0f;   /* 4 TiB past the buffer */
#endif
}
"""


class FaultFamily(Conv2dFamily):
    def source(self):
        return super().source() + FAULT_SOURCE

    def defines(self, problem, p):
        return {**super().defines(problem, p), "FAULT": p["FAULT"]}

    def launches(self, ctx, queue, problem, p, bufs):
        import numpy as np
        import pyopencl as cl

        if p["FAULT"] == 4:
            raise ValueError("injected host error: seed must be non-negative")
        out = super().launches(ctx, queue, problem, p, bufs)
        if p["FAULT"]:
            flag = bufs.cache.get("fault_flag")
            if flag is None:
                flag = bufs.cache["fault_flag"] = cl.Buffer(
                    ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=np.zeros(1, np.int32))
            out.append(Launch("fault", "fault", [bufs.out, flag], (1,), None))
        return out


_group = Builder._group


def _group_that_crashes_on_fault_5(self, keys):
    if any("-DFAULT=5" in options for _, options in keys):
        os.kill(os.getpid(), signal.SIGKILL)  # SIGSEGV would meet LLVM's crash handler
    return _group(self, keys)


if "faults" not in FAMILIES:
    Builder._group = _group_that_crashes_on_fault_5
    base = get_family("conv2d")
    register(FaultFamily(name="faults", sources=base.sources,
                         params=base.params + (Param("FAULT", (0, 1, 2, 3, 4, 5), 0, "the fault to inject"),)))
