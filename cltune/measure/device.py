"""Pick an OpenCL device that really works, describe it, and open a profiling queue on it.

A machine can list devices that cannot build a kernel: the PoCL bundled in the pyopencl wheel
(LLVM 14) refuses CPUs newer than it knows ("unknown target CPU 'generic'"). Every device is
therefore probed (a tiny kernel built, launched and checked, once per process) before it is chosen.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from ..core.device_info import DeviceInfo
from ..core.errors import UserError
from .build import first_error_line
from .hostgemm import host_cpu

INSTALL_HINT = ("no OpenCL platform found: install PoCL with `pip install 'pyopencl[pocl]'` "
                "(or your GPU vendor's OpenCL driver, e.g. libmali on a Mali board)")


def all_devices() -> list[tuple[cl.Platform, cl.Device]]:
    """Every (platform, device) pair, in the order `cltune devices` numbers them."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # PLATFORM_NOT_FOUND_KHR when no ICD is installed
        raise UserError(INSTALL_HINT) from exc
    pairs = []
    for platform in platforms:
        try:
            pairs += [(platform, d) for d in platform.get_devices()]
        except cl.Error:
            continue  # a platform with no devices (e.g. a GPU driver without its GPU)
    if not pairs:
        raise UserError(INSTALL_HINT)
    return pairs


def describe(index: int, platform: cl.Platform, device: cl.Device) -> DeviceInfo:
    return DeviceInfo(
        index=index,
        name=device.name.strip(),
        platform=platform.name.strip(),
        platform_version=platform.version.strip(),
        vendor=device.vendor.strip(),
        type=cl.device_type.to_string(device.type),
        version=device.version.strip(),
        driver=device.driver_version.strip(),
        opencl_c=device.opencl_c_version.strip(),
        compute_units=device.max_compute_units,
        max_clock_mhz=device.max_clock_frequency,
        global_mem_bytes=device.global_mem_size,
        max_alloc_bytes=device.max_mem_alloc_size,
        local_mem_bytes=device.local_mem_size,
        local_mem_type=cl.device_local_mem_type.to_string(device.local_mem_type),
        max_work_group_size=device.max_work_group_size,
        max_work_item_sizes=tuple(device.max_work_item_sizes),
        preferred_vector_width_float=device.preferred_vector_width_float,
        native_vector_width_float=device.native_vector_width_float,
        profiling_resolution_ns=device.profiling_timer_resolution,
        target=runtime_target(device.version),
    )


def machine_line(info: DeviceInfo) -> str:
    """What a benchmark's output names: the host CPU and its vector extensions, and the OpenCL
    device, runtime and code target it ran on."""
    return (f"host: {host_cpu()}; OpenCL: [{info.index}] {info.name} ({info.platform}, driver "
            f"{info.driver}" + (f", target {info.target}" if info.target else "") + ")")


def runtime_target(version: str) -> str:
    """PoCL names its code-generation target in CL_DEVICE_VERSION after "HSTR:"; others say nothing."""
    _, sep, rest = version.partition("HSTR:")
    return rest.strip() if sep else ""


def select(spec: str | int | None = None) -> tuple[cl.Device, DeviceInfo]:
    """A device by flat index or name substring; else $CLTUNE_DEVICE; else the first GPU that passes
    the probe, else the first device that does. A named device that fails the probe is an error."""
    pairs = all_devices()
    if spec is None or spec == "":
        spec = os.environ.get("CLTUNE_DEVICE") or None
    if spec is None:
        i = _first_working(pairs)
    else:
        i = _lookup(pairs, spec)
        result = probe(*pairs[i])
        if not result.ok:
            raise UserError(f"device [{i}] {result.line(pairs[i][1])}")
    platform, device = pairs[i]
    return device, describe(i, platform, device)


