"""Wall-clock seconds to a good setting: cltune's default search against Kernel Tuner 1.5's
strategies, on the same kernel, space and OpenCL device, side by side in one run.

    pip install -e '.[test]'                  # Kernel Tuner 1.5.0 beside cltune
    python benchmarks/time_to_target.py [--device D] [--seeds 5] [--budget conv=30,gemm=60]
                                        [--kt-strategies dual_annealing,firefly_algorithm] [--kernels conv,gemm]

Two kernels: `conv`, the conv2d space of benchmarks/time_to_target.toml (975 points), and `gemm`,
the user kernel of examples/sgemm (2,568 points). On each, for each seed, each tool tunes the space
in a fresh process with empty kernel caches, as a first tuning does (the tools take turns going
first): cltune's default strategy (`model`, the config's listed settings left out, no re-ranking)
and each Kernel Tuner strategy (`max_fevals` = the same budget, its own timing), both verifying
against the same float64 reference. A run's clock starts when its process is started; each
evaluation's time is when its result was written (cltune: its row, after its last timing window;
Kernel Tuner: its result's timestamp).

The tools time a setting differently (Kernel Tuner polls the event from a core PoCL runs on), so a
setting is judged by a reference measured afterwards in this process: every setting a run
measured within CANDIDATE x its tool's fastest of the kernel, each launched in `--passes`
interleaved passes, its time its fastest launch. The best known setting is the fastest of them; a
run reaches the target when it first writes a setting within 5% of it. Printed per kernel and
tool: the seconds to the target of each seed and the evaluations it took (`never 0.93`: it never
got there, and its best was 0.93 of the best known; `never far`: none of its settings was within
CANDIDATE x its tool's fastest), their median (a run that never gets there
counts as slower than any that did), and Kernel Tuner's best strategy's median over cltune's. The
GEMM space is the larger: it gets the larger budget by default.
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
from dataclasses import replace
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernel_tuner_compare import fresh_env, kt_conv_task, kt_device  # noqa: E402 (beside this script)

KERNELS = {"conv": ROOT / "benchmarks" / "time_to_target.toml", "gemm": ROOT / "examples" / "sgemm" / "sgemm.toml"}
TARGET = 1.05  # within 5% of the best known setting
CANDIDATE = 1.3  # settings within this factor of their tool's fastest are measured by the reference


def load(kernel: str):
    from cltune.loader import config

    return config.load(str(KERNELS[kernel]))


def names_of(cfg) -> list[str]:
    return [n for n, _ in cfg.spaces[0].params]


# Kernel Tuner's side of a user kernel -------------------------------------------------------------
def kt_kernel_task(cfg, info) -> tuple[dict, callable]:
    """`tune_kernel` arguments for a user kernel's config: its source, arguments, geometry (global
    size per setting as cltune computes it, local size from the knobs it names), the same valid
    points as cltune's space on this device, its reference and tolerances."""
    import numpy as np

    from cltune.core.kernel_problem import evaluate
    from cltune.measure.kernel_data import expected_outputs
    from cltune.workloads.kernel import register_problem

    problem, space, names = cfg.problem, cfg.spaces[0], names_of(cfg)
    if any(a.kind not in ("scalar", "buffer") for a in problem.args) or \
            not all(t in names for t in problem.local_size or ()) or problem.defines:
        raise SystemExit(f"{cfg.path}: only plain buffers and scalars, and a local size of knob names, go to Kernel Tuner here")
    family = register_problem(problem)
    host = problem.host_arrays(cfg.seed)
    expected = expected_outputs(problem, host)
    args = [np.ascontiguousarray(host[a.name]).ravel() if a.kind == "buffer" else
            a.np_dtype.type(evaluate(a.value, problem.env(), a.name)) for a in problem.args]
    answer = [expected[a.name].astype(a.np_dtype).ravel() if a.name in expected else None for a in problem.args]
    valid = {tuple(s.values[n] for n in names) for s in space.valid_settings(problem, info)}

    def restrict(*given):  # a dict of the knobs, or their values in tune_params' order
        point = given[0] if len(given) == 1 and isinstance(given[0], dict) else dict(zip(names, given))
        return tuple(point[n] for n in names) in valid

    def verify(want, got, atol=None):
        return all(np.allclose(g, w, rtol=cfg.rtol, atol=cfg.atol) for w, g in zip(want, got) if w is not None)

    task = dict(kernel_name=problem.name, kernel_source=problem.source, arguments=args, answer=answer, verify=verify,
                problem_size=lambda p: family.geometry(problem, dict(p), info)[0],
                tune_params={n: list(v) for n, v in space.params}, block_size_names=list(problem.local_size),
                restrictions=restrict,
                compiler_options=list(problem.options) or ["-cl-std=CL1.2"])
    return task, lambda r: {n: r[n] for n in names}


