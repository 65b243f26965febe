"""Write ``cohort.csv``: a small synthetic cohort for the README's ``--data cohort.csv`` examples.

600 subjects, seed 26, every value made up (no real person behind any row). Columns:

* ``age`` (years, 40-80), ``sex`` (0/1), ``bmi`` (kg/m^2), ``sbp`` (systolic blood pressure, mmHg,
  rising with age, bmi and sex): the covariates;
* ``statin`` (0/1): treatment, more likely for older subjects with higher sbp and bmi (confounded);
* ``event`` (0/1): outcome, its log-odds -0.5 lower under statin (the true conditional effect);
* ``dose`` (0-100) and ``response`` (-5 to 5): a cause-effect pair for ``collabcausal discover``,
  response = 4 tanh((dose - 50) / 25) + N(0, 0.5^2) (an additive noise model, dose -> response).

Run from anywhere: ``python examples/cohort/make_cohort.py``; it rewrites the same file.
"""

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

SEED, N = 26, 600


def make_cohort(n: int = N, seed: int = SEED) -> pd.DataFrame:
    """The synthetic cohort described in the module docstring."""
    rng = np.random.default_rng(seed)
    age = rng.integers(40, 81, n)
    sex = rng.integers(0, 2, n)
    bmi = np.round(np.clip(rng.normal(27, 4, n), 16, 45), 1)
    sbp = np.round(np.clip(110 + 0.6 * (age - 40) + 0.9 * (bmi - 27) + 5 * sex + rng.normal(0, 12, n), 90, 200))
    statin = (rng.random(n) < expit(-1 + 0.05 * (age - 60) + 0.03 * (sbp - 130) + 0.08 * (bmi - 27))).astype(int)
    risk = -2.2 + 0.05 * (age - 60) + 0.02 * (sbp - 130) + 0.4 * sex - 0.5 * statin
    event = (rng.random(n) < expit(risk)).astype(int)
    dose = np.round(rng.uniform(0, 100, n), 1)
    response = np.round(np.clip(4 * np.tanh((dose - 50) / 25) + rng.normal(0, 0.5, n), -5, 5), 3)
    return pd.DataFrame(
        {"age": age, "sex": sex, "bmi": bmi, "sbp": sbp, "statin": statin, "event": event,
         "dose": dose, "response": response}
    )


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / "cohort.csv"
    make_cohort().to_csv(path, index=False)
    print(f"{path}: {N} subjects")
