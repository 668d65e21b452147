"""`cltune bench`: tune every kernel family on every layer of a suite, then race each family's best
settings (its two finalists in a heat, then the faster) against numpy (im2col + BLAS) and torch's
CPU conv2d, side by side in one process, in interleaved rounds, timed the same way (host wall clock
around one complete call)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..core.errors import UserError
from ..core.paths import slug, stamped_path
from ..core.problem import Problem
from ..core.records import TIMED
from ..measure.race import Contender, best_torch, describe_conditions, numpy_conv2d, race_groups, torch_contenders
from ..results import rows as results
from ..results import schema
from ..drive import tune

# The settings of each family re-measured, interleaved, before the race. A slow phase of a shared
# machine can cover a whole family's search (winograd on resnet18_conv2: its best setting timed 0.92
# ms in one run's search, 0.55 in the other's, third of its family); four cost a few builds and
# launches a layer, and put it back in the running.
RERANK_PER_FAMILY = 4
# The best FINALISTS of each family (by that re-ranking) race the first HEAT_ROUNDS rounds, and the
# faster of them races on for its family. Interleaved single launches rank settings less well than
# the race's warm, back-to-back calls: on mobilenet_pw_1024 two implicit_gemm settings 1.5% apart in
# the re-ranking were 0.554 and 0.505 ms in the race, and which one went on decided the layer's x torch.
FINALISTS = 2
HEAT_ROUNDS = 3


def chosen_layers(cfg, names: str | None) -> set | None:
    """The layers a comma-separated --layers names (None: all); a suite without layers, or a name
    it does not have, is a UserError."""
    if not cfg.layers:
        raise UserError(f"{cfg.path}: a bench suite needs [[layer]] tables")
    known = {n for n, _, _ in cfg.layers}
    only = set(names.split(",")) if names else None
    if only and only - known:
        raise UserError(f"--layers: unknown layer(s) {', '.join(sorted(only - known))}; "
                        f"known: {', '.join(n for n, _, _ in cfg.layers)}")
    return only


def default_path(cfg, out: str | Path | None = None) -> Path:
    """The race's CSV: `out`, else results/<config>_<time>.csv (the tuning files go beside it)."""
    return Path(out) if out else stamped_path(cfg.name, suffix=".csv")


def write(df: pd.DataFrame, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)


def best_per_family(csv_path: Path, k: int = 1) -> dict[str, list[dict]]:
    """The k fastest verified rows of each family in a tuning results file, fastest first, from its
    interleaved re-ranking when the family has ok rows there."""
    rows = results.load(csv_path).to_dict("records")
    families = sorted({r["family"] for r in rows if r["status"] in TIMED})
    return {f: schema.ranked([r for r in rows if r["family"] == f], rerank_first=True)[:k] for f in families}


def tune_layer(cfg, name: str, problem: Problem, opts: tune.Options, out_dir: Path, echo) -> dict:
    spaces = tuple(s for s in cfg.spaces if next(s.iter_valid(problem), None) is not None)
    if not spaces and not cfg.settings:
        return {}
    # The config's [[setting]]s (e.g. each family's built-in settings) are measured as well, so the
    # search starts from known good points.
    # Each family's best RERANK_PER_FAMILY are measured again in interleaved rounds: a setting
    # timed during a slow phase of a shared machine (half its cores gone) loses its family's place.
    layer_cfg = replace(cfg, name=f"{cfg.name}-{name}", problem=problem, baseline=None,
                        spaces=spaces, layers=(), rerank_per_family=True)
    path = out_dir / f"{slug(layer_cfg.name)}.csv"  # inside out_dir whatever the names hold
    resume = bool(opts.resume) and path.exists()  # a layer not tuned yet is tuned into its file
    tune.run(layer_cfg, replace(opts, out=None if resume else path, resume=path if resume else None,
                                     rerank=RERANK_PER_FAMILY))
    finalists = best_per_family(path, FINALISTS)
    for family, rows in finalists.items():
        echo(f"  {name}: best {family} " + ", ".join(f"{r[schema.TIME]:.3f} ms  {r['params']}" for r in rows))
    return finalists


