"""Replay the task scheduler over a recorded landscape, as Kernel Tuner's simulation mode replays its
cache files: each task's settings were measured once (a `cltune net` run folder, or one written by
`cltune.net.record`), and a policy's trial is a look-up in that table. So two policies differ only
in what they choose, never in the machine's noise between runs, and many seeds cost milliseconds.

A task may run only what its table holds: its recorded built-ins first, then its recorded points in
a seeded order, a local step goes to the recorded points one knob away, and transfer offers another
task's best only where this task's table holds it. No OpenCL here.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import UserError
from ..core.records import TIMED
from ..core.space import Setting
from ..results import rows as results
from ..results import schema
from ..results.nearest import problem_from_key
from ..drive.sweep import Budget
from .schedule import DEFAULT_SEARCH, Scheduler, TaskState, ident, network_ms, own_order
from .tasks import Task


@dataclass(frozen=True)
class RecordedTask:
    """One task's table: every setting measured for it, its cost (None: it failed)."""

    task: Task
    costs: dict  # ident -> the median over its recordings of its run ms (schema.TIME), or None
    settings: dict  # ident -> Setting
    builtins: tuple  # idents recorded as built-ins, in recorded order

    @property
    def points(self) -> list[str]:
        return [k for k in self.settings if k not in self.builtins]

    @property
    def best_ms(self) -> float:
        """The best recorded cost (nan: nothing ran)."""
        return min((c for c in self.costs.values() if c is not None), default=math.nan)

    @property
    def builtin_ms(self) -> float:
        """The best recorded built-in's cost (nan: every built-in failed)."""
        return min((self.costs[k] for k in self.builtins if self.costs[k] is not None), default=math.nan)


def load_table(run_dir: str | Path) -> tuple[str, list[RecordedTask]]:
    """The network's name and each task's table from a run folder's `network.json` and task files."""
    run_dir = Path(run_dir)
    path = run_dir / "network.json"
    if not path.exists():
        raise UserError(f"{run_dir}: not a cltune net run folder or recording (no network.json)")
    manifest = json.loads(path.read_text())
    out = []
    for t in manifest.get("tasks", []):
        problem = problem_from_key(t["problem"])
        if problem is None:
            raise UserError(f"{path}: task {t['name']!r} has a problem key cltune cannot read: {t['problem']}")
        task = Task(t["name"], problem, int(t["weight"]), tuple(t["layers"]))
        out.append(_task_table(task, run_dir / f"{task.name}.csv"))
    missing = [r.task.name for r in out if not r.builtins]
    if not out or missing:
        raise UserError(f"{run_dir}: no recorded built-in settings for task(s) {', '.join(missing) or '(none)'}; "
                        "record the network first")
    return manifest.get("network", run_dir.name), out


def _task_table(task: Task, path: Path) -> RecordedTask:
    costs: dict = {}
    settings: dict = {}
    builtins: list = []
    if path.exists() and path.stat().st_size:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a torn last line: the rows before it still count
            df = results.load(path)
        for row in df[df["phase"] == "search"].to_dict("records"):
            s = Setting.make(row["setting"], row["family"], json.loads(row["params"]))
            k = ident(s)
            settings.setdefault(k, s)
            costs.setdefault(k, []).append(row[schema.TIME] if row["status"] in TIMED else None)
            if row["strategy"] == "builtin" and k not in builtins:
                builtins.append(k)
    med = {k: (statistics.median(ok) if (ok := [c for c in v if c is not None]) else None) for k, v in costs.items()}
    return RecordedTask(task, med, settings, tuple(builtins))


def one_knob(rec: RecordedTask, seed: int):
    """The recorded points one knob away from a setting (same family, every other knob equal)."""
    resolved = {k: (k.split(":", 1)[0], json.loads(k.split(":", 1)[1])) for k in rec.settings}
    cache: dict = {}

    def near(setting: Setting) -> list[Setting]:
        k = ident(setting)
        if k not in cache:
            fam, values = resolved.get(k) or (setting.family, {})
            out = [rec.settings[o] for o, (f, v) in resolved.items()
                   if o != k and f == fam and sum(v.get(n) != values.get(n) for n in v.keys() | values.keys()) == 1]
            random.Random(f"{seed}:{setting.key}").shuffle(out)
            cache[k] = out
        return cache[k]

    return near


def replay_states(table: list[RecordedTask], seed: int, search: str = DEFAULT_SEARCH) -> list[TaskState]:
    out = []
    for i, rec in enumerate(table):
        order = own_order([rec.settings[k] for k in rec.points], seed, i)
        # It may run what the table holds, its points and built-ins: TaskState's default.
        out.append(TaskState(rec.task, [rec.settings[k] for k in rec.builtins], order,
                             neighbours=one_knob(rec, seed), search=search, seed=seed))
    return out


@dataclass
class Trace:
    """One replayed run: the network's time after every trial, and per task the trial count and
    best cost after every trial (to read the allocation at any budget point)."""

    curve: list  # network ms after trial i (nan while a task has no figure)
    picks: list  # task name of trial i
    phases: list  # builtin / transfer / search of trial i
    costs: list  # what trial i measured (None: failed)

    def network_at(self, budget: int) -> float:
        return self.curve[min(budget, len(self.curve)) - 1]

    def trials_at(self, budget: int) -> dict:
        out: dict = {}
        for name in self.picks[:budget]:
            out[name] = out.get(name, 0) + 1
        return out

    def task_best_at(self, budget: int, name: str) -> float:
        ok = [c for n, c in zip(self.picks[:budget], self.costs[:budget]) if n == name and c is not None]
        return min(ok, default=math.nan)


def replay(table: list[RecordedTask], policy: str, transfer: bool, budget: int, seed: int, search: str = DEFAULT_SEARCH,
           **knobs) -> Trace:
    """Run one policy over the table within `budget` settings in total (built-ins included), each
    task searching its own points by `search`."""
    states = replay_states(table, seed, search)
    by_name = {r.task.name: r for r in table}
    curve, picks, phases, costs = [], [], [], []

    def evaluate(st, setting, upcoming, phase):
        return by_name[st.task.name].costs[ident(setting)]

    def on_trial(st, setting, phase):
        curve.append(network_ms(states))
        picks.append(st.task.name)
        phases.append(phase)
        costs.append(st.tried[ident(setting)])

    Scheduler(states, evaluate, Budget(settings=budget), policy, transfer, on_trial=on_trial, seed=seed,
              **knobs).run()
    return Trace(curve, picks, phases, costs)


def best_possible(table: list[RecordedTask]) -> float:
    """sum(weight x best recorded ms): what a policy with the whole table measured would reach."""
    return sum(r.task.weight * r.best_ms for r in table)


def builtin_only(table: list[RecordedTask]) -> float:
    """sum(weight x best recorded built-in ms): where every policy starts."""
    return sum(r.task.weight * r.builtin_ms for r in table)
