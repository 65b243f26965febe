"""The ANM direction test (paper 002, Algorithm 1) and its input checks."""

from dataclasses import replace

import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.anm import AdditiveNoiseModel, decide


def pair(n=600, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, np.tanh(2 * x) + 0.2 * rng.uniform(-1, 1, n)


@pytest.mark.parametrize("score", ["hsic", "variance", "kendall"])
def test_clear_nonlinear_pair_is_oriented_both_ways(score):
    x, y = pair()
    assert AdditiveNoiseModel(random_state=0).fit(x, y).scores(score).direction == "x->y"
    assert AdditiveNoiseModel(random_state=0).fit(y, x).scores(score).direction == "y->x"


def test_split_sizes_and_scaled_ranges():
    x, y = pair(101)
    model = AdditiveNoiseModel(test_size=0.3, random_state=1).fit(x, y)
    assert (model.m_test_, model.n_train_) == (30, 71)
    assert np.abs(model.x_test_).max() <= 1.0 and np.abs(model.y_test_).max() <= 1.0


def test_public_bounds_clip_and_scale_the_data():
    x, y = pair(100)
    model = AdditiveNoiseModel(x_bounds=(-0.5, 0.5), y_bounds=(-10, 10), random_state=0).fit(x, y)
    assert np.abs(model.x_test_).max() == 1.0 and (np.abs(model.x_test_) == 1.0).sum() > 5  # clipped
    assert np.abs(model.y_test_).max() <= 1.2 / 10 + 1e-12  # |y| <= 1.2 mapped from [-10, 10]


def test_same_seed_gives_same_scores():
    x, y = pair()
    first = AdditiveNoiseModel(random_state=5).fit(x, y).scores("spearman")
    assert AdditiveNoiseModel(random_state=5).fit(x, y).scores("spearman") == first


def test_decide_prefers_the_smaller_score():
    assert decide(0.1, 0.2) == "x->y"
    assert decide(0.3, 0.2) == "y->x"


def test_constant_training_split_is_refused_only_when_the_data_scale_themselves():
    x, _ = pair(100)
    with pytest.raises(InputError, match="training split is constant"):
        AdditiveNoiseModel().fit(x, np.ones(100))
    # With public bounds nothing about the values is checked: a refusal would be an exact answer.
    model = AdditiveNoiseModel(x_bounds=(-3, 3), y_bounds=(0, 2), random_state=0).fit(x, np.ones(100))
    assert np.isfinite(model.scores("hsic").score_xy)


def test_fewer_than_ten_test_points_is_refused():
    x, y = pair(18)
    with pytest.raises(InputError, match="9 test points, fewer than the minimum 10"):
        AdditiveNoiseModel().fit(x, y)


def test_non_finite_values_are_refused():
    x, y = pair(100)
    x[3] = np.nan
    with pytest.raises(InputError, match="NaN or infinite"):
        AdditiveNoiseModel().fit(x, y)


def test_unknown_score_is_refused():
    x, y = pair(100)
    with pytest.raises(InputError, match="unknown dependence score 'pearson'"):
        AdditiveNoiseModel().fit(x, y).scores("pearson")


def test_bad_bounds_are_refused():
    x, y = pair(100)
    with pytest.raises(InputError, match="x_bounds"):
        AdditiveNoiseModel(x_bounds=(1.0, -1.0)).fit(x, y)


def test_leave_one_out_tuning_is_per_direction_and_recorded():
    x, y = pair()
    model = AdditiveNoiseModel(kernel_width="loo", regularization="loo", random_state=0).fit(x, y)
    (wf, lf), (wg, lg) = model.regression_params_
    assert all(v > 0 for v in (wf, lf, wg, lg))
    assert model.data_tuned("train") and not model.data_tuned("test")
    assert model.scores("hsic").direction == "x->y"
    fixed = AdditiveNoiseModel(random_state=0).fit(x, y)
    assert fixed.regression_params_ == ((0.3, 1e-3), (0.3, 1e-3)) and not fixed.data_tuned("train")


def test_median_heuristic_hsic_widths_are_data_tuned_on_the_test_split():
    x, y = pair()
    model = AdditiveNoiseModel(hsic_widths="median", random_state=0).fit(x, y)
    assert model.data_tuned("test") and model.scores("hsic").direction == "x->y"


@pytest.mark.parametrize("params", [{"kernel_width": "auto"}, {"regularization": "gcv"}])
def test_unknown_tuning_rule_is_refused(params):
    x, y = pair(100)
    with pytest.raises(InputError, match="must be a number or 'loo'"):
        AdditiveNoiseModel(random_state=0, **params).fit(x, y)


def test_gp_regression_orients_a_clear_pair_with_both_hsic_scores_and_is_tuned_on_the_training_split():
    x, y = pair(300)
    model = AdditiveNoiseModel(regression="gp", hsic_widths="median", random_state=0).fit(x, y)
    assert model.scores("hsic").direction == "x->y" and model.scores("hsic_p").direction == "x->y"
    assert model.data_tuned("train")
    (length_f, noise_f), _ = model.regression_params_
    assert 0.05 < length_f < 5.0 and 0.0 < noise_f < 0.5  # smooth tanh, small uniform noise
    back = AdditiveNoiseModel(regression="gp", hsic_widths="median", random_state=0).fit(y, x)
    assert back.scores("hsic_p").direction == "y->x"


def test_unknown_regression_is_refused():
    x, y = pair(100)
    with pytest.raises(InputError, match="unknown regression"):
        AdditiveNoiseModel(regression="forest").fit(x, y)


def robustness_cases():
    rng = np.random.default_rng(3)
    x, y = pair(200, seed=3)
    return {
        "five-level discrete cause": (rng.integers(0, 5, 200).astype(float), y),
        "binary cause": (rng.integers(0, 2, 200).astype(float), y),
        "two-valued effect": (x, (y > 0).astype(float)),
        "heavily tied (rounded)": (np.round(x), np.round(y)),
        "one extreme outlier": (np.r_[x[:-1], 1e9], y),
        "very unequal scales": (x * 1e-9, y * 1e9),
    }


@pytest.mark.parametrize("regression", ["krr", "gp"])
@pytest.mark.parametrize("case", list(robustness_cases()))
def test_discrete_tied_outlying_and_unequal_scale_data_give_finite_scores(case, regression):
    x, y = robustness_cases()[case]
    model = AdditiveNoiseModel(regression=regression, hsic_widths="median", random_state=0).fit(x, y)
    for score in ("hsic", "hsic_p", "kendall", "spearman"):
        s = model.scores(score)
        assert np.isfinite([s.score_xy, s.score_yx]).all() and s.direction in ("x->y", "y->x"), score


@pytest.mark.parametrize("case", list(robustness_cases()))
def test_location_scale_model_gives_finite_scores_on_the_same_cases(case):
    x, y = robustness_cases()[case]
    model = AdditiveNoiseModel(noise="location-scale", in_sample=True, hsic_widths="median").fit(x, y)
    for score in ("hsic", "hsic_p", "likelihood"):
        s = model.scores(score)
        assert np.isfinite([s.score_xy, s.score_yx]).all() and s.direction in ("x->y", "y->x"), score


def heteroscedastic_pair(n=300, seed=0):
    """``Y = f(X) + g(X) N`` with a scale that grows with ``X``: additive-noise fits reverse it."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, np.tanh(x) + (0.1 + 0.4 * np.abs(x + 1.0)) * rng.normal(size=n)


LOCATION_SCALE = {"noise": "location-scale", "in_sample": True, "hsic_widths": "median"}


@pytest.mark.parametrize("score", ["hsic", "likelihood", "likelihood_kde", "likelihood_kde_in", "likelihood_hsic"])
def test_location_scale_model_orients_a_heteroscedastic_pair_both_ways(score):
    x, y = heteroscedastic_pair()
    assert AdditiveNoiseModel(**LOCATION_SCALE).fit(x, y).scores(score).direction == "x->y"
    assert AdditiveNoiseModel(**LOCATION_SCALE).fit(y, x).scores(score).direction == "y->x"


@pytest.mark.parametrize("score", ["hsic", "likelihood"])
def test_location_scale_model_still_orients_additive_noise(score):
    x, y = pair(300)
    assert AdditiveNoiseModel(**LOCATION_SCALE).fit(x, y).scores(score).direction == "x->y"
    assert AdditiveNoiseModel(**LOCATION_SCALE).fit(y, x).scores(score).direction == "y->x"


def test_in_sample_kde_likelihood_orients_a_pair_whose_cause_has_one_isolated_value():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    x[0] = 9.0  # beyond every other row's kernel: the leave-one-out KDE gives it about 708 nats
    y = np.tanh(x) + 0.2 * rng.uniform(-1, 1, 200)
    forward, backward = AdditiveNoiseModel(**LOCATION_SCALE).fit(x, y), AdditiveNoiseModel(**LOCATION_SCALE).fit(y, x)
    assert (forward.scores("likelihood_kde_in").direction, backward.scores("likelihood_kde_in").direction) == (
        "x->y", "y->x")
    assert forward.scores("likelihood_kde").direction == "y->x"  # what the in-sample estimate repairs


def test_standardised_in_sample_residuals_have_mean_square_one():
    x, y = heteroscedastic_pair()
    model = AdditiveNoiseModel(**LOCATION_SCALE).fit(x, y)
    assert np.mean(model.residual_y_**2) == pytest.approx(1.0, rel=1e-4)
    assert np.mean(model.residual_x_**2) == pytest.approx(1.0, rel=1e-4)
    assert np.ptp(model.log_scale_y_) > 0.5  # the fitted scale varies with x


def test_in_sample_fit_scores_every_row_and_counts_as_tuned_on_both_splits():
    x, y = pair(101)
    model = AdditiveNoiseModel(in_sample=True).fit(x, y)
    assert (model.m_test_, model.n_train_) == (101, 101)
    assert model.data_tuned("test") and model.data_tuned("train")
    assert not AdditiveNoiseModel().fit(x, y).data_tuned("test")


def test_additive_likelihood_is_half_the_variance_score_in_sample():
    x, y = pair(200)
    model = AdditiveNoiseModel(in_sample=True).fit(x, y)
    for r in (model.residual_y_, model.residual_x_):
        assert abs(np.mean(r)) < 1e-2  # the identity holds for residuals of mean 0
    half = model.scores("variance").margin / 2
    assert model.scores("likelihood").margin == pytest.approx(half, abs=1e-3)


def test_location_scale_decision_does_not_depend_on_units():
    x, y = heteroscedastic_pair()
    first = AdditiveNoiseModel(**LOCATION_SCALE).fit(x, y).scores("likelihood")
    second = AdditiveNoiseModel(**LOCATION_SCALE).fit(1000 * x - 7, 0.01 * y + 3).scores("likelihood")
    assert second.direction == first.direction and second.margin == pytest.approx(first.margin, abs=1e-6)


def test_a_constant_column_is_the_likelier_cause_without_nan():
    x, _ = heteroscedastic_pair(200)
    # public bounds, constant y: its point-mass marginal has an unbounded likelihood (y->x scores -inf)
    model = AdditiveNoiseModel(**LOCATION_SCALE, x_bounds=(-4, 4), y_bounds=(0, 2)).fit(x, np.ones(200))
    for score in ("likelihood", "likelihood_kde"):
        result = model.scores(score)
        assert np.isfinite(result.score_xy) and result.score_yx == -np.inf and result.direction == "y->x"


@pytest.mark.parametrize("noise", ["location-scale", "additive"])
def test_likelihood_hsic_is_the_likelihood_or_the_additive_hsic_by_vuongs_threshold(noise):
    x, y = pair(200)
    params = {**LOCATION_SCALE, "noise": noise}
    likelihood = AdditiveNoiseModel(**params).fit(x, y).scores("likelihood_kde")
    assert AdditiveNoiseModel(**params, likelihood_z=0.0).fit(x, y).scores("likelihood_hsic") == replace(
        likelihood, score="likelihood_hsic")  # |z| >= 0 always: the likelihood decides
    plain = AdditiveNoiseModel(in_sample=True, hsic_widths="median").fit(x, y).scores("hsic")
    model = AdditiveNoiseModel(**params, likelihood_z=np.inf).fit(x, y)
    anm = model.scores("likelihood_hsic")  # the ANM consulted; its residuals pass the test on this pair
    assert (anm.score_xy, anm.score_yx) == pytest.approx((plain.score_xy, plain.score_yx), rel=1e-9)
    assert anm.direction == "x->y"
    refused = AdditiveNoiseModel(**params, likelihood_z=np.inf, independence_level=1.0).fit(x, y)
    assert refused.scores("likelihood_hsic").margin == pytest.approx(likelihood.margin)  # no p-value exceeds 1


def test_likelihood_hsic_keeps_a_significant_likelihood_on_a_heteroscedastic_pair():
    x, y = heteroscedastic_pair()
    for a, b, direction in ((x, y, "x->y"), (y, x, "y->x")):
        result = AdditiveNoiseModel(**LOCATION_SCALE).fit(a, b).scores("likelihood_hsic")
        assert result.direction == direction and result.margin == pytest.approx(
            AdditiveNoiseModel(**LOCATION_SCALE).fit(a, b).scores("likelihood_kde").margin)


def test_location_scale_options_are_refused_where_they_do_not_apply():
    x, y = pair(100)
    with pytest.raises(InputError, match="unknown noise model 'multiplicative'"):
        AdditiveNoiseModel(noise="multiplicative").fit(x, y)
    model = AdditiveNoiseModel(**LOCATION_SCALE).fit(x, y)
    with pytest.raises(InputError, match="needs the fitted noise scales"):
        model.pair_score("likelihood", model.x_test_, model.residual_y_)
    with pytest.raises(InputError, match="needs the fitted noise scales"):
        model.pair_score("likelihood_hsic", model.x_test_, model.residual_y_)
