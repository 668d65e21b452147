"""The conv2d problem every kernel family solves: shapes, derived sizes, inputs, numpy reference."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def pair(value, name: str) -> tuple[int, int]:
    """An int or an (h, w) pair, as torch.nn.functional.conv2d takes them."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value
    ):
        return int(value[0]), int(value[1])
    raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")


ACTIVATIONS = ("none", "relu", "relu6")


@dataclass(frozen=True)
class Problem:
    """One conv2d layer: input [N, C, H, W], weight [K, C/groups, R, S], stride, padding, dilation."""

    batch: int
    in_c: int
    in_h: int
    in_w: int
    out_c: int
    filter_h: int
    filter_w: int
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    dilation_h: int = 1
    dilation_w: int = 1
    groups: int = 1
    bias: bool = True
    activation: str = "none"  # applied after the bias: "none", "relu" or "relu6"
    pool: int = 1  # 2: a 2x2, stride-2 max-pool after the activation (torch's floor mode)

    def __post_init__(self):
        for name in ("batch", "in_c", "in_h", "in_w", "out_c", "filter_h", "filter_w",
                     "stride_h", "stride_w", "dilation_h", "dilation_w", "groups"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.pad_h < 0 or self.pad_w < 0:
            raise ValueError(f"padding must be >= 0, got ({self.pad_h}, {self.pad_w})")
        if self.in_c % self.groups or self.out_c % self.groups:
            raise ValueError(
                f"groups={self.groups} must divide in_channels={self.in_c} and out_channels={self.out_c}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if self.pool not in (1, 2):
            raise ValueError(f"pool must be 1 (none) or 2 (2x2 max-pool, stride 2), got {self.pool!r}")
        if self.pool == 2 and (self.out_h < 2 or self.out_w < 2):
            raise ValueError(f"a 2x2 max-pool needs a conv output of at least 2x2, got {self.out_h}x{self.out_w}")
        if self.out_h < 1 or self.out_w < 1:
            raise ValueError(
                f"output would be empty: input {self.in_h}x{self.in_w} with padding "
                f"({self.pad_h}, {self.pad_w}) is smaller than the dilated filter "
                f"{(self.filter_h - 1) * self.dilation_h + 1}x{(self.filter_w - 1) * self.dilation_w + 1}")

    @classmethod
    def from_shapes(cls, input_shape, weight_shape, stride=1, padding=0, dilation=1, groups=1,
                    bias=True, activation="none", pool=1) -> "Problem":
        """Build from torch-style shapes: input [N, C, H, W], weight [K, C/groups, R, S]."""
        if len(input_shape) != 4:
            raise ValueError(f"input must be [N, C, H, W], got shape {list(input_shape)}")
        if len(weight_shape) != 4:
            raise ValueError(f"weight must be [K, C/groups, R, S], got shape {list(weight_shape)}")
        n, c, h, w = (int(v) for v in input_shape)
        k, cg, r, s = (int(v) for v in weight_shape)
        if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"groups must be a positive int, got {groups!r}")
        if cg * groups != c:
            raise ValueError(
                f"weight {list(weight_shape)} with groups={groups} expects input with {cg * groups} "
                f"channels, but got input {list(input_shape)} with {c} channels")
        sh, sw = pair(stride, "stride")
        ph, pw = pair(padding, "padding")
        dh, dw = pair(dilation, "dilation")
        return cls(n, c, h, w, k, r, s, sh, sw, ph, pw, dh, dw, int(groups), bool(bias), activation, pool)

    @property
    def out_h(self) -> int:
        return (self.in_h + 2 * self.pad_h - self.dilation_h * (self.filter_h - 1) - 1) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        return (self.in_w + 2 * self.pad_w - self.dilation_w * (self.filter_w - 1) - 1) // self.stride_w + 1

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.in_c, self.in_h, self.in_w)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.out_c, self.in_c // self.groups, self.filter_h, self.filter_w)

    @property
    def conv_shape(self) -> tuple[int, ...]:
        """The convolution's own output, before any pooling."""
        return (self.batch, self.out_c, self.out_h, self.out_w)

    @property
    def output_shape(self) -> tuple[int, ...]:
        """What the problem returns: the conv output, pooled when pool=2."""
        p = self.pool
        return (self.batch, self.out_c, self.out_h // p, self.out_w // p)

    @property
    def epilogue(self) -> tuple[str, ...]:
        """The steps after the convolution, in order: some of bias, act, pool."""
        return tuple(step for step, on in (("bias", self.bias), ("act", self.activation != "none"),
                                           ("pool", self.pool == 2)) if on)

    @property
    def flops(self) -> int:
        """Multiply-adds counted as two FLOPs (bias adds not counted), as the study counts them."""
        macs = self.batch * self.out_c * self.out_h * self.out_w * (self.in_c // self.groups) \
            * self.filter_h * self.filter_w
        return 2 * macs

    @property
    def min_bytes(self) -> int:
        """The least traffic any kernel must move: read input, weights and bias once, write output once."""
        elems = math.prod(self.input_shape) + math.prod(self.weight_shape) + math.prod(self.output_shape)
        return 4 * (elems + (self.out_c if self.bias else 0))  # Python ints: never wraps

    @property
    def key(self) -> str:
        """A stable text id used in results files, resume keys and the best-config database."""
        return (f"n{self.batch}_c{self.in_c}_h{self.in_h}_w{self.in_w}_k{self.out_c}"
                f"_r{self.filter_h}_s{self.filter_w}_st{self.stride_h}x{self.stride_w}"
                f"_p{self.pad_h}x{self.pad_w}_d{self.dilation_h}x{self.dilation_w}_g{self.groups}"
                f"{'' if self.bias else '_nobias'}"
                f"{'' if self.activation == 'none' else '_' + self.activation}"
                f"{'_pool2' if self.pool == 2 else ''}")

    # Names the constraints of a space may use (space.problem_env).
    ENV_NAMES = ("batch", "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "filter_h", "filter_w",
                 "stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "groups", "pool")

    def env(self) -> dict:
        """The problem's values under the names expressions use."""
        return {name: getattr(self, name) for name in self.ENV_NAMES}

    def row_fields(self) -> dict:
        """The problem's own columns of a results row."""
        return {"input_shape": "x".join(map(str, self.input_shape)),
                "weight_shape": "x".join(map(str, self.weight_shape)),
                "stride": f"{self.stride_h}x{self.stride_w}", "padding": f"{self.pad_h}x{self.pad_w}",
                "dilation": f"{self.dilation_h}x{self.dilation_w}", "groups": self.groups}

    def size_refusal(self, info) -> str | None:
        """Why the device cannot hold this problem's buffers (max allocation, global memory), or None.
        Sizes are Python ints, so a shape of 2**32 x 2**32 is refused rather than wrapping to 0."""
        total = 0
        for name, shape in (("input", self.input_shape), ("weight", self.weight_shape),
                            ("output", self.output_shape)):
            nbytes = 4 * math.prod(shape)
            total += nbytes
            if nbytes > info.max_alloc_bytes:
                return (f"{name} {list(shape)} needs {nbytes} bytes, more than the device's max "
                        f"allocation of {info.max_alloc_bytes} bytes ({info.name})")
        if total > info.global_mem_bytes:
            return (f"the problem's buffers need {total} bytes, more than the device's "
                    f"{info.global_mem_bytes} bytes of global memory")
        return None

    def describe(self) -> str:
        return (f"input {list(self.input_shape)} weight {list(self.weight_shape)} "
                f"stride ({self.stride_h}, {self.stride_w}) padding ({self.pad_h}, {self.pad_w}) "
                f"dilation ({self.dilation_h}, {self.dilation_w})"
                + (f" groups {self.groups}" if self.groups > 1 else "")
                + (f" -> {self.activation}" if self.activation != "none" else "")
                + (" -> max-pool 2x2" if self.pool == 2 else "")
                + f" -> output {list(self.output_shape)}")

    def make_inputs(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Deterministic float32 input, weight and bias, uniform in [-1, 1)."""
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, self.input_shape).astype(np.float32)
        w = rng.uniform(-1, 1, self.weight_shape).astype(np.float32)
        b = rng.uniform(-1, 1, self.out_c).astype(np.float32) if self.bias else None
        return x, w, b


def reference_conv2d(problem: Problem, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """conv2d in float64, with torch's semantics (cross-correlation, zero padding, groups)."""
    p = problem
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p.pad_h, p.pad_h), (p.pad_w, p.pad_w)))
    w64 = w.astype(np.float64)
    cg, kg = p.in_c // p.groups, p.out_c // p.groups
    out = np.zeros(p.conv_shape, dtype=np.float64)
    for r in range(p.filter_h):
        for s in range(p.filter_w):
            y0, x0 = r * p.dilation_h, s * p.dilation_w
            hs = slice(y0, y0 + p.stride_h * (p.out_h - 1) + 1, p.stride_h)
            ws = slice(x0, x0 + p.stride_w * (p.out_w - 1) + 1, p.stride_w)
            patch = xp[:, :, hs, ws].reshape(p.batch, p.groups, cg, p.out_h, p.out_w)
            wg = w64[:, :, r, s].reshape(p.groups, kg, cg)
            out += np.einsum("gkc,ngchw->ngkhw", wg, patch, optimize=True).reshape(out.shape)
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    return epilogue_reference(problem, out)


def epilogue_reference(problem: Problem, out: np.ndarray) -> np.ndarray:
    """The activation and the 2x2 max-pool (floor mode, as torch) applied to a conv output."""
    if problem.activation == "relu":
        out = np.maximum(out, 0)
    elif problem.activation == "relu6":
        out = np.clip(out, 0, 6)
    if problem.pool == 2:
        n, k, h, w = out.shape
        out = out[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, k, h // 2, 2, w // 2, 2).max(axis=(3, 5))
    return out
