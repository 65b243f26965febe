"""Party side of federated balance diagnostics (paper 003, eqs. 42-44; issue "federated balance").

``weighted_moments``: the analyst sends per-subject arms and weights (IPW weights or PSM match
counts) for the party's (resampled) rows; the party returns additive weighted sufficient
statistics of its own covariates per arm. Means and variances, hence SMD and MASMD, follow at the
analyst without raw covariates leaving the party. Not differentially private: the moments are
aggregates over many subjects, released under the party's policy and audit log. The arms reveal
the treatment of the row group's subjects to this party (documented in docs/threat-model.md).
"""

from __future__ import annotations

import numpy as np

from collabcausal.estimators.balance import arm_moments
from collabcausal.estimators.validation import check_treatment, check_weights
from collabcausal.messages import Message
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.representation import selected_rows


@operation("weighted_moments", exact_rows=True)
def weighted_moments(party: Party, request: Message) -> Message:
    """Weighted per-arm sufficient statistics of the party's covariates.

    Request arrays: ``arms`` (0/1 per row), ``weights`` (>= 0 per row), optional ``rows``.
    Reply arrays: the fields of :class:`collabcausal.estimators.balance.ArmMoments`.
    Reply params: ``covariates`` (names, in column order).
    """
    rows = selected_rows(party, request)
    X = party.table.covariates if rows is None else party.table.covariates[rows]
    arms = check_treatment(request.array("arms"), "arms", n=X.shape[0])
    moments = arm_moments(X, arms, check_weights(request.array("weights"), "weights", n=X.shape[0]))
    arrays = {name: np.asarray(value) for name, value in vars(moments).items()}  # the dataclass's fields
    return Message("weighted_moments", {"covariates": list(party.table.covariate_names)}, arrays)
