"""Binding a party's round key to its study certificate, so the relay cannot substitute keys.

The coordinator relays the parties' X25519 public keys (parties never talk to each other). A
coordinator that swapped a key for its own would share every pairwise mask with the party it
deceives and could unmask that party's upload. So each party signs its **key advertisement**

    (party name, study, round id, X25519 public key)

with the private key of its certificate (ECDSA P-256, SHA-256): by default its mutual-TLS one
(``[analyst] cert/key`` of party.toml), or a self-signed one made at the party
(``[secure_aggregation] cert/key``, ``certs self-sign``; collabcausal/certs.py). Every
party verifies every advertisement before deriving a mask: the certificate is the one the party
pinned for that name (or, with ``peers = "any"``, chains to the study CA), is in date and is a
party's (not the analyst's), its common name is the advertised party name, the signature verifies
over :func:`advertisement_bytes`, and the study and round are the ones the party is in.

Why pins (docs/secure-aggregation.md): whoever holds the study CA's private key can mint a
certificate for any name, and with ``collabcausal certs init`` the coordinator keeps ``ca.key``. A
roster checked against the CA alone therefore protects only against an honest-but-curious
coordinator; against a malicious one each party pins its peers' certificate fingerprints, exchanged
out of band (:class:`Verifier` ``pins``; the roster rules built on it are in pins.py).

An advertisement is a JSON-able dict of str values (hex public key, base64 signature, PEM
certificate); :func:`simulation_identities` makes a throwaway in-memory CA and party certificates
for simulations, pinned to each other.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from collabcausal.certs import (
    check_party_role,
    check_validity,
    common_name,
    fingerprint,
    load_certificate,
    make_ca,
    make_certificate,
    verify_certificate,
)
from collabcausal.errors import IdentityError
from collabcausal.secagg.crypto import PUBLIC_KEY_BYTES, canonical_bytes

FIELDS = ("party", "study", "round", "public_key", "certificate", "signature")
"""The keys of an advertisement dict, all str."""
SIMULATION_DAYS = 30
"""Validity of :func:`simulation_identities`' certificates (a long sweep must not outlive them)."""

# fingerprint and load_certificate (collabcausal/certs.py) are re-exported for the roles, which never import protocol/
__all__ = [
    "FIELDS",
    "Signer",
    "Verifier",
    "advertisement_bytes",
    "fingerprint",
    "load_certificate",
    "simulation_identities",
]


def advertisement_bytes(
    party: str, study: str, round_id: str, public_key: bytes, kind: str = "key-advertisement"
) -> bytes:
    """The canonical bytes a party signs: the four advertised values, unambiguously encoded.

    ``kind`` separates what the 32 bytes are: an X25519 key ("key-advertisement") or the SHA-256
    digest of another public key (collabcausal/vertical/advertisement.py signs a CKKS context's).
    """
    return canonical_bytes(kind, party, study, round_id, public_key.hex())


@dataclass(frozen=True)
class Signer:
    """A party's certificate and its private key: signs the party's key advertisements.

    Build it with :meth:`from_files` (party.toml's ``[analyst] cert`` / ``key``) or
    :func:`simulation_identities`. ``name`` is the certificate's common name.
    """

    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey = field(repr=False)

    @classmethod
    def from_files(cls, cert: str | Path, key: str | Path) -> Signer:
        """Read the PEM certificate and its unencrypted PEM private key (as ``certs issue`` writes them)."""
        certificate = load_certificate(cert)
        try:
            private_key = serialization.load_pem_private_key(Path(key).read_bytes(), password=None)
        except (OSError, ValueError, TypeError):
            raise IdentityError(
                f"{key} is not a readable PEM private key", "point to the .key file of `certs issue`"
            ) from None
        if not isinstance(private_key, ec.EllipticCurvePrivateKey) or (
            private_key.public_key().public_numbers() != certificate.public_key().public_numbers()  # type: ignore[union-attr]
        ):
            raise IdentityError(f"{key} is not the private key of {cert}", "use the key issued with that certificate")
        return cls(certificate, private_key)

    @property
    def name(self) -> str:
        """The certificate's common name: the party's roster name."""
        return common_name(self.certificate)

    def advertise(
        self, study: str, round_id: str, public_key: bytes, *, kind: str = "key-advertisement"
    ) -> dict[str, str]:
        """A signed advertisement of ``public_key`` (32 raw bytes: X25519 key or digest, per ``kind``)."""
        signature = self.private_key.sign(
            advertisement_bytes(self.name, study, round_id, public_key, kind), ec.ECDSA(hashes.SHA256())
        )
        return {
            "party": self.name,
            "study": study,
            "round": round_id,
            "public_key": public_key.hex(),
            "certificate": self.certificate.public_bytes(serialization.Encoding.PEM).decode("ascii"),
            "signature": base64.b64encode(signature).decode("ascii"),
        }


