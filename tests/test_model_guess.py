"""The `model` strategy on one device announces a guess of its next proposal while it measures the
current one, so the two build in one program (issue 45: wall clock on a real device), and the guess
changes none of its proposals. Guards against a model whose points after its first ten each build
alone (100-180 ms of cold PoCL build each, against 18 in a batch), and against a guess that moves
the search (a replay would no longer match the recorded curves)."""

import itertools

from cltune.drive.replay import RecordedSpace
from cltune.results.recorded import Point, Recorded
from cltune.search import strategies, surrogate
from cltune.search.strategies import BudgetExhausted, Search


def bowl() -> Recorded:
    params = [("a", tuple(range(6))), ("b", tuple(range(6))), ("c", tuple(range(3)))]
    points = {k: Point(1.0 + (k[0] - 4) ** 2 + 0.5 * abs(k[1] - 2) + 0.1 * k[2], 1.0)
              for k in itertools.product(*(v for _, v in params))}
    return Recorded("bowl", params, points)


def run_model(batch: int = 1, budget: int = 40) -> list:
    recorded = bowl()
    space = RecordedSpace.of(recorded)
    calls = []

    def evaluate(setting, upcoming=()):
        if len(calls) >= budget:
            raise BudgetExhausted
        calls.append((setting.key, [s.key for s in upcoming]))
        return recorded.points[tuple(setting.values[n] for n, _ in recorded.params)].time

    def evaluate_many(settings):
        return [evaluate(s) for s in settings]

    search = Search(space, None, None, 0, evaluate, lambda s: any(k == s.key for k, _ in calls),
                    evaluate_many if batch > 1 else None, batch)
    try:
        strategies.model(search)
    except BudgetExhausted:
        pass
    return calls


def test_model_announces_its_guess_of_the_next_point(monkeypatch):
    monkeypatch.setattr(surrogate, "MODEL_POOL", 20)  # global proposals among a random 20: the rng in use
    calls = run_model()
    assert len({k for k, _ in calls}) == len(calls) == 40  # no point twice
    after = calls[surrogate.MODEL_INIT:]
    hits = 0
    for i, (key, upcoming) in enumerate(after[:-1]):
        assert len(upcoming) == 1 and upcoming[0] != key, f"proposal {surrogate.MODEL_INIT + i} announced {upcoming}"
        assert upcoming[0] not in {k for k, _ in calls[:surrogate.MODEL_INIT + i]}  # never a measured point
        hits += upcoming[0] == after[i + 1][0]
    assert hits >= 5, f"the guess was the next point {hits} times of {len(after) - 1}"


def test_the_guess_leaves_the_proposals_as_they_were(monkeypatch):
    monkeypatch.setattr(surrogate, "MODEL_POOL", 20)
    monkeypatch.setattr(strategies, "MODEL_GUESS", False)
    without = [k for k, _ in run_model()]
    monkeypatch.setattr(strategies, "MODEL_GUESS", True)
    assert [k for k, _ in run_model()] == without


def test_a_farm_still_gets_one_point_per_worker():
    calls = run_model(batch=3)
    assert len({k for k, _ in calls}) == len(calls) == 40
    assert all(up == [] for _, up in calls)  # a farm measures them side by side: nothing to announce
