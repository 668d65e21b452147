"""Record a network's tuning landscape for replay: every task's built-in settings, the settings a
local search from them reaches, what transfer from similar tasks offers, then up to `points` points
of each task's own seeded order, each measured once into the task's results file of a run folder
(the layout `cltune net` writes, so either can be replayed). Tasks take turns, so a recording cut
short by its time limit is still even, and a second call continues it: what a task's file holds is
read back, not measured again."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

from ..loader.bind import bind_config
from ..results import rows as results
from ..results.nearest import builtins
from .choice import row_ms, setting_row, settle
from .replay import builtin_only, load_table
from .run import NetOptions, _run_dir, open_sessions, task_state
from .schedule import ident, transfer_candidates
from .tables import Network
from .tasks import make_tasks


def record(net: Network, cfg, backend, table: str | Path, points: int | None, seed: int,
           time_limit_s: float | None = None, echo=print, clock=time.monotonic) -> int:
    """Measure what is missing of the recording; returns how many settings were measured now."""
    info = backend.info
    cfg = bind_config(cfg, info)
    tasks = make_tasks(net)
    table = Path(table)
    resume = (table / "network.json").exists()
    run_dir = _run_dir(net, NetOptions(out=table, resume=table if resume else None), info, tasks)
    results.save_device_info(run_dir / "network.csv", info)
    states = [task_state(t, i, cfg.spaces, info, seed, "local") for i, t in enumerate(tasks)]  # no model: _plan picks
    start = clock()
    with ExitStack() as stack:
        sessions = open_sessions(stack, net, tasks, run_dir, cfg, backend, resume)

        def measured() -> int:
            return sum(s.measured for s in sessions.values())

        for st, setting, phase in _plan(states, points):
            if time_limit_s is not None and clock() - start >= time_limit_s:
                echo(f"time limit reached after {measured()} settings; run again to continue")
                break
            before = measured()
            steps = sessions[st.task.name]
            steps.evaluate(setting, (), phase)
            settle(steps)  # the climb steps from settled figures, as a live run's search does
            row = setting_row(steps, setting)
            st.add(setting, row_ms(row) if row else None)
            if measured() > before and measured() % 50 == 0:
                echo(f"[{measured()} measured] {phase} {st.task.name} {setting.name}")
    return measured()  # the points that waited for windows too


def _plan(states, points: int | None):
    """(state, setting, phase), decided as the costs come in: every task's built-ins; then a climb,
    one task after another, each taking the next untried setting one knob away from its best so far
    (what a task's search tries first, so the replay's local steps find what the live ones would);
    then the best settings of each task's nearest similar tasks (what transfer offers it); then the
    k-th point of every task's own order, k = 0, 1, ... up to `points`."""
    for st in states:
        for s in st.builtins:
            if ident(s) not in st.tried:
                yield st, s, "builtin"
    climbing = list(states)
    while climbing:
        for st in list(climbing):
            near = st.local_steps()
            if near:
                yield st, near[0], "climb"
            else:
                climbing.remove(st)
    for st in states:  # what transfer would offer each task at the end of the climb
        for s in transfer_candidates(st, states):
            yield st, s, "transfer"
    longest = max((len(st.order) for st in states), default=0)
    for k in range(longest if points is None else min(points, longest)):
        for st in states:
            if k < len(st.order) and ident(st.order[k]) not in st.tried:
                yield st, st.order[k], "record"


def again(net: Network, cfg, backend, table: str | Path) -> tuple[float, float]:
    """Measure every task's built-ins once more into the recording (a replay takes the median of a
    setting's rows): a drift of the machine between the start of a recording and now shows as a
    change of the built-ins' network time. Returns that time as recorded before and as measured now."""
    info = backend.info
    cfg = bind_config(cfg, info)
    table = Path(table)
    _, before = load_table(table)
    tasks = make_tasks(net)
    _run_dir(net, NetOptions(out=table, resume=table), info, tasks)  # the same network, or one line
    now = 0.0
    with ExitStack() as stack:
        sessions = open_sessions(stack, net, tasks, table, cfg, backend, resume=True)
        for task in tasks:
            costs = [sessions[task.name].measure_again(s, "builtin").cost
                     for s in builtins(task.problem, info)]  # task_state's built-ins, without its space
            now += task.weight * min((c for c in costs if c is not None), default=float("nan"))
    return builtin_only(before), now
