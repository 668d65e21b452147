"""Results you can trust under bad input (issue 11), on the fake device: a results file knows the
sweep it belongs to, damaged lines never become rows, and nothing already measured is lost."""

import warnings
from dataclasses import replace

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cltune.cli.commands import main
from cltune.loader import config
from cltune.core.errors import UserError
from cltune.core.records import Status
from cltune.results import rows as results
from cltune.results import schema
from cltune.drive import tune

from .fakes import FAKE_INFO, FakeBackend
from .test_tuning import make_config


def sweep(cfg, path, backend=None, **opts):
    backend = backend or FakeBackend()
    tune.run(cfg, tune.Options(isolation=False, rerank=0, **opts), backend=backend)
    return backend


@pytest.fixture
def written(tmp_path):
    """A real results file of the fake device (header, columns, 7 rows) and its config."""
    cfg = make_config(budget=6, strategy="random")
    path = tmp_path / "r.csv"
    sweep(cfg, path, out=path)
    return cfg, path


def one_line(res):
    return res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output


# 1. A results file knows what it holds ---------------------------------------------------------

def test_the_header_names_schema_config_problem_and_device_beside_a_plain_csv(written):
    """The header lives in the .device.json sidecar: plain pandas.read_csv, spreadsheets and csvkit
    read the file's first line as its column names (the header used to be that line)."""
    import json

    import pandas as pd

    cfg, path = written
    columns = path.read_text().splitlines()[0]
    header = json.loads(path.with_suffix(".device.json").read_text())["results"]
    assert header == schema.make_header("fake", cfg.problem.key, FAKE_INFO)
    assert header["device"]["driver"] == "1.0" and header["schema"] == schema.SCHEMA_VERSION
    assert columns.split(",") == results.COLUMNS and len(results.load(path)) == 7
    assert list(pd.read_csv(path).columns) == results.COLUMNS and len(pd.read_csv(path)) == 7


def test_a_file_with_its_header_on_its_first_line_is_still_read_and_resumed(written, tmp_path):
    """Files written before the header moved to the sidecar."""
    import json

    cfg, path = written
    old = tmp_path / "old.csv"
    header = json.loads(path.with_suffix(".device.json").read_text())["results"]
    old.write_text(f"{schema.MAGIC} {json.dumps(header)}\n" + path.read_text())
    assert len(results.load(old)) == 7
    assert sweep(cfg, old, resume=old).measured == []
    with pytest.raises(UserError, match="cannot resume: it holds config 'fake'"):
        sweep(replace(cfg, name="other"), old, resume=old)


def test_resume_with_another_config_is_refused_naming_it_and_nothing_is_appended(written):
    # Resuming `quick`'s file with `tune_small` used to append tune_small's rows to it.
    cfg, path = written
    before = path.read_bytes()
    other = replace(cfg, name="tune_small")
    with pytest.raises(UserError, match=r"cannot resume: it holds config 'fake', this sweep's is 'tune_small'"):
        sweep(other, path, resume=path)
    assert path.read_bytes() == before


def test_resume_with_another_problem_is_refused(written):
    cfg, path = written
    other = config.parse({"name": "fake", "problem": {"input": [1, 4, 9, 9], "weight": [4, 4, 3, 3]},
                          "setting": [{"name": "normal"}]}, "fake.toml")
    backend = FakeBackend()
    with pytest.raises(UserError, match=r"cannot resume: it holds problem 'n1_c4_h8_w8.*this sweep's is 'n1_c4_h9_w9"):
        sweep(other, path, backend, resume=path)
    assert backend.measured == []


def test_out_naming_an_existing_results_file_is_refused_before_the_device_opens(written):
    # --out on an existing file used to append a second copy of every setting.
    cfg, path = written
    before = path.read_bytes()
    with pytest.raises(UserError, match="already holds results; resume it with --resume"):
        sweep(cfg, path, out=path)
    res = CliRunner().invoke(main, ["sweep", "quick", "--out", str(path), "--device", "no-such-device"])
    assert one_line(res) and f"{path}: already holds results" in res.output  # not the device's error
    assert path.read_bytes() == before


