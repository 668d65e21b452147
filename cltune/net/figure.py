"""The network figure: the tuned kernels, the untuned built-in defaults and torch, raced task by task
in one process, and the network table with its totals."""

from __future__ import annotations

import statistics

import pandas as pd

from ..results.nearest import default_setting

# The contenders of the network's totals; a task's other finalists ("finalist") and torch on its
# slower thread count ("torch:slower") raced too, and are rows of totals.csv.
NETWORK = ("tuned", "default", "torch")


def race_totals(res, opts, cfg, order: list[str] | None = None) -> dict:
    """Race, all tasks in each round (measure/race.race_groups, as `cltune bench` races its layers),
    each task's finalists (choice.finalists), its untuned default and torch, each with the layer's
    epilogue, torch set up as in every race (race.torch_at_its_best). The finalist (the default
    included) with the lowest median is the task's `tuned`; given `order` (the task of each layer, in
    the network's order), the one that runs fastest inside the network (end_to_end.choose_in_network),
    then the whole network races (end_to_end.race_network). Sets res.totals, sum(weight x median ms),
    res.fastest, the same over each contender's fastest call, and res.conditions (how torch ran);
    returns {task: winner}."""
    from ..measure.backend import in_process
    from ..measure.race import Contender, best_torch, race_groups, torch_at_its_best, torch_contenders, torch_threads
    from .end_to_end import choose_in_network, layer_data, race_network
    from .choice import finalists
    from .schedule import ident

    runner = in_process(opts.device, rtol=cfg.rtol, atol=cfg.atol)
    conditions = torch_at_its_best()
    rows, winners, chosen = [], {}, {}
    try:
        raced, groups = [], []
        for st in res.states:
            p, final, default = st.task.problem, finalists(st), default_setting(st.task.problem, runner.info)
            final = [s for s in final if default is None or ident(s) != ident(default)]
            if not final and default is None:
                continue
            contenders = [Contender(f"tuned#{i}", runner.launcher(p, s), s.family, s.name) for i, s in enumerate(final)]
            if default is not None:  # a finalist too: a task never keeps a setting slower than its default
                final.append(default)
                contenders.append(Contender("default", runner.launcher(p, default), default.family, default.name))
            x, w, b = p.make_inputs(0)
            contenders += torch_contenders(p, x, w, b if p.bias else None)
            raced.append((st, final, default))
            groups.append(contenders)
        results = []
        for (st, final, default), contenders, times in zip(raced, groups, race_groups(groups, opts.rounds)):
            med = {c.name: statistics.median(times[c.name]) for c in contenders}
            names = [c.name for c in contenders[:len(final)]]  # tuned#0 ... and "default" last
            won, torch = min(range(len(final)), key=lambda i: (med[names[i]], i)), best_torch(times)
            chosen[st.task.name] = (st.task.problem, {"task": st.task.name, "finalists": final, "tuned": final[won],
                                                      "raced": final[won],
                                                      "default": default,
                                                      "threads": torch and torch_threads(torch)})
            results.append((st, final, contenders, times, med, won, torch))
        picked = {}
        if order and set(order) <= chosen.keys():  # the network's verdict on each task's finalists
            layers = [chosen[name] for name in order]
            datas = layer_data(runner, [p for p, _ in layers])
            picked = choose_in_network(res, runner, layers, datas, opts.rounds)
            for name, i in picked.items():
                chosen[name][1]["tuned"] = chosen[name][1]["finalists"][i]
            res.network_changed = [st.task.name for st, *_, won, _ in results if picked.get(st.task.name, won) != won]
            race_network(res, runner, layers, datas, opts.rounds)
        for st, final, contenders, times, med, won, torch in results:
            won = picked.get(st.task.name, won)
            winners[st.task.name] = final[won]

            def row(name, c):
                return {"task": st.task.name, "weight": st.task.weight, "contender": name, "family": c.family,
                        "setting": c.setting, "ms_median": med[c.name], "ms_min": min(times[c.name]),
                        "weighted_ms": st.task.weight * med[c.name]}
            for c in contenders:
                if c.name.startswith("tuned#"):
                    rows.append(row("tuned" if c is contenders[won] else "finalist", c))
                else:
                    rows.append(row("torch" if c.name == torch else "torch:slower" if c.name.startswith("torch")
                                    else c.name, c))
            if contenders[won].name == "default":  # the default won its task's race: it is the tuned setting too
                rows.append(row("tuned", contenders[won]))
    finally:
        runner.close()
    df = pd.DataFrame(rows)
    df.to_csv(res.run_dir / "totals.csv", index=False)
    complete = df[df["contender"].isin(NETWORK)].groupby("contender")["task"].nunique() == len(res.states)
    whole = {c: df[df["contender"] == c] for c in complete[complete].index}
    res.totals = {c: float(d["weighted_ms"].sum()) for c, d in whole.items()}
    res.fastest = {c: float((d["weight"] * d["ms_min"]).sum()) for c, d in whole.items()}
    res.conditions = conditions
    return winners


