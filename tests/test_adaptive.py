"""Adaptive repeats: a point clearly slower than the best so far stops after a first look, a point
stops once a second launch confirms its fastest, unsettled points near the best get the launches
saved, `--repeat` forces a fixed count; and the Runner's launch loop counts the verification launch
as warm-up, warms a device up on its first launches, and wastes no launch."""

from collections import deque
from dataclasses import replace

import pytest

from cltune.loader import config
from cltune.core.records import Round, Timing
from cltune.measure.runner import DEVICE_WARMUP_MS, Runner
from cltune.results import rows as results
from cltune.drive import tune
from cltune.drive.sweep import Budget, Dispatch, Outcome, Sweep

from .fakes import FAKE_INFO, FakeBackend, fake_cost

NOISY = tuple(1.0 + 0.1 * i for i in range(10))  # launches that never settle: no two within 1%


def adaptive_config(**run):
    # fake_cost: MACROS=4, UNROLL=1 is 7.0 ms; MACROS=0, UNROLL=0 is 10.0; MATH=fma adds 0.5,
    # LWS_X=16 adds 3.6.
    return config.parse({
        "name": "adaptive",
        "problem": {"input": [1, 4, 8, 8], "weight": [4, 4, 3, 3], "padding": 1},
        "run": {"strategy": "exhaustive", "repeat": 5, "warmup": 0, "rerank": 0, **run},
        "setting": [{"name": "best", "params": {"MACROS": 4, "UNROLL": 1, "LWS_X": 4, "LWS_Y": 1}}],
        "space": [{"family": "conv2d", "params": {"MACROS": [0, 4], "UNROLL": [0, 1], "MATH": ["plain", "fma"],
                                                  "LWS_X": [4, 16], "LWS_Y": [1]},
                   "constraints": {"unroll_needs_filter": "UNROLL == 0 or MACROS >= 1"}}],
    }, "adaptive.toml")


def rows_by_cost(tmp_path, jitter=NOISY, run=None, backend=None, **opts):
    """The space's rows by their (fake) cost, the fastest launch, and the named setting's row under
    "first". Each point in one window unless `run` says otherwise: the rules are the same for two."""
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}.csv"
    backend = backend or FakeBackend(jitter=jitter)
    tune.run(adaptive_config(**({"second_window_s": 0} if run is None else run)), tune.Options(out=out, **opts), backend=backend)
    rows = results.load(out).to_dict("records")
    return {"first": rows[0], **{round(r["run_ms_min"], 3): r for r in rows[1:]}}


def test_a_slow_point_stops_after_its_first_look(tmp_path):
    rows = rows_by_cost(tmp_path)
    slow = rows[13.6]  # 13.6 ms against the incumbent's 7 ms: above 1.5x
    assert slow["n"] == config.FIRST_LOOK == 2 and slow["stopped_early"] in (True, "True")
    three = rows_by_cost(tmp_path, run={"second_window_s": 0, "first_look": 3})  # [run] sets it
    assert three[13.6]["n"] == 3 and three[13.6]["stopped_early"] in (True, "True")
    steady = rows_by_cost(tmp_path, jitter=(1.0,), run={"second_window_s": 0, "first_look": 3})
    assert steady[10.0]["n"] == 2  # a look of 3 launches, yet settled by its second
    middling = rows[10.0]  # 1.43x: not clearly slower and never settled, so the plain count
    assert middling["n"] == 5 and middling["stopped_early"] in (False, "False")


def test_an_unsettled_point_near_the_best_gets_the_saved_launches(tmp_path):
    rows = rows_by_cost(tmp_path)
    near = rows[7.5]  # 7.5 ms: within 1.15x of the 7 ms incumbent
    assert near["n"] == 10 and near["stopped_early"] in (False, "False")
    first = rows["first"]  # measured first: no incumbent yet, the plain count
    assert first["n"] == 5


