"""Synthetic additive-noise cause-effect pairs, a runner for any folder of pairs, and the
privacy-utility experiment of paper 002 (Figures 1-2).

Accuracy of a private decision is computed exactly from the closed forms, not sampled: for a
Laplace score (test-set privacy) it is Theorem 2's probability that the noise keeps the sign of the
margin (or flips a wrong one); for IQR it is the probability that all four propose-test-release
tests pass times Theorem 4's probability. ``monte_carlo_accuracy`` samples the actual release path
(:func:`collabcausal.estimators.discovery.private_scores.release`) with a seeded numpy Generator
instead of OpenDP: reproducible and fast, NOT a private release, used only to check the closed
forms.

Folder format (:func:`load_pair_folder`): one CSV per pair with columns ``x`` and ``y``, and a
``metadata.csv`` with columns ``pair`` (the CSV's file name, with or without ``.csv``),
``direction`` (``x->y`` or ``y->x``) and an optional ``weight`` (default 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.discovery.agreement import (
    iqr_agreement,
    laplace_agreement,
    margin_agreement,
    pass_probability,
)
from collabcausal.estimators.discovery.anm import X_TO_Y, Y_TO_X, AdditiveNoiseModel, DirectionScores
from collabcausal.estimators.discovery.private_scores import (
    iqr_look_budget,
    laplace_noise_scale,
    release,
    released_scores,
)
from collabcausal.estimators.discovery.propose_test_release import iqr_distances, iqr_threshold
from collabcausal.randomness import child_rng

FUNCTIONS: dict[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]] = {
    "tanh": lambda x: np.tanh(2.0 * x),
    "sin": lambda x: np.sin(2.0 * x),
    "square": lambda x: x**2,
    "cubic": lambda x: x**3 - 2.0 * x,
}
NOISES: dict[str, Callable[[np.random.Generator, int], NDArray[np.float64]]] = {
    "gaussian": lambda rng, n: rng.normal(size=n),
    "uniform": lambda rng, n: rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), n),
    "laplace": lambda rng, n: rng.laplace(scale=1.0 / np.sqrt(2.0), size=n),
}
PRIVATE_SCORES: tuple[str, ...] = ("spearman", "kendall", "hsic", "iqr")
EPSILONS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0)
IQR_DELTA = 1e-6
TRAINING_LAMBDAS: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3, 1.0)
TRAINING_EPSILONS: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0, 10000.0)


@dataclass(frozen=True)
class LabelledPair:
    """A cause-effect pair with its true direction and weight."""

    name: str
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    direction: str
    weight: float = 1.0


def make_anm_pair(
    function: str, noise: str, n: int, rng: np.random.Generator, *, noise_level: float = 0.3, name: str = ""
) -> LabelledPair:
    """``effect = f(cause) + noise_level * sd(f(cause)) * N``, cause ~ N(0, 1); columns randomly swapped.

    Noise laws have unit variance. The returned ``direction`` says which column is the cause.
    """
    if function not in FUNCTIONS or noise not in NOISES:
        raise InputError(f"unknown function {function!r} or noise {noise!r}", f"use {list(FUNCTIONS)}, {list(NOISES)}")
    cause = rng.normal(size=n)
    signal = FUNCTIONS[function](cause)
    effect = signal + noise_level * float(np.std(signal)) * NOISES[noise](rng, n)
    if rng.random() < 0.5:
        return LabelledPair(name or f"{function}-{noise}-{n}", effect, cause, Y_TO_X)
    return LabelledPair(name or f"{function}-{noise}-{n}", cause, effect, X_TO_Y)


def synthetic_pairs(
    n: int,
    *,
    functions: Sequence[str] = tuple(FUNCTIONS),
    noises: Sequence[str] = tuple(NOISES),
    replicates: int = 2,
    seed: int = 0,
) -> list[LabelledPair]:
    """Every (function, noise) combination ``replicates`` times, each from its own seeded stream."""
    return [
        make_anm_pair(f, e, n, child_rng(seed, "anm-pair", f, e, n, r), name=f"{f}-{e}-{n}-{r}")
        for f in functions
        for e in noises
        for r in range(replicates)
    ]


def write_pair_folder(pairs: Iterable[LabelledPair], folder: str | Path) -> Path:
    """Write pairs in the folder format read by :func:`load_pair_folder`."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for pair in pairs:
        pd.DataFrame({"x": pair.x, "y": pair.y}).to_csv(out / f"{pair.name}.csv", index=False)
        rows.append({"pair": f"{pair.name}.csv", "direction": pair.direction, "weight": pair.weight})
    pd.DataFrame(rows).to_csv(out / "metadata.csv", index=False)
    return out


