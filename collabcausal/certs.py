"""The study's certificate authority: make it, issue party and analyst certificates.

``collabcausal certs init`` makes a self-signed study CA (``ca.pem`` + ``ca.key``) that the
coordinator keeps; ``collabcausal certs issue --party NAME`` / ``--analyst`` make an EC P-256 key
and a certificate signed by it. A certificate's common name is the holder's identity: the analyst
admits a party whose certificate CN is on the study roster. Party certificates are for TLS clients
(extended key usage clientAuth), the analyst's for a TLS server (serverAuth) with the host names and
addresses parties dial as subject alternative names. Private keys are written with mode 0600.

A party that wants its private key never to leave its machine runs ``certs request`` (key + CSR)
and sends only the ``.csr``; the coordinator signs it with ``certs sign``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from collabcausal.errors import IdentityError, InputError

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
ANALYST = "analyst"
RESERVED_NAMES = frozenset({"ca", ANALYST})
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class IssuedCertificate:
    """Paths of an issued key pair."""

    name: str
    cert: Path
    key: Path


def init_ca(
    directory: str | Path, *, days: int = 365, name: str = "collabcausal study CA", force: bool = False
) -> Path:
    """Make the study CA in ``directory``; return the certificate's path.

    Raises
    ------
    InputError
        A CA already exists there (and ``force`` is False), or ``days`` is not positive.
    """
    folder = Path(directory)
    _check_days(days)
    _refuse_overwrite(folder / CA_KEY, force, "certs init")
    key, cert = make_ca(name=name, days=days)
    folder.mkdir(parents=True, exist_ok=True)
    _write_key(folder / CA_KEY, key)
    (folder / CA_CERT).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return folder / CA_CERT


def make_ca(
    *, name: str = "collabcausal study CA", days: int = 365
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed study CA in memory (EC P-256 key, certificate valid ``days`` from now)."""
    _check_days(days)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue(
    directory: str | Path,
    name: str,
    *,
    server: bool = False,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    days: int = 365,
    not_before: dt.datetime | None = None,
    force: bool = False,
) -> IssuedCertificate:
    """Issue ``<name>.key`` and ``<name>.pem`` in ``directory`` signed by its study CA.

    Parameters
    ----------
    directory : path
        Holds ``ca.pem`` and ``ca.key`` (from :func:`init_ca`); the new files go there too.
    name : str
        The identity (certificate common name): a party's roster name, or ``"analyst"``.
    server : bool
        An analyst (TLS server) certificate valid for ``hosts``; otherwise a party (client) one.
    days : int
        Validity in days from ``not_before`` (default: now).
    """
    folder = Path(directory)
    _check_name(name)
    _refuse_overwrite(folder / f"{name}.key", force, "certs issue")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _sign(folder, name, key.public_key(), server=server, hosts=hosts, days=days, not_before=not_before)
    _write_key(folder / f"{name}.key", key)
    return IssuedCertificate(name, cert, folder / f"{name}.key")


def request_certificate(directory: str | Path, name: str, *, force: bool = False) -> tuple[Path, Path]:
    """Make a party's key and certificate signing request on the party's own machine.

    Writes ``<name>.key`` (stays with the party) and ``<name>.csr`` (sent to the coordinator, who
    signs it with :func:`sign_request`); return both paths.
    """
    folder = Path(directory)
    _check_name(name)
    _refuse_overwrite(folder / f"{name}.key", force, "certs request")
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    _write_key(folder / f"{name}.key", key)
    (folder / f"{name}.csr").write_bytes(csr.public_bytes(serialization.Encoding.PEM))
    return folder / f"{name}.key", folder / f"{name}.csr"


