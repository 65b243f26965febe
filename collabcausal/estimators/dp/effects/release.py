"""What one party computes from its own rows for ``dp_effects``, before noise (docs/dp-effects.md).

Two releases, each a function of the party's rows with a public bound on how far substituting one
record moves it:

1. :func:`party_statistics`: the per-arm sufficient statistics of each fold (``K`` vectors, one per
   fold; each record is in one fold, so the K releases compose in parallel), released with their outcome
   cross sums weighted (:func:`released_statistics`);
2. :func:`party_score_sums`: given the nuisance model of each fold, fitted from the OTHER folds'
   released statistics (post-processing), the sums of bounded scores over all rows, and for each
   noise replicate (refits on re-noised statistics, :mod:`.scores`) the sums of the clipped
   differences it makes. One subject moves each sum by at most its own value's range: the models
   do not depend on its row except through the first, already private, release (adaptive
   composition).

Both are exact here; the caller adds noise (:mod:`collabcausal.estimators.dp.mechanisms`) or masks a
noisy share for secure aggregation, after charging the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.scores import (
    Component,
    release_weights,
    replicate_differences,
    subject_scores,
)
from collabcausal.estimators.dp.effects.statistics import fold_statistics, statistics_weights
from collabcausal.estimators.validation import check_treatment


def party_statistics(
    X: ArrayLike, treatment: ArrayLike, outcome: ArrayLike, feature_map: FeatureMap, site: int,
    folds: NDArray[np.integer], n_folds: int,
) -> NDArray[np.float64]:
    """Exact per-fold statistics, shape ``(n_folds, statistics_length(d))``.

    A sum over rows: the statistics of a table are the sum of its row blocks' (each block with its
    rows' fold labels), which is how a party reading its table out of core computes them.
    """
    D = feature_map.design(X, site)
    t = check_treatment(treatment, "treatment", n=D.shape[0], both_arms=False)
    y = feature_map.centred_outcome(outcome)
    return np.stack([
        fold_statistics(D[folds == k], t[folds == k], y[folds == k], feature_map.outcome_width)
        for k in range(n_folds)
    ])


def released_statistics(
    X: ArrayLike, treatment: ArrayLike, outcome: ArrayLike, feature_map: FeatureMap, site: int,
    folds: NDArray[np.integer], n_folds: int, cross_weight: float,
) -> NDArray[np.float64]:
    """What the statistics release noises: :func:`party_statistics` with each fold's cross sums weighted by
    ``cross_weight`` (:func:`~.statistics.statistics_weights`); its L2 sensitivity is
    ``statistics_sensitivity(feature_map, cross_weight)``."""
    weights = statistics_weights(feature_map.dim, cross_weight)
    return party_statistics(X, treatment, outcome, feature_map, site, folds, n_folds) * weights


def party_score_sums(
    X: ArrayLike, treatment: ArrayLike, outcome: ArrayLike, feature_map: FeatureMap, site: int,
    folds: NDArray[np.integer], models: Sequence[NuisanceModel], parts: Sequence[Component], trim: float,
    replicates: Sequence[Sequence[NuisanceModel]] = (),
) -> NDArray[np.float64]:
    """Exact sums of the ``parts`` over all rows, each fold scored with its own model.

    ``replicates[b][k]`` is fold ``k``'s model of noise replicate ``b``; the replicate parts of copy
    ``b`` (:func:`~.scores.replicate_components`) sum the clipped differences it makes. A sum over
    rows, like :func:`party_statistics` (a block may lack a fold; a fold label without a model is
    refused).
    """
    D = feature_map.design(X, site)
    t = check_treatment(treatment, "treatment", n=D.shape[0], both_arms=False)
    y = feature_map.centred_outcome(outcome)
    if (folds.size and int(folds.max()) >= len(models)) or any(len(r) != len(models) for r in replicates):
        raise InputError(f"{len(models)} nuisance models for {int(folds.max()) + 1} folds (or a replicate with "
                         "another number)", "send one model per fold, in each replicate too")
    base = [c for c in parts if c.of is None]
    base_at = [j for j, c in enumerate(parts) if c.of is None]
    copies = [[j for j, c in enumerate(parts) if c.copy == b] for b in range(len(replicates))]
    if sum(map(len, copies)) + len(base) != len(parts):
        raise InputError(f"{len(parts) - len(base)} replicate sums for {len(replicates)} replicates",
                         "send as many replicate models as the release's replicate sums name")
    total = np.zeros(len(parts))
    for k, model in enumerate(models):
        rows = folds == k
        Dk, tk, yk = D[rows], t[rows], y[rows]

        def score(m: NuisanceModel, Dk=Dk, tk=tk, yk=yk) -> NDArray[np.float64]:
            return subject_scores(base, tk, yk, m.propensity(Dk, trim), m.outcome(Dk, 0, feature_map),
                                  m.outcome(Dk, 1, feature_map))

        at_model = score(model)
        total[base_at] += at_model.sum(axis=0)
        for b, replicate in enumerate(replicates):
            moved = replicate_differences(base, [parts[j] for j in copies[b]], at_model, score(replicate[k]))
            total[copies[b]] += moved.sum(axis=0)
    return total


def scaled_sums(sums: ArrayLike, parts: Sequence[Component]) -> NDArray[np.float64]:
    """``s_j w_j / r_j``: the vector whose L2 sensitivity is :func:`~.scores.release_sensitivity`."""
    widths = np.array([c.width for c in parts])
    return np.asarray(sums, dtype=float) * release_weights(parts) / widths


def unscaled_noise_sd(sigma: float, parts: Sequence[Component]) -> NDArray[np.float64]:
    """Noise sd of each sum in its own units when the scaled vector carries ``N(0, sigma^2)``."""
    widths = np.array([c.width for c in parts])
    return float(sigma) * widths / release_weights(parts)
