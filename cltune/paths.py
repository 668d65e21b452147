"""Where the kernel templates and configs live: beside the package in a checkout, inside it when installed."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_dir(name: str) -> Path:
    """kernels/ or configs/ at the repository root, else the copy packaged as cltune.<name>."""
    here = Path(__file__).resolve().parents[1] / name
    if here.is_dir():
        return here
    return Path(str(resources.files(f"cltune.{name}")))


def home() -> Path:
    """cltune's own data (best-config database, measured device peaks): $CLTUNE_HOME or ~/.cache/cltune."""
    import os

    env = os.environ.get("CLTUNE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cltune"


def slug(name: str, limit: int = 60) -> str:
    """A name made safe as one file name: letters, digits, '-' and '_' only (never '/', '..' or NUL)."""
    import re

    text = re.sub(r"[^A-Za-z0-9_-]+", "-", str(name)).strip("-")[:limit].strip("-")
    return text or "unnamed"
