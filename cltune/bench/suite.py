"""`cltune bench`: tune every kernel family on every layer of a suite, then race each family's best
settings (its two finalists in a heat, then the faster) against numpy (im2col + BLAS) and torch's
CPU conv2d, side by side in one process, in interleaved rounds, timed the same way (host wall clock
around one complete call)."""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..results import rows as results, schema
from ..search import tune
from ..core.errors import UserError
from ..core.paths import slug, stamped_path
from ..core.problem import Problem, epilogue_reference


@dataclass
class Contender:
    name: str  # "cltune:<family>", "numpy", "torch"
    call: Callable[[], object]
    family: str = ""
    setting: str = ""
    params: str = ""


def numpy_conv2d(p: Problem, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """im2col + one BLAS matmul per group, float32 throughout: the classic CPU baseline."""
    xp = np.pad(x, ((0, 0), (0, 0), (p.pad_h, p.pad_h), (p.pad_w, p.pad_w)))
    win = np.lib.stride_tricks.sliding_window_view(
        xp, ((p.filter_h - 1) * p.dilation_h + 1, (p.filter_w - 1) * p.dilation_w + 1), axis=(2, 3))
    win = win[:, :, ::p.stride_h, ::p.stride_w, ::p.dilation_h, ::p.dilation_w][:, :, :p.out_h, :p.out_w]
    g, cg, kg = p.groups, p.in_c // p.groups, p.out_c // p.groups
    cols = win.reshape(p.batch, g, cg, p.out_h, p.out_w, p.filter_h, p.filter_w)
    cols = cols.transpose(1, 2, 5, 6, 0, 3, 4).reshape(g, cg * p.filter_h * p.filter_w, -1)
    out = np.matmul(w.reshape(g, kg, -1), cols)  # [G, Kg, N*OH*OW]
    out = out.reshape(p.out_c, p.batch, p.out_h, p.out_w).transpose(1, 0, 2, 3)
    if b is not None:
        out = out + b[None, :, None, None]
    return np.ascontiguousarray(epilogue_reference(p, out))


def torch_contender(p: Problem, x, w, b) -> Contender | None:
    try:
        import torch
    except ImportError:
        return None
    xt, wt = torch.from_numpy(x), torch.from_numpy(w)
    bt = torch.from_numpy(b) if b is not None else None
    kw = dict(stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w),
              dilation=(p.dilation_h, p.dilation_w), groups=p.groups)

    F = torch.nn.functional
    act = {"relu": F.relu, "relu6": F.relu6}.get(p.activation)
    # Into an output allocated once, as cltune's kernels write theirs: a fresh output per call made
    # torch's time depend on the heap's history (0.36 or 0.88 ms for the same 1x1 conv on
    # [1,32,112,112], one or the other for a whole process); into its own output, 0.41 ms in every one.
    conv_out = getattr(torch.ops.aten.convolution, "out", None)
    if conv_out is None:  # a torch without it: a fresh output per call
        def conv():
            return F.conv2d(xt, wt, bt, **kw)
    else:
        yt = torch.empty(p.batch, p.out_c, p.out_h, p.out_w)
        args = (list(kw["stride"]), list(kw["padding"]), list(kw["dilation"]), False, [0, 0], p.groups)

        def conv():
            return conv_out(xt, wt, bt, *args, out=yt)

    def call():
        with torch.no_grad():
            y = conv()
            y = act(y, inplace=True) if act else y
            return F.max_pool2d(y, 2) if p.pool == 2 else y
    return Contender("torch", call)


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


def keep_freed_memory() -> bool:
    """Keep freed memory in the process (glibc's malloc: no trimming, no fresh mmap for blocks up to
    32 MiB), so what numpy and torch allocate on every call (numpy's temporaries and output, torch's
    internal buffers) reuses pages instead of faulting fresh ones in; cltune's kernels write into
    buffers allocated once. On a 2-core VM torch's 1x1 conv on [1,32,112,112], with a fresh output
    per call, took 2.7 ms with 1,900 page faults a call and 0.36 ms with none. Returns whether it
    applied (glibc only; elsewhere the race runs as it is)."""
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(mallopt(m_trim_threshold, 1 << 30))


def race(contenders: list[Contender], rounds: int, block: int = 5, warm_s: float = 0.15) -> dict[str, list[float]]:
    """Rounds of A B C ...: so drift on a shared machine hits every contender alike. Before its timed
    calls each contender runs untimed for `warm_s`: thread pools keep spinning after a call (OpenBLAS
    for about 0.1 s) and would slow whoever runs next, while a contender whose own threads went to
    sleep would pay their wake-up; this time-based warm-up lets the one fade and the other wake."""
    return race_groups([contenders], rounds, block, warm_s)[0]


def race_groups(groups: list[list[Contender]], rounds: int, block: int = 5,
                warm_s: float = 0.15) -> list[dict[str, list[float]]]:
    """`race` over several groups (a suite's layers) at once: each round visits every group, so each
    group's calls spread over the whole race rather than a few seconds of it. A slow phase of a
    shared machine (memory-bound layers ran torch 1.3-2x slow for several seconds at a time) then
    costs a group some of its rounds, not all of them."""
    times = [{c.name: [] for c in group} for group in groups]
    for _ in range(rounds):
        for group, out in zip(groups, times):
            for c in group:
                end = time.perf_counter() + warm_s
                c.call()
                while time.perf_counter() < end:
                    c.call()
                for _ in range(block):
                    t0 = time.perf_counter()
                    c.call()
                    out[c.name].append((time.perf_counter() - t0) * 1e3)
    return times


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
    families = sorted({r["family"] for r in rows if r["status"] == schema.OK})
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
    t = torch_contender(problem, x, w, b)
    if t is not None:
        out.append(t)
    return out


def heat_winners(finalists: dict, times: dict) -> dict[str, int]:
    """{family: the index of its finalist with the fastest call in the heat}."""
    return {family: min(range(len(rows)), key=lambda i: min(times[finalist_name(family, i)]))
            for family, rows in finalists.items() if rows}


def summarize(layer: str, kind: str, problem: Problem, contenders, times) -> list[dict]:
    """One row per contender. Contenders are compared by their fastest call (`ms`), as cltune ranks
    settings by their fastest launch (schema.TIME): a shared machine only ever slows a call down."""
    from ..workloads import get_family

    fastest = {name: min(v) for name, v in times.items()}
    cl = [c for c in contenders if c.family and not c.name.endswith(":unfused")]
    best = min(cl, key=lambda c: fastest[c.name]).name if cl else None
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
                     "vs_torch": fastest["torch"] / m if "torch" in fastest else math.nan,
                     "vs_numpy": fastest["numpy"] / m, "best_cltune": c.name == best})
    return rows


def geomean(values) -> float:
    values = [v for v in values if v and v == v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def run(cfg, opts: tune.Options, out_dir: Path, rounds: int = 10, only: set | None = None,
        echo=print, info=None) -> pd.DataFrame:
    """Tune, then race; `info` (the device's DeviceInfo) binds the suite's device.* values."""
    from ..measure.backend import in_process
    from ..measure.device import select
    from ..core.device_values import bind_config

    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = bind_config(cfg, info if info is not None else select(opts.device)[1])
    layers = [(n, k, p) for n, k, p in cfg.layers if not only or n in only]
    best = {}
    for name, kind, problem in layers:
        echo(f"tuning {name} ({kind}): {problem.describe()}")
        best[name] = tune_layer(cfg, name, problem, opts, out_dir, echo)
    runner = in_process(opts.device, rtol=cfg.rtol, atol=cfg.atol)
    keep_freed_memory()
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
