"""One small dp_effects party table and its requests, shared by the hostile-coordinator tests.

Imported by tests/party/test_dp_effects_hostile.py and tests/attacks/test_zcdp_budget_attacks.py (the
tests folder is on sys.path, as for fault_injection.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.messages import Message
from collabcausal.party.dp_effects import SCORES

N = 60
COLUMNS = ["a", "b"]
FM = FeatureMap(((0.0, 10.0), (-1.0, 1.0)), (0.0, 5.0), n_sites=2)
EPS, DELTA = 1.0, 1e-6
RHO = zcdp_rho(EPS, DELTA)
MODEL = NuisanceModel(np.array([0.0, 0.1, 0.2, -0.3]), (np.array([0.0, 0.1, 0.0, 0.1]), np.array([0.1, 0.1, 0, 0])))
OTHER = NuisanceModel(np.array([0.0, -0.1, 0.4, 0.3]), (np.zeros(4), np.full(4, 0.1)))
SCORE_PARAMS = {"models": [MODEL.to_spec()], "estimators": ["aipw", "ipw"], "estimands": ["ate", "att"], "trim": 0.1}


def hostile_frame(columns=COLUMNS, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.uniform(0.1, 0.9, N) for c in columns})
    return frame.assign(t=np.arange(N) % 2, y=rng.uniform(0, 5, N))


def hostile_request(op: str, **change) -> Message:
    params = {"study": "s", "rho": RHO, "delta": DELTA, "columns": COLUMNS, "design": FM.to_spec(), "site": 1,
              "n_folds": 1} | (SCORE_PARAMS if op == SCORES else {}) | change
    return Message(op, {k: v for k, v in params.items() if v is not None})
