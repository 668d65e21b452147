"""The test oracle (ONNX Runtime's Conv, tests/oracle.py) agrees with cltune's own float64 reference on
drawn shapes, and it catches a kernel that is off by one in its padding or dilation, for every family."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltune
from cltune.core.errors import UserError
from cltune.core.problem import Problem, reference_conv2d
from cltune.workloads import builtin_settings

from . import oracle


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 2), cg=st.integers(1, 3), kg=st.integers(1, 3), groups=st.sampled_from([1, 2, 3]),
       h=st.integers(1, 10), w=st.integers(1, 10), r=st.integers(1, 4), s=st.integers(1, 4),
       sh=st.integers(1, 3), sw=st.integers(1, 3), ph=st.integers(0, 3), pw=st.integers(0, 3),
       dh=st.integers(1, 3), dw=st.integers(1, 3), bias=st.booleans(),
       activation=st.sampled_from(["none", "relu", "relu6"]), pool=st.sampled_from([1, 1, 2]))
def test_the_oracle_and_the_reference_agree(n, cg, kg, groups, h, w, r, s, sh, sw, ph, pw, dh, dw, bias,
                                            activation, pool):
    """Guards against the two checks sharing a mistake: the reference is ours, the oracle is not."""
    try:
        p = Problem.from_shapes((n, cg * groups, h, w), (kg * groups, cg, r, s), (sh, sw), (ph, pw), (dh, dw),
                                groups, bias, activation, pool)
    except ValueError:
        return  # an empty output or a pool over less than 2x2: refused by both
    x, wt, b = p.make_inputs(3)
    b = b if bias else None
    np.testing.assert_allclose(oracle.conv2d_problem(p, x, wt, b), reference_conv2d(p, x, wt, b),
                               rtol=1e-4, atol=1e-4)


DENSE = dict(x=(1, 4, 10, 9), w=(4, 4, 3, 3))
DEPTHWISE = dict(x=(1, 4, 10, 9), w=(4, 1, 3, 3), groups=4)


def _one_setting_per_family():
    seen = {}
    for name, (family, _) in builtin_settings().items():
        seen.setdefault(family, name)
    return sorted(seen.items())


def _run(setting, case, padding, dilation):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(case["x"]).astype(np.float32)
    w = rng.standard_normal(case["w"]).astype(np.float32)
    kw = dict(padding=padding, dilation=dilation, groups=case.get("groups", 1))
    return x, w, kw, cltune.conv2d(x, w, setting=setting, **kw)


@pytest.mark.parametrize("family, setting", _one_setting_per_family())
def test_an_off_by_one_pad_or_dilation_is_caught_for_every_family(family, setting):
    """A kernel that reads its padding one too high computes the correct kernel's output for pad + 1,
    cut to the right shape; one that reads pad and dilation one too high (a 3x3 filter) computes the
    pad + 1, dilation + 1 output, which has the right shape. Each must fail the oracle's check, while
    the right arguments pass it: the check can tell a wrong kernel from a right one."""
    case = DEPTHWISE if family in ("depthwise", "diagonalwise_conv2d") else DENSE
    x, w, kw, right = _run(setting, case, 1, 1)
    np.testing.assert_allclose(right, oracle.conv2d(x, w, **kw), rtol=1e-4, atol=1e-4)
    *_, shifted = _run(setting, case, 2, 1)
    wrong_pad = shifted[:, :, :right.shape[2], :right.shape[3]]
    assert not np.allclose(wrong_pad, oracle.conv2d(x, w, **kw), rtol=1e-4, atol=1e-4)
    try:
        *_, wrong_dilation = _run(setting, case, 2, 2)
    except UserError as exc:  # a family without dilation (Winograd) refuses it in one line
        assert "cannot run" in str(exc)
        return
    assert wrong_dilation.shape == right.shape
    assert not np.allclose(wrong_dilation, oracle.conv2d(x, w, **kw), rtol=1e-4, atol=1e-4)
