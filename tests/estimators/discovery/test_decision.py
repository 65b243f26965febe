"""A direction only when the evidence names one: "undecided" inside the noise or when both residuals agree."""

from __future__ import annotations

import numpy as np
import pytest

from collabcausal.estimators.discovery.anm import AdditiveNoiseModel
from collabcausal.estimators.discovery.decision import (
    UNDECIDED,
    exact_decision,
    gaussian_probability,
    independence_decision,
    noisy_decision,
    release_probability,
)
from collabcausal.estimators.discovery.scores import hsic_pvalue


def test_the_issue_s_margin_inside_the_noise_is_undecided_with_its_probability() -> None:
    # simulate discovery --rows 4 --pairs age,re74 --epsilon 1: margin -141 against a noise sd of 170
    decision = noisy_decision(-141.0, gaussian_probability(-141.0, 170.0))
    assert decision.direction == UNDECIDED and decision.favoured == "y->x"
    assert decision.probability == pytest.approx(0.7966, abs=1e-4)
    assert decision.label("age", "re74") == "undecided (re74 -> age more likely, probability 0.80)"
    sure = noisy_decision(400.0, gaussian_probability(400.0, 170.0))
    assert sure.direction == "x->y" and sure.label("age", "re74") == "age -> re74 (probability 0.99)"


def test_a_release_s_probability_is_the_chance_its_laplace_noise_stays_below_the_margin() -> None:
    # two scores with Lap(b) each: P(L1 - L2 < |margin|), checked by seeded simulation
    rng = np.random.default_rng(3)
    b, margin = 2.0, 3.0
    noise = rng.laplace(0, b, 400_000) - rng.laplace(0, b, 400_000)
    assert release_probability(margin, b) == pytest.approx(np.mean(noise < margin), abs=3e-3)
    assert release_probability(-margin, b) == release_probability(margin, b)
    assert release_probability(0.1, None) == 1.0  # an exact (noise-free) release decides


def test_the_exact_test_decides_only_when_exactly_one_direction_s_residuals_are_independent() -> None:
    assert independence_decision(0.4, 1e-6, 0.001, 0.006).direction == "x->y"
    assert independence_decision(1e-6, 0.4, 0.006, 0.001).direction == "y->x"
    assert independence_decision(0.4, 0.3, 0.002, 0.001).direction == UNDECIDED  # independent columns
    assert independence_decision(1e-3, 1e-6, 0.002, 0.001).direction == UNDECIDED  # neither fits
    assert independence_decision(0.4, 0.3, 0.002, 0.001).favoured == "y->x"


def test_hsic_pvalues_are_uniform_under_independence_and_tiny_under_dependence() -> None:
    rng = np.random.default_rng(11)
    p = np.array([hsic_pvalue(rng.uniform(-1, 1, 150), rng.uniform(-1, 1, 150), width_a=0.3, width_b=0.3)
                  for _ in range(200)])
    assert 0.02 <= np.mean(p < 0.05) <= 0.09 and 0.4 <= np.mean(p) <= 0.6
    x = rng.uniform(-1, 1, 150)
    assert hsic_pvalue(x, x**2 + 0.1 * rng.normal(size=150), width_a=0.3, width_b=0.3) < 1e-10


def test_the_exact_model_names_the_cause_of_an_anm_pair_and_no_direction_for_independent_columns() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 100, 600)
    y = 4 * np.tanh((x - 50) / 25) + rng.normal(0, 0.5, 600)
    model = AdditiveNoiseModel(x_bounds=(0, 100), y_bounds=(-5, 5), random_state=0).fit(x, y)
    assert exact_decision(model).direction == "x->y"
    u, v = rng.uniform(0, 100, 600), rng.normal(size=600)
    model = AdditiveNoiseModel(x_bounds=(0, 100), y_bounds=(-5, 5), random_state=0).fit(u, v)
    assert exact_decision(model).direction == UNDECIDED