def finalist_name(family: str, i: int) -> str:
    return f"cltune:{family}" if i == 0 else f"cltune:{family}#{i + 1}"


def layer_contenders(runner, problem: Problem, finalists: dict, unfused: bool = True) -> list[Contender]:
    """Each family's finalists (the first named cltune:<family>, the others cltune:<family>#2 ...),
    with `unfused` the first's epilogue as separate kernels, then numpy and torch."""
    from ..core.space import Setting

    x, w, b = problem.make_inputs(0)
    b = b if problem.bias else None
    out = []
    for family, rows in sorted(finalists.items()):
        for i, row in enumerate(rows):
            setting = Setting.make(row["setting"], family, json.loads(row["params"]))
            out.append(Contender(finalist_name(family, i), runner.launcher(problem, setting), family,
                                 row["setting"], row["params"]))
        if unfused and rows and set(problem.epilogue) - {"bias"}:  # its epilogue as separate kernels
            params = {**json.loads(rows[0]["params"]), "FUSE": 0}
            out.append(Contender(f"cltune:{family}:unfused",
                                 runner.launcher(problem, Setting.make("unfused", family, params)),
                                 family, "unfused", json.dumps(params, sort_keys=True)))
    out.append(Contender("numpy", lambda: numpy_conv2d(problem, x, w, b)))
    return out + torch_contenders(problem, x, w, b)  # on one thread per CPU and on one


def heat_winners(finalists: dict, times: dict) -> dict[str, int]:
    """{family: the index of its finalist with the fastest call in the heat}."""
    return {family: min(range(len(rows)), key=lambda i: min(times[finalist_name(family, i)]))
            for family, rows in finalists.items() if rows}


def summarize(layer: str, kind: str, problem: Problem, contenders, times) -> list[dict]:
    """One row per contender. Contenders are compared by their fastest call (`ms`), as cltune ranks
    settings by their fastest launch (schema.TIME): a shared machine only ever slows a call down;
    `vs_torch` against torch's faster thread count."""
    from ..workloads import get_family

    fastest = {name: min(v) for name, v in times.items()}
    cl = [c for c in contenders if c.family and not c.name.endswith(":unfused")]
    best = min(cl, key=lambda c: fastest[c.name]).name if cl else None
    torch = best_torch(times, min)  # its faster thread count, by the same statistic
    rows = []
    for c in contenders:
        m = fastest[c.name]
        moved = weights = None
        if c.family:
            fam = get_family(c.family)
            fig = fam.figures(problem, fam.resolve(json.loads(c.params)))
            moved, weights = fig["bytes_model"], fig["weight_bytes"]
        rows.append({"layer": layer, "kind": kind, "problem": problem.key, "contender": c.name,
                     "family": c.family, "setting": c.setting, "params": c.params, "bytes_model": moved,
                     "weight_bytes": weights, "ms": m, "ms_median": statistics.median(times[c.name]),
                     "gflops": problem.flops / (m * 1e6),
                     "vs_torch": fastest[torch] / m if torch else math.nan,
                     "vs_numpy": fastest["numpy"] / m, "best_cltune": c.name == best})
    return rows


