"""A farm of devices: the parallel loop with a fake backend (milliseconds), then a LocalCluster of two
PoCL workers, one thread each: the same settings as a local sweep, a worker killed mid-setting, a
hang, a setting that kills every worker it lands on, and a killed sweep resumed on the farm."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest

from cltune.core.records import Status
from cltune.measure.protocol import Capabilities
from cltune.results import rows as results
from cltune.drive import tune

from .conftest import expected_rerank
from .fakes import FakeBackend
from .test_tuning import make_config

MODULES = ("tests.fault_family",)


@dataclass
class FakeFarm(FakeBackend):
    """measure_many with `batch` settings in flight, finishing in reverse order of submission."""

    caps = Capabilities(parallel=True, timeout=True)

    batch: int = 3
    pulls: list = field(default_factory=list)  # settings in flight each time one more was pulled

    def measure_many(self, problem, timing_now, settings):
        while True:
            flight = []
            for s in settings:
                flight.append(s)
                self.pulls.append(len(flight))
                if len(flight) == self.batch:
                    break
            if not flight:
                return
            for s in reversed(flight):
                yield self.measure(problem, s, timing_now())


def run(backend, cfg, tmp_path, name):
    return tune.run(cfg, tune.Options(isolation=False, out=tmp_path / name, rerank=0), backend=backend)


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
def test_parallel_loop_measures_the_same_settings_as_the_sequential_one(tmp_path, strategy):
    # Bug guarded: the farm's loop measuring a different set (budget counted on completion, or a
    # setting measured twice when it finishes out of order).
    cfg = make_config(budget=7, strategy=strategy)
    seq, par = FakeBackend(), FakeFarm()
    run(seq, cfg, tmp_path, "seq.csv")
    run(par, cfg, tmp_path, "par.csv")
    assert sorted(s.key for s in par.measured) == sorted(s.key for s in seq.measured)
    assert len(par.measured) == len({s.key for s in par.measured}) == 8  # baseline + budget
    assert max(par.pulls) == 3  # the settings really were in flight together


@pytest.mark.parametrize("strategy", ["tpe", "model"])
def test_a_learning_strategy_on_a_farm_asks_a_batch_and_stays_within_budget(tmp_path, strategy):
    # Bug guarded: TPE proposing one point at a time leaves all workers but one idle; a batch must
    # not overrun the budget either.
    cfg = make_config(budget=9, strategy=strategy)
    par = FakeFarm()
    res = run(par, cfg, tmp_path, f"{strategy}.csv")
    assert len(par.measured) == len({s.key for s in par.measured}) == 10
    assert par.pulls.count(3) >= 2
    assert len(res.rows) == 10


def test_resume_on_a_farm_measures_only_what_is_missing(tmp_path):
    cfg = make_config(budget=6, strategy="random")
    run(FakeFarm(), cfg, tmp_path, "r.csv")
    again = FakeFarm()
    tune.run(cfg, tune.Options(isolation=False, resume=tmp_path / "r.csv", rerank=0), backend=again)
    assert again.measured == []


# --- A real farm: two local workers on PoCL ------------------------------------------------------

distributed = pytest.importorskip("distributed")


class DoneFuture:
    """A Dask future that has finished by the time the client holds it; fetching it is logged."""

    status = "finished"

    def __init__(self, value, log):
        self.value, self.log = value, log

    def add_done_callback(self, fn):
        fn(self)

    def result(self, timeout=None):
        self.log.append(("fetched", self.value.setting.name))
        return self.value

    def done(self):
        return True

    def cancel(self):
        pass


class LoggingClient:
    """Measures at submission (a FakeBackend) and logs each submission."""

    status = "running"

    def __init__(self, log):
        self.log = log

    def submit(self, fn, conf, problem, setting, timing, **dask_options):
        self.log.append(("submitted", setting.name))
        return DoneFuture(FakeBackend().measure(problem, setting, timing), self.log)


def test_a_worker_gets_its_next_setting_before_the_client_fetches_and_records_the_last(tmp_path):
    # Bug guarded: the client fetching a result, writing its row (append + fsync) and only then
    # submitting the next setting left each worker idle that long after every setting.
    from types import SimpleNamespace

    from cltune.farm.cluster import Kind
    from cltune.farm.backend import FarmBackend

    from .fakes import FAKE_INFO

    log = []
    from cltune.farm.tls import Access

    fake_farm = SimpleNamespace(spec="fake", client=LoggingClient(log), alive=lambda kind: ["w0"], access=Access())
    cfg = make_config(budget=5, strategy="exhaustive")
    opts = tune.Options(isolation=False, out=tmp_path / "f.csv", rerank=0)
    backend = FarmBackend(fake_farm, Kind("k", FAKE_INFO, ["w0"]), cfg, opts)
    res = tune.run(cfg, opts, on_row=lambda row: log.append(("recorded", row["setting"])), backend=backend)
    search = [r["setting"] for r in res.rows if r["phase"] == "search"][1:]  # after the baseline
    assert len(search) == len(set(search)) == 5
    for last, nxt in zip(search, search[1:]):
        assert log.index(("submitted", nxt)) < log.index(("fetched", last)) < log.index(("recorded", last)), log
    assert max(sum(1 for e in log[:i] if e[0] == "submitted") - sum(1 for e in log[:i] if e[0] == "fetched")
               for i in range(len(log) + 1)) == 2  # one worker: one setting ahead, never more


@pytest.mark.parametrize("dies", [False, True])
def test_a_farm_worker_warms_its_compiler_before_it_says_it_is_ready(dies):
    # Bug guarded: the OpenCL compiler's start-up (0.4 s on PoCL) counted in each worker's first
    # setting, the second worker's after the first's while the baseline is measured alone.
    from types import SimpleNamespace

    from cltune.farm.worker import PLUGIN, DevicePlugin, worker_identity
    from cltune.measure.worker import WorkerDied

    from .fakes import FAKE_INFO

    class Runner:
        info = FAKE_INFO

        def __init__(self):
            self.calls = []

        def call(self, method, *args, timeout=None):
            self.calls.append((method, worker_identity(SimpleNamespace(plugins={PLUGIN: plugin}))))
            if dies:
                raise WorkerDied(Status.CRASHED, "worker died with SIGSEGV")

        def close(self):
            pass

    runner = Runner()
    plugin = DevicePlugin(None, runner)
    plugin.setup(SimpleNamespace(name="board-1"))
    try:
        assert runner.calls == [("warm_up", None)]  # warmed before worker_identity() says it is ready
        assert worker_identity(SimpleNamespace(plugins={PLUGIN: plugin}))["name"] == "board-1"
    finally:
        plugin.teardown(None)


@pytest.fixture(scope="module")
def cluster():
    """Two workers, PoCL limited to one thread in each (as the issue asks)."""
    from cltune.farm import cluster as farm

    with farm.environ({"POCL_MAX_PTHREAD_COUNT": "1", "POCL_CPU_MAX_CU_COUNT": "1"}):
        c = farm._local_cluster(2, None)
    client = distributed.Client(c, set_as_default=False)
    yield c, client
    client.close()
    c.close(timeout=30)


def two_workers(client):
    client.wait_for_workers(2, timeout=60)
    from cltune.farm.worker import worker_identity

    deadline = time.monotonic() + 60
    while sum(v is not None for v in client.run(worker_identity).values()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)


def farm_sweep(cfg, cluster, **opts):
    from cltune.farm import sweep as farm

    two_workers(cluster[1])
    opts = tune.Options(**opts)
    return farm.sweep(tune.merge(cfg, opts), opts, cluster[0].scheduler_address, grace_s=60)


def search_rows(df):
    return df[df["phase"] == "search"]


def test_farm_measures_the_settings_and_statuses_of_a_local_sweep(tmp_path, cluster):
    from cltune.loader import config

    cfg = config.load("tune_small")
    local = tune.run(cfg, tune.Options(out=tmp_path / "local.csv", rerank=0))
    [res] = farm_sweep(cfg, cluster, out=tmp_path / "farm.csv")
    a, b = results.load(local.path), results.load(res.path)
    shown = b[["setting", "params", "status", "error", "worker", "phase"]].to_string()
    assert sorted(zip(search_rows(a)["params"], search_rows(a)["status"])) == \
        sorted(zip(search_rows(b)["params"], search_rows(b)["status"])), shown
    assert (a["worker"].isna()).all()  # a local sweep names no worker
    assert set(search_rows(b)["worker"]) == {"0", "1"}, shown  # both workers measured, each row says which
    rerank = b[b["phase"] == "rerank"]
    assert sorted(rerank["setting"]) == expected_rerank(search_rows(b), rerank=2), shown
    assert rerank["worker"].nunique() == 1, shown
    assert rerank["worker"].iloc[0] == res.rerank_worker
    assert results.format_table(b).splitlines()[0].split()[-1] == "worker"  # `cltune show` says who
    assert "worker" not in results.format_table(a)


def fault_config(faults, min_time_ms=0):
    import tests.fault_family  # noqa: F401  (registers the family for the config loader)
    from cltune.loader import config

    settings = [{"name": "normal"}]
    for i, f in enumerate(faults):
        settings.append({"name": f"fault{f}_{i}", "family": "faults", "params": {"FAULT": f, "MACROS": i % 5}})
    for i in range(4):
        settings.append({"name": f"after{i}", "family": "faults", "params": {"MACROS": i, "UNROLL": i % 2}})
    return config.parse({"problem": {"input": [1, 3, 8, 8], "weight": [4, 3, 3, 3], "padding": 1},
                         # adaptive off: a clearly slow point would stop before min_time_ms
                         "run": {"warmup": 0, "repeat": 2, "rerank": 0, "min_time_ms": min_time_ms,
                                 "adaptive": False},
                         "setting": settings}, "faults.toml")


def test_a_hang_on_one_worker_is_a_timeout_row_and_the_others_go_on(tmp_path, cluster):
    [res] = farm_sweep(fault_config([1]), cluster, out=tmp_path / "hang.csv", timeout_s=6, modules=MODULES)
    df = results.load(res.path)
    status = dict(zip(df["setting"], df["status"]))
    assert status.pop("fault1_0") == "timeout"
    assert set(status.values()) == {"ok"} and len(status) == 5
    hang_worker = df.loc[df["setting"] == "fault1_0", "worker"].iloc[0]
    assert (df.loc[df["setting"] != "fault1_0", "worker"] != hang_worker).any()  # the other went on


def kill_worker_running(client, prefix, deadline_s=60, avoid=()):
    """SIGKILL the Dask worker process running a task whose key starts with prefix; its address."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for addr, keys in client.processing().items():
            if addr not in avoid and any(str(k).startswith(prefix) for k in keys):
                pid = client.run(os.getpid, workers=[addr])[addr]
                os.kill(pid, signal.SIGKILL)
                return addr
        time.sleep(0.05)
    raise AssertionError(f"no worker ran {prefix} within {deadline_s} s")


