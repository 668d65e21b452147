"""A farm that lets no one in (issue 46): credentials from `cltune farm-certs`, a TLS scheduler and
two TLS workers on loopback (127.0.0.1 only), a sweep over them; a peer without the farm's
certificate refused; plain tcp beyond this machine refused before any socket; --insecure recorded;
bad credentials one line naming the file."""

import datetime
import os
import shutil
import socket
import ssl
import subprocess
import sys
import types

import pytest
from click.testing import CliRunner

from cltune.cli.commands import main
from cltune.core.errors import UserError
from cltune.farm import certs
from cltune.farm import tls as farm_tls
from cltune.drive import tune

from .fakes import FakeBackend
from .test_farm_cli import free_port, start, stop
from .test_tuning import make_config

pytest.importorskip("distributed")
pytest.importorskip("cryptography")


def make_certs(folder, *boards, extra=()):
    out = CliRunner().invoke(main, ["farm-certs", str(folder), "--scheduler", "127.0.0.1",
                                    *[a for b in boards for a in ("--board", b)], *extra])
    assert out.exit_code == 0, out.output
    return out.output


def joined(proc, name, timeout_s=120):
    """Until `cltune worker` says it joined (True), exits, or timeout_s passes."""
    import queue
    import threading

    lines: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    try:
        while True:
            if lines.get(timeout=timeout_s).startswith(f"worker {name} at"):
                return True
    except queue.Empty:
        return False


def refused_by_scheduler(port, ca, cert=None, key=None) -> bool:
    """Whether the scheduler ends a TLS connection that trusts `ca` (None: any) and shows cert/key (or none)."""
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if not ca:
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(str(cert), str(key))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as s:
                s.settimeout(10)
                return s.recv(1) == b""  # TLS 1.3: the scheduler's refusal arrives at the first read
    except (ssl.SSLError, ConnectionError):
        return True


@pytest.fixture
def tls_farm(tmp_path):
    creds = tmp_path / "creds"
    make_certs(creds, "board-a", "board-b")
    port, s = free_port(), creds / "scheduler"
    procs = [start([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                    str(port), "--no-dashboard", "--tls-ca-file", str(s / "ca.pem"), "--tls-cert",
                    str(s / "cert.pem"), "--tls-key", str(s / "key.pem")])]
    yield f"tls://127.0.0.1:{port}", port, creds, procs
    for p in procs:
        stop(p)


