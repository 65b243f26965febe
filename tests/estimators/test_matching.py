import numpy as np
import pytest

from collabcausal.errors import InputError
from collabcausal.estimators import matching
from collabcausal.estimators.matching import _RunMatches, nearest_neighbor_match, psm

# Hand-computed example: treated 0 (e .3) -> control 2 (e .2); treated 1 (e .6) -> control 4 (e .65);
# control 2 -> treated 0; controls 3 (e .5) and 4 (e .65) -> treated 1.
Y = np.array([5.0, 8.0, 1.0, 4.0, 6.0])
T = np.array([1, 1, 0, 0, 0])
E = np.array([0.3, 0.6, 0.2, 0.5, 0.65])


def _brute_force(q, pool):
    out = []
    for x in q:
        d = np.abs(pool - x)
        cand = np.flatnonzero(d == d.min())
        cand = cand[pool[cand] == pool[cand].min()]
        out.append(cand.min())
    return np.array(out)


def test_psm_ate_known_answer():
    est = psm(Y, T, E, "ate")
    assert est.estimate == pytest.approx((4 + 2 + 4 + 4 + 2) / 5)
    np.testing.assert_array_equal(est.diagnostics["match_weights"], [2, 3, 2, 1, 2])
    np.testing.assert_array_equal(est.diagnostics["n_matches"], [1, 1, 1, 1, 1])
    assert est.diagnostics["n_tied_queries"] == 0
    assert est.method == "psm" and (est.n_treated, est.n_control) == (2, 3)
    assert est.diagnostics["n_unmatched"] == 0


def test_psm_att_known_answer():
    est = psm(Y, T, E, "att")
    assert est.estimate == pytest.approx(((5 - 1) + (8 - 6)) / 2)
    np.testing.assert_array_equal(est.diagnostics["match_weights"], [1, 1, 1, 0, 1])
    assert est.diagnostics["n_matched_controls"] == 2


def test_abadie_imbens_se_known_answers():
    # ATE: sum (diff - 3.2)^2 = 4.8; K = (1, 2, 1, 0, 1); within-arm sigma^2 = (4.5, 4.5, 4.5, 2, 2)
    # -> sum (K^2 + K) sigma^2 = 9 + 27 + 9 + 0 + 4 = 49; V = (4.8 + 49) / 25
    ate = psm(Y, T, E, "ate")
    assert ate.se == pytest.approx(np.sqrt(53.8 / 25))
    assert ate.ci_low < ate.estimate < ate.ci_high
    # ATT: sum (diff - 3)^2 = 2; every control used at most once -> K (K - 1) = 0; V = 2 / 4
    assert psm(Y, T, E, "att").se == pytest.approx(np.sqrt(0.5))


def test_abadie_imbens_se_is_none_when_an_arm_has_one_subject():
    est = psm([3.0, 0.0, 10.0], [1, 0, 0], [0.5, 0.25, 0.75], "ate")
    assert est.se is None and est.ci_low is None
    assert psm(Y, T, E, compute_se=False).se is None


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_abadie_imbens_se_matches_the_monte_carlo_spread_with_known_propensity(estimand):
    rng = np.random.default_rng(5)
    estimates, ses = [], []
    for _ in range(300):
        n = 400
        e = rng.uniform(0.2, 0.8, n)
        t = (rng.random(n) < e).astype(int)
        y = t * (1.0 + e) + 2.0 * e + rng.normal(size=n)
        est = psm(y, t, e, estimand)
        estimates.append(est.estimate)
        ses.append(est.se)
    assert np.mean(ses) == pytest.approx(np.std(estimates), rel=0.15)


def test_equidistant_matches_on_both_sides_are_averaged():
    # treated at .5 is equidistant from controls at .25 (y 0) and .75 (y 10): Abadie-Imbens average both
    est = psm([3.0, 0.0, 10.0], [1, 0, 0], [0.5, 0.25, 0.75], "att")
    assert est.estimate == 3.0 - 5.0
    np.testing.assert_array_equal(est.diagnostics["match_weights"], [1, 0.5, 0.5])
    assert est.diagnostics["n_tied_queries"] == 1
    # the single-match utility keeps its deterministic rule (smaller score)
    np.testing.assert_array_equal(nearest_neighbor_match([0.5], [0.75, 0.25]), [1])


def test_equal_pool_scores_are_averaged():
    np.testing.assert_array_equal(nearest_neighbor_match([0.4, 0.1, 0.9], [0.5, 0.25, 0.5, 0.25]), [0, 1, 0])
    est = psm([3.0, 1.0, 2.0], [1, 0, 0], [0.5, 0.25, 0.25], "att")
    assert est.estimate == 1.5  # both controls at .25 (y 1 and y 2), not the lowest index alone
    np.testing.assert_array_equal(est.diagnostics["match_weights"], [1, 0.5, 0.5])
    np.testing.assert_array_equal(est.diagnostics["n_matches"], [2, 0, 0])


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_estimate_and_se_do_not_depend_on_row_order_with_many_ties(estimand):
    # NSW-style data: propensities on a coarse grid, so many treated units have tied nearest controls
    rng = np.random.default_rng(7)
    n = 400
    e = rng.choice(np.linspace(0.1, 0.9, 9), n)
    t = rng.binomial(1, e)
    y = 2.0 * t + 5.0 * e + rng.normal(size=n)
    first = psm(y, t, e, estimand)
    assert first.diagnostics["n_tied_queries"] > 100
    for k in range(20):
        p = np.random.default_rng(100 + k).permutation(n)
        shuffled = psm(y[p], t[p], e[p], estimand)
        assert shuffled.estimate == pytest.approx(first.estimate, rel=1e-12, abs=1e-12)
        assert shuffled.se == pytest.approx(first.se, rel=1e-12)
        np.testing.assert_allclose(shuffled.diagnostics["match_weights"], first.diagnostics["match_weights"][p])


