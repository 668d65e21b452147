"""The JSON tuning file (the deployment as data, docs/deploy.md#the-json-tuning-file), its flat form
for C programs that carry no JSON reader, and the one way deploy writes a file: whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from ..core.errors import UserError

FLAT_COLUMNS = ("device", "driver", "problem", "match", "tuned_problem", "setting", "options", "sources", "launches")
DEFAULT_DEVICE = "*"  # the flat form's device for the default entries


def to_json(deployment: dict) -> str:
    return json.dumps(deployment, indent=1) + "\n"


def to_flat(deployment: dict) -> str:
    """One line per entry, tab-separated FLAT_COLUMNS; launches as kernel|g0,g1,g2|l0,l1,l2|args,
    separated by ';' (local 0,0,0: the driver chooses); '#' lines are comments."""
    kernel = " ".join(deployment["kernel"].split())  # one line
    lines = [f"# cltune tuning file, flat form (schema {deployment['schema_version']}, kernel {kernel}): "
             + "\t".join(FLAT_COLUMNS)]
    rows = [(d["device"], d["driver"], e) for d in deployment["devices"] for e in d["entries"]]
    rows += [(DEFAULT_DEVICE, "", e) for e in deployment["default"]["entries"]]
    for device, driver, e in rows:
        fields = (device, driver, e["problem"], e["match"], e.get("tuned_problem", ""), e["setting"],
                  e["options"], " ".join(e["sources"]), flat_launches(e["launches"]))
        for name, value in zip(FLAT_COLUMNS, fields):
            if any(c in value for c in "\t\n\r"):
                raise UserError(f"{name} {value!r}: holds a tab or a line break, which the flat tuning "
                                f"file cannot hold")
        lines.append("\t".join(fields))
    return "\n".join(lines) + "\n"


def flat_launches(launches: list[dict] | None) -> str:
    if not launches:
        return ""
    dims = lambda v: ",".join(str(x) for x in (list(v) + [0, 0, 0])[:3])  # noqa: E731
    return ";".join(f"{ln['kernel']}|{dims(ln['global'])}|{dims(ln['local'] or [])}|{' '.join(ln['args'])}"
                    for ln in launches)


def flat_path(json_path: str | Path) -> Path:
    """The flat form's file: beside the JSON, .tsv for .json."""
    p = Path(json_path)
    return p.with_suffix(".tsv") if p.suffix == ".json" else p.with_name(p.name + ".tsv")


def write_all(texts: dict[Path, str]) -> None:
    """Each text into its file, each through a temporary file renamed over it: a reader never sees
    half a file, and nothing is written before every text was made."""
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
