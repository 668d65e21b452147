"""The whole network end to end, as a user runs it: per contender one call that runs every layer in
the network's order, each layer on weights of its own and reading the output of the one before it.
cltune's layers (each task's finalist that runs fastest inside the network: choose_in_network, or
its untuned default) are enqueued back to back on one in-order queue and the host waits once, for
the last: a deployed network has no reason to wait between layers, and the task race's call, waited
for on its own, pays a host round trip per layer (on a 2-core VM with PoCL 3.1 an empty kernel
alone took 32-38 us from enqueue to the host's return, one of 52 enqueued together 2-3 us). torch's
layers are called in turn, each on its faster thread count in the task race ("torch:per layer") and
on each thread count throughout ("torch:2 threads"...): the fastest median is the network's torch."""

from __future__ import annotations

import math
import statistics
import time

import pandas as pd

from ..measure.race import warm_up


def wiring(problems: list) -> list:
    """Per layer, the earlier layer whose output it reads: the latest one whose output shape is its
    input shape (the previous layer of a chain; a ResNet block's shortcut conv reads what the block
    read), or None: nothing before it fits, it reads an input of its own."""
    out, latest = [], {}
    for i, p in enumerate(problems):
        out.append(latest.get(p.input_shape))
        latest[p.output_shape] = i
    return out


def layer_data(runner, problems: list) -> list:
    """Each layer's own input, weights and bias (seeded by its position), on the device: the layers of
    one task are distinct layers of the network, and reading one weight tensor for all of them would
    leave the second in the caches the first filled. Their scratch buffers are one pool (Buffers.shared),
    as a deployed network's are."""
    out, pool = [], {}
    for i, p in enumerate(problems):
        runner.load_problem(p, p.make_inputs(i), reference=False)
        runner.data.bufs.shared = pool
        out.append(runner.data)
    return out


def last_reads(problems: list) -> list:
    """Per layer, the last layer that reads its output (wiring), or its own index where none does;
    the network's output is read after the last layer (len(problems))."""
    out = list(range(len(problems)))
    for j, i in enumerate(wiring(problems)):
        if i is not None:
            out[i] = max(out[i], j)
    if out:
        out[-1] = len(problems)
    return out


def released(problems: list) -> list:
    """Per layer, the layers whose outputs nothing reads once it has run (last_reads): their memory
    can take a later output."""
    last = last_reads(problems)
    return [[i for i, k in enumerate(last) if k == j] for j in range(len(problems))]


def buffer_plan(problems: list) -> tuple[list, list]:
    """(the buffer each layer writes its output to, each buffer's bytes): a layer takes the smallest
    free buffer that holds its output (else grows the largest free one, else a new one), and its
    input's buffer is free again once its last reader has been enqueued, after that reader's own
    output has one (an in-order queue runs them in that order). A chain needs two buffers, a ResNet
    three: its activations stay in the caches, where one buffer a layer (MobileNet v2: 52 buffers,
    27 MB) is written cold on every call."""
    done, sizes, owner, free = released(problems), [], [], []
    for k, p in enumerate(problems):
        need = 4 * math.prod(p.output_shape)
        fits = [b for b in free if sizes[b] >= need]
        if fits or free:
            b = min(fits, key=sizes.__getitem__) if fits else max(free, key=sizes.__getitem__)
            free.remove(b)
            sizes[b] = max(sizes[b], need)
        else:
            b = len(sizes)
            sizes.append(need)
        owner.append(b)
        free += [owner[i] for i in done[k]]
    return owner, sizes


def host_inputs(problem, data) -> tuple:
    """A layer's (x, w, b) on the host, as torch takes them (b None without a bias)."""
    return data.bufs.x_host, data.bufs.w_host, data.bufs.b_host if problem.bias else None


def outputs(runner, problems: list) -> list:
    """Each layer's output buffer on the device, shared by layers whose outputs are never needed at
    once (buffer_plan)."""
    import pyopencl as cl

    owner, sizes = buffer_plan(problems)
    bufs = [cl.Buffer(runner.ctx, cl.mem_flags.READ_WRITE, n) for n in sizes]
    return [bufs[b] for b in owner]