def kt_child(spec: dict) -> None:
    import random

    import numpy as np
    from kernel_tuner import tune_kernel

    from cltune.measure import device as dev

    if spec["kernel"] == "conv":
        task, knobs = kt_conv_task(str(KERNELS["conv"]))
    else:
        task, knobs = kt_kernel_task(load(spec["kernel"]), dev.select(spec["device"])[1])
    random.seed(spec["seed"])
    np.random.seed(spec["seed"])
    res, _ = tune_kernel(**task, **kt_device(spec["device"]), strategy=spec["strategy"], cache=None,
                         strategy_options={"max_fevals": spec["budget"]}, verbose=False, quiet=True)
    rows = []
    for r in res:
        ok = "__error__" not in r and isinstance(r.get("time"), (int, float))
        rows.append({"t": datetime.fromisoformat(r["timestamp"]).timestamp(), "values": knobs(r),
                     "ms": min(float(t) for t in r.get("times") or [r["time"]]) if ok else None,
                     "cost_ms": {k: r.get(k) for k in ("compile_time", "verification_time", "benchmark_time",
                                                        "framework_time", "strategy_time")}})
    Path(spec["out"]).write_text(json.dumps(rows))


# cltune's side ------------------------------------------------------------------------------------
def cltune_child(spec: dict) -> None:
    from cltune.core.records import timed
    from cltune.drive import tune
    from cltune.results import schema

    from cltune.search import strategies

    strategies.MODEL_GUESS = not spec["tool"].endswith("/noguess")  # `--without-guess`: the same points, built alone
    cfg = load(spec["kernel"])
    cfg = replace(cfg, settings=(), baseline=None, strategy=None)  # the space alone, by the default strategy
    names, rows = names_of(cfg), []

    def on_row(row: dict) -> None:
        if row["phase"] == "search":
            values = json.loads(row["params"])
            rows.append({"t": time.time(), "values": {n: values[n] for n in names},
                         "ms": row[schema.TIME] if timed(row["status"]) else None,
                         "cost_ms": {k: row.get(k) for k in ("build_ms", "first_launch_ms", "wall_ms")}})

    opts = tune.Options(device=str(spec["device"]), out=str(Path(spec["out"]).with_suffix(".csv")),
                        budget=spec["budget"], seed=spec["seed"], rerank=0)
    tune.run(cfg, opts, on_row)
    Path(spec["out"]).write_text(json.dumps(rows))


# The race -----------------------------------------------------------------------------------------
def run_one(tool: str, kernel: str, seed: int, args, tmp: Path) -> dict:
    """One tool's run in a fresh process with empty kernel caches; its evaluations, timed from its start."""
    label = f"{kernel}_{tool.replace(':', '_').replace('/', '_')}_s{seed}"
    spec = {"tool": tool, "kernel": kernel, "seed": seed, "device": args.device, "budget": args.budget[kernel],
            "strategy": tool.partition(":")[2], "out": str(tmp / f"{label}.json")}
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)], capture_output=True,
                          text=True, env=fresh_env(tmp / f"cache_{label}"), cwd=tmp)
    wall = time.time() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{label} failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1]}")
    evals = sorted(json.loads(Path(spec["out"]).read_text()), key=lambda e: e["t"])
    for e in evals:
        e["t"] -= t0
        e["key"] = tuple(e["values"][n] for n in sorted(e["values"]))
    return {"tool": tool, "seed": seed, "wall": wall, "evals": evals}


def candidates(runs: list[dict]) -> dict:
    """{key: values} of the settings within CANDIDATE x their tool's fastest of the kernel."""
    out = {}
    for tool in {r["tool"] for r in runs}:
        mine = [e for r in runs if r["tool"] == tool for e in r["evals"] if e["ms"] is not None]
        fastest = min((e["ms"] for e in mine), default=None)
        out.update((e["key"], e["values"]) for e in mine if e["ms"] <= CANDIDATE * fastest)
    return out


def reference(kernel: str, device: int, cands: dict, passes: int) -> dict:
    """{key: fastest launch} of the candidates, over `passes` interleaved passes in this process."""
    from reference_ranking import Reference

    ref = Reference(str(KERNELS[kernel]), device, only=lambda s: tuple(s.values[n] for n in sorted(s.values)) in cands)
    ref.run(passes)
    times = ref.times(lambda s: tuple(s.values[n] for n in sorted(s.values)))
    ref.close()
    return times


def reach(run: dict, ref: dict, target: float) -> tuple[float, int]:
    """(seconds, evaluations) until the run first wrote a setting within the target (inf: never)."""
    for k, e in enumerate(run["evals"], 1):
        if ref.get(e["key"], float("inf")) <= target:
            return e["t"], k
    return float("inf"), 0


def closest(run: dict, ref: dict, best: float) -> str:
    """Best known / the run's best by the reference ("far": none of its settings was a candidate)."""
    mine = [ref[e["key"]] for e in run["evals"] if e["key"] in ref]
    return f"{best / min(mine):.2f}" if mine else "far"