def _lookup(pairs, spec) -> int:
    if isinstance(spec, int) or str(spec).strip().isdigit():
        i = int(spec)
        if not 0 <= i < len(pairs):
            raise UserError(f"device index {i} is out of range: {len(pairs)} device(s) found "
                            "(see `cltune devices`)")
        return i
    needle = str(spec).strip().lower()
    hits = [i for i, (p, d) in enumerate(pairs) if needle in d.name.lower() or needle in p.name.lower()]
    if not hits:
        names = ", ".join(f"{i}: {d.name.strip()}" for i, (_, d) in enumerate(pairs))
        raise UserError(f"no OpenCL device matches {spec!r}; devices are {names}")
    return hits[0]


def _first_working(pairs) -> int:
    """GPUs first, then the rest; devices that fail the probe are skipped with one line each."""
    order = sorted(range(len(pairs)), key=lambda i: not pairs[i][1].type & cl.device_type.GPU)
    failed = []
    for i in order:
        result = probe(*pairs[i])
        if result.ok:
            for j, line in failed:
                warnings.warn(f"skipped OpenCL device [{j}] {line}", DeviceSkipped, stacklevel=3)
            return i
        failed.append((i, result.line(pairs[i][1])))
    raise UserError("no OpenCL device can build and run a kernel: "
                    + "; ".join(f"[{j}] {line}" for j, line in failed))


class DeviceSkipped(UserWarning):
    """A listed device failed the probe and another one was chosen."""


@dataclass(frozen=True)
class Probe:
    """Whether a device built, ran and got right a tiny kernel; if not, why and what fixes it."""

    ok: bool
    cause: str = ""
    fix: str = ""

    def line(self, device) -> str:
        if self.ok:
            return f"{device.name.strip()}: ok"
        return f"{device.name.strip()} ({device.driver_version.strip()}): {self.cause}; fix: {self.fix}"


PROBE_SOURCE = """
__kernel void cltune_probe(__global const float *x, __global float *y) {
    const size_t i = get_global_id(0);
    y[i] = x[i] * 2.0f + 1.0f;
}
"""
_probes: dict[int, Probe] = {}


def probe(platform: cl.Platform, device: cl.Device) -> Probe:
    """The device's probe result, measured once per process."""
    key = device.int_ptr
    if key not in _probes:
        _probes[key] = _run_probe(platform, device)
    return _probes[key]


def _run_probe(platform: cl.Platform, device: cl.Device) -> Probe:
    x = np.arange(64, dtype=np.float32)
    y = np.full_like(x, np.nan)
    try:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx, device)
        prg = cl.Program(ctx, PROBE_SOURCE).build(options=["-cl-std=CL1.2"])
        mf = cl.mem_flags
        xb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
        yb = cl.Buffer(ctx, mf.WRITE_ONLY, y.nbytes)
        cl.Kernel(prg, "cltune_probe")(queue, x.shape, None, xb, yb)
        cl.enqueue_copy(queue, y, yb)
        queue.finish()
    except cl.Error as exc:
        return Probe(False, first_error_line(exc), fix_hint(platform))
    if not np.array_equal(y, x * 2 + 1):
        return Probe(False, "the probe kernel computed wrong values", fix_hint(platform))
    return Probe(True)


def fix_hint(platform: cl.Platform) -> str:
    """What to install instead of a runtime that cannot build for this machine."""
    if "portable computing language" in platform.name.lower():
        return ("install the system PoCL, whose LLVM knows newer CPUs "
                "(Debian/Ubuntu: `apt-get install pocl-opencl-icd`)")
    return "check the vendor's OpenCL driver for this device (see `cltune devices`)"


def list_devices() -> list[tuple[DeviceInfo, Probe]]:
    """Every device with its probe result, in `cltune devices` order."""
    return [(describe(i, p, d), probe(p, d)) for i, (p, d) in enumerate(all_devices())]


def working_devices() -> list[DeviceInfo]:
    """The devices that pass the probe (the test suite runs its correctness tests on each)."""
    return [info for info, result in list_devices() if result.ok]


def open_queue(device: cl.Device) -> tuple[cl.Context, cl.CommandQueue]:
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return ctx, queue
