"""A setting made ready to launch: its family's values, a refusal before the build, the build, its
launches, and the device's and the compiled kernel's limits. A failure at any step is a finished
Measurement (invalid, build_error or launch_error), never an exception."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyopencl as cl

from ..core.device_values import bind_setting
from ..core.errors import UserError
from ..core.records import Measurement, Status
from ..core.sources import named
from ..core.space import Setting
from ..workloads import get_family
from .build import first_error_line


@dataclass
class Prepared:
    """A setting ready to launch: its family, values, kernels and launches, or the reason it is not."""

    setting: Setting
    base: dict
    family: object = None
    params: dict | None = None
    kernels: dict | None = None
    launches: list | None = None
    failed: Measurement | None = None


def prepare(runner, problem, setting: Setting, together=()) -> Prepared:
    """Everything before the first launch on the runner's device. `together`: the (source, options)
    of settings coming soon, built in the same program."""
    setting = bind_setting(setting, runner.info)  # a built-in setting's device.* values
    family = get_family(setting.family)
    p = family.resolve(setting.values)
    options = family.options(problem, p)
    prep = Prepared(setting, dict(setting=setting, source_hash=family.source_hash(p),
                                  build_options=" ".join(options), **family.figures(problem, p)),
                    family, p)
    reason = family.reject_reason(problem, p, runner.info)
    if reason:
        prep.failed = Measurement(status=Status.INVALID, error=reason, **prep.base)
        return prep
    try:
        built = runner.builder.build(family.setting_source(p), options, together)
        prep.base["build_ms"] = built.ms
    except (cl.Error, ValueError) as exc:  # ValueError: a source generator failed for this setting
        error = named(first_error_line(exc), family.source_lines(p))  # the user's file and line
        prep.failed = Measurement(status=Status.BUILD_ERROR, error=error, **prep.base)
        return prep
    try:
        prep.launches = family.plan(runner.ctx, runner.queue, problem, p, runner.data.bufs)
        prep.kernels = {name: built.kernel(name) for name in {la.kernel for la in prep.launches}}
        mismatch = family.check_kernels(problem, prep.kernels, runner.device)
        if mismatch:  # the same for every setting: the config's mistake, one line
            raise UserError(mismatch)
        reason = check_limits(runner.device, runner.info, prep.kernels, prep.launches)
    except cl.Error as exc:
        reason, status = first_error_line(exc), Status.LAUNCH_ERROR
    else:
        status = Status.INVALID
    if reason:
        prep.failed = Measurement(status=status, error=reason, **prep.base)
    return prep


def build_requests(info, problem, settings) -> list[tuple[str, list[str]]]:
    """(source, options) of each of `settings` that can be built for the problem on this device."""
    out = []
    for s in settings:
        s = bind_setting(s, info)
        family = get_family(s.family)
        p = family.resolve(s.values)
        if family.reject_reason(problem, p, info) is None:
            try:
                out.append((family.setting_source(p), family.options(problem, p)))
            except ValueError:
                continue  # a source generator that fails: the setting's own row says so
    return out


def check_limits(device, info, kernels: dict, launches) -> str | None:
    """Reject local sizes the device or the compiled kernel cannot hold, naming the limit."""
    for la in launches:
        k = kernels[la.kernel]
        kwg = k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
        lmem = k.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, device)
        if lmem > info.local_mem_bytes:
            return f"{la.kernel}: local memory {lmem} B > device local memory {info.local_mem_bytes} B"
        if la.local_size is None:
            continue
        for dim, (size, limit) in enumerate(zip(la.local_size, info.max_work_item_sizes)):
            if size > limit:
                return f"{la.kernel}: local size {size} in dimension {dim} > max work-item size {limit}"
        items = math.prod(la.local_size)
        if items > info.max_work_group_size:
            return f"{la.kernel}: work-group of {items} > device max work-group size {info.max_work_group_size}"
        if items > kwg:
            return f"{la.kernel}: work-group of {items} > kernel's CL_KERNEL_WORK_GROUP_SIZE {kwg}"
    return None
