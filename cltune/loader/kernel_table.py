"""A config's [kernel] table (a user's own kernel) -> KernelProblem; every mistake is one line naming
the file, the key and what was expected. Paths are relative to the config's folder."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .checker import REQUIRED, Checker, finite
from ..core.device_refs import NAMES as DEVICE_NAMES
from ..core.errors import UserError
from ..core.expr import ExprError, parse
from ..core.kernel_problem import DTYPES, FILLS, Arg, KernelProblem, Reference, whole
from ..core.sources import inlined, joined

KERNEL_KEYS = {"source", "name", "problem", "global_size", "local_size", "defines", "options", "arg",
               "reference", "metrics"}
ARG_KEYS = {"name", "dtype", "shape", "fill", "output", "value", "local"}
REFERENCE_KEYS = {"python", "npy", "setting", "rtol", "atol"}
METRIC_KEYS = {"flops", "bytes"}
IDENT = re.compile(r"[A-Za-z_]\w*$")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*$', re.M)


def parse_kernel(c: Checker, t: dict, folder: Path) -> KernelProblem:
    where = "kernel."
    c.unknown(t, KERNEL_KEYS, where)
    sources = c.get(t, "source", (str, list), where, REQUIRED,
                    lambda v: isinstance(v, str) or (v and all(isinstance(s, str) for s in v)),
                    "a .cl file or a list of them, relative to the config")
    source, lines = joined([_read_source(c, folder, s) for s in ([sources] if isinstance(sources, str) else sources)])
    name = c.get(t, "name", str, where, REQUIRED, lambda v: bool(IDENT.match(v)), "the kernel function's name")
    missing = missing_kernel(name, source)
    if missing:
        c.fail(f"{where}name", missing)
    sizes = _sizes(c, c.get(t, "problem", dict, where, {}, expected="a table of named integers"))
    env = dict(sizes)
    glob = _exprs(c, t, "global_size", REQUIRED)
    local = _exprs(c, t, "local_size", None)
    if local is not None and len(local) != len(glob):
        c.fail(f"{where}local_size", f"expected {len(glob)} expressions, one per global_size dimension, "
                                     f"got {len(local)}")
    defines = c.get(t, "defines", dict, where, {}, lambda v: all(IDENT.match(k) for k in v),
                    "a table of macro names and values")
    options = c.get(t, "options", list, where, [], lambda v: all(isinstance(o, str) for o in v),
                    "a list of compiler options")
    args = _args(c, t, folder, env)
    reference = _reference(c, t, folder, args)
    metrics = c.get(t, "metrics", dict, where, {}, expected="a [kernel.metrics] table")
    c.unknown(metrics, METRIC_KEYS, f"{where}metrics.")
    for key in METRIC_KEYS & set(metrics):
        _check_expr(c, f"{where}metrics.{key}", metrics[key], env, value=True)
    return KernelProblem(name, source, sizes, glob, local, tuple(args), tuple(sorted(defines.items())),
                         tuple(options), reference, str(metrics.get("flops", "")), str(metrics.get("bytes", "")),
                         c.path, source_lines=lines)


def missing_kernel(name: str, source: str) -> str | None:
    """Why `name` is no kernel of `source` (the kernels it defines), else None."""
    if re.search(rf"\b{re.escape(name)}\b", source):
        return None
    found = re.findall(r"(?:__kernel|\bkernel)\s+void\s+(\w+)", source)
    return f"no kernel {name!r} in the source (kernels found: {', '.join(found) or 'none'})"


def check_names(c: Checker, problem: KernelProblem, knobs: set) -> None:
    """Once the spaces and settings are read: every expression names sizes, knobs or device values,
    and no knob shadows a size."""
    sizes = set(problem.env())
    clash = sizes & knobs
    if clash:
        c.fail("kernel.problem", f"{', '.join(sorted(clash))} is both a problem size and a knob; rename one")
    known = sizes | knobs | set(DEVICE_NAMES)
    checks = [(f"kernel.global_size[{i}]", e) for i, e in enumerate(problem.global_size)]
    checks += [(f"kernel.local_size[{i}]", e) for i, e in enumerate(problem.local_size or ())]
    checks += [(f"kernel.arg[{i}].value", a.value) for i, a in enumerate(problem.args) if a.kind == "scalar"]
    checks += [(f"kernel.arg[{i}].local", a.local) for i, a in enumerate(problem.args) if a.kind == "local"]
    for key, text in checks:
        try:
            parse(text, known)
        except ExprError as exc:
            c.fail(key, f"{exc} in {text!r}")


def _read_source(c: Checker, folder: Path, name: str, seen: tuple = ()) -> tuple[str, tuple]:
    """A source file's text with its #includes inlined, and where each of its lines came from."""
    path = (folder / name).resolve()
    if path in seen:
        c.fail("kernel.source", f"{name} includes itself (through {' -> '.join(p.name for p in seen)})")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        c.fail("kernel.source", f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
    pieces: list = []
    for line in text.split("\n"):
        m = INCLUDE.match(line)
        if m is None:
            pieces.append(line)
            continue
        inc = m.group(1)
        base = path.parent if (path.parent / inc).exists() else folder
        pieces.append((f'// #include "{inc}"', _read_source(c, base, inc, (*seen, path))))
    return inlined(str(folder / name), pieces)


def _sizes(c: Checker, table: dict) -> tuple:
    out = []
    for k, v in table.items():
        if not IDENT.match(k) or k.startswith("device"):
            c.fail(f"kernel.problem.{k}", "expected a name made of letters, digits and _")
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            c.fail(f"kernel.problem.{k}", f"expected an int >= 0, got {v!r}")
        out.append((k, v))
    return tuple(out)


def _exprs(c: Checker, t: dict, key: str, default):
    v = c.get(t, key, list, "kernel.", default, lambda v: 1 <= len(v) <= 3 and all(
        isinstance(e, (int, str)) and not isinstance(e, bool) for e in v),
        "a list of 1 to 3 ints or expressions")
    if v is None:
        return None
    for i, e in enumerate(v):
        _check_expr(c, f"kernel.{key}[{i}]", e, None)
    return tuple(str(e) for e in v)


def _check_expr(c: Checker, key: str, text, env: dict | None, value: bool = False) -> None:
    """Parses; with env (the problem's sizes), evaluates to a whole number."""
    if not isinstance(text, (str, int)) or isinstance(text, bool):
        c.fail(key, f"expected an int or an expression string, got {text!r}")
    try:
        parse(str(text))
    except ExprError as exc:
        c.fail(key, f"{exc}")
    if env is not None:
        try:
            whole(str(text), env, key)
        except ExprError as exc:  # already names the key: said once
            raise UserError(f"{c.path}: {exc}") from None


def _args(c: Checker, t: dict, folder: Path, env: dict) -> list[Arg]:
    entries = c.get(t, "arg", list, "kernel.", REQUIRED, lambda v: all(isinstance(e, dict) for e in v),
                    "[[kernel.arg]] tables, in the kernel's parameter order")
    out, seen = [], set()
    dtypes = f"one of {', '.join(DTYPES)}"
    for i, a in enumerate(entries):
        where = f"kernel.arg[{i}]."
        c.unknown(a, ARG_KEYS, where)
        name = c.get(a, "name", str, where, REQUIRED, lambda v: bool(IDENT.match(v)), "the parameter's name")
        if name in seen:
            c.fail(f"{where}name", f"duplicate argument name {name!r}")
        seen.add(name)
        kinds = [k for k in ("shape", "value", "local") if k in a]
        if len(kinds) != 1:
            c.fail(where.rstrip("."), f"argument {name}: expected exactly one of shape (a buffer), value (a "
                                      f"scalar) or local (a __local buffer's bytes), got {kinds or 'none'}")
        kind = kinds[0]
        if kind == "local":
            for k in ("dtype", "fill", "output"):
                if k in a:
                    c.fail(f"{where}{k}", f"a __local argument ({name}) takes only name and local")
            _check_expr(c, f"{where}local", a["local"], None)
            out.append(Arg(name, "local", local=str(a["local"])))
            continue
        dtype = c.get(a, "dtype", str, where, REQUIRED, lambda v: v in DTYPES, dtypes)
        if kind == "value":
            for k in ("fill", "output"):
                if k in a:
                    c.fail(f"{where}{k}", f"a scalar argument ({name}) takes only name, dtype and value")
            _check_expr(c, f"{where}value", a["value"], None)
            out.append(Arg(name, "scalar", dtype, value=str(a["value"])))
            continue
        shape = c.get(a, "shape", list, where, REQUIRED, lambda v: len(v) >= 1, "a non-empty list of sizes")
        for j, e in enumerate(shape):
            _check_expr(c, f"{where}shape[{j}]", e, env)
        output = c.get(a, "output", bool, where, False, expected="true or false")
        fill = _fill(c, a, where, folder, env, shape, dtype)
        out.append(Arg(name, "buffer", dtype, tuple(str(e) for e in shape), fill, output))
    return out


def _fill(c: Checker, a: dict, where: str, folder: Path, env: dict, shape, dtype):
    if "fill" not in a:
        return None
    fill = a["fill"]
    if isinstance(fill, bool) or not isinstance(fill, (str, int, float)):
        c.fail(f"{where}fill", f"expected {', '.join(FILLS)}, a number or a .npy file, got {fill!r}")
    if isinstance(fill, str) and fill not in FILLS:
        if not fill.endswith(".npy"):
            c.fail(f"{where}fill", f"expected {', '.join(FILLS)}, a number or a .npy file, got {fill!r}")
        path = (folder / fill).resolve()
        import numpy as np

        try:
            arr = np.load(path, allow_pickle=False, mmap_mode="r")
        except (OSError, ValueError) as exc:
            c.fail(f"{where}fill", f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
        n = 1
        for e in shape:
            n *= whole(str(e), env, "shape")
        if arr.size != n:
            c.fail(f"{where}fill", f"{fill} holds {arr.size} values (shape {list(arr.shape)}), the argument "
                                   f"{n} (shape {[whole(str(e), env, 'shape') for e in shape]})")
        return str(path)
    if not isinstance(fill, str) and isinstance(fill, float) and not finite(lambda v: True)(fill):
        c.fail(f"{where}fill", f"expected a finite number, got {fill!r}")
    return fill


def _reference(c: Checker, t: dict, folder: Path, args: list[Arg]) -> Reference | None:
    table = c.get(t, "reference", dict, "kernel.", None, expected="a [kernel.reference] table")
    if table is None:
        return None
    where = "kernel.reference."
    c.unknown(table, REFERENCE_KEYS, where)
    outputs = [a.name for a in args if a.kind == "buffer" and a.output]
    if not outputs:
        c.fail("kernel.reference", "no argument is an output: mark the checked buffers with output = true")
    kinds = [k for k in ("python", "npy", "setting") if k in table]
    if len(kinds) != 1:
        c.fail("kernel.reference", f"expected exactly one of python, npy or setting, got {kinds or 'none'}")
    tol = {k: _tolerance(c, table, k, outputs) for k in ("rtol", "atol")}
    if "python" in table:
        spec = c.get(table, "python", str, where, REQUIRED, lambda v: re.fullmatch(r".+\.py:[A-Za-z_]\w*", v),
                     "FILE.py:FUNCTION")
        file, function = spec.rsplit(":", 1)
        path = (folder / file).resolve()
        try:
            tree = ast.parse(path.read_text())
        except (OSError, UnicodeDecodeError, SyntaxError) as exc:
            c.fail(f"{where}python", f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if function not in defined:
            c.fail(f"{where}python", f"{file} defines no function {function!r} "
                                     f"(functions: {', '.join(sorted(defined)) or 'none'})")
        return Reference("python", str(path), function, **tol)
    if "npy" in table:
        files = c.get(table, "npy", dict, where, REQUIRED, lambda v: len(v) > 0 and all(isinstance(f, str) for f in v.values()),
                      "a table of output names and .npy files")
        for name, f in files.items():
            if name not in outputs:
                c.fail(f"{where}npy.{name}", f"not an output argument (outputs: {', '.join(outputs)})")
            if not (folder / f).resolve().is_file():
                c.fail(f"{where}npy.{name}", f"no such file {(folder / f).resolve()}")
        return Reference("npy", files=tuple((k, str((folder / f).resolve())) for k, f in files.items()), **tol)
    setting = c.get(table, "setting", dict, where, REQUIRED, expected="a table of knob values")
    return Reference("setting", setting=tuple(sorted(setting.items())), **tol)


def _tolerance(c: Checker, table: dict, key: str, outputs: list) -> tuple:
    v = table.get(key)
    if v is None:
        return ()
    ok = finite(lambda x: x >= 0)
    if isinstance(v, dict):
        for name, x in v.items():
            if name not in outputs:
                c.fail(f"kernel.reference.{key}.{name}", f"not an output argument (outputs: {', '.join(outputs)})")
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not ok(x):
                c.fail(f"kernel.reference.{key}.{name}", f"expected a finite number >= 0, got {x!r}")
        return tuple((k, float(x)) for k, x in v.items())
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(v):
        c.fail(f"kernel.reference.{key}", f"expected a finite number >= 0 or a table per output, got {v!r}")
    return (("", float(v)),)
