"""`cltune.tune_kernel`: Kernel Tuner's entry point, so that its users switch by changing an import.
The kernel, its arguments and its space become a KernelProblem and a Space, and are tuned by the
session a `cltune sweep` of a config runs (a worker process, verification, resume, a results file)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from . import kernel_values as kv
from ..core.errors import UserError
from ..core.expr import ExprError, parse
from ..core.kernel_problem import Arg, KernelProblem, Reference
from ..core.space import Space
from ..core.version import __version__
from ..loader import config as cfgmod
from ..loader.kernel_table import IDENT, missing_kernel
from ..results.guard import RESULTS, check_output
from ..workloads import get_family
from ..workloads.kernel import register_problem

DTYPE_NAMES = {np.dtype(n): n for n in ("float32", "float16", "float64", "int32", "uint32", "int8", "uint8",
                                        "int16", "uint16", "int64", "uint64")}


def tune_kernel(kernel_name, kernel_source, problem_size, arguments, tune_params, grid_div_x=None,
                grid_div_y=None, grid_div_z=None, restrictions=None, answer=None, atol=1e-6, *,
                block_size_names=None, rtol=1e-5, strategy=None, budget=None, time_limit=None, device=None,
                out=None, compiler_options=None, seed=None, iterations=None, warm=()):
    """Tune `kernel_name` of `kernel_source` (source text, a file, a list of files or a generator
    f(params)) over `tune_params` (knob -> a sequence of values, each a macro), in Kernel Tuner's
    value forms (kernel_values.py) and meanings: global size = ceil(problem_size /
    product of the grid divisors) x the block size, the block size from `block_size_names`
    (default block_size_x/y/z; 256, 1, 1 where the space has none), `arguments` numpy arrays
    (buffers) and numpy scalars in the kernel's order, `answer` a list with the expected array of
    each checked output and None elsewhere (None: rows are `unverified`), `restrictions`
    expression strings or a function of the knob dict, `iterations` a fixed number of timed
    launches a setting (each in run_ms_samples), `warm` results files of the same space on other devices
    (their 2 fastest each measured first: `cltune sweep --warm`; default: the library's, results/library.py,
    None: none). Returns (rows as a DataFrame, with each knob and
    `time` (ms, the fastest launch) as columns; an environment dict)."""
    from ..drive import tune  # pandas (1.1 s) comes with it: imported on first use

    cfg = kernel_config(kernel_name, kernel_source, problem_size, arguments, tune_params, grid_div_x=grid_div_x,
                        grid_div_y=grid_div_y, grid_div_z=grid_div_z, block_size_names=block_size_names,
                        restrictions=restrictions, answer=answer, atol=atol, rtol=rtol, strategy=strategy,
                        compiler_options=compiler_options, iterations=iterations)
    path = Path(out) if out else None
    if path is not None:  # a results file is resumed; the kernel's source or other measured data refused
        sources = kernel_source if isinstance(kernel_source, (list, tuple)) else [kernel_source]
        check_output(path, [s for s in sources if isinstance(s, (str, Path)) and "\n" not in str(s)], "out",
                     allowed=(RESULTS,))
    resume = path is not None and path.is_file() and path.stat().st_size > 0
    opts = tune.Options(device=device, out=None if resume else path, resume=path if resume else None,
                        budget=budget, time_limit_s=time_limit, seed=seed,
                        warm=(warm,) if isinstance(warm, (str, Path)) else tuple(warm or ()), cold=warm is None)
    result = tune.run(cfg, opts)
    return _table(result.path), _environment(result)


def kernel_config(kernel_name, kernel_source, problem_size, arguments, tune_params, *, grid_div_x=None,
                  grid_div_y=None, grid_div_z=None, block_size_names=None, restrictions=None, answer=None,
                  atol=1e-6, rtol=1e-5, strategy=None, compiler_options=None, defines=None, verify=None,
                  iterations=None):
    """The Config a tune_kernel call tunes (its KernelProblem, its one Space), checked before any
    device is opened; the Kernel Tuner surface (cltune.kernel_tuner) tunes the same one. `defines`:
    fixed macros (name -> value); `verify`: Kernel Tuner's verify(answer, outputs, atol) (Reference.verify)."""
    tune_params = kv.knob_values(tune_params)  # Kernel Tuner's value forms: kernel_values.py
    source, generator = kv.source_forms(kernel_source, tune_params)
    sizes, glob, local, derived, blocks = kv.geometry(problem_size, tune_params, block_size_names,
                                                      (grid_div_x, grid_div_y, grid_div_z))
    args = _arguments(kernel_name, source, arguments, answer)
    reference = None
    if verify is not None:  # the user's function compares: answer as given, any shapes
        reference = Reference("arrays", verify=kv.shippable(verify, "verify"), answer=tuple(answer or (None,) * len(args)))
    elif answer is not None:
        reference = Reference("arrays", arrays=tuple((a.name, np.asarray(x)) for a, x in zip(args, answer)
                                                     if x is not None))
    problem = KernelProblem(kernel_name, source, sizes, glob, local, tuple(args),
                            defines=kv.macros(defines), options=tuple(compiler_options or ()),
                            reference=reference, where="tune_kernel", generator=generator, derived=derived,
                            block_names=blocks)
    register_problem(problem)
    space = Space(problem.family, tuple((k, tuple(v)) for k, v in tune_params.items()),
                  _restrictions(restrictions, tune_params, sizes), families=get_family)
    return cfgmod.Config(kernel_name, "tune_kernel", problem, (), kv.timing(iterations), rtol=rtol, atol=atol,
                         spaces=(space,), strategy=strategy)


