"""What a kernel family is: its knobs (`Param`), its launches (`Launch`) and the `Family` base class
with the hooks each family implements. Plain Python: nothing here imports OpenCL."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar

from ..core.errors import UserError
from ..core.paths import data_dir
from .launch import Launch, global_size, local_size, round_up  # noqa: F401  (families import them from here)
from . import epilogue
from ..core.sources import joined, whole_file

CL_STD = "-cl-std=CL1.2"


def build_options(defines: dict) -> list[str]:
    """The options a setting compiles with: OpenCL C 1.2 always, then its macros in name order."""
    return [CL_STD] + [f"-D{k}={v}" for k, v in sorted(defines.items())]


@dataclass(frozen=True)
class Param:
    """A knob: its allowed values (None: any int >= 0), its default and what it does."""

    name: str
    values: tuple | None
    default: object
    doc: str


# Knobs of every family. The local work size: all zero lets the driver choose (NULL). FUSE: how
# many epilogue steps (bias, activation, 2x2 max-pool, in that order) the conv kernel applies in its
# output write, as far as the family's kernel can; the rest run as separate kernels.
GENERIC_PARAMS = (
    Param("LWS_X", None, 0, "local work size, dimension 0 (0 with Y and Z 0: the driver chooses)"),
    Param("LWS_Y", None, 0, "local work size, dimension 1 (0 counts as 1 when another is set)"),
    Param("LWS_Z", None, 0, "local work size, dimension 2 (0 counts as 1 when another is set)"),
    Param("FUSE", (0, 1, 2, 3), 3, "epilogue steps fused into the conv: 0 none, 1 bias, 2 + activation, "
                                   "3 + max-pool (capped at what the family's kernel can do)"),
)


# How a kernel's inner loop multiplies and adds (the MATH knob of conv2d, direct and the GEMMs).
MATH_CODES = {"plain": 0, "mad": 1, "fma": 2}
MATH_PARAM = Param("MATH", tuple(MATH_CODES), "plain", "multiply-add as a * b + c, mad() or fma()")


@dataclass
class Family:
    """Base class: subclasses set name, sources, params, named and implement the three hooks."""

    name: str = ""
    sources: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    named: dict = field(default_factory=dict)  # built-in named settings: name -> params
    fusable: tuple = ("bias",)  # epilogue steps its kernel applies in its output write (a prefix)
    # A standard family computes groups=1 convs from bufs.w as [K, C, R, S]; diagonalwise.py wraps
    # each one so it also runs depthwise layers. Families that are not (depthwise, the wrappers) say so.
    standard: ClassVar[bool] = True

    def all_params(self) -> dict[str, Param]:
        return {p.name: p for p in self.params + GENERIC_PARAMS}

    def resolve(self, values: dict, where: str = "") -> dict:
        """Defaults filled in; unknown names and values outside a knob's list raise UserError."""
        known = self.all_params()
        out = {name: p.default for name, p in known.items()}
        for key, value in values.items():
            if key not in known:
                raise UserError(f"{where}unknown parameter {key!r} for family {self.name!r}; "
                                f"known: {', '.join(sorted(known))}")
            p = known[key]
            if p.values is None:
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise UserError(f"{where}parameter {key} must be an int >= 0, got {value!r}")
            elif not any(type(value) is type(v) and value == v for v in p.values):  # 4.0 is not 4
                raise UserError(f"{where}parameter {key} must be one of {list(p.values)}, got {value!r}")
            out[key] = value
        return out

    def source(self) -> str:
        return "\n".join(read_kernel(f) for f in ("epilogue.cl",) + tuple(self.sources))

    def setting_source(self, p: dict) -> str:
        """The source setting `p` (its values) is built from: source(), except in a family whose
        source follows the setting (a user kernel's generator)."""
        return self.source()

    def source_hash(self, p: dict | None = None) -> str:
        """The hash of source(), or with `p` of that setting's source (setting_source)."""
        return hashlib.sha256((self.source() if p is None else self.setting_source(p)).encode()).hexdigest()[:12]

    def source_lines(self, p: dict | None = None) -> tuple:
        """Where each line of source() came from, kernels/<file>.cl (core/sources.py): what a build
        error names."""
        files = ("epilogue.cl",) + tuple(self.sources)
        return joined([(read_kernel(f), whole_file(f"kernels/{f}")) for f in files])[1]

    # What the measuring side calls: the hooks below, with the epilogue split around them ---------
    def reject_reason(self, problem, p: dict, device) -> str | None:
        return self.check(epilogue.split(problem, self.fusable, p["FUSE"])[0], p, device)

    def options(self, problem, p: dict) -> list[str]:
        """The build options of a setting: -cl-std=CL1.2 and its macros."""
        inner = epilogue.split(problem, self.fusable, p["FUSE"])[0]
        return build_options({**self.defines(inner, p), **epilogue.macros(inner)})

    def figures(self, problem, p: dict) -> dict:
        """What the setting moves and computes, for its row: the bytes its kernels move (by the
        epilogue steps it fuses), the FLOPs it really computes, and the bytes its weights take."""
        return {"bytes_model": epilogue.bytes_moved(problem, self.fusable, p["FUSE"]),
                "real_flops": self.real_flops(problem, p) or problem.flops,
                "weight_bytes": self.weight_bytes(problem, p)}

    def plan(self, ctx, queue, problem, p: dict, bufs) -> list[Launch]:
        return epilogue.launches(self, ctx, queue, problem, p, bufs)

    # Hooks: each sees the problem its own kernel computes (the epilogue steps it fuses) ---------
    def check(self, problem, p: dict, device) -> str | None:
        """Why this setting cannot run this problem on this device, or None."""
        return None

    def check_kernels(self, problem, kernels: dict, device) -> str | None:
        """Once built: why its kernels cannot take this family's arguments (a user kernel's
        signature against its config), or None."""
        return None

    def tolerance(self, problem, p: dict, rtol: float, atol: float) -> tuple[float, float]:
        """The (rtol, atol) this setting is verified with; a family whose arithmetic is less exact
        than a direct sum (e.g. Winograd) widens the config's tolerance by its known error growth."""
        return rtol, atol

    def real_flops(self, problem, p: dict) -> int | None:
        """The FLOPs the setting really computes where they differ from the direct count
        `problem.flops` (e.g. Winograd's transforms and element-wise products), else None."""
        return None

    def weight_bytes(self, problem, p: dict) -> int:
        """Device memory the weights take in the form the kernel reads them."""
        import numpy as np

        return 4 * int(np.prod(problem.weight_shape))

    def defines(self, problem, p: dict) -> dict:
        raise NotImplementedError

    def launches(self, ctx, queue, problem, p: dict, bufs) -> list[Launch]:
        raise NotImplementedError


@lru_cache(maxsize=None)
def read_kernel(filename: str) -> str:
    return (data_dir("kernels") / filename).read_text()
