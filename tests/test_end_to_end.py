"""The whole network's race (net/end_to_end.py): each layer reads the output of the layer before it,
cltune's layers enqueued back to back with one wait at the end. Guards against a network figure
whose layers compute on inputs of their own (cold in the caches, where a network's next layer finds
its input just written) and against a chain wired wrongly: its last output is checked against the
same layers run one after another in numpy, and in torch."""

import numpy as np
import pyopencl as cl
import pytest

from cltune.core.problem import Problem
from cltune.measure.race import numpy_conv2d
from cltune.net.end_to_end import layer_data, opencl_chain, torch_chain, wiring
from cltune.results.nearest import builtins, default_setting

from .conftest import HAS_TORCH

A = Problem.from_shapes((1, 8, 12, 12), (16, 8, 1, 1), activation="relu")
DW = Problem.from_shapes((1, 16, 12, 12), (16, 1, 3, 3), padding=1, groups=16, activation="relu6")
PW = Problem.from_shapes((1, 16, 12, 12), (8, 16, 1, 1))
POOL = Problem.from_shapes((1, 16, 12, 12), (8, 16, 3, 3), padding=1, activation="relu", pool=2)
ORDER = [A, DW, PW, A, POOL]  # A again reads PW's output; POOL reads the second A's


def inputs(i: int, p: Problem) -> tuple:
    """Layer i's own input, weights and bias, as layer_data seeds them."""
    x, w, b = p.make_inputs(i)
    return x, w, b if p.bias else None


def settings(info, name: str) -> list:
    """Each layer's setting: "tuned", its last built-in; "default", its untuned default."""
    return [builtins(p, info)[-1] if name == "tuned" else default_setting(p, info) for p in ORDER]


def numpy_network() -> np.ndarray:
    """The layers in turn, each on the output before it and its own weights (the two A layers differ)."""
    y = None
    for i, p in enumerate(ORDER):
        x, w, b = inputs(i, p)
        y = numpy_conv2d(p, x if y is None else y, w, b)
    return y


def test_each_layer_reads_the_latest_output_of_its_input_shape():
    assert wiring(ORDER) == [None, 0, 1, 2, 3]
    first = Problem.from_shapes((1, 8, 12, 12), (8, 8, 3, 3), padding=1)  # a ResNet block's shortcut:
    down = Problem.from_shapes((1, 8, 12, 12), (16, 8, 3, 3), 2, 1)  # it reads what the block read
    short = Problem.from_shapes((1, 8, 12, 12), (16, 8, 1, 1), 2)
    assert wiring([first, down, short]) == [None, 0, 0]


@pytest.mark.parametrize("name", ["tuned", "default"])
def test_the_opencl_network_computes_the_layers_in_turn(runner, name):
    call, outs = opencl_chain(runner, ORDER, settings(runner.info, name), layer_data(runner, ORDER))
    events = call()
    kernels = [len(runner._prepare(p, s).launches) for p, s in zip(ORDER, settings(runner.info, name))]
    assert [len(e) for e in events] == kernels  # each layer's events, all its kernels
    got = np.empty(int(np.prod(POOL.output_shape)), np.float32)
    cl.enqueue_copy(runner.queue, got, outs[-1]).wait()
    want = numpy_network()
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


@pytest.mark.skipif(not HAS_TORCH, reason="torch")
def test_the_torch_network_computes_the_layers_in_turn(runner):
    call, last = torch_chain(ORDER, layer_data(runner, ORDER), [1] * len(ORDER))
    call()
    want = numpy_network()
    np.testing.assert_allclose(last().numpy(), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


def test_the_opencl_network_waits_once_for_its_last_layer(runner, monkeypatch):
    made, calls = runner.launcher, []

    def spy(problem, setting, x=None, out=None, data=None):
        call = made(problem, setting, x, out, data)

        def spied(wait=True):
            calls.append((problem, wait))
            return call(wait)
        return spied

    monkeypatch.setattr(runner, "launcher", spy)
    call, _ = opencl_chain(runner, ORDER, settings(runner.info, "tuned"), layer_data(runner, ORDER))
    calls.clear()
    call()
    assert calls == [(p, i == len(ORDER) - 1) for i, p in enumerate(ORDER)]
