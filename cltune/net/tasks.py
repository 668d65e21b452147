"""Tasks: the distinct conv problems of a network, each with its weight (how often it occurs), and
what each task may run: the built-in settings of the families that accept it on this device, and
the points of the tuning spaces that pass their constraints and the device's limits."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.problem import Problem
from ..core.space import Setting
from ..results.nearest import kind_of
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


def space_settings(problem: Problem, spaces, device) -> list[Setting]:
    """Every point of the spaces that passes their constraints and the device's limits, in order."""
    out = []
    for space in spaces:
        out += space.valid_settings(problem, device)
    return out