def test_a_point_stops_once_a_second_launch_confirms_its_fastest(tmp_path):
    steady = rows_by_cost(tmp_path, jitter=(1.0,))
    assert {r["n"] for r in steady.values()} == {2}  # two equal launches: settled at the first look
    assert not steady[10.0]["stopped_early"] in (True, "True")  # settled is not "clearly slower"
    late = rows_by_cost(tmp_path, jitter=(1.0, 1.2, 1.005))  # the third launch confirms the first
    assert late[10.0]["n"] == 3 and late[7.5]["n"] == 3 and late[13.6]["n"] == 2


def test_repeat_option_forces_a_fixed_count(tmp_path):
    for jitter in (NOISY, (1.0,)):
        backend = FakeBackend(jitter=jitter)
        rows = rows_by_cost(tmp_path, run={}, backend=backend, repeat=5)  # two windows by default
        assert {r["n"] for r in rows.values()} == {5}
        assert not any(r["stopped_early"] in (True, "True") for r in rows.values())
        assert backend.more == []  # a fixed count is timed in one window


def test_a_slow_phase_in_a_points_first_window_is_caught_by_its_second(tmp_path):
    # The first four points of the space are timed at 2x in their first window, as in a slow phase
    # of a shared machine; in one window both of their first launches agree on it.
    space = adaptive_config().spaces[0].valid_settings(adaptive_config().problem)
    hit = tuple(s.name for s in space[:4])
    one = rows_by_cost(tmp_path, jitter=(1.0,), backend=FakeBackend(slow_first=hit))
    two = rows_by_cost(tmp_path, jitter=(1.0,), run={}, backend=FakeBackend(slow_first=hit))
    costs = {s.name: fake_cost(s.values) for s in space}
    by_name = lambda rows: {r["setting"]: r for k, r in rows.items() if k != "first"}  # noqa: E731
    for name in hit:
        assert by_name(one)[name]["run_ms_min"] == pytest.approx(2 * costs[name])
        row = by_name(two)[name]
        assert row["run_ms_min"] == pytest.approx(costs[name])  # its second window's launches
        # its first window, the verification launch, slower than them: not among its samples
        assert set(row["run_ms_samples"].split()) == {f"{costs[name]:.4f}"}


def test_a_verification_launch_counts_unless_it_ran_slower_than_the_second_window():
    timing = Timing(adaptive=True, precision=0.01)
    first = (Round(0, 0, 1.3, 1.3),)  # a cold verification launch
    later = (Round(0, 0, 1.0, 1.0), Round(0, 0, 1.005, 1.005))
    assert timing.second_window(first, first + later) == later
    fast = (Round(0, 0, 0.998, 0.998),)  # the machine was faster then: its fastest launch
    assert timing.second_window(fast, fast + later) == fast + later
    assert timing.second_window(first, first) == first  # no second window: what it has


def test_second_windows_wait_their_gap_and_come_oldest_first():
    cfg = adaptive_config()
    backend = FakeBackend(jitter=(1.0,))
    now = [0.0]

    def measure(setting, upcoming):
        now[0] += 0.4  # each first window takes 0.4 s
        return backend.measure(cfg.problem, setting, replace(cfg.timing, limit=1))

    dispatch = Dispatch(measure, window_gap_s=1.0,
                        measure_more=lambda firsts: backend.measure_more(cfg.problem, firsts, cfg.timing))
    sweep = Sweep(dispatch, lambda s: s.key, lambda m, strategy: _recorded.append(m) or _outcome(m),
                  clock=lambda: now[0])
    _recorded: list = []
    space = cfg.spaces[0]
    sweep.search(space, cfg.problem, FAKE_INFO, "exhaustive", Budget(settings=5), 0)
    names = [s.name for s in backend.measured]  # the first windows, in the search's order
    assert len(names) == 5 and len(set(names)) == 5
    # first windows end at 0.4, 0.8, 1.2, 1.6, 2.0 s: the first point is due at 1.4 (after the
    # fourth), the second at 1.8 (after the fifth); the rest when the search ends.
    assert [[s.name for s in call] for call in backend.more] == [names[:1], names[1:2], names[2:]]
    assert [m.setting.name for m in _recorded] == names and all(len(m.rounds) == 2 for m in _recorded)