@pytest.mark.parametrize("caliper", [None, 0.05])
def test_att_without_its_se_matches_the_treated_only_to_the_same_estimate_and_weights(caliper, monkeypatch):
    # compute_se=False matches no control (an ATT needs none without its SE): nothing else changes
    rng = np.random.default_rng(11)
    e = np.r_[rng.choice(np.linspace(0.1, 0.9, 9), 300), 0.99]  # the last treated has no control within 0.05
    t = np.r_[rng.binomial(1, e[:-1]), 1]
    y = 2.0 * t + 5.0 * e + rng.normal(size=301)
    full = psm(y, t, e, "att", caliper=caliper)
    searched = []
    monkeypatch.setattr(matching, "_RunMatches", lambda *a: searched.append(a[2].size) or _RunMatches(*a))
    bare = psm(y, t, e, "att", caliper=caliper, compute_se=False)
    assert searched == [np.count_nonzero(t)]  # the treated were searched among the controls, nothing else
    assert bare.estimate == full.estimate and bare.se is None
    assert bare.diagnostics["n_unmatched"] == full.diagnostics["n_unmatched"] == (caliper is not None)
    for key in ("match_weights", "n_matches"):
        np.testing.assert_array_equal(bare.diagnostics[key], full.diagnostics[key])
    assert "influence" not in bare.diagnostics  # BCa's input, computed with the SE only


def test_tie_averaging_agrees_with_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(4, 40))
        e = rng.choice([0.2, 0.3, 0.4, 0.5, 0.6], n)
        t = np.r_[1, 0, rng.integers(0, 2, n - 2)]
        y = rng.normal(size=n)
        expected = []
        for k in np.flatnonzero(t == 1):
            pool = np.flatnonzero(t == 0)
            d = np.abs(e[pool] - e[k])
            expected.append(y[k] - y[pool[d == d.min()]].mean())  # exact float ties, as psm sees them
        assert psm(y, t, e, "att").estimate == pytest.approx(np.mean(expected), abs=1e-12)


def test_caliper_drops_subjects_without_a_close_match():
    y, t, e = [3.0, 7.0, 1.0, 2.0], [1, 1, 0, 0], [0.25, 0.75, 0.3125, 0.5]
    est = psm(y, t, e, "att", caliper=0.1)
    assert est.estimate == 2.0
    assert est.diagnostics["n_unmatched"] == 1
    np.testing.assert_array_equal(est.diagnostics["match_weights"], [1, 0, 1, 0])
    ate = psm(y, t, e, "ate", caliper=0.1)  # subjects 1 (.75) and 3 (.5) have no partner within .1
    assert ate.diagnostics["n_unmatched"] == 2
    assert ate.estimate == 2.0
    np.testing.assert_array_equal(ate.diagnostics["match_weights"], [2, 0, 2, 0])


def test_caliper_dropping_everybody_raises():
    with pytest.raises(InputError, match="caliper"):
        psm([1.0, 2.0], [1, 0], [0.2, 0.8], caliper=0.1)


def test_nearest_neighbor_match_agrees_with_brute_force_on_tie_heavy_data():
    rng = np.random.default_rng(0)
    for _ in range(200):
        pool = rng.integers(0, 8, size=rng.integers(1, 12)) / 4
        q = rng.integers(-2, 12, size=15) / 4
        np.testing.assert_array_equal(nearest_neighbor_match(q, pool), _brute_force(q, pool))


def test_nearest_neighbor_match_agrees_with_brute_force_on_continuous_scores():
    rng = np.random.default_rng(1)
    pool, q = rng.random(300), rng.random(200) * 1.2 - 0.1
    np.testing.assert_array_equal(nearest_neighbor_match(q, pool), _brute_force(q, pool))


def test_psm_att_without_confounding_recovers_the_effect():
    rng = np.random.default_rng(2)
    n = 4000
    e = rng.uniform(0.2, 0.8, n)
    t = (rng.random(n) < e).astype(int)
    y = 2.0 * t + 3.0 * e + rng.normal(scale=0.1, size=n)
    assert psm(y, t, e, "att").estimate == pytest.approx(2.0, abs=0.05)
    assert psm(y, t, e, "ate").estimate == pytest.approx(2.0, abs=0.05)


