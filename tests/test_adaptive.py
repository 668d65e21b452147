"""Adaptive repeats: a point clearly slower than the best so far stops after a first look, a point
stops once a second launch confirms its fastest, unsettled points near the best get the launches
saved, `--repeat` forces a fixed count; and the Runner's launch loop counts the verification launch
as warm-up, warms a device up on its first launches, and wastes no launch."""

from collections import deque

import pytest

from cltune import config, results, tune
from cltune.measure import DEVICE_WARMUP_MS, Runner
from cltune.records import Round, Timing

from .fakes import FakeBackend

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


def rows_by_cost(tmp_path, jitter=NOISY, **opts):
    """The space's rows by their (fake) cost, the fastest launch, and the named setting's row under
    "first"."""
    out = tmp_path / f"a{len(list(tmp_path.iterdir()))}.csv"
    tune.run(adaptive_config(), tune.Options(out=out, **opts), backend=FakeBackend(jitter=jitter))
    rows = results.load(out).to_dict("records")
    return {"first": rows[0], **{round(r["run_ms_min"], 3): r for r in rows[1:]}}


def test_a_slow_point_stops_after_its_first_look(tmp_path):
    rows = rows_by_cost(tmp_path)
    slow = rows[13.6]  # 13.6 ms against the incumbent's 7 ms: above 1.5x
    assert slow["n"] == 2 and slow["stopped_early"] in (True, "True")
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
        rows = rows_by_cost(tmp_path, jitter=jitter, repeat=5)
        assert {r["n"] for r in rows.values()} == {5}
        assert not any(r["stopped_early"] in (True, "True") for r in rows.values())


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

    from cltune import measure
    from cltune.problem import Problem

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
