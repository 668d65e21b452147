"""A reference file for a kernel of your own ([kernel] config): each buffer argument's initial contents
(cltune's seeded ones; an output without a fill starts as NaN, so an element nobody writes fails)
and each output's expected values (the config's reference), as text a C program reads with fscanf.
The format (docs/deploy.md#the-reference-file):

    cltune-kernel-reference 1
    problem <key>
    buffers <count>
    buffer <name> <dtype> <n> <checked 0|1> <rtol> <atol>   then n initial values
                                                            then, when checked, n expected values
"""

from __future__ import annotations

import numpy as np

from ..core.errors import UserError
from ..loader import config as cfg
from .user_kernel import load_problem

FORMAT = "cltune-kernel-reference 1"
DTYPES = ("float32", "int32")  # what examples/deploy/deploy_kernel.c reads


def kernel_reference_text(config: str, seed: int = 0) -> str:
    problem = load_problem(config)
    run = cfg.load(config)
    for a in problem.buffers:
        if a.dtype not in DTYPES:
            raise UserError(f"{config}: argument {a.name} is {a.dtype}; a reference file holds "
                            f"{' and '.join(DTYPES)} buffers")
    host = problem.host_arrays(seed)
    expected = _expected(problem, host, config)
    parts = [FORMAT, f"problem {problem.key}", f"buffers {len(problem.buffers)}"]
    for a in problem.buffers:
        order = "F" if a.order == "F" else "C"
        rtol, atol = problem.reference.tolerance(a.name, run.rtol, run.atol) if a.name in expected else (0, 0)
        if a.dtype != "float32":
            rtol = atol = 0
        parts.append(f"buffer {a.name} {a.dtype} {host[a.name].size} {int(a.name in expected)} {rtol!r} {atol!r}")
        parts += _numbers(host[a.name].ravel(order=order))
        if a.name in expected:
            parts += _numbers(np.asarray(expected[a.name]).astype(host[a.name].dtype).ravel(order=order))
    return "\n".join(parts) + "\n"


def _expected(problem, host: dict, config: str) -> dict:
    """Each output's expected values, from the config's Python function or .npy files."""
    from ..measure.kernel_data import expected_outputs  # pyopencl (0.7 s): only where this process opens a device

    ref = problem.reference
    if ref is None or ref.kind not in ("python", "npy") or ref.verify is not None:
        raise UserError(f"{config}: kernel.reference: a reference file needs expected values from a "
                        f"python function or .npy files (this config's reference is "
                        f"{'none' if ref is None else ref.kind})")
    return expected_outputs(problem, host)


def _numbers(flat: np.ndarray) -> list[str]:
    """Eight values a line; floats as %.9g (float32 reads back exactly; nan as nan)."""
    text = [f"{float(v):.9g}" if flat.dtype.kind == "f" else str(int(v)) for v in flat]
    return [" ".join(text[i:i + 8]) for i in range(0, len(text), 8)]
