"""Transport security for both ends: mutual-TLS credentials, identities, the loopback rule.

Mutual TLS is the default: the analyst presents a server certificate and requires a client
certificate issued by the study CA; the party checks the analyst's certificate against the same CA.
Plaintext is allowed only when every address involved is a loopback address, and prints
:data:`INSECURE_WARNING` to stderr.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc

from collabcausal.certs import check_certificate
from collabcausal.errors import IdentityError

INSECURE_WARNING = (
    "collabcausal: WARNING: plaintext gRPC without TLS (--insecure); identities are unchecked. "
    "Use this only for a study on this machine."
)
PARTY_METADATA = "collabcausal-party"


@dataclass(frozen=True)
class TlsFiles:
    """The study CA certificate and this node's certificate and private key (PEM files)."""

    ca: Path
    cert: Path
    key: Path

    def read(self) -> tuple[bytes, bytes, bytes]:
        """The three files' bytes (CA, certificate, key) with one-line errors."""
        out = []
        for what, path in (("CA certificate", self.ca), ("certificate", self.cert), ("private key", self.key)):
            try:
                out.append(Path(path).read_bytes())
            except OSError as exc:
                raise IdentityError(
                    f"cannot read the {what} {path} ({exc.strerror})",
                    "check the path, or issue one with `collabcausal certs issue`",
                ) from None
        return out[0], out[1], out[2]

    def check(self) -> str:
        """Check that the certificate is in date and issued by the CA; return its identity."""
        return check_certificate(self.cert, self.ca)


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    """Server credentials that require and verify a client certificate from the study CA."""
    ca, cert, key = files.read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def channel_credentials(files: TlsFiles) -> grpc.ChannelCredentials:
    """Client credentials: trust only the study CA, present this party's certificate."""
    ca, cert, key = files.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def require_loopback(address: str) -> None:
    """Allow a plaintext ``address`` (``host:port``) only on loopback; warn on stderr.

    Raises
    ------
    IdentityError
        The host is not a loopback address.
    """
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        resolved = {host}
    if not resolved or not all(_is_loopback(a) for a in resolved):
        raise IdentityError(
            f"--insecure (plaintext) was asked for {address}, which is not a loopback address",
            "use mutual TLS (the default) off this machine; --insecure works only on 127.0.0.1 / localhost",
        )
    print(INSECURE_WARNING, file=sys.stderr)


def peer_identity(context: grpc.ServicerContext) -> str | None:
    """The common name of the client certificate of a mutual-TLS call, or ``None``."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode() if names else None


def diagnose_refusal(address: str, files: TlsFiles | None, *, timeout: float = 3.0) -> str | None:
    """Why the server at ``address`` drops our connections, if it is a TLS matter; else ``None``.

    gRPC reports a refused handshake as a bare "Socket closed". This repeats the handshake with
    Python's :mod:`ssl` to name the cause: with ``files``, the server's alert (unknown CA, expired
    or missing certificate) or our own verification failure; without (a plaintext client), the
    fact that the server speaks TLS. A server that refuses a client certificate closes the connection
    without an alert, while one that accepts it sends its HTTP/2 settings first. A server that
    accepts us, or cannot be reached, gives ``None``.
    """
    host, port = address.rsplit(":", 1)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.set_alpn_protocols(["h2"])
    if files is None:
        context.verify_mode = ssl.CERT_NONE
    else:
        context.load_verify_locations(cafile=str(files.ca))
        context.load_cert_chain(str(files.cert), str(files.key))
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as raw:
            with context.wrap_socket(raw, server_hostname=host.strip("[]")) as tls_socket:
                if files is None:
                    return "the analyst requires TLS and refuses plaintext connections"
                if not tls_socket.recv(1):  # an accepting gRPC server speaks first (HTTP/2 settings)
                    return (
                        "the analyst closed the connection after the handshake: it does not accept this "
                        "party's certificate (issued by another CA, or expired)"
                    )
    except ssl.SSLError as exc:
        return None if files is None else (exc.reason or str(exc)).replace("_", " ").lower()
    except OSError:
        return None
    return None


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False
