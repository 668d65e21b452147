"""`cltune net`: tune every task of a network under one budget into one run folder, then race the
tuned kernels, the untuned built-in defaults and torch on the same layers.

The run folder holds one results file per task (`<task>.csv`, the same rows as `cltune sweep`
writes), `network.json` (the tasks and the layers they stand for), `network.csv` (the summary),
`totals.csv` (the race, task by task), `network_choice.csv` (each task's finalists inside the
network), `network_race.csv` (the whole network's race) and `network_layers.csv` (its time layer by
layer). `--resume` replays the scheduler over the rows already there: a setting in a task's file is
not measured again and counts against the budget as it did the first time.
"""

from __future__ import annotations

import json
import math
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ..loader import config as cfgmod
from ..loader.bind import bind_config
from ..core.errors import UserError
from ..core.paths import stamped_path
from ..results import rows as results
from ..results import store
from ..results.guard import check_output_dir
from ..results.nearest import accepts, builtins, default_setting
from ..drive import tune
from ..drive.session import session
from ..drive.sweep import Budget
from .schedule import (
    DEFAULT_SEARCH,
    POLICIES,
    SEARCHES,
    Scheduler,
    TaskState,
    ident,
    neighbours,
    network_ms,
    own_order,
)
from .choice import record_kept, row_ms, setting_row, settle
from .tables import Network
from .tasks import make_tasks, space_settings


@dataclass
class NetOptions(tune.Options):
    """A sweep's options (checked alike), where `out` and `resume` name a run folder, `budget` and
    `time_limit_s` count over all tasks (built-ins included), and net's own fields."""

    policy: str = "gradient"
    search: str = DEFAULT_SEARCH  # what a task tries next of its own points (schedule.SEARCHES)
    transfer: bool = True
    spaces: str = "net_spaces"  # the config whose [[space]]s and [run] timing the tasks use
    best_db: str | Path | None = None  # None: the default best-config database
    rounds: int = 3  # interleaved rounds of the final race; 0: no race


@dataclass
class NetResult:
    run_dir: Path
    tasks: list
    states: list
    summary: pd.DataFrame
    totals: dict = field(default_factory=dict)  # contender -> sum(weight x median ms)
    fastest: dict = field(default_factory=dict)  # contender -> sum(weight x fastest call ms): a busy host's floor
    conditions: dict = field(default_factory=dict)  # how torch ran in the race (race.torch_at_its_best)
    network: dict = field(default_factory=dict)  # contender -> the whole network's median ms (race_network)
    network_fastest: dict = field(default_factory=dict)  # contender -> its fastest whole-network call
    network_torch: str = ""  # how torch ran its fastest network ("torch:per layer", "torch:1 thread"...)
    network_changed: list = field(default_factory=list)  # tasks whose setting the network chose, not the task race
    measured: int = 0  # settings measured in this process (resumed ones not counted)
    kept: dict = field(default_factory=dict)  # task name -> the Setting it keeps (choice.py)
    info: object = None  # the device's DeviceInfo
    keys: dict = field(default_factory=dict)  # task name -> ident(setting) -> its rows' key
    db_held: frozenset = frozenset()  # the best-config database's entries when the run began


def default_dir(net: Network, info) -> Path:
    """results/net_<network>_<device>_<time>/."""
    return stamped_path(f"net_{net.name}", info.name)


def check(opts: NetOptions) -> None:
    """What can be refused before a device is opened: a sweep's checks, a budget, a known policy."""
    if opts.out and opts.resume:
        raise UserError("--out and --resume both name the run folder; give one")
    tune.check_options(replace(opts, out=None))  # `out` is a folder here
    if opts.out:  # a run there is continued; other measured data there is never written over or mixed with
        if (Path(opts.out) / "network.json").exists():
            raise UserError(f"{opts.out}: already holds a network run; continue it with --resume {opts.out}")
        check_output_dir(opts.out)
    if opts.budget is None and opts.time_limit_s is None:
        raise UserError("cltune net needs a budget: --budget N (settings in total) or --time-limit S")
    if opts.policy not in POLICIES:
        raise UserError(f"unknown scheduling policy {opts.policy!r}; known: {', '.join(POLICIES)}")
    if opts.search not in SEARCHES:
        raise UserError(f"unknown task search {opts.search!r}; known: {', '.join(SEARCHES)}")


