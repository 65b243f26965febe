"""collabcausal.simulations.dp_effects_replicate_check: the nuisance-noise term beside the variance it estimates."""

from __future__ import annotations

import numpy as np

from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.scores import components, subject_scores
from collabcausal.simulations import dp_effects_replicate_check as check
from collabcausal.simulations.cohort_design import COHORT_DESIGN, cohort_sites
from collabcausal.simulations.dp_effects_benchmark import study_spec


def _check(clip: float | None = None, monkeypatch=None) -> check.ReplicateCheck:
    if clip is not None:
        monkeypatch.setattr(check, "REPLICATE_CLIP", clip)
    sites = cohort_sites(2000, np.random.default_rng(0))
    return check.replicate_check(sites, study_spec(COHORT_DESIGN, 1.0, secure_aggregation=True),
                                 np.random.default_rng(1), draws=5)


def test_figures_are_consistent_with_each_other():
    result = _check()
    assert result.conditional_var > 0.0
    assert 0.0 < result.clip_share < 1.0  # n = 2000 at eps 1: the clip changes some differences, not all
    assert result.replicate_ms >= result.mean_move**2  # a mean square bounds the squared mean


def test_a_clip_wider_than_every_difference_changes_nothing(monkeypatch):
    result = _check(clip=1.0, monkeypatch=monkeypatch)  # c = the score's whole range: no difference reaches it
    assert result.clip_share == 0.0
    assert result.replicate_ms == result.replicate_ms_unclipped
    assert result.antithetic == result.antithetic_unclipped


def test_the_antithetic_term_keeps_each_pairs_half_difference_and_drops_the_even_part():
    """Moves ``(s + d_k, s - d_k)`` (a pair shares the even part ``s``): the term is ``mean d_k^2``, whatever ``s``."""
    half = np.array([0.5, -2.0, 1.0])
    even = np.array([3.0, 7.0, -4.0])
    moves = np.ravel(np.column_stack([even + half, even - half]))
    assert check.antithetic_term(moves) == np.mean(half**2)
    assert np.mean(moves**2) == np.mean(half**2) + np.mean(even**2)  # what a plain mean square would add


def test_the_redesigns_figures_are_finite_and_non_negative():
    result = _check()
    assert len(result.noisy_terms) == len(check.CLIP_FRACTIONS)
    assert all(np.isfinite(t) and t >= 0.0 for t in (*result.noisy_terms, result.first_order, result.first_order_noisy))
    assert result.first_order > 0.0  # the study's model is noisy: the estimate moves with its coefficients


def test_gradient_range_bounds_every_subjects_score_gradient():
    """Central differences of each subject's AIPW-ATE score in the three models' coefficients stay within the range."""
    spec = study_spec(COHORT_DESIGN, 1.0, secure_aggregation=True)
    sites = cohort_sites(400, np.random.default_rng(3))
    fm = FeatureMap(spec.bounds, spec.outcome_range, len(sites))
    parts = components(("aipw",), ("ate",), fm.outcome_width, spec.trim)[:1]
    rng = np.random.default_rng(4)
    dim = fm.dim
    theta = rng.normal(0.0, 0.3, 3 * dim)

    def per_subject(t: np.ndarray) -> np.ndarray:
        model = NuisanceModel(t[:dim], (t[dim:2 * dim], t[2 * dim:]))
        return np.concatenate([
            subject_scores(parts, s.T, fm.centred_outcome(s.Y), model.propensity(fm.design(s.X, i), spec.trim),
                           model.outcome(fm.design(s.X, i), 0, fm), model.outcome(fm.design(s.X, i), 1, fm))[:, 0]
            for i, s in enumerate(sites)])

    step = 1e-6
    gradients = np.array([(per_subject(theta + e) - per_subject(theta - e)) / (2 * step)
                          for e in np.eye(3 * dim) * step])
    norms = np.linalg.norm(gradients, axis=0)
    assert norms.max() > 0.0
    assert norms.max() <= check.gradient_range(fm, spec.trim) * (1 + 1e-6)