def self_sign(directory: str | Path, name: str, *, days: int = 365, force: bool = False) -> IssuedCertificate:
    """A party's own key and self-signed certificate for secure aggregation, made at the party.

    Writes ``<name>.key`` (stays with the party) and ``<name>.pem`` (its fingerprint goes to the
    peers out of band, ``certs fingerprint``). No CA is involved, so the coordinator never signs it:
    peers trust it by its pinned fingerprint alone (party.toml ``[secure_aggregation]``).
    """
    folder = Path(directory)
    _check_name(name)
    if name.lower() in RESERVED_NAMES:
        raise InputError(f"{name!r} is a reserved name (the study CA's or the analyst's)", "use the party's own name")
    _refuse_overwrite(folder / f"{name}.key", force, "certs self-sign")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = make_certificate(key, None, name, key.public_key(), days=days)
    folder.mkdir(parents=True, exist_ok=True)
    _write_key(folder / f"{name}.key", key)
    (folder / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return IssuedCertificate(name, folder / f"{name}.pem", folder / f"{name}.key")


def sign_request(
    directory: str | Path, csr_path: str | Path, *, days: int = 365, force: bool = False
) -> IssuedCertificate:
    """Sign a party's request with the study CA in ``directory``; write ``<name>.pem`` there.

    A request cannot take a reserved name (:data:`RESERVED_NAMES`: the CA's and the analyst's
    files), and replaces an existing ``<name>.pem`` (another party's certificate) only with ``force``.

    Raises
    ------
    IdentityError
        The request is unreadable, its signature is invalid, or it has no usable common name.
    InputError
        The name is reserved, or its certificate exists and ``force`` is False.
    """
    folder = Path(directory)
    try:
        csr = x509.load_pem_x509_csr(Path(csr_path).read_bytes())
    except (OSError, ValueError):
        raise IdentityError(
            f"{csr_path} is not a readable PEM certificate request", "make it with `certs request`"
        ) from None
    if not csr.is_signature_valid:
        raise IdentityError(f"{csr_path} has an invalid signature", "ask the party to make a new request")
    names = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    name = str(names[0].value) if names else ""
    _check_name(name)
    if name.lower() in RESERVED_NAMES:
        raise InputError(
            f"{csr_path} asks for the reserved name {name!r} (the study CA's or the analyst's)",
            "ask the party to make a new request with its own name (`certs request --party NAME`)",
        )
    clash = [p for p in folder.glob("*.pem") if p.stem.lower() == name.lower()]
    if clash:
        _refuse_overwrite(clash[0], force, "certs sign")
    cert = _sign(folder, name, csr.public_key(), server=False, hosts=(), days=days, not_before=None)
    return IssuedCertificate(name, cert, Path(csr_path).with_suffix(".key"))


def _sign(
    folder: Path,
    name: str,
    public_key: ec.EllipticCurvePublicKey,
    *,
    server: bool,
    hosts: Sequence[str],
    days: int,
    not_before: dt.datetime | None,
) -> Path:
    _check_days(days)
    if not (folder / CA_KEY).is_file():
        raise InputError(f"no study CA in {folder} ({CA_KEY} missing)", "run `collabcausal certs init` first")
    ca_key = serialization.load_pem_private_key((folder / CA_KEY).read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate((folder / CA_CERT).read_bytes())
    cert = make_certificate(
        ca_key,  # type: ignore[arg-type]
        ca_cert,
        name,
        public_key,
        server=server,
        hosts=hosts,
        days=days,
        not_before=not_before,
    )
    path = folder / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def make_certificate(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate | None,
    name: str,
    public_key: ec.EllipticCurvePublicKey,
    *,
    server: bool = False,
    hosts: Sequence[str] = DEFAULT_HOSTS,
    days: int = 365,
    not_before: dt.datetime | None = None,
) -> x509.Certificate:
    """A certificate for ``name`` and ``public_key`` signed by the CA, in memory.

    The common name (and, for a party, the one subject alternative name) is ``name``; a party
    certificate is for TLS clients, an analyst (``server``) one for a TLS server valid for ``hosts``.
    ``ca_cert=None`` makes a self-signed certificate (``ca_key`` is then the key of ``public_key``).
    """
    _check_days(days)
    start = not_before or _now() - dt.timedelta(minutes=5)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_key = ca_key.public_key() if ca_cert is None else ca_cert.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if ca_cert is None else ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key),  # type: ignore[arg-type]
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(_alt_names(hosts if server else [name])), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def certificate_identity(cert_path: str | Path) -> str:
    """The common name of the certificate at ``cert_path``."""
    return common_name(load_certificate(cert_path), str(cert_path))


def common_name(cert: x509.Certificate, label: str = "certificate") -> str:
    """The common name of an in-memory certificate (``label`` names it in the error)."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        raise IdentityError(f"{label}: certificate has no common name", "issue it with `collabcausal certs issue`")
    return str(names[0].value)


def check_certificate(cert_path: str | Path, ca_path: str | Path, *, now: dt.datetime | None = None) -> str:
    """Check that a certificate is in date and signed by the study CA; return its identity.

    Raises
    ------
    IdentityError
        Expired, not yet valid, or signed by another CA (the message says which).
    """
    cert, ca = load_certificate(cert_path), load_certificate(ca_path)
    return verify_certificate(cert, ca, str(cert_path), str(ca_path), now=now)


def verify_certificate(
    cert: x509.Certificate,
    ca: x509.Certificate,
    label: str = "certificate",
    ca_label: str = "ca.pem",
    *,
    now: dt.datetime | None = None,
) -> str:
    """:func:`check_certificate` for in-memory certificates; ``label``/``ca_label`` name them in errors."""
    check_validity(cert, label, now=now)
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError) as exc:
        raise IdentityError(
            f"certificate {label} was not issued by the study CA {ca_label} ({type(exc).__name__})",
            "use the certificate and ca.pem the study coordinator gave you",
        ) from None
    return common_name(cert, label)


def check_validity(cert: x509.Certificate, label: str = "certificate", *, now: dt.datetime | None = None) -> None:
    """Refuse a certificate out of its validity period (``label`` names it in the error)."""
    moment = now or _now()
    if moment > cert.not_valid_after_utc:
        raise IdentityError(
            f"certificate {label} expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC",
            "ask the study coordinator for a new one (`collabcausal certs issue`)",
        )
    if moment < cert.not_valid_before_utc:
        raise IdentityError(
            f"certificate {label} is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC",
            "check this machine's clock",
        )


def check_party_role(cert: x509.Certificate, label: str = "certificate") -> str:
    """A party's certificate: its common name is not reserved and it is for TLS clients only.

    The analyst's certificate (``certs issue --analyst``) is for a TLS server (serverAuth) and named
    :data:`ANALYST`; a party's (``certs issue --party``, ``certs sign``, ``certs self-sign``) is
    for TLS clients (clientAuth). A certificate that is not plainly a party's never counts as one on
    a secure-aggregation roster, however it chains. Returns the common name.

    Raises
    ------
    IdentityError
        A reserved name, no clientAuth usage, or a serverAuth usage.
    """
    name = common_name(cert, label)
    try:
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        usages = set()
    if name.lower() in RESERVED_NAMES or ExtendedKeyUsageOID.SERVER_AUTH in usages or (
        ExtendedKeyUsageOID.CLIENT_AUTH not in usages
    ):
        raise IdentityError(
            f"certificate {label} (common name {name!r}) is not a party's certificate (reserved name, "
            "or not for TLS clients only)",
            "only parties' certificates (`certs issue --party`, `certs sign`, `certs self-sign`) take part in a round",
        )
    return name


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the certificate's DER bytes, hex: the value a party pins for a peer."""
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


def check_node_files(ca_path: str | Path, cert_path: str | Path, key_path: str | Path, name: str) -> str:
    """A node's TLS files, checked without connecting; one line saying what was checked.

    The certificate must be in date and issued by the study CA (:func:`check_certificate`), name
    ``name`` (the party's ``[party] name``, or :data:`ANALYST`), and ``key_path`` must hold its
    private key.

    Raises
    ------
    IdentityError
        Any of these fails (the message says which).
    """
    identity = check_certificate(cert_path, ca_path)
    if identity != name:
        raise IdentityError(
            f"certificate {cert_path} is issued to {identity}, not to {name}",
            f"use the certificate issued to {name} (`collabcausal certs request --party {name}`)",
        )
    cert = load_certificate(cert_path)
    try:
        key = serialization.load_pem_private_key(Path(key_path).read_bytes(), password=None)
    except FileNotFoundError:
        raise IdentityError(f"{key_path}: no such private key file", "check the path in the configuration") from None
    except (ValueError, TypeError):
        raise IdentityError(f"{key_path} is not an unencrypted PEM private key", "point to the .key file") from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(serialization.Encoding.PEM, public) != cert.public_key().public_bytes(
        serialization.Encoding.PEM, public
    ):
        raise IdentityError(
            f"private key {key_path} does not match the certificate {cert_path}",
            "use the key made together with this certificate's signing request",
        )
    return (
        f"certificate {cert_path}: issued to {identity} by the study CA {ca_path}, valid until "
        f"{cert.not_valid_after_utc:%Y-%m-%d}; private key matches"
    )


def load_certificate(path: str | Path) -> x509.Certificate:
    """Read a PEM certificate with a one-line error."""
    p = Path(path)
    try:
        return x509.load_pem_x509_certificate(p.read_bytes())
    except FileNotFoundError:
        raise IdentityError(f"{p}: no such certificate file", "check the path in the configuration") from None
    except ValueError:
        raise IdentityError(f"{p} is not a PEM certificate", "point to the .pem file from `certs issue`") from None


def _alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _refuse_overwrite(path: Path, force: bool, command: str) -> None:
    if path.exists() and not force:
        raise InputError(f"{path} already exists", f"keep it, or pass --force to `collabcausal {command}`")


def _check_name(name: str) -> None:
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise InputError(f"invalid identity {name!r}", "use letters, digits, '-', '_' or '.' (e.g. hospital-a)")


def _check_days(days: int) -> None:
    if days <= 0:
        raise InputError(f"--days must be positive, got {days}", "give the validity in days, e.g. --days 365")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)
