"""setting="best" on a shape that was never tuned: the nearest tuned shape its family accepts, else the
default; best_setting says which rule chose."""


import cltune
from cltune.core.problem import Problem
from cltune.results.nearest import problem_from_key
from tests.fakes import FAKE_INFO

DIRECT = {"BLOCK_K": 8, "BLOCK_W": 4, "VEC": 4, "PIXELS": "tile", "BLOCK_H": 2}
WINOGRAD = {"TILE": 2}


def db(tmp_path, entries):
    from cltune.results import store

    return store.put_best([{"device": "Fake GPU", "platform": "Fake Platform", "driver": "1.0", "target": "",
                            "measured": "2026-01-01", **e} for e in entries], tmp_path / "best.sqlite")


def conv(c, h, k=None, r=3, stride=1, groups=1, act="relu"):
    k = k or c
    return Problem.from_shapes([1, c, h, h], [k, c // groups, r, r], stride, r // 2, 1, groups, True, act)


def test_problem_keys_parse_back():
    for p in (conv(16, 16), conv(32, 8, groups=32), Problem(2, 3, 9, 7, 5, 3, 1, 2, 1, 1, 0, 2, 1, 1, False,
                                                            "relu6", 2)):
        assert problem_from_key(p.key) == p
    assert problem_from_key("no_such_key") is None


def test_untuned_shape_takes_the_nearest_tuned_shape_its_family_accepts(tmp_path):
    """Guards against the nearest entry's setting being used where its family refuses the problem
    (Winograd tuned on a stride-1 layer, asked for a 1x1 or strided one) and against the farther
    of two tuned shapes winning."""
    path = db(tmp_path, [
        {"problem": conv(64, 56).key, "setting": "near", "family": "direct", "params": DIRECT},
        {"problem": conv(512, 7).key, "setting": "far", "family": "direct", "params": {**DIRECT, "BLOCK_K": 16}},
        {"problem": conv(128, 28, stride=2).key, "setting": "wino_s2?", "family": "winograd", "params": WINOGRAD},
    ])
    asked = conv(128, 28)
    choice = cltune.best_setting("Fake GPU", asked, path, device=FAKE_INFO)
    assert (choice["match"], choice["setting"], choice["tuned_problem"]) == ("nearest", "near", conv(64, 56).key)
    exact = cltune.best_setting("Fake GPU", conv(64, 56), path, device=FAKE_INFO)
    assert (exact["match"], exact["setting"]) == ("exact", "near")


def test_nothing_similar_tuned_falls_back_to_the_default_for_the_layers_kind(tmp_path):
    """Guards against a depthwise layer being handed a dense default it cannot run (the ladder's
    unroll_s1 computes groups=1 only)."""
    path = db(tmp_path, [{"problem": conv(64, 56).key, "setting": "near", "family": "direct", "params": DIRECT}])
    dense = cltune.best_setting("Fake GPU", conv(64, 56, r=1), path, device=FAKE_INFO)
    assert (dense["match"], dense["setting"]) == ("default", "unroll_s1")
    dw = cltune.best_setting("Fake GPU", conv(32, 56, groups=32), path, device=FAKE_INFO)
    assert (dw["match"], dw["family"], dw["setting"]) == ("default", "depthwise", "depthwise_mali")


def test_conv2d_best_runs_the_nearest_tuned_setting_on_an_untuned_shape(tmp_path, monkeypatch, runner):
    """The API end to end on the device: the nearest shape's setting computes the right answer."""
    import numpy as np

    from cltune.core.problem import reference_conv2d

    monkeypatch.setenv("CLTUNE_HOME", str(tmp_path))
    info = runner.info
    tuned = conv(8, 12)
    entry = {"device": info.name, "platform": info.platform, "driver": info.driver, "target": info.target,
             "problem": tuned.key, "setting": "tuned_direct", "family": "direct", "params": DIRECT,
             "measured": "2026-01-01"}
    from cltune.results import store

    store.put_best([entry])
    asked = conv(8, 10, k=16)
    choice = cltune.best_setting(info.name, asked, target=info.target, device=info)
    assert (choice["match"], choice["setting"]) == ("nearest", "tuned_direct")
    x, w, b = asked.make_inputs(1)
    out = cltune.conv2d(x, w, b, padding=1, activation="relu", setting="best", device=str(info.index))
    np.testing.assert_allclose(out, reference_conv2d(asked, x, w, b), rtol=1e-4, atol=1e-4)
