"""Baselines beside CATE rows: the constant-ATE scores, the EconML peer names, the summary's counts."""

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import InputError
from collabcausal.simulations.cate_baselines import baseline_summary, constant_ate_pehe, peer_of, to_markdown


def test_constant_ate_scores_sd_of_tau_and_adds_the_ate_error_in_quadrature():
    tau = np.array([1.0, 2.0, 3.0, 6.0])
    assert constant_ate_pehe(tau) == pytest.approx(np.std(tau))
    assert constant_ate_pehe(tau, 3.0 + 0.5) == pytest.approx(np.sqrt(np.var(tau) + 0.5**2))


@pytest.mark.parametrize(("learner", "peer"), [("S", "S"), ("DR", "DR"), ("DP-EBM DR", "DR"), ("DP-EBM S", "S"),
                                               ("DP-CATE R linear", "R"), ("DP-CATE R functional", "R")])
def test_every_learner_is_compared_with_the_econml_learner_of_its_kind(learner, peer):
    assert peer_of(learner) == peer


def test_a_learner_without_a_peer_is_refused():
    with pytest.raises(InputError, match="no EconML peer"):
        peer_of("ANM discovery")


def test_summary_counts_wins_against_each_constant_and_reports_spreads():
    rows = pd.DataFrame({
        "learner": ["DR"] * 5,
        "mse": [0.5, 1.0, 2.0, 3.0, np.nan],  # the last cell was refused
        "econml_mse": [0.4] * 5,
        "const_true_mse": [1.5] * 5,
        "const_own_mse": [2.5] * 5,
        "note": ["", "", "", "", "refused: noise too large"],
    })
    (rec,) = baseline_summary(rows, ["learner"], metric="mse").to_dict("records")
    assert rec["beats_true_const"] == "2/5" and rec["beats_own_const"] == "3/5"
    assert rec["mse"] == "1.62 (1.1) [0.5–3]"
    assert rec["econml_peer"].startswith("0.4 (0)")
    assert rec["note"] == "refused in 1/5 cells, e.g. refused: noise too large"
    tie = rows.assign(mse=rows["const_own_mse"] * (1 + 1e-12))  # a constant learner scores its own constant
    assert baseline_summary(tie, ["learner"], metric="mse")["beats_own_const"].item() == "0/5"
    markdown = to_markdown(baseline_summary(rows, ["learner"], metric="mse"))
    assert markdown.splitlines()[0].startswith("| learner | cells | mse | econml_peer |")
    assert markdown.count("\n") == 2
