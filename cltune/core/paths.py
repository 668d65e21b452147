"""Where the kernel templates and configs live: beside the package in a checkout, inside it when installed."""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from datetime import datetime
from importlib import resources
from pathlib import Path


def data_dir(name: str) -> Path:
    """kernels/ or configs/ at the repository root, else the copy packaged as cltune.<name>."""
    here = Path(__file__).resolve().parents[2] / name
    if here.is_dir():
        return here
    return Path(str(resources.files(f"cltune.{name}")))


def home() -> Path:
    """cltune's own data (best-config database, measured device peaks, the Kernel Tuner surface's
    results files): $CLTUNE_HOME, else $XDG_CACHE_HOME/cltune, else ~/.cache/cltune."""
    env = os.environ.get("CLTUNE_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "cltune"


def slug(name: str, limit: int = 60, fallback: str = "unnamed") -> str:
    """A name made safe as one file name: letters, digits, '-' and '_' only (never '/', '..' or NUL);
    accents folded (é -> e, ü -> u). A name with no such character left (Cyrillic, CJK)
    becomes `fallback` and a short hash of the name: distinct names keep distinct files."""
    text = str(name)
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    out = re.sub(r"[^A-Za-z0-9_-]+", "-", folded).strip("-")[:limit].strip("-")
    if out:
        return out
    if not re.sub(r"[\W_]+", "", text):  # nothing but punctuation and spaces: nothing to tell apart
        return fallback
    return f"{fallback}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def stamped_path(*names: str, suffix: str = "", folder: str | Path = "results") -> Path:
    """results/<name>_<name>_<time><suffix> for a run's file (suffix ".csv") or folder (suffix ""),
    inside `folder` whatever the names hold (each made a slug; a device name lower-case, 40 at
    most; "config-<hash>" / "device-<hash>" for a name with no ASCII letter or digit); `-2`, `-3` ...
    when two runs start in the same second."""
    parts = [slug(n, fallback="config") for n in names[:1]] + [slug(n, fallback="device").lower()[:40]
                                                               for n in names[1:]]
    stem = "_".join([*parts, datetime.now().strftime("%Y%m%d-%H%M%S")])
    path, n = Path(folder) / f"{stem}{suffix}", 1
    while path.exists():
        n += 1
        path = Path(folder) / f"{stem}-{n}{suffix}"
    return path
