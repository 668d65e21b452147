"""The network task scheduler, transfer, resume and the run folder, on a fake backend: no device."""

import json
from dataclasses import dataclass, replace

import pytest

from cltune.core.problem import Problem
from cltune.core.records import Measurement, Round, Status
from cltune.core.space import Setting
from cltune.net import run as netrun
from cltune.net.schedule import Scheduler, TaskState, distance, transfer_candidates
from cltune.net.tables import Layer, Network
from cltune.net.tasks import make_tasks
from cltune.drive.sweep import Budget
from tests.fakes import POCL_AVX2, FakeBackend


def factor(key: str) -> float:
    """A made-up landscape shared by every problem: a setting good on one layer is good on a similar one."""
    return 0.5 + (sum(map(ord, key)) * 7919 % 1000) / 1000


@dataclass
class NetFake(FakeBackend):
    stop_after: int | None = None  # raise KeyboardInterrupt at this measurement (an interrupted run)

    def measure(self, problem, setting, timing, upcoming=()):
        if self.stop_after is not None and len(self.measured) >= self.stop_after:
            raise KeyboardInterrupt
        self.measured.append((problem.key, setting.key))
        return self.launch(problem, setting, timing)

    def measure_interleaved(self, problem, settings, timing):  # a task's re-ranking: no trial of the budget
        self.interleaved.append([s.key for s in settings])
        return [self.launch(problem, s, timing) for s in settings]

    def launch(self, problem, setting, timing):
        cost = round(problem.flops / 1e8 * factor(setting.key), 6)
        rounds = tuple(Round(0.01, 0.02, cost, cost + 0.03) for _ in range(timing.repeat))
        return Measurement(setting=setting, status=Status.OK, build_options="-cl-std=CL1.2",
                           source_hash="fake", build_ms=1.0, first_launch_ms=cost, max_abs_err=0.0,
                           rounds=rounds, wall_ms=cost * (timing.repeat + 1))


