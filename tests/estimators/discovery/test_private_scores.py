"""Private ANM releases (paper 002, sections 4-5): calibration, no-answer path and bad requests."""

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.agreement import laplace_agreement, margin_agreement
from collabcausal.estimators.discovery.anm import AdditiveNoiseModel
from collabcausal.estimators.discovery.private_scores import check_form, check_protection, release, released_scores
from collabcausal.estimators.discovery.sensitivity import score_sensitivity


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    y = np.tanh(2 * x) + 0.2 * rng.uniform(-1, 1, 400)
    return AdditiveNoiseModel(random_state=0).fit(x, y)


@pytest.fixture(scope="module")
def bounded_model():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 400)
    y = np.tanh(2 * x) + 0.2 * rng.uniform(-1, 1, 400)
    return AdditiveNoiseModel(regularization=1.0, x_bounds=(-2, 2), y_bounds=(-1.2, 1.2), random_state=0).fit(x, y)


def test_laplace_scale_is_twice_the_sensitivity_over_epsilon(model):
    out = release(model, "kendall", epsilon=0.5, rng=np.random.default_rng(0))
    assert out.noise_scale == pytest.approx(2 * score_sensitivity("kendall", 200) / 0.5)
    assert out.answered and out.direction in ("x->y", "y->x") and 0.5 <= out.agreement <= 1.0


@pytest.mark.parametrize("score", ["spearman", "hsic"])
def test_frequency_of_agreeing_decisions_matches_theorem_2(model, score):
    exact = released_scores(model, score)  # HSIC is released as its norm; the direction is the same
    assert exact.direction == model.scores(score).direction
    rng = np.random.default_rng(1)
    epsilon = 2.0 if score == "spearman" else 1.0
    draws = [release(model, score, epsilon=epsilon, rng=rng) for _ in range(4000)]
    sigma = draws[0].noise_scale
    expected = float(laplace_agreement(exact.margin, sigma))
    observed = np.mean([d.direction == exact.direction for d in draws])
    assert 0.55 < expected < 0.97  # the test is informative
    assert observed == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / 4000))


def test_the_margin_release_carries_one_laplace_of_the_same_scale_so_sd_sqrt2_b_instead_of_2b(model):
    # "A margin-only release" (docs/causal-discovery.md): the same scale 2 Delta / eps, once on the margin.
    exact = released_scores(model, "hsic")
    rng = np.random.default_rng(3)
    margins = [release(model, "hsic", epsilon=1.0, form="margin", rng=rng) for _ in range(4000)]
    scores = [release(model, "hsic", epsilon=1.0, rng=rng) for _ in range(4000)]
    b = 2 * score_sensitivity("hsic", 200) / 1.0
    one = margins[0]
    assert (one.form, one.score_xy, one.score_yx, one.noise_scale) == ("margin", None, None, pytest.approx(b))
    assert scores[0].noise_scale == pytest.approx(b) and scores[0].margin == scores[0].score_yx - scores[0].score_xy
    # sample sd of 4000 Laplace draws: relative standard error about sqrt(5 / 4 / 4000) = 0.018
    assert np.std([r.margin - exact.margin for r in margins]) == pytest.approx(np.sqrt(2) * b, rel=0.08)
    assert np.std([r.margin - exact.margin for r in scores]) == pytest.approx(2 * b, rel=0.08)
    expected = float(margin_agreement(exact.margin, b))
    observed = np.mean([r.direction == exact.direction for r in margins])
    assert 0.55 < expected < 0.97 and expected > float(laplace_agreement(exact.margin, b))
    assert observed == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / 4000))
    assert all((r.direction == "x->y") == (r.margin > 0) and 0.5 <= r.agreement <= 1 for r in margins)


@pytest.mark.parametrize(
    ("form", "score", "protect", "message"),
    [("both", "hsic", "test", "not one of"), (["margin"], "hsic", "both", "not one of"),
     ("margin", "iqr", "test", "no margin-only form"), ("margin", "spearman", "train", "no margin-only form")],
)
def test_a_margin_release_is_refused_where_there_is_no_laplace_margin(form, score, protect, message):
    with pytest.raises(InputError, match=message):
        check_form(form, score, protect)
    assert check_form("margin", "kendall", "test") == "margin"


def test_opendp_release_path_agrees_with_theorem_2_too(model):
    exact = model.scores("kendall")
    draws = [release(model, "kendall", epsilon=1.0) for _ in range(1500)]
    expected = float(laplace_agreement(exact.margin, draws[0].noise_scale))
    observed = np.mean([d.direction == exact.direction for d in draws])
    assert observed == pytest.approx(expected, abs=5 * np.sqrt(expected * (1 - expected) / 1500))


