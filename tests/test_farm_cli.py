"""A farm as the README runs it: a Dask scheduler, `cltune worker`s that join it, and
`cltune sweep --farm tcp://...`. Two device kinds on one machine (PoCL told to use 1 or 2 compute
units), a kind whose last worker dies, and a scheduler that goes away."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from cltune.loader import config
from cltune.results import rows as results, schema

from .test_farm import slow_config

pytest.importorskip("distributed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, env=None):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the worker and its measuring process
    proc.wait(30)


def cus(n: int) -> dict:
    return {"POCL_MAX_PTHREAD_COUNT": str(n), "POCL_CPU_MAX_CU_COUNT": str(n)}


@pytest.fixture
def scheduler():
    port = free_port()
    proc = start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                  "--port", str(port), "--no-dashboard"])
    procs = [proc]
    yield f"tcp://127.0.0.1:{port}", procs
    for p in procs:
        stop(p)


def worker(address, procs, name, n_cus):
    proc = start([sys.executable, "-m", "cltune", "worker", address, "--name", name], cus(n_cus))
    procs.append(proc)
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # wait until it has joined
        if line.startswith(f"worker {name} at") or time.monotonic() > deadline:
            break
    assert proc.poll() is None, f"cltune worker {name} did not start"
    return proc


def sweep(address, *args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "cltune", "sweep", *args, "--farm", address],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def sweep_in_background(address, *args, env=None):
    return subprocess.Popen([sys.executable, "-m", "cltune", "sweep", *args, "--farm", address],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def wait_for(done, timeout_s=120):
    """Until done() or timeout_s; the test's assertions say whether it came."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():
        time.sleep(0.05)


def has_lines(path, n):
    return lambda: path.exists() and path.read_text().count("\n") >= n


def rerank_keys(df, k=2) -> set:
    """The keys a re-ranking of the k fastest should hold: the k fastest ok search rows, every other
    within config.RERANK_WITHIN of the fastest (RERANK_MAX in all), and the baseline."""
    ok = results.ok_rows(df[df["phase"] == "search"]).sort_values(schema.TIME)
    times = list(ok[schema.TIME])
    keys = [key for i, key in enumerate(ok["key"])
            if i < k or (i < config.RERANK_MAX and times[i] <= config.RERANK_WITHIN * times[0])]
    return {*keys, *df[(df["phase"] == "search") & (df["setting"] == "normal")]["key"]}


def test_two_device_kinds_are_tuned_apart_each_with_its_file_best_and_reranker(scheduler, tmp_path):
    # Bug guarded: kinds mixed in one file (its header names one device, and resume would refuse
    # it), or a kind's settings measured by the other kind's board.
    address, procs = scheduler
    worker(address, procs, "board-a", 1)
    worker(address, procs, "board-b", 2)
    out = tmp_path / "kinds.csv"
    done = sweep(address, "tune_small", "--budget", "3", "--rerank", "2", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("device kind:") == 2 and done.stdout.count("best:") == 2
    files = sorted(tmp_path.glob("kinds-*.csv"))
    assert len(files) == 2 and not out.exists()
    boards = {}
    for f in files:
        df = results.load(f)
        assert df["compute_units"].nunique() == 1 and df["worker"].nunique() == 1
        boards[int(df["compute_units"].iloc[0])] = df["worker"].iloc[0]
        assert len(df[df["phase"] == "search"]) == 4  # baseline + budget 3, per kind
        rerank = df[df["phase"] == "rerank"]  # its own re-ranking: best 2, those close behind, the baseline
        assert set(rerank["key"]) == rerank_keys(df) and "normal" in set(rerank["setting"])
        assert f"re-ranked on worker {df['worker'].iloc[0]}" in done.stdout
    assert boards == {1: "board-a", 2: "board-b"}  # each kind measured by its own board only
    before = files[0].read_text()
    again = sweep(address, "tune_small", "--budget", "3", "--rerank", "2", "--resume", str(files[0]))
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("skipped") == 1  # the other kind: its rows are in its own file
    assert files[0].read_text() == before  # finished: nothing measured again


def test_the_last_worker_of_a_kind_dying_is_one_line_and_resume_finishes(scheduler, tmp_path):
    address, procs = scheduler
    board = worker(address, procs, "board-a", 1)
    out = tmp_path / "orphan.csv"
    args = [slow_config(tmp_path), "--strategy", "exhaustive", "--budget", "12", "--rerank", "0"]
    proc = sweep_in_background(address, *args, "--out", str(out), env={"CLTUNE_FARM_GRACE_S": "3"})
    wait_for(has_lines(out, 5))
    stop(board)
    text, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, text
    assert text.splitlines()[-1].startswith("Error: no worker of kind") and "Traceback" not in text
    kept = results.load(out)
    assert 3 <= len(kept) < 13
    worker(address, procs, "board-b", 1)  # the kind is back: --resume continues
    done = sweep(address, *args, "--resume", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    final = results.load(out)
    assert len(final) == 13 and final["key"].is_unique
    assert set(final["worker"][len(kept):]) == {"board-b"}


def test_a_lost_scheduler_is_one_line_and_the_rows_are_kept(scheduler, tmp_path):
    address, procs = scheduler
    worker(address, procs, "board-a", 1)
    out = tmp_path / "lost.csv"
    proc = sweep_in_background(address, slow_config(tmp_path), "--strategy", "exhaustive", "--budget", "12",
                               "--rerank", "0", "--out", str(out))
    wait_for(has_lines(out, 5))
    stop(procs[0])
    text, _ = proc.communicate(timeout=180)
    assert proc.returncode == 2, text
    assert text.splitlines()[-1].startswith("Error: lost the farm's scheduler"), text
    assert len(results.load(out)) >= 3


def test_a_kind_whose_boards_are_gone_stops_alone_and_the_other_kind_finishes(scheduler, tmp_path):
    # Bug guarded: kinds tuned at once, one kind's FarmError taking the other kind's sweep with it.
    address, procs = scheduler
    board_a = worker(address, procs, "board-a", 1)
    worker(address, procs, "board-b", 2)
    out = tmp_path / "mixed.csv"
    proc = sweep_in_background(address, slow_config(tmp_path), "--strategy", "exhaustive", "--budget", "8",
                               "--rerank", "0", "--out", str(out), env={"CLTUNE_FARM_GRACE_S": "3"})
    wait_for(lambda: ",board-a," in "".join(f.read_text() for f in tmp_path.glob("mixed-*.csv")))
    stop(board_a)
    text, _ = proc.communicate(timeout=180)
    assert proc.returncode == 2, text
    last = text.splitlines()[-1]
    assert last.startswith("Error: ") and "1 CUs" in last and "no worker of kind" in last, last
    finished = [results.load(f) for f in tmp_path.glob("mixed-*.csv")]
    b = [df for df in finished if set(df["worker"]) == {"board-b"}]
    assert len(b) == 1 and len(b[0]) == 9 and set(b[0]["status"]) == {"ok"}  # board-b's kind finished
