"""Write the library of recorded fastest settings (cltune/results/library/KERNEL/DEVICE.json) from
fully measured spaces in Kernel Tuner's cache format: of each file, its TOP fastest points that ran,
with their time and what measuring them cost; the rest of the header (device, kernel, knobs) as it
is. results/library.py reads them as warm-start sources (search/warm.py).
    python scripts/make_library.py [DEVICE=]FILE.json.gz [...]
DEVICE= names the device of a file whose device_name is empty (the hub's MI250X files).
The shipped library: the six files of ../shared/peers/benchmark_hub and nine of the hub's
currently_unused/cachefiles/KernelTuner data/ (library/README.md)."""

import json
import sys
from pathlib import Path

from cltune.results import ktcache

TOP = 8  # a warm start measures each source's 2 fastest valid points; 8 leaves room for ones invalid here
KEEP = ("time", "compile_time", "benchmark_time", "verification_time")
OUT = Path(__file__).resolve().parents[1] / "cltune" / "results" / "library"


def trimmed(data: dict) -> dict:
    keys = ktcache.knob_names(data)
    ran = [(k, e) for k, e in data["cache"].items()
           if isinstance(e, dict) and ktcache.error_name(e) is None and ktcache.finite(e.get("time"))]
    ran.sort(key=lambda ke: ke[1]["time"])
    head = {k: data[k] for k in ("device_name", "kernel_name", "problem_size", "objective") if k in data}
    cache = {k: {**{n: e[n] for n in keys}, **{f: e[f] for f in KEEP if f in e}} for k, e in ran[:TOP]}
    return {**head, "tune_params_keys": keys, "tune_params": data["tune_params"], "cache": cache}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name).strip("-").lower()


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        name, _, f = arg.rpartition("=") if "=" in arg else ("", "", arg)
        data = ktcache.checked(ktcache.load(f), Path(f))
        data["device_name"] = data.get("device_name") or name
        if not data.get("device_name") or not data.get("kernel_name"):
            sys.exit(f"{f}: no device_name or kernel_name; a library file needs both")
        out = OUT / data["kernel_name"] / f"{slug(data['device_name'])}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(trimmed(data), indent=1) + "\n")
        print(f"{f} -> {out.relative_to(OUT.parents[2])}")
