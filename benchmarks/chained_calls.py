"""A network's layers, each with its untuned built-in default, timed three ways, interleaved in one
process: (a) one call per layer, each waited for, again and again, as `cltune net`'s task race times
them (the layer's data stays in the caches; each call pays a host round trip); (b) all in the
network's order in one call, enqueued back to back with one wait at the end, each layer on its
task's input (the waits gone, the caches cold); (c) the same, each layer on its own weights and
reading the output of the one before it, as `cltune net`'s whole-network race (net/end_to_end.py)
and a deployed network run them.

    python benchmarks/chained_calls.py [--network mobilenet_v2] [--rounds 5] [--calls 20] [--device D]

Prints (a) as the sum over the layers of each layer's median call, (b) and (c) as the median of one
call for the whole network, and the gaps PoCL leaves between (c)'s layers (its events). With
POCL_MAX_PTHREAD_COUNT=1 PoCL runs one worker thread: the gaps shrink, the kernels run longer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cltune.measure.device import machine_line  # noqa: E402
from cltune.measure.runner import Runner  # noqa: E402
from cltune.net.end_to_end import layer_data, opencl_chain  # noqa: E402
from cltune.net.tables import load  # noqa: E402
from cltune.net.tasks import make_tasks  # noqa: E402
from cltune.results.nearest import default_setting  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="mobilenet_v2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20, help="timed calls of each kind per round")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    net = load(args.network)
    runner = Runner(args.device)
    print(machine_line(runner.info))
    tasks = make_tasks(net)
    calls = {t.name: runner.launcher(t.problem, default_setting(t.problem, runner.info)) for t in tasks}
    task_of = {layer: t.name for t in tasks for layer in t.layers}
    order = [calls[task_of[layer.name]] for layer in net.layers]
    problems = [layer.problem for layer in net.layers]
    flow, _ = opencl_chain(runner, problems, [default_setting(p, runner.info) for p in problems],
                           layer_data(runner, problems))

    def chained():
        for call in order[:-1]:
            call(wait=False)
        order[-1]()

    alone = {name: [] for name in calls}
    whole = {chained: [], flow: []}
    for _ in range(args.rounds):
        for _ in range(3):  # untimed: caches and PoCL's threads as a round leaves them
            chained()
        for name, call in calls.items():
            call()
            for _ in range(args.calls):
                t0 = time.perf_counter()
                call()
                alone[name].append(time.perf_counter() - t0)
        for network, out in whole.items():
            network()
            for _ in range(args.calls):
                t0 = time.perf_counter()
                network()
                out.append(time.perf_counter() - t0)
    weight = {t.name: t.weight for t in tasks}
    summed = sum(weight[n] * statistics.median(v) for n, v in alone.items()) * 1e3
    own, flowed = (statistics.median(whole[k]) * 1e3 for k in (chained, flow))
    print(f"{args.network}: {len(order)} layers, {len(tasks)} tasks, each on its untuned default; medians of "
          f"{args.rounds} x {args.calls} calls")
    print(f"  (a) one call a layer, each waited for (sum of weight x median): {summed:8.3f} ms")
    print(f"  (b) the network in one call, each layer on its task's data:      {own:8.3f} ms ({own / summed:.2f}x a)")
    print(f"  (c) the same, each on its own weights and the output before it:  {flowed:8.3f} ms "
          f"({flowed / summed:.2f}x a)")
    gaps = []  # inside (c), by the events: from one layer's last kernel's end to the next one's start
    for _ in range(args.calls):
        events = flow()
        gaps += [(e[0].profile.start - before[-1].profile.end) / 1e3 for before, e in zip(events, events[1:])]
    print(f"  inside (c), between a layer's end and the next one's start: median {statistics.median(gaps):.1f} us, "
          f"{sum(gaps) / args.calls / 1e3:.3f} ms a call")
    runner.close()


if __name__ == "__main__":
    main()
