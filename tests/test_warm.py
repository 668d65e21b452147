"""A warm start (--warm): other devices' fastest settings of the same space measured first, in the budget."""

import gzip
import json

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.drive.replay import RecordedSpace
from cltune.results import recorded, rows as results, schema
from cltune.search.warm import Guarded, plan, warm_settings


def _cache(path, times: dict, knobs=("a", "b")):
    """A Kernel Tuner cache of a 2-knob space: (a, b) -> time (None: failed)."""
    params = {"a": [1, 2, 3, 4], "b": [1, 2, 3]}
    cache = {}
    for values, t in times.items():
        entry = dict(zip(knobs, values))
        entry.update(time=t if t is not None else "RuntimeFailedConfig", times=[t] if t else [], compile_time=1.0,
                     verification_time=0, benchmark_time=1.0, framework_time=0)
        cache[",".join(map(str, values))] = entry
    doc = {"tune_params_keys": list(knobs), "tune_params": {k: params[k] for k in knobs}, "cache": cache}
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def _target(tmp_path):
    """The space replayed: every point; its optimum (4, 1) is nowhere near the sources' fastest."""
    times = {(a, b): 10.0 + a + b for a in range(1, 5) for b in range(1, 4)}
    times[(4, 1)] = 1.0
    times[(2, 2)] = None  # failed here
    return _cache(tmp_path / "target.json.gz", times)


def test_each_sources_fastest_valid_points_come_first_interleaved_by_rank(tmp_path):
    space = RecordedSpace.of(recorded.load(_target(tmp_path)))
    one = recorded.load(_cache(tmp_path / "one.json.gz", {(1, 1): 5.0, (2, 2): 1.0, (3, 3): 2.0, (1, 2): None}))
    two = recorded.load(_cache(tmp_path / "two.json.gz", {(3, 3): 1.0, (1, 3): 2.0, (4, 3): 3.0}))
    got = [(s.values["a"], s.values["b"]) for s in warm_settings(space, [one, two])]
    # one's fastest (2, 2) is a point of the target too (it failed there, but it is valid): ranks 1, then 2,
    # (3, 3) only once
    assert got == [(2, 2), (3, 3), (1, 3)]
    assert [(s.values["a"], s.values["b"]) for s in warm_settings(space, [two], per=3)] == [(3, 3), (1, 3), (4, 3)]
    first, later = plan(space, [one, two])  # the runners-up: each source's next, interleaved by rank
    assert first == warm_settings(space, [one, two])
    assert [(s.values["a"], s.values["b"]) for s in later] == [(1, 1), (4, 3)]


def test_a_source_without_the_spaces_knobs_is_one_line_naming_it(tmp_path):
    space = RecordedSpace.of(recorded.load(_target(tmp_path)))
    other = recorded.load(_cache(tmp_path / "other.json.gz", {(1,): 1.0}, knobs=("a",)))
    with pytest.raises(UserError, match=r"other: no knob b of space .*expected results of the same kernel"):
        warm_settings(space, [other])


def test_replay_measures_the_warm_points_first_and_within_the_budget(tmp_path):
    target = _target(tmp_path)
    src = _cache(tmp_path / "src.json.gz", {(4, 1): 3.0, (3, 1): 4.0, (1, 1): 9.0})
    out = tmp_path / "r.csv"
    res = CliRunner().invoke(main, ["replay", str(target), "--seeds", "3", "--budget", "5", "--warm", str(src),
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "warm start: 2 points of SPACE" in res.output
    import csv

    rows = list(csv.DictReader(open(out)))
    for seed in "012":
        mine = [r for r in rows if r["seed"] == seed]
        assert len(mine) == 5  # the warm points are part of the budget
        assert [float(r["time"]) for r in mine[:2]] == [1.0, 14.0]  # (4, 1) and (3, 1) here, in the source's order
    # SPACE as its own warm start is refused before anything runs
    res = CliRunner().invoke(main, ["replay", str(target), "--warm", str(target)])
    assert res.exit_code != 0 and "is SPACE itself" in res.output and "Traceback" not in res.output


def test_sweep_measures_the_fastest_settings_of_another_run_first(tmp_path):
    source = tmp_path / "a.csv"
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--strategy", "random", "--budget", "5", "--seed", "3",
                                    "--no-isolation", "--rerank", "0", "--out", str(source)])
    assert res.exit_code == 0, res.output
    a = results.load(source)
    baseline = a[a["strategy"] == "listed"]["key"].tolist()
    ok = a[(a["phase"] == "search") & (a["status"] == "ok")].sort_values(schema.TIME)
    expected = [k for k in ok["key"].tolist()[:2] if k not in baseline]  # the baseline is measured already

    def searched(*warm):  # rows are written as points finish their timing windows: compared as sets
        out = tmp_path / f"b{len(warm)}.csv"
        res = CliRunner().invoke(main, ["sweep", "tune_small", "--strategy", "random", "--budget", str(len(expected)),
                                        "--seed", "11", "--no-isolation", "--rerank", "0", *warm, "--out", str(out)])
        assert res.exit_code == 0, res.output
        b = results.load(out)
        return set(b[b["strategy"].isin(["random", "warm"])]["key"]), set(b[b["strategy"] == "warm"]["key"])

    assert searched("--warm", str(source)) == (set(expected), set(expected))  # labelled warm in the file
    assert searched()[0] != set(expected)  # the same seed without it
    # a file it cannot read is one line, before anything is measured
    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,results,file\n")
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--budget", "3", "--warm", str(bad),
                                    "--out", str(tmp_path / "c.csv")])
    assert res.exit_code != 0 and "bad.csv" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "c.csv").exists()
    # ... and so is one of another kernel's knobs, named, once the device is open and before any row
    other = _cache(tmp_path / "other.json.gz", {(1, 1): 1.0})
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--budget", "3", "--no-isolation", "--warm", str(other),
                                    "--out", str(tmp_path / "d.csv")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "no knob MACROS, UNROLL, SPLIT, LWS_X, LWS_Y of space conv2d (it has a, b)" in res.output
    assert not (tmp_path / "d.csv").exists() or not results.load(tmp_path / "d.csv").shape[0]