def geomean(values) -> float:
    values = [v for v in values if v and v == v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def run(cfg, opts: tune.Options, out_dir: Path, rounds: int = 10, only: set | None = None,
        echo=print, info=None) -> pd.DataFrame:
    """Tune, then race; `info` (the device's DeviceInfo) binds the suite's device.* values."""
    from ..loader.bind import bind_config
    from ..measure.backend import in_process
    from ..measure.device import select
    from ..measure.race import torch_at_its_best  # the one set-up of torch for every race

    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = bind_config(cfg, info if info is not None else select(opts.device)[1])
    layers = [(n, k, p) for n, k, p in cfg.layers if not only or n in only]
    best = {}
    for name, kind, problem in layers:
        echo(f"tuning {name} ({kind}): {problem.describe()}")
        best[name] = tune_layer(cfg, name, problem, opts, out_dir, echo)
    runner = in_process(opts.device, rtol=cfg.rtol, atol=cfg.atol)
    echo(f"race: {describe_conditions(torch_at_its_best())}")
    heat_rounds = min(HEAT_ROUNDS, rounds - 1)
    heats = [{}] * len(layers)
    won = [{f: 0 for f in best[n]} for n, _, _ in layers]
    if heat_rounds > 0:  # every finalist, numpy and torch; then each family's winner races on
        heats = race_groups([layer_contenders(runner, p, best[n], unfused=False) for n, _, p in layers],
                            heat_rounds)
        won = [heat_winners(best[n], heat) for (n, _, _), heat in zip(layers, heats)]
    groups = [layer_contenders(runner, p, {f: [best[n][f][i]] for f, i in w.items()})
              for (n, _, p), w in zip(layers, won)]
    rows = []
    for (name, kind, problem), contenders, heat, w, times in zip(
            layers, groups, heats, won, race_groups(groups, rounds - heat_rounds)):
        for c in contenders:  # the heat's calls count for those that raced in it, under their names now
            if not c.name.endswith(":unfused"):  # raced only after the heat
                times[c.name] = heat.get(finalist_name(c.family, w[c.family]) if c.family else c.name,
                                         []) + times[c.name]
        rows += summarize(name, kind, problem, contenders, times)
    return pd.DataFrame(rows)


def format_summary(df: pd.DataFrame) -> str:
    """Per layer: each contender's fastest call (ms) and GFLOP/s, the best cltune kernel's ratios;
    geomeans per kind."""
    lines = []
    wide = df.pivot_table(index=["layer"], columns="contender", values="ms", sort=False)
    best = df[df["best_cltune"]].set_index("layer")
    table = wide.copy()
    table["best cltune"] = best["contender"]
    table["GFLOP/s"] = best["gflops"]
    table["x torch"] = best["vs_torch"]
    table["x numpy"] = best["vs_numpy"]
    lines.append(table.to_string(float_format=lambda v: f"{v:.3f}"))
    unfused = df[df["contender"].str.endswith(":unfused")]
    if len(unfused):
        lines.append("fused epilogue against the same kernel with its epilogue as separate kernels:")
        for _, u in unfused.iterrows():
            f = df[(df["layer"] == u["layer"]) & (df["contender"] == u["contender"][: -len(":unfused")])].iloc[0]
            lines.append(f"  {u['layer']:<24} {f['contender']:<22} fused {f['ms']:8.3f} ms "
                         f"({f['bytes_model'] / 1e6:6.2f} MB)  unfused {u['ms']:8.3f} ms "
                         f"({u['bytes_model'] / 1e6:6.2f} MB)  {u['ms'] / f['ms']:.2f}x")
    diag = df[df["family"].fillna("").str.startswith("diagonalwise_")]
    if len(diag):
        lines.append("diagonalwise refactorization: its block-diagonal weights against the depthwise ones:")
        for _, d in diag.iterrows():
            dw = df[(df["layer"] == d["layer"]) & (df["family"] == "depthwise")]
            vs = (f"; the depthwise kernel: {dw['ms'].iloc[0]:.3f} ms, weights "
                  f"{dw['weight_bytes'].iloc[0] / 1e6:.4f} MB") if len(dw) else ""
            lines.append(f"  {d['layer']:<16} {d['contender']:<30} {d['ms']:8.3f} ms, weights "
                         f"{d['weight_bytes'] / 1e6:.3f} MB{vs}")
    for kind, group in best.groupby("kind"):
        lines.append(f"geometric mean over {len(group)} {kind} layers: best cltune kernel "
                     f"{geomean(group['vs_torch']):.2f}x torch, {geomean(group['vs_numpy']):.2f}x numpy "
                     "(> 1: cltune faster)")
    return "\n".join(lines)
