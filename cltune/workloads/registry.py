"""The registry of kernel families by name: every family module registers its families here when it
is imported (the built-in ones by workloads.get_family, a user's through --modules or an import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Family

FAMILIES: dict[str, "Family"] = {}


def register(family: "Family") -> "Family":
    FAMILIES[family.name] = family
    return family