def opencl_chain(runner, problems: list, settings: list, datas: list, outs: list | None = None):
    """cltune's network call, each layer on its setting and its data (layer_data), and its layers'
    output buffers (`outs`, or new ones: outputs). The call returns each layer's events."""
    source = wiring(problems)
    outs = outs or outputs(runner, problems)
    pool = datas[0].bufs.shared if datas and datas[0].bufs.shared is not None else {}
    for _ in range(2):  # again if the shared scratch grew: every layer then gets the pool's final buffers
        before = dict(pool)
        calls = [runner.launcher(p, s, x=None if j is None else outs[j], out=out, data=d)
                 for p, s, j, out, d in zip(problems, settings, source, outs, datas)]
        if all(before.get(k) is b for k, b in pool.items()):
            break

    def call() -> list:
        return [c(wait=False) for c in calls[:-1]] + [calls[-1]()]
    return call, outs


def layer_times(events: list) -> list:
    """Each layer's time in the network (ms) from one call's events: from the end of the layer before
    it (the first: from its own start) to its own end, so a layer pays its kernels and the gap its
    launch leaves, on the caches the layers before it left."""
    out, before = [], events[0][0].profile.start
    for evs in events:
        out.append((evs[-1].profile.end - before) / 1e6)
        before = evs[-1].profile.end
    return out


def choose_in_network(res, runner, layers: list, datas: list, rounds: int) -> dict:
    """Each task's finalist that runs fastest inside the network: the task race calls one layer
    again and again on hot caches, and on ResNet-18 (2-core VM, AVX2 code) its winners ran the
    network 1.20x slower than their sum there (Winograd's transformed weights, 1.8-4x the layer's,
    read cold). Column c of the finalists (each task's c-th, or its last) runs as one network call,
    each layer timed by its events (layer_times); a task keeps the finalist with the lowest median
    of its layers' summed times. `layers`' picks give "task" and "finalists" (Settings, the task
    race's order). Returns {task: the chosen finalist's index} and writes network_choice.csv."""
    tasks = {picks["task"]: picks["finalists"] for _, picks in layers}
    width = max(len(f) for f in tasks.values())
    if width < 2:
        return {}
    problems = [p for p, _ in layers]
    outs = outputs(runner, problems)
    calls = []
    for c in range(width):
        picked = [picks["finalists"][min(c, len(picks["finalists"]) - 1)] for _, picks in layers]
        calls.append(opencl_chain(runner, problems, picked, datas, outs)[0])
    seen: dict = {}
    warm_up(calls[0])  # untimed first: the task race's torch left its threads spinning
    for _ in range(max(1, rounds) * 2):
        for c, call in enumerate(calls):
            call()
            for _ in range(5):
                summed: dict = {}
                for (_, picks), ms in zip(layers, layer_times(call())):
                    key = (picks["task"], min(c, len(picks["finalists"]) - 1))
                    summed[key] = summed.get(key, 0.0) + ms
                for key, ms in summed.items():
                    seen.setdefault(key, []).append(ms)
    med = {key: statistics.median(v) for key, v in seen.items()}
    choice = {t: min(range(len(f)), key=lambda i: (med[(t, i)], i)) for t, f in tasks.items()}
    pd.DataFrame([{"task": t, "finalist": i, "family": s.family, "setting": s.name, "network_ms": med[(t, i)],
                   "calls": len(seen[(t, i)]), "chosen": choice[t] == i}
                  for t, f in tasks.items() for i, s in enumerate(f)]
                 ).to_csv(res.run_dir / "network_choice.csv", index=False)
    return choice


def torch_chain(problems: list, datas: list, threads: list):
    """torch's network call on `threads` intra-op threads per layer (given a list, it appends the host
    clock after each layer), and a function that gives its last layer's output. None: torch is not
    installed."""
    from ..measure.race import torch_layer

    inputs = [host_inputs(p, d) for p, d in zip(problems, datas)]
    runs = [torch_layer(p, w, b) for p, (_, w, b) in zip(problems, inputs)]
    if any(r is None for r in runs):
        return None, None
    import torch

    xs = [torch.from_numpy(x) for x, _, _ in inputs]
    source, done = wiring(problems), released(problems)
    uniform = len(set(threads)) == 1
    last = []

    def call(stamps: list | None = None):
        if uniform:
            torch.set_num_threads(threads[0])
        outs = []
        for j, (run, x, i, n) in enumerate(zip(runs, xs, source, threads)):
            if not uniform:
                torch.set_num_threads(n)
            outs.append(run(x if i is None else outs[i]))
            for d in done[j]:  # dropped once read for the last time: its memory is reused, as cltune's
                outs[d] = None
            if stamps is not None:
                stamps.append(time.perf_counter())
        last[:] = outs[-1:]
        return outs[-1]
    return call, lambda: last[0]


