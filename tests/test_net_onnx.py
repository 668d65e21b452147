"""ONNX extraction: Conv nodes, their attributes, shapes from inference, and the epilogue fused only
where it follows the conv alone and matches what the families fuse."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cltune.core.errors import UserError
from cltune.net.tables import load
from cltune.net.tasks import make_tasks


def _init(name, shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def _save(tmp_path, nodes, inits, in_shape=(1, 8, 16, 16), name="m"):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def test_fused_and_unfused_epilogues_and_groups(tmp_path):
    """Guards against fusing an epilogue that does not follow the conv alone (c2 also feeds the Add),
    against losing a folded BatchNorm's bias, Clip(0, 6) as ReLU6, a depthwise group count, and a
    3x3 max-pool taken for the 2x2 one the families fuse."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv_relu_pool", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="dw_bn_relu6", group=8, pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c2", "s", "bb", "m", "v"], ["n2"]),
        helper.make_node("Clip", ["n2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="pw_two_users"),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("Add", ["r3", "c3"], ["a3"]),
        helper.make_node("MaxPool", ["a3"], ["y"], kernel_shape=[3, 3], strides=[2, 2]),
    ]
    inits = [_init("w1", (8, 8, 3, 3)), _init("b1", (8,)), _init("w2", (8, 1, 3, 3)),
             _init("s", (8,)), _init("bb", (8,)), _init("m", (8,)), _init("v", (8,)),
             numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi"), _init("w3", (16, 8, 1, 1))]
    net = load(str(_save(tmp_path, nodes, inits)))
    got = {layer.name: layer.problem for layer in net.layers}
    a, b, c = got["conv_relu_pool"], got["dw_bn_relu6"], got["pw_two_users"]
    assert (a.bias, a.activation, a.pool, a.pad_h, a.output_shape) == (True, "relu", 2, 1, (1, 8, 8, 8))
    assert (b.bias, b.activation, b.pool, b.groups, b.stride_h, b.input_shape) == (True, "relu6", 1, 8, 2, (1, 8, 8, 8))
    assert (c.bias, c.activation, c.pool, c.in_c, c.out_c, c.in_h) == (False, "none", 1, 8, 16, 4)


def test_identical_convs_are_one_task_of_weight_two(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], name="a", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w"], ["c2"], name="b", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["y"])]
    tasks = make_tasks(load(str(_save(tmp_path, nodes, [_init("w", (8, 8, 3, 3))]))))
    assert [(t.weight, t.layers) for t in tasks] == [(2, ("a", "b"))]


@pytest.mark.parametrize("attrs, message", [
    (dict(pads=[1, 1, 0, 0]), r"node 'bad': asymmetric pads \[1, 1, 0, 0\] cannot be expressed"),
    (dict(auto_pad="SAME_UPPER", strides=[2, 2]), r"node 'bad': auto_pad SAME_UPPER needs an odd total pad"),
])
def test_a_conv_cltune_cannot_express_is_one_line_naming_the_node(tmp_path, attrs, message):
    """Guards against silently padding both sides alike (a wrong output size) or a traceback."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="bad", **attrs)]
    path = _save(tmp_path, nodes, [_init("w", (8, 8, 3, 3))])
    with pytest.raises(UserError, match=message):
        load(str(path))


def test_same_padding_that_splits_evenly_is_read(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="same", auto_pad="SAME_UPPER")]
    (layer,) = load(str(_save(tmp_path, nodes, [_init("w", (8, 8, 3, 3))]))).layers
    assert (layer.problem.pad_h, layer.problem.out_h) == (1, 16)


def test_not_an_onnx_file_and_a_symbolic_batch_are_refused(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(UserError, match="junk.onnx: not a readable ONNX model"):
        load(str(junk))
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="dyn")]
    path = _save(tmp_path, nodes, [_init("w", (8, 8, 3, 3))], in_shape=("N", 8, 16, 16), name="dyn")
    with pytest.raises(UserError, match=r"node 'dyn': input 'x' needs a static 4-D shape, got \['N', 8, 16, 16\]"):
        load(str(path))


def _reshape_conv_clip(tmp_path, name="m", **external):
    """x [1, 128] -> Reshape to [1, 8, 4, 4] -> Conv -> Clip(0, 6), saved with the tensors of more
    than `size_threshold` bytes in the side file m.bin (none when `external` is empty)."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
             helper.make_node("Conv", ["r", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="clip")]
    inits = [numpy_helper.from_array(np.array([1, 8, 4, 4], np.int64), "shape"), _init("w", (16, 8, 3, 3)),
             _init("b", (16,)), numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi")]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / f"{name}.onnx"
    onnx.save_model(model, str(path), save_as_external_data=bool(external), location="m.bin", **external)
    return path


def test_weights_in_a_side_file_are_read_only_where_needed(tmp_path):
    """Guards against loading every weight of a model with external data (VGG-16's 528 MB) to read
    shapes, and against a Reshape target or Clip bounds in the side file going unread."""
    (tmp_path / "inline").mkdir()
    (want,) = load(str(_reshape_conv_clip(tmp_path / "inline"))).layers
    assert (want.problem.input_shape, want.problem.activation, want.problem.bias) == ((1, 8, 4, 4), "relu6", True)
    (everything,) = load(str(_reshape_conv_clip(tmp_path, size_threshold=0))).layers
    assert everything.problem == want.problem
    (tmp_path / "m.bin").unlink()
    with pytest.raises(UserError, match=r"m.onnx: tensor 'shape': its values are in 'm.bin', which is not "
                                        r"beside the model, but Reshape 'reshape' needs them"):
        load(str(tmp_path / "m.onnx"))
    (weights_only,) = load(str(_reshape_conv_clip(tmp_path, size_threshold=1024))).layers
    outside = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False).graph.initializer
    assert [t.name for t in outside if t.data_location == TensorProto.EXTERNAL] == ["w"]
    (tmp_path / "m.bin").unlink()
    assert load(str(tmp_path / "m.onnx")).layers[0].problem == weights_only.problem == want.problem


def test_a_needed_value_a_graph_only_file_lacks_is_one_line_naming_the_tensor(tmp_path):
    """Guards against a Clip whose bound was stripped with the weights read as an unfused conv."""
    model = onnx.load(str(_reshape_conv_clip(tmp_path)))
    hi = next(t for t in model.graph.initializer if t.name == "hi")
    model.graph.input.append(helper.make_tensor_value_info("hi", TensorProto.FLOAT, []))
    model.graph.initializer.remove(hi)
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(UserError, match=r"m.onnx: tensor 'hi' has no values \(a graph input without data\), "
                                        r"but Clip 'clip' needs them"):
        load(str(tmp_path / "m.onnx"))


@pytest.mark.parity
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the TorchScript exporter: no onnxscript needed
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_an_exported_torchvision_model_reads_as_its_bundled_table(tmp_path, name):
    """Guards against the ONNX reader and the tables disagreeing on a real exporter's graph: folded
    BatchNorm, Clip(0, 6) for ReLU6, the residual add after a block's second conv."""
    import torch
    import torchvision

    model = getattr(torchvision.models, name)(weights=None).eval()
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(model, torch.zeros(1, 3, 224, 224), str(path), dynamo=False)
    assert [layer.problem for layer in load(str(path)).layers] == [layer.problem for layer in load(name).layers]
