"""The library: the fastest recorded settings of kernels other people tuned on other devices, shipped
with cltune (library/KERNEL/DEVICE.json: each a Kernel Tuner cache of a device's 8 fastest points,
written by scripts/make_library.py from the FAIR Benchmark Hub's brute-forced spaces, MIT,
library/README.md). A space of a kernel the library holds starts from them: `cltune replay`, `cltune
sweep` and `cltune.tune_kernel` measure their fastest points first unless told `--warm FILE` or
`--cold` (search/warm.py); Kernel Tuner's surface never does. Like TVM's
TopHub, it is only as good as the devices it holds are like yours; `model`'s blind half (warm.Guarded)
keeps a search on an unlike device going."""

from __future__ import annotations

from pathlib import Path

from .recorded import Recorded, load

ROOT = Path(__file__).parent / "library"


def files(root: Path | None = None) -> list[Path]:
    return sorted((root or ROOT).glob("*/*.json"))


def same_device(a: str, b: str) -> bool:
    """Two device names the same device (case, spaces and punctuation aside); an empty name is no one's."""
    def norm(s):
        return "".join(c for c in s.lower() if c.isalnum())
    return bool(norm(a)) and norm(a) == norm(b)


def identity(recorded: Recorded) -> str:
    """A recorded space's device: the name the file gives, else its file name (the hub's MI250X files)."""
    return recorded.device or recorded.name.rsplit("/", 1)[-1]


def tunable(params) -> list[str]:
    """The knobs of more than one value: what a library file must have to serve a space."""
    return [n for n, values in params if len(values) > 1]


def for_recorded(recorded: Recorded) -> list[Recorded]:
    """The library's spaces of a replayed space's kernel, on devices other than its own (`cltune replay`)."""
    return sources(recorded.kernel, tunable(recorded.params), other_than=identity(recorded))


def for_space(space, device: str = "") -> list[Recorded]:
    """The library's spaces of a live space's kernel (a `kernel:NAME` family's NAME, else the family), the
    device in front (`device`) first: measured on it, its own fastest points are the likeliest here."""
    found = sources(space.family.removeprefix("kernel:"), tunable(space.params))
    return sorted(found, key=lambda entry: not same_device(entry.device, device))


def sources(kernel: str, knobs, other_than: str = "", root: Path | None = None) -> list[Recorded]:
    """The library's spaces of `kernel` that have every knob in `knobs` (a space's knobs of more than one
    value), except the device `other_than` (a replay scores a search, not the library's copy of the
    file it replays)."""
    out = []
    for f in files(root):
        if not kernel or f.parent.name != kernel:
            continue
        entry = load(f)
        names = {n for n, _ in entry.params}
        if all(k in names for k in knobs) and not same_device(entry.device, other_than):
            out.append(entry)
    return out