def test_the_device_sidecar_of_another_device_is_never_overwritten(tmp_path):
    # A new CSV whose .device.json describes another device: refused before any file is written.
    cfg = make_config(budget=2)
    sweep(cfg, tmp_path / "a.csv", out=tmp_path / "a.csv")
    sidecar = tmp_path / "a.device.json"
    (tmp_path / "a.csv").unlink()
    before = sidecar.read_text()
    with pytest.raises(UserError, match=r"a.device.json: describes another device \(name 'Fake GPU', "
                                        r"this sweep's is 'Mali-T860'\)"):
        sweep(cfg, tmp_path / "a.csv", FakeBackend(info=replace(FAKE_INFO, name="Mali-T860")),
              out=tmp_path / "a.csv")
    assert sidecar.read_text() == before and not (tmp_path / "a.csv").exists()


def test_a_file_without_a_header_is_resumed_by_its_rows_identity(written, tmp_path):
    # Files of schema 1 (no header line) still resume, and are refused for another device.
    cfg, path = written
    old = tmp_path / "old.csv"
    old.write_text(path.read_text())  # no sidecar beside it
    assert len(results.load(old)) == 7
    again = sweep(cfg, old, resume=old)
    assert again.measured == []
    with pytest.raises(UserError, match="device driver '1.0', this sweep's device has '2.0'"):
        sweep(cfg, old, FakeBackend(info=replace(FAKE_INFO, driver="2.0")), resume=old)


def test_a_line_cut_inside_a_quoted_field_mid_file_is_skipped_by_line_number(written):
    cfg, path = written
    lines = path.read_text().splitlines(True)
    cut = lines[3][: lines[3].index('"{') + 6] + "\n"  # line 4 ends inside its quoted params
    path.write_text("".join(lines[:3] + [cut] + lines[4:]))
    with pytest.warns(results.MalformedLineWarning, match=r"1 malformed line\(s\) skipped \(line 4: "):
        df = results.load(path)
    assert len(df) == 6
    res = CliRunner().invoke(main, ["show", str(path)])
    assert res.exit_code == 0 and "warning: " in res.output and "line 4" in res.output


def test_invalid_utf8_and_a_foreign_line_are_skipped_not_turned_into_rows(written):
    cfg, path = written
    data = path.read_bytes().splitlines(True)
    data[4] = data[4][:30] + b"\xff\xfe" + data[4][32:]
    data.insert(6, b"setting,status\n")
    path.write_bytes(b"".join(data))
    with pytest.warns(results.MalformedLineWarning) as caught:
        df = results.load(path)
    message = str(caught[0].message)
    assert "line 5: not UTF-8" in message and "line 7: 2 fields, expected" in message
    assert len(df) == 6 and set(df["status"]) == {"ok"}


@pytest.mark.parametrize("command", ["best", "report", "show", "plot"])
def test_a_foreign_csv_is_one_line_for_every_reader(tmp_path, command):
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("setting,status\nnormal,ok\n")
    extra = {"report": ["--out", str(tmp_path / "x.html")], "plot": ["--kind", "ladder"]}
    args = [command, str(foreign)] + extra.get(command, [])
    res = CliRunner().invoke(main, args, env={"CLTUNE_HOME": str(tmp_path)})
    assert one_line(res), res.output
    assert "foreign.csv: line 1: not a cltune results file (no device" in res.output


# A random corruption of a real results file: reading it gives exactly the intact rows (or one
# UserError), and resuming it never loses a byte of what was there.
corruption = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(["set", "insert", "delete"]),
                                st.sampled_from([b"\n", b",", b'"', b"\xff", b"\x00", b"x", b"1", b"\r"])),
                      min_size=1, max_size=3)


