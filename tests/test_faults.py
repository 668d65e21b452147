"""Fault injection on PoCL: a hang, a wild write, a failed build and a killed worker each cost one
setting, get the right status on their row, and every other setting is still measured."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from cltune.loader import config
from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.measure.worker import WorkerRunner
from cltune.results import rows as results
from cltune.drive import tune

MODULES = ("tests.fault_family",)


def fault_config(faults):
    settings = [{"name": "normal"}]
    for i, f in enumerate(faults):
        settings.append({"name": f"fault{f}_{i}", "family": "faults", "params": {"FAULT": f, "MACROS": i % 5}})
        settings.append({"name": f"after{i}", "family": "faults", "params": {"MACROS": (i + 1) % 5}})
    import tests.fault_family  # noqa: F401  (registers the family for the config loader)

    return config.parse({"problem": {"input": [1, 3, 8, 8], "weight": [4, 3, 3, 3], "padding": 1},
                         "run": {"warmup": 0, "repeat": 2, "rerank": 0}, "setting": settings}, "faults.toml")


def test_hang_wild_write_build_failure_and_host_exception_each_cost_one_setting(tmp_path):
    # A Python exception in the worker used to read `crashed ... worker exited with status 1`,
    # its message only on stderr; it is now an `error` row carrying the exception.
    cfg = fault_config([1, 2, 3, 4])
    out = tmp_path / "faults.csv"
    res = tune.run(cfg, tune.Options(out=out, timeout_s=8, modules=MODULES))
    df = results.load(out)
    status = dict(zip(df["setting"], df["status"]))
    assert status.pop("fault1_0") == "timeout"
    assert status.pop("fault2_1") == "crashed"
    assert status.pop("fault3_2") == "build_error"
    assert status.pop("fault4_3") == "error"
    assert set(status.values()) == {"ok"} and len(status) == 5  # normal and every "after" setting
    errors = dict(zip(df["setting"], df["error"]))
    assert "worker killed" in errors["fault1_0"]
    assert "SIGSEGV" in errors["fault2_1"] or "signal" in errors["fault2_1"]
    assert "injected build failure" in errors["fault3_2"]
    assert errors["fault4_3"] == "ValueError: injected host error: seed must be non-negative"
    assert len(res.rows) == len(df) == 9


def test_worker_killed_mid_measurement_is_recorded_and_replaced():
    problem = Problem.from_shapes((1, 3, 8, 8), (4, 3, 3, 3), padding=1)
    worker = WorkerRunner(modules=MODULES, timeout_s=60, rtol=1e-4, atol=1e-4)
    try:
        first_pid = worker.pid()
        killer = threading.Timer(2.0, lambda: os.kill(first_pid, signal.SIGKILL))
        killer.start()
        # It would hang until the 60 s timeout; the kill after 2 s must be what ends it.
        m = worker.measure(problem, Setting.make("busy", "faults", {"FAULT": 1}), Timing(0, 1))
        killer.join()
        assert m.status == Status.CRASHED and "SIGKILL" in m.error
        after = worker.measure(problem, Setting.make("fine", "faults", {}), Timing(0, 1))
        assert after.status == Status.OK and worker.pid() != first_pid and worker.restarts == 1
    finally:
        worker.close()


SMALL = Problem.from_shapes((1, 3, 8, 8), (4, 3, 3, 3), padding=1)


@pytest.fixture
def faults_worker():
    worker = WorkerRunner(modules=MODULES, timeout_s=60, rtol=1e-4, atol=1e-4)
    yield worker
    worker.close()


def numbered(fault: int, at: int, count: int) -> list[Setting]:
    return [Setting.make(f"s{i}", "faults", {"MACROS": i, "FAULT": fault if i == at else 0}) for i in range(count)]


def test_a_crash_while_building_a_batch_is_blamed_on_the_setting_that_crashed(faults_worker):
    # s0 is built with the four settings announced after it, s2 among them: the compiler "crashes"
    # on s2 (FAULT=5) while s0 is measured. s0 is measured again on a worker that builds one
    # setting per program; only s2's own build then crashes.
    settings = numbered(5, 2, 5)
    status = {s.name: faults_worker.measure(SMALL, s, Timing(0, 1), upcoming=settings[i + 1:i + 5]).status
              for i, s in enumerate(settings)}
    assert status == {"s0": Status.OK, "s1": Status.OK, "s2": Status.CRASHED, "s3": Status.OK, "s4": Status.OK}
    assert faults_worker.restarts == 2 and faults_worker.kwargs["batch_builds"] is False


def test_a_crash_while_launching_is_not_measured_again(faults_worker):
    settings = numbered(2, 0, 3)  # s0 writes out of bounds when launched
    m = faults_worker.measure(SMALL, settings[0], Timing(0, 1), upcoming=settings[1:])
    assert m.status == Status.CRASHED and faults_worker.kwargs.get("batch_builds", True)
    assert faults_worker.measure(SMALL, settings[1], Timing(0, 1)).status == Status.OK
    assert faults_worker.restarts == 1


@pytest.mark.parametrize("timing, rows_before_kill", [
    (["--repeat", "2"], 4),  # one window: each setting is written as soon as it is measured
    ([], 1),  # two windows (the default): only the points waiting for their second one are lost
])
def test_sigkill_of_the_sweep_loses_only_the_settings_in_flight_and_resume_completes(tmp_path, timing,
                                                                                      rows_before_kill):
    out = tmp_path / "killed.csv"
    # Each point warms up for 100 ms of kernel time, so its rows come at least that far apart: with
    # two windows the points' second windows (and rows) follow their first ones at the pace those
    # were taken, and on a busy host a poll could otherwise miss the gap between the first row and
    # the rest.
    cfg = tmp_path / "tune_small.toml"
    text = config.resolve_path("tune_small").read_text()
    assert "\n[run]\n" in text
    cfg.write_text(text.replace("\n[run]\n", "\n[run]\nwarmup_ms = 100\n"))
    cmd = [sys.executable, "-m", "cltune", "sweep", str(cfg), "--strategy", "exhaustive",
           "--budget", "10", "--rerank", "0", *timing, "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 2 + rows_before_kill:  # header line, columns
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = results.load(out) if out.read_text().endswith("\n") else None
    with pytest.warns(results.TruncatedLineWarning) if kept is None else contextlib.nullcontext():
        kept = results.load(out)
    assert rows_before_kill <= len(kept) < 11
    done = subprocess.run(cmd[:-2] + ["--resume", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    final = results.load(out)
    assert len(final) == 11 and final["key"].is_unique
    assert list(final["setting"][: len(kept)]) == list(kept["setting"])  # nothing measured was lost


def test_a_second_sweep_on_the_same_file_is_refused(tmp_path):
    from cltune.core.errors import UserError

    path = tmp_path / "locked.csv"
    with results.ResultsFile(path):
        with pytest.raises(UserError, match="another cltune sweep is writing to this results file"):
            results.ResultsFile(path)
    results.ResultsFile(path, resume=True).close()  # released when the first sweep ends


def test_a_script_without_a_main_guard_is_not_run_again_by_the_worker(tmp_path):
    # multiprocessing's spawn would re-execute an unguarded script in the worker; cltune's must not.
    script = tmp_path / "unguarded.py"
    script.write_text("print('body ran')\nfrom cltune.measure.worker import WorkerRunner\n"
                      "w = WorkerRunner()\nprint('device', w.info.name)\nw.close()\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("body ran") == 1 and "device" in out.stdout
