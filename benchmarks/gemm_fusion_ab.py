"""Time GEMM-family settings side by side, interleaved in one process: the kernels of the working
tree against those of a git revision (did a kernel change cost anything?), and each setting at
several FUSE levels on a layer with an epilogue (what does fusing it save?).

    PYTHONPATH=. python benchmarks/gemm_fusion_ab.py --layer study --old main --rounds 5
    PYTHONPATH=. python benchmarks/gemm_fusion_ab.py --layer vgg_128_28 --activation relu --pool 2 \
        --fuse 3,2,0 --set implicit_gemm:TM=16,TN=4

Settings are named built-ins or FAMILY:KNOB=V,... (default: the families' CPU named settings). Each
round runs every contender once untimed, then --repeat timed calls in a row (wall clock around one
complete inference, and the process's CPU time, PoCL's threads included); the table gives medians
over all timed calls and the ratio to the first contender's, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time
from dataclasses import fields

import numpy as np

from cltune.measure.runner import Runner
from cltune.core.problem import Problem
from cltune.core.space import Setting
from cltune.workloads import FAMILIES, builtin_settings, get_family, register

LAYERS = {
    "study": dict(input_shape=(1, 512, 13, 13), weight_shape=(1024, 512, 3, 3), padding=1),
    "vgg_64_56": dict(input_shape=(1, 64, 56, 56), weight_shape=(64, 64, 3, 3), padding=1),
    "vgg_128_28": dict(input_shape=(1, 128, 28, 28), weight_shape=(128, 128, 3, 3), padding=1),
    "vgg_256_14": dict(input_shape=(1, 256, 14, 14), weight_shape=(256, 256, 3, 3), padding=1),
    "pw_256": dict(input_shape=(1, 256, 28, 28), weight_shape=(256, 256, 1, 1)),
}
DEFAULT_SETTINGS = ("im2col_gemm_cpu", "implicit_gemm_cpu", "implicit_gemm_nhwc_cpu",
                    "implicit_gemm_1x1_cpu")


def parse_setting(text: str) -> tuple[str, dict]:
    """A built-in name, or FAMILY:KNOB=V,KNOB=V -> (family, params)."""
    named = builtin_settings()
    if text in named:
        return named[text]
    family, _, body = text.partition(":")
    params = {}
    for item in filter(None, body.split(",")):
        k, v = item.split("=")
        params[k] = int(v) if v.isdigit() else v
    return family, params


def register_old(family: str, rev: str) -> str:
    """The family with its kernel files as they are at git revision `rev`, as `<family>@<rev>`."""
    name = f"{family}@{rev}"
    if name in FAMILIES:
        return name
    fam = get_family(family)
    text = "\n".join(subprocess.run(["git", "show", f"{rev}:kernels/{f}"], check=True,
                                    capture_output=True, text=True).stdout
                     for f in ("epilogue.cl",) + fam.sources)
    cls = type("OldSource", (type(fam),), {"source": lambda self: text})
    values = {f.name: getattr(fam, f.name) for f in fields(fam)}
    register(cls(**{**values, "name": name, "named": {}}))
    return name


def cpu_ms() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e3


def race(calls: dict, rounds: int, repeat: int) -> dict[str, tuple[list, list]]:
    times = {label: ([], []) for label in calls}
    for _ in range(rounds):
        for label, call in calls.items():
            call()
            for _ in range(repeat):
                t0, c0 = time.perf_counter(), cpu_ms()
                call()
                times[label][0].append((time.perf_counter() - t0) * 1e3)
                times[label][1].append(cpu_ms() - c0)
    return times


def contenders(args) -> dict[str, tuple[str, dict]]:
    """label -> (family, params): each setting at each FUSE level, and on the old kernels."""
    out = {}
    for text in args.settings or DEFAULT_SETTINGS:
        family, params = parse_setting(text)
        variants = [(text, family, params)]
        if args.fuse:
            variants = [(f"{text} FUSE={f}", family, {**params, "FUSE": int(f)})
                        for f in args.fuse.split(",")]
        for label, fam, p in list(variants):
            if args.old:
                variants.append((f"{label} @{args.old}", register_old(fam, args.old), p))
        out.update({label: (fam, p) for label, fam, p in sorted(variants, key=lambda v: v[0])})
    return out


def compare_outputs(runner, problem, settings: dict, rev: str) -> None:
    """The same setting on both kernel sources must give the same bits."""
    for label, setting in settings.items():
        if label.endswith(f" @{rev}"):
            continue
        new = runner.run_once(problem, setting)
        old = runner.run_once(problem, settings[f"{label} @{rev}"])
        same = np.array_equal(new, old)
        print(f"  {label}: output {'bit-identical to' if same else 'DIFFERS from'} @{rev}"
              + ("" if same else f" (max |diff| {np.max(np.abs(new - old)):.3g})"))


def print_table(times: dict, rev: str | None) -> None:
    med = {label: (statistics.median(w), statistics.median(c)) for label, (w, c) in times.items()}
    print(f"{'contender':<52} {'wall med':>9} {'wall min':>9} {'cpu med':>9}  "
          f"vs {'@' + rev if rev else 'first'}")
    first = next(iter(med.values()))
    for label, (wall, _) in times.items():
        w, c = med[label]
        ref = med.get(f"{label} @{rev}", (w, c)) if rev else first
        print(f"{label:<52} {w:9.2f} {min(wall):9.2f} {c:9.2f}  wall {w / ref[0]:.3f} "
              f"cpu {c / ref[1]:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", default="study", choices=sorted(LAYERS))
    ap.add_argument("--activation", default="none")
    ap.add_argument("--pool", type=int, default=1)
    ap.add_argument("--set", action="append", dest="settings", help="setting (repeatable)")
    ap.add_argument("--old", default=None, help="also time each setting with the kernels at REV")
    ap.add_argument("--fuse", default=None, help="comma-separated FUSE levels to time each setting at")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.old and (args.activation != "none" or args.pool != 1):
        # the old kernels may not apply what today's family says they fuse (and would write a
        # whole conv output into the pooled one's buffer)
        ap.error("--old compares kernels on layers without an epilogue: drop --activation/--pool")

    problem = Problem.from_shapes(**LAYERS[args.layer], activation=args.activation, pool=args.pool)
    runner = Runner(rtol=1e-3, atol=1e-3)
    settings = {label: Setting.make(label, fam, p) for label, (fam, p) in contenders(args).items()}
    calls = {label: runner.launcher(problem, s) for label, s in settings.items()}
    print(f"{args.layer}: {problem.describe()} activation={args.activation} pool={args.pool}")
    if args.old:
        compare_outputs(runner, problem, settings, args.old)
    load0 = os.getloadavg()
    times = race(calls, args.rounds, args.repeat)
    load1 = os.getloadavg()
    print_table(times, args.old)
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}; {args.rounds} rounds x {args.repeat}")


if __name__ == "__main__":
    main()
