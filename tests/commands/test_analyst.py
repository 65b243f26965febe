"""``collabcausal analyst serve`` and ``party join`` as OS processes: the LaLonde 2x2 example."""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collabcausal.analyst.config import load_study_config
from collabcausal.analyst.dcqe import run_dcqe
from collabcausal.cli import main
from collabcausal.commands.analyst import run_study
from collabcausal.party.config import load_party_config
from collabcausal.protocol.inprocess import InProcessGrid
from collabcausal.reporting.document import study_document
from collabcausal.reporting.html import render_html

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lalonde-2x2"
PARTIES = ("p11", "p12", "p21", "p22")
ENV = {**os.environ, "GRPC_VERBOSITY": "ERROR"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _example(tmp_path: Path, *, certificates: bool = True, tables: bool = True) -> Path:
    folder = tmp_path / "lalonde-2x2"
    shutil.copytree(EXAMPLE, folder)
    if tables:
        runpy.run_path(str(folder / "prepare.py"))
    port = _free_port()
    for toml in folder.rglob("*.toml"):
        toml.write_text(toml.read_text().replace("127.0.0.1:50051", f"127.0.0.1:{port}"))
    if certificates:
        assert main(["certs", "init", "--dir", str(folder / "certs")]) == 0
        assert main(["certs", "issue", "--analyst", "--dir", str(folder / "certs")]) == 0
        for name in PARTIES:
            assert main(["certs", "issue", "--party", name, "--dir", str(folder / "certs")]) == 0
    return folder


def _cli(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "collabcausal.cli", *args],
        cwd=cwd,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_example_study_over_mutual_tls_equals_the_in_process_run(tmp_path):
    folder = _example(tmp_path)
    study_toml = folder / "study.toml"
    study_toml.write_text(study_toml.read_text().replace("bootstrap = 200", "bootstrap = 5"))
    analyst = _cli("-v", "analyst", "serve", "--study", "study.toml", cwd=folder)
    parties = [_cli("party", "join", "--config", f"{name}/party.toml", cwd=folder) for name in PARTIES]
    try:
        out, err = analyst.communicate(timeout=240)
        party_logs = [p.communicate(timeout=60)[1] for p in parties]
    finally:
        for process in (analyst, *parties):
            process.kill()
    assert analyst.returncode == 0, err
    assert all(p.returncode == 0 for p in parties), party_logs
    assert "p11: joined" in err and "p22: weighted_moments: reply received" in err  # -v: per-request lines
    report = json.loads((folder / "report" / "report.json").read_text())
    study = load_study_config(folder / "study.toml")
    local = [load_party_config(folder / name / "party.toml").build_party() for name in PARTIES]
    for party in local:
        party.audit = None
    expected = run_study(InProcessGrid(local), study)
    assert report["estimates"] == json.loads(json.dumps(expected["estimates"]))
    assert report["smd"] == expected["smd"]
    audit = [json.loads(line) for line in (folder / "p11" / "audit.jsonl").read_text().splitlines()]
    # representation; balance moments weighted by PSM, by IPW, and unweighted (the Love plot's "before");
    # then one representation of resampled rows per bootstrap replicate
    # each load of the table (the party process, then `local` above) is a data_loaded record
    assert audit[0]["event"] == audit[-1]["event"] == "data_loaded" and audit[0]["rows"] == local[0].table.n_subjects
    assert [e["operation"] for e in audit[1:-1]] == [
        "dc_representation",
        *["weighted_moments"] * 3,
        *["dc_representation"] * 5,
    ]
    assert "ATT psm:" in out
    html = (folder / "report" / "report.html").read_text()
    assert html.count("<figure>") == 3 and "Covariate balance: PSM" in html and "Propensity overlap" in html


def test_study_fails_after_the_join_deadline_naming_the_missing_parties(tmp_path):
    folder = _example(tmp_path, certificates=False, tables=False)
    study = folder / "study.toml"
    study.write_text(study.read_text().replace("join_deadline = 120", "join_deadline = 1"))
    completed = subprocess.run(
        [sys.executable, "-m", "collabcausal.cli", "analyst", "serve", "--study", "study.toml", "--insecure"],
        cwd=folder,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 9
    assert "parties p11, p12, p21, p22 did not join study 'lalonde-2x2' within 1 s" in completed.stderr


def test_serve_without_certificates_names_the_missing_file(tmp_path, capsys):
    folder = _example(tmp_path, certificates=False, tables=False)
    assert main(["analyst", "serve", "--study", str(folder / "study.toml")]) == 7
    assert "cannot read the CA certificate" in capsys.readouterr().err


def test_run_study_in_process_matches_run_dcqe(tmp_path):
    folder = _example(tmp_path, certificates=False)
    study = load_study_config(folder / "study.toml")
    parties = [load_party_config(folder / name / "party.toml").build_party() for name in PARTIES]
    report = run_study(InProcessGrid(parties), study)
    direct = run_dcqe(InProcessGrid(parties), study.plan())
    assert report["estimates"]["psm"]["estimate"] == direct.effects.estimates["psm"].estimate
    assert report["missing_parties"] == [] and report["estimand"] == "att"


@pytest.mark.parametrize("interval", ["analytic", "percentile", "bca"])
def test_serve_and_simulate_print_the_same_quantities_for_the_same_study(tmp_path, interval, capsys):
    """One study, run by `collabcausal simulate` (W-clb) and by the analyst's `run_study`: the same
    full-sample estimate, SE, interval (of the same kind), bootstrap mean and failure count."""
    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.commands.analyst import format_estimate
    from collabcausal.simulations.datasets import make_dcqe_synthetic
    from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
    from collabcausal.simulations.partition import build_parties, partition_grid
    from collabcausal.simulations.report import format_table
    from collabcausal.simulations.settings import parse_settings

    seed, n_boot = 3, 12
    dataset = make_dcqe_synthetic(n_subjects=400, seed=seed)
    partition = partition_grid(dataset, 2, seed=seed)
    config = ExperimentConfig(
        dataset=dataset,
        partition=partition,
        settings=parse_settings(["W"], partition),
        estimators=("psm", "ipw", "aipw"),
        n_boot=n_boot,
        seed=seed,
        party_components=3,
        interval=interval,
    )
    simulated = {row["estimator"]: row for row in run_experiment(config).rows()}
    ranges = "\n".join(f"{name} = [{lo!r}, {hi!r}]" for name, (lo, hi) in config.anchor_ranges.items())
    groups = "\n".join(f"[[row_groups]]\nparties = {list(row)!r}".replace("'", '"') for row in partition.names())
    study = tmp_path / "study.toml"
    study.write_text(
        f'[study]\nid = "{config.study}"\nseed = {seed}\nestimand = "{config.estimand}"\n'
        f'estimators = ["psm", "ipw", "aipw"]\nn_anchors = {dataset.n_subjects}\nparty_components = 3\n'
        f'interval = "{interval}"\nbootstrap = {n_boot}\n'
        f'[server]\naddress = "127.0.0.1:0"\ninsecure = true\n[anchor_ranges]\n{ranges}\n{groups}\n'
    )
    parties = build_parties(dataset, partition, anchor_key=simulation_anchor_key(seed))
    report = run_study(InProcessGrid(parties), load_study_config(study))
    assert any("PSM with a bootstrap" in w for w in report["warnings"]) == (interval != "analytic")
    for name, served in report["estimates"].items():
        row = simulated[f"DC-QE({name.upper()})"]
        assert served["interval"] == row["interval"] == interval
        for key in ("estimate", "se", "ci_low", "ci_high", "boot_mean", "n_failed"):
            assert served[key] == pytest.approx(row[key], rel=1e-12), (name, key)
        assert served["se"] is not None and served["ci_low"] < served["estimate"] < served["ci_high"]
        # and both print them: the analyst's line and the simulation's table carry the same numbers
        line, table = format_estimate(served), format_table([row])
        assert f"{interval} CI [{served['ci_low']:.6g}, {served['ci_high']:.6g}]" in line
        assert f"{row['estimate']:.4f} ({row['se']:.4f})" in table
        assert f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}]" in table and f"({interval})" in table


