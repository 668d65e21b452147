"""The bundled network tables against the model definitions they stand for, and tasks and weights.
The definitions are read from graph-only ONNX exports (tests/data/networks/, made by
scripts/make_net_fixtures.py); the parity group (pytest -m parity) reads torch and torchvision."""

import math
from pathlib import Path

import onnx
import pytest

from cltune.core.errors import UserError
from cltune.net.tables import bundled, load, load_table
from cltune.net.tasks import make_tasks
from cltune.net.torch_layers import KEEP

NETS = ("resnet18", "mobilenet_v1", "mobilenet_v2", "vgg16")
FIXTURES = Path(__file__).parent / "data" / "networks"


def module_name(node: str) -> str:
    """The torch module a TorchScript-exported node comes from: '/layer2/layer2.0/downsample/
    downsample.0/Conv' -> 'layer2.0.downsample.0' (a scope that extends the one before it is a
    Sequential's child, written with its parent's name)."""
    full, prev = "", None
    for seg in node.strip("/").split("/")[:-1]:
        full = seg if prev is None else full + seg[len(prev):] if seg.startswith(prev + ".") else f"{full}.{seg}"
        prev = seg
    return full


@pytest.mark.parametrize("name", NETS)
def test_bundled_table_matches_the_model_definition(name):
    """Guards against a table that drifts from the model: a wrong stride, padding, groups, a missing
    layer or a ReLU/ReLU6/pool fused where the model has none (e.g. after ResNet's residual add)."""
    want = [(module_name(layer.name), layer.problem) for layer in load(str(FIXTURES / f"{name}.onnx")).layers]
    got = [(layer.name, layer.problem) for layer in load(name).layers]
    assert got == want


@pytest.mark.parametrize("name", NETS)
def test_the_fixtures_are_graph_only_onnx_files(name):
    """Guards against a fixture committed with its weights (VGG-16's are 528 MB) or one onnx.checker
    refuses, and against a weight the reader would need the values of."""
    path = FIXTURES / f"{name}.onnx"
    assert path.stat().st_size < 200_000
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert all(math.prod(t.dims) <= KEEP for t in model.graph.initializer)
    weights = {n.input[1] for n in model.graph.node if n.op_type == "Conv"}
    assert weights <= {i.name for i in model.graph.input}


@pytest.mark.parity
@pytest.mark.parametrize("name", NETS)
def test_bundled_table_matches_the_torch_model(name):
    """The table check against torch's own trace of the model definition (torchvision's, and
    MobileNet v1's from its paper), for when the exporter or the fixtures are in doubt."""
    from cltune.net.torch_layers import layers_of, reference_models

    build, _, _ = reference_models()[name]
    want = [(layer.name, layer.problem) for layer in layers_of(build())]
    got = [(layer.name, layer.problem) for layer in load(name).layers]
    assert got == want


def graph_of(model) -> tuple:
    """What a fixture keeps of an export: nodes with their attributes, typed inputs, outputs, small
    initializers with their values."""
    g = model.graph
    nodes = [(n.op_type, n.name, list(n.input), list(n.output), [a.SerializeToString() for a in n.attribute])
             for n in g.node]
    return (nodes, [i.SerializeToString() for i in g.input], [o.SerializeToString() for o in g.output],
            [t.SerializeToString() for t in g.initializer])


@pytest.mark.parity
@pytest.mark.parametrize("name", NETS)
def test_a_fresh_export_has_the_fixture_graph(name):
    """Guards against fixtures that no longer match the model definitions or the exporter: run
    scripts/make_net_fixtures.py and commit the files."""
    from cltune.net.torch_layers import fixture

    fresh = fixture(name)
    assert graph_of(fresh) == graph_of(onnx.load(str(FIXTURES / f"{name}.onnx")))


def test_layer_counts_and_epilogues_are_those_of_the_papers():
    """Guards against a tracer that loses layers or epilogues, which the table check would then miss."""
    counts = {n: len(load(n).layers) for n in NETS}
    assert counts == {"resnet18": 20, "mobilenet_v1": 27, "mobilenet_v2": 52, "vgg16": 13}
    vgg = load("vgg16").layers
    assert [layer.problem.pool for layer in vgg].count(2) == 5  # the five 2x2 max-pools
    assert all(layer.problem.activation == "relu" for layer in vgg)
    v2 = load("mobilenet_v2").layers
    assert sum(layer.problem.activation == "none" for layer in v2) == 17  # the linear bottleneck projections
    assert sum(layer.problem.groups > 1 for layer in v2) == 17


def test_identical_layers_are_one_task_weighted_by_how_often_they_occur():
    """Guards against tasks that merge layers whose epilogue differs (ResNet's second conv of a block
    has no ReLU) or that count a layer twice."""
    net = load("resnet18")
    tasks = make_tasks(net)
    assert len(tasks) == 15 and sum(t.weight for t in tasks) == 20
    shapes = {(t.problem.input_shape, t.problem.weight_shape, t.problem.stride_h) for t in tasks}
    assert len(shapes) == 11
    layer1 = [t for t in tasks if t.problem.in_c == 64 and t.problem.in_h == 56 and t.problem.out_c == 64]
    assert sorted((t.problem.activation, t.weight) for t in layer1) == [("none", 2), ("relu", 2)]
    assert len({t.name for t in tasks}) == 15


def test_a_bad_table_is_one_line_naming_the_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "x"\n[[conv]]\nname = "a"\ninput = [1, 3, 8, 8]\nweight = [4, 3, 3, 3]\nstrid = 2\n')
    with pytest.raises(UserError, match=r"bad.toml: conv\[0\].strid: unknown key"):
        load_table(path)
    with pytest.raises(UserError, match="not a bundled network"):
        load("resnet19")


def test_every_bundled_table_is_listed():
    assert set(bundled()) == set(NETS)
