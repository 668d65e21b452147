"""A farm of devices: a Dask client (and a LocalCluster for `local:N`), its workers grouped by
device kind. One sweep on a farm (farm/sweep.py) is spread over the workers of each kind.

The client (this process) runs the same loop, strategies, budgets and resume as a local sweep and
alone writes the results file; `FarmBackend` only replaces where a setting is measured. Each
setting is a Dask task asking for its kind's resource, so any worker of that kind may take it.
Faults: a worker that dies mid-setting makes the scheduler run the setting once more on another
worker (allowed-failures = 1); if that one dies too, Dask's `KilledWorker` becomes a `crashed` row
naming the last worker. A hang or a segfault inside a worker costs one setting, as locally (the
worker's isolated measuring process). No worker of a kind left, or the scheduler lost: one line
(exit 2), every row measured so far is in the file, and `--resume` continues.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
from dataclasses import dataclass, field

from ..core.device_info import DeviceInfo
from ..core.errors import UserError, first_line
from .tls import _hello, _host_port, _split, access as access_of, refused

ALLOWED_FAILURES = 1  # workers that may die under one setting before it is recorded as crashed
GRACE_S = float(os.environ.get("CLTUNE_FARM_GRACE_S", 30))  # a kind may have no worker this long
START_TIMEOUT_S = 120.0
RETRY_S = 1.0  # between a worker's attempts to reach the scheduler
RETRY_LINE_S = float(os.environ.get("CLTUNE_WORKER_RETRY_LINE_S", "30"))  # a line while it cannot be reached
PROBE_S = 3.0  # a TCP probe of the scheduler's port: refused or unknown at once, silent after this
SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")  # what Dask's comms take
ADDRESS_FORMS = "tcp://HOST:PORT (or tls://, ws://, wss://, ucx://, inproc://)"


class FarmError(UserError):
    """The farm cannot go on (no worker of a kind, scheduler lost): one line, rows kept."""


def lost_scheduler(spec: str, why: str = "") -> FarmError:
    return FarmError(f"lost the farm's scheduler {spec}{': ' + why if why else ''}; the rows so far are kept, "
                     "--resume continues")


def check_spec(spec: str, what: str = "--farm") -> str:
    """`local:N` (N >= 1) or a scheduler's address Dask takes, else one line naming the value."""
    s = spec.strip()
    if s.split(":", 1)[0].lower() == "local" and "://" not in s:
        n = s.partition(":")[2].strip()
        if not (n.isascii() and n.isdigit() and int(n) >= 1):
            raise UserError(f"{what} {spec!r}: expected local:N with N a whole number >= 1 "
                            "(N workers on this machine)")
        return f"local:{int(n)}"
    return check_address(s, what, ", HOST:PORT or local:N")


def check_address(address: str, what: str = "scheduler address", also: str = " or HOST:PORT") -> str:
    """A Dask scheduler's address (scheme one of SCHEMES, or HOST:PORT for tcp), else one line."""
    scheme, rest = _split(address.strip())
    expected = f"expected {ADDRESS_FORMS}{also}"
    if scheme not in SCHEMES:
        raise UserError(f"{what} {address!r}: Dask takes no {scheme}:// address; {expected}")
    ok = bool(rest) if scheme == "inproc" else _host_port(rest) is not None
    if not ok:
        raise UserError(f"{what} {address!r}: {expected}")
    return address.strip()


def unreachable(address: str, timeout_s: float = PROBE_S, silent_ok: bool = True) -> str | None:
    """Why the scheduler's port cannot be reached (refused, unknown host, no route), or None: it
    accepted a TCP connection (or the scheme is not probed: inproc, ucx). No answer within
    timeout_s is None when `silent_ok` (a slow network: Dask's own timeout decides), else a reason."""
    scheme, rest = _split(address.strip())
    where = _host_port(rest) if scheme in ("tcp", "tls", "ws", "wss") else None
    if where is None:
        return None
    try:
        with socket.create_connection(where, timeout=timeout_s):
            return None
    except socket.gaierror:
        return f"unknown host {where[0]}"
    except TimeoutError:  # socket.timeout too
        return None if silent_ok else f"no answer within {timeout_s:g} s"
    except ConnectionRefusedError:
        return "connection refused (is a Dask scheduler running there?)"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def wait_for_scheduler(scheduler: str, echo, connect_timeout_s: float | None = None) -> None:
    """Until the scheduler's port answers: a line at once naming it and why, then one every
    RETRY_LINE_S; a UserError once connect_timeout_s has passed."""
    start, said = time.monotonic(), None  # said: when the last line was, in seconds from the start
    limit = float("inf") if connect_timeout_s is None else connect_timeout_s
    while True:
        why = unreachable(scheduler, max(0.1, min(PROBE_S, limit - (time.monotonic() - start))), silent_ok=False)
        waited = time.monotonic() - start
        if why is None:
            if said is not None:
                echo(f"reached the scheduler {scheduler} after {waited:.0f} s")
            return
        if waited >= limit:
            raise UserError(f"cannot reach the scheduler {scheduler} within --connect-timeout {limit:g} s: {why}")
        if said is None:
            echo(f"cannot reach the scheduler {scheduler}: {why}; retrying, a line every {RETRY_LINE_S:g} s"
                 + ("" if connect_timeout_s is not None else " (--connect-timeout SECONDS gives up)"))
            said = waited
        elif waited - said >= RETRY_LINE_S:
            echo(f"still cannot reach the scheduler {scheduler} after {waited:.0f} s: {why}")
            said = waited
        time.sleep(max(0.0, min(RETRY_S, limit - waited)))