def test_study_config_refuses_a_bootstrap_interval_without_replicates(tmp_path):
    from collabcausal.errors import ConfigError

    folder = _example(tmp_path, certificates=False, tables=False)
    study = folder / "study.toml"
    text = study.read_text()
    bca = text.replace('interval = "analytic"', 'interval = "bca"')
    study.write_text(bca.replace("bootstrap = 200", "bootstrap = 0"))
    with pytest.raises(ConfigError, match="needs bootstrap replicates"):
        load_study_config(study)
    study.write_text(text.replace('interval = "analytic"', 'interval = "studentized"'))
    with pytest.raises(ConfigError, match="interval"):
        load_study_config(study)


def _balance_study(tmp_path: Path, operations: dict[str, tuple[str, ...]] | None = None, epsilon: float = 100.0):
    """A 2x2 DC-QE study on 400 synthetic subjects with ``[balance]``: every party has a ledger and a policy."""
    from collabcausal.anchor_key import simulation_anchor_key
    from collabcausal.ledger import PrivacyLedger
    from collabcausal.party.policy import PartyPolicy
    from collabcausal.simulations.datasets import make_dcqe_synthetic
    from collabcausal.simulations.partition import build_parties, partition_grid

    dataset = make_dcqe_synthetic(n_subjects=400, seed=0)
    partition = partition_grid(dataset, 2, seed=0)
    parties = build_parties(dataset, partition, anchor_key=simulation_anchor_key(0))
    for party in parties:
        party.ledger = PrivacyLedger(tmp_path / f"{party.name}.sqlite", epsilon=1e3, delta=1e-4, dataset=party.name)
        ops = (operations or {}).get(party.name, ("describe", "dc_representation", "dp_weighted_moments"))
        # plain DC-QE beside DP moments: an explicit opt-out, the party's guarantee is none (threat model)
        party.policy = PartyPolicy(ops, party.table.covariate_names, min_subjects=10, allow_plain_with_dp=True)
    ranges = "\n".join(f"{name} = [{lo!r}, {hi!r}]" for name, (lo, hi) in dataset.covariate_ranges().items())
    groups = "\n".join(f"[[row_groups]]\nparties = {list(row)!r}".replace("'", '"') for row in partition.names())
    study = tmp_path / "study.toml"
    study.write_text(
        '[study]\nid = "balance"\nestimators = ["psm", "ipw", "aipw"]\nn_anchors = 400\nparty_components = 2\n'
        'interval = "analytic"\nbootstrap = 0\n[server]\naddress = "127.0.0.1:0"\ninsecure = true\n'
        f"[anchor_ranges]\n{ranges}\n{groups}\n[balance]\nepsilon = {epsilon!r}\ndelta = 1e-6\n"
    )
    return parties, load_study_config(study)


