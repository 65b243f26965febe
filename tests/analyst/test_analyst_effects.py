"""estimate_effects: the CA / DC-QE estimates and standard errors stay what they were.

The figures were computed before the shared work across estimators was reorganised for speed
(issue 24); a faster path must reproduce every estimate and standard error to 1e-12 relative.
"""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.analyst.effects import estimate_effects
from collabcausal.simulations.datasets import make_dcqe_synthetic

PINNED = {  # (estimate, se) on make_dcqe_synthetic(20_000, 0, n_covariates=10)
    ("ate", "psm"): (0.9912154439083847, 0.027766595353214525),
    ("ate", "ipw"): (0.9175066475965876, 0.1560475651287502),
    ("ate", "aipw"): (0.959151158819587, 0.02236950932495427),
    ("att", "psm"): (1.0586121234364263, 0.04010696677790323),
    ("att", "ipw"): (1.0637070482153406, 0.11355461656840121),
    ("att", "aipw"): (1.0031330297633247, 0.029084549474686604),
}


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_estimates_and_standard_errors_are_the_pinned_ones(estimand: str) -> None:
    data = make_dcqe_synthetic(20_000, 0, n_covariates=10)
    X = data.frame[list(data.covariates)].to_numpy()
    bundle = estimate_effects(X, data.frame["treat"].to_numpy(), data.frame["y"].to_numpy(), estimand=estimand)
    for name, result in bundle.estimates.items():
        np.testing.assert_allclose([result.estimate, result.se], PINNED[estimand, name], rtol=1e-12, atol=0.0)
