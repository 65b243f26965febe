"""The out-of-core party's test table constants, its parties and dp_effects requests.

Imported by tests/party/test_chunked_table.py and tests/party/test_chunked_table_attacks.py (the
tests folder is on sys.path, as for dp_effects_requests.py).
"""

from __future__ import annotations

import numpy as np

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.ledger import PrivacyLedger
from collabcausal.messages import Message
from collabcausal.party import Party
from collabcausal.party.dp_effects import SCORES

COLUMNS = ["a", "b", "c"]
FM = FeatureMap(((-4.0, 4.0), (0.0, 10.0), (-4.0, 4.0)), (-5.0, 5.0), n_sites=1)
MODEL = NuisanceModel(np.array([0.1, 0.2, -0.3, 0.1]), (np.array([0.0, 0.5, 0.1, 0.0]), np.array([1.0, 0.4, 0, 0.2])))
KEY = bytes(range(32))


def ledger_party(tmp_path, table, name: str = "p") -> Party:
    """A party on ``table`` with its own ledger (a large budget) and the anchor key."""
    ledger = PrivacyLedger(tmp_path / f"{name}.sqlite", epsilon=1e6, delta=1e-3)
    return Party(name, table, ledger=ledger, anchor_key=KEY)


def effects_request(op: str, **extra) -> Message:
    """A 3-fold dp_effects request on :data:`COLUMNS` (scores: AIPW and IPW, ATE and ATT, one model per fold)."""
    params = {"study": "s", "rho": zcdp_rho(1.0, 1e-6), "delta": 1e-6, "columns": COLUMNS, "design": FM.to_spec(),
              "site": 0, "n_folds": 3}
    if op == SCORES:
        params |= {"models": [MODEL.to_spec()] * 3, "estimators": ["aipw", "ipw"], "estimands": ["ate", "att"],
                   "trim": 0.05}
    return Message(op, params | extra)