def run(net: Network, opts: NetOptions, echo=print, backend=None) -> NetResult:
    check(opts)
    cfg = cfgmod.load(opts.spaces).with_overrides(opts)
    own = backend is None
    backend = backend or tune.open_backend(cfg, opts)
    try:
        cfg = bind_config(cfg, backend.info)  # device.* values in its spaces
        res = _tune(net, cfg, opts, backend, echo)
    finally:
        if own:
            backend.close()
    res.kept = {st.task.name: st.best_setting for st in res.states if st.best_setting is not None}
    if opts.rounds:  # each task's finalists race; the lowest median is kept (choice.py)
        from .figure import race_totals

        task_of = {layer: t.name for t in res.tasks for layer in t.layers}
        res.kept.update(race_totals(res, opts, cfg, [task_of.get(layer.name) for layer in net.layers]))
    res.summary = summarize(res.states, res.info, res.kept)
    res.summary.to_csv(res.run_dir / "network.csv", index=False)
    keys = {res.keys[name][ident(s)] for name, s in res.kept.items()}
    _fill_db(res.run_dir, res.tasks, opts, echo, res.db_held, keys)
    return res


def _run_dir(net: Network, opts: NetOptions, info, tasks) -> Path:
    manifest = {"network": net.name, "source": net.source,
                "tasks": [{"name": t.name, "problem": t.problem.key, "weight": t.weight, "layers": list(t.layers)}
                          for t in tasks]}
    if opts.resume:
        run_dir = Path(opts.resume)
        path = run_dir / "network.json"
        if not path.exists():
            raise UserError(f"{run_dir}: not a cltune net run folder (no network.json)")
        old = json.loads(path.read_text())
        if [t["problem"] for t in old.get("tasks", [])] != [t["problem"] for t in manifest["tasks"]]:
            raise UserError(f"{path}: holds the tasks of network {old.get('network')!r}, not those of "
                            f"{net.name!r}; resume it with the same network")
        return run_dir
    run_dir = Path(opts.out) if opts.out else default_dir(net, info)
    if (run_dir / "network.json").exists():
        raise UserError(f"{run_dir}: already holds a network run; continue it with --resume {run_dir}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "network.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return run_dir


def task_config(net: Network, task) -> str:
    """The config name a task's results file and rows carry."""
    return f"net-{net.name}-{task.name}"


def task_file(run_dir: Path, task) -> Path:
    """A task's results file in a run folder."""
    return Path(run_dir) / f"{task.name}.csv"


def open_sessions(stack: ExitStack, net: Network, tasks, run_dir: Path, cfg, backend, resume: bool) -> dict:
    """task name -> the session (drive/session.py) of its results file, open for the life of `stack`,
    with the spaces config's timing rules; with `resume`, the rows there are not measured again."""
    sessions = {}
    for task in tasks:
        task_cfg = replace(cfg, name=task_config(net, task), problem=task.problem, settings=(), baseline=None)
        path = task_file(run_dir, task)
        held = resume and path.exists() and path.stat().st_size > 0
        sessions[task.name] = stack.enter_context(session(task_cfg, backend, path, resume=held))
    return sessions


def _tune(net: Network, cfg, opts: NetOptions, backend, echo) -> NetResult:
    info = backend.info
    tasks = make_tasks(net)
    run_dir = _run_dir(net, opts, info, tasks)
    results.save_device_info(run_dir / "network.csv", info)
    db_held = store.best_keys(_db(opts))  # checked when the run's entries are written
    seed, keys = cfg.seed, {t.name: {} for t in tasks}  # task -> ident -> its rows' key
    with ExitStack() as stack:
        sessions = open_sessions(stack, net, tasks, run_dir, cfg, backend, bool(opts.resume))
        states = [task_state(task, i, cfg.spaces, info, seed, opts.search) for i, task in enumerate(tasks)]
        n_builtin = sum(len(s.builtins) for s in states)
        echo(f"{net.name}: {len(net.layers)} conv layers, {len(tasks)} tasks; {n_builtin} built-in settings "
             f"first, then {opts.policy}{' with transfer' if opts.transfer else ''} (each task's own points by "
             f"{opts.search}) within "
             f"{Budget(opts.budget, opts.time_limit_s).describe()} in total; run folder {run_dir}")
        strategy = {"builtin": "builtin", "transfer": "transfer", "search": opts.policy}

        def evaluate(st, setting, upcoming, phase):
            steps = sessions[st.task.name]
            steps.evaluate(setting, upcoming, strategy[phase])
            settle(steps)  # its windows now: a first window's figure is its verification launch
            keys[st.task.name][ident(setting)] = steps.rec.prepare(setting)["key"]
            row = setting_row(steps, setting)
            return row_ms(row) if row else None

        def on_trial(st, setting, phase):
            cost = st.tried[ident(setting)]
            shown = f"{cost:.3f} ms" if cost is not None else "failed"
            total = network_ms(states)
            echo(f"[{sched.spent}] {st.task.name} {phase} {setting.name}: {shown} "
                 + (f"(network {total:.3f} ms)" if total == total else "(network: tasks without a figure yet)"))

        sched = Scheduler(states, evaluate, Budget(opts.budget, opts.time_limit_s), opts.policy,
                          opts.transfer, on_trial=on_trial, seed=seed)
        sched.run()
    measured = sum(s.measured for s in sessions.values())  # the points that waited for windows too
    return NetResult(run_dir, tasks, states, pd.DataFrame(), measured=measured, info=info, keys=keys,
                     db_held=db_held)


def task_state(task, index: int, spaces, device, seed: int, search: str = DEFAULT_SEARCH) -> TaskState:
    """A task's scheduler state: its built-ins, its own seeded order of the spaces' points, its
    local steps (one knob away from its best), and transfer allowed for any setting whose family
    accepts it on the device."""
    p, cache = task.problem, {}

    def near(setting):
        if setting.key not in cache:
            cache[setting.key] = neighbours(setting, spaces, p, device, seed)
        return cache[setting.key]

    return TaskState(task, builtins(p, device), own_order(space_settings(p, spaces, device), seed, index),
                     neighbours=near, allows=lambda setting: accepts(setting, p, device), search=search, seed=seed)


def summarize(states: list[TaskState], info, kept: dict | None = None) -> pd.DataFrame:
    """Per task: weight, the setting it keeps (`kept`: task -> Setting, else its lowest figure) and
    its ms (the median of its launches in tuning), weight x ms, share of the network's conv time; and
    the untuned default's ms (a built-in, measured in the same run, by the same statistic)."""
    rows = []
    for st in states:
        best = (kept or {}).get(st.task.name) or st.best_setting
        ms = st.tried.get(ident(best)) if best is not None else None
        default = default_setting(st.task.problem, info)
        d_ms = st.tried.get(ident(default)) if default is not None else None
        rows.append({"task": st.task.name, "kind": st.task.kind, "weight": st.task.weight,
                     "layers": " ".join(st.task.layers), "problem": st.task.problem.key,
                     "family": best.family if best else "", "setting": best.name if best else "",
                     "params": best.params_json if best else "", "ms": ms if ms is not None else math.nan,
                     "trials": len(st.tried), "default_setting": default.name if default else "",
                     "default_ms": d_ms if d_ms is not None else math.nan})
    df = pd.DataFrame(rows)
    df["weighted_ms"] = df["weight"] * df["ms"]
    df["share"] = df["weighted_ms"] / df["weighted_ms"].sum()
    return df


def _db(opts) -> Path:
    from ..results import best

    return Path(opts.best_db) if opts.best_db else best.default_path()


def _fill_db(run_dir: Path, tasks, opts: NetOptions, echo, before: frozenset = frozenset(),
             kept: set | None = None) -> None:
    """The run's kept settings (`kept`: their rows' keys; else each file's fastest row) into the best-config database, created again if it is gone, and read
    back; when they cannot be written (or are not there after), one line naming the database and the
    command that records them (the run's files keep every row). `before`: the entries' keys when the run
    began; a database deleted or replaced since (those entries gone) is said in one line."""
    import shlex

    from ..core.errors import first_line
    from ..results import best

    files = [task_file(run_dir, t) for t in tasks]
    files = [f for f in files if f.exists() and f.stat().st_size and len(results.ok_rows(results.load(f)))]
    if not files:
        return
    path = _db(opts)
    new = "" if path.exists() else " (a new file)"
    gone = len(before - store.best_keys(path))
    hint = (f"record them with: cltune best {shlex.quote(str(run_dir))}/t[0-9]*.csv"
            + (f" --out {shlex.quote(str(path))}" if opts.best_db else ""))
    try:
        path, entries = record_kept(files, kept, opts.best_db) if kept else best.update(files, opts.best_db)
        held = {(e["device"], e["problem"], e["setting"]) for e in store.all_best(path)}
    except UserError as exc:
        why = first_line(str(exc)).removeprefix(f"{path}: ")
        echo(f"warning: the run's best entries were not recorded in {path} ({why}); {hint}")
        return
    lost = [e for e in entries if (e["device"], e["problem"], e["setting"]) not in held]
    if lost:
        echo(f"warning: {len(lost)} of the run's {len(entries)} best entries are not in {path} after writing "
             f"them (it changed meanwhile); {hint}")
        return
    if gone:  # they went with the old file: said, never silently
        echo(f"warning: the best-config database {path} was deleted or replaced while the run went on: {gone} "
             f"of the {len(before)} entries it held are gone; the run's {len(entries)} tasks are recorded in it{new}")
        return
    echo(f"best-config database {path}{new}: {len(entries)} tasks recorded")
