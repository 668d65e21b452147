"""Who may join a farm: mutual TLS from a credentials folder (certs.py makes them), Dask's temporary
credentials for `local:N`, plain tcp only on loopback unless the user says --insecure. Everything
here is decided before a socket is opened; a bad folder is one line naming the file."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import os
import re
import ssl
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import UserError, first_line
from .certs import _crypto

TLS_ENV = "CLTUNE_TLS"  # a credentials folder (ca.pem, cert.pem, key.pem), as --tls DIR
INSECURE_ENV = "CLTUNE_INSECURE"  # "1": as --insecure
FILES = ("ca.pem", "cert.pem", "key.pem")
HOW = ("make credentials with `cltune farm-certs DIR --scheduler HOST --board NAME`, start the scheduler "
       "with DIR/scheduler (docs/farm.md) and give tls://HOST:PORT with --tls DIR/host (or $CLTUNE_TLS)")
UNENCRYPTED = ("tcp", "ws", "ucx")
_HOST_PORT = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9._-]+)):(?P<port>[0-9]{1,5})")


@dataclass(frozen=True)
class Access:
    """How to reach a farm: Dask's Security (None: Dask's default, plain) and what each results file
    records of it in its header: `farm`, `farm_transport`, and `insecure: true` under --insecure."""

    security: object = None
    record: dict = field(default_factory=dict)
    folder: str | None = None  # the credentials folder, to name its files in a refusal

    @property
    def insecure(self) -> bool:
        return bool(self.record.get("insecure"))


def options(tls: str | None, insecure: bool) -> tuple[str | None, bool]:
    """The command's --tls and --insecure, else $CLTUNE_TLS and $CLTUNE_INSECURE=1."""
    return tls or os.environ.get(TLS_ENV) or None, insecure or os.environ.get(INSECURE_ENV, "") == "1"


def loopback(host: str) -> bool:
    """Whether host is this machine by its address or as `localhost` (no lookup: a name could point anywhere)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def access(spec: str, tls: str | None = None, insecure: bool = False, role: str = "client",
           what: str = "--farm") -> Access:
    """The Access for a farm spec (`local:N` or a scheduler's address, checked by farm.check_spec),
    or one line saying why it is refused: before any connection is tried."""
    tls, insecure = options(tls, insecure)
    if spec.startswith("local:"):
        return Access(temporary(), {"farm": spec, "farm_transport": "tls, temporary credentials"})
    scheme, rest = _split(spec)
    where = _host_port(rest)
    host = where[0] if where else ""
    if scheme in ("tls", "wss"):
        if not tls:
            raise UserError(f"{what} {spec}: a TLS scheduler needs this machine's credentials: --tls DIR "
                            f"or ${TLS_ENV} (a folder holding {', '.join(FILES)}); {HOW}")
        return Access(security(tls, role), {"farm": spec, "farm_transport": f"mutual tls ({tls})"}, str(tls))
    if tls and scheme in UNENCRYPTED:
        raise UserError(f"{what} {spec}: --tls (or ${TLS_ENV}) given for a plain {scheme}:// address; "
                        f"give the scheduler's tls://{rest} address")
    if scheme == "inproc" or loopback(host):
        return Access(None, {"farm": spec, "farm_transport": f"{scheme} on this machine"})
    if not insecure:
        raise UserError(f"{what} {spec}: plain {scheme} beyond this machine is refused (anyone on its network "
                        f"could run code on the boards and forge their results); {HOW}; or say --insecure")
    return Access(None, {"farm": spec, "farm_transport": f"plain {scheme} (--insecure)",
                        "insecure": True})


def temporary():
    """Dask's throwaway credentials for a LocalCluster: its workers admit this process only."""
    from distributed.security import Security  # distributed (1.5 s), optional: the farm only

    try:
        return Security.temporary()
    except ImportError:
        raise UserError("--farm local:N uses TLS with temporary credentials, which need the cryptography "
                        "package: pip install 'cltune[farm]'") from None


def security(folder, role: str = "client"):
    """Dask's Security from a checked credentials folder, for `role` (client: the host; worker: a board)."""
    from distributed.security import Security  # distributed (1.5 s), optional: the farm only

    ca, cert, key = (str(p) for p in check_folder(folder))
    return Security(tls_ca_file=ca, require_encryption=True,
                    **{f"tls_{role}_cert": cert, f"tls_{role}_key": key})


def check_folder(folder) -> tuple[Path, Path, Path]:
    """ca.pem, cert.pem and key.pem of a credentials folder, or one line naming the file that is
    missing, unreadable, expired, open to others, or does not belong with the others."""
    x509, _, ser, _ = _crypto()
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: no credentials folder there (ca.pem, cert.pem, key.pem); {HOW}")
    paths = [folder / f for f in FILES]
    for p in paths:
        if not p.is_file():
            raise UserError(f"{p}: missing; a credentials folder holds {', '.join(FILES)} ({HOW})")
    ca_path, cert_path, key_path = paths
    mode = key_path.stat().st_mode
    if mode & 0o077:
        raise UserError(f"{key_path}: readable by others (mode {mode & 0o777:o}); chmod 600 {key_path}")
    ca, cert = (_load(p, x509.load_pem_x509_certificate) for p in (ca_path, cert_path))
    key = _load(key_path, lambda data: ser.load_pem_private_key(data, None))
    for p, c in ((ca_path, ca), (cert_path, cert)):
        _in_date(p, c)
    if key.public_key().public_numbers() != cert.public_key().public_numbers():
        raise UserError(f"{key_path}: not the key of {cert_path} (they come from different runs of farm-certs)")
    try:
        cert.verify_directly_issued_by(ca)
    except Exception as exc:  # noqa: BLE001 - InvalidSignature, or another kind of key
        raise UserError(f"{cert_path}: not signed by the authority {ca_path} ({type(exc).__name__}); the "
                        "scheduler would not admit it: use the folder farm-certs made for this machine") from None
    return ca_path, cert_path, key_path


def _load(path: Path, parse):
    try:
        return parse(path.read_bytes())
    except PermissionError:
        raise UserError(f"{path}: cannot read it (permission denied)") from None
    except (ValueError, TypeError) as exc:
        raise UserError(f"{path}: not a PEM file of the kind expected ({str(exc).splitlines()[0][:120]})") from None


def _in_date(path: Path, cert) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    if now > cert.not_valid_after_utc:
        raise UserError(f"{path}: expired on {cert.not_valid_after_utc:%Y-%m-%d}; make new credentials "
                        "with `cltune farm-certs DIR ... --force`")
    if now < cert.not_valid_before_utc:
        raise UserError(f"{path}: not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC "
                        "(is this machine's clock right?)")


def refused(exc: BaseException, folder) -> str | None:
    """A TLS handshake's failure, worded with the files it concerns, or None (no folder, or no TLS error)."""
    if not folder:
        return None
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ssl.SSLCertVerificationError) or any(
            s in text for s in ("CERTIFICATE_VERIFY_FAILED", "certificate does not match")):  # Dask's words
        return f"the scheduler's certificate is not signed by {Path(folder) / 'ca.pem'} (another authority)"
    if any(s in text for s in ("UNKNOWN_CA", "unknown ca", "BAD_CERTIFICATE", "CERTIFICATE_REQUIRED",
                               "bad certificate", "SSLError")):
        return (f"the scheduler refused {Path(folder) / 'cert.pem'} (signed by another authority, or "
                "the scheduler runs without TLS)")
    return None