def test_a_sweep_over_mutual_tls_and_no_one_else_admitted(tls_farm, tmp_path):
    # The bug: the docs' farm was plain tcp, open to anyone who could reach port 8786.
    address, port, creds, procs = tls_farm
    env = {"POCL_MAX_PTHREAD_COUNT": "1", "POCL_CPU_MAX_CU_COUNT": "1"}
    for name in ("board-a", "board-b"):
        procs.append(start([sys.executable, "-m", "cltune", "worker", address, "--name", name,
                            "--tls", str(creds / name), "--connect-timeout", "120"], env))
        assert joined(procs[-1], name), f"{name} did not join"
    out = tmp_path / "tls.csv"
    done = subprocess.run([sys.executable, "-m", "cltune", "sweep", "tune_small", "--budget", "1", "--rerank", "0",
                           "--farm", address, "--tls", str(creds / "host"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on 2 worker(s): board-a, board-b" in done.stdout
    from cltune.results import rows

    assert set(rows.load(out)["status"]) == {"ok"}
    header = rows.read_header(out)
    assert header["farm_transport"].startswith("mutual tls") and "insecure" not in header
    # No certificate, or one from another authority: the scheduler itself ends the connection.
    other = tmp_path / "other"
    make_certs(other, "board-a")
    assert refused_by_scheduler(port, creds / "ca.pem")
    assert refused_by_scheduler(port, creds / "ca.pem", other / "board-a" / "cert.pem", other / "board-a" / "key.pem")
    # A board given another farm's folder: one line naming its files, and it never joins.
    bad = subprocess.run([sys.executable, "-m", "cltune", "worker", address, "--tls", str(other / "board-a"),
                          "--connect-timeout", "20"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})
    assert bad.returncode == 2 and "not signed by" in bad.stderr and "not admitted" in bad.stderr, bad.stderr
    # The host without credentials: refused by cltune in one line; plain tcp to the TLS port fails too.
    plain = CliRunner().invoke(main, ["sweep", "tune_small", "--farm", address])
    assert plain.exit_code == 2 and "--tls DIR" in plain.output
    foreign = CliRunner().invoke(main, ["sweep", "tune_small", "--farm", address, "--tls", str(other / "host")])
    assert foreign.exit_code == 2 and f"not signed by {other / 'host' / 'ca.pem'}" in foreign.output, foreign.output
    assert refused_by_scheduler(port, creds / "ca.pem") and "Traceback" not in plain.output


@pytest.mark.parametrize("command", [["sweep", "tune_small", "--farm", "tcp://10.0.0.2:8786"],
                                     ["sweep", "tune_small", "--farm", "10.0.0.2:8786"],
                                     ["worker", "tcp://10.0.0.2:8786"]])
def test_plain_tcp_beyond_loopback_is_refused_before_any_socket(command, monkeypatch):
    def no_socket(*args, **kwargs):
        raise AssertionError("a connection was tried")

    monkeypatch.setattr(socket.socket, "connect", no_socket)
    monkeypatch.setattr(socket.socket, "connect_ex", no_socket)
    monkeypatch.setattr(socket, "create_connection", no_socket)
    monkeypatch.delenv(farm_tls.INSECURE_ENV, raising=False)
    out = CliRunner().invoke(main, command)
    assert out.exit_code == 2, out.output
    assert "plain tcp beyond this machine is refused" in out.output and "cltune farm-certs" in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_insecure_is_recorded_and_stays_recorded_when_resumed_securely(tmp_path):
    access = farm_tls.access("tcp://10.0.0.2:8786", insecure=True)
    assert access.security is None and access.record["insecure"] is True
    backend = FakeBackend()
    backend.header_fields = access.record
    out = tmp_path / "insecure.csv"
    cfg = make_config()
    tune.run(cfg, tune.Options(isolation=False, out=out, budget=2, rerank=0), backend=backend)
    from cltune.results import rows

    assert rows.read_header(out)["insecure"] is True
    backend.header_fields = farm_tls.access("tls://127.0.0.1:1", str(make_folder(tmp_path))).record
    tune.run(cfg, tune.Options(isolation=False, resume=out, budget=3, rerank=0), backend=backend)
    header = rows.read_header(out)
    assert header["insecure"] is True and header["farm_transport"].startswith("mutual tls")


def make_folder(tmp_path, name="board-a"):
    creds = tmp_path / "creds"
    if not (creds / name).exists():
        make_certs(creds, name)
    return creds / name


def test_the_command_writes_owner_only_keys_and_keeps_them_unless_forced(tmp_path):
    text = make_certs(tmp_path / "c", "b1")
    assert "expires" in text and text.count("made") == 4  # the authority, scheduler, host, b1
    key = tmp_path / "c" / "b1" / "key.pem"
    for k in (key, tmp_path / "c" / "ca.key", tmp_path / "c" / "scheduler" / "key.pem"):
        assert k.stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "c" / "b1" / "ca.key").exists()  # a board gets no authority key
    before = key.read_bytes()
    assert "kept" in make_certs(tmp_path / "c", "b1") and key.read_bytes() == before
    make_certs(tmp_path / "c", "b1", extra=["--force"])
    assert key.read_bytes() != before
    os.chmod(tmp_path / "c" / "ca.key", 0o640)
    loose = CliRunner().invoke(main, ["farm-certs", str(tmp_path / "c"), "--scheduler", "127.0.0.1", "--board", "b2"])
    assert loose.exit_code == 2 and "ca.key: readable by others" in loose.output and not (tmp_path / "c" / "b2").exists()
    farm_tls.check_folder(tmp_path / "c" / "b1")  # still a consistent folder


def test_bad_credentials_are_one_line_naming_the_file(tmp_path, monkeypatch):
    good = make_folder(tmp_path)
    cases = tmp_path / "cases"

    def case(name, change):
        folder = cases / name
        shutil.copytree(good, folder)
        change(folder)
        with pytest.raises(UserError) as err:
            farm_tls.check_folder(folder)
        assert "\n" not in str(err.value)
        return str(err.value)

    assert case("missing", lambda f: (f / "cert.pem").unlink()).startswith(f"{cases / 'missing' / 'cert.pem'}: missing")
    assert "readable by others" in case("open", lambda f: os.chmod(f / "key.pem", 0o644))
    make_certs(tmp_path / "creds", "board-b")
    other = make_folder(tmp_path / "o")

    def foreign(f):
        for n in ("cert.pem", "key.pem"):
            shutil.copy(other / n, f / n)
    assert "not signed by the authority" in case("foreign", foreign)
    assert "not the key of" in case("mismatch", lambda f: shutil.copy(tmp_path / "creds" / "board-b" / "key.pem",
                                                                     f / "key.pem"))
    assert "not a PEM file" in case("garbage", lambda f: (f / "ca.pem").write_text("junk"))

    class Later(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime.now(tz) + datetime.timedelta(days=400)

    monkeypatch.setattr(farm_tls, "dt", types.SimpleNamespace(datetime=Later, timezone=datetime.timezone))
    assert "cert.pem: expired on" in case("expired", lambda f: None)


def test_tls_without_credentials_and_credentials_for_plain_tcp_are_one_line(monkeypatch):
    monkeypatch.delenv(farm_tls.TLS_ENV, raising=False)
    with pytest.raises(UserError, match="needs this machine's credentials: --tls DIR"):
        farm_tls.access("tls://127.0.0.1:8786")
    with pytest.raises(UserError, match="give the scheduler's tls://127.0.0.1:8786"):
        farm_tls.access("tcp://127.0.0.1:8786", tls="somewhere")
    assert farm_tls.access("tcp://127.0.0.1:8786").security is None  # loopback: as before
    with pytest.raises(UserError, match="--board 'host'"):
        certs.check_names(["127.0.0.1"], ["host"])


def test_insecure_from_the_environment_for_surfaces_without_options(monkeypatch):
    monkeypatch.setenv(farm_tls.INSECURE_ENV, "1")
    assert farm_tls.access("tcp://10.0.0.2:8786", role="worker").insecure
    monkeypatch.setenv(farm_tls.INSECURE_ENV, "0")
    with pytest.raises(UserError, match="plain tcp beyond this machine is refused"):
        farm_tls.access("tcp://10.0.0.2:8786")


def test_a_local_farm_speaks_tls_and_admits_no_client_without_its_temporary_credentials():
    # The bug: `--farm local:N` listened on plain tcp, so any user of the machine could submit tasks.
    from cltune.farm.cluster import Farm

    farm = Farm("local:1", workers_timeout_s=120)
    try:
        address = farm.cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:") and farm.access.record["farm_transport"].startswith("tls")
        assert refused_by_scheduler(int(address.rsplit(":", 1)[1]), None)  # no certificate: refused
    finally:
        farm.close()