def test_an_interrupted_search_records_the_points_waiting_for_their_second_window():
    cfg = adaptive_config()
    backend = FakeBackend(jitter=(1.0,))
    recorded: list = []

    def measure(setting, upcoming):
        if len(backend.measured) == 3:
            raise KeyboardInterrupt
        return backend.measure(cfg.problem, setting, replace(cfg.timing, limit=1))

    dispatch = Dispatch(measure, window_gap_s=1.0,
                        measure_more=lambda firsts: backend.measure_more(cfg.problem, firsts, cfg.timing))
    sweep = Sweep(dispatch, lambda s: s.key, lambda m, strategy: recorded.append(m) or _outcome(m),
                  clock=lambda: 0.0)
    with pytest.raises(KeyboardInterrupt):
        sweep.search(cfg.spaces[0], cfg.problem, FAKE_INFO, "exhaustive", Budget(), 0)
    assert len(recorded) == 3 and all(len(m.rounds) == 1 for m in recorded) and backend.more == []


def _outcome(m):
    return Outcome(m.setting, m.status.value, min(r.run_ms for r in m.rounds) if m.rounds else None)


def test_adaptive_off_in_the_config_measures_every_point_alike():
    cfg = adaptive_config(adaptive=False)
    assert not cfg.timing.adaptive and cfg.timing.top_repeat == 10
    assert config.parse({**_table(), "run": {"precision": 0.05}}, "p.toml").timing.precision == 0.05


def _table():
    return {"name": "t", "problem": {"input": [1, 4, 8, 8], "weight": [4, 4, 3, 3]},
            "setting": [{"name": "s", "params": {"MACROS": 4}}]}


class FakeQueue:
    """Stands in for the Runner's device: launches take the given run times (the last one
    repeating); records how many launches were in flight whenever the loop waited for one."""

    def __init__(self, times, device_ms=1e9):
        self.times, self.launched, self.depth_at_wait = deque(times), 0, []
        self.queue = deque()
        self.device_ms = device_ms  # kernel time so far: past the device's first launches

    def _enqueue(self, prep):
        self.launched += 1
        self.queue.append(self.times.popleft() if len(self.times) > 1 else self.times[0])
        return [self.queue[-1]]

    def _round(self, prep, events):
        self.depth_at_wait.append(len(self.queue))
        t = self.queue.popleft()
        self.device_ms += t
        return Round(0.0, 0.0, t, t)


ADAPTIVE = dict(adaptive=True, incumbent_ms=1.0, repeat=5)


@pytest.mark.parametrize("timing, times, timed, launched", [
    (Timing(warmup=1, repeat=3), [1.0], 3, 4),  # the verification launch warms up; 3 timed
    (Timing(warmup=1, repeat=2, warmup_ms=10.0), [4.0], 2, 5),  # 3 warm-up launches reach 10 ms
    (Timing(warmup=3, repeat=2), [1.0], 2, 5),  # 3 warm-up launches, the verification one first
    (Timing(warmup=0, repeat=1, warmup_ms=10.0), [2.0], 1, 2),  # --warmup 0: timed right after it
    (Timing(**ADAPTIVE), [2.0], 2, 3),  # clearly slower: stops after its first look, nothing wasted
    (Timing(**ADAPTIVE), [1.3], 2, 3),  # settled at the first look
    (Timing(**ADAPTIVE), [1.0] + list(NOISY), 10, 11),  # near the best, never settled
    (Timing(**ADAPTIVE), [1.3] + [1.3 * v for v in NOISY], 5, 6),  # neither: the plain count
    (Timing(**ADAPTIVE, limit=1, time_verification=True), [1.0], 1, 1),  # a first window: the
    (Timing(**ADAPTIVE, limit=1, time_verification=True, warmup=2), [1.0], 1, 3),  # verification launch
])
def test_launch_loop_counts_the_verification_launch_and_wastes_none(timing, times, timed, launched):
    fake = FakeQueue(times)
    rounds = Runner._timed(fake, None, timing, fake._enqueue(None))
    assert len(rounds) == timed and fake.launched == launched
    if not timing.adaptive:  # a count known from the start: the device never idled between launches
        assert all(d == 2 for d in fake.depth_at_wait[:-2])


