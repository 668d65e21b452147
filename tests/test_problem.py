"""The numpy reference and the problem's derived sizes, checked against a plain loop."""

import numpy as np
import pytest

from cltune.core.problem import Problem, pair, reference_conv2d


def loop_conv2d(p: Problem, x, w, b):
    """Seven nested loops, straight from the definition (torch's cross-correlation)."""
    out = np.zeros(p.output_shape)
    cg, kg = p.in_c // p.groups, p.out_c // p.groups
    for n in range(p.batch):
        for k in range(p.out_c):
            g = k // kg
            for oh in range(p.out_h):
                for ow in range(p.out_w):
                    acc = 0.0 if b is None else float(b[k])
                    for c in range(cg):
                        for r in range(p.filter_h):
                            for s in range(p.filter_w):
                                ih = oh * p.stride_h - p.pad_h + r * p.dilation_h
                                iw = ow * p.stride_w - p.pad_w + s * p.dilation_w
                                if 0 <= ih < p.in_h and 0 <= iw < p.in_w:
                                    acc += float(w[k, c, r, s]) * float(x[n, g * cg + c, ih, iw])
                    out[n, k, oh, ow] = acc
    return out


@pytest.mark.parametrize("shapes", [
    dict(input_shape=(2, 3, 7, 6), weight_shape=(4, 3, 3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
    dict(input_shape=(1, 4, 9, 9), weight_shape=(4, 2, 3, 3), stride=1, padding=2, dilation=3, groups=2),
    dict(input_shape=(1, 2, 5, 8), weight_shape=(3, 2, 1, 1), stride=3, padding=0, dilation=1),
])
def test_reference_matches_plain_loops(shapes):
    # Guards the reference itself: every kernel is judged by it, so a slicing bug would hide theirs.
    p = Problem.from_shapes(**shapes)
    x, w, b = p.make_inputs(3)
    np.testing.assert_allclose(reference_conv2d(p, x, w, b), loop_conv2d(p, x, w, b), rtol=1e-12, atol=1e-12)


def test_output_size_and_flops_of_study_layer():
    p = Problem.from_shapes((1, 512, 13, 13), (1024, 512, 3, 3), 1, 1)
    assert p.output_shape == (1, 1024, 13, 13)
    assert p.flops == 2 * 797_442_048  # 797.4 M multiply-adds, as the study's facts give
    assert round(p.min_bytes / 1e6, 1) == 19.9  # ≈ 19.9 MB, weights 18.9 MB


def test_empty_output_is_refused_with_the_sizes_named():
    with pytest.raises(ValueError, match="output would be empty"):
        Problem.from_shapes((1, 1, 2, 2), (1, 1, 3, 3), padding=0)


def test_channel_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"expects input with 4 channels.*got input \[1, 3, 5, 5\]"):
        Problem.from_shapes((1, 3, 5, 5), (2, 4, 3, 3))


@pytest.mark.parametrize("bad", [True, 1.5, (1, 2, 3), "2", (1, True)])
def test_pair_rejects_what_torch_rejects(bad):
    with pytest.raises(ValueError, match="must be an int or a pair"):
        pair(bad, "stride")