def load_pair_folder(folder: str | Path) -> list[LabelledPair]:
    """Read a folder of pairs (format in the module docstring) with one-line errors."""
    root = Path(folder)
    meta_path = root / "metadata.csv"
    if not meta_path.is_file():
        raise InputError(f"{root}: no metadata.csv", "add metadata.csv with columns pair, direction[, weight]")
    meta = pd.read_csv(meta_path)
    missing = {"pair", "direction"} - set(meta.columns)
    if missing:
        raise InputError(f"{meta_path}: missing column(s) {sorted(missing)}", "columns: pair, direction[, weight]")
    pairs = []
    for row in meta.itertuples(index=False):
        name = str(row.pair)
        path = root / (name if name.endswith(".csv") else f"{name}.csv")
        direction = str(row.direction).replace(" ", "")
        if direction not in (X_TO_Y, Y_TO_X):
            raise InputError(f"{meta_path}: pair {name!r} has direction {row.direction!r}", "use 'x->y' or 'y->x'")
        if not path.is_file():
            raise InputError(f"{meta_path}: pair file {path} does not exist", "fix the pair column")
        frame = pd.read_csv(path)
        if not {"x", "y"} <= set(frame.columns):
            raise InputError(f"{path}: needs columns x and y, has {list(frame.columns)}", "rename the columns")
        weight = float(getattr(row, "weight", 1.0)) if "weight" in meta.columns else 1.0
        if not np.isfinite(weight) or weight < 0:
            raise InputError(f"{meta_path}: pair {name!r} has weight {weight!r}", "use a finite weight >= 0")
        pairs.append(
            LabelledPair(Path(name).stem, frame["x"].to_numpy(float), frame["y"].to_numpy(float), direction, weight)
        )
    if not pairs:
        raise InputError(f"{meta_path} lists no pairs", "add one row per pair")
    return pairs


def private_accuracy(
    model: AdditiveNoiseModel, exact: DirectionScores, truth: str, epsilons: Sequence[float], protect: str = "test",
    form: str = "scores",
) -> NDArray[np.float64]:
    """Exact probability, per epsilon, that the private decision is correct (no answer is wrong).

    ``protect`` ("test", or "both" for HSIC with public bounds) sets the Laplace scores' sensitivity.
    Laplace scores: Theorem 2 with ``sigma = 2 Delta / eps``; their margin alone (``form="margin"``):
    one ``Lap(sigma)`` on the margin, ``1 - exp(-|margin|/sigma)/2``. IQR: product over the four looks of
    the chance that a Dwork-Lei test passes, times Theorem 4 with ``sigma = 12 / eps``.
    """
    eps = np.asarray(epsilons, dtype=np.float64)
    if exact.score == "iqr":
        eps_one, delta_one = iqr_look_budget(eps, IQR_DELTA)
        thresholds = np.array([iqr_threshold(e, delta_one) for e in eps_one])
        answered = np.ones_like(eps)
        for values in (model.x_test_, model.residual_y_, model.y_test_, model.residual_x_):
            first, second = iqr_distances(values)[1]
            p1, p2 = (pass_probability(d, thresholds, eps_one) for d in (first, second))
            answered *= p1 + (1.0 - p1) * p2
        agree = np.array([iqr_agreement(exact.margin, 1.0 / e) for e in eps_one])
    else:
        answered = np.ones_like(eps)
        margin = released_scores(model, exact.score).margin
        agreement = margin_agreement if form == "margin" else laplace_agreement
        agree = np.array([agreement(margin, laplace_noise_scale(exact.score, protect, e, model)) for e in eps])
    return answered * (agree if exact.direction == truth else 1.0 - agree)


def monte_carlo_accuracy(
    model: AdditiveNoiseModel, score: str, truth: str, epsilon: float, draws: int, rng: np.random.Generator
) -> float:
    """Frequency of correct test-set-private decisions over ``draws`` simulated releases (numpy noise)."""
    delta = IQR_DELTA if score == "iqr" else 0.0
    hits = [release(model, score, epsilon=epsilon, delta=delta, rng=rng).direction == truth for _ in range(draws)]
    return float(np.mean(hits))


def evaluate_pairs(
    pairs: Sequence[LabelledPair],
    *,
    scores: Sequence[str] = PRIVATE_SCORES,
    epsilons: Sequence[float] = EPSILONS,
    seed: int = 0,
    model_params: dict | None = None,
) -> pd.DataFrame:
    """One row per (pair, score, epsilon): non-private correctness and private accuracy.

    ``epsilon = inf`` rows hold the non-private result. Each pair gets one seeded train/test split.
    """
    rows = []
    for pair in pairs:
        model = AdditiveNoiseModel(random_state=child_rng(seed, "split", pair.name), **(model_params or {}))
        model.fit(pair.x, pair.y)
        for score in scores:
            exact = model.scores(score)
            base = {"pair": pair.name, "weight": pair.weight, "m": model.m_test_, "score": score}
            rows.append({**base, "epsilon": np.inf, "accuracy": float(exact.direction == pair.direction)})
            if score in PRIVATE_SCORES:
                accuracy = private_accuracy(model, exact, pair.direction, epsilons)
                rows += [{**base, "epsilon": e, "accuracy": float(a)} for e, a in zip(epsilons, accuracy, strict=True)]
    return pd.DataFrame(rows)


