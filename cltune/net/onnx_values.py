"""The values of an ONNX graph's tensors, read only where the reader needs them (Clip bounds, the
shape inputs of the nodes before a conv), so a full model, one whose weights sit in a side file
(external data) and a graph-only file (weights as typed graph inputs, no values) read alike.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UserError, first_line

# Ops whose shape inference reads inputs' values: every input but the first (all for those in ALL_INPUTS).
SHAPE_OPS = {"Reshape", "Expand", "Tile", "Pad", "Slice", "Resize", "Upsample", "Unsqueeze", "Squeeze", "Split",
             "ConstantOfShape", "Range", "OneHot", "TopK", "CenterCropPad"}
ALL_INPUTS = {"ConstantOfShape", "Range"}


class Values:
    """The tensors of a graph that may hold values: initializers and Constant nodes' outputs."""

    def __init__(self, graph, where: str, base: Path):
        self.where, self.base, self.tensors = where, base, {}
        self.inputs = {i.name for i in graph.input}
        for init in graph.initializer:
            self.tensors[init.name] = init
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.tensors[node.output[0]] = node.attribute[0].t

    def array(self, name: str, need: str):
        """The values of tensor `name` as a numpy array, None for one a node computes; a graph input
        (a graph-only file's weight) or a side file that is not there is a UserError naming it."""
        from onnx import numpy_helper

        tensor = self.tensors.get(name)
        if tensor is None and name not in self.inputs:
            return None
        if tensor is None:
            raise UserError(f"{self.where}: tensor {name!r} has no values (a graph input without data), "
                            f"but {need} needs them")
        self.load(tensor, need)
        return numpy_helper.to_array(tensor)

    def load(self, tensor, need: str) -> None:
        """Reads an external tensor's values from its side file into the tensor (no-op when inline)."""
        from onnx import TensorProto
        from onnx.external_data_helper import load_external_data_for_tensor

        if tensor.data_location != TensorProto.EXTERNAL:
            return
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        if not (self.base / location).is_file():
            raise UserError(f"{self.where}: tensor {tensor.name!r}: its values are in {location!r}, which is "
                            f"not beside the model, but {need} needs them")
        try:
            load_external_data_for_tensor(tensor, str(self.base))
        except Exception as exc:  # onnx raises ValidationError, OSError, ValueError...
            raise UserError(f"{self.where}: tensor {tensor.name!r}: cannot read its values from {location!r}: "
                            f"{first_line(exc)}") from None
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]


def load_shape_inputs(graph, values: Values) -> None:
    """Reads the external values that shape inference needs before a conv (a Reshape's target...), so
    the convs' input shapes are static; the weights, and what follows the last conv, stay unread."""
    producer = {out: node for node in graph.node for out in node.output}
    seen, todo = set(), [node for node in graph.node if node.op_type == "Conv"]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op_type in SHAPE_OPS:
            label = f"{node.op_type} {node.name or node.output[0]!r}"
            for name in list(node.input)[0 if node.op_type in ALL_INPUTS else 1:]:
                if name in values.tensors:
                    values.load(values.tensors[name], label)
        todo += [producer[name] for name in node.input if name in producer]
