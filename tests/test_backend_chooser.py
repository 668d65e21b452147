"""One chooser opens every backend (measure/backend.open_backend): a new kind of backend (a board
over adb or ssh) is a module with an opener and one line in KINDS. The bug it guards against: a new
backend touched five files (tune.open_backend, the farm's sweep, the race, the API, peak)."""

import pytest

from cltune.core.errors import UserError
from cltune.measure import backend
from cltune.results import rows as results
from cltune.drive import tune

from .fakes import FakeBackend
from .test_tuning import make_config

OPENED = []


def open_fake(arg, cfg, opts, **kwargs):
    """The fake kind's opener: what a board's module would define (`adb:SERIAL` -> its backend)."""
    OPENED.append((arg, opts.device if opts else kwargs.get("device")))
    return FakeBackend()


@pytest.mark.filterwarnings("ignore::UserWarning")  # the fake device refuses some points
def test_a_backend_registered_by_one_line_runs_a_sweep(tmp_path, monkeypatch):
    monkeypatch.setitem(backend.KINDS, "fake", "tests.test_backend_chooser:open_fake")  # the one line
    OPENED.clear()
    cfg = make_config(budget=5)
    out = tmp_path / "fake.csv"
    result = tune.run(cfg, tune.Options(backend="fake:board-1", out=out, device="1"))
    assert OPENED == [("board-1", "1")]
    rows = results.load(out)
    assert len(rows) == len(result.rows) >= 6  # the baseline, the budget's 5, the re-ranking
    assert set(rows["device"]) == {"Fake GPU"}


def test_the_options_name_the_spec():
    assert backend.spec_of(tune.Options()) == "local"
    assert backend.spec_of(tune.Options(isolation=False)) == "inproc"
    assert backend.spec_of(tune.Options(farm="local:2")) == "farm:local:2"
    assert backend.spec_of(tune.Options(farm="local:2", backend="fake:x")) == "fake:x"


def test_an_unknown_kind_is_one_line_naming_the_known_ones():
    with pytest.raises(UserError, match=r"backend 'adb:1': expected one of local:\.\.\., inproc:\.\.\., farm:\.\.\."):
        backend.open_backend("adb:1")