def conv(c, h, k=None, r=3, stride=1, act="relu", groups=1):
    k = k or c
    return Problem.from_shapes([1, c, h, h], [k, c // groups, r, r], stride, r // 2, 1, groups, True, act)


def small_net():
    return Network("tiny", (Layer("a", conv(16, 16)), Layer("b", conv(16, 16)), Layer("c", conv(32, 8)),
                            Layer("d", conv(16, 16, 32, r=1)), Layer("e", conv(32, 8, groups=32))))


def states_for(costs: dict, n_own=20):
    """Scheduler states for made-up tasks: name -> (weight, problem); settings s0..s{n_own}."""
    out = []
    for name, (weight, p) in costs.items():
        task = make_tasks(Network(name, tuple(Layer(f"{name}{i}", p) for i in range(weight))))[0]
        task = replace(task, name=name)
        own = [Setting.make(f"s{i}", "direct", {"BLOCK_W": i + 1}) for i in range(n_own)]
        out.append(TaskState(task, own[:1], own[1:]))
    return out


def test_gradient_policy_favours_the_largest_weighted_latency_and_round_robin_shares_evenly():
    """Guards against a scheduler that spends the budget evenly (or on the cheap layer) when one
    task holds most of the network's time."""
    heavy, light = conv(64, 32), conv(16, 8)

    def run(policy):
        states = states_for({"heavy": (4, heavy), "light": (1, light)})
        cost = lambda st, s, up, phase: st.task.problem.flops / 1e6 * (1 + 1 / s.values["BLOCK_W"])  # noqa: E731
        Scheduler(states, cost, Budget(settings=22), policy, transfer=False).run()
        return {st.task.name: len(st.tried) for st in states}

    assert run("round-robin") == {"heavy": 11, "light": 11}
    grad = run("gradient")
    assert sum(grad.values()) == 22 and grad["heavy"] >= 3 * grad["light"]


def test_a_heavy_improving_task_gets_more_trials_than_a_light_flat_one_and_round_robin_is_even():
    """Guards against a scheduler blind to weight x latency (Ansor's chain rule): the heavy task
    whose trials keep paying gets most of the budget, whatever the seed breaking ties."""
    def run(policy, seed):
        states = states_for({"heavy": (4, conv(64, 32)), "light": (1, conv(16, 8))}, n_own=80)
        cost = lambda st, s, up, ph: 10.0 - 0.05 * s.values["BLOCK_W"] if st.task.name == "heavy" else 1.0  # noqa: E731
        Scheduler(states, cost, Budget(settings=2 + 40), policy, transfer=False, seed=seed).run()
        return {st.task.name: len(st.tried) - 1 for st in states}

    for seed in range(5):
        got = run("gradient", seed)
        assert got["heavy"] >= 3 * got["light"], got
    assert run("round-robin", 0) == {"heavy": 20, "light": 20}


def test_budget_counts_the_builtins_and_no_task_repeats_a_setting():
    states = states_for({"a": (1, conv(16, 16)), "b": (1, conv(32, 8))}, n_own=5)
    seen = []
    Scheduler(states, lambda st, s, up, ph: seen.append((st.task.name, s.key)) or 1.0, Budget(settings=100)).run()
    assert len(seen) == len(set(seen)) == 10  # 2 tasks x (1 built-in + 4 own): exhausted before the budget


def test_transfer_starts_a_task_from_the_best_settings_of_the_nearest_similar_task():
    """Guards against transfer from a task whose filter or stride differs (its best setting says
    nothing here) and against transfer that ignores how near the shapes are."""
    assert distance(conv(16, 16), conv(16, 16, r=1)) is None
    assert distance(conv(16, 16), conv(16, 16, stride=2)) is None
    assert distance(conv(16, 16), conv(32, 8)) < distance(conv(16, 16), conv(64, 4))
    states = states_for({"target": (1, conv(16, 16)), "near": (1, conv(32, 8)), "far": (1, conv(64, 4)),
                         "other": (1, conv(16, 16, r=1))})
    target, near, far, other = states
    for st, good in ((near, "s7"), (far, "s9"), (other, "s5")):
        for s in st.order:
            st.add(s, 1.0 if s.name == good else 2.0)
    moved = [s.name for s in transfer_candidates(target, states)]
    assert moved[0] == "s7" and "s9" in moved and "s5" not in moved


def test_network_run_fills_the_run_folder_summary_and_best_database(tmp_path):
    backend = NetFake()
    opts = netrun.NetOptions(out=tmp_path / "run", budget=40, rounds=0, best_db=tmp_path / "best.sqlite")
    res = netrun.run(small_net(), opts, echo=lambda line: None, backend=backend)
    run_dir = tmp_path / "run"
    tasks = json.loads((run_dir / "network.json").read_text())["tasks"]
    assert [t["weight"] for t in tasks] == [2, 1, 1, 1]
    assert len(backend.measured) == 40 and res.measured == 40
    assert all((run_dir / f"{t['name']}.csv").exists() for t in tasks)
    s = res.summary
    assert list(s["weight"]) == [2, 1, 1, 1] and s["share"].sum() == pytest.approx(1.0)
    assert s.loc[s["kind"] == "depthwise", "family"].item() == "depthwise"
    for _, row in s.iterrows():  # the summary's ms is the best ok row of the task's own file
        mine = [m for m in backend.measured if m[0] == row["problem"]]
        assert row["ms"] == pytest.approx(min(conv_cost(k, p) for k, p in mine))
    from cltune.results import store

    assert len(store.all_best(tmp_path / "best.sqlite")) == 4


def conv_cost(problem_key, setting_key):
    from cltune.results.nearest import problem_from_key

    return round(problem_from_key(problem_key).flops / 1e8 * factor(setting_key), 6)


def test_resume_of_an_interrupted_network_run_measures_only_what_is_missing(tmp_path):
    """Guards against a resumed run that measures settings again, spends a fresh budget, or ends with
    another result than the same run uninterrupted."""
    opts = netrun.NetOptions(out=tmp_path / "whole", budget=30, rounds=0, best_db=tmp_path / "b.sqlite")
    whole = netrun.run(small_net(), opts, echo=lambda line: None, backend=NetFake())
    cut = NetFake(stop_after=17)
    opts = netrun.NetOptions(out=tmp_path / "cut", budget=30, rounds=0, best_db=tmp_path / "b.sqlite")
    with pytest.raises(KeyboardInterrupt):
        netrun.run(small_net(), opts, echo=lambda line: None, backend=cut)
    rest = NetFake()
    opts = netrun.NetOptions(resume=tmp_path / "cut", budget=30, rounds=0, best_db=tmp_path / "b.sqlite")
    resumed = netrun.run(small_net(), opts, echo=lambda line: None, backend=rest)
    assert len(rest.measured) == 13 and not set(rest.measured) & set(cut.measured)
    cols = ["task", "setting", "ms", "trials"]
    assert resumed.summary[cols].equals(whole.summary[cols])


def test_resume_with_another_network_and_a_missing_budget_are_one_line(tmp_path):
    from cltune.core.errors import UserError

    with pytest.raises(UserError, match="needs a budget"):
        netrun.run(small_net(), netrun.NetOptions(out=tmp_path / "r"), backend=NetFake())
    netrun.run(small_net(), netrun.NetOptions(out=tmp_path / "r", budget=12, rounds=0, best_db=tmp_path / "b"),
               echo=lambda line: None, backend=NetFake())
    other = Network("other", (Layer("x", conv(8, 8)),))
    with pytest.raises(UserError, match="holds the tasks of network 'tiny'"):
        netrun.run(other, netrun.NetOptions(resume=tmp_path / "r", budget=5), backend=NetFake())
    with pytest.raises(UserError, match="already holds a network run"):
        netrun.run(small_net(), netrun.NetOptions(out=tmp_path / "r", budget=5), backend=NetFake())


def test_report_of_a_network_run_shows_its_tasks(tmp_path):
    """Guards against `cltune report network.csv` reading the summary as a results file (an error)."""
    from click.testing import CliRunner

    from cltune.cli.commands import main

    opts = netrun.NetOptions(out=tmp_path / "run", budget=12, rounds=0, best_db=tmp_path / "b.sqlite")
    res = netrun.run(small_net(), opts, echo=lambda line: None, backend=NetFake())
    result = CliRunner().invoke(main, ["report", str(tmp_path / "run" / "network.csv")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "run" / "network.report.html").read_text()
    assert all(name in page for name in res.summary["task"]) and "5 conv layers" in page


def test_time_limit_stops_the_search_but_never_the_builtins():
    """Guards against a network left without a figure for some task when the time runs out early,
    and against a time limit that is not enforced on the search."""
    def run(seconds):
        now = [0.0]
        states = states_for({"a": (1, conv(16, 16)), "b": (1, conv(32, 8))}, n_own=30)
        for st in states:
            st.builtins = st.order[:3]

        def cost(st, s, up, phase):
            now[0] += 1.0  # each measurement takes a second
            return 1.0

        Scheduler(states, cost, Budget(seconds=seconds), clock=lambda: now[0]).run()
        return [len(st.tried) for st in states]

    assert run(3.0) == [3, 3]  # the six built-ins, though they took six seconds
    assert sum(run(10.0)) == 10


def test_the_search_steps_one_knob_away_from_the_best_setting_first():
    """Guards against a search that only draws random points: the built-ins are good, and random
    points of a wide space rarely beat them; the next trial should change one knob of the best."""
    from cltune.loader import config
    from cltune.loader.bind import bind_config
    from cltune.net.run import task_state
    from cltune.net.schedule import neighbours
    from cltune.workloads import builtin_settings
    from tests.fakes import FAKE_INFO

    spaces = bind_config(config.load("net_spaces"), FAKE_INFO).spaces  # as `cltune net` binds them
    p = conv(64, 28)
    best = Setting.make("direct_mali", *builtin_settings()["direct_mali"])
    near = neighbours(best, spaces, p, FAKE_INFO)
    assert near and all(sum(a != b for a, b in zip(
        [n.values.get(k) for k in sorted(set(n.values) | set(best.values))],
        [best.values.get(k) for k in sorted(set(n.values) | set(best.values))])) == 1 for n in near)
    st = task_state(make_tasks(Network("n", (Layer("a", p),)))[0], 0, spaces, FAKE_INFO, 0)
    st.add(best, 1.0)
    assert st.next_own()[0].key in {n.key for n in near}


def test_a_setting_that_spells_out_a_default_is_not_measured_again():
    """Guards against measuring one kernel twice: implicit_gemm_cpu leaves VEC_DIM at its default "k",
    a space point one knob away spells it out."""
    from cltune.core.device_values import bind_params, values
    from cltune.net.schedule import ident
    from cltune.workloads import builtin_settings

    family, params = builtin_settings()["implicit_gemm_cpu"]
    params = bind_params(params, values(POCL_AVX2))  # its widths, as a device binds them
    spelled = Setting.make("spelled", family, {**params, "VEC_DIM": "k"})
    assert spelled.key != Setting.make("b", family, params).key
    assert ident(spelled) == ident(Setting.make("b", family, params))


def test_network_tasks_are_timed_by_the_sweeps_rules(tmp_path):
    """Guards against `cltune net` building its own sweep with the config's timing as-is: no
    incumbent, so adaptive repeats never stopped a slow setting early, and no timing windows. Each
    task now measures through a session (drive/session.py), as `cltune sweep` does."""
    timings = []

    @dataclass
    class Watch(NetFake):
        def measure(self, problem, setting, timing, upcoming=()):
            timings.append((problem.key, timing))
            return super().measure(problem, setting, timing, upcoming)

    backend = Watch()
    netrun.run(small_net(), netrun.NetOptions(out=tmp_path / "run", budget=12, rounds=0,
                                              best_db=tmp_path / "best.sqlite"),
               echo=lambda line: None, backend=backend)
    assert timings and all(t.adaptive for _, t in timings)
    firsts = {}
    for key, t in timings:  # a task's first point has no incumbent yet, its later ones do
        firsts.setdefault(key, []).append(t.incumbent_ms)
    assert all(inc[0] is None and any(i is not None for i in inc[1:]) for inc in firsts.values() if len(inc) > 1)
    assert all(t.limit == 1 and t.time_verification for _, t in timings)  # first windows, as a sweep's
    assert backend.more  # and later windows


@pytest.mark.parametrize("opts, message", [
    (dict(budget=3, seed=-1), "seed: expected an int"),
    (dict(budget=3, timeout_s=float("inf")), "timeout_s: expected a finite number"),
    (dict(budget=3, out="a", resume="b"), "both name the run folder"),
    (dict(), "needs a budget"),
])
def test_network_options_are_checked_as_a_sweeps_before_a_device_opens(opts, message):
    """Guards against `net --seed -1` giving all-error rows (net skipped sweep's option checks)."""
    from cltune.core.errors import UserError

    with pytest.raises(UserError, match=message):
        netrun.run(small_net(), netrun.NetOptions(**opts), echo=lambda line: None, backend=None)


def test_a_task_searching_by_the_model_proposes_untried_points_of_its_own_and_finds_the_optimum(monkeypatch):
    """Guards against a `model` task search that never asks the model (the local search under
    another name), that proposes a point twice or one outside the task's points, or that a
    budget does not bound. The landscape is smooth in two knobs, its optimum one point of 32."""
    from cltune.search import surrogate as sg

    asked = []
    real = sg.Proposer.propose
    monkeypatch.setattr(sg.Proposer, "propose", lambda self, *a, **k: asked.append(real(self, *a, **k)) or asked[-1])
    widths, blocks = range(1, 9), (8, 16, 32, 48)
    points = [Setting.make(f"w{w}k{k}", "direct", {"BLOCK_W": w, "BLOCK_K": k}) for w in widths for k in blocks]
    cost = lambda st, s, up, phase: 1 + (s.values["BLOCK_W"] - 6) ** 2 + 3 * abs(blocks.index(s.values["BLOCK_K"]) - 2)  # noqa: E731
    found = []
    for seed in range(5):
        task = make_tasks(Network("n", (Layer("a", conv(16, 16)),)))[0]
        order = netrun.own_order(points[1:], seed, 0)
        st = TaskState(task, points[:1], order, search="model", seed=seed)
        Scheduler([st], cost, Budget(settings=20), "round-robin", transfer=False, seed=seed).run()
        assert len(st.tried) == 20 and set(st.tried) <= st.valid
        found.append(st.best)
    assert any(p for p in asked) and found == [1] * 5
