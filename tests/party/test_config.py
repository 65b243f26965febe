"""party.toml: loading, defaults, and one-line errors naming the key."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import ConfigError, InputError
from collabcausal.party.audit import JsonlAuditLog
from collabcausal.party.config import load_party_config
from collabcausal.party.policy import PartyPolicy

GOOD = """
[party]
name = "h1"
study = "s"

[analyst]
address = "127.0.0.1:50051"
ca = "certs/ca.pem"
cert = "certs/h1.pem"
key = "certs/h1.key"

[data]
path = "table.csv"
treatment = "t"
outcome = "y"
subject_id = "id"

[policy]
columns = ["b", "a"]
operations = ["describe"]
min_subjects = 5
"""


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "id": range(20),
            "a": rng.normal(size=20),
            "b": rng.normal(size=20),
            "secret": rng.normal(size=20),
            "t": np.arange(20) % 2,
            "y": rng.normal(size=20),
        }
    )
    frame.to_csv(tmp_path / "table.csv", index=False)
    return tmp_path


def _write(folder, text):
    path = folder / "party.toml"
    path.write_text(text)
    return path


def test_good_config_builds_a_party_with_only_the_policy_columns(folder):
    config = load_party_config(_write(folder, GOOD))
    party = config.build_party()
    assert party.name == "h1" and party.table.covariate_names == ("b", "a")
    assert party.table.has_labels and party.table.subject_ids is not None
    assert isinstance(party.policy, PartyPolicy) and party.policy.min_subjects == 5
    assert isinstance(party.audit, JsonlAuditLog) and party.audit.path == folder / "audit.jsonl"
    assert config.connection.ca == folder / "certs" / "ca.pem" and not config.connection.insecure
    assert party.ledger is None


def test_privacy_section_opens_the_ledger(folder):
    config = load_party_config(_write(folder, GOOD + '\n[privacy]\nepsilon = 2.0\ndelta = 1e-6\nledger = "l.sqlite"\n'))
    party = config.build_party()
    assert party.ledger is not None and (folder / "l.sqlite").exists()


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.replace("[policy]", "[polcy]"), "unknown section"),
        (lambda t: t.replace('name = "h1"\n', ""), r"\[party\] name is missing"),
        (lambda t: t.replace('key = "certs/h1.key"\n', ""), "key is missing"),
        (lambda t: t.replace('columns = ["b", "a"]', "columns = []"), "columns must list"),
        (lambda t: t.replace("min_subjects = 5", "min_subjects = 0"), "min_subjects"),
        (lambda t: t + "\n[privacy]\ndelta = 0.1\n", "needs epsilon"),
        (lambda t: t + "\n[alignment]\nkey_file = 'none.key'\n", "no such alignment key"),
        (lambda t: t.replace("[party]", "[party"), "not valid TOML"),
    ],
)
def test_bad_config_is_one_config_error(folder, edit, match):
    with pytest.raises(ConfigError, match=match):
        load_party_config(_write(folder, edit(GOOD)))


def test_insecure_config_needs_no_certificates(folder):
    text = GOOD.replace('ca = "certs/ca.pem"\ncert = "certs/h1.pem"\nkey = "certs/h1.key"\n', "insecure = true\n")
    assert load_party_config(_write(folder, text)).connection.insecure


def test_policy_column_missing_from_the_table_is_an_input_error(folder):
    config = load_party_config(_write(folder, GOOD.replace('["b", "a"]', '["b", "zz"]')))
    with pytest.raises(InputError, match="unknown column 'zz'"):
        config.build_party()


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_party_config(tmp_path / "absent.toml")


def test_reduction_rules_and_anchor_key_are_read(folder):
    from collabcausal.party.anchor import new_anchor_key, read_anchor_key

    new_anchor_key(folder / "anchor.key")
    text = GOOD.replace("min_subjects = 5", "min_subjects = 5\nallow_full_rank = true\nmax_anchors = 5000")
    party = load_party_config(_write(folder, text + '\n[anchor]\nkey_file = "anchor.key"\n')).build_party()
    assert party.policy.allow_full_rank and party.policy.max_anchors == 5000 and party.policy.min_anchors == 10
    assert party.anchor_key == read_anchor_key(folder / "anchor.key")
    assert load_party_config(_write(folder, GOOD)).build_party().anchor_key is None


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        (
            "min_subjects = 5",
            "min_subject = 5",
            r"unknown key \[policy\] min_subject; fix: did you mean 'min_subjects'\?",
        ),
        ('treatment = "t"', 'treatmnet = "t"', r"unknown key \[data\] treatmnet; fix: did you mean 'treatment'\?"),
        (
            'operations = ["describe"]',
            'operations = ["describe", "dc_represention"]',
            r"unknown operation 'dc_represention' \(did you mean 'dc_representation'\)",
        ),
        ("min_subjects = 5", 'min_subjects = "20"', r"\[policy\] min_subjects = '20' is invalid"),
        ("min_subjects = 5", "min_weight_ratio = 2", r"\[policy\] min_weight_ratio = 2 is invalid.*\[0, 1\]"),
        ("min_subjects = 5", "max_cells = 0", r"\[policy\] max_cells = 0 is invalid"),
        ("min_subjects = 5", "min_anchors = 50\nmax_anchors = 20", "min_anchors 50 exceeds max_anchors 20"),
        ('address = "127.0.0.1:50051"', 'address = "127.0.0.1"', r"\[analyst\] address = '127.0.0.1' is invalid"),
        ('address = "127.0.0.1:50051"', 'address = "127.0.0.1:50051"\nreconnect_timeout = -1', "reconnect_timeout"),
        ('address = "127.0.0.1:50051"', 'address = "127.0.0.1:50051"\ninsecure = 1', r"\[analyst\] insecure = 1"),
        ("min_subjects = 5", "min_subjects = 5\n[privacy]\nepsilon = 0", r"\[privacy\] epsilon = 0 is invalid"),
    ],
)
def test_typos_and_out_of_range_values_are_refused_in_one_line_naming_the_key(folder, old, new, match):
    assert old in GOOD
    with pytest.raises(ConfigError, match=match) as info:
        load_party_config(_write(folder, GOOD.replace(old, new, 1)))
    assert "\n" not in str(info.value) and "party.toml" in str(info.value)


def test_every_request_cap_is_read_into_the_policy(folder):
    caps = "max_cells = 7\nmax_request_bytes = 8\nmax_params_bytes = 9\nmax_params_depth = 3\n"
    caps += "max_list_length = 11\nmax_moment_requests = 2\n"
    limits = load_party_config(_write(folder, GOOD + caps)).policy.limits
    assert (limits.max_cells, limits.max_request_bytes, limits.max_params_bytes) == (7, 8, 9)
    assert (limits.max_params_depth, limits.max_list_length, limits.max_moment_requests) == (3, 11, 2)


def test_the_example_party_configs_validate():
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "lalonde-2x2"
    from collabcausal.config_schema import load_toml_model
    from collabcausal.party.config import PartyFile

    for path in sorted(example.glob("p*/party.toml")):
        assert load_toml_model(path, PartyFile).policy.min_subjects >= 1


def test_a_policy_may_list_the_dp_balance_moments_with_dp_representation(folder):
    # dp_weighted_moments is DP: it may sit beside dp_representation (weighted_moments may not).
    listed = 'operations = ["describe", "dp_representation", "dp_weighted_moments"]'
    text = GOOD.replace('operations = ["describe"]', listed)
    config = load_party_config(_write(folder, text + '\n[privacy]\nepsilon = 2.0\ndelta = 1e-6\nledger = "l.sqlite"\n'))
    assert "dp_weighted_moments" in config.build_party().policy.operations