def parameter_names(kernel_name: str, source: str) -> list[str]:
    """The kernel's parameter names, read from its source (empty when they cannot be found)."""
    m = re.search(rf"\b{re.escape(kernel_name)}\s*\(([^)]*)\)", re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.S))
    if not m:
        return []
    return [re.findall(r"\w+", p)[-1] for p in m.group(1).split(",") if re.findall(r"\w+", p)]


def _arguments(kernel_name: str, source: str, arguments, answer) -> list:
    if not isinstance(arguments, (list, tuple)):
        raise UserError("arguments: expected a list of numpy arrays and numpy scalars, in the kernel's order")
    if answer is not None and (not isinstance(answer, (list, tuple)) or len(answer) != len(arguments)):
        raise UserError(f"answer: expected a list as long as arguments ({len(arguments)}), with None for "
                        "the arguments not checked")
    if not isinstance(kernel_name, str) or not IDENT.match(kernel_name):
        raise UserError(f"kernel_name: expected the kernel function's name, got {kernel_name!r}")
    missing = missing_kernel(kernel_name, source)
    if missing:
        raise UserError(f"kernel_name: {missing}")
    names = parameter_names(kernel_name, source)
    if len(names) != len(arguments):
        names = [f"arg{i}" for i in range(len(arguments))]
    out = []
    for i, (name, value) in enumerate(zip(names, arguments)):
        dtype = DTYPE_NAMES.get(getattr(value, "dtype", None))
        if dtype is None:
            raise UserError(f"arguments[{i}] ({name}): expected a numpy array or scalar of "
                            f"{', '.join(DTYPE_NAMES.values())}, got {type(value).__name__}"
                            + (f" of {value.dtype}" if hasattr(value, "dtype") else ""))
        checked = answer is not None and answer[i] is not None
        if isinstance(value, np.ndarray) and value.ndim > 0:
            out.append(Arg(name, "buffer", dtype, tuple(str(s) for s in value.shape), value, checked,
                           order=kv.memory_order(value, f"arguments[{i}] ({name})")))
        else:
            if checked:
                raise UserError(f"answer[{i}] ({name}): a scalar argument cannot be checked")
            out.append(Arg(name, "scalar", dtype, value=repr(value.item())))
    return out


def _restrictions(restrictions, tune_params: dict, sizes) -> tuple:
    if restrictions is None:
        return ()
    if callable(restrictions):
        return (("restrictions", Restriction(restrictions, tuple(tune_params))),)
    if isinstance(restrictions, str):
        restrictions = [restrictions]
    out = []
    known = set(tune_params) | {n for n, _ in sizes}
    for i, text in enumerate(restrictions):
        if callable(text):
            out.append((f"restrictions[{i}]", Restriction(text, tuple(tune_params))))
            continue
        try:
            out.append((f"restrictions[{i}]", parse(text, known)))
        except ExprError as exc:
            raise UserError(f"restrictions[{i}]: {exc} in {text!r}") from None
    return tuple(out)


class Restriction:
    """A restriction given as a function of the knob dict, used as a space's constraint."""

    names = frozenset()

    def __init__(self, fn, knobs: tuple):
        self.fn, self.knobs = fn, knobs
        self.text = getattr(fn, "__name__", "a function")

    def __call__(self, env: dict):
        return bool(self.fn({k: env[k] for k in self.knobs}))


def _table(path):
    import pandas as pd  # pandas (1.1 s) comes with it: imported on first use

    from ..results import rows, schema  # pandas (1.1 s) comes with it: imported on first use

    df = rows.load(path)
    knobs = pd.DataFrame([json.loads(p) for p in df["params"]], index=df.index)
    df = pd.concat([df, knobs.loc[:, [c for c in knobs.columns if c not in df.columns]]], axis=1)
    df["time"] = df[schema.TIME]
    return df


def _environment(result) -> dict:
    rows = result.rows
    first = rows[0] if rows else {}
    return {"device_name": first.get("device"), "platform": first.get("platform"), "driver": first.get("driver"),
            "target": first.get("target"), "cltune_version": __version__, "results_file": str(result.path)}
