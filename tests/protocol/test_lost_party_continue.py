"""Over gRPC on loopback: a dp_effects party process killed mid-study is dropped under on_missing_party =
"continue" (issue 38 item 3), and the study ends on the others with the report naming it.

Parties a and b answer in threads; "mallory" (a certificate of the test CA) is a process killed once it has
answered ``describe``, so it is silent during the statistics round and lost after ``lost_after`` = 1 s.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from protocol_helpers import PartyThread, tls_of, wait_until_joined

from collabcausal.analyst.dp_effects import DPEffectsSpec, dp_effects_results
from collabcausal.messages import Message
from collabcausal.party import Party
from collabcausal.party.dp_effects import SCORES, STATISTICS
from collabcausal.protocol.server import GrpcGrid
from collabcausal.simulations.dp_effects_benchmark import site_parties
from collabcausal.simulations.multisite import OUTCOME_RANGE, covariate_bounds, simulate_sites

SPEC = DPEffectsSpec(epsilon=1e4, delta=1e-6, outcome_range=OUTCOME_RANGE["binary"], trim=0.1,
                     columns=tuple(f"x{j}" for j in range(10)), bounds=tuple(covariate_bounds()),
                     secure_aggregation=False)
NAMES = ("a", "b", "mallory")

MALLORY = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import numpy as np
from protocol_helpers import tls_of
from collabcausal.party import Party
from collabcausal.protocol.client import PartyClient
from collabcausal.simulations.dp_effects_benchmark import site_parties
from collabcausal.simulations.multisite import simulate_sites

site = site_parties(simulate_sites(3000, "binary", np.random.default_rng(5)), sys.argv[4], 1e4, 1e-6)[2]
PartyClient(Party("mallory", site.table, ledger=site.ledger), sys.argv[2], tls=tls_of(Path(sys.argv[3]), "mallory"),
            poll_seconds=0.5, heartbeat_seconds=0.1).run()
"""


class KillingGrid(GrpcGrid):
    """Kills ``process`` once every party has answered ``describe`` (the party dies between two rounds)."""

    process: subprocess.Popen

    def send_and_receive(self, requests: Mapping[str, Message], *, timeout: float | None = None) -> dict[str, Message]:
        replies = super().send_and_receive(requests, timeout=timeout)
        if next(iter(requests.values())).operation == "describe":
            self.process.kill()
            self.process.wait()
        return replies


def test_a_killed_party_process_is_dropped_before_its_statistics_and_the_study_ends_on_the_others(tmp_path, study_ca):
    grid = KillingGrid(list(NAMES), tls=tls_of(study_ca, "analyst"), study="s", task_timeout=60, lost_after=1.0)
    sites = site_parties(simulate_sites(3000, "binary", np.random.default_rng(5)), str(tmp_path), 1e4, 1e-6)
    threads = [PartyThread(Party(name, p.table, ledger=p.ledger), grid.address, tls_of(study_ca, name), study="s")
               for name, p in zip(NAMES[:2], sites, strict=False)]
    (tmp_path / "m").mkdir()
    grid.process = subprocess.Popen([sys.executable, "-c", MALLORY, str(Path(__file__).parent), grid.address,
                                     str(study_ca), str(tmp_path / "m")])
    try:
        wait_until_joined(grid, list(NAMES), timeout=120)
        report = dp_effects_results(grid, SPEC, "s", list(NAMES), timeout=60, on_missing="continue")
    finally:
        grid.process.kill()
        grid.process.wait()
    assert report["lost_parties"] == {"mallory": {"lost_at": report["lost_parties"]["mallory"]["lost_at"],
                                                  "during": STATISTICS}}
    assert set(report["privacy"]) == {"a", "b"} and report["estimates"]["aipw-ate"]["n"] == 6000
    assert np.isfinite(report["estimates"]["aipw-ate"]["estimate"])
    assert [c.operation for c in sites[0].ledger.history()] == [STATISTICS, SCORES]
    grid.finish()
    for thread in threads:
        thread.join()
