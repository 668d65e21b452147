"""The bundled network tables against the model definitions they stand for, and tasks and weights.
torchvision is part of the test extra: these tests fail, never skip, without it."""

import pytest

from cltune.core.errors import UserError
from cltune.net.tables import bundled, load, load_table
from cltune.net.tasks import make_tasks

NETS = ("resnet18", "mobilenet_v1", "mobilenet_v2", "vgg16")


@pytest.mark.parametrize("name", NETS)
def test_bundled_table_matches_the_model_definition(name):
    """Guards against a table that drifts from the model: a wrong stride, padding, groups, a missing
    layer or a ReLU/ReLU6/pool fused where the model has none (e.g. after ResNet's residual add)."""
    from cltune.net.torch_layers import layers_of, reference_models

    build, _, _ = reference_models()[name]
    want = [(layer.name, layer.problem) for layer in layers_of(build())]
    got = [(layer.name, layer.problem) for layer in load(name).layers]
    assert got == want


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
