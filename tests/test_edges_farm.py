"""Farm addresses that cltune cannot use, and schedulers it cannot reach (loopback only): one line,
at once, and nothing left running; `cltune worker` says it cannot reach its scheduler, keeps trying
with a line now and then, joins when the scheduler comes, and gives up after --connect-timeout."""

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.farm.cluster import check_address, check_spec

pytest.importorskip("distributed")

ADDRESS_HELP = "expected tcp://HOST:PORT"


def free_port() -> int:
    """A loopback port nobody listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cltune(*args, env=None, timeout=60):
    """`python -m cltune ARGS` -> (return code, output lines, seconds it took)."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cltune", *args], capture_output=True, text=True,
                          check=False, timeout=timeout, env={**os.environ, **(env or {})})
    return done.returncode, (done.stdout + done.stderr).splitlines(), time.monotonic() - start


class Lines:
    """A command started in its own session, its output read line by line as it comes (with the
    seconds since the start each line came at)."""

    def __init__(self, args, env=None):
        self.start = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "cltune", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        self.queue, self.seen = queue.Queue(), []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.queue.put((time.monotonic() - self.start, line.rstrip("\n")))
        self.queue.put(None)

    def until(self, done, timeout_s=90):
        """Lines until one for which done(line) holds (returned, with its time), or the end (None)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                item = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                return None
            self.seen.append(item[1])
            if done(item[1]):
                return item
        return None

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and its measuring process
        self.proc.wait(30)


@pytest.fixture
def started():
    procs = []

    def start(args, env=None):
        procs.append(Lines(args, env))
        return procs[-1]

    yield start
    for p in procs:
        p.stop()


@pytest.mark.parametrize("spec", ["local:2", "local:1", "tcp://127.0.0.1:8786", "127.0.0.1:8786",
                                  "tls://scheduler.lan:8786", "ws://h:1", "wss://h:65535", "ucx://10.0.0.2:13337",
                                  "inproc://192.168.1.2/1234/1", "tcp://[::1]:8786", "TCP://host-1.lan:8786"])
def test_farm_specs_dask_takes_pass_the_check(spec):
    assert check_spec(spec) == spec


@pytest.mark.parametrize("spec, expected", [
    ("local:abc", "expected local:N with N a whole number >= 1"),
    ("local:0", "expected local:N with N a whole number >= 1"),
    ("local:", "expected local:N"),
    ("http://x", "Dask takes no http:// address"),
    ("tcp://127.0.0.1", ADDRESS_HELP),
    ("tcp://127.0.0.1:99999", ADDRESS_HELP),
    ("not an address", ADDRESS_HELP),
    ("inproc://", ADDRESS_HELP),
])
def test_farm_specs_dask_cannot_take_are_one_line_naming_the_value(spec, expected):
    with pytest.raises(UserError) as err:
        check_spec(spec)
    assert f"--farm {spec!r}: " in str(err.value) and expected in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec", ["local:abc", "http://x"])
@pytest.mark.parametrize("how", ["option", "env"])
def test_a_farm_spec_dask_cannot_take_is_one_line_and_the_command_exits_at_once(spec, how):
    # Bug guarded: Dask's ValueError as `Error: ValueError: ...`, then a half-made Client that kept
    # the command alive for 60 s at exit.
    args, env = (["sweep", "quick", "--farm", spec], None) if how == "option" else (["sweep", "quick"],
                                                                                    {"CLTUNE_FARM": spec})
    rc, lines, took = cltune(*args, env=env)
    name = "--farm" if how == "option" else "$CLTUNE_FARM"
    assert rc == 2 and lines[-1].startswith(f"Error: {name} {spec!r}: "), lines
    assert "ValueError" not in "\n".join(lines) and "Traceback" not in "\n".join(lines)
    assert took < 30, f"{took:.0f} s to exit"


def test_a_refused_scheduler_is_one_line_at_once_not_after_the_connect_timeout():
    # Bug guarded: a port that refuses at once waited the whole CLTUNE_FARM_CONNECT_S (30 s).
    address = f"tcp://127.0.0.1:{free_port()}"
    start = time.monotonic()
    r = CliRunner().invoke(main, ["sweep", "quick", "--farm", address], env={"CLTUNE_FARM_CONNECT_S": "25"})
    took = time.monotonic() - start
    assert r.exit_code == 2, r.output
    assert r.output.splitlines()[-1].startswith(f"Error: cannot reach the farm's scheduler {address}: "
                                                "connection refused"), r.output
    assert took < 20, f"{took:.0f} s"


def test_a_port_that_accepts_and_never_answers_keeps_the_connect_timeout():
    # Bug guarded: Dask's Client waits for the handshake's answer without a limit: no timeout at all.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel accepts connections; nobody answers them
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        rc, lines, took = cltune("sweep", "quick", "--farm", address, env={"CLTUNE_FARM_CONNECT_S": "2"})
    assert rc == 2 and lines[-1] == (f"Error: cannot reach the farm's scheduler {address}: "
                                     "no answer from a Dask scheduler within 2 s"), lines
    assert took < 40


def test_worker_with_a_bad_address_is_one_line_before_dask_starts():
    # Bug guarded: Dask's worker started, logged, and printed its full traceback before cltune's line.
    rc, lines, _ = cltune("worker", "not an address")
    expected = (f"Error: scheduler address 'not an address': {ADDRESS_HELP} (or tls://, ws://, wss://, ucx://, "
                "inproc://) or HOST:PORT")
    assert rc == 2 and lines == [expected], lines


def test_worker_says_at_once_it_cannot_reach_the_scheduler_then_gives_up_after_connect_timeout(started):
    # Bug guarded: Dask's log lines, then a wait forever without a word about the scheduler.
    address = f"tcp://127.0.0.1:{free_port()}"
    w = started(["worker", address, "--connect-timeout", "4"], {"CLTUNE_WORKER_RETRY_LINE_S": "1"})
    first = w.until(lambda line: True)
    assert first is not None and first[1].startswith(f"cannot reach the scheduler {address}: connection refused")
    assert first[0] < 10 + 10, f"first line after {first[0]:.0f} s"  # 10 s wanted; the rest is Python's start
    last = w.until(lambda line: line.startswith("Error:"), timeout_s=60)
    assert last is not None and last[1] == (f"Error: cannot reach the scheduler {address} within --connect-timeout "
                                            "4 s: connection refused (is a Dask scheduler running there?)"), w.seen
    assert w.proc.wait(30) == 2
    assert any(line.startswith(f"still cannot reach the scheduler {address} after ") for line in w.seen), w.seen
    assert not any("distributed" in line for line in w.seen), w.seen  # no Dask log lines about it


def test_worker_keeps_trying_and_joins_when_the_scheduler_comes(started):
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    w = started(["worker", address, "--name", "late"], {"CLTUNE_WORKER_RETRY_LINE_S": "1"})
    assert w.until(lambda line: line.startswith(f"cannot reach the scheduler {address}")), w.seen
    assert w.until(lambda line: line.startswith("still cannot reach")), w.seen  # still there, still trying
    started_scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
         "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        joined = w.until(lambda line: line.startswith("worker late at"), timeout_s=120)
        assert joined is not None and f"joined {address}" in joined[1], w.seen
        assert any(line.startswith(f"reached the scheduler {address} after ") for line in w.seen), w.seen
    finally:
        os.killpg(started_scheduler.pid, signal.SIGKILL)
        started_scheduler.wait(30)


def test_worker_on_a_port_that_never_answers_says_so_and_gives_up_after_connect_timeout(started):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        w = started(["worker", address, "--connect-timeout", "3"], {"CLTUNE_WORKER_RETRY_LINE_S": "1"})
        last = w.until(lambda line: line.startswith("Error:"), timeout_s=120)
        assert last is not None and last[1] == (f"Error: the scheduler {address} did not accept this worker "
                                                "within --connect-timeout 3 s"), w.seen
        assert w.proc.wait(30) == 2
    assert any(line.startswith(f"still waiting for the scheduler {address} to accept") for line in w.seen), w.seen


@pytest.mark.parametrize("value", ["nan", "0", "1e308"])
def test_connect_timeout_takes_a_usable_number_of_seconds(value):
    r = CliRunner().invoke(main, ["worker", "tcp://127.0.0.1:1", "--connect-timeout", value])
    assert r.exit_code == 2 and "Invalid value for '--connect-timeout'" in r.output.splitlines()[-1], r.output


def test_check_address_names_what_it_checks():
    with pytest.raises(UserError, match=r"^scheduler address 'x:y': expected tcp://HOST:PORT"):
        check_address("x:y")


def test_a_local_farm_listens_on_no_fixed_port(device):
    """The bug: `--farm local:N`'s scheduler put its status pages on Dask's default port 8787; with a
    user's own Dask dashboard there, Dask printed "Port 8787 is already in use" on stderr (it broke the
    Ctrl-C test's one line), and a fixed port is one more thing another user of the machine can find."""
    import warnings

    import psutil
    from distributed import Security

    from cltune.farm.cluster import _local_cluster

    holder, holder_addr = socket.socket(), None
    try:
        holder.bind(("127.0.0.1", 8787))
        holder_addr = holder.getsockname()  # taken, as by a user's own cluster (if something holds it, so be it)
        holder.listen()
    except OSError:
        pass
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cluster = _local_cluster(1, device.index, Security.temporary())
        try:
            ports = {c.laddr for c in psutil.Process().net_connections() if c.status == "LISTEN"}
        finally:
            cluster.close()
    finally:
        holder.close()
    assert not [w for w in caught if "8787" in str(w.message)], [str(w.message) for w in caught]
    assert not [a for a in ports if a.port == 8787 and a != holder_addr], ports
