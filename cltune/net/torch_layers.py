"""The conv layers of a torch model, read off its traced graph: what the bundled tables are made
from (scripts/net_tables.py) and checked against (pytest -m parity), and the graph-only ONNX files
the tests check them with (scripts/make_net_fixtures.py). Needs torch, imported where used.

A conv's epilogue is what follows it alone: a BatchNorm (folded into weights and bias: the layer
has a bias), then ReLU or ReLU6, then a 2x2 stride-2 max-pool. Anything else (an add, a 3x3 pool,
a second consumer) ends the epilogue.
"""

from __future__ import annotations

import math

from ..core.problem import Problem
from .network import Layer, Network


def layers_of(model, input_shape=(1, 3, 224, 224)) -> list[Layer]:
    import torch
    from torch import fx
    from torch.fx.passes.shape_prop import ShapeProp

    model = model.eval()
    gm = fx.symbolic_trace(model)
    ShapeProp(gm).propagate(torch.zeros(input_shape))
    mods = dict(gm.named_modules())
    out = []
    for node in gm.graph.nodes:
        if node.op != "call_module" or not isinstance(mods[node.target], torch.nn.Conv2d):
            continue
        conv = mods[node.target]
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError(f"{node.target}: padding {conv.padding!r} ({conv.padding_mode}) is not supported")
        bias, act, pool, cur = conv.bias is not None, "none", 1, node
        nxt = _only_user(cur)
        if nxt is not None and _is(nxt, mods, torch.nn.BatchNorm2d):
            bias, cur = True, nxt
            nxt = _only_user(cur)
        if nxt is not None and _activation(nxt, mods):
            act, cur = _activation(nxt, mods), nxt
            nxt = _only_user(cur)
        if nxt is not None and _is_pool2(nxt, mods):
            pool = 2
        shape = tuple(node.args[0].meta["tensor_meta"].shape)
        out.append(Layer(node.target, Problem.from_shapes(
            shape, tuple(conv.weight.shape), conv.stride, conv.padding, conv.dilation, conv.groups,
            bias, act, pool)))
    return out


def network(name: str, model, description: str, source: str) -> Network:
    return Network(name, tuple(layers_of(model)), source, description)


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _is(node, mods, cls) -> bool:
    return node.op == "call_module" and isinstance(mods[node.target], cls)


def _activation(node, mods) -> str | None:
    import torch
    import torch.nn.functional as F

    if _is(node, mods, torch.nn.ReLU) or (node.op == "call_function" and node.target in (F.relu, torch.relu)):
        return "relu"
    if _is(node, mods, torch.nn.ReLU6) or (node.op == "call_function" and node.target is F.relu6):
        return "relu6"
    if _is(node, mods, torch.nn.Hardtanh):
        m = mods[node.target]
        return "relu6" if (m.min_val, m.max_val) == (0.0, 6.0) else None
    return None


def _is_pool2(node, mods) -> bool:
    import torch

    if not _is(node, mods, torch.nn.MaxPool2d):
        return False
    m = mods[node.target]
    two = lambda v: v in (2, (2, 2))  # noqa: E731
    return (two(m.kernel_size) and two(m.stride) and m.padding in (0, (0, 0))
            and m.dilation in (1, (1, 1)) and not m.ceil_mode)


def mobilenet_v1(width: float = 1.0):
    """MobileNet v1 (Howard et al. 2017, Table 1): torchvision has none. Conv-BN-ReLU everywhere;
    13 depthwise 3x3 + pointwise 1x1 pairs after a 3x3/2 stem."""
    from torch import nn

    def block(cin, cout, k, stride, groups):
        return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    c = lambda n: int(n * width)  # noqa: E731
    layers = block(3, c(32), 3, 2, 1)
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    cin = c(32)
    for cout, stride in plan:
        layers += block(cin, cin, 3, stride, cin) + block(cin, c(cout), 1, 1, 1)
        cin = c(cout)
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000))


def reference_models() -> dict:
    """The model definitions the bundled tables are made from: name -> (builder, description, source)."""
    import torchvision.models as tv

    return {
        "resnet18": (lambda: tv.resnet18(weights=None), "ResNet-18, 224x224, batch 1, BatchNorm folded",
                     "torchvision.models.resnet18"),
        "mobilenet_v1": (mobilenet_v1, "MobileNet v1 1.0, 224x224, batch 1, BatchNorm folded",
                         "cltune.net.torch_layers.mobilenet_v1 (Howard et al. 2017, Table 1)"),
        "mobilenet_v2": (lambda: tv.mobilenet_v2(weights=None), "MobileNet v2 1.0, 224x224, batch 1, "
                         "BatchNorm folded", "torchvision.models.mobilenet_v2"),
        "vgg16": (lambda: tv.vgg16(weights=None), "VGG-16 (no BatchNorm), 224x224, batch 1",
                  "torchvision.models.vgg16"),
    }


KEEP = 16  # an initializer of more elements keeps its name, dtype and dims in a fixture, not its values


def fixture(name: str):
    """The graph-only ONNX model of reference model `name` (tests/data/networks/<name>.onnx)."""
    import torch

    build, _, source = reference_models()[name]
    torch.manual_seed(0)  # the exporter merges initializers of equal values into one
    return graph_only(export_onnx(build()), f"Graph only: {source} exported by torch.onnx.export "
                      f"(TorchScript, eval mode, BatchNorm folded); made by scripts/make_net_fixtures.py")


def export_onnx(model, input_shape=(1, 3, 224, 224)):
    """The ONNX model a user's export writes: eval mode, torch.onnx.export's TorchScript exporter
    (BatchNorm folded into the convs), its default opset."""
    import io
    import warnings

    import onnx
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's
        torch.onnx.export(model.eval(), torch.zeros(input_shape), buf, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def graph_only(model, note: str):
    """`model` with every initializer of more than KEEP elements turned into a typed graph input: its
    name, dtype and dims kept, its values dropped (KB instead of MB; onnx.checker accepts it)."""
    from onnx import helper

    kept, inputs = [], []
    for init in model.graph.initializer:
        if math.prod(init.dims) <= KEEP:
            kept.append(init)
        else:
            inputs.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    model.graph.input.extend(inputs)
    model.doc_string = note
    return model
