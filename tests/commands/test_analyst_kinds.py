"""``collabcausal analyst serve`` with ``[study] kind = "adum"`` and four ``party join`` processes (mutual TLS)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from collabcausal.anchor_key import simulation_anchor_key
from collabcausal.certs import ANALYST, init_ca, issue
from collabcausal.ledger import PrivacyLedger
from collabcausal.protocol.launcher import write_party_files
from collabcausal.simulations.datasets import make_dcqe_synthetic
from collabcausal.simulations.partition import build_parties, partition_grid

ENV = {**os.environ, "GRPC_VERBOSITY": "ERROR"}


def _cli(*args: str, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "collabcausal.cli", *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_analyst_serve_runs_an_adum_study_with_four_party_processes(tmp_path):
    data = make_dcqe_synthetic(1200, seed=0)
    parties = build_parties(data, partition_grid(data, 4, column_groups=[data.covariates], seed=0),
                            anchor_key=simulation_anchor_key(0))
    certs = tmp_path / "certs"
    init_ca(certs)
    issue(certs, ANALYST, server=True)
    ranges = "\n".join(f"{c} = [{lo}, {hi}]" for c, (lo, hi) in data.covariate_ranges().items())
    groups = "\n".join(f'[[row_groups]]\nparties = ["{p.name}"]' for p in parties)
    (tmp_path / "study.toml").write_text(
        '[study]\nid = "adum-cli"\nkind = "adum"\n[server]\naddress = "127.0.0.1:0"\nca = "certs/ca.pem"\n'
        f'cert = "certs/{ANALYST}.pem"\nkey = "certs/{ANALYST}.key"\n[anchor_ranges]\n{ranges}\n{groups}\n'
        '[adum]\nepsilon = 1.0\noutcome_range = [-8, 8]\ncolumns = ["x1"]\ncells = [4]\n'
    )
    analyst = _cli("analyst", "serve", "--study", "study.toml", cwd=tmp_path)
    processes = [analyst]
    try:
        line = ""
        while "listening on" not in line:  # the analyst binds port 0 and says which port it got
            line = analyst.stderr.readline()
            assert line, "the analyst exited before listening"
        address = re.search(r"listening on (\S+);", line).group(1)
        for party in parties:
            issue(certs, party.name)
            party.ledger = PrivacyLedger(tmp_path / f"{party.name}-seed.sqlite", epsilon=1.0)
            config = write_party_files(party, tmp_path / party.name, address, "adum-cli", tls=True)
            processes.append(_cli("party", "join", "--config", str(config), cwd=tmp_path / party.name))
        out, err = analyst.communicate(timeout=180)
        logs = [p.communicate(timeout=60)[1] for p in processes[1:]]
    finally:
        for process in processes:
            process.kill()
    assert analyst.returncode == 0, err
    assert all(p.returncode == 0 for p in processes[1:]), logs
    assert "ATE eps-adum:" in out
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["privacy"] == {p.name: {"epsilon": 1.0, "delta": 0.0} for p in parties}
    assert (tmp_path / "report" / "report.html").is_file()
    for party in parties:
        history = PrivacyLedger.from_file(tmp_path / party.name / "ledger.sqlite").history()
        assert [(c.operation, c.epsilon, c.study) for c in history] == [("dp_histogram", 1.0, "adum-cli")]
