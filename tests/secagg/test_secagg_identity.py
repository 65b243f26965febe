"""Key advertisements: bound to the party's study certificate, so the relay cannot substitute keys."""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from secagg_helpers import NAMES, STUDY

from collabcausal.certs import init_ca, issue, make_ca, make_certificate
from collabcausal.errors import IdentityError
from collabcausal.secagg import Signer, Verifier, simulation_identities
from collabcausal.secagg.crypto import generate_round_key, public_bytes
from collabcausal.secagg.identity import advertisement_bytes, fingerprint

A, B = NAMES[0], NAMES[1]


@pytest.fixture()
def advert(identities):
    signers, _ = identities
    return signers[A].advertise(STUDY, "1", public_bytes(generate_round_key()))


def test_a_valid_advertisement_verifies_after_a_json_round_trip(identities, advert):
    _, verifier = identities
    relayed = json.loads(json.dumps(advert))
    name, key = verifier.verify(relayed, study=STUDY, round_id="1")
    assert name == A and key.hex() == advert["public_key"]
    assert all(isinstance(v, str) for v in advert.values())


def test_a_coordinator_substituting_its_own_key_is_refused(identities, advert):
    _, verifier = identities
    forged = {**advert, "public_key": public_bytes(generate_round_key()).hex()}
    with pytest.raises(IdentityError, match=f"signature on the key advertisement of '{A}' does not verify"):
        verifier.verify(forged, study=STUDY, round_id="1")


def test_an_advertisement_from_another_ca_is_refused_by_the_ca_and_by_the_pins(identities):
    _, verifier = identities
    foreign, _ = simulation_identities(STUDY, [A])
    advert = foreign[A].advertise(STUDY, "1", public_bytes(generate_round_key()))
    with pytest.raises(IdentityError, match="not issued by the study CA"):
        Verifier(verifier.ca).verify(advert, study=STUDY, round_id="1")
    with pytest.raises(IdentityError, match="not the one pinned"):
        verifier.verify(advert, study=STUDY, round_id="1")


def test_the_certificate_of_party_a_cannot_advertise_for_party_b(identities):
    """A's advertisement relabelled for B, or B's bytes signed with A's key: both refused."""
    signers, verifier = identities
    key = public_bytes(generate_round_key())
    advert = signers[A].advertise(STUDY, "1", key)
    with pytest.raises(IdentityError, match=f"of '{B}' carries the certificate of '{A}'"):
        verifier.verify({**advert, "party": B}, study=STUDY, round_id="1")
    signature = signers[A].private_key.sign(advertisement_bytes(B, STUDY, "1", key), ec.ECDSA(hashes.SHA256()))
    resigned = {**advert, "party": B, "signature": base64.b64encode(signature).decode("ascii")}
    with pytest.raises(IdentityError, match=f"of '{B}' carries the certificate of '{A}'"):
        verifier.verify(resigned, study=STUDY, round_id="1")


@pytest.mark.parametrize(("study", "round_id"), [("other-study", "1"), (STUDY, "2")])
def test_an_advertisement_for_another_study_or_round_is_refused(identities, advert, study, round_id):
    _, verifier = identities
    with pytest.raises(IdentityError, match=f"advertisement of '{A}' is for study"):
        verifier.verify(advert, study=study, round_id=round_id)


@pytest.mark.parametrize(
    "change",
    [{"signature": "not base64!"}, {"public_key": "00" * 31}, {"certificate": "-----BEGIN nonsense"}, {"round": 1}],
    ids=["signature", "short-key", "certificate", "non-text"],
)
def test_malformed_advertisements_are_refused_with_the_party_named(identities, advert, change):
    _, verifier = identities
    with pytest.raises(IdentityError, match=f"'{A}'"):
        verifier.verify({**advert, **change}, study=STUDY, round_id="1")


def test_an_expired_certificate_is_refused(identities):
    ca_key, ca_cert = make_ca(days=30)
    key = ec.generate_private_key(ec.SECP256R1())
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=3)
    old = Signer(make_certificate(ca_key, ca_cert, A, key.public_key(), days=1, not_before=start), key)
    advert = old.advertise(STUDY, "1", public_bytes(generate_round_key()))
    with pytest.raises(IdentityError, match="expired"):
        Verifier(ca_cert).verify(advert, study=STUDY, round_id="1")


def test_a_ca_holder_can_mint_a_name_unless_certificates_are_pinned():
    """The stated limit: whoever holds the CA key passes the CA check; pins stop it."""
    ca_key, ca_cert = make_ca(days=1)
    keys = [ec.generate_private_key(ec.SECP256R1()) for _ in range(2)]
    real, minted = (Signer(make_certificate(ca_key, ca_cert, A, k.public_key(), days=1), k) for k in keys)
    advert = minted.advertise(STUDY, "1", public_bytes(generate_round_key()))
    assert Verifier(ca_cert).verify(advert, study=STUDY, round_id="1")[0] == A
    pinned = Verifier(ca_cert, pins={A: fingerprint(real.certificate)})
    with pytest.raises(IdentityError, match="not the one pinned"):
        pinned.verify(advert, study=STUDY, round_id="1")
    genuine = real.advertise(STUDY, "1", public_bytes(generate_round_key()))
    assert pinned.verify(genuine, study=STUDY, round_id="1")[0] == A


def test_signer_and_verifier_read_the_files_of_certs_issue(tmp_path):
    ca = init_ca(tmp_path)
    issued = issue(tmp_path, A)
    signer = Signer.from_files(issued.cert, issued.key)
    assert signer.name == A
    advert = signer.advertise(STUDY, "1", public_bytes(generate_round_key()))
    assert Verifier.from_file(ca).verify(advert, study=STUDY, round_id="1")[0] == A
    other = issue(tmp_path, B)
    with pytest.raises(IdentityError, match="is not the private key of"):
        Signer.from_files(issued.cert, other.key)
    with pytest.raises(IdentityError, match="not a readable PEM private key"):
        Signer.from_files(issued.cert, tmp_path / "missing.key")


def test_the_package_uses_the_certificate_code_without_loading_the_transport():
    """Roles may import secagg: it reads certificates but never imports grpc."""
    loaded = "sorted(m for m in ('grpc', 'collabcausal.protocol.server') if m in sys.modules)"
    code = f"import sys, collabcausal.secagg; print({loaded})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