def admitted(scheduler: str, access: Access, timeout_s: float = 10.0) -> None:
    """A TLS handshake with the scheduler as a worker: one line naming the files when either side
    refuses the other's certificate (Dask's worker would retry in silence); other failures pass."""
    if access.folder is None:
        return
    try:
        _hello(scheduler, timeout_s, access.security, "worker")
    except (OSError, TimeoutError) as exc:
        why = refused(exc, access.folder)
        if why:
            raise UserError(f"scheduler {scheduler}: {why}; this worker was not admitted") from None


def listen_host(scheduler: str) -> str | None:
    """Where a worker listens for its peers: loopback when its scheduler is on this machine, else
    Dask's choice (every interface; with TLS only holders of the farm's certificates get in)."""
    where = _host_port(_split(scheduler)[1])
    return "127.0.0.1" if where and loopback(where[0]) and ":" not in where[0] else None


def _split(address: str) -> tuple[str, str]:
    scheme, sep, rest = address.partition("://")
    return (scheme.lower(), rest) if sep else ("tcp", address)


def _host_port(rest: str) -> tuple[str, int] | None:
    m = _HOST_PORT.fullmatch(rest)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        return None
    return m["v6"] or m["host"], int(m["port"])


def _hello(address: str, timeout_s: float, security=None, role: str = "client") -> None:
    """Dask's handshake with the scheduler within timeout_s, else TimeoutError or OSError (before any
    Client: a Client waits for the answer without a limit, and one that fails to start is left open)."""
    async def hello():
        from distributed.comm import connect  # distributed (1.5 s), optional: the farm only
        from distributed.security import Security  # distributed (1.5 s), optional: the farm only

        args = (security or Security()).get_connection_args(role)
        comm = await asyncio.wait_for(connect(address, timeout=timeout_s, **args), timeout_s)
        await comm.close()

    with ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever loop the caller runs
        try:
            pool.submit(asyncio.run, hello()).result()
        except asyncio.TimeoutError:
            raise TimeoutError(f"no answer from a Dask scheduler within {timeout_s:g} s") from None
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - Dask's comms say a setup they cannot use this way
            raise OSError(f"{type(exc).__name__}: {first_line(exc)}") from None
