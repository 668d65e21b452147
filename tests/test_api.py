"""cltune.conv2d: torch.nn.functional.conv2d's arguments and results, for every built-in setting, checked
against ONNX Runtime's Conv (tests/oracle.py); the checks that need torch itself are in the parity group."""

import numpy as np
import pytest

import cltune
from cltune.core.errors import UserError
from cltune.core.problem import Problem, reference_conv2d
from cltune.workloads import builtin_settings, get_family

from . import oracle

CASES = [
    dict(x=(2, 3, 9, 7), w=(4, 3, 3, 3), stride=1, padding=1, dilation=1),
    dict(x=(1, 5, 10, 11), w=(2, 5, 3, 1), stride=(2, 1), padding=(0, 2), dilation=(2, 3)),
    dict(x=(6, 5, 7), w=(3, 6, 1, 1), stride=2, padding=0, dilation=1),  # unbatched input
    # depthwise: channel multiplier 1 (MobileNet's 3x3 stride 2) and 2 with dilation, unbatched
    dict(x=(2, 6, 11, 9), w=(6, 1, 3, 3), stride=2, padding=1, dilation=1, groups=6),
    dict(x=(4, 9, 8), w=(8, 1, 3, 3), stride=1, padding=(2, 1), dilation=(2, 1), groups=4),
]


def accepts(setting: str, case: dict) -> bool:
    """Whether the setting's family can run the case (its check() finds no reason to refuse)."""
    from cltune.api.conv import _runner
    from cltune.core.device_values import bind_params, values

    family, params = builtin_settings()[setting]
    params = bind_params(params, values(_runner(None).info))  # as the API binds a built-in
    fam = get_family(family)
    x = case["x"] if len(case["x"]) == 4 else (1,) + case["x"]
    problem = Problem.from_shapes(x, case["w"], case["stride"], case["padding"], case["dilation"],
                                  case.get("groups", 1))
    return fam.reject_reason(problem, fam.resolve(params), None) is None


# Each setting runs with and without bias: both on the first case (the only one Winograd takes),
# alternately on the others (the direct and GEMM families take cases 0-2, the depthwise ones 3-4).
BIAS_CASES = [(CASES[0], True), (CASES[0], False)] + [(c, i % 2 == 1) for i, c in enumerate(CASES) if i]


def test_every_family_gets_cases_with_and_without_bias():
    for setting in cltune.settings():
        taken = {bias for case, bias in BIAS_CASES if accepts(setting, case)}
        assert taken == {True, False}, setting


@pytest.mark.parametrize("case, with_bias", BIAS_CASES)
@pytest.mark.parametrize("setting", cltune.settings())
def test_matches_the_oracle(case, setting, with_bias, device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(case["x"]).astype(np.float32)
    w = rng.standard_normal(case["w"]).astype(np.float32)
    b = rng.standard_normal(case["w"][0]).astype(np.float32) if with_bias else None
    kw = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"],
              groups=case.get("groups", 1))
    if not accepts(setting, case):
        # A setting whose family cannot run the layer says so in one line instead of computing.
        with pytest.raises(UserError, match=f"setting {setting!r} cannot run"):
            cltune.conv2d(x, w, b, setting=setting, device=device.index, **kw)
        return
    got = cltune.conv2d(x, w, b, setting=setting, device=device.index, **kw)
    want = oracle.conv2d(x, w, b, **kw)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_settings_lists_the_ladder_in_order():
    assert cltune.settings()[:3] == ["normal", "macros_s1", "macros_s2"]
    assert "split" in cltune.settings()


def test_every_setting_runs_some_case():
    # A named setting no case exercises would only ever be tested for its refusal.
    for setting in cltune.settings():
        assert any(accepts(setting, case) for case in CASES), setting


