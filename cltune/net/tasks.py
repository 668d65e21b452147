"""Tasks: the distinct conv problems of a network, each with its weight (how often it occurs), and
what each task may run: the built-in settings of the families that accept it on this device, and
the points of the tuning spaces that pass their constraints and the device's limits."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.problem import Problem
from ..core.space import Setting
from ..results.nearest import accepts, kind_of  # noqa: F401  (moved there; net/ imports them from here)
from .tables import Network


@dataclass(frozen=True)
class Task:
    name: str  # also the stem of its results file in the run folder
    problem: Problem
    weight: int  # how many layers of the network compute this problem
    layers: tuple[str, ...]

    @property
    def kind(self) -> str:
        return kind_of(self.problem)


def make_tasks(net: Network) -> list[Task]:
    """Identical problems (shape, stride, padding, dilation, groups, bias and epilogue) are one task,
    in the order of their first layer; its weight is the number of layers."""
    by_problem: dict[Problem, list[str]] = {}
    for layer in net.layers:
        by_problem.setdefault(layer.problem, []).append(layer.name)
    out = []
    for i, (p, names) in enumerate(by_problem.items()):
        out.append(Task(f"t{i:02d}_{describe(p)}", p, len(names), tuple(names)))
    return out


def describe(p: Problem) -> str:
    """A short file-name-safe label: kind, filter, stride, channels, size, epilogue."""
    kind = {"dense": "", "depthwise": "dw", "grouped": f"g{p.groups}"}[kind_of(p)]
    st = f"_s{p.stride_h}" if p.stride_h == p.stride_w else f"_s{p.stride_h}x{p.stride_w}"
    epi = ("_" + p.activation if p.activation != "none" else "") + ("_pool" if p.pool == 2 else "")
    return f"{kind}{p.filter_h}x{p.filter_w}{st}_c{p.in_c}_k{p.out_c}_h{p.in_h}{epi}"


def device_kind(device) -> str:
    """Which built-in settings suit the device: the `_cpu` ones on a CPU, the `_mali` ones on a GPU
    (CL_DEVICE_TYPE); settings named for neither suit both."""
    return "cpu" if device is not None and "CPU" in str(device.type) else "mali"


def builtins(problem: Problem, device) -> list[Setting]:
    """The built-in settings for this device's kind whose family accepts the problem. The study's
    ladder (conv2d) and diagonalwise refactorization are left out: they are references, and each is
    many times slower than the families made for speed."""
    from ..core.device_values import bind_setting, is_ref
    from ..workloads import builtin_settings

    other = {"cpu": "_mali", "mali": "_cpu"}[device_kind(device)]
    out = []
    for name, (family, params) in builtin_settings().items():
        if family == "conv2d" or family.startswith("diagonalwise") or name.endswith(other):
            continue
        s = Setting.make(name, family, params)
        if device is not None:
            s = bind_setting(s, device)  # a no-op unless its widths come from the device
        elif any(is_ref(v) for v in params.values()):
            continue
        if accepts(s, problem, device):
            out.append(s)
    return out


def default_setting(problem: Problem, device) -> Setting | None:
    """What an untuned layer runs: the first built-in for the device's kind named for it (e.g.
    `direct_cpu`, `depthwise_cpu`), else the first built-in that accepts the problem."""
    found = builtins(problem, device)
    kind = device_kind(device)
    named = [s for s in found if s.name.endswith("_" + kind)]
    return (named or found or [None])[0]


def space_settings(problem: Problem, spaces, device) -> list[Setting]:
    """Every point of the spaces that passes their constraints and the device's limits, in order."""
    out = []
    for space in spaces:
        out += space.valid_settings(problem, device)
    return out
