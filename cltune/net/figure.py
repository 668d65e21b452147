"""The network figure: the tuned kernels, the untuned built-in defaults and torch, raced task by task
in one process, and the network table with its totals."""

from __future__ import annotations

import pandas as pd

from ..results.nearest import default_setting


def race_totals(res, opts, cfg) -> dict:
    """Race, task by task in one process, the tuned setting, the untuned default and torch (each
    with the layer's epilogue), interleaved; the totals are sum(weight x median ms)."""
    from ..measure.race import Contender, race, torch_contender
    from ..measure.backend import in_process

    runner = in_process(opts.device, rtol=cfg.rtol, atol=cfg.atol)
    rows = []
    try:
        for st in res.states:
            p, best = st.task.problem, st.best_setting
            default = default_setting(p, runner.info)
            if best is None:
                continue
            contenders = [Contender("tuned", runner.launcher(p, best), best.family, best.name)]
            if default is not None:
                contenders.append(Contender("default", runner.launcher(p, default), default.family, default.name))
            x, w, b = p.make_inputs(0)
            torch = torch_contender(p, x, w, b if p.bias else None)
            if torch is not None:
                contenders.append(torch)
            times = race(contenders, opts.rounds)
            for c in contenders:
                med = sorted(times[c.name])[len(times[c.name]) // 2]
                rows.append({"task": st.task.name, "weight": st.task.weight, "contender": c.name,
                             "family": c.family, "setting": c.setting, "ms_median": med,
                             "weighted_ms": st.task.weight * med})
    finally:
        runner.close()
    df = pd.DataFrame(rows)
    df.to_csv(res.run_dir / "totals.csv", index=False)
    complete = df.groupby("contender")["task"].nunique() == len(res.states)
    return {c: float(df[df["contender"] == c]["weighted_ms"].sum()) for c in complete[complete].index}


def format_table(res) -> str:
    df = res.summary
    cols = ["task", "weight", "family", "setting", "ms", "weighted_ms", "share", "default_ms", "trials"]
    table = df[cols].assign(share=(df["share"] * 100).round(1), setting=df["setting"].str.slice(0, 40))
    lines = [table.to_string(index=False, float_format=lambda v: f"{v:.3f}")]
    lines.append(f"network conv time, sum of weight x ms over {len(df)} tasks ({int(df['weight'].sum())} layers): "
                 f"tuned {df['weighted_ms'].sum():.3f} ms, untuned defaults "
                 f"{(df['weight'] * df['default_ms']).sum():.3f} ms (event timing, during tuning)")
    if res.totals:
        lines.append("side by side in one process (host wall clock, medians of interleaved rounds, "
                     "each layer's ReLU/pool included):")
        tuned = res.totals.get("tuned")
        for name, label in (("tuned", "tuned (cltune)"), ("default", "untuned built-in defaults"),
                            ("torch", "torch")):
            if name in res.totals:
                rel = f"  ({res.totals[name] / tuned:.2f}x the tuned)" if tuned and name != "tuned" else ""
                lines.append(f"  {label:<28} {res.totals[name]:10.3f} ms{rel}")
    return "\n".join(lines)
