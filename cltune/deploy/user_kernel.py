"""A kernel of your own ([kernel] config, tune_kernel) made concrete as an app needs it, from its
config (`cltune deploy --config`): a setting's build options (the family's own `options`, the -D
list its rows' `build_options` record), its source files and its one launch, the global and local
size evaluated from the config's expressions for that setting, and each argument as launch text."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import UserError
from ..core.expr import ExprError
from ..core.kernel_problem import KernelProblem, evaluate, whole
from ..loader import config as cfg
from ..workloads.kernel import derived, register_problem
from .realize import defines_of

LOCAL = "local:"  # a launch argument `local:BYTES`: a __local buffer of that many bytes


def load_problem(config: str) -> KernelProblem:
    """The KernelProblem of a config with a [kernel] table; one line for another config."""
    problem = cfg.load(config).problem
    if not isinstance(problem, KernelProblem):
        raise UserError(f"--config {config}: has no [kernel] table (a conv family needs no --config)")
    return problem


def check_rows(problem: KernelProblem, ms: list[dict], where: str) -> None:
    """Every measurement is of this problem (its key hashes source, sizes, geometry and arguments)."""
    other = sorted({m["problem"] for m in ms if m["problem"] != problem.key})
    if other:
        raise UserError(f"{where}: holds results of {other[0]}, and --config {problem.where} is "
                        f"{problem.key} (another source, size or argument): deploy each with its own config")


def realize_kernel(problem: KernelProblem, setting: str, params: dict) -> dict:
    """{options, defines, sources, source_hash, launches} of one setting of a user kernel."""
    family = register_problem(problem)
    p = family.resolve(params, f"setting {setting}: ")
    why = family.reject_reason(problem, p, None)
    if why:
        raise UserError(f"setting {setting}: {problem.describe()} refuses it: {why}")
    options = family.options(problem, p)
    return {"options": " ".join(options), "defines": defines_of(options), "sources": source_files(problem),
            "source_hash": family.source_hash(p), "launches": launch_of(family, problem, p)}


def source_files(problem: KernelProblem) -> list[str]:
    """The names of the files the source was joined from (an app keeps them in one folder), when
    joining them with newlines gives the source cltune built; else the first one (whose #include
    lines the app's build resolves with -I)."""
    paths = list(dict.fromkeys(name for _, name, _ in problem.source_lines if name and name != "<kernel_source>"))
    try:
        texts = [Path(p).read_text() for p in paths]
    except OSError:
        return [Path(p).name for p in paths[:1]]
    return [Path(p).name for p in paths] if "\n".join(texts) == problem.source else [Path(p).name for p in paths[:1]]


def launch_of(family, problem: KernelProblem, p: dict) -> list[dict] | None:
    """The kernel's one launch ({kernel, global, local, args}), or None when a size or an argument
    needs the device's values (device.*) or a scalar is of a type the launch text has no form for."""
    try:
        glob, local = family.geometry(problem, p, None)
        env = {**problem.env(), **p, **derived(problem, p)}
        args = [_arg(a, env) for a in problem.args]
    except ExprError:
        return None
    if None in args:
        return None
    return [{"kernel": problem.name, "global": list(glob), "local": None if local is None else list(local),
             "args": args}]


def _arg(a, env: dict) -> str | None:
    """A buffer by its name, an int32 scalar as an int, a float32 one ending in f, a __local buffer
    as local:BYTES; None for other scalar types."""
    if a.kind == "buffer":
        return a.name
    if a.kind == "local":
        return f"{LOCAL}{max(1, whole(a.local, env, f'argument {a.name} local bytes'))}"
    value = evaluate(a.value, env, f"argument {a.name}")
    if a.dtype == "int32":
        return str(int(value))
    if a.dtype == "float32":
        return repr(float(a.np_dtype.type(value))) + "f"
    return None
