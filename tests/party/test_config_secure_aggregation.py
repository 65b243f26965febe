"""party.toml ``[secure_aggregation]``: pins by fingerprint or certificate file, "any", min_parties, own certificate.

The end-to-end test is the certificate flow in which no coordinator CA signs what the parties trust:
each hospital makes a self-signed certificate (``certs self-sign``), the hospitals exchange
fingerprints (``certs fingerprint``) and pin each other; a round then runs through ``Party.handle``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collabcausal.certs import fingerprint, load_certificate, self_sign
from collabcausal.cli import main
from collabcausal.errors import ConfigError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.messages import Message
from collabcausal.party.config import load_party_config
from collabcausal.party.dp_effects import STATISTICS
from collabcausal.secagg import KEYS_OPERATION
from collabcausal.secagg.pins import ANY_MIN_PARTIES, DEFAULT_MIN_PARTIES

NAMES = ["h1", "h2", "h3"]
BASE = """
[party]
name = "{name}"
study = "s"
[analyst]
address = "127.0.0.1:50051"
insecure = true
[data]
path = "t.csv"
treatment = "t"
outcome = "y"
[policy]
columns = ["a"]
operations = ["describe", "secagg_keys", "dp_effects_statistics"]
min_subjects = 5
[privacy]
epsilon = 10.0
delta = 1e-5
ledger = "ledger.sqlite"
"""


def _folder(tmp_path, name: str):
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(len(name))
    pd.DataFrame({"a": rng.uniform(size=40), "t": rng.integers(0, 2, 40), "y": rng.uniform(size=40)}).to_csv(
        folder / "t.csv", index=False)
    return folder


def _write(tmp_path, name: str, section: str):
    path = _folder(tmp_path, name) / "party.toml"
    path.write_text(BASE.format(name=name) + section)
    return path


def _pin_lines(tmp_path, names) -> str:
    entries = [f'{{name = "{n}", fingerprint = "{fingerprint(load_certificate(tmp_path / n / "own.pem"))}"}}'
               for n in names]
    return "[" + ", ".join(entries) + "]"


@pytest.fixture()
def self_signed(tmp_path):
    """Each hospital's own key and self-signed certificate, as `certs self-sign` writes them."""
    for name in NAMES:
        issued = self_sign(_folder(tmp_path, name), name)
        issued.cert.rename(tmp_path / name / "own.pem")
        issued.key.rename(tmp_path / name / "own.key")
    return tmp_path


def test_pins_by_fingerprint_or_certificate_file_and_their_default_minimum(self_signed):
    root = self_signed
    by_file = '{name = "h3", certificate = "../h3/own.pem"}'
    fingerprints = _pin_lines(root, ["h2"])[1:-1]
    config = load_party_config(_write(root, "h1", f"[secure_aggregation]\npeers = [{fingerprints}, {by_file}]\n"))
    assert config.secure_aggregation.pins == {n: fingerprint(load_certificate(root / n / "own.pem"))
                                              for n in ("h2", "h3")}
    assert config.secure_aggregation.min_parties == DEFAULT_MIN_PARTIES
    anyone = load_party_config(_write(root, "h1", '[secure_aggregation]\npeers = "any"\n'))
    assert anyone.secure_aggregation.pins is None and anyone.secure_aggregation.min_parties == ANY_MIN_PARTIES
    assert "honest-but-curious" in anyone.secure_aggregation.describe()
    assert load_party_config(_write(root, "h1", "")).secure_aggregation is None


@pytest.mark.parametrize(("section", "message"), [
    ('peers = [{name = "h2", fingerprint = "12ab"}]', "not 64 hex digits"),
    ('peers = [{name = "h2"}]', "exactly one of the two"),
    ('peers = [{name = "h2", fingerprint = "' + "a" * 64 + '"}, {name = "h2", fingerprint = "' + "b" * 64 + '"}]',
     "names a party, or a fingerprint, twice"),
    ('peers = [{name = "h2", fingerprint = "' + "a" * 64 + '"}, {name = "h3", fingerprint = "' + "A" * 64 + '"}]',
     "or a fingerprint, twice"),
    ('peers = "any"\ncert = "own.pem"\nkey = "own.key"', 'pins only: list the peers instead of "any"'),
    ('peers = "any"\nmin_parties = 1', "min_parties"),
    ('peers = "everyone"', "peers"),
])
def test_a_bad_secure_aggregation_section_is_one_config_error(self_signed, section, message):
    with pytest.raises(ConfigError, match=message):
        load_party_config(_write(self_signed, "h1", f"[secure_aggregation]\n{section}\n"))


def test_self_signed_pinned_parties_run_a_round_with_no_ca_and_check_says_so(self_signed, capsys):
    """The coordinator signs nothing the parties trust: it could mint no certificate a party would accept."""
    root = self_signed
    paths = {}
    for name in NAMES:
        pins = _pin_lines(root, [n for n in NAMES if n != name])
        paths[name] = _write(root, name, f'[secure_aggregation]\npeers = {pins}\ncert = "own.pem"\nkey = "own.key"\n')
    assert main(["party", "join", "--config", str(paths["h1"]), "--check"]) == 0
    out = capsys.readouterr().out
    mine = fingerprint(load_certificate(root / "h1" / "own.pem"))
    assert "secure aggregation: pinned to 2 peers (h2, h3), at least 3 parties: holds against a malicious " in out
    assert f"this party's fingerprint for its peers: {mine}" in out
    parties = [load_party_config(paths[n]).build_party() for n in NAMES]
    ads = [p.handle(Message(KEYS_OPERATION, {"study": "s", "round": "r1"})).params["advertisement"] for p in parties]
    fm = FeatureMap(((0.0, 1.0),), (0.0, 1.0), n_sites=1)
    request = Message(STATISTICS, {"study": "s", "rho": zcdp_rho(1.0, 1e-6), "delta": 1e-6, "columns": ["a"],
                                   "design": fm.to_spec(), "site": 0, "n_folds": 1,
                                   "secagg": {"round": "r1", "advertisements": ads}})
    reply = parties[0].handle(request)
    assert (reply.params["n_parties"], reply.params["pinned"]) == (3, True)


def test_check_says_what_a_party_without_pins_or_with_any_gets(tmp_path, capsys):
    assert main(["party", "join", "--config", str(_write(tmp_path, "h1", "")), "--check"]) == 0
    assert 'secure aggregation: refused: no [secure_aggregation] section' in capsys.readouterr().out
    path = _write(tmp_path, "h1", '[secure_aggregation]\npeers = "any"\n')
    assert main(["party", "join", "--config", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert "holds only against an honest-but-curious coordinator" in out
    assert "refused: no certificate signs this party's round keys" in out  # insecure, no cert of its own