def test_iqr_release_is_refused_at_small_budgets_and_answers_at_large_ones(model):
    assert not release(model, "iqr", epsilon=0.5, delta=1e-6, rng=np.random.default_rng(0)).answered
    big = release(model, "iqr", epsilon=200.0, delta=1e-6, rng=np.random.default_rng(0))
    assert big.answered and big.direction == model.scores("iqr").direction
    assert big.noise_scale == pytest.approx(12 / 200.0)


def test_hsic_protecting_both_splits_uses_the_larger_sensitivity(bounded_model):
    out = release(bounded_model, "hsic", epsilon=1.0, protect="both", rng=np.random.default_rng(0))
    train = release(bounded_model, "hsic", epsilon=1.0, protect="train", rng=np.random.default_rng(0))
    assert out.noise_scale == pytest.approx(train.noise_scale)
    assert out.noise_scale > 2 * score_sensitivity("hsic", 200)


def test_rank_training_release_is_exact_or_absent(bounded_model):
    out = release(bounded_model, "spearman", epsilon=1.0, delta=1e-6, protect="train", rng=np.random.default_rng(0))
    assert not out.answered and out.score_xy is None  # residual gaps are far too small for n = 200


def test_training_protection_without_public_bounds_is_refused(model):
    with pytest.raises(InputError, match="public bounds"):
        release(model, "hsic", epsilon=1.0, protect="both")


@pytest.mark.parametrize(
    ("score", "protect", "epsilon", "delta", "message"),
    [
        ("hsic", "test", 0.0, 0.0, "epsilon must be a finite number > 0"),
        ("hsic", "test", -1.0, 0.0, "epsilon must be a finite number > 0"),
        ("variance", "test", 1.0, 0.0, "no private release"),
        ("likelihood", "test", 1.0, 0.0, "no private release"),
        ("likelihood_kde", "test", 1.0, 0.0, "no private release"),
        ("likelihood_hsic", "test", 1.0, 0.0, "no private release"),
        ("likelihood_kde_in", "test", 1.0, 0.0, "no private release"),
        ("spearman", "both", 1.0, 0.0, "no private release protecting 'both'"),
        ("iqr", "test", 1.0, 0.0, "needs delta > 0"),
        ("kendall", "train", 1.0, 0.0, "needs delta > 0"),
        ("hsic", "test", 1.0, 1.5, "delta must lie in"),
    ],
)
def test_bad_private_requests_are_refused(score, protect, epsilon, delta, message):
    with pytest.raises(InputError, match=message):
        check_protection(score, protect, epsilon, delta)


@pytest.mark.parametrize(
    ("params", "protect", "split"),
    [({"hsic_widths": "median"}, "test", "test"), ({"kernel_width": "loo"}, "train", "train"),
     ({"regularization": "loo"}, "both", "train"), ({"regression": "gp"}, "both", "train"),
     ({"in_sample": True}, "test", "test")],
)
def test_release_refuses_parameters_tuned_on_the_protected_split(params, protect, split):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 400)
    y = np.tanh(2 * x) + 0.2 * rng.uniform(-1, 1, 400)
    model = AdditiveNoiseModel(x_bounds=(-2, 2), y_bounds=(-1.2, 1.2), random_state=0, **params).fit(x, y)
    with pytest.raises(InputError, match=f"tuned on the {split} split"):
        release(model, "hsic", epsilon=1.0, protect=protect, rng=rng)


def test_release_refuses_the_location_scale_model():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 400)
    y = np.tanh(2 * x) + 0.2 * rng.uniform(-1, 1, 400)
    model = AdditiveNoiseModel(noise="location-scale", x_bounds=(-2, 2), y_bounds=(-1.2, 1.2), random_state=0)
    with pytest.raises(InputError, match="no private release for noise='location-scale'"):
        release(model.fit(x, y), "hsic", epsilon=1.0, protect="test", rng=rng)


def test_leave_one_out_regression_is_allowed_under_test_set_privacy():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, 400)
    y = np.tanh(2 * x) + 0.2 * rng.uniform(-1, 1, 400)
    model = AdditiveNoiseModel(kernel_width="loo", regularization="loo", random_state=0).fit(x, y)
    assert release(model, "kendall", epsilon=1.0, protect="test", rng=rng).answered