def test_model_takes_every_other_proposal_from_a_search_blind_to_the_warm_points(tmp_path, monkeypatch):
    from cltune.drive.replay import replay, warm_start
    from cltune.search import surrogate

    times = {(a, b): 1.0 + abs(a - 3) + abs(b - 3) for a in range(1, 9) for b in range(1, 9)}
    params = {"a": list(range(1, 9)), "b": list(range(1, 9))}
    target = tmp_path / "t.json.gz"
    with gzip.open(target, "wt") as fh:
        json.dump({"tune_params_keys": ["a", "b"], "tune_params": params, "cache": {
            f"{a},{b}": {"a": a, "b": b, "time": t, "times": [t], "compile_time": 1.0, "verification_time": 0,
                         "benchmark_time": 1.0, "framework_time": 0} for (a, b), t in times.items()}}, fh)
    space = recorded.load(target)
    source = recorded.load(_cache(tmp_path / "s.json.gz", {(4, 1): 1.0, (4, 2): 2.0}))  # away from (3, 3)
    seen = []
    real = surrogate.Proposer.propose

    def spy(self, enc, cost, left, width=1, taken=()):
        seen.append((id(self), set(cost), set(taken)))
        return real(self, enc, cost, left, width, taken)

    monkeypatch.setattr(surrogate.Proposer, "propose", spy)
    first, later = warm_start(space, [source])
    assert not later  # the source has 2 points: no runners-up
    trace = replay(space, "model", 0, budget=40, warm=first, later=later)
    assert trace.times[:2] == [times[(4, 1)], times[(4, 2)]] and len(trace.times) == 40
    names = [n for n, _ in space.params]
    keys = list(space.points)
    warm = {keys.index(k) for k in keys if dict(zip(names, k)) in ({"a": 4, "b": 1}, {"a": 4, "b": 2})}
    assert len(warm) == 2
    kinds = {}
    for who, cost, taken in seen:  # its proposals and its guesses of the next (peek)
        knows = warm <= cost
        assert knows or (not cost & warm and warm <= taken)  # blind: neither its data nor its neighbours
        kinds.setdefault(who, set()).add(knows)
    assert sorted(kinds.values(), key=sorted) == [{False}, {True}]  # one proposer of each kind, each always so
    blind = sum(not (warm <= cost) for _, cost, _ in seen)
    assert abs(2 * blind - len(seen)) <= 2  # every other


class _First:
    """A stand-in proposer: the first unmeasured, untaken point of `left`, as many as asked."""

    def propose(self, enc, cost, left, width=1, taken=()):
        return [i for i in left if i not in cost and i not in taken][:width]

    def peek(self, enc, cost, left, taken):
        return self.propose(enc, cost, left, 1, taken)


def test_model_measures_the_sources_runners_up_on_its_knowing_turns_only_while_stalled():
    left = list(range(100))
    g = Guarded(_First, warm={0, 1}, later=[50, 40, 60])
    climbing = {i: 100.0 - i for i in range(30)}  # its best gained 14% over the last 12 points
    assert g.propose(None, climbing, left) == [30] and g.later == [50, 40, 60]
    flat = {i: 1.0 for i in range(30)}  # stalled: no gain over the last 12
    assert g.peek(None, flat, left, ()) == [50] and g.later == [50, 40, 60]  # a guess takes nothing
    assert g.propose(None, flat, left) == [50] and 50 in g.warm
    flat[50] = 1.0
    assert g.propose(None, flat, left) == [30]  # the blind half's turn
    flat[30] = 1.0
    flat.update({40: 1.0, 41: 1.0})  # 40 measured already: skipped
    assert g.propose(None, flat, left, width=2) == [60, 31]
    flat.update({31: 1.0, 60: 1.0})
    assert g.propose(None, flat, left) == [32]  # none left unmeasured: the knowing half


def test_tune_kernel_starts_from_the_library_then_takes_warm_files(tmp_path, monkeypatch):
    """One kernel tuned twice: first from the library (a patched one holding it on another device), then
    from the first run's results file."""
    import cltune
    from cltune.results import library
    from .test_library import SRC, _scale_args, _shelf

    monkeypatch.setattr(library, "ROOT", tmp_path / "shelf")
    _shelf(tmp_path, "other gpu", 64)
    n, args, knobs, answer = _scale_args()
    cltune.tune_kernel("scale", SRC, n, args, knobs, answer=answer, strategy="random", budget=3, iterations=2,
                       out=tmp_path / "a.csv")
    a = results.load(tmp_path / "a.csv")
    a = a[a["phase"] == "search"]
    labelled = a[a["strategy"] == "warm"]["params"].map(lambda p: json.loads(p)["block_size_x"]).tolist()
    assert labelled == [64, 128] and len(a) == 3  # the library's 2 fastest first, in the budget
    ok = a[a["status"] == "ok"].sort_values(schema.TIME)
    fastest = set(ok["key"].tolist()[:2])
    cltune.tune_kernel("scale", SRC, n, args, knobs, answer=answer, strategy="random", budget=2, iterations=2,
                       out=tmp_path / "b.csv", warm=tmp_path / "a.csv")
    b = results.load(tmp_path / "b.csv")
    b = b[b["phase"] == "search"]
    assert set(b["key"]) == fastest and set(b["strategy"]) == {"warm"}
