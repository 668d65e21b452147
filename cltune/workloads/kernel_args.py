"""A user kernel's signature, read back from the built kernel (`-cl-kernel-arg-info`), against the
arguments its config or tune_kernel call declares: their count always, their address space and
element type where the driver keeps argument info."""

from __future__ import annotations

import re

# How drivers spell an element type -> the OpenCL C name kernel_problem.DTYPES uses
ALIASES = {"unsigned char": "uchar", "unsigned int": "uint", "signed char": "char", "unsigned short": "ushort",
           "signed int": "int", "unsigned long": "ulong"}
KNOWN = {"float", "half", "double", "int", "uint", "char", "uchar", "short", "ushort", "long", "ulong"}


def signature_mismatch(problem, kernel, device) -> str | None:
    """Why the built kernel's parameters do not take the declared arguments, or None."""
    import pyopencl as cl  # pyopencl (0.7 s): only where this process opens a device

    n = kernel.num_args
    if n != len(problem.args):
        names = ", ".join(a.name for a in problem.args)
        return (f"{problem.where}: kernel {problem.name} takes {n} argument(s), the config declares "
                f"{len(problem.args)} ({names})")
    for i, arg in enumerate(problem.args):
        try:
            qual = kernel.get_arg_info(i, cl.kernel_arg_info.ADDRESS_QUALIFIER)
            type_name = kernel.get_arg_info(i, cl.kernel_arg_info.TYPE_NAME)
        except (cl.Error, cl.LogicError, cl.RuntimeError):
            return None  # no argument info on this driver: the count is all that is checked
        aq = cl.kernel_arg_address_qualifier
        space = {aq.GLOBAL: "__global", aq.CONSTANT: "__constant", aq.LOCAL: "__local",
                 aq.PRIVATE: "a value"}.get(qual, "?")
        pointer = "*" in type_name
        base = _element(type_name)
        where = f"{problem.where}: argument {i} ({arg.name})"
        if arg.kind == "buffer":
            if space not in ("__global", "__constant") or not pointer:
                return f"{where}: the kernel takes {space} {type_name}, the config a {arg.dtype} buffer"
            if base in KNOWN and base != arg.cl_type:
                return f"{where}: the kernel's buffer holds {base}, the config's dtype {arg.dtype} ({arg.cl_type})"
        elif arg.kind == "local":
            if space != "__local":
                return f"{where}: the kernel takes {space} {type_name}, the config a __local buffer (local = ...)"
        else:
            if space != "a value" or pointer:
                return f"{where}: the kernel takes {space} {type_name}, the config a {arg.dtype} value"
            if base in KNOWN and re.sub(r"\d+$", "", base) == base and base != arg.cl_type:
                return f"{where}: the kernel takes {type_name}, the config a {arg.dtype} ({arg.cl_type}) value"
    return None


def _element(type_name: str) -> str:
    """`float4*` -> float, `unsigned char*` -> uchar, `const int` -> int."""
    t = re.sub(r"\b(const|volatile|restrict|__global|__constant|__local|__private|global|constant|local)\b", "",
               type_name.replace("*", " "))
    t = " ".join(t.split())
    t = ALIASES.get(t, t)
    return re.sub(r"(\D)(2|3|4|8|16)$", r"\1", t)
