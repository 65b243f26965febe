"""Figures of the red team of the study kinds' DP operations (docs/threat-model.md).

    .venv/bin/python benchmarks/redteam_kinds.py [--quick]

1. ``dp_discover`` with a negative residual HSIC width (refused now): the noise scale the old code
   used (the test split's alone) beside the honest one, and a worst-case search for the privacy loss of one
   substituted training row on a fixed split (the Laplace loss |d s_xy| + |d s_yx| over the scale),
   against the claimed epsilon 1.
2. DP-EBM under substitution: interpret's noise with ``substitution_dp_ebm_budget``, read back as
   Gaussian-DP mu under the substitution sensitivities and converted to epsilon at delta/2 per part.
3. An audited party's time per ``dp_count`` request as its ledger history grows (a coordinator's
   flood of eps-1e-12 requests): flat since requests read only their own charges.

No target: the figures are printed (``--quick``: 2 training rows moved, eps 1 only, shorter histories).
"""

from __future__ import annotations

import numpy as np
from _run_mode import BenchmarkParser

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.anm import AdditiveNoiseModel
from collabcausal.estimators.discovery.private_scores import laplace_noise_scale, released_scores
from collabcausal.estimators.discovery.sensitivity import score_sensitivity
from collabcausal.estimators.dp.meta_algorithm import DPEBMClassifier, DPEBMRegressor, gdp_epsilon, gdp_mu


def negative_width(moved_rows: int, n: int = 300) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, n)
    y = 0.5 * x
    kw = {"kernel_width": 3.0, "test_size": 0.9, "x_bounds": (-1, 1), "y_bounds": (-1, 1), "random_state": 0,
          "regularization": 1e-3}
    for width in (0.02, -0.02):
        model = AdditiveNoiseModel(hsic_widths=(0.3, width), **kw).fit(x, y)
        try:
            scale = laplace_noise_scale("hsic", "both", 1.0, model)
        except InputError:  # refused now; the old code kept max(test, negative train) = the test split's
            scale = 2.0 * score_sensitivity("hsic", model.m_test_) / 1.0
        test = np.random.default_rng(0).permutation(n)[: model.m_test_]
        exact, worst = released_scores(model, "hsic"), 0.0
        for k in np.setdiff1d(np.arange(n), test)[:moved_rows]:
            for corner in ((1, -1), (-1, 1), (1, 1), (-1, -1)):
                x2, y2 = x.copy(), y.copy()
                x2[k], y2[k] = corner
                moved = released_scores(AdditiveNoiseModel(hsic_widths=(0.3, width), **kw).fit(x2, y2), "hsic")
                worst = max(worst, abs(exact.score_xy - moved.score_xy) + abs(exact.score_yx - moved.score_yx))
        print(f"dp_discover residual width {width:+.2f}: noise scale {scale:.4g}, worst L1 move of one training "
              f"row {worst:.4g}, privacy loss {worst / scale:.3g} (claimed 1)")


def dp_ebm(epsilons: list[float], delta: float = 1e-5, f: float = 0.1) -> None:
    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(300, 3)), rng.uniform(0, 2, size=300)
    for eps in epsilons:
        for name, model, span in (
            ("regressor", DPEBMRegressor(epsilon=eps, delta=delta, feature_bounds=[(0, 1)] * 3,
                                         target_bounds=(0.0, 2.0)).fit(X, y), 2.0),
            ("classifier", DPEBMClassifier(epsilon=eps, delta=delta, feature_bounds=[(0, 1)] * 3).fit(
                X, (y > 1).astype(int)), 1.0),
        ):
            m = model.model_
            queries = m.max_rounds * len(m.term_features_) * m.outer_bags
            mu_bin = np.sqrt(2 * X.shape[1]) / m.noise_scale_binning_
            mu_boost = 2 * span * m.learning_rate * np.sqrt(queries) / m.noise_scale_boosting_
            eps_bin, eps_boost = gdp_epsilon(mu_bin, delta / 2), gdp_epsilon(mu_boost, delta / 2)
            print(f"DP-EBM {name} eps={eps:g}: binning mu {mu_bin:.6f} (target {gdp_mu(f * eps, delta / 2):.6f}), "
                  f"boosting mu {mu_boost:.6f} (target {gdp_mu((1 - f) * eps, delta / 2):.6f}); "
                  f"substitution eps {eps_bin:.6f} + {eps_boost:.6f} = {eps_bin + eps_boost:.6f}")


def audited_request_time(histories: list[int]) -> None:
    import tempfile
    import time
    from pathlib import Path

    import pandas as pd

    from collabcausal.ledger import PrivacyLedger
    from collabcausal.messages import Message
    from collabcausal.party import Party, PartyTable
    from collabcausal.party.audit import JsonlAuditLog

    with tempfile.TemporaryDirectory() as folder:
        d = Path(folder)
        frame = pd.DataFrame({"a": np.random.default_rng(0).uniform(size=100)})
        party = Party("p", PartyTable.from_frame(frame, ["a"]), audit=JsonlAuditLog(d / "a.jsonl"),
                      ledger=PrivacyLedger(d / "l.sqlite", epsilon=1.0, dataset="d"))
        request = Message("dp_count", {"study": "s", "epsilon": 1e-12, "columns": []})
        done = 0
        for history in histories:
            for _ in range(history - done):
                party.handle(request)
            start = time.perf_counter()
            for _ in range(20):
                party.handle(request)
            done = history + 20
            print(f"audited dp_count at a history of {done} charges: "
                  f"{1000 * (time.perf_counter() - start) / 20:.1f} ms per request")


def main(argv: list[str] | None = None) -> None:
    parser = BenchmarkParser(__doc__)
    parser.add_size("--moved-rows", type=int, full=6, quick=2, help="training rows moved to the corners")
    parser.add_size("--epsilons", type=float, nargs="+", full=[0.5, 1.0, 4.0], quick=[1.0], help="DP-EBM budgets")
    parser.add_size("--histories", type=int, nargs="+", full=[100, 1000, 3000], quick=[100, 300],
                    help="ledger histories (charges) at which a request is timed")
    args = parser.parse_args(argv)
    negative_width(args.moved_rows)
    dp_ebm(args.epsilons)
    audited_request_time(args.histories)


if __name__ == "__main__":
    main()