def in_thread(fn):
    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


def test_a_worker_killed_mid_setting_costs_nothing(tmp_path, cluster):
    # Every setting takes >= 1 s of kernel time and the scheduler is polled every 50 ms from the
    # start, so the kill lands mid-setting (a fixed sleep before polling raced a fast machine: the
    # "after" settings had all finished); the setting is measured again on another worker and the
    # sweep completes with every setting exactly once.
    cfg = fault_config([], min_time_ms=1000)
    t, out = in_thread(lambda: farm_sweep(cfg, cluster, out=tmp_path / "kill.csv", timeout_s=60,
                                          modules=MODULES))
    kill_worker_running(cluster[1], "cltune-after")
    t.join(300)
    assert not t.is_alive() and "error" not in out, out.get("error")
    df = results.load(out["value"][0].path)
    assert sorted(df["setting"]) == sorted(s.name for s in cfg.settings)  # each once
    assert set(df["status"]) == {"ok"}


def test_a_setting_that_kills_every_worker_is_a_crashed_row_naming_the_worker(tmp_path, cluster):
    # Bug guarded: Dask's KilledWorker aborting the sweep. The hanging setting's worker is killed,
    # the scheduler retries it once elsewhere, that worker is killed too: a row, and the rest go on.
    cfg = fault_config([1])
    t, out = in_thread(lambda: farm_sweep(cfg, cluster, out=tmp_path / "killed.csv", timeout_s=120,
                                          modules=MODULES))
    first = kill_worker_running(cluster[1], "cltune-fault1_0")
    kill_worker_running(cluster[1], "cltune-fault1_0", avoid=(first,))
    t.join(300)
    assert not t.is_alive() and "error" not in out, out.get("error")
    df = results.load(out["value"][0].path)
    row = df[df["setting"] == "fault1_0"].iloc[0]
    assert row["status"] == "crashed" and "KilledWorker" in row["error"] and row["worker"] in row["error"]
    assert sorted(df["setting"]) == sorted(s.name for s in cfg.settings)
    assert set(df.loc[df["setting"] != "fault1_0", "status"]) == {"ok"}


