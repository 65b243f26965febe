"""``collabcausal certs init / issue``: a study CA, party and analyst certificates."""

from __future__ import annotations

import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from collabcausal.certs import (
    certificate_identity,
    check_certificate,
    check_party_role,
    fingerprint,
    load_certificate,
)
from collabcausal.cli import main
from collabcausal.errors import IdentityError


def test_init_and_issue_make_verifiable_certificates_with_private_keys(tmp_path, capsys):
    folder = tmp_path / "certs"
    assert main(["certs", "init", "--dir", str(folder)]) == 0
    assert main(["certs", "issue", "--party", "hospital-a", "--dir", str(folder)]) == 0
    assert main(["certs", "issue", "--analyst", "--host", "study.example.org", "--dir", str(folder)]) == 0
    assert "hospital-a: certificate" in capsys.readouterr().out
    assert check_certificate(folder / "hospital-a.pem", folder / "ca.pem") == "hospital-a"
    assert certificate_identity(folder / "analyst.pem") == "analyst"
    for key in ("ca.key", "hospital-a.key", "analyst.key"):
        assert stat.S_IMODE((folder / key).stat().st_mode) == 0o600
    server = x509.load_pem_x509_certificate((folder / "analyst.pem").read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "study.example.org" in names.get_values_for_type(x509.DNSName)
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage


def test_existing_ca_is_not_overwritten_without_force(tmp_path, capsys):
    assert main(["certs", "init", "--dir", str(tmp_path)]) == 0
    before = (tmp_path / "ca.key").read_bytes()
    assert main(["certs", "init", "--dir", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err and (tmp_path / "ca.key").read_bytes() == before
    assert main(["certs", "init", "--dir", str(tmp_path), "--force"]) == 0


def test_issue_without_a_ca_says_to_run_init(tmp_path, capsys):
    assert main(["certs", "issue", "--party", "a", "--dir", str(tmp_path)]) == 2
    assert "run `collabcausal certs init` first" in capsys.readouterr().err


def test_invalid_name_and_days_are_refused(tmp_path, capsys):
    main(["certs", "init", "--dir", str(tmp_path)])
    assert main(["certs", "issue", "--party", "a b/c", "--dir", str(tmp_path)]) == 2
    assert "invalid identity" in capsys.readouterr().err
    assert main(["certs", "issue", "--party", "a", "--days", "0", "--dir", str(tmp_path)]) == 2
    assert "--days must be positive" in capsys.readouterr().err


def test_party_key_stays_with_the_party_through_request_and_sign(tmp_path, capsys):
    coordinator, hospital = tmp_path / "coordinator", tmp_path / "hospital"
    assert main(["certs", "init", "--dir", str(coordinator)]) == 0
    assert main(["certs", "request", "--party", "hospital-a", "--dir", str(hospital)]) == 0
    assert main(["certs", "sign", "--csr", str(hospital / "hospital-a.csr"), "--dir", str(coordinator)]) == 0
    assert not (coordinator / "hospital-a.key").exists()
    assert check_certificate(coordinator / "hospital-a.pem", coordinator / "ca.pem") == "hospital-a"
    cert = x509.load_pem_x509_certificate((coordinator / "hospital-a.pem").read_bytes())
    key = serialization.load_pem_private_key((hospital / "hospital-a.key").read_bytes(), password=None)
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    (tmp_path / "junk.csr").write_text("not a request")
    assert main(["certs", "sign", "--csr", str(tmp_path / "junk.csr"), "--dir", str(coordinator)]) == 7
    assert "not a readable PEM certificate request" in capsys.readouterr().err


def test_sign_refuses_reserved_names_and_existing_parties_without_force(tmp_path, capsys):
    coordinator, evil = tmp_path / "coordinator", tmp_path / "evil"
    assert main(["certs", "init", "--dir", str(coordinator)]) == 0
    assert main(["certs", "issue", "--analyst", "--dir", str(coordinator)]) == 0
    assert main(["certs", "issue", "--party", "hospital-a", "--dir", str(coordinator)]) == 0
    before = {p.name: p.read_bytes() for p in coordinator.iterdir()}
    for name in ("ca", "analyst", "CA"):
        assert main(["certs", "request", "--party", name, "--dir", str(evil), "--force"]) == 0
        csr = evil / f"{name}.csr"
        for extra in ([], ["--force"]):
            assert main(["certs", "sign", "--csr", str(csr), "--dir", str(coordinator), *extra]) == 2
            err = capsys.readouterr().err
            assert f"reserved name {name!r}" in err and len(err.strip().splitlines()) == 1
    assert main(["certs", "request", "--party", "hospital-a", "--dir", str(evil)]) == 0
    csr = str(evil / "hospital-a.csr")
    assert main(["certs", "sign", "--csr", csr, "--dir", str(coordinator)]) == 2
    assert "hospital-a.pem already exists" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in coordinator.iterdir()} == before
    assert main(["certs", "sign", "--csr", csr, "--dir", str(coordinator), "--force"]) == 0
    assert (coordinator / "hospital-a.pem").read_bytes() != before["hospital-a.pem"]


def test_anchor_key_is_written_once_and_not_overwritten_without_force(tmp_path, capsys):
    from collabcausal.cli import main
    from collabcausal.party.anchor import read_anchor_key

    out = tmp_path / "anchor.key"
    assert main(["certs", "anchor-key", "--out", str(out)]) == 0
    first = read_anchor_key(out)
    assert main(["certs", "anchor-key", "--out", str(out)]) != 0
    assert "exists" in capsys.readouterr().err and read_anchor_key(out) == first
    assert main(["certs", "anchor-key", "--out", str(out), "--force"]) == 0 and read_anchor_key(out) != first


def test_fingerprint_prints_the_peers_entry_and_self_sign_makes_a_party_certificate_no_ca_signed(tmp_path, capsys):
    assert main(["certs", "self-sign", "--party", "hospital-a", "--dir", str(tmp_path)]) == 0
    cert = x509.load_pem_x509_certificate((tmp_path / "hospital-a.pem").read_bytes())
    assert cert.issuer == cert.subject and stat.S_IMODE((tmp_path / "hospital-a.key").stat().st_mode) == 0o600
    assert check_party_role(cert) == "hospital-a"  # clientAuth only: a party's certificate
    capsys.readouterr()
    assert main(["certs", "fingerprint", "--cert", str(tmp_path / "hospital-a.pem")]) == 0
    assert capsys.readouterr().out.strip() == f'{{name = "hospital-a", fingerprint = "{fingerprint(cert)}"}}'
    assert main(["certs", "self-sign", "--party", "analyst", "--dir", str(tmp_path)]) == 2
    assert "reserved name" in capsys.readouterr().err


def test_only_party_certificates_pass_the_role_check(tmp_path):
    """The analyst's certificate (serverAuth, reserved name) never counts as a party's."""
    assert main(["certs", "init", "--dir", str(tmp_path)]) == 0
    assert main(["certs", "issue", "--analyst", "--dir", str(tmp_path)]) == 0
    assert main(["certs", "issue", "--party", "hospital-a", "--dir", str(tmp_path)]) == 0
    assert check_party_role(load_certificate(tmp_path / "hospital-a.pem")) == "hospital-a"
    with pytest.raises(IdentityError, match=r"'analyst'.*not a party's certificate"):
        check_party_role(load_certificate(tmp_path / "analyst.pem"))