def weighted_accuracy(records: pd.DataFrame, by: Sequence[str] = ("m", "score", "epsilon")) -> pd.DataFrame:
    """Weighted mean accuracy per group (weights from the pairs' metadata)."""

    def mean(group: pd.DataFrame) -> float:
        total = group["weight"].sum()
        return float((group["accuracy"] * group["weight"]).sum() / total) if total > 0 else float("nan")

    out = records.groupby(list(by)).apply(mean, include_groups=False).rename("accuracy").reset_index()
    return out


def epsilon_within(summary: pd.DataFrame, points: float = 0.05) -> pd.DataFrame:
    """Per (m, score): non-private accuracy and the smallest grid epsilon within ``points`` of it."""
    rows = []
    for (m, score), group in summary.groupby(["m", "score"]):
        nonprivate = float(group.loc[np.isinf(group["epsilon"]), "accuracy"].iloc[0])
        private = group[np.isfinite(group["epsilon"])].sort_values("epsilon")
        close = private[private["accuracy"] >= nonprivate - points]
        rows.append(
            {
                "m": m,
                "score": score,
                "nonprivate": nonprivate,
                "epsilon_within": float(close["epsilon"].iloc[0]) if len(close) else None,
            }
        )
    return pd.DataFrame(rows)


def training_privacy_curve(
    pairs: Sequence[LabelledPair],
    regularizations: Sequence[float],
    epsilons: Sequence[float],
    *,
    seed: int = 0,
) -> pd.DataFrame:
    """HSIC accuracy under training-set privacy (Theorem 5 bound) per lambda and epsilon (paper 002, Figure 2).

    Each pair's bounds are its own range, standing in for public bounds in this simulation.
    """
    rows = []
    for pair in pairs:
        bounds = {"x_bounds": (pair.x.min(), pair.x.max()), "y_bounds": (pair.y.min(), pair.y.max())}
        for lam in regularizations:
            model = AdditiveNoiseModel(regularization=lam, random_state=child_rng(seed, "split", pair.name), **bounds)
            exact = released_scores(model.fit(pair.x, pair.y), "hsic")
            correct = exact.direction == pair.direction
            for eps in epsilons:
                agree = float(laplace_agreement(exact.margin, laplace_noise_scale("hsic", "train", eps, model)))
                rows.append(
                    {
                        "pair": pair.name,
                        "weight": pair.weight,
                        "m": model.m_test_,
                        "regularization": lam,
                        "epsilon": eps,
                        "accuracy": agree if correct else 1.0 - agree,
                    }
                )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ExperimentResult:
    """Tables of the paper 002 reproduction.

    Attributes
    ----------
    records : DataFrame
        One row per (pair, score, epsilon) with the probability of a correct decision.
    summary : DataFrame
        Mean accuracy per (m, score, epsilon); ``epsilon = inf`` is non-private.
    within : DataFrame
        Per (m, score): non-private accuracy and the smallest epsilon within 5 points of it.
    training : DataFrame
        HSIC under training-set privacy per (m, regularization, epsilon) (Figure 2).
    """

    records: pd.DataFrame
    summary: pd.DataFrame
    within: pd.DataFrame
    training: pd.DataFrame


def run_experiment(
    *,
    quick: bool = False,
    sizes: Sequence[int] = (500, 2000),
    epsilons: Sequence[float] = (*EPSILONS, 20.0, 50.0, 100.0),
    replicates: int = 2,
    seed: int = 0,
) -> ExperimentResult:
    """Accuracy of each private score vs epsilon on synthetic ANM pairs (paper 002, Figures 1-2).

    ``sizes`` are test-set sizes ``m`` (pairs have ``2 m`` rows, split 50/50). ``quick`` uses
    ``m = 100``, two functions, two noise laws and one replicate (a few seconds).
    """
    functions, noises = (("tanh", "sin"), ("gaussian", "uniform")) if quick else (tuple(FUNCTIONS), tuple(NOISES))
    sizes, replicates = ((100,), 1) if quick else (tuple(sizes), replicates)
    records, training = [], []
    for m in sizes:
        pairs = synthetic_pairs(2 * m, functions=functions, noises=noises, replicates=replicates, seed=seed)
        records.append(evaluate_pairs(pairs, epsilons=epsilons, seed=seed))
        training.append(training_privacy_curve(pairs, TRAINING_LAMBDAS, TRAINING_EPSILONS, seed=seed))
    all_records = pd.concat(records, ignore_index=True)
    summary = weighted_accuracy(all_records)
    train = weighted_accuracy(pd.concat(training, ignore_index=True), by=("m", "regularization", "epsilon"))
    return ExperimentResult(all_records, summary, epsilon_within(summary), train)


def run_pair_folder(
    folder: str | Path, *, epsilons: Sequence[float] = EPSILONS, seed: int = 0, scores: Sequence[str] = PRIVATE_SCORES
) -> pd.DataFrame:
    """Weighted accuracy per (score, epsilon) on a folder of pairs (non-private at ``epsilon = inf``)."""
    records = evaluate_pairs(load_pair_folder(folder), scores=scores, epsilons=epsilons, seed=seed)
    return weighted_accuracy(records, by=("score", "epsilon"))
