"""A device's description as every results header, resume key, farm kind and `device.*` value sees it:
a plain value with no OpenCL import (measure/device.py reads it from the driver)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
    target: str = ""  # the code the runtime generates (PoCL: its HSTR, e.g. ...-skylake-avx512)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["max_work_item_sizes"] = list(self.max_work_item_sizes)
        return d
