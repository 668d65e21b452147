"""`device.*` values: what a space, a constraint or a built-in setting takes from the device in front
of it, derived from its DeviceInfo in one place (no OpenCL import), so one config tunes float8 on an
AVX2 CPU, float16 on an AVX-512 one and float4 on a Mali.

In a config a knob's value list may be a device value (`VEC = "device.vector_widths"`) or hold
expressions over them (`BLOCK_K = ["2 * device.vector_width", 24]`); constraints may name them
(`"TM * TN <= device.register_floats"`). `bind_*` replaces them by the device's numbers before
anything is enumerated, built or written to a results row.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .device_refs import NAMES, PREFIX, check_ref, evaluate, expand, is_ref  # noqa: F401  (re-exported)
from .errors import UserError
from .space import Setting

# LLVM CPU names (PoCL puts its target in the device name and the HSTR of CL_DEVICE_VERSION).
AVX512_CPUS = ("avx512", "knl", "knm", "cannonlake", "icelake", "tigerlake", "rocketlake", "cascadelake",
               "cooperlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4", "znver5",
               "x86-64-v4")
AVX_CPUS = ("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake", "arrowlake",
            "lunarlake", "gracemont", "znver1", "znver2", "znver3", "bdver", "btver2", "sandybridge",
            "ivybridge", "x86-64-v3", "core-avx")


def _target_text(info) -> str:
    """Where a runtime names the code it generates: the device name, CL_DEVICE_VERSION (PoCL's HSTR)
    and the `target` that device discovery reads from it."""
    return " ".join(str(getattr(info, k, "") or "") for k in ("name", "version", "target")).lower()


def is_cpu(info) -> bool:
    """The device is a CPU (its DeviceInfo's type names CL_DEVICE_TYPE_CPU)."""
    return "cpu" in str(info.type).lower()


def register_bits(info) -> int:
    """Width of the vector registers the device's compiler targets. PoCL reports a preferred float
    width of 16 for every x86 target, AVX2 ones included, so its target CPU name decides there."""
    text = _target_text(info)
    if is_cpu(info):
        if any(n in text for n in AVX512_CPUS):
            return 512
        if any(n in text for n in AVX_CPUS):
            return 256
        if "x86" in text:  # a generic x86-64 target: SSE
            return 128
    if "mali-t" in text:  # Midgard: 128-bit vector registers
        return 128
    return 32 * max(1, info.preferred_vector_width_float)


def vector_registers(info) -> int:
    """Vector registers a work-item's register tile may use: x86 has 32 with AVX-512 and 16 otherwise;
    a Midgard thread keeps 16 (more halves the threads a core runs); other devices: 16."""
    return 32 if is_cpu(info) and register_bits(info) == 512 else 16


def inline_vload(info) -> int:
    """0 where vloadN compiles to a call rather than a load: PoCL before 3.1 (the pyopencl wheel's
    3.0-rc2 ran MobileNet v2's 112x112 depthwise layer 2.6x as long with vload8 as with scalar loads,
    where Debian's PoCL 3.1 ran it 1.2x faster with vload8; stride-1 layer), else 1."""
    m = re.search(r"pocl (\d+)\.(\d+)", str(getattr(info, "platform_version", "") or "").lower())
    if m is None and "portable computing language" in str(getattr(info, "platform", "") or "").lower():
        m = re.match(r"(\d+)\.(\d+)", str(getattr(info, "driver", "") or ""))  # PoCL's driver: its version
    return 0 if m and (int(m.group(1)), int(m.group(2))) < (3, 1) else 1


def values(info) -> dict:
    """The device.* namespace of one device."""
    width = max(1, register_bits(info) // 32)
    local = [0] + [s for s in (2, 4, 8, 16) if s * s <= info.max_work_group_size]
    regs = vector_registers(info)
    return {
        "device.vector_width": width,
        "device.vector_widths": sorted({max(1, width // 2), width}),
        "device.preferred_vector_width": int(info.preferred_vector_width_float),
        "device.vector_registers": regs,
        "device.register_floats": regs * width,
        "device.compute_units": int(info.compute_units),
        "device.max_work_group_size": int(info.max_work_group_size),
        "device.local_sizes": local,
        "device.inline_vload": inline_vload(info),
        "device.cpu": int(is_cpu(info)),
    }


def describe(info) -> str:
    v = values(info)
    return (f"{register_bits(info)}-bit vectors ({v['device.vector_width']} floats) x "
            f"{v['device.vector_registers']} registers, {v['device.compute_units']} compute units")


def bind_params(params: dict, env: dict, where: str = "") -> dict:
    out = {}
    for key, v in params.items():
        if is_ref(v):
            got = evaluate(v, env)
            if isinstance(got, list):
                raise UserError(f"{where}{key}: {v!r} is a list of values; a setting takes one")
            v = got
        out[key] = v
    return out


def bind_setting(setting, info):
    """The setting with its device references (a built-in CPU setting's width) replaced."""
    if not any(is_ref(v) for _, v in setting.params):
        return setting
    return Setting.make(setting.name, setting.family, bind_params(setting.values, values(info)))
