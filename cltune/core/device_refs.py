"""References to `device.*` values inside a config's values: recognising, checking and expanding
them (device_values.py derives the values themselves from a DeviceInfo)."""

from __future__ import annotations

from .expr import parse

PREFIX = "device."
NAMES = {
    "device.vector_width": "floats in one hardware vector register (AVX-512: 16, AVX2: 8, Mali Midgard: 4)",
    "device.vector_widths": "the widths a space tries: half a register and a whole one",
    "device.preferred_vector_width": "CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT as the driver reports it",
    "device.vector_registers": "vector registers a work-item may hold (AVX-512: 32, AVX2/SSE: 16)",
    "device.register_floats": "vector_registers x vector_width: the floats a register tile can hold",
    "device.compute_units": "CL_DEVICE_MAX_COMPUTE_UNITS",
    "device.max_work_group_size": "CL_DEVICE_MAX_WORK_GROUP_SIZE",
    "device.local_sizes": "0 (the driver chooses) and the powers of two 2..16 whose square fits a work-group",
    "device.inline_vload": "0 on PoCL before 3.1 (vloadN is a call there), else 1",
    "device.cpu": "1 on a CPU device (CL_DEVICE_TYPE_CPU), else 0",
}


def is_ref(value) -> bool:
    """A string naming a device value: never a knob's own value (those never contain `device.`)."""
    return isinstance(value, str) and PREFIX in value


def check_ref(text: str):
    """Parse a device expression; ExprError when it names anything but device values."""
    return parse(text, set(NAMES))


def evaluate(text: str, env: dict):
    """An int, or a list of ints for a list-valued name such as device.vector_widths."""
    out = check_ref(text)(env)
    if isinstance(out, float) and out.is_integer():
        out = int(out)
    return out


def expand(values_list, env: dict) -> tuple:
    """A space's value list with every device reference replaced, lists flattened, duplicates dropped."""
    items = [values_list] if isinstance(values_list, str) else list(values_list)
    out = []
    for v in items:
        got = evaluate(v, env) if is_ref(v) else v
        for x in (got if isinstance(got, list) else [got]):
            if x not in out:
                out.append(x)
    return tuple(out)