def slow_config(tmp_path) -> str:
    """tune_small with every setting timed for at least 300 ms: the sweep is still running when a
    test pulls the plug."""
    from cltune.loader import config

    path = tmp_path / "slow.toml"
    path.write_text(config.resolve_path("tune_small").read_text().replace("[run]", "[run]\nmin_time_ms = 300\nadaptive = false"))
    return str(path)


def test_a_sweep_killed_mid_run_is_completed_by_resume_on_the_farm(tmp_path):
    out = tmp_path / "killed.csv"
    cmd = [sys.executable, "-m", "cltune", "sweep", slow_config(tmp_path), "--farm", "local:2", "--strategy",
           "exhaustive", "--budget", "10", "--rerank", "0", "--out", str(out)]
    env = {**os.environ, "POCL_MAX_PTHREAD_COUNT": "1", "POCL_CPU_MAX_CU_COUNT": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 6:  # header, columns and 4 settings
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with pytest.warns(results.TruncatedLineWarning) if not out.read_text().endswith("\n") else contextlib.nullcontext():
        kept = results.load(out)
    assert 4 <= len(kept) < 11
    done = subprocess.run(cmd[:-2] + ["--resume", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    final = results.load(out)
    assert len(final) == 11 and final["key"].is_unique
    assert list(final["setting"][: len(kept)]) == list(kept["setting"])  # nothing measured was lost


@pytest.mark.parametrize("how", ["option", "env"])
def test_farm_needs_a_reachable_scheduler_one_line(how):
    # Also: $CLTUNE_FARM is honoured like --farm (a sweep that silently ran locally would pass here).
    from click.testing import CliRunner

    from cltune.cli.commands import main

    args, env = ["sweep", "quick"], {"CLTUNE_FARM_CONNECT_S": "2"}
    if how == "option":
        args += ["--farm", "tcp://127.0.0.1:9"]
    else:
        env["CLTUNE_FARM"] = "tcp://127.0.0.1:9"
    r = CliRunner().invoke(main, args, env=env)
    assert r.exit_code == 2 and r.output.splitlines()[-1].startswith("Error: cannot reach the farm's scheduler")
    assert "Traceback" not in r.output


@pytest.mark.parametrize("args, message", [
    (["--no-isolation"], "--no-isolation: a farm always measures"),
    (["--device", "0"], "--device picks this machine's device"),
])
def test_options_a_farm_cannot_honour_are_refused_in_one_line(args, message):
    # Bug guarded: --device or --no-isolation silently ignored on a farm whose workers chose their own.
    from click.testing import CliRunner

    from cltune.cli.commands import main

    r = CliRunner().invoke(main, ["sweep", "quick", "--farm", "tcp://127.0.0.1:9", *args])
    assert r.exit_code == 2 and r.output.splitlines()[-1].startswith(f"Error: {message}"), r.output
