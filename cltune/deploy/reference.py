"""A reference file for a C program to check its answer against: one conv problem's inputs (cltune's
seeded ones) and its expected output (the float64 reference, as float32), as text a C program reads
with fscanf. The format (docs/deploy.md#the-reference-file):

    cltune-reference 1
    problem <key>
    rtol <r> atol <a>
    x <count>  then <count> numbers    (likewise w, b (0 without a bias) and y, the expected output)
"""

from __future__ import annotations

import numpy as np

from ..core.errors import UserError
from ..core.problem import reference_conv2d
from ..results.nearest import problem_from_key

FORMAT = "cltune-reference 1"


def reference_text(key: str, seed: int = 0, rtol: float = 1e-4, atol: float = 1e-4) -> str:
    problem = problem_from_key(key)
    if problem is None:
        raise UserError(f"{key!r}: not a conv problem key (such as n1_c8_h16_w16_k8_r3_s3_st1x1_p1x1_d1x1_g1)")
    x, w, b = problem.make_inputs(seed)
    y = reference_conv2d(problem, x, w, b).astype(np.float32)
    parts = [FORMAT, f"problem {key}", f"rtol {rtol!r} atol {atol!r}"]
    for name, arr in (("x", x), ("w", w), ("b", b if b is not None else np.zeros(0, np.float32)), ("y", y)):
        flat = arr.ravel()
        parts.append(f"{name} {flat.size}")
        parts += [" ".join(f"{float(v):.9g}" for v in flat[i:i + 8]) for i in range(0, flat.size, 8)]
    return "\n".join(parts) + "\n"