def test_a_devices_first_launches_are_warm_up():
    fake = FakeQueue([30.0], device_ms=0.0)
    rounds = Runner._timed(fake, None, Timing(warmup=1, repeat=2), fake._enqueue(None))
    assert len(rounds) == 2 and fake.launched - 2 == -(-DEVICE_WARMUP_MS // 30.0)  # 4 x 30 ms >= 100
    fake = FakeQueue([30.0], device_ms=0.0)  # --warmup 0 means none at all
    assert len(Runner._timed(fake, None, Timing(warmup=0, repeat=2), fake._enqueue(None))) == 2
    assert fake.launched == 3


def test_the_reference_runs_on_one_blas_thread_beside_a_cpu_device(monkeypatch):
    """OpenBLAS's threads busy-wait after a call, on the cores a CPU device's kernels are timed on."""
    from threadpoolctl import threadpool_info

    from cltune.core.problem import Problem
    from cltune.measure import data as measure

    seen = []

    def reference(*args):
        seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
        return real(*args)

    real = measure.reference_conv2d
    monkeypatch.setattr(measure, "reference_conv2d", reference)
    runner = Runner(None)
    runner.load_problem(Problem.from_shapes([1, 4, 8, 8], [4, 4, 3, 3], padding=1))
    is_cpu = bool(runner.device.type & measure.cl.device_type.CPU)
    assert len(seen) == 1 and seen[0] and (not is_cpu or set(seen[0]) == {1})


@pytest.mark.parametrize("isolated", [False, True])
def test_a_second_window_on_the_device_goes_on_from_the_first(isolated):
    from cltune.core.problem import Problem
    from cltune.core.records import Status
    from cltune.core.space import Setting
    from cltune.measure.worker import WorkerRunner

    runner = WorkerRunner(timeout_s=120) if isolated else Runner(None)
    try:
        problem = Problem.from_shapes([1, 4, 8, 8], [4, 4, 3, 3], padding=1)
        timing = Timing(warmup=1, repeat=3, adaptive=True, second_window_s=1.0)
        first = runner.measure(problem, Setting.make("s", "conv2d", {"MACROS": 4}),
                               replace(timing, limit=1, time_verification=True))
        assert first.status == Status.OK and len(first.rounds) == 1
        (both,) = runner.measure_more(problem, [first], timing)
        assert both.status == Status.OK and both.rounds[0] == first.rounds[0] and 2 <= len(both.rounds) <= 3
        assert both.wall_ms > first.wall_ms and both.first_launch_ms == first.first_launch_ms
        # Three windows, a point that never settles: the middle one gets half of the four launches it
        # still wants, the last one the rest (the verification launch may be dropped, as it ran cold).
        three = replace(timing, repeat=5, windows=3, precision=1e-9)
        (middle,) = runner.measure_more(problem, [first], three)
        assert middle.windows == 2 and 2 <= len(middle.rounds) <= 3
        (last,) = runner.measure_more(problem, [middle], three)
        assert last.windows == 3 and last.rounds[:len(middle.rounds)] == middle.rounds
        assert len(last.rounds) == 5 - (3 - len(middle.rounds))
    finally:
        runner.close()


def test_a_window_before_the_last_gets_an_even_share_of_what_the_point_still_wants():
    t = Timing(repeat=5, adaptive=True, incumbent_ms=7.0, top_repeat=10, windows=4, first_look=2)
    assert t.window_timing([7.5], 1).limit == 1 + 3  # near the top: 10 wanted, 9 left over 3 windows
    runs = [7.5, 7.9, 8.0, 8.1]
    assert t.window_timing(runs, 2).limit == 4 + 3  # 6 left over 2 windows
    assert t.window_timing(runs + [8.2, 8.3, 8.4], 3) is t  # the last window: all it still wants
    assert t.window_timing([12.0, 12.5], 2).limit == 2 + 1  # stopped early: nothing left, at least one
    assert Timing(adaptive=True).window_timing([1.0], 1).limit is None  # two windows: the second is the last


def test_an_unsettled_point_near_the_best_is_timed_in_every_window(tmp_path):
    from collections import Counter

    backend = FakeBackend(jitter=NOISY)
    rows = rows_by_cost(tmp_path, run={"windows": 4}, backend=backend)
    windows = Counter(s.name for call in backend.more for s in call)  # windows after the first
    near = rows[7.5]
    assert near["n"] == 10 and windows[near["setting"]] == 3  # the same launches, over four windows
    slow = rows[13.6]
    assert slow["n"] == 2 and slow["stopped_early"] in (True, "True") and windows[slow["setting"]] == 1
    assert rows_by_cost(tmp_path, run={"windows": 4}, jitter=(1.0,))[7.5]["n"] == 2  # settled in the second


def test_a_point_whose_next_window_cannot_be_made_is_recorded_with_what_it_has():
    # A worker that dies in a window hands the points back as they were (worker.measure_more).
    cfg = adaptive_config(windows=4)
    backend = FakeBackend(jitter=NOISY)
    recorded: list = []
    dispatch = Dispatch(lambda s, upcoming: backend.measure(cfg.problem, s, replace(cfg.timing, limit=1)),
                        window_gap_s=1.0, measure_more=lambda firsts: list(firsts), wants_window=lambda m: True)
    sweep = Sweep(dispatch, lambda s: s.key, lambda m, strategy: recorded.append(m) or _outcome(m),
                  clock=lambda: 0.0)
    sweep.search(cfg.spaces[0], cfg.problem, FAKE_INFO, "exhaustive", Budget(settings=3), 0)
    assert len(recorded) == 3 and all(len(m.rounds) == 1 and m.windows == 1 for m in recorded)


def test_windows_in_the_config():
    from cltune.core.errors import UserError

    assert adaptive_config().timing.windows == config.WINDOWS
    assert adaptive_config(windows=6).timing.windows == 6
    with pytest.raises(UserError, match=r"run\.windows.*>= 2"):
        adaptive_config(windows=1)


def test_across_windows_a_point_settles_only_on_a_launch_of_another_window():
    """Guards against a point settling on two launches of one window that a busy host slowed alike
    (88-96% of such pairs sat 1.14-1.16x above the point's floor on the Intel VM)."""
    t = Timing(adaptive=True, repeat=5, settle_windows=True)
    assert not t.settled([10.0, 10.05], [1, 1])  # one window: not yet
    assert t.settled([10.0, 10.05], [1, 2])
    assert t.settled([10.0, 12.0, 10.05], [1, 1, 2])
    assert not t.settled([10.0, 10.05, 12.0], [1, 1, 2])  # the other window's launch is 20% off
    assert Timing(adaptive=True, repeat=5).settled([10.0, 10.05], [1, 1])  # the rule without it
    assert t.settled([10.0, 10.05])  # no windows known (one window): the launches alone
    assert t.wanted([10.0, 10.05], [1, 1]) == 5 and t.wanted([10.0, 10.05], [1, 2]) == 2


def test_a_point_waiting_for_its_window_is_recorded_under_the_strategy_that_asked_for_it():
    # The bug this guards: the strategy column came from the Recorder's `strategy`, which each phase
    # (and a network's scheduler, per point) set before measuring; a point recorded when its last window
    # came took whatever was set then. Now the Sweep passes each point's asker along with it.
    cfg = adaptive_config(windows=4)
    backend = FakeBackend(jitter=NOISY)
    recorded: list = []
    dispatch = Dispatch(lambda s, upcoming: backend.measure(cfg.problem, s, replace(cfg.timing, limit=1)),
                        window_gap_s=1.0, measure_more=lambda firsts: backend.measure_more(cfg.problem, firsts, cfg.timing),
                        wants_window=lambda m: m.windows < 2)
    sweep = Sweep(dispatch, lambda s: s.key, lambda m, strategy: recorded.append(strategy) or _outcome(m),
                  clock=lambda: 0.0)
    space = cfg.spaces[0]
    first, *rest = space.valid_settings(cfg.problem)[:3]
    sweep.run_settings([first])
    with sweep.finishing():
        sweep.evaluate(rest[0], (), "transfer")
        sweep.evaluate(rest[1], (), "local")
    assert recorded == ["listed", "transfer", "local"]
