"""<name>.device.json beside a results file <name>.csv: the device's attributes, and the file's
header (schema, cltune version, config, problem, device identity) under "results", so that the
CSV itself stays plain (pandas.read_csv, spreadsheets and csvkit read its first line as the
columns)."""

from __future__ import annotations

import json
from pathlib import Path

from ..core.errors import UserError
from . import schema


def sidecar(csv_path: str | Path) -> Path:
    """<name>.device.json beside <name>.csv: the device's attributes and the file's header."""
    return Path(csv_path).with_suffix(".device.json")


def save_device_info(csv_path: str | Path, info, header: dict | None = None) -> Path:
    """The run's device attributes, beside the CSV as <name>.device.json, with the file's header
    (schema, cltune version, config, problem, device identity) under "results", so the CSV itself
    stays plain; never replaced by the attributes of another device (check_device_info refuses
    that before the sweep starts). Without `header`, the one already there is kept."""
    path = sidecar(csv_path)
    data = info.as_dict()
    held = read_header(csv_path, strict=False) if header is None else header
    if held is not None:
        data["results"] = held
    try:
        path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return path


def read_header(csv_path: str | Path, strict: bool = True) -> dict | None:
    """The header a results file's sidecar holds, or None (no sidecar, or one written before it
    held the header); a damaged one raises UserError when `strict`."""
    path = sidecar(csv_path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if strict:
            raise UserError(f"{path}: cannot read the results header: {exc}") from None
        return None
    header = data.get("results") if isinstance(data, dict) else None
    if header is None:
        return None
    try:
        return schema.check_header(header)
    except ValueError as exc:
        if strict:
            raise UserError(f"{path}: {exc}") from None
        return None


def check_device_info(csv_path: str | Path, device: dict) -> None:
    """Refuse a sweep whose .device.json would replace one that describes another device."""
    path = Path(csv_path).with_suffix(".device.json")
    if not path.is_file():
        return
    try:
        held = json.loads(path.read_text())
    except (OSError, ValueError):
        held = None
    mine = device
    if not isinstance(held, dict):
        raise UserError(f"{path}: exists and is not a device description; move it or choose another --out")
    for f in sorted((set(held) & set(mine)) - {"results"}):
        if str(held[f]) != str(mine[f]):
            raise UserError(f"{path}: describes another device ({f} {held[f]!r}, this sweep's is "
                            f"{mine[f]!r}); move it or choose another --out")
