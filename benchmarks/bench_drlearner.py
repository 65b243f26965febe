"""Benchmark: our non-private DR-learner against EconML's DRLearner, same nuisances, same run.

Both fit logistic-regression propensities, a linear outcome regression on [X, T] and a linear final
stage with 2-fold cross-fitting on n = 100,000 subjects (10 covariates), then predict tau(x) for
everyone. Prints both times (each the best of ``--repeats`` runs, the two taking turns) and the
ratio EconML / ours, **target >= 2** (full runs; exit status 1 when missed), and the two ATEs,
which must agree within our AIPW standard error (the same data, only the folds differ; exit 1 when
not, quick runs included). EconML is a development-only dependency (``pip install econml``).

Run: .venv/bin/python benchmarks/bench_drlearner.py [--n 100000] [--seed 0] [--repeats 3] [--quick]
"""

from __future__ import annotations

import time

import numpy as np
from _run_mode import BenchmarkParser, target_ok, verdict
from sklearn.linear_model import LinearRegression, LogisticRegression

from collabcausal.estimators.metalearners import DRLearner

TARGET = 2.0  # EconML time / our time


def synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 10))
    T = rng.binomial(1, 1 / (1 + np.exp(-0.5 * X[:, 0])))
    Y = X @ np.linspace(1, -1, 10) + T * (1 + X[:, 1]) + rng.normal(size=n)
    return X, T, Y


def main(argv: list[str] | None = None) -> int:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--n", type=int, full=100_000, quick=5_000, help="subjects")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_size("--repeats", type=int, full=3, quick=1, help="runs of each, best kept")
    args = parser.parse_args(argv)
    from econml.dr import DRLearner as EconMLDRLearner

    X, T, Y = synthetic(args.n, args.seed)

    def ours() -> DRLearner:
        return DRLearner(LogisticRegression(), LinearRegression(), LinearRegression(), cv=2, random_state=0).fit(
            Y, T, X=X
        )

    def theirs() -> EconMLDRLearner:
        return EconMLDRLearner(
            model_propensity=LogisticRegression(),
            model_regression=LinearRegression(),
            model_final=LinearRegression(),
            cv=2,
            random_state=0,
        ).fit(Y, T, X=X)

    best = {"ours": float("inf"), "EconML": float("inf")}
    effects = {}
    for _ in range(args.repeats):
        for name, fit in (("ours", ours), ("EconML", theirs)):
            start = time.perf_counter()
            model = fit()
            effects[name] = model.effect(X)
            best[name] = min(best[name], time.perf_counter() - start)
    ratio = best["EconML"] / best["ours"]
    met = ratio >= TARGET
    se = ours().ate_inference().se
    print(
        f"n = {args.n}, best of {args.repeats}: collabcausal DRLearner {best['ours']:.3f} s, "
        f"EconML DRLearner {best['EconML']:.3f} s, ratio EconML/ours = {ratio:.2f} "
        f"(target >= {TARGET:g}: {verdict(met, args.quick)})"
    )
    gap = abs(effects["ours"].mean() - effects["EconML"].mean())
    agree = gap <= se
    print(f"ATE ours {effects['ours'].mean():.4f}, EconML {effects['EconML'].mean():.4f} (our AIPW se {se:.4f}); "
          f"agree within one se: {agree}")
    return 0 if agree and target_ok(met, args.quick) else 1


if __name__ == "__main__":
    raise SystemExit(main())