def torch_way(name: str) -> str:
    """How torch ran its network (end_to_end: "torch:per layer", "torch:2 threads"), in words."""
    way = name.split(":", 1)[1] if ":" in name else ""
    if not way:
        return "not installed"
    return "each layer on its faster thread count" if way == "per layer" else f"on {way} throughout"


def format_table(res) -> str:
    df = res.summary
    cols = ["task", "weight", "family", "setting", "ms", "weighted_ms", "share", "default_ms", "trials"]
    table = df[cols].assign(share=(df["share"] * 100).round(1), setting=df["setting"].str.slice(0, 40))
    lines = [table.to_string(index=False, float_format=lambda v: f"{v:.3f}")]
    event = {"tuned": df["weighted_ms"].sum(), "default": (df["weight"] * df["default_ms"]).sum()}
    lines.append(f"network conv time, sum of weight x ms over {len(df)} tasks ({int(df['weight'].sum())} layers): "
                 f"tuned {event['tuned']:.3f} ms, untuned defaults {event['default']:.3f} ms (event timing "
                 "during tuning, medians of each setting's launches, the kernel alone)")
    if res.totals:
        from ..measure.race import describe_conditions

        lines.append("task by task, each layer called alone, side by side in one process (host wall clock, "
                     "sum of weight x the medians of interleaved rounds, each layer's ReLU/pool included; "
                     f"{describe_conditions(res.conditions)}):")
        tuned, fast = res.totals.get("tuned"), res.fastest.get("tuned")
        for name, label in (("tuned", "tuned (cltune)"), ("default", "untuned built-in defaults"),
                            ("torch", "torch")):
            if name in res.totals:
                rel = f"  ({res.totals[name] / tuned:.2f}x the tuned)" if tuned and name != "tuned" else ""
                low = (f"; fastest calls {res.fastest[name]:.3f} ms" + (f" ({res.fastest[name] / fast:.2f}x)"
                       if fast and name != "tuned" else "")) if name in res.fastest else ""
                lines.append(f"  {label:<28} {res.totals[name]:10.3f} ms{rel}{low}")
        lines.append(agreement(event, res.totals))
    if res.network:
        tuned = res.network.get("tuned")
        if res.network_changed:
            lines.append(f"inside the network {len(res.network_changed)} of {len(df)} tasks ran faster on another "
                         f"finalist than their race's winner and keep it ({', '.join(res.network_changed)}; "
                         "network_choice.csv)")
        lines.append("the whole network end to end, each contender's layers in the network's order, each on the "
                     "output before it (cltune's enqueued back to back, one wait at the end; torch's called in turn, "
                     f"{torch_way(res.network_torch)}), "
                     "host wall clock, medians:")
        for name, label in (("tuned", "tuned (cltune)"), ("raced", "the task race's winners"),
                            ("default", "untuned built-in defaults"), ("torch", "torch")):
            if name in res.network:
                rel = f"  ({res.network[name] / tuned:.2f}x the tuned)" if tuned and name != "tuned" else ""
                lines.append(f"  {label:<28} {res.network[name]:10.3f} ms{rel}; fastest call "
                             f"{res.network_fastest[name]:.3f} ms")
        lines.append(agreement(event, res.network, "the network over tuning's event timing: {} (one wait, "
                               "no host round trip a layer; more is the machine's drift or the layers' caches)"))
    return "\n".join(lines)


TASK_RACE = ("race over tuning's event timing: {} (the race's host clock adds each call's enqueue and wait; more "
             "than that is the machine's drift between tuning and race)")


def agreement(event: dict, race: dict, text: str = TASK_RACE) -> str:
    """How the race's totals compare with the tuning's event-timed ones. They differ by what the host
    clock adds to each call (the enqueue, the wait, a separate pool kernel where a family does not
    fuse it) and by the machine's drift between tuning and race; the line says by how much."""
    parts = [f"{name} {race[name] / event[name]:.2f}x" for name in ("tuned", "default")
             if name in race and event.get(name) and event[name] == event[name]]
    return text.format(", ".join(parts)) if parts else ""
