"""A network's conv layers: the bundled tables (configs/networks/*.toml) or an ONNX file.

A layer is a name and a Problem: the conv with the epilogue that follows it in the network (bias,
ReLU/ReLU6, a 2x2 max-pool), exactly what the kernel families compute and fuse.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ..core.errors import UserError, first_line
from ..core.paths import data_dir
from .network import Layer, Network  # noqa: F401  (what a loaded table is made of)

TOP_KEYS = {"name", "description", "source", "conv"}
CONV_KEYS = {"name", "input", "weight", "stride", "padding", "dilation", "groups", "bias", "activation", "pool"}


def bundled() -> dict[str, Path]:
    """Bundled network tables by name."""
    return {p.stem: p for p in sorted(tables_dir().glob("*.toml"))}


def tables_dir() -> Path:
    return data_dir("configs") / "networks"


def load(name_or_path: str) -> Network:
    """A bundled network's name, a table file (.toml) or an ONNX model (.onnx)."""
    path = Path(name_or_path)
    if path.suffix == ".onnx":
        if not path.exists():
            raise UserError(f"{path}: no such ONNX file")
        from .onnx_model import load as load_onnx

        return load_onnx(path)
    if path.suffix == ".toml" and path.exists():
        return load_table(path)
    known = bundled()
    if name_or_path in known:
        return load_table(known[name_or_path])
    raise UserError(f"{name_or_path}: not a bundled network ({', '.join(known)}), a table .toml "
                    "or an .onnx file")


def load_table(path: Path) -> Network:
    from ..loader.checker import Checker
    from ..loader.config_tables import problem_table

    try:
        data = tomllib.loads(Path(path).read_text())
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read a network table: {first_line(exc)}") from None
    c = Checker(str(path))
    c.unknown(data, TOP_KEYS, "")
    convs = c.get(data, "conv", list, "", [], lambda v: len(v) > 0 and all(isinstance(e, dict) for e in v),
                  "a non-empty list of [[conv]] tables")
    layers, seen = [], set()
    for i, t in enumerate(convs):
        where = f"conv[{i}]."
        c.unknown(t, CONV_KEYS, where)
        name = c.get(t, "name", str, where, f"conv{i}", lambda v: v.strip() != "", "a non-empty string")
        if name in seen:
            c.fail(f"{where}name", f"duplicate layer name {name!r}")
        seen.add(name)
        layers.append(Layer(name, problem_table(c, {k: v for k, v in t.items() if k != "name"}, where)))
    return Network(c.get(data, "name", str, "", Path(path).stem, expected="a string"), tuple(layers),
                   c.get(data, "source", str, "", "", expected="a string"),
                   c.get(data, "description", str, "", "", expected="a string"))


def to_toml(net: Network) -> str:
    """The table file of a network (what scripts/net_tables.py writes into configs/networks/)."""
    lines = [f'name = "{net.name}"', f'description = "{net.description}"', f'source = "{net.source}"', ""]
    for layer in net.layers:
        p = layer.problem
        lines += ["[[conv]]", f'name = "{layer.name}"', f"input = {list(p.input_shape)}",
                  f"weight = {list(p.weight_shape)}", f"stride = {_pair(p.stride_h, p.stride_w)}",
                  f"padding = {_pair(p.pad_h, p.pad_w)}", f"dilation = {_pair(p.dilation_h, p.dilation_w)}",
                  f"groups = {p.groups}", f"bias = {'true' if p.bias else 'false'}",
                  f'activation = "{p.activation}"', f"pool = {p.pool}", ""]
    return "\n".join(lines)


def _pair(a: int, b: int) -> str:
    return str(a) if a == b else f"[{a}, {b}]"
