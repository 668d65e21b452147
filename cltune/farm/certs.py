"""A farm's credentials (`cltune farm-certs`): a certificate authority of its own, and a
certificate and key for the scheduler, the host and each board, signed by it (the `cryptography`
package). Each machine gets a folder holding only what it needs (ca.pem, cert.pem, key.pem):

    DIR/ca.pem, DIR/ca.key          the authority (its key stays here: it signs new boards)
    DIR/scheduler/, DIR/host/, DIR/<board>/

Keys are written owner-only (0600) in owner-only folders; what exists is kept unless `force`.
Dask checks a peer's certificate against the authority, not its host name (distributed.security):
every certificate the authority signed is admitted in any role."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from pathlib import Path

from ..core.errors import UserError

CA_DAYS = 3650
DAYS = 365
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
RESERVED = ("scheduler", "host")


def _crypto():
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
    except ImportError:
        raise UserError("farm credentials need the cryptography package: pip install 'cltune[farm]'") from None
    return x509, hashes, serialization, ec


def write_private(path: Path, data: bytes) -> None:
    """A file only its owner may read, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


def _folder(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _name(x509, cn: str):
    from cryptography.x509.oid import NameOID  # cryptography, optional: farm-certs and TLS only

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cltune farm"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _sign(subject_cn: str, key, issuer_cn: str, issuer_key, days: int, ca: bool, sans=()):
    x509, hashes, _, _ = _crypto()
    from cryptography.x509.oid import ExtendedKeyUsageOID  # cryptography, optional: farm-certs and TLS only

    now = dt.datetime.now(dt.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(_name(x509, subject_cn)).issuer_name(_name(x509, issuer_cn))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
    else:  # a board listens (to its peers) and connects (to the scheduler): both uses
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                   ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _sans(hosts) -> list:
    x509 = _crypto()[0]
    out = []
    for h in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def _pem_key(key) -> bytes:
    _, _, ser, _ = _crypto()
    return key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())


def _pem(cert) -> bytes:
    return cert.public_bytes(_crypto()[2].Encoding.PEM)


def _authority(folder: Path, force: bool, echo):
    """The folder's authority (made now, or kept), as (certificate, key)."""
    x509, _, ser, ec = _crypto()
    cert_path, key_path = folder / "ca.pem", folder / "ca.key"
    if key_path.exists() and not force:
        if not cert_path.exists():
            raise UserError(f"{cert_path}: missing beside {key_path}; make new credentials with --force")
        if key_path.stat().st_mode & 0o077:
            raise UserError(f"{key_path}: readable by others (mode {key_path.stat().st_mode & 0o777:o}); "
                            f"anyone who read it can make certificates the farm admits: --force makes a new authority")
        try:
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            key = ser.load_pem_private_key(key_path.read_bytes(), None)
        except ValueError as exc:
            raise UserError(f"{key_path}: not this authority's PEM key and certificate ({exc}); "
                            "make new credentials with --force") from None
        echo(f"kept the authority {cert_path} (expires {cert.not_valid_after_utc:%Y-%m-%d})")
        return cert, key
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _sign("cltune farm CA", key, "cltune farm CA", key, CA_DAYS, ca=True)
    write_private(key_path, _pem_key(key))
    cert_path.write_bytes(_pem(cert))
    echo(f"made the authority {cert_path} and its key {key_path} (expires {cert.not_valid_after_utc:%Y-%m-%d}; "
         "keep the key here, copy no machine but this one)")
    return cert, key


def make(folder, scheduler_hosts, boards=(), days: int = DAYS, force: bool = False, echo=print) -> list[Path]:
    """The authority in `folder` and a credentials folder for the scheduler (its certificate names
    scheduler_hosts), the host and each board; returns the folders made or kept."""
    folder = Path(folder)
    names = check_names(scheduler_hosts, boards)
    if days < 1:
        raise UserError(f"--days {days}: expected a whole number of days >= 1")
    _folder(folder)
    ca, ca_key = _authority(folder, force, echo)
    _, _, _, ec = _crypto()
    out = []
    for name in names:
        sub = _folder(folder / name)
        out.append(sub)
        if (sub / "key.pem").exists() and not force:
            echo(f"kept {sub}/ (a key is there; --force replaces it)")
            continue
        key = ec.generate_private_key(ec.SECP256R1())
        sans = scheduler_hosts if name == "scheduler" else [name]
        cert = _sign(name, key, "cltune farm CA", ca_key, days, ca=False, sans=_sans(sans))
        write_private(sub / "key.pem", _pem_key(key))
        (sub / "cert.pem").write_bytes(_pem(cert))
        (sub / "ca.pem").write_bytes(_pem(ca))
        echo(f"made {sub}/ (ca.pem, cert.pem, key.pem; expires {cert.not_valid_after_utc:%Y-%m-%d})")
    return out


def check_names(scheduler_hosts, boards) -> list[str]:
    """The folders to make: scheduler, host, then each board (a name usable as a folder)."""
    if not scheduler_hosts:
        raise UserError("--scheduler HOST: the scheduler's host name or address (its certificate names it)")
    for h in scheduler_hosts:
        if not re.fullmatch(r"[A-Za-z0-9.:_-]{1,253}", h):
            raise UserError(f"--scheduler {h!r}: expected a host name or an IP address")
    seen = list(RESERVED)
    for b in boards:
        if not NAME.fullmatch(b) or b in seen or b in ("ca.pem", "ca.key"):
            why = "used twice or reserved" if NAME.fullmatch(b) else "expected letters, digits, '.', '_' or '-'"
            raise UserError(f"--board {b!r}: {why} (a board's name is its folder and its certificate's name)")
        seen.append(b)
    return seen
