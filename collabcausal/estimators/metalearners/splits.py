"""Sample-splitting plans for two-stage CATE learners: cross-fitting and disjoint splits.

A plan is a tuple of :class:`Round` objects. In each round every nuisance model is trained on its
own index set and predicts on the round's evaluation set; the final (second-stage) model is then
trained on the union of the evaluation sets. Cross-fitting (Chernozhukov et al. 2018) uses k
rounds, each training every nuisance on the complement of one fold; the disjoint split of paper 000
(Algorithm 1) uses one round whose nuisance sets and evaluation set partition the sample, which
is what makes parallel composition of differential privacy apply.

Cross-fitting folds are stratified on the treatment, as EconML's are (scikit-learn's
``StratifiedKFold(k, shuffle=True, random_state=seed)`` split on T: the same integer seed gives
EconML's folds). The disjoint split is deliberately *not* stratified: a stratified partition moves
other subjects between parts when one subject's T is substituted, which breaks the parallel
composition argument; a uniform partition of the public n does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.model_selection import KFold, StratifiedKFold

from collabcausal.errors import InputError
from collabcausal.randomness import SeedLike, as_generator

MIN_SPLIT_SIZE = 10


@dataclass(frozen=True)
class Round:
    """One round of a plan.

    Attributes
    ----------
    train : dict of str to ndarray
        Row indices each nuisance model (by name) is trained on.
    evaluate : ndarray
        Row indices the nuisances predict on (the second stage's training rows).
    """

    train: dict[str, NDArray[np.intp]]
    evaluate: NDArray[np.intp]


def _check_size(size: int, what: str) -> None:
    if size < MIN_SPLIT_SIZE:
        raise InputError(
            f"the {what} would hold {size} subjects (fewer than {MIN_SPLIT_SIZE})",
            "pass more subjects or use fewer folds / larger split fractions",
        )


def sklearn_seed(seed: SeedLike) -> int:
    """An integer seed for scikit-learn splitters: an int is kept (EconML parity), else drawn from ``seed``."""
    if isinstance(seed, Integral) and not isinstance(seed, bool):
        return int(seed)
    return int(as_generator(seed).integers(2**32))


def cross_fit_plan(
    n: int, nuisances: Sequence[str], folds: int, seed: SeedLike = None, strata: ArrayLike | None = None
) -> tuple[Round, ...]:
    """k-fold cross-fitting: nuisances trained on k-1 folds predict on the remaining fold.

    ``folds=1`` means no split: nuisances are trained and evaluated on the whole sample. With
    ``strata`` (the treatment, for the learners) the folds are scikit-learn's
    ``StratifiedKFold(folds, shuffle=True, random_state=seed)``, EconML's choice for a discrete
    treatment: every fold holds each arm in proportion, so no nuisance is trained on one arm only.
    Without ``strata`` they are ``KFold(folds, shuffle=True, random_state=seed)``.
    """
    if not isinstance(folds, Integral) or isinstance(folds, bool) or folds < 1:
        raise InputError(f"folds must be a positive integer, got {folds!r}", "pass e.g. folds=2")
    if folds == 1:
        everyone = np.arange(n)
        _check_size(n, "sample")
        return (Round({name: everyone for name in nuisances}, everyone),)
    _check_size(n // folds, f"fold of a {folds}-fold cross-fit over {n} subjects")
    rows = np.zeros((n, 1))
    if strata is None:
        splits = KFold(int(folds), shuffle=True, random_state=sklearn_seed(seed)).split(rows)
    else:
        labels = np.asarray(strata).reshape(-1)
        if labels.size != n:
            raise InputError(f"strata has {labels.size} entries for {n} subjects", "pass one label per subject")
        values, counts = np.unique(labels, return_counts=True)
        if counts.min() < folds:
            raise InputError(
                f"stratum {values[counts.argmin()]!r} has {int(counts.min())} subjects, fewer than the {folds} folds",
                "use fewer folds (cv) or more subjects in every treatment arm",
            )
        splits = StratifiedKFold(int(folds), shuffle=True, random_state=sklearn_seed(seed)).split(rows, labels)
    return tuple(Round({name: train for name in nuisances}, held) for train, held in splits)


def disjoint_plan(
    n: int, nuisances: Sequence[str], fractions: Sequence[float], seed: SeedLike = None
) -> tuple[Round, ...]:
    """A uniformly random partition into one set per nuisance plus the second-stage set.

    Paper 000, Algorithm 2 step 1: sizes ``fractions[i] * n`` (the last fraction is the second
    stage's share lambda_2); every subject lands in exactly one set.
    """
    fr = np.asarray(fractions, dtype=float)
    if fr.size != len(nuisances) + 1 or (fr <= 0).any() or not np.isclose(fr.sum(), 1.0):
        raise InputError(
            f"split fractions {tuple(fractions)} must be {len(nuisances) + 1} positive numbers summing to 1",
            f"pass one fraction per nuisance ({', '.join(nuisances)}) and one for the final stage",
        )
    order = as_generator(seed).permutation(n)
    cuts = np.round(np.cumsum(fr)[:-1] * n).astype(int)
    parts = np.split(order, cuts)
    names = [*nuisances, "final stage"]
    for name, part in zip(names, parts, strict=True):
        _check_size(part.size, f"{name} split ({part.size} of {n} subjects)")
    return (Round({name: np.sort(p) for name, p in zip(nuisances, parts, strict=False)}, np.sort(parts[-1])),)


def check_arms(t: ArrayLike, plan: Sequence[Round], needs_both: Sequence[str]) -> None:
    """Refuse a plan in which a nuisance that needs both arms is trained on one.

    A propensity model (and an outcome model taking T as a feature) trained on one arm is undefined
    (a classifier of one class has no P(T = 1 | x)); the learner would crash or extrapolate. Run
    before anything is fitted or charged. The arm counts per split are computed from T: a refusal
    is a function of the data (docs/cate.md, "One-arm splits").

    Raises
    ------
    InputError
        One line naming the treated and control counts of every split of the offending round.
    """
    arms = np.asarray(t).reshape(-1)
    for number, rnd in enumerate(plan):
        parts = {**rnd.train, "final stage": rnd.evaluate}
        counts = {name: (int(np.count_nonzero(arms[idx] == 1)), int(np.count_nonzero(arms[idx] == 0)))
                  for name, idx in parts.items()}
        if all(min(counts[name]) > 0 for name in needs_both):
            continue
        where = f" (round {number + 1} of {len(plan)})" if len(plan) > 1 else ""
        listed = "; ".join(
            f"{name if name == 'final stage' else name + ' split'}: {c[0]} treated, {c[1]} control"
            for name, c in counts.items()
        )
        raise InputError(
            f"a nuisance split holds one treatment arm{where} ({listed}): {', '.join(needs_both)} need both arms",
            "pass more subjects of the smaller arm, or larger split fractions for the nuisances",
        )
