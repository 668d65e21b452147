"""A config bound to the device in front of it: its `device.*` values (core/device_values.py) replaced
by the device's numbers in its spaces and built-in settings, and every value checked by its family."""

from __future__ import annotations

from dataclasses import replace

from ..core.device_values import bind_setting, is_ref, values
from ..core.errors import UserError
from ..workloads import get_family


def bind_config(cfg, info):
    """The config with its spaces and settings resolved for this device, and each value checked by its
    family, once: a bound config comes back as it is (`cltune sweep` binds to print the device and
    size its table, then hands tune.run the bound config)."""
    if cfg.device is not None:
        return cfg
    env = values(info)
    spaces = []
    for space in cfg.spaces:
        bound = space.bind(env)
        family = get_family(bound.family)
        for key, vals in bound.params:
            for v in vals:
                try:
                    family.resolve({key: v})
                except UserError as exc:
                    raise UserError(f"{cfg.path}: space {bound.family} {key} on this device: {exc}") from None
        spaces.append(bound)
    settings = []
    for s in cfg.settings:
        b = bind_setting(s, info)
        get_family(b.family).resolve(b.values, f"{cfg.path}: setting {s.name}: ")
        settings.append(b)
    return replace(cfg, spaces=tuple(spaces), settings=tuple(settings), device=info)


def needs_device(cfg) -> bool:
    """Does the config name device.* values anywhere (spaces, constraints, settings)?"""
    return any(s.device_refs for s in cfg.spaces) or any(is_ref(v) for s in cfg.settings for _, v in s.params)
