"""A setting's launches: one kernel enqueue (`Launch`) and the work sizes it is enqueued with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Launch:
    """One kernel enqueue of a setting; a setting's parts are timed separately and together."""

    part: str
    kernel: str
    args: list
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None


def local_size(p: dict, ndim: int = 3) -> tuple[int, ...] | None:
    sizes = (p.get("LWS_X", 0), p.get("LWS_Y", 0), p.get("LWS_Z", 0))[:ndim]
    if not any(sizes):
        return None
    return tuple(max(1, int(v)) for v in sizes)


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def global_size(work: tuple[int, ...], local: tuple[int, ...] | None) -> tuple[int, ...]:
    """Cover every work-item: round each dimension up to the local size (OpenCL 1.2 needs it)."""
    if local is None:
        return tuple(max(1, w) for w in work)
    return tuple(round_up(max(1, w), l) for w, l in zip(work, local))