def test_a_balance_study_charges_every_party_before_its_dp_moments_are_computed(tmp_path, monkeypatch):
    from collabcausal.party import dp_balance

    parties, config = _balance_study(tmp_path)
    charged_at_compute = []
    compute = dp_balance.standardised_moments

    def spy(*args, **kwargs):
        charged_at_compute.append(sum(len(p.ledger.history()) for p in parties))
        return compute(*args, **kwargs)

    monkeypatch.setattr(dp_balance, "standardised_moments", spy)
    report = run_study(InProcessGrid(parties), config)
    # psm and ipw define a balanced sample, aipw does not; plus the unweighted "before": 3 requests per party
    requests = config.plan().balance_requests()
    assert requests == 3
    # the k-th computation finds k charges in the ledgers: each request is charged before it is computed
    assert charged_at_compute == list(range(1, 4 * requests + 1))
    for party in parties:
        history = party.ledger.history()
        assert [(c.operation, c.epsilon, c.delta, c.study) for c in history] == [
            ("dp_weighted_moments", 100.0, 1e-6, "balance")
        ] * requests
        assert party.ledger.spent() == pytest.approx((requests * 100.0, requests * 1e-6))
        assert report["privacy"][party.name] == pytest.approx({"epsilon": 300.0, "delta": 3e-6})
    # at eps = 100 per request the noise sd of every SMD is finite and positive (0.01 unweighted, ~0.06 weighted);
    # it is NaN only if an arm's noisy spread falls to 0, which is >= 5.1 of its noise sds away for every
    # covariate and arm: false-failure rate 2.8e-7 (normal tails summed over the 36 spreads, first order)
    for name in ("psm", "ipw"):
        assert report["smd_noise_sd"][name].keys() == report["smd"][name].keys()
        assert all(0 < sd < np.inf for sd in report["smd_noise_sd"][name].values())
    assert report["smd_unweighted_noise_sd"].keys() == report["smd_unweighted"].keys()
    assert any("(eps = 100, delta = 1e-06)-DP per request" in w and "3 requests" in w for w in report["warnings"])
    document = study_document(report, {}, seed=0)
    assert document["balance"]["all parties"]["noise_sd"]["unweighted"] == list(
        report["smd_unweighted_noise_sd"].values()
    )
    html = render_html(document)
    assert "DP noise sd of the SMD" in html and "epsilon spent" in html


