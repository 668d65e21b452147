"""`cltune net` end to end on the device: a small ONNX model, one budget, the table and three totals."""


import numpy as np
import onnx
import pandas as pd
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from cltune.cli.commands import main

from .conftest import HAS_TORCH


def tiny_model(path):
    """A 1x1 conv + ReLU + 2x2 max-pool, then a depthwise 3x3 + ReLU6 (Clip)."""
    rng = np.random.default_rng(0)
    init = lambda n, s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)  # noqa: E731
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="pw"),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], name="dw", group=16, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c2", "lo", "hi"], ["y"])]
    inits = [init("w1", (16, 8, 1, 1)), init("b1", (16,)), init("w2", (16, 1, 3, 3)),
             numpy_helper.from_array(np.array(0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6, np.float32), "hi")]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def test_net_on_an_onnx_model_prints_the_table_and_three_totals(tmp_path, monkeypatch, device):
    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path / "home"))
    tiny_model(tmp_path / "tiny.onnx")
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["net", str(tmp_path / "tiny.onnx"), "--budget", "10", "--rounds", "1",
                                       "--device", str(device.index), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output
    for line in ("tuned (cltune)", "untuned built-in defaults") + (("torch",) if HAS_TORCH else ()):
        assert line in text
    summary = pd.read_csv(out / "network.csv")
    assert list(summary["kind"]) == ["dense", "depthwise"] and (summary["ms"] > 0).all()
    raced, network = set(pd.read_csv(out / "totals.csv")["contender"]), {"tuned", "default"} | ({"torch"} if HAS_TORCH else set())
    assert network <= raced and raced - network <= {"finalist", "torch:slower"}  # the rows that lost their layer's race
    whole = set(pd.read_csv(out / "network_race.csv")["contender"])  # the whole network, end to end
    assert {"tuned", "default"} <= whole and ({"torch:per layer", "torch:1 thread"} <= whole or not HAS_TORCH)
    assert "the whole network end to end" in text
    by_layer = pd.read_csv(out / "network_layers.csv")  # where each network's time goes
    assert list(by_layer["task"]) == list(summary["task"]) and (by_layer["tuned_ms"] > 0).all()
    assert not HAS_TORCH or (by_layer["torch_ms"] > 0).all()
    from cltune.results import store

    assert {e["problem"] for e in store.all_best()} == set(summary["problem"])


def test_net_without_a_budget_or_with_a_bad_network_is_one_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["net", "resnet18", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "needs a budget" in result.output
    result = runner.invoke(main, ["net", "resnet19", "--budget", "3"])
    assert result.exit_code == 2 and "not a bundled network" in result.output and "Traceback" not in result.output


def test_net_list_prints_layers_and_tasks():
    result = CliRunner().invoke(main, ["net", "resnet18", "--list"])
    assert result.exit_code == 0
    assert result.output.count(": weight ") == 15 and "conv1: input [1, 3, 224, 224]" in result.output


def test_net_options_have_the_sweeps_types(tmp_path):
    """Guards against net's --seed, --time-limit and --timeout taking other values than sweep's."""
    runner = CliRunner()
    for args in (["--seed", "-1"], ["--time-limit", "nan"], ["--timeout", "inf"]):
        result = runner.invoke(main, ["net", "resnet18", "--budget", "3", *args])
        assert result.exit_code == 2 and "Invalid value" in result.output, (args, result.output)
