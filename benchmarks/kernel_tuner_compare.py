"""cltune against Kernel Tuner on the same kernel, space and OpenCL device, side by side in one run.

    pip install -e '.[peers]'                 # Kernel Tuner 1.5.0 beside cltune
    python benchmarks/kernel_tuner_compare.py [--device D] [--runs 3] [--no-adaptive-part | --only-adaptive-part]
                                              [--keep DIR] [--config kt_compare] [--repeat-config bench_repeat]
                                              [--passes 24] [--rerank 3]

Part 1, configs/kt_compare.toml (48 points of kernels/conv2d.cl; `--config` names another conv2d
space over the same knobs, its constraints Python expressions): each tool tunes the space `--runs`
times in a fresh process, the first with empty kernel caches (cold), the others warm, alternating
tools. cltune runs `cltune sweep` with its default measurement; Kernel Tuner runs `tune_kernel`
(brute force, 5 iterations, verified against the same float64 reference with `answer`) on the same
source, defines, inputs and local sizes, which this script derives from cltune's conv2d family.
Printed: wall per point, Spearman rank correlation of per-point times run vs run (each tool's own
time, then the minimum and the median of the same launches for both), the share of timed launches
over 1.3x their point's fastest, each run's best point, and whether the tools agree. Then each run
against a reference ranking measured in the same hour (benchmarks/reference_ranking.py: `--passes`
passes of one launch of every point, spread before, between and after the tools' runs, each
point's fastest launch): its Spearman, and the reference rank of the point it chose as best
(cltune's: the winner of its final re-ranking, `--rerank` best points measured again interleaved,
as a user's sweep ends; 0 leaves one pass, as Kernel Tuner makes).

Part 2, configs/bench_repeat.toml (a direct-family space with a wide spread): cltune's adaptive
repeats (the default) against a fixed `--repeat 5`, warm, alternating: wall (the process's, and the
measuring time inside it), and best point, and both against the space's reference ranking.
`--keep DIR` keeps every run's CSV and kernel caches, and part 1's reference (reference.json).

First, on PoCL, the host's own noise: benchmarks/pocl_affinity.py's short kernel launched one at a
time in a fresh process (PoCL's threads pinned, as cltune runs them), and the share of its launches
over 1.3x the fastest. Both tools' Spearman depends on it: it was 0.8-2.5% on a quiet 2-core AMD
EPYC VM, where cltune's pairs reached 0.96-0.98, and 31-35% on a 2-core Intel Xeon VM of a busy
host, where they were 0.64-0.96 and Kernel Tuner's 0.57-0.79.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cltune.loader import config
from cltune.results import rows as results, schema  # noqa: E402

KNOBS = ("MACROS", "UNROLL", "MATH", "LWS_X", "LWS_Y")


# Kernel Tuner's side (runs in a child process) ----------------------------------------------------
def kt_conv_task(cfg_name: str = "kt_compare") -> tuple[dict, callable]:
    """Kernel Tuner's `tune_kernel` arguments for the config's conv2d space over KNOBS (the same
    source, defines, inputs, local sizes and float64 reference as cltune's conv2d family), and a
    function that turns one of its result rows into cltune's knob values."""
    import numpy as np

    from cltune.core.problem import reference_conv2d
    from cltune.workloads import get_family
    from cltune.workloads.conv2d import MACRO_STEPS, MATH_CODES, problem_macros

    cfg = config.load(cfg_name)
    p, space = cfg.problem, cfg.spaces[0]
    family = get_family("conv2d")
    # Kernel Tuner writes `#define NAME value` for each tunable; MACROS is cltune's ladder step, so a
    # prologue maps it to the problem macros cltune passes with -D at that step.
    values = problem_macros(p)
    prologue = ["#define MAD24 0"]
    for step in range(1, len(MACRO_STEPS)):
        prologue += [f"#if MACROS >= {step}"] + [f"#define {n} {values[n]}" for n in MACRO_STEPS[step]] + ["#endif"]
    source = "\n".join(prologue) + "\n" + family.source()
    params = dict(space.params)
    tune_params = {k: ([MATH_CODES[v] for v in params[k]] if k == "MATH" else list(params[k])) for k in KNOBS}
    restrictions = [expr.text for _, expr in space.constraints]  # cltune's syntax is Python's

    x, w, b = p.make_inputs(cfg.seed)
    expected = reference_conv2d(p, x, w, b).astype(np.float32)
    i32 = np.int32
    args = [x.ravel(), w.ravel(), b, np.zeros(expected.size, np.float32)] + [i32(v) for v in (
        p.batch, p.in_c, p.in_h, p.in_w, p.out_c, p.out_h, p.out_w, p.filter_h, p.filter_w,
        p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w)]
    answer = [None] * len(args)
    answer[3] = expected.ravel()
    codes = {v: k for k, v in MATH_CODES.items()}
    task = dict(kernel_name="conv2d", kernel_source=source, problem_size=(p.out_w, p.out_h, p.batch * p.out_c),
                arguments=args, tune_params=tune_params, block_size_names=["LWS_X", "LWS_Y", "LWS_Z"],
                restrictions=restrictions, answer=answer, atol=cfg.atol, compiler_options=["-cl-std=CL1.2"])
    return task, lambda r: {k: (codes[r[k]] if k == "MATH" else int(r[k])) for k in KNOBS}


def kt_device(device: int) -> dict:
    """Kernel Tuner's platform and device numbers of cltune's flat device index."""
    import pyopencl as cl

    from cltune.measure import device as dev

    platform, device_obj = dev.all_devices()[device]
    pi = [q.name for q in cl.get_platforms()].index(platform.name)
    di = [d.int_ptr for d in platform.get_devices()].index(device_obj.int_ptr)
    return {"lang": "OpenCL", "platform": pi, "device": di}


def kt_child(out: Path, device: int, iterations: int, cfg_name: str = "kt_compare") -> None:
    """Tune the config's space (conv2d over KNOBS) with Kernel Tuner; write its results as JSON."""
    from kernel_tuner import tune_kernel

    task, knobs = kt_conv_task(cfg_name)
    res, _ = tune_kernel(**task, **kt_device(device), iterations=iterations, strategy="brute_force", cache=None,
                         verbose=False, quiet=True)
    rows = []
    for r in res:
        if "__error__" in r or not isinstance(r.get("time"), (int, float)):
            continue
        times = [float(t) for t in r.get("times") or [r["time"]]]
        rows.append({**knobs(r), "ms": statistics.fmean(times), "samples": times})  # Kernel Tuner's "time": the mean
    out.write_text(json.dumps(rows))


# Running both tools --------------------------------------------------------------------------------
def point(values: dict) -> tuple:
    return tuple(values[k] for k in KNOBS)


def timed_process(what: str, cmd: list, env: dict, cwd: Path) -> float:
    """Run one tool's process; its wall time in s (interpreter start included, as a user waits)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1]}")
    return wall


def run_cltune(label: str, cfg_name: str, device: int, env: dict, out_dir: Path, extra=()) -> dict:
    out = out_dir / f"{label}.csv"
    cmd = [sys.executable, "-m", "cltune", "sweep", cfg_name, "--device", str(device), "--out", str(out), *extra]
    wall = timed_process(f"{label}: cltune sweep", cmd, env, ROOT)
    full = results.load(out)
    df = full[(full["phase"] == "search")]
    ok = results.ok_rows(df)
    times, samples = {}, {}

    def key_of(row):
        values = json.loads(row["params"])
        return point(values) if all(k in values for k in KNOBS) else f"{row['family']}:{row['params']}"

    for row in ok.to_dict("records"):
        key = key_of(row)
        times[key] = row[schema.TIME]  # what cltune ranks by
        samples[key] = [float(v) for v in str(row["run_ms_samples"]).split()]
    run = {"label": label, "tool": "cltune", "wall_s": wall, "points": len(df), "times": times,
           "samples": samples, "launches": int(df["n"].sum()),
           "measuring_s": float(full["wall_ms"].sum()) / 1e3}  # the rows' own walls: no interpreter start
    chosen = schema.fastest(full, rerank_first=True)  # what `best:` names: the re-ranking's winner
    if chosen is not None:
        run["chosen"] = key_of(chosen)
    return run


def run_kt(label: str, device: int, env: dict, out_dir: Path, iterations: int, cfg_name: str) -> dict:
    out = out_dir / f"{label}.json"
    cmd = [sys.executable, __file__, "--kt-child", str(out), "--device", str(device),
           "--iterations", str(iterations), "--config", cfg_name]
    wall = timed_process(f"{label}: Kernel Tuner", cmd, env, out_dir)
    rows = json.loads(out.read_text())
    return {"label": label, "tool": "kernel_tuner", "wall_s": wall, "points": len(rows),
            "times": {point(r): r["ms"] for r in rows}, "samples": {point(r): r["samples"] for r in rows},
            "launches": sum(len(r["samples"]) for r in rows)}


def by(run: dict, stat) -> dict:
    """Per-point times under another statistic of the same launches."""
    return {k: stat(v) for k, v in run["samples"].items()}


def spearman(a, b) -> float:
    """Rank correlation of two {point: time} (dicts or Series) over the points both have."""
    both = pd.DataFrame({"a": pd.Series(a), "b": pd.Series(b)}).dropna()
    return float(both["a"].rank().corr(both["b"].rank()))


def slow_share(samples: dict) -> float:
    slow, launches = schema.slow_launches(samples.values())
    return slow / max(launches, 1)


def best(run: dict) -> tuple:
    """The point a run chose: cltune's re-ranking winner (what its `best:` line names) when it
    re-ranked, else the fastest of its single pass (Kernel Tuner's choice)."""
    key = run.get("chosen") or min(run["times"], key=run["times"].get)
    return key, run["times"].get(key, min(run["times"].values()))


def fresh_env(cache: Path) -> dict:
    """An environment whose PoCL and pyopencl kernel caches live in `cache` (empty: a cold run)."""
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(cache)
    env["POCL_CACHE_DIR"] = str(cache / "pocl")
    env["CLTUNE_HOME"] = str(cache / "cltune")
    return env


def part1(device: int, runs: int, iterations: int, tmp: Path, cfg_name: str, ref=None,
          passes: int = 0, rerank: int = 3) -> list[dict]:
    """Each tool `runs` times, alternating which goes first (cltune, Kernel Tuner, Kernel Tuner,
    cltune, ...), with the reference's passes spread before, between and after them."""
    out = []
    envs = {tool: fresh_env(tmp / f"cache_{tool}") for tool in ("cltune", "kernel_tuner")}
    chunk = max(1, -(-passes // (2 * runs + 1))) if ref is not None else 0
    if ref is not None:
        ref.run(chunk)
    for i in range(runs):
        order = ("cltune", "kernel_tuner") if i % 2 == 0 else ("kernel_tuner", "cltune")
        for tool in order:
            label = f"{tool}_{'cold' if i == 0 else 'warm'}{i}"
            if tool == "cltune":
                out.append(run_cltune(label, cfg_name, device, envs[tool], tmp, ("--rerank", str(rerank))))
            else:
                out.append(run_kt(label, device, envs[tool], tmp, iterations, cfg_name))
            print(f"  {label}: {out[-1]['wall_s']:.1f} s, {out[-1]['points']} points", flush=True)
            if ref is not None:
                ref.run(chunk)
    return out


def against_reference(done: list[dict], reference: dict, what: str) -> None:
    """Each run's ranking against the reference: Spearman, and the reference rank of its best."""
    from reference_ranking import rank_of

    print(f"against the reference ({what}):")
    top = sorted(reference.values())
    print("  the reference's fastest five, as a factor of its fastest: "
          + ", ".join(f"{t / top[0]:.3f}" for t in top[:5]))
    scores: dict = {}
    for r in done:
        key, _ = best(r)
        rho, rank = spearman(r["times"], reference), rank_of(reference, key)
        scores.setdefault(r["tool"], []).append((rho, rank))
        print(f"  {r['label']}: Spearman {rho:.3f}, its best is the reference's #{rank}")
    for tool, vals in scores.items():
        print(f"  {tool}: Spearman median {statistics.median(v for v, _ in vals):.3f} "
              f"({min(v for v, _ in vals):.3f}-{max(v for v, _ in vals):.3f}), best within the reference's "
              f"top 3 in {sum(1 for _, k in vals if k is not None and k <= 3)} of {len(vals)} runs")


def report1(done: list[dict]) -> None:
    rows = []
    for r in done:
        key, ms = best(r)
        rows.append({"run": r["label"], "wall per point ms": 1e3 * r["wall_s"] / max(r["points"], 1),
                     "timed launches": r["launches"], f"launches > {schema.SLOW}x fastest": f"{slow_share(r['samples']):.1%}",
                     "best point": "/".join(map(str, key)), "best ms": ms})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print("Spearman run vs run, each tool's own time (cltune: fastest launch, once confirmed; Kernel Tuner: mean):")
    for tool in ("cltune", "kernel_tuner"):
        mine = [r for r in done if r["tool"] == tool]
        pairs = [(a, b) for i, a in enumerate(mine) for b in mine[i + 1:]]
        print(f"  {tool}: " + ", ".join(
            f"{a['label']}~{b['label']} {spearman(a['times'], b['times']):.3f}" for a, b in pairs))
        for name, stat in (("min", min), ("median", statistics.median)):
            print(f"    by {name} of the same launches: " + ", ".join(
                f"{spearman(by(a, stat), by(b, stat)):.3f}" for a, b in pairs))
    cl_runs = [r for r in done if r["tool"] == "cltune"]
    kt_runs = [r for r in done if r["tool"] == "kernel_tuner"]
    warm = lambda rs: statistics.median(1e3 * r["wall_s"] / r["points"] for r in rs[1:]) if len(rs) > 1 else float("nan")  # noqa: E731
    print(f"warm wall per point: cltune {warm(cl_runs):.1f} ms, Kernel Tuner {warm(kt_runs):.1f} ms, "
          f"ratio {warm(cl_runs) / warm(kt_runs):.2f}")
    groups = {tool: {best(r)[0][:3] for r in rs} for tool, rs in (("cltune", cl_runs), ("kernel_tuner", kt_runs))}
    print(f"best knob group (MACROS/UNROLL/MATH): cltune {sorted(groups['cltune'])}, Kernel Tuner "
          f"{sorted(groups['kernel_tuner'])}: {'same' if groups['cltune'] == groups['kernel_tuner'] else 'DIFFERENT'}")
    tool_vs_tool = [spearman(a["times"], b["times"]) for a in cl_runs for b in kt_runs]
    print(f"Spearman cltune vs Kernel Tuner (every pair of runs): {min(tool_vs_tool):.3f}-{max(tool_vs_tool):.3f}")


def part2(device: int, tmp: Path, cfg_name: str, passes: int = 0) -> None:
    env = fresh_env(tmp / "cache_repeat")
    cfg = config.load(cfg_name)
    run_cltune("repeat_warmup", cfg_name, device, env, tmp)  # fills the kernel caches
    ref = None
    if passes:
        from reference_ranking import Reference

        ref = Reference(cfg_name, device)
    chunk = max(1, -(-passes // 5)) if ref is not None else 0
    if ref is not None:
        ref.run(chunk)
    done = []
    for i in range(2):
        for label, extra in (("adaptive", ()), ("fixed", ("--repeat", str(cfg.timing.repeat)))):
            done.append(run_cltune(f"{label}{i}", cfg_name, device, env, tmp, extra))
            if ref is not None:
                ref.run(chunk)
    rows = []
    for r in done:
        key, ms = best(r)
        rows.append({"run": r["label"], "wall s": r["wall_s"], "measuring s": r["measuring_s"],
                     "timed launches": r["launches"], "best ms": ms, "best key": key})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ad = [r for r in done if r["label"].startswith("adaptive")]
    fx = [r for r in done if r["label"].startswith("fixed")]
    ratio = statistics.median(r["wall_s"] for r in ad) / statistics.median(r["wall_s"] for r in fx)
    inside = statistics.median(r["measuring_s"] for r in ad) / statistics.median(r["measuring_s"] for r in fx)
    # The same best point: each adaptive run's winner, timed by the fixed runs, within 3% of theirs.
    gaps = [f["times"].get(best(a)[0], float("inf")) / best(f)[1] for a in ad for f in fx]
    if ref is not None:
        for r in done:
            r["tool"] = "cltune " + r["label"].rstrip("0123456789")
        against_reference(done, ref.times(lambda st: f"{st.family}:{st.params_json}"),
                          f"{ref.passes} passes of every point, {ref.seconds:.0f} s, spread between the runs")
    print(f"adaptive / fixed: wall {ratio:.2f} (interpreter start included), measuring {inside:.2f} "
          f"(the rows' own walls: builds, verification, warm-up and timed launches); adaptive's winner as timed by the fixed runs: "
          f"{min(gaps):.3f}-{max(gaps):.3f}x their best")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=None, help="flat device index (default: cltune's choice)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each tool in part 1 (the first cold)")
    ap.add_argument("--iterations", type=int, default=5, help="Kernel Tuner's timed launches per point")
    parts = ap.add_mutually_exclusive_group()
    parts.add_argument("--no-adaptive-part", action="store_true", help="skip part 2")
    parts.add_argument("--only-adaptive-part", action="store_true", help="skip part 1")
    ap.add_argument("--keep", type=Path, help="keep every run's results and kernel caches in this folder")
    ap.add_argument("--config", default="kt_compare", help="part 1's space: conv2d over " + ", ".join(KNOBS))
    ap.add_argument("--repeat-config", default="bench_repeat", help="part 2's space")
    ap.add_argument("--rerank", type=int, default=3,
                    help="cltune's re-ranking in part 1 (as users run it: its winner is the point it chose; "
                         "0: one pass, as Kernel Tuner makes)")
    ap.add_argument("--passes", type=int, default=24,
                    help="the reference ranking's passes over every point, spread between the runs (0: none)")
    ap.add_argument("--kt-child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.kt_child:
        kt_child(args.kt_child, args.device, args.iterations, args.config)
        return
    try:
        import kernel_tuner  # noqa: F401
    except ImportError:
        raise SystemExit("Kernel Tuner is not installed here: pip install -e '.[peers]'") from None
    from cltune.measure import device as dev

    _, info = dev.select(args.device)
    print(dev.machine_line(info))
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if "Portable Computing Language" in info.platform:
        from pocl_affinity import host_noise  # beside this script

        print(host_noise(info.index))
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        if any(args.keep.iterdir()):
            raise SystemExit(f"--keep {args.keep}: expected an empty or new folder")
    with contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="cltune-kt-") as tmp:
        tmp = Path(tmp)
        if not args.only_adaptive_part:
            cfg = config.load(args.config)
            print(f"part 1: {cfg.path}, {len(cfg.spaces[0].valid_settings(cfg.problem))} points, "
                  "each tool in a fresh process")
            ref = None
            if args.passes:
                from reference_ranking import Reference

                ref = Reference(args.config, info.index)
            done = part1(info.index, args.runs, args.iterations, tmp, args.config, ref, args.passes, args.rerank)
            report1(done)
            if ref is not None:
                reference = ref.times(lambda st: point(st.values))
                against_reference(done, reference,
                                  f"{ref.passes} passes of every point, {ref.seconds:.0f} s, spread between the runs")
                if args.keep:  # the reference beside the runs' files, to score them again later
                    (tmp / "reference.json").write_text(json.dumps([[list(k), v] for k, v in reference.items()]))
        if not args.no_adaptive_part:
            print(f"part 2: {config.load(args.repeat_config).path}, adaptive repeats (default) vs a fixed --repeat")
            part2(info.index, tmp, args.repeat_config, args.passes)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    from cltune.core.errors import script

    script(main)