def test_a_party_whose_policy_lacks_dp_weighted_moments_refuses_in_one_line_naming_it(tmp_path):
    from collabcausal.errors import PolicyError

    exact_only = {"p12": ("describe", "dc_representation", "weighted_moments")}
    parties, config = _balance_study(tmp_path, exact_only)
    with pytest.raises(PolicyError, match="party 'p12' does not allow the operation 'dp_weighted_moments'") as info:
        run_study(InProcessGrid(parties), config)
    assert "\n" not in str(info.value)
    assert not any(c.operation == "dp_weighted_moments" for c in parties[1].ledger.history())


def test_serve_refuses_an_out_that_is_a_file_before_listening(tmp_path, capsys, monkeypatch):
    folder = _example(tmp_path, certificates=False, tables=False)
    study = folder / "study.toml"
    study.write_text(study.read_text().replace('out = "report"', 'out = "afile"'))
    (folder / "afile").write_text("keep me")

    def no_server(*args, **kwargs):
        raise AssertionError("the analyst listened before [study] out was checked")

    monkeypatch.setattr("collabcausal.protocol.server.GrpcGrid", no_server)
    assert main(["analyst", "serve", "--study", str(study), "--insecure"]) == 2
    err = capsys.readouterr().err
    assert "[study] out" in err and "is a file, not a folder" in err and err.count("\n") == 1


def test_a_port_in_use_is_one_tidy_line_without_grpc_core_logging(tmp_path):
    """gRPC's C core printed `E... add_port.cc:83] Failed to add port ...` before the tidy error."""
    folder = _example(tmp_path, certificates=False, tables=False)
    study = (folder / "study.toml").read_text()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (folder / "study.toml").write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", study))
        env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
        completed = subprocess.run(
            [sys.executable, "-m", "collabcausal.cli", "analyst", "serve", "--study", "study.toml", "--insecure"],
            cwd=folder, env=env, capture_output=True, text=True, timeout=120,
        )
    assert completed.returncode == 9
    errors = [line for line in completed.stderr.splitlines() if "WARNING" not in line]
    assert errors == [f"collabcausal: error: cannot listen on 127.0.0.1:{port}: the port is in use or the address "
                      "is not this machine's; fix: choose a free port or another address"], completed.stderr


P11_FILLED = {
    '"hospital-a"': '"p11"',
    '"my-study"': '"lalonde-2x2"',
    '"coordinator.example.org:50051"': '"127.0.0.1:50051"',
    '"certs/ca.pem"': '"../certs/ca.pem"',
    '"certs/hospital-a.pem"': '"../certs/p11.pem"',
    '"certs/hospital-a.key"': '"../certs/p11.key"',
    '"hospital-a.csv"': '"p11.csv"',
    '["age", "education"]': '["age", "married", "education", "nodegree"]',
    '"anchor.key"': '"../anchor.key"',
}


def _fill(path: Path, values: dict[str, str]) -> None:
    text = path.read_text()
    for old, new in values.items():
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)