def corrupt(data: bytes, edits) -> bytes:
    for where, kind, byte in edits:
        i = int(where * len(data))
        data = (data[:i] + byte + data[i + 1:] if kind == "set" else
                data[:i] + byte + data[i:] if kind == "insert" else data[:i] + data[i + 1:])
    return data


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=corruption)
def test_random_corruption_yields_the_intact_rows_or_one_line_and_resume_loses_nothing(written, edits):
    cfg, path = written
    original = path.read_bytes()
    clean = results.load(path).set_index("key")
    bad = path.with_name("bad.csv")
    bad.write_bytes(corrupt(original, edits))
    lines = original.splitlines(True)
    kept = bad.read_bytes()
    complete = kept[: kept.rfind(b"\n") + 1]  # a cut last line is dropped, on reading and resuming
    head_intact = complete.splitlines(True)[:2] == lines[:2]
    intact = [ln for ln in lines[2:] if ln in complete.splitlines(True)[2:]] if head_intact else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            df = results.load(bad)
        except UserError as exc:
            assert str(exc).startswith(f"{bad}: line ") and "\n" not in str(exc)
            df = None
    if df is not None:
        assert len(df) <= len(complete.splitlines()) - 1
        intact_keys = [ln.decode().rstrip().rsplit(",", 1)[1] for ln in intact]
        got = df.set_index("key") if intact_keys else None
        for key in intact_keys:  # every intact row, exactly as written
            assert got.loc[key, "setting"] == clean.loc[key, "setting"]
            assert got.loc[key, "run_ms_median"] == clean.loc[key, "run_ms_median"]
    backend = FakeBackend()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sweep(cfg, bad, backend, resume=bad)
        except UserError as exc:
            assert "\n" not in str(exc)
            assert bad.read_bytes() == kept  # refused: untouched
            return
    assert bad.read_bytes().startswith(complete)  # nothing that was there is lost
    assert len(backend.measured) <= 7 - len(intact)


# 2. Failed rows: retried on purpose -------------------------------------------------------------

def test_retry_failed_measures_the_failed_rows_again_and_the_new_row_counts(tmp_path):
    # --resume used to skip failed rows forever.
    cfg = make_config(budget=5, strategy="exhaustive")
    probe = sweep(cfg, tmp_path / "probe.csv", out=tmp_path / "probe.csv")
    order = probe.measured[1:]  # the space's points in the search's order, after the `normal` setting
    path = tmp_path / "r.csv"
    sweep(cfg, path, FakeBackend(fail={order[1].params_json: Status.ERROR}), out=path)
    assert list(results.load(path)["status"]).count("error") == 1
    plain = sweep(cfg, path, resume=path)
    assert plain.measured == []
    again = sweep(cfg, path, resume=path, retry_failed=True)
    assert [s.key for s in again.measured] == [order[1].key]
    df = results.load(path)
    assert len(df) == 6 and df["key"].is_unique and set(df["status"]) == {"ok"}
    assert len(path.read_text().splitlines()) == 1 + 7  # the failed row stays in the file


def test_retry_failed_without_resume_and_a_negative_seed_are_refused_before_the_sweep(tmp_path):
    res = CliRunner().invoke(main, ["sweep", "quick", "--retry-failed", "--device", "none"])
    assert one_line(res) and "--retry-failed measures again the failed rows" in res.output
    res = CliRunner().invoke(main, ["sweep", "quick", "--seed", "-1"])
    assert res.exit_code == 2 and "--seed" in res.output and "Traceback" not in res.output
    with pytest.raises(UserError, match=r"seed: expected an int in \[0, 4294967295\], got -1"):
        sweep(make_config(), tmp_path / "s.csv", out=tmp_path / "s.csv", seed=-1)
    assert not any(tmp_path.iterdir())


# 3. Sizes never wrap; a refused problem leaves no file --------------------------------------------

def test_a_2_to_the_64_element_input_is_refused_and_leaves_no_files(tmp_path, monkeypatch):
    # int(np.prod(...)) wrapped to 0 and passed the max-allocation check; every row then crashed.
    monkeypatch.chdir(tmp_path)
    cfg = config.parse({"problem": {"input": [1, 1, 2**32, 2**32], "weight": [1, 1, 1, 1]},
                        "setting": [{"name": "normal"}]}, "huge.toml")
    assert cfg.problem.min_bytes == 4 * (2**64 + 1 + 2**64 + 1)
    backend = FakeBackend()
    with pytest.raises(UserError, match=r"input \[1, 1, 4294967296, 4294967296\] needs 73786976294838206464 bytes"):
        sweep(cfg, None, backend)
    assert backend.measured == [] and list(tmp_path.iterdir()) == []


