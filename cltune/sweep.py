"""The only loop: hand each setting to a measure function and each result to the sinks. No OpenCL here."""

from __future__ import annotations

from typing import Callable, Iterable

from .records import Measurement
from .space import Setting


def sweep(settings: Iterable[Setting], measure: Callable[[Setting], Measurement],
          on_result: Callable[[Measurement], None]) -> list[Measurement]:
    """Measure each setting in order; a failed setting is a result like any other, never an exception."""
    results = []
    for setting in settings:
        m = measure(setting)
        on_result(m)
        results.append(m)
    return results
