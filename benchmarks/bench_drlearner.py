"""Benchmark: our non-private DR-learner against EconML's DRLearner, same nuisances, same run.

Both fit logistic-regression propensities, a linear outcome regression on [X, T] and a linear final
stage with 2-fold cross-fitting on n = 100,000 subjects (10 covariates), then predict tau(x) for
everyone. Prints both times and the ratio EconML / ours (target: ours at least as fast, ratio >= 1)
and the two ATEs (they must agree within Monte-Carlo error: different folds). One run each.
EconML is a development-only dependency (``pip install econml``).

Run: .venv/bin/python benchmarks/bench_drlearner.py [--n 100000] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression

from collabcausal.estimators.metalearners import DRLearner


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 10))
    T = rng.binomial(1, 1 / (1 + np.exp(-0.5 * X[:, 0])))
    Y = X @ np.linspace(1, -1, 10) + T * (1 + X[:, 1]) + rng.normal(size=n)
    return X, T, Y


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from econml.dr import DRLearner as EconMLDRLearner

    X, T, Y = synthetic(args.n, args.seed)
    start = time.perf_counter()
    ours = DRLearner(LogisticRegression(), LinearRegression(), LinearRegression(), cv=2, random_state=0).fit(Y, T, X=X)
    ours_effect = ours.effect(X)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    theirs = EconMLDRLearner(model_propensity=LogisticRegression(), model_regression=LinearRegression(),
                             model_final=LinearRegression(), cv=2, random_state=0).fit(Y, T, X=X)
    their_effect = theirs.effect(X)
    t_theirs = time.perf_counter() - start
    se = ours.ate_inference().se
    print(f"n = {args.n}: collabcausal DRLearner {t_ours:.3f} s, EconML DRLearner {t_theirs:.3f} s, "
          f"ratio EconML/ours = {t_theirs / t_ours:.2f}")
    print(f"ATE ours {ours_effect.mean():.4f}, EconML {their_effect.mean():.4f} (our AIPW se {se:.4f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
