"""The public context bound to the key owner's certificate: the relay cannot substitute its own key."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from collabcausal.certs import make_ca, make_certificate
from collabcausal.errors import IdentityError
from collabcausal.secagg import Signer, Verifier, simulation_identities
from collabcausal.secagg.crypto import generate_round_key, public_bytes
from collabcausal.secagg.identity import fingerprint as certificate_fingerprint
from collabcausal.vertical.advertisement import CONTEXT_KIND, advertise_context, verified_public_context

STUDY, OWNER, EVALUATOR = "study-36", "party-p", "label-holder"


@pytest.fixture(scope="module")
def identities():
    return simulation_identities(STUDY, [OWNER, EVALUATOR])


def _verify(blob, advert, verifier, key_owner=OWNER, round_id="1"):
    return verified_public_context(blob, advert, verifier, key_owner=key_owner, study=STUDY, round_id=round_id)


def test_the_signed_context_is_accepted_after_the_relay(identities, owner1):
    signers, verifier = identities
    blob = owner1.public_context()
    context = _verify(blob, advertise_context(signers[OWNER], STUDY, "1", blob), verifier)
    assert context.fingerprint == owner1.public.fingerprint


def test_a_coordinator_substituting_its_own_context_is_refused(identities, owner1, owner7):
    """The relay keeps the owner's advertisement but sends another key's context: fingerprints differ."""
    signers, verifier = identities
    advert = advertise_context(signers[OWNER], STUDY, "1", owner1.public_context())
    with pytest.raises(IdentityError, match=f"relayed for '{OWNER}' is not the one it signed") as info:
        _verify(owner7.public_context(), advert, verifier)
    assert "\n" not in str(info.value)


def test_a_context_advertised_by_another_party_is_refused(identities, owner1):
    """The relay cannot pass a context the evaluator itself (or anyone else) signed as the key owner's."""
    signers, verifier = identities
    blob = owner1.public_context()
    with pytest.raises(IdentityError, match=f"advertised by '{EVALUATOR}', not by the key owner '{OWNER}'"):
        _verify(blob, advertise_context(signers[EVALUATOR], STUDY, "1", blob), verifier)


def test_a_secure_aggregation_key_advertisement_cannot_pass_for_a_context(identities, owner1):
    """Kinds are signed: an X25519 advertisement over the same 32 bytes does not verify as a context's."""
    signers, verifier = identities
    blob = owner1.public_context()
    advert = signers[OWNER].advertise(STUDY, "1", bytes.fromhex(owner1.public.fingerprint))
    with pytest.raises(IdentityError, match="does not verify"):
        _verify(blob, advert, verifier)
    key_advert = signers[OWNER].advertise(STUDY, "1", public_bytes(generate_round_key()))
    with pytest.raises(IdentityError, match="does not verify"):
        verifier.verify(key_advert, study=STUDY, round_id="1", kind=CONTEXT_KIND)


def test_a_context_of_another_round_is_refused(identities, owner1):
    signers, verifier = identities
    blob = owner1.public_context()
    with pytest.raises(IdentityError, match="round '1', not study"):
        _verify(blob, advertise_context(signers[OWNER], STUDY, "1", blob), verifier, round_id="2")


def test_a_ca_holding_coordinator_is_stopped_by_pinned_certificates(owner1, owner7):
    ca_key, ca_cert = make_ca(days=1)
    keys = [ec.generate_private_key(ec.SECP256R1()) for _ in range(2)]
    real, minted = (Signer(make_certificate(ca_key, ca_cert, OWNER, k.public_key(), days=1), k) for k in keys)
    forged = owner7.public_context()
    advert = advertise_context(minted, STUDY, "1", forged)
    assert _verify(forged, advert, Verifier(ca_cert)).fingerprint == owner7.public.fingerprint
    pinned = Verifier(ca_cert, pins={OWNER: certificate_fingerprint(real.certificate)})
    with pytest.raises(IdentityError, match="not the one pinned"):
        _verify(forged, advert, pinned)
    genuine = owner1.public_context()
    assert (
        _verify(genuine, advertise_context(real, STUDY, "1", genuine), pinned).fingerprint == owner1.public.fingerprint
    )


def test_the_coordinators_own_certificate_cannot_advertise_a_context_even_unpinned(owner1):
    """The role rule of secure aggregation holds for contexts: the analyst's (serverAuth) certificate is no party's."""
    ca_key, ca_cert = make_ca(days=1)
    key = ec.generate_private_key(ec.SECP256R1())
    analyst = Signer(make_certificate(ca_key, ca_cert, "analyst", key.public_key(), server=True, days=1), key)
    blob = owner1.public_context()
    with pytest.raises(IdentityError, match="not a party's certificate"):
        _verify(blob, advertise_context(analyst, STUDY, "1", blob), Verifier(ca_cert), key_owner="analyst")
