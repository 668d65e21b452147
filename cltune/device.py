"""Pick an OpenCL device, describe it, and open a profiling queue on it."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import pyopencl as cl

from .errors import UserError

INSTALL_HINT = ("no OpenCL platform found: install PoCL with `pip install 'pyopencl[pocl]'` "
                "(or your GPU vendor's OpenCL driver, e.g. libmali on a Mali board)")


@dataclass(frozen=True)
class DeviceInfo:
    """What the results rows carry about the device, and the limits the guard rails check."""

    index: int
    name: str
    platform: str
    platform_version: str
    vendor: str
    type: str
    version: str
    driver: str
    opencl_c: str
    compute_units: int
    max_clock_mhz: int
    global_mem_bytes: int
    max_alloc_bytes: int
    local_mem_bytes: int
    local_mem_type: str
    max_work_group_size: int
    max_work_item_sizes: tuple[int, ...]
    preferred_vector_width_float: int
    native_vector_width_float: int
    profiling_resolution_ns: int

    def as_dict(self) -> dict:
        d = asdict(self)
        d["max_work_item_sizes"] = list(self.max_work_item_sizes)
        return d


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
    )


def select(spec: str | int | None = None) -> tuple[cl.Device, DeviceInfo]:
    """A device by flat index or name substring; else $CLTUNE_DEVICE; else the first GPU, else the first device."""
    pairs = all_devices()
    if spec is None or spec == "":
        spec = os.environ.get("CLTUNE_DEVICE") or None
    if spec is None:
        gpus = [i for i, (_, d) in enumerate(pairs) if d.type & cl.device_type.GPU]
        i = gpus[0] if gpus else 0
    elif isinstance(spec, int) or str(spec).strip().isdigit():
        i = int(spec)
        if not 0 <= i < len(pairs):
            raise UserError(f"device index {i} is out of range: {len(pairs)} device(s) found "
                            "(see `cltune devices`)")
    else:
        needle = str(spec).strip().lower()
        hits = [i for i, (p, d) in enumerate(pairs)
                if needle in d.name.lower() or needle in p.name.lower()]
        if not hits:
            names = ", ".join(f"{i}: {d.name.strip()}" for i, (_, d) in enumerate(pairs))
            raise UserError(f"no OpenCL device matches {spec!r}; devices are {names}")
        i = hits[0]
    platform, device = pairs[i]
    return device, describe(i, platform, device)


def list_devices() -> list[DeviceInfo]:
    return [describe(i, p, d) for i, (p, d) in enumerate(all_devices())]


def open_queue(device: cl.Device) -> tuple[cl.Context, cl.CommandQueue]:
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx, device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return ctx, queue