def spent(e: dict, *names) -> float:
    """Seconds of an evaluation's cost under the first of `names` it has (cltune's row columns,
    Kernel Tuner's result fields; a PoCL kernel compiles at its first launch, in cltune's
    first_launch_ms and in Kernel Tuner's verification_time)."""
    cost = e.get("cost_ms") or {}
    v = next((cost[n] for n in names if cost.get(n) is not None), 0.0)
    return v / 1e3 if v == v else 0.0


def median(xs) -> float:
    """The lower median: of an even count the lower middle, so a tie with a run that never got
    there is not an infinite median."""
    return statistics.median_low(xs)


def report(kernel: str, runs: list[dict], ref: dict) -> None:
    best = min(ref.values())
    target = TARGET * best
    print(f"{kernel}: best known {best:.3f} ms (the fastest of {len(ref)} settings the reference measured), "
          f"target {target:.3f} ms")
    medians, rank = {}, {}
    for tool in dict.fromkeys(r["tool"] for r in runs):
        mine = [r for r in runs if r["tool"] == tool]
        got = [reach(r, ref, target) for r in mine]
        medians[tool] = median([s for s, _ in got])
        reached = [s for s, k in got if k]  # ties of the median: the one that got there more often, sooner
        rank[tool] = (medians[tool], -len(reached), statistics.fmean(reached) if reached else 0.0)
        per = "  ".join(f"s{r['seed']}: {s:5.1f} s/{k:2d}" if k else f"s{r['seed']}: never {closest(r, ref, best)}"
                        for r, (s, k) in zip(mine, got))
        each = statistics.median(r["wall"] / max(len(r["evals"]), 1) for r in mine)
        builds = statistics.median(sum(spent(e, "build_ms", "compile_time") for e in r["evals"]) for r in mine)
        firsts = statistics.median(sum(spent(e, "first_launch_ms", "verification_time") for e in r["evals"]) for r in mine)
        print(f"  {tool:<22} median {medians[tool]:6.1f} s, reached {sum(1 for _, k in got if k)}/{len(got)}  "
              f"[{per}]  per setting {each:.2f} s, builds {builds:.1f} s, first launches {firsts:.1f} s, "
              f"settings {statistics.median(len(r['evals']) for r in mine):.0f}")
    kt = min((t for t in medians if t.startswith("kt:")), key=rank.get)
    mine, theirs = medians["cltune:model"], medians[kt]
    ahead = mine < theirs
    ratio = f"{theirs / mine:.2f}" if mine < float("inf") else "n/a"
    print(f"  Kernel Tuner's best here: {kt}; its median / cltune's: {ratio}"
          + ("  (cltune ahead)" if ahead else "  (cltune NOT ahead)"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=None, help="flat device index (default: cltune's choice)")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 of each tool on each kernel")
    ap.add_argument("--budget", default="conv=30,gemm=60",
                    help="settings each run measures: N, or per kernel (kernel=N,...)")
    ap.add_argument("--kt-strategies", default="dual_annealing,firefly_algorithm",
                    help="Kernel Tuner's strategies (its best on the recorded conv spaces at 25-100 points)")
    ap.add_argument("--kernels", default="conv,gemm", help=f"of {', '.join(KERNELS)}")
    ap.add_argument("--without-guess", action="store_true",
                    help="also cltune's model without its guess of the next point built ahead (the same points)")
    ap.add_argument("--passes", type=int, default=5, help="the reference's passes over the candidates")
    ap.add_argument("--keep", type=Path, help="keep every run's files (and kernel caches) in this folder")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        spec = json.loads(args.child)
        (cltune_child if spec["tool"].startswith("cltune") else kt_child)(spec)
        return
    from cltune.measure import device as dev

    start = time.time()
    given = dict(kv.split("=") for kv in args.budget.split(",")) if "=" in args.budget else dict.fromkeys(KERNELS, args.budget)
    args.budget = {k: int(given[k]) for k in args.kernels.split(",")}
    _, info = dev.select(args.device)
    args.device = info.index
    print(dev.machine_line(info))
    print(f"/proc/loadavg before: {Path('/proc/loadavg').read_text().strip()}")
    tools = ["cltune:model"] + ["cltune:model/noguess"] * args.without_guess + \
        [f"kt:{s}" for s in args.kt_strategies.split(",") if s]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="cltune-ttt-") as tmp:
        for kernel in args.kernels.split(","):
            runs = []
            for seed in range(args.seeds):
                for tool in tools[seed % len(tools):] + tools[:seed % len(tools)]:  # each goes first in turn
                    runs.append(run_one(tool, kernel, seed, args, Path(tmp)))
                    print(f"  {kernel} {tool} seed {seed}: {runs[-1]['wall']:.1f} s, "
                          f"{len(runs[-1]['evals'])} settings", flush=True)
            report(kernel, runs, reference(kernel, args.device, candidates(runs), args.passes))
            print(f"/proc/loadavg: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    print(f"budgets {args.budget} settings per run, seeds 0-{args.seeds - 1}, {time.time() - start:.0f} s in all, "
          f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    from cltune.core.errors import script

    script(main)
