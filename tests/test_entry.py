"""The `cltune` entry point: a sweep's worker starts before the rest of cltune is imported."""

import os
import subprocess
import sys

import pytest

from cltune.cli import entry
from cltune.core.problem import Problem
from cltune.core.records import Status, Timing
from cltune.core.space import Setting
from cltune.measure import worker
from cltune.measure.worker import WorkerRunner

MODULES = ("tests.fault_family",)
SMALL = Problem.from_shapes((1, 3, 8, 8), (4, 3, 3, 3), padding=1)


@pytest.mark.parametrize("args, device", [
    (["sweep", "quick"], None),
    (["sweep", "quick", "--device", "1", "--out", "x.csv"], "1"),
    (["sweep", "--device=pthread", "quick"], "pthread"),
    (["sweep", "-d", "0", "-d", "1"], "1"),  # click keeps the last
    (["sweep", "-d2"], "2"),
    (["sweep", "quick", "--", "--no-isolation"], None),
])
def test_a_sweep_command_line_names_the_device_its_worker_opens(args, device, monkeypatch):
    monkeypatch.delenv("CLTUNE_FARM", raising=False)
    assert entry.early_device(args) == device


@pytest.mark.parametrize("args", [
    [], ["devices"], ["bench", "--device", "0"], ["sweep", "--help"], ["sweep", "quick", "--no-isolation"],
    ["sweep", "quick", "--farm", "local:2"], ["sweep", "quick", "--farm=tcp://h:8786"],
])
def test_commands_that_measure_in_no_local_worker_start_none_early(args, monkeypatch):
    monkeypatch.delenv("CLTUNE_FARM", raising=False)
    assert entry.early_device(args) is entry.NOT_EARLY


def test_a_farm_named_in_the_environment_starts_no_local_worker(monkeypatch):
    monkeypatch.setenv("CLTUNE_FARM", "local:2")
    assert entry.early_device(["sweep", "quick"]) is entry.NOT_EARLY


def test_importing_cltune_leaves_numpy_and_opencl_for_later():
    code = ("import sys, cltune, cltune.cli.entry, cltune.measure.worker; "
            "print(sorted(m for m in ('numpy', 'pyopencl') if m in sys.modules)); "
            "print(callable(cltune.conv2d), 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True True"]


def test_a_worker_started_early_is_adopted_and_given_the_config(device):
    worker.start_early(str(device.index))
    early_pid = worker._early[str(device.index)][0].pid
    # The fault family exists only where its module is imported: configure must have done it.
    w = WorkerRunner(str(device.index), modules=MODULES, timeout_s=60, rtol=1e-4, atol=1e-4, seed=3)
    try:
        assert w.pid() == early_pid and not worker._early
        m = w.measure(SMALL, Setting.make("fine", "faults", {}), Timing(0, 1))
        assert m.status == Status.OK and w.restarts == 0
    finally:
        w.close()


def test_a_worker_started_early_for_another_device_is_stopped(device):
    worker.start_early("no such device")
    stray = worker._early["no such device"][0]
    w = WorkerRunner(str(device.index), timeout_s=60)
    try:
        assert not stray.is_alive() and not worker._early and w.pid() != stray.pid
        assert w.info.index == device.index
    finally:
        w.close()


def test_a_sweep_from_the_command_line_runs_in_the_worker_it_started_first(device, tmp_path):
    out = tmp_path / "quick.csv"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    env.pop("CLTUNE_FARM", None)
    proc = subprocess.run([sys.executable, "-m", "cltune", "sweep", "quick", "--device", str(device.index),
                           "--repeat", "2", "--warmup", "0", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and out.read_text().count("\n") > 5


def test_a_bad_device_fails_with_one_line_whether_or_not_its_worker_started_early(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run([sys.executable, "-m", "cltune", "sweep", "quick", "--device", "no such device",
                           "--out", str(tmp_path / "x.csv")], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "no such device" in proc.stderr
