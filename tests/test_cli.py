"""The CLI through click's CliRunner: sweep -> CSV -> show, settings, devices, and bad input."""

import json

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.results import rows as results

from .conftest import expected_rerank


@pytest.fixture(scope="module")
def quick_csv(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "quick.csv"
    res = CliRunner().invoke(main, ["sweep", "quick", "--out", str(out), "--repeat", "2", "--warmup", "0"])
    assert res.exit_code == 0, res.output
    return out, res.output


def test_sweep_prints_the_table_and_writes_csv_and_device_json(quick_csv):
    out, output = quick_csv
    df = results.load(out)
    search = df[df["phase"] == "search"]
    assert list(search["setting"])[:2] == ["normal", "macros_s1"] and len(search) == 11
    assert sorted(df[df["phase"] == "rerank"]["setting"]) == expected_rerank(search)  # interleaved
    assert (df["status"] == "ok").all()
    assert (df["total_ms_median"] >= df["run_ms_median"]).all()
    for col in ("queue_ms_median", "submit_ms_median", "run_ms_min"):
        assert (df[col] >= 0).all()
    assert df["device"].nunique() == 1 and df["source_hash"].str.len().eq(12).all()
    assert "normal" in output and "wrote" in output
    info = json.loads(out.with_suffix(".device.json").read_text())
    assert info["name"] == df["device"][0] and info["compute_units"] >= 1


def test_sweep_says_how_steady_its_timed_launches_were(quick_csv):
    import re

    from cltune.results import schema

    out, output = quick_csv
    search = results.load(out).query("phase == 'search'").to_dict("records")
    slow, launches = schema.slow_launches([schema.samples(r) for r in search])
    line = re.search(r"^timing: (\d+) of (\d+) timed launches \((\d+)%\) ran over 1.3x their setting's fastest(.*)$",
                     output, re.M)
    assert line and (int(line.group(1)), int(line.group(2))) == (slow, launches) and launches >= 2 * len(search)
    assert ("the machine was busy" in line.group(4)) == (slow > 0.10 * launches)


@pytest.mark.parametrize("samples, expected", [
    ([[1.0, 1.0], [2.0, 2.1]], "timing: 0 of 4 timed launches (0%) ran over 1.3x their setting's fastest"),
    ([[1.0, 1.5], [2.0, 2.1, 2.0, 2.0, 2.0]], "timing: 1 of 7 timed launches (14%) ran over 1.3x their "
     "setting's fastest; the machine was busy: settings this close may rank differently in another run "
     "(measure again when it is quieter)"),
    ([[1.0], [2.0]], ""),  # one launch a setting: nothing to compare
])
def test_the_timing_line_counts_slow_launches_and_warns_over_a_tenth(samples, expected):
    from cltune.cli.table import timing_line as _timing_line

    rows = [{"run_ms_samples": " ".join(str(v) for v in s)} for s in samples]
    assert _timing_line(rows) == expected


def test_csv_round_trips_through_show(quick_csv):
    out, _ = quick_csv
    res = CliRunner().invoke(main, ["show", str(out)])
    assert res.exit_code == 0, res.output
    df = results.load(out)
    for name in df["setting"]:
        assert name in res.output
    assert f"{df['run_ms_median'][0]:.3f}" in res.output


def test_show_skips_a_truncated_last_line_with_a_warning(quick_csv, tmp_path):
    out, _ = quick_csv
    cut = tmp_path / "cut.csv"
    data = out.read_text()
    cut.write_text(data[: len(data) - 40])  # power cut in the middle of the last row
    with pytest.warns(results.TruncatedLineWarning):
        df = results.load(cut)
    assert len(df) == len(results.load(out)) - 1


def test_settings_lists_d_options():
    res = CliRunner().invoke(main, ["settings"])
    assert res.exit_code == 0
    assert "-cl-std=CL1.2" in res.output and "-DIN_C=512" in res.output


def test_devices_lists_at_least_one_device():
    res = CliRunner().invoke(main, ["devices"])
    assert res.exit_code == 0 and "[0]" in res.output and "Max compute units" in res.output


@pytest.mark.parametrize("text, message", [
    ("[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 2, 3, 3]\n[[setting]]\nname = 'a'\nparams = { UNROLL = 7 }",
     "setting[0].params: parameter UNROLL must be one of [0, 1, 2], got 7"),
    ("[problem]\ninput = [1, 2, 5]\nweight = [2, 2, 3, 3]\n[[setting]]\nname = 'a'",
     "problem.input: expected a list of 4 positive ints"),
    ("[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 2, 3, 3]\nspeed = 3\n[[setting]]\nname = 'a'",
     "problem.speed: unknown key"),
    ("[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 2, 3, 3]\n[[setting]]\nname = 'a'\n[[setting]]\nname = 'a'",
     "duplicate setting name 'a'"),
    ("[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 2, 3, 3]\n[[setting]]\nname = 'a'\nfamily = 'winograd9'",
     "setting[0].family: unknown kernel family 'winograd9'"),
    ("[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 3, 3, 3]\n[[setting]]\nname = 'a'",
     "problem: weight [2, 3, 3, 3] with groups=1 expects input with 3 channels"),
    ("[problem\n", "not valid TOML"),
])
def test_bad_config_is_one_line_naming_file_and_key_exit_2(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    res = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "x.csv")])
    assert res.exit_code == 2, res.output
    assert message in res.output and str(path) in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_missing_config_and_bad_device_are_one_line():
    res = CliRunner().invoke(main, ["sweep", "no_such_config"])
    assert res.exit_code == 2 and "no such config file" in res.output
    res = CliRunner().invoke(main, ["sweep", "quick", "--device", "no-such-gpu"])
    assert res.exit_code == 2 and "no OpenCL device matches 'no-such-gpu'" in res.output
    res = CliRunner().invoke(main, ["sweep", "quick", "--device", "99"])
    assert res.exit_code == 2 and "device index 99 is out of range" in res.output


def test_a_setting_can_name_a_builtin(tmp_path):
    from cltune.loader import config
    from cltune.workloads import builtin_settings

    path = tmp_path / "b.toml"
    path.write_text("[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 2, 3, 3]\n"
                    "[[setting]]\nname = 'mine'\nbuiltin = 'unroll_s1'\n")
    s = config.load(str(path)).settings[0]
    assert (s.name, s.family, s.values) == ("mine", *builtin_settings()["unroll_s1"])
    path.write_text("[problem]\ninput = [1, 2, 5, 5]\nweight = [2, 2, 3, 3]\n"
                    "[[setting]]\nname = 'mine'\nbuiltin = 'fastest'\n")
    res = CliRunner().invoke(main, ["settings", str(path)])
    assert res.exit_code == 2 and "setting[0].builtin: expected a built-in setting name" in res.output


def test_resuming_quick_with_tune_small_is_refused_and_the_file_is_untouched(quick_csv):
    # It used to append tune_small's rows to quick's file; the ladder then compared the two.
    out, _ = quick_csv
    before = out.read_bytes(), out.with_suffix(".device.json").read_bytes()
    res = CliRunner().invoke(main, ["sweep", "tune_small", "--resume", str(out)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert f"{out}: cannot resume: it holds config 'quick', this sweep's is 'tune_small'" in res.output
    assert "fastest" not in res.output  # no empty table above the refusal
    res = CliRunner().invoke(main, ["sweep", "quick", "--out", str(out)])
    assert res.exit_code == 2 and f"{out}: already holds results; resume it with --resume" in res.output
    assert (out.read_bytes(), out.with_suffix(".device.json").read_bytes()) == before