def test_psm_validates_its_inputs():
    with pytest.raises(InputError, match="0/1"):
        psm(Y, T * 2, E)
    with pytest.raises(InputError, match="only one arm"):
        psm(Y, np.ones(5), E)
    with pytest.raises(InputError, match=r"\(0, 1\)"):
        psm(Y, T, E + 0.5)
    with pytest.raises(InputError, match="NaN"):
        psm(np.r_[Y[:4], np.nan], T, E)
    with pytest.raises(InputError, match="entries"):
        psm(Y[:4], T, E)
    with pytest.raises(InputError, match="estimand"):
        psm(Y, T, E, "atc")
    with pytest.raises(InputError, match="caliper"):
        psm(Y, T, E, caliper=-1.0)
    with pytest.raises(InputError, match="empty"):
        nearest_neighbor_match([0.5], [])


def _abadie_imbens_dgp(rng: np.random.Generator, n: int):
    """Abadie & Imbens (2016), section 5: X uniform on [-1/2, 1/2]^2, logistic propensity."""
    from scipy.special import expit

    X = rng.uniform(-0.5, 0.5, size=(n, 2))
    t = (rng.random(n) < expit(X[:, 0] + 2.0 * X[:, 1])).astype(np.int8)
    y0 = 3.0 * X[:, 0] - 3.0 * X[:, 1] + rng.normal(size=n)
    y1 = 5.0 + 5.0 * X[:, 0] + X[:, 1] + rng.normal(size=n)
    return X, t, np.where(t == 1, y1, y0)


@pytest.mark.parametrize("estimand", ["ate", "att"])
def test_abadie_imbens_2016_correction_brings_the_se_to_the_monte_carlo_spread(estimand):
    """Seeded (deterministic). Measured with 300 replications at n = 500 and 2000: ATE sd 0.134,
    AI-2006 SE 0.176 (99.7% coverage), corrected SE 0.142 (95.7%); here 120 replications at n = 500."""
    from collabcausal.estimators import LogisticPropensity

    rng = np.random.default_rng(11)
    estimates, known, corrected = [], [], []
    for _ in range(120):
        X, t, y = _abadie_imbens_dgp(rng, 500)
        e = LogisticPropensity().fit(X, t).predict_propensity(X)
        plain = psm(y, t, e, estimand)
        adjusted = psm(y, t, e, estimand, X_propensity=X)
        assert adjusted.estimate == plain.estimate
        assert adjusted.diagnostics["se_kind"] == "propensity estimated (Abadie-Imbens 2016)"
        estimates.append(plain.estimate)
        known.append(plain.se)
        corrected.append(adjusted.se)
    spread = np.std(estimates)
    assert np.mean(corrected) == pytest.approx(spread, rel=0.12)
    if estimand == "ate":  # the ATE correction is never positive (Abadie & Imbens 2016, Theorem 1)
        assert np.all(np.array(corrected) <= np.array(known))
        assert np.mean(known) > 1.15 * spread


def test_abadie_imbens_2016_se_does_not_depend_on_row_order():
    from collabcausal.estimators import LogisticPropensity

    rng = np.random.default_rng(3)
    X, t, y = _abadie_imbens_dgp(rng, 300)
    X = np.round(X, 1)  # coarse covariates: many tied propensities
    e = LogisticPropensity().fit(X, t).predict_propensity(X)
    for estimand in ("ate", "att"):
        first = psm(y, t, e, estimand, X_propensity=X)
        for k in range(5):
            p = np.random.default_rng(50 + k).permutation(t.size)
            again = psm(y[p], t[p], e[p], estimand, X_propensity=X[p])
            assert again.se == pytest.approx(first.se, rel=1e-9)


def test_psm_influence_is_the_linear_representation_with_matches_fixed():
    rng = np.random.default_rng(4)
    X, t, y = _abadie_imbens_dgp(rng, 200)
    e = np.clip(0.5 + 0.3 * X[:, 0], 0.05, 0.95)
    for estimand in ("ate", "att"):
        est = psm(y, t, e, estimand)
        w = est.diagnostics["match_weights"]
        coef = np.where(t == 1, 1.0, -1.0) * w / (t.size if estimand == "ate" else t.sum())
        assert coef @ y == pytest.approx(est.estimate, rel=1e-12)
        assert est.diagnostics["influence"].mean() == pytest.approx(0.0, abs=1e-10)


def test_the_packed_key_sort_is_the_stable_argsort():
    from collabcausal.estimators.matching import _argsort_ties_by_index

    rng = np.random.default_rng(12)
    cases = [
        rng.random(5000),
        rng.integers(-5, 5, 3000) / 3.0,  # many ties, negative scores
        0.5 + rng.integers(0, 50, 3000) * np.spacing(0.5),  # distinct scores agreeing in their leading bits
        rng.normal(size=2000) * 10.0 ** rng.integers(-300, 300, 2000),
        np.array([0.0, -0.0, 0.0, -0.0, 1.0]),
        np.array([0.25]),
    ]
    for scores in cases:
        order, s = _argsort_ties_by_index(scores)
        np.testing.assert_array_equal(order, np.argsort(scores, kind="stable"))
        np.testing.assert_array_equal(s, scores[order])
