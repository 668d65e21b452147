"""The conv layers of an ONNX model (the `onnx` package, `pip install 'cltune[net]'`).

Each Conv node becomes a layer: its input's shape from shape inference, its weight's shape, strides,
pads, dilations and group. What follows it alone is fused as the families fuse it: a
BatchNormalization (folded: the layer has a bias), then Relu or Clip(0, 6), then a 2x2 stride-2
MaxPool. Anything cltune cannot express (asymmetric pads, a 3-D conv, a shape that is not static,
ConvTranspose) is a UserError naming the node.

Shapes come from the initializers' and graph inputs' dims; values are read only where needed
(onnx_values.py), so weights in a side file (external data) stay unread and a graph-only file (the
weights as typed graph inputs, as in tests/data/networks/) reads as its full model.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..core.errors import UserError, first_line
from ..core.problem import Problem
from .network import Layer, Network
from .onnx_values import Values, load_shape_inputs

REFUSED_OPS = ("ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv")


def load(path: str | Path) -> Network:
    try:
        import onnx
    except ImportError:
        raise UserError(f"{path}: reading ONNX models needs the onnx package: "
                        "pip install 'cltune[net]'") from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError, ValidationError...
        raise UserError(f"{path}: not a readable ONNX model: {first_line(exc)}") from None
    load_shape_inputs(model.graph, Values(model.graph, str(path), Path(path).parent))
    try:
        model = onnx.shape_inference.infer_shapes(model)  # a copy: the original is let go
    except Exception as exc:  # InferenceError, ValidationError...
        raise UserError(f"{path}: not a readable ONNX model: {first_line(exc)}") from None
    values = Values(model.graph, str(path), Path(path).parent)
    return Network(Path(path).stem, tuple(layers(model.graph, str(path), values)), str(path),
                   f"ONNX model {Path(path).name}")


def layers(graph, where: str = "<onnx>", values: Values | None = None) -> list[Layer]:
    g = _Graph(graph, values or Values(graph, where, Path(".")))
    out, names = [], set()
    for i, node in enumerate(graph.node):
        label = node.name or (node.output[0] if node.output else f"node{i}")
        if node.op_type in REFUSED_OPS:
            raise UserError(f"{where}: node {label!r}: {node.op_type} is not supported (cltune tunes Conv)")
        if node.op_type != "Conv":
            continue
        name = label if label not in names else f"{label}_{i}"
        names.add(name)
        out.append(Layer(name, _problem(g, node, f"{where}: node {label!r}")))
    if not out:
        raise UserError(f"{where}: no Conv node in the graph")
    return out


class _Graph:
    """Shapes, constants and consumers of a graph's tensors."""

    def __init__(self, graph, values: Values):
        self.values, self.shapes, self.users = values, {}, {}
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            t = vi.type.tensor_type
            if t.HasField("shape"):
                self.shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                                        for d in t.shape.dim]
        for init in graph.initializer:
            self.shapes[init.name] = list(init.dims)
        for node in graph.node:
            for name in node.input:
                self.users.setdefault(name, []).append(node)
        self.outputs = {o.name for o in graph.output}

    def only_user(self, tensor: str):
        users = self.users.get(tensor, [])
        if len(users) != 1 or tensor in self.outputs or users[0].input[0] != tensor:
            return None
        return users[0]

    def scalar(self, node, index: int, attr: str, default):
        if len(node.input) > index and node.input[index]:
            value = self.values.array(node.input[index], f"{node.op_type} {node.name or node.output[0]!r}")
            return None if value is None or value.size != 1 else float(value.reshape(()))
        return float(_attr(node, attr, default))


def _attr(node, name: str, default):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _static(shape, what: str, where: str) -> list[int]:
    if shape is None or len(shape) != 4 or not all(isinstance(d, int) and d > 0 for d in shape):
        raise UserError(f"{where}: {what} needs a static 4-D shape, got {shape if shape is not None else 'none'}")
    return shape


def _pads(node, x, w, strides, dilations, where: str) -> tuple[int, int]:
    auto = _attr(node, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        return 0, 0
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in zip(x[2:], w[2:], strides, dilations):
            total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
            if total % 2:
                raise UserError(f"{where}: auto_pad {auto} needs an odd total pad {total} on an axis, "
                                "which cltune cannot split evenly over both sides")
            pads.append(total // 2)
        return pads[0], pads[1]
    pads = list(_attr(node, "pads", [0, 0, 0, 0]))
    if len(pads) != 4 or pads[0] != pads[2] or pads[1] != pads[3]:
        raise UserError(f"{where}: asymmetric pads {pads} cannot be expressed (cltune pads both sides of "
                        "an axis alike: expected [top, left, bottom, right] with top == bottom, left == right)")
    return pads[0], pads[1]


def _problem(g: _Graph, node, where: str) -> Problem:
    x = _static(g.shapes.get(node.input[0]), f"input {node.input[0]!r}", where)
    w = _static(g.shapes.get(node.input[1]), f"weight {node.input[1]!r}", where)
    strides = list(_attr(node, "strides", [1, 1]))
    dilations = list(_attr(node, "dilations", [1, 1]))
    kernel = list(_attr(node, "kernel_shape", w[2:]))
    if len(strides) != 2 or len(dilations) != 2 or kernel != list(w[2:]):
        raise UserError(f"{where}: expected a 2-D conv (strides, dilations of 2, kernel_shape {w[2:]}), "
                        f"got strides {strides}, dilations {dilations}, kernel_shape {kernel}")
    pads = _pads(node, x, w, strides, dilations, where)
    bias = len(node.input) > 2 and node.input[2] != ""
    bias, act, pool = _epilogue(g, node, bias)
    try:
        return Problem.from_shapes(x, w, tuple(strides), pads, tuple(dilations), int(_attr(node, "group", 1)),
                                   bias, act, pool)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None


def _epilogue(g: _Graph, conv, bias: bool) -> tuple[bool, str, int]:
    """(bias, activation, pool) of the nodes that follow the conv alone and that the families fuse."""
    act, pool = "none", 1
    nxt = g.only_user(conv.output[0])
    if nxt is not None and nxt.op_type == "BatchNormalization" and len(nxt.output) == 1:
        bias, nxt = True, g.only_user(nxt.output[0])
    if nxt is not None and nxt.op_type in ("Relu", "Clip"):
        act = _activation(g, nxt)
        if act != "none":
            nxt = g.only_user(nxt.output[0])
    if nxt is not None and _is_pool2(nxt):
        pool = 2
    return bias, act, pool


def _activation(g: _Graph, node) -> str:
    if node.op_type == "Relu":
        return "relu"
    lo, hi = g.scalar(node, 1, "min", -math.inf), g.scalar(node, 2, "max", math.inf)
    if lo == 0.0 and hi == 6.0:
        return "relu6"
    if lo == 0.0 and hi == math.inf:
        return "relu"
    return "none"  # another clip: left as its own node, the conv unfused


def _is_pool2(node) -> bool:
    if node.op_type != "MaxPool" or (len(node.output) > 1 and node.output[1]):
        return False
    auto = _attr(node, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    return (list(_attr(node, "kernel_shape", [])) == [2, 2] and list(_attr(node, "strides", [1, 1])) == [2, 2]
            and list(_attr(node, "pads", [0, 0, 0, 0])) == [0, 0, 0, 0] and auto in ("NOTSET", "VALID")
            and list(_attr(node, "dilations", [1, 1])) == [1, 1] and not _attr(node, "ceil_mode", 0)
            and not _attr(node, "storage_order", 0))
