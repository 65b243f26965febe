"""The bivariate direction tests a researcher would otherwise install, with their documented defaults.

Peers (the ``benchmarks`` extra: ``pip install collabcausal[benchmarks]``; never a runtime dependency):

* ``causal-learn``: ``causallearn.search.FCMBased.ANM.ANM`` (causal-learn 0.1.4.8), the additive-noise
  test of Hoyer et al. (2008): a GP regression each way on all rows (scikit-learn, marginal likelihood),
  residuals tested against the input by the unconditional kernel independence test (KCI); the
  direction whose residuals have the larger p-value wins.
* ``lingam``: ``lingam.RESIT`` (lingam 1.13), regression with subsequent independence test (Peters et
  al., JMLR 15, 2014): the sink is the variable whose regression residual is most independent (HSIC,
  gamma approximation) of the other; the regressor is required, and the one of lingam's documented
  example is used, ``RandomForestRegressor(max_depth=4, random_state=0)``.

Each adapter takes two columns and returns ``"x->y"`` or ``"y->x"``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.anm import X_TO_Y, Y_TO_X

INSTALL_HINT = "pip install 'collabcausal[benchmarks]' (causal-learn==0.1.4.8, lingam==1.13.0)"


def causal_learn_anm(x: NDArray[np.float64], y: NDArray[np.float64]) -> str:
    """causal-learn's ANM with its defaults: ``x->y`` when the forward p-value is the larger."""
    try:
        from causallearn.search.FCMBased.ANM.ANM import ANM
    except ImportError as error:
        raise InputError("the causal-learn peer is not installed", INSTALL_HINT) from error
    p_forward, p_backward = ANM().cause_or_effect(x[:, None], y[:, None])
    return X_TO_Y if p_forward > p_backward else Y_TO_X


def lingam_resit(x: NDArray[np.float64], y: NDArray[np.float64]) -> str:
    """lingam's RESIT with its documented regressor: ``x->y`` when RESIT orders ``x`` first."""
    try:
        from lingam import RESIT
        from sklearn.ensemble import RandomForestRegressor
    except ImportError as error:
        raise InputError("the lingam peer is not installed", INSTALL_HINT) from error
    model = RESIT(regressor=RandomForestRegressor(max_depth=4, random_state=0), random_state=0)
    order = model.fit(np.column_stack([x, y])).causal_order_
    return X_TO_Y if order[0] == 0 else Y_TO_X


PEERS: dict[str, Callable[[NDArray[np.float64], NDArray[np.float64]], str]] = {
    "causal-learn": causal_learn_anm,
    "lingam": lingam_resit,
}


def check_peers(names: list[str]) -> list[str]:
    """``names`` if each is a key of :data:`PEERS`, else an :class:`InputError` with the list."""
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise InputError(f"unknown peer(s) {unknown}", f"use some of {list(PEERS)}")
    return names