def test_party_init_writes_a_commented_template_that_loads_once_filled(tmp_path, capsys):
    folder = _example(tmp_path)
    config = folder / "p11" / "party.toml"
    assert main(["party", "init", "--out", str(config)]) == 2  # the example's own file is kept
    assert "exists" in capsys.readouterr().err
    assert main(["party", "init", "--kind", "dcqe", "--out", str(config), "--force"]) == 0
    assert config.read_text().count("#") > 20  # commented
    assert "NOT differentially private" in config.read_text()
    _fill(config, P11_FILLED)
    loaded = load_party_config(config)
    assert loaded.name == "p11" and loaded.columns == ("age", "married", "education", "nodegree")


def test_party_init_writes_the_private_template_by_default_and_it_checks_as_dp(tmp_path, capsys):
    """Issue 38 item 9: the README recommends dp_effects, so the default template is the private one."""
    folder = _example(tmp_path)
    config = folder / "p11" / "party.toml"
    assert main(["party", "init", "--out", str(config), "--force"]) == 0
    _fill(config, {k: v for k, v in P11_FILLED.items() if k != '"anchor.key"'})
    loaded = load_party_config(config)
    assert loaded.policy.operations == {"describe", "dp_effects_statistics", "dp_effects_scores", "secagg_keys"}
    assert loaded.privacy == {"epsilon": 1.0, "delta": 1e-6}
    capsys.readouterr()
    assert main(["party", "join", "--config", str(config), "--check"]) == 0
    out = capsys.readouterr().out
    assert "effective guarantee: (1, 1e-06)-DP under substitution of one record" in out


def test_party_join_check_validates_everything_and_shares_nothing(tmp_path, capsys):
    folder = _example(tmp_path)
    config = folder / "p11" / "party.toml"
    before = sorted(p.name for p in (folder / "p11").iterdir())
    assert main(["party", "join", "--config", str(config), "--check"]) == 0
    out = capsys.readouterr().out
    assert f"certificate {folder / 'certs' / 'p11.pem'}: issued to p11 by the study CA" in out
    assert "private key matches" in out
    assert "p11.csv: 1338 subjects; label holder (treatment 'treat', outcome 're78')" in out
    assert "operations: dc_representation, describe, weighted_moments" in out
    assert "columns: age, married, education, nodegree" in out
    assert "no [privacy] section" in out
    assert "effective guarantee: none: no [privacy] budget" in out
    assert "checked without connecting" in out
    assert sorted(p.name for p in (folder / "p11").iterdir()) == before  # no ledger, no audit log


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (('"../certs/p11.pem"', '"../certs/p12.pem"'), 7, "issued to p12, not to p11"),
        (('"../certs/p11.key"', '"../certs/p12.key"'), 7, "does not match the certificate"),
        (('"married", ', '"married", "income", '), 2, "unknown column 'income'"),
        (('[anchor]\nkey_file = "../anchor.key"', ""), 3, "needs the study's anchor key, but there is no [anchor]"),
    ],
)
def test_party_join_check_names_the_problem(tmp_path, capsys, change, code, message):
    folder = _example(tmp_path)
    config = folder / "p11" / "party.toml"
    config.write_text(config.read_text().replace(*change))
    assert main(["party", "join", "--config", str(config), "--check"]) == code
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_analyst_init_writes_a_template_that_loads_once_filled(tmp_path, capsys):
    folder = _example(tmp_path)
    study = folder / "study.toml"
    assert main(["analyst", "init", "--out", str(study)]) == 2
    assert main(["analyst", "init", "--out", str(study), "--force"]) == 0
    assert study.read_text().count("#") > 20
    _fill(study, {'"my-study"': '"lalonde-2x2"', '"certs/analyst.pem"': '"certs/analyst.pem"'})
    loaded = load_study_config(study)
    assert loaded.study == "lalonde-2x2" and loaded.roster == ("hospital-a", "lab-a", "hospital-b")


def test_analyst_serve_check_validates_and_prints_what_the_study_asks(tmp_path, capsys):
    folder = _example(tmp_path)
    assert main(["analyst", "serve", "--study", str(folder / "study.toml"), "--check"]) == 0
    out = capsys.readouterr().out
    assert "issued to analyst by the study CA" in out and "private key matches" in out
    assert "roster: p11, p12 | p21, p22" in out
    assert "checked without listening" in out
    assert not (folder / "report").exists()
