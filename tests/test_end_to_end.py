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
from cltune.net.end_to_end import buffer_plan, last_reads, layer_data, opencl_chain, torch_chain, wiring
from cltune.net.tables import load
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


def test_layers_share_output_buffers_once_nothing_reads_them():
    """Two buffers carry a chain or a block whose shortcut reads the block's input, three ResNet-18;
    a layer never writes the buffer it reads, nor one a later layer still has to read."""
    first = Problem.from_shapes((1, 8, 12, 12), (8, 8, 3, 3), padding=1)
    down = Problem.from_shapes((1, 8, 12, 12), (16, 8, 3, 3), 2, 1)
    short = Problem.from_shapes((1, 8, 12, 12), (16, 8, 1, 1), 2)
    after = Problem.from_shapes((1, 16, 6, 6), (16, 16, 3, 3), padding=1)
    resnet = [layer.problem for layer in load("resnet18").layers]
    for layers, buffers in ((ORDER, 2), ([first, down, short, after, after], 2), (resnet, 3)):
        owner, sizes = buffer_plan(layers)
        assert len(sizes) == buffers
        last = last_reads(layers)
        for k, i in enumerate(wiring(layers)):
            assert i is None or owner[i] != owner[k]
            assert sizes[owner[k]] >= 4 * np.prod(layers[k].output_shape)
            assert all(last[j] < k for j in range(k) if owner[j] == owner[k])
    assert last_reads(ORDER) == [1, 2, 3, 4, 5]


def test_the_network_s_layers_share_one_scratch_pool(runner, monkeypatch):
    """Winograd layers of different sizes run on one pool's buffers, the largest each needs, and still
    compute the layers in turn."""
    from cltune.workloads import winograd

    layers = [Problem.from_shapes((1, c, 12, 12), (k, c, 3, 3), padding=1) for c, k in ((8, 8), (8, 16), (16, 8))]
    picked = [next(s for s in builtins(p, runner.info) if s.family == "winograd") for p in layers]
    given = []
    made = winograd.scratch
    monkeypatch.setattr(winograd, "scratch", lambda *a: given.append((a[2], made(*a))) or given[-1][1])
    datas = layer_data(runner, layers)
    call, outs = opencl_chain(runner, layers, picked, datas)
    last_pass = [b for key, b in given[-2 * len(layers):] if key == "winograd_m"]
    assert len(last_pass) == len(layers) and all(b is datas[0].bufs.shared["winograd_m"] for b in last_pass)
    call()
    y = None
    for i, p in enumerate(layers):
        x, w, b = inputs(i, p)
        y = numpy_conv2d(p, x if y is None else y, w, b)
    got = np.empty(y.size, np.float32)
    cl.enqueue_copy(runner.queue, got, outs[-1]).wait()
    np.testing.assert_allclose(got.reshape(y.shape), y, rtol=1e-3, atol=1e-3 * np.abs(y).max())