def test_non_contiguous_input_is_made_contiguous_like_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 8, 16)).astype(np.float32)[:, :, :, ::2]
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    assert not x.flags.c_contiguous
    p = Problem.from_shapes(x.shape, w.shape, padding=1, bias=False)
    np.testing.assert_allclose(cltune.conv2d(x, w, padding=1), reference_conv2d(p, x, w, None),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kwargs, message", [
    (dict(setting="fastest"), "unknown setting 'fastest'"),
    (dict(stride=0), "non-positive stride is not supported"),
    (dict(padding=-1), "negative padding is not supported"),
    (dict(dilation=(1, 0)), "dilation should be greater than zero"),
    (dict(stride=(1, 2, 3)), "argument 'stride' must be an int or a tuple of two ints"),
    (dict(padding=4.5), "argument 'padding' must be an int or a tuple of two ints"),
    (dict(groups=2), "expected weight to be divisible by 2 at dimension 0"),
    (dict(bias=np.zeros(4, np.float32)), "expected bias to be 1-dimensional with 3 elements"),
    (dict(bias=np.zeros(3, np.float64)), r"Input type \(float32\) and bias type \(float64\) should be the same"),
])
def test_bad_arguments_get_one_clear_line(kwargs, message):
    x = np.zeros((1, 2, 5, 5), np.float32)
    w = np.zeros((3, 2, 3, 3), np.float32)
    with pytest.raises(UserError, match=message):
        cltune.conv2d(x, w, **kwargs)


def test_wrong_ndim_and_channels_are_refused():
    w = np.zeros((3, 2, 3, 3), np.float32)
    with pytest.raises(UserError, match="Expected 3D .* or 4D"):
        cltune.conv2d(np.zeros((5, 5), np.float32), w)
    with pytest.raises(UserError, match=r"expected input\[1, 4, 5, 5\] to have 2 channels, but got 4"):
        cltune.conv2d(np.zeros((1, 4, 5, 5), np.float32), w)
    with pytest.raises(UserError, match="Expected 4-dimensional weight"):
        cltune.conv2d(np.zeros((1, 2, 5, 5), np.float32), w[0])
    with pytest.raises(UserError, match="must be an array, not list"):
        cltune.conv2d([[[[1.0]]]], w)
    with pytest.raises(UserError, match="computes in float32 only"):
        cltune.conv2d(np.zeros((1, 2, 5, 5)), w.astype(np.float64))
    with pytest.raises(UserError, match="Kernel size can't be greater than actual input size"):
        cltune.conv2d(np.zeros((1, 2, 2, 2), np.float32), w)


def test_big_endian_and_empty_batch_convert_like_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 5)).astype(">f4")
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    want = oracle.conv2d(x.astype(np.float32), w)
    np.testing.assert_allclose(cltune.conv2d(x, w), want, rtol=1e-4, atol=1e-4)
    empty = cltune.conv2d(np.zeros((0, 2, 5, 5), np.float32), w)
    assert empty.shape == (0, 3, 3, 3)


def test_nan_and_inf_inputs_pass_through_as_numbers():
    x = np.ones((1, 1, 3, 3), np.float32)
    x[0, 0, 0, 0] = np.nan
    x[0, 0, 2, 2] = np.inf
    out = cltune.conv2d(x, np.ones((1, 1, 1, 1), np.float32))
    assert np.isnan(out[0, 0, 0, 0]) and np.isinf(out[0, 0, 2, 2]) and out[0, 0, 1, 1] == 1.0


def test_a_huge_broadcast_view_is_refused_before_it_is_copied():
    # A 256 GiB broadcast view of one float used to be copied (ascontiguousarray) before the size check.
    x = np.broadcast_to(np.float32(1), (1, 4, 2**17, 2**17))
    w = np.ones((1, 4, 1, 1), np.float32)
    with pytest.raises(UserError, match=r"input \[1, 4, 131072, 131072\] needs 274877906944 bytes, more than"):
        cltune.conv2d(x, w)


@pytest.mark.parity
def test_a_tensor_that_requires_grad_is_taken_as_torch_takes_it():
    torch = pytest.importorskip("torch")
    # np.asarray() of such a tensor raised RuntimeError ("Can't call numpy() on Tensor that requires grad").
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    want = torch.nn.functional.conv2d(x, w, padding=1).detach().numpy()
    np.testing.assert_allclose(cltune.conv2d(x, w, padding=1), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parity
def test_an_argument_numpy_cannot_read_is_one_user_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(UserError, match="conv2d\\(\\): argument 'input' cannot be read as an array"):
        cltune.conv2d(torch.empty(1, 2, 5, 5, device="meta"), np.ones((1, 2, 1, 1), np.float32))
