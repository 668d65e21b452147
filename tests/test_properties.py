"""Property-based checks of the front doors: the API's results against ONNX Runtime's Conv on drawn
shapes, strides, pads, dilations and groups; its argument checking against torch's own (the parity
group); the config loader against arbitrary TOML-shaped data. Either a result or one UserError, never
a traceback of another kind."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import cltune
from cltune.loader import config
from cltune.core.errors import UserError

from . import oracle

small = st.integers(0, 6)
# Mostly valid values, so that both torch's refusals and its results are exercised (hypothesis
# favours the ends of a list, so the invalid values sit in the middle).
positive = st.sampled_from([1, 2, (1, 2), 3, 0, (2, 1), -1, (1, 0), (3, 1), 2, 1])
padding_ = st.sampled_from([0, 1, (0, 1), 2, -1, (2, 1), (0, -1), (1, 3), 1, 0])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 2), c=st.integers(1, 3), h=st.integers(1, 9), w=st.integers(1, 9), k=st.integers(1, 3),
       r=st.integers(1, 3), s=st.integers(1, 3), stride=st.sampled_from([1, 2, (1, 2), (3, 1)]),
       padding=st.sampled_from([0, 1, (0, 2), (2, 1)]), dilation=st.sampled_from([1, 2, (1, 3), (2, 1)]),
       groups=st.sampled_from([1, 1, 2, 3]), with_bias=st.booleans(), unbatched=st.booleans())
def test_api_computes_what_the_oracle_computes(n, c, h, w, k, r, s, stride, padding, dilation, groups,
                                               with_bias, unbatched):
    """Guards against an index slip (dilation, pad, stride, groups) in the default setting's path that
    the hand-picked cases miss: every valid draw is computed by ONNX Runtime too."""
    if groups > 1:
        c = 1  # the grouped layers cltune computes are depthwise (any channel multiplier k)
    rng = np.random.default_rng(0)
    shape = (c * groups, h, w) if unbatched else (n, c * groups, h, w)
    x = rng.standard_normal(shape).astype(np.float32)
    wt = rng.standard_normal((k * groups, c, r, s)).astype(np.float32)
    b = rng.standard_normal(k * groups).astype(np.float32) if with_bias else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    pair = [v if isinstance(v, tuple) else (v, v) for v in (stride, padding, dilation)]
    (sh, sw), (ph, pw), (dh, dw) = pair
    assume((h + 2 * ph - dh * (r - 1) - 1) >= 0 and (w + 2 * pw - dw * (s - 1) - 1) >= 0)
    event(f"groups {groups}")
    got = cltune.conv2d(x, wt, b, setting="depthwise_cpu" if groups > 1 else "normal", **kw)
    want = oracle.conv2d(x, wt, b, **kw)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parity
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 2), c=st.integers(1, 4), h=small, w=small, k=st.integers(1, 4),
       cg_off=st.sampled_from([0, 0, 1, -1, 0, 0]), r=st.integers(1, 3), s=st.integers(1, 3),
       stride=positive, padding=padding_, dilation=positive, groups=st.sampled_from([1, 1, 2, 3, 1, 1]),
       with_bias=st.booleans(), unbatched=st.booleans())
def test_api_accepts_and_refuses_what_torch_does(n, c, h, w, k, cg_off, r, s, stride, padding, dilation,
                                                 groups, with_bias, unbatched):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    cg = max(1, c // groups + cg_off)
    shape = (c, h, w) if unbatched else (n, c, h, w)
    x = rng.standard_normal(shape).astype(np.float32)
    wt = rng.standard_normal((k, cg, r, s)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32) if with_bias else None
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    try:
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(wt),
                                          None if b is None else torch.from_numpy(b), **kw).numpy()
    except (RuntimeError, ValueError, TypeError):
        event("torch refuses")
        with pytest.raises(UserError):
            cltune.conv2d(x, wt, b, **kw)
        return
    if groups > 1 and want.size:
        assume(False)  # grouped (non-depthwise) layers are checked by the depthwise tests
    event("torch computes")
    if want.size == 0:
        # torch skips some checks (e.g. dilation 0) when the batch is empty; cltune checks alike.
        try:
            got = cltune.conv2d(x, wt, b, **kw)
        except UserError:
            return
    else:
        got = cltune.conv2d(x, wt, b, **kw)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 5000), st.floats(allow_nan=True),
              st.text(max_size=6), st.sampled_from(["normal", "conv2d", "fma", "random", "A * B"])),
    lambda sub: st.one_of(st.lists(sub, max_size=5), st.dictionaries(st.text(max_size=6), sub, max_size=4)),
    max_leaves=12)
problem_table = st.fixed_dictionaries({}, optional={
    "input": st.one_of(values, st.lists(st.integers(-1, 20), min_size=4, max_size=4)),
    "weight": st.one_of(values, st.lists(st.integers(-1, 20), min_size=4, max_size=4)),
    "stride": values, "padding": values, "dilation": values, "groups": values, "bias": values})
setting_table = st.fixed_dictionaries({}, optional={
    "name": st.one_of(values, st.sampled_from(["a", "b"])), "family": values,
    "params": st.one_of(values, st.dictionaries(st.sampled_from(["MACROS", "UNROLL", "MATH", "LWS_X", "X"]),
                                                st.one_of(values, st.sampled_from([4.0, 1.0, 0.0])),
                                                max_size=3))})
space_table = st.fixed_dictionaries({}, optional={
    "family": st.one_of(values, st.just("conv2d")),
    "params": st.one_of(values, st.dictionaries(st.sampled_from(["MACROS", "UNROLL", "LWS_X", "Q"]),
                                                st.lists(st.integers(-1, 5), max_size=3), max_size=3)),
    "constraints": st.one_of(values, st.dictionaries(st.text(max_size=3), st.one_of(
        values, st.sampled_from(["MACROS >= 1", "UNROLL ==", "LWS_X % 0 == 0", "in_c > 2 and Q"])), max_size=2))})
config_data = st.fixed_dictionaries({}, optional={
    "name": values, "problem": st.one_of(values, problem_table),
    "run": st.one_of(values, st.dictionaries(st.sampled_from(
        ["warmup", "repeat", "rtol", "strategy", "budget", "baseline", "bogus", "seed", "timeout_s",
         "time_limit_s"]), st.one_of(values, st.sampled_from([float("nan"), float("inf"), -1, 2**32])),
        max_size=3)),
    "setting": st.one_of(values, st.lists(setting_table, max_size=3)),
    "space": st.one_of(values, st.lists(space_table, max_size=2)), "extra": values})


@settings(max_examples=400, deadline=None)
@given(config_data)
def test_config_loader_returns_a_config_or_one_user_error(data):
    try:
        cfg = config.parse(data, "prop.toml")
    except UserError as exc:
        event("refused")
        msg = str(exc)
        assert msg.startswith("prop.toml: ") and "\n" not in msg
        return
    event("accepted")
    assert cfg.problem.out_h >= 1 and (cfg.settings or cfg.spaces)
    # No knob takes a float (4.0 passed as 4 and broke the build), no NaN/inf time, no seed numpy refuses.
    assert not any(isinstance(v, float) for s in cfg.settings for v in s.values.values())
    assert not any(isinstance(v, float) for sp in cfg.spaces for _, vals in sp.params for v in vals)
    assert all(v is None or math.isfinite(v) for v in (cfg.timeout_s, cfg.time_limit_s))
    assert 0 <= cfg.seed <= config.SEED_MAX