# 4. Results paths stay inside results/ ------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../escaped", "/etc/passwd", "..", "a/b\\c d", "ünïcode"])
def test_default_results_path_stays_inside_results(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = replace(make_config(budget=1), name=name)
    path = tune.default_path(cfg, FAKE_INFO)
    assert path.parent.name == "results" and path.parent.parent == type(path)(".")
    assert path.name.endswith(".csv") and "/" not in path.name and ".." not in path.name
    sweep(cfg, None)
    assert [p.parent.name for p in tmp_path.rglob("*.csv")] == ["results"]


def test_a_name_with_a_nul_or_control_character_is_one_line():
    for bad in ("a\0b", "tab\there"):
        with pytest.raises(UserError, match=r"x.toml: name: expected a non-empty string without control"):
            config.parse({"name": bad, "problem": {"input": [1, 1, 4, 4], "weight": [1, 1, 1, 1]},
                          "setting": [{"name": "n"}]}, "x.toml")


# 6. Values checked with their type; NaN and infinity refused -------------------------------------

BASE = "[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 2, 3, 3]\n"


@pytest.mark.parametrize("text, message", [
    (BASE + "[[setting]]\nname = 'a'\nparams = { MACROS = 4.0 }", "setting[0].params: parameter MACROS must be one of [0, 1, 2, 3, 4], got 4.0"),
    (BASE + "[[space]]\nfamily = 'conv2d'\nparams = { UNROLL = [0, 1.0] }", "space[0].params.UNROLL: parameter UNROLL must be one of [0, 1, 2], got 1.0"),
    (BASE + "[run]\ntimeout_s = nan\n[[setting]]\nname = 'a'", "run.timeout_s: expected a finite number > 0, got nan"),
    (BASE + "[run]\ntimeout_s = inf\n[[setting]]\nname = 'a'", "run.timeout_s: expected a finite number > 0, got inf"),
    (BASE + "[run]\ntime_limit_s = nan\n[[setting]]\nname = 'a'", "run.time_limit_s: expected a finite number > 0"),
    (BASE + "[run]\nseed = -1\n[[setting]]\nname = 'a'", "run.seed: expected an int in [0, 4294967295], got -1"),
    (BASE + "[[space]]\nfamily = 'conv2d'\nparams = { MACROS = [0, 1] }\nconstraints = { never = 'MACROS / 0 > 1' }",
     "space[0].constraints: reject every one of the space's 2 points (first: constraint never cannot be evaluated: division by zero)"),
    (BASE + "[[space]]\nfamily = 'conv2d'\nparams = { MACROS = [0, 1] }\nconstraints = { none = 'MACROS > 5' }",
     "space[0].constraints: reject every one of the space's 2 points"),
    ("x = " + "[" * 1000 + "]" * 1000, "arrays or tables nested too deeply"),
    (BASE + "[[space]]\nfamily = 'conv2d'\nparams = { MACROS = [0, 1] }\nconstraints = { deep = '" + "(" * 400 + "1" + ")" * 400 + "' }",
     "space[0].constraints.deep: parentheses, 'not' or '-' nested too deeply"),
])
def test_bad_values_are_one_line_naming_file_and_key(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    res = CliRunner().invoke(main, ["settings", str(path)])
    assert one_line(res), res.output
    assert message in res.output and str(path) in res.output


@pytest.mark.parametrize("option", ["--timeout", "--time-limit"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_nan_and_infinite_seconds_are_refused_on_the_command_line(option, value):
    res = CliRunner().invoke(main, ["sweep", "quick", option, value])
    assert res.exit_code == 2 and "expected a finite number of seconds > 0" in res.output


def test_a_constraint_of_3000_terms_works_and_one_failing_for_some_points_warns_once(tmp_path):
    long = " or ".join(f"MACROS == {i}" for i in range(3000))
    data = {"problem": {"input": [1, 2, 5, 5], "weight": [2, 2, 3, 3]},
            "space": [{"family": "conv2d", "params": {"MACROS": [0, 1, 2, 4], "UNROLL": [0, 1]},
                       "constraints": {"long": long, "odd": "4 / (MACROS - 1) > 0"}}]}
    with pytest.warns(config.ConstraintWarning) as caught:
        cfg = config.parse(data, "c.toml")
    assert len(caught) == 1
    assert str(caught[0].message) == ("c.toml: space[0].constraints: constraint odd cannot be evaluated: division "
                                      "by zero at MACROS=1 UNROLL=0 (2 of the 8 points checked fail to evaluate; "
                                      "they are skipped)")
    assert sorted({s.values["MACROS"] for s in cfg.spaces[0].valid_settings(cfg.problem)}) == [2, 4]


# 7. One line for the unforeseen, the traceback with --debug ---------------------------------------

def test_an_unforeseen_exception_is_one_line_and_debug_shows_the_traceback(monkeypatch, written):
    _, path = written

    def boom(*a, **k):
        raise KeyError("a bug cltune did not foresee")
    monkeypatch.setattr(results, "format_table", boom)
    res = CliRunner().invoke(main, ["show", str(path)])
    assert one_line(res) and "KeyError: 'a bug cltune did not foresee' (cltune --debug shows" in res.output
    res = CliRunner().invoke(main, ["--debug", "show", str(path)])
    assert isinstance(res.exception, KeyError)


def test_an_unwritable_out_and_a_device_file_are_one_line(tmp_path):
    # --out /dev/full and an --out that cannot be created used to end in a traceback.
    cfg = make_config(budget=1)
    (tmp_path / "plain").write_text("")
    for out, message in ((tmp_path / "plain" / "r.csv", "cannot write results"),
                         ("/dev/full", "/dev/full: not a regular file")):
        with pytest.raises(UserError, match=message):
            sweep(cfg, out, out=out)


# 5. Spaces too large to list are sampled ---------------------------------------------------------

HUGE = {"family": "conv2d", "params": {"MACROS": [0, 1, 2, 3, 4], "UNROLL": [0, 1, 2], "MAD24": [0, 1],
                                       "LWS_X": list(range(1, 201)), "LWS_Y": list(range(1, 201)),
                                       "LWS_Z": list(range(1, 601))},
        "constraints": {"groups_in_reach": "LWS_X * LWS_Y * LWS_Z <= 4000000"}}


@pytest.mark.parametrize("strategy", ["random", "tpe", "exhaustive", "model", "local"])
def test_a_space_of_720_million_points_measures_its_budget_without_listing_it(tmp_path, strategy):
    # Every point used to be listed first (progress bar and strategies): nothing written in 30 s.
    import time

    cfg = make_config(budget=3, strategy=strategy, extra_space=HUGE)
    assert cfg.spaces[0].size == 720_000_000 and not cfg.spaces[0].countable
    t0 = time.monotonic()
    backend = sweep(cfg, None, out=tmp_path / "h.csv")
    assert time.monotonic() - t0 < 20
    searched = [s for s in backend.measured if s.name != "normal"]
    assert len(searched) == 3 and len({s.key for s in searched}) == 3
    assert all(v["LWS_X"] * v["LWS_Y"] * v["LWS_Z"] <= 4000000 for v in (s.values for s in searched))


def test_settings_of_a_huge_space_prints_its_size_and_a_sample_instead_of_listing(tmp_path):
    path = tmp_path / "huge.toml"
    params = "\n".join(f"{k} = {v}" for k, v in HUGE["params"].items())
    path.write_text(BASE + "[[space]]\nfamily = 'conv2d'\n[space.params]\n" + params +
                    "\n[space.constraints]\ngroups_in_reach = 'LWS_X * LWS_Y * LWS_Z <= 4000000'\n")
    res = CliRunner().invoke(main, ["settings", str(path)])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("space conv2d"))
    assert line.startswith("space conv2d: 720000000 points (too many to list), ")
    assert line.endswith(" of 1000 sampled pass the constraints")