def race_network(res, runner, layers: list, datas: list, rounds: int) -> None:
    """Race the network's calls. `layers`: per layer in the network's order, (problem, picks) with
    picks "tuned" and "default" (Settings, or None), "raced" (the task race's winner: where the
    network chose another somewhere, these race too, as "raced"), "threads" (torch's faster thread
    count in the task race; None: no torch); `datas` each layer's own (layer_data). Sets res.network and
    res.network_fastest (ms a call) and res.network_torch (how torch ran its fastest), and writes
    network_race.csv."""
    from ..measure.race import Contender, race, thread_choices

    contenders = []
    problems, outs = [p for p, _ in layers], None
    changed = any(picks.get("raced") not in (None, picks["tuned"]) for _, picks in layers)
    for name in ("tuned", "raced", "default") if changed else ("tuned", "default"):
        if all(picks.get(name) is not None for _, picks in layers):
            call, outs = opencl_chain(runner, problems, [picks[name] for _, picks in layers], datas, outs)
            contenders.append(Contender(name, call))
    if all(picks.get("threads") for _, picks in layers):
        ways = {"torch:per layer": [picks["threads"] for _, picks in layers]}
        ways.update({f"torch:{n} thread{'s' if n > 1 else ''}": [n] * len(layers) for n in thread_choices()})
        for way, threads in ways.items():
            call, _ = torch_chain(problems, datas, threads)
            if call:
                contenders.append(Contender(way, call))
    times = race(contenders, max(1, rounds) * 4)
    med = {c.name: statistics.median(times[c.name]) for c in contenders}
    pd.DataFrame([{"contender": c.name, "ms_median": med[c.name], "ms_min": min(times[c.name]),
                   "calls": len(times[c.name]), "layers": len(layers)} for c in contenders]
                 ).to_csv(res.run_dir / "network_race.csv", index=False)
    res.network = {n: med[n] for n in ("tuned", "raced", "default") if n in med}
    res.network_fastest = {n: min(times[n]) for n in res.network}
    torch = [n for n in med if n.startswith("torch:")]
    if torch:  # torch at its best: the fastest of its ways to run the network
        best = min(torch, key=med.get)
        res.network["torch"], res.network_fastest["torch"], res.network_torch = med[best], min(times[best]), best
    calls = {c.name: c.call for c in contenders}
    if "tuned" in calls:
        by_layer(res, layers, calls["tuned"], calls.get(res.network_torch))


def by_layer(res, layers: list, tuned, torch, calls: int = 20) -> None:
    """Where each network's time goes, layer by layer: medians of `calls` calls, cltune's layers by
    their events (layer_times), torch's by the host clock after each layer. Each side's calls in a
    block after race.warm_up, as the race runs them: called in turn, cltune's network
    started while torch's OpenMP threads still spun and ran t16's layers 1.6x as long (0.126 against
    0.077 ms, MobileNet v2, AVX2 code). Writes network_layers.csv."""
    def timed(call) -> list:
        warm_up(call)
        return [call() for _ in range(calls)]

    mine = [layer_times(events) for events in timed(tuned)]
    theirs = []
    if torch:
        def stamped() -> list:
            stamps = [time.perf_counter()]
            torch(stamps)
            return [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
        theirs = timed(stamped)
    rows = []
    for i, (p, picks) in enumerate(layers):
        row = {"layer": i, "task": picks.get("task", ""), "setting": picks["tuned"].name,
               "tuned_ms": statistics.median(t[i] for t in mine)}
        if theirs:
            row["torch_ms"] = statistics.median(t[i] for t in theirs)
        rows.append(row)
    pd.DataFrame(rows).to_csv(res.run_dir / "network_layers.csv", index=False)
