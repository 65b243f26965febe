"""examples/omop-postgres: synthetic OMOP CDM databases, the cohort SQL, and the study over mutual TLS.

Runs against the throwaway PostgreSQL cluster of tests/conftest.py (skipped, saying why, without one).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from collabcausal.analyst.config import load_study_config
from collabcausal.cli import main
from collabcausal.commands.analyst import run_study
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.party.audit_verify import read_audit_log
from collabcausal.party.config import load_party_config
from collabcausal.protocol.inprocess import InProcessGrid

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "omop-postgres"
PARTIES = ("hospital-a", "hospital-b")
PASSWORD = "omop-" + secrets.token_hex(10)
COLUMNS = ("age_at_index", "male", "prior_hypertension", "prior_ckd", "hba1c")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def example(postgres_server, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The example copied, its databases generated, ports and the password file set: ``(folder, env)``."""
    folder = tmp_path_factory.mktemp("omop") / "omop-postgres"
    shutil.copytree(EXAMPLE, folder)
    env = {**os.environ, "GRPC_VERBOSITY": "ERROR", "OMOP_PASSWORD": PASSWORD, "PGPASSWORD": postgres_server.password}
    done = subprocess.run(
        [sys.executable, "generate.py", "--port", str(postgres_server.port)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "omop_hospital_a: 1500 people" in done.stdout
    env.pop("PGPASSWORD")  # the parties never see the superuser's password
    port = _free_port()
    for toml in folder.rglob("*.toml"):
        text = toml.read_text().replace("127.0.0.1:5432/", f"127.0.0.1:{postgres_server.port}/")
        toml.write_text(text.replace("127.0.0.1:50052", f"127.0.0.1:{port}"))
    secret = folder / "hospital-b" / "reader.password"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o600)
    return folder, env


def test_each_hospital_reads_its_cohort_from_its_omop_database(example, monkeypatch) -> None:
    folder, env = example
    monkeypatch.setenv("OMOP_PASSWORD", env["OMOP_PASSWORD"])
    (folder / "anchor.key").write_text("00" * 32 + "\n")
    digest = hashlib.sha256((folder / "cohort.sql").read_bytes()).hexdigest()
    for name, people in zip(PARTIES, (1_500, 1_200), strict=True):
        config = load_party_config(folder / name / "party.toml")
        table = config.build_party().table
        assert table.covariate_names == COLUMNS and table.has_labels
        assert table.n_subjects == people  # every synthetic person is eligible
        assert 0.3 < table.treatment.mean() < 0.8 and 0.0 < table.outcome.mean() < 0.3
        assert set(table.column("male")) == {0.0, 1.0} and 5.0 <= table.column("hba1c").min()
        (entry,) = read_audit_log(config.audit_path).entries
        assert entry["query_sha256"] == digest and entry["rows"] == people
        assert PASSWORD not in config.audit_path.read_text()
        config.audit_path.unlink()
    (folder / "anchor.key").unlink()


def _cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "collabcausal.cli", *args],
        cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _certificates(folder: Path) -> None:
    certs = str(folder / "certs")
    if (folder / "certs" / "ca.pem").exists():  # the module's other study made them
        return
    assert main(["certs", "init", "--dir", certs]) == 0
    assert main(["certs", "issue", "--analyst", "--dir", certs]) == 0
    for name in PARTIES:
        assert main(["certs", "issue", "--party", name, "--dir", certs]) == 0
    assert main(["certs", "anchor-key", "--out", str(folder / "anchor.key")]) == 0


def _run(folder: Path, env: dict[str, str], study: str, party_file: str) -> tuple[list[str], dict]:
    """`analyst serve --study STUDY` and one `party join` per hospital: (every output, report.json)."""
    _certificates(folder)
    analyst = _cli("analyst", "serve", "--study", study, cwd=folder, env=env)
    parties = [_cli("party", "join", "--config", f"{name}/{party_file}", cwd=folder, env=env) for name in PARTIES]
    try:
        out, err = analyst.communicate(timeout=300)
        party_logs = [p.communicate(timeout=60) for p in parties]
    finally:
        for process in (analyst, *parties):
            process.kill()
    assert analyst.returncode == 0, err
    assert all(p.returncode == 0 for p in parties), party_logs
    report_folder = load_study_config(folder / study).out
    return [out, err, *(text for pair in party_logs for text in pair)], json.loads(
        (report_folder / "report.json").read_text())


@pytest.mark.slow  # 9-30 s: three CLI processes, TLS, two cohort queries
def test_the_readme_walk_through_runs_the_study_over_mutual_tls(example, monkeypatch) -> None:
    folder, env = example
    logs, report = _run(folder, env, "study.toml", "party.toml")
    assert set(report["estimates"]) == {"psm", "ipw"}
    assert all(math.isfinite(e["estimate"]) for e in report["estimates"].values())
    monkeypatch.setenv("OMOP_PASSWORD", env["OMOP_PASSWORD"])
    local = [load_party_config(folder / name / "party.toml").build_party() for name in PARTIES]
    for party in local:
        party.audit = None
    expected = run_study(InProcessGrid(local), load_study_config(folder / "study.toml"))
    assert report["estimates"] == json.loads(json.dumps(expected["estimates"]))
    logs += [(folder / name / "audit.jsonl").read_text() for name in PARTIES]
    assert not any(PASSWORD in text for text in logs)


@pytest.mark.slow  # 10-30 s: the private study, secure aggregation over mutual TLS
def test_the_private_study_releases_two_dp_sums_per_hospital_over_mutual_tls(example) -> None:
    """kind dp_effects: each hospital charged epsilon 4 once (two zCDP releases), the coordinator saw only sums.

    The synthetic truth is -0.04; the check allows 6 of the reported SEs (DP noise included): a
    false failure needs a 6-sigma draw (2e-9) unless the linear nuisances are biased by more.
    """
    folder, env = example
    logs, report = _run(folder, env, "study-dp.toml", "party-dp.toml")
    ate = report["estimates"]["aipw-ate"]
    assert abs(ate["estimate"] - (-0.04)) < 6 * ate["se"]
    stated = {"epsilon": 4.0, "delta": 1e-6, "rho": zcdp_rho(4.0, 1e-6)}
    assert report["privacy"] == {name: pytest.approx(stated, rel=1e-9) for name in PARTIES}
    assert report["dp_effects"]["secure_aggregation"] is True and report["per_party"] == {}
    for name in PARTIES:
        assert main(["party", "budget", "--config", str(folder / name / "party-dp.toml")]) == 0
        records = read_audit_log(folder / name / "audit-dp.jsonl").entries
        released = [r["operation"] for r in records if r["event"] == "released"]
        assert released == ["describe", "secagg_keys", "dp_effects_statistics", "secagg_keys", "dp_effects_scores"]
        logs.append((folder / name / "audit-dp.jsonl").read_text())
    assert not any(PASSWORD in text for text in logs)