def _distributed():
    try:
        import distributed  # distributed (1.5 s), optional: the farm only
    except ImportError:
        raise UserError("a farm needs Dask distributed: pip install 'cltune[farm]'") from None
    return distributed


@dataclass
class Kind:
    """Workers whose device identity (what a results file's header holds) is the same."""

    key: str  # the Dask resource its workers hold
    info: DeviceInfo  # of its first worker
    workers: list = field(default_factory=list)  # worker names

    def describe(self) -> str:
        i = self.info
        return f"{i.name} ({i.platform}, driver {i.driver}, {i.compute_units} CUs)"


class Farm:
    """A connected client (and the LocalCluster it started, for `local:N`)."""

    def __init__(self, spec: str, device=None, workers_timeout_s: float = START_TIMEOUT_S, access=None):
        spec = check_spec(spec)  # before Dask: a Client it cannot parse is left open, and waits 60 s at exit
        self.access = access or access_of(spec)  # refused (plain tcp beyond loopback) before any socket
        dist, sec = _distributed(), self.access.security
        self.spec, self.cluster = spec, None
        m = re.fullmatch(r"local:(\d+)", spec)
        try:
            if m:
                self.cluster = _local_cluster(int(m.group(1)), device, sec)
                self.client = dist.Client(self.cluster, security=sec, set_as_default=False)
            else:
                connect_s = float(os.environ.get("CLTUNE_FARM_CONNECT_S", 30))
                why = unreachable(spec, min(PROBE_S, connect_s))  # refused: at once, not after connect_s
                if why:
                    raise FarmError(f"cannot reach the farm's scheduler {spec}: {why}")
                _hello(spec, connect_s, sec)
                self.client = dist.Client(spec, timeout=connect_s, security=sec, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            self.close()
            why = refused(exc, self.access.folder) or first_line(exc)
            raise FarmError(f"cannot reach the farm's scheduler {spec}: {why}") from None
        try:  # the rule is ours, whatever the scheduler was started with
            self.client.run_on_scheduler(_allowed_failures(ALLOWED_FAILURES))
            self.kinds = self._kinds(workers_timeout_s)
        except BaseException:
            self.close()
            raise

    def _kinds(self, timeout_s: float) -> list[Kind]:
        from .worker import worker_identity  # distributed (1.5 s), optional: the farm only

        deadline = time.monotonic() + timeout_s
        while True:
            idents = {a: i for a, i in self.client.run(worker_identity).items() if i is not None}
            if idents or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if not idents:
            raise FarmError(f"no cltune worker joined {self.spec} within {timeout_s:.0f} s "
                            "(start one on each board: cltune worker SCHEDULER)")
        kinds: dict[str, Kind] = {}
        for ident in sorted(idents.values(), key=lambda i: i["name"]):
            kinds.setdefault(ident["kind"], Kind(ident["kind"], ident["info"])).workers.append(ident["name"])
        return list(kinds.values())

    def alive(self, kind: Kind) -> list[str]:
        """Addresses of the workers holding the kind's resource now."""
        try:
            try:
                workers = self.client.scheduler_info(n_workers=-1)["workers"]
            except TypeError:  # distributed before n_workers: every worker
                workers = self.client.scheduler_info()["workers"]
        except (OSError, TimeoutError) as exc:
            raise lost_scheduler(self.spec, type(exc).__name__) from None
        return sorted(a for a, w in workers.items() if w.get("resources", {}).get(kind.key))

    def close(self) -> None:
        # Fetches of results from a worker that died stay pending until now; asyncio would log
        # each as "Task exception was never retrieved" with a traceback: not news, the rows say it.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        for part in ("client", "cluster"):
            obj = getattr(self, part, None)
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - closing a lost farm must not hide the real error
                    pass


def _allowed_failures(n: int):
    def set_it(dask_scheduler=None) -> None:  # nested: pickled by value, the scheduler needs no cltune
        dask_scheduler.allowed_failures = n
    return set_it


def _local_cluster(n: int, device, security=None):
    """N workers on this machine sharing its cores: PoCL gets cores // N threads in each."""
    import dask  # dask, optional: the farm only
    from distributed import LocalCluster  # distributed (1.5 s), optional: the farm only

    from .worker import QUIET, RESOURCE, DevicePlugin, kind_of, probe  # distributed (1.5 s), optional: the farm only

    if n < 1:
        raise UserError("--farm local:N needs N >= 1")
    threads = str(max(1, (os.cpu_count() or 1) // n))
    env = {k: os.environ.get(k, threads) for k in ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_COUNT")}
    with environ(env):  # the probe sees the device as the workers will (PoCL's compute units)
        kind = kind_of(probe(device))
    # Our measuring process is a child of the worker: Dask's workers must not be daemonic processes.
    # The workers share this machine's cores with the measurements: no statistical profiler (a
    # stack sample every 10 ms), no work stealing (one setting per worker, nothing to steal), no
    # memory monitor (memory_limit 0; a worker holds only small results).
    # No dashboard; the scheduler's plain-http status routes on a free loopback port, not Dask's
    # default 8787 (taken by a user's own cluster, Dask warned on stderr and moved on).
    dask.config.set({"distributed.worker.daemon": False, **QUIET})
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                        silence_logs=logging.ERROR, memory_limit=0,
                        resources={RESOURCE: 1, kind: 1}, plugins={DevicePlugin(device, local=True)}, env=env,
                        security=security)


@contextlib.contextmanager
def environ(values: dict):
    """os.environ with `values` set, as it was again afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
