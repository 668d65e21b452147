"""Adaptive repeats: a point clearly slower than the best so far stops after a first look, points
near the best get the launches saved, `--repeat` forces a fixed count; and the Runner's launch loop
keeps one launch queued behind the one it waits for, wasting none."""

from collections import deque

import pytest

from cltune import config, results, tune
from cltune.measure import Runner
from cltune.records import Round, Timing

from .fakes import FakeBackend


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


def rows_by_cost(tmp_path, **opts):
    """The space's rows by their (fake) cost, and the named setting's row under "first"."""
    out = tmp_path / "a.csv"
    tune.run(adaptive_config(), tune.Options(out=out, **opts), backend=FakeBackend())
    rows = results.load(out).to_dict("records")
    return {"first": rows[0], **{round(r["run_ms_median"], 3): r for r in rows[1:]}}


def test_a_slow_point_stops_after_its_first_look(tmp_path):
    rows = rows_by_cost(tmp_path)
    slow = rows[13.6]  # 13.6 ms against the incumbent's 7 ms: above 1.5x
    assert slow["n"] == 2 and slow["stopped_early"] in (True, "True")
    middling = rows[10.0]  # 1.43x: not clearly slower, so the plain count
    assert middling["n"] == 5 and middling["stopped_early"] in (False, "False")


def test_a_point_near_the_best_is_not_stopped_and_gets_the_saved_launches(tmp_path):
    rows = rows_by_cost(tmp_path)
    near = rows[7.5]  # 7.5 ms: within 1.15x of the 7 ms incumbent
    assert near["n"] == 10 and near["stopped_early"] in (False, "False")
    first = rows["first"]  # measured first: no incumbent yet, the plain count
    assert first["n"] == 5


def test_repeat_option_forces_a_fixed_count(tmp_path):
    rows = rows_by_cost(tmp_path, repeat=5)
    assert {r["n"] for r in rows.values()} == {5}
    assert not any(r["stopped_early"] in (True, "True") for r in rows.values())


def test_adaptive_off_in_the_config_measures_every_point_alike():
    cfg = adaptive_config(adaptive=False)
    assert not cfg.timing.adaptive and cfg.timing.top_repeat == 10


class FakeQueue:
    """Stands in for the Runner's device: launches take the given run times; records how many
    launches were in flight whenever the loop waited for one."""

    def __init__(self, times):
        self.times, self.launched, self.depth_at_wait = deque(times), 0, []
        self.queue = deque()

    def _enqueue(self, prep):
        self.launched += 1
        self.queue.append(self.times.popleft() if len(self.times) > 1 else self.times[0])
        return [self.queue[-1]]

    def _round(self, prep, events):
        self.depth_at_wait.append(len(self.queue))
        t = self.queue.popleft()
        return Round(0.0, 0.0, t, t)


@pytest.mark.parametrize("timing, times, timed, launched", [
    (Timing(warmup=1, repeat=3), [1.0], 3, 4),  # 1 warm-up + 3 timed, nothing wasted
    (Timing(warmup=1, repeat=5, adaptive=True, incumbent_ms=1.0), [2.0], 2, 4),  # stops: 1 speculative
    (Timing(warmup=1, repeat=5, adaptive=True, incumbent_ms=1.0), [1.3], 5, 6),  # goes on, no gap
    (Timing(warmup=1, repeat=5, adaptive=True, incumbent_ms=1.0, top_repeat=10), [1.0], 10, 11),
    (Timing(warmup=1, repeat=2, warmup_ms=10.0), [4.0], 2, 5),  # 3 warm-up launches reach 10 ms
    (Timing(warmup=0, repeat=1), [2.0], 1, 1),
])
def test_launch_loop_keeps_one_launch_queued_and_wastes_none(timing, times, timed, launched):
    fake = FakeQueue(times)
    rounds = Runner._timed(fake, None, timing)
    assert len(rounds) == timed and fake.launched == launched
    # Every wait but the last ones had another launch queued behind it: the device never idled.
    assert all(d == 2 for d in fake.depth_at_wait[:-2])
