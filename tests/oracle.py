"""An independent conv2d oracle for the tests: ONNX Runtime's CPU `Conv` (an implementation we did not
write, about 15 MB, where torch is 5.5 GB). One session per distinct graph, kept for the test run."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper


def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if np.isscalar(v) else (int(v[0]), int(v[1]))


@lru_cache(maxsize=256)
def _session(x_shape: tuple, w_shape: tuple, bias: bool, stride, padding, dilation, groups: int,
             activation: str, pool: int):
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w_shape))]
    names = ["x", "w"]
    if bias:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [w_shape[0]]))
        names.append("b")
    (ph, pw) = padding
    nodes = [helper.make_node("Conv", names, ["y0"], strides=list(stride), dilations=list(dilation),
                              pads=[ph, pw, ph, pw], group=groups, kernel_shape=list(w_shape[2:]))]
    last = "y0"
    if activation == "relu":
        nodes.append(helper.make_node("Relu", [last], ["y1"]))
        last = "y1"
    elif activation == "relu6":
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y1"]))
        last = "y1"
    elif activation != "none":
        raise ValueError(f"oracle: no activation {activation!r}")
    if pool == 2:
        nodes.append(helper.make_node("MaxPool", [last], ["y2"], kernel_shape=[2, 2], strides=[2, 2]))
        last = "y2"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    inits = [helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]),
             helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])] if activation == "relu6" else []
    graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, activation="none", pool=1):
    """torch.nn.functional.conv2d's meaning (cross-correlation, symmetric zero padding, groups) for a
    batched or unbatched float32 input, computed by ONNX Runtime, then the epilogue cltune's families
    fuse: a ReLU or ReLU6 and a 2x2 stride-2 max-pool (floor mode)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    if x.shape[0] == 0:
        raise ValueError("oracle: an empty batch has nothing to compute")
    w = np.ascontiguousarray(w, dtype=np.float32)
    sess = _session(tuple(x.shape), tuple(w.shape), b is not None, _pair(stride), _pair(padding),
                    _pair(dilation), int(groups), activation, int(pool))
    feeds = {"x": x, "w": w}
    if b is not None:
        feeds["b"] = np.ascontiguousarray(b, dtype=np.float32)
    y = sess.run(["y"], feeds)[0]
    return y[0] if unbatched else y


def conv2d_problem(problem, x, w, b=None):
    """The oracle for a cltune Problem (its stride, padding, dilation, groups and epilogue)."""
    return conv2d(x, w, b, (problem.stride_h, problem.stride_w), (problem.pad_h, problem.pad_w),
                  (problem.dilation_h, problem.dilation_w), problem.groups, problem.activation, problem.pool)
