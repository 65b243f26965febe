"""A small-study design like examples/cohort (issue 38, item 4): statin, cardiovascular event, 4 confounders.

The covariate, treatment and outcome equations are those of ``examples/cohort/make_cohort.py`` (age 40-80,
sex, bmi, systolic blood pressure rising with age, bmi and sex; statin more likely for the older, the
heavier and the hypertensive; an event whose log-odds are 0.5 lower under statin), drawn for any
``n`` and split into ``n_sites`` sites of near-equal size, with the true propensity and outcome
means kept beside each row (:class:`~collabcausal.simulations.multisite.Site`). The true ATE (a risk
difference) is a population quantity computed once from a large sample (:func:`cohort_true_ate`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import expit

from collabcausal.errors import InputError
from collabcausal.simulations.dp_effects_benchmark import Design
from collabcausal.simulations.multisite import Site

COHORT_DESIGN = Design(((40.0, 80.0), (0.0, 1.0), (16.0, 45.0), (90.0, 200.0)), (0.0, 1.0))
"""The public ranges: age, sex, bmi, sbp (the clipping bounds of make_cohort.py) and the binary outcome."""


def _draw(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    age = rng.integers(40, 81, n).astype(float)
    sex = rng.integers(0, 2, n).astype(float)
    bmi = np.clip(rng.normal(27, 4, n), 16, 45)
    sbp = np.clip(110 + 0.6 * (age - 40) + 0.9 * (bmi - 27) + 5 * sex + rng.normal(0, 12, n), 90, 200)
    e = expit(-1 + 0.05 * (age - 60) + 0.03 * (sbp - 130) + 0.08 * (bmi - 27))
    risk = -2.2 + 0.05 * (age - 60) + 0.02 * (sbp - 130) + 0.4 * sex
    return np.column_stack([age, sex, bmi, sbp]), e, expit(risk), expit(risk - 0.5)


def cohort_sites(n: int, rng: np.random.Generator, n_sites: int = 4) -> list[Site]:
    """``n`` subjects of the cohort design split by position into ``n_sites`` sites."""
    if n < 2 * n_sites or n_sites < 1:
        raise InputError(f"{n} subjects cannot make {n_sites} sites", "use n >= 2 x sites")
    X, e, mu0, mu1 = _draw(n, rng)
    T = (rng.random(n) < e).astype(np.int8)
    Y = (rng.random(n) < np.where(T == 1, mu1, mu0)).astype(float)
    group = np.arange(n) % n_sites
    return [Site(X[group == s], T[group == s], Y[group == s], e[group == s], mu0[group == s], mu1[group == s])
            for s in range(n_sites)]


@lru_cache(maxsize=1)
def cohort_true_ate() -> float:
    """``E[mu1(X) - mu0(X)]`` over 4,000,000 draws of the design (Monte Carlo SE below 1e-5)."""
    _, _, mu0, mu1 = _draw(4_000_000, np.random.default_rng(2026))
    return float(np.mean(mu1 - mu0))