@dataclass(frozen=True)
class Verifier:
    """Checks key advertisements: a party's certificate, pinned or chained to the study CA.

    Parameters
    ----------
    ca : cryptography.x509.Certificate or None
        The study CA's certificate (party.toml ``[analyst] ca``; :meth:`from_file`). Only consulted
        without ``pins``.
    pins : mapping of str to str, optional
        Party name -> SHA-256 fingerprint (hex) of its certificate (:func:`fingerprint`). When
        given, the pin is the trust anchor: a party absent from it, or with another certificate, is
        refused whatever CA signed it (protection against a coordinator that holds the CA key and
        mints certificates), and a pinned certificate need not chain to ``ca`` (a self-signed one,
        ``certs self-sign``, is accepted by its fingerprint). Without pins a certificate must chain
        to ``ca``: trust in the coordinator's roster (docs/secure-aggregation.md).

    Either way the certificate must be in date and a party's (:func:`check_party_role`: clientAuth,
    not serverAuth, not the analyst's name), so the coordinator's own certificate never passes.
    """

    ca: x509.Certificate | None
    pins: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.ca is None and self.pins is None:
            raise IdentityError("a verifier needs the study CA or pinned certificates", "give ca.pem or pins")

    @classmethod
    def from_file(cls, ca: str | Path, pins: Mapping[str, str] | None = None) -> Verifier:
        """A verifier for the study CA certificate at ``ca``."""
        return cls(load_certificate(ca), pins)

    def verify(
        self, advertisement: Mapping[str, object], *, study: str, round_id: str, kind: str = "key-advertisement"
    ) -> tuple[str, bytes]:
        """Check one advertisement (of ``kind``) for ``study`` and ``round_id``; return (party name, its 32 bytes).

        Raises
        ------
        IdentityError
            One line naming the advertised party and the check that failed.
        """
        party = str(advertisement.get("party", "?"))
        values = _fields(advertisement, party)
        fix = "restart the round with fresh keys; if it recurs, the relay is tampering with advertisements"
        if values["study"] != study or values["round"] != round_id:
            raise IdentityError(
                f"the key advertisement of {party!r} is for study {values['study']!r} round {values['round']!r}, "
                f"not study {study!r} round {round_id!r}",
                fix,
            )
        try:
            cert = x509.load_pem_x509_certificate(values["certificate"].encode("ascii"))
            signature = base64.b64decode(values["signature"], validate=True)
            public_key = bytes.fromhex(values["public_key"])
        except (ValueError, UnicodeEncodeError, binascii.Error):
            raise IdentityError(f"the key advertisement of {party!r} is not well formed", fix) from None
        if len(public_key) != PUBLIC_KEY_BYTES:
            raise IdentityError(f"the key advertisement of {party!r} has a {len(public_key)}-byte key", fix)
        subject = check_party_role(cert, f"of {party!r}")
        if subject != party:
            raise IdentityError(f"the key advertisement of {party!r} carries the certificate of {subject!r}", fix)
        self._trust(cert, party)
        try:
            cert.public_key().verify(  # type: ignore[call-arg,union-attr]
                signature, advertisement_bytes(party, study, round_id, public_key, kind), ec.ECDSA(hashes.SHA256())
            )
        except (InvalidSignature, TypeError):
            raise IdentityError(f"the signature on the key advertisement of {party!r} does not verify", fix) from None
        return party, public_key

    def _trust(self, cert: x509.Certificate, party: str) -> None:
        """The pin (if any) or the study CA vouches for ``cert``; in date either way."""
        if self.pins is None:
            verify_certificate(cert, self.ca, f"of {party!r}", "of this study")  # type: ignore[arg-type]
            return
        pin_fix = (
            "compare fingerprints with that party out of band (`collabcausal certs fingerprint`); pin it in "
            "[secure_aggregation] peers only if it is a real, independent party, else restart without it"
        )
        if party not in self.pins:
            raise IdentityError(f"{party!r} is not a pinned peer of this party", pin_fix)
        if self.pins[party] != fingerprint(cert):
            raise IdentityError(
                f"the certificate of {party!r} is not the one pinned for it (fingerprint {fingerprint(cert)[:16]}...)",
                pin_fix,
            )
        check_validity(cert, f"of {party!r}")


def simulation_identities(study: str, names: Sequence[str]) -> tuple[dict[str, Signer], Verifier]:
    """A throwaway in-memory study CA and one party certificate per name (simulations, tests).

    Uses the project's own certificate code (collabcausal/certs.py); nothing touches the disk. The
    verifier pins every party's certificate, as a deployment's party.toml does.
    """
    ca_key, ca_cert = make_ca(name=f"{study} simulation CA", days=SIMULATION_DAYS)
    signers = {}
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        signers[name] = Signer(make_certificate(ca_key, ca_cert, name, key.public_key(), days=SIMULATION_DAYS), key)
    return signers, Verifier(ca_cert, pins={name: fingerprint(s.certificate) for name, s in signers.items()})


def _fields(advertisement: Mapping[str, object], party: str) -> dict[str, str]:
    missing = [k for k in FIELDS if not isinstance(advertisement.get(k), str)]
    if missing:
        raise IdentityError(
            f"the key advertisement of {party!r} lacks text fields {', '.join(missing)}",
            "send the dict that Signer.advertise returns, unchanged",
        )
    return {k: str(advertisement[k]) for k in FIELDS}
