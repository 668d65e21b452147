"""What a network is to cltune: named conv layers, each a Problem (the conv with the epilogue that
follows it in the network), from a bundled table, an ONNX file or a model definition."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.problem import Problem


@dataclass(frozen=True)
class Layer:
    name: str
    problem: Problem


@dataclass(frozen=True)
class Network:
    name: str
    layers: tuple[Layer, ...]
    source: str = ""  # where the layers came from: the model definition or the ONNX file
    description: str = ""
