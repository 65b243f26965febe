"""Baselines printed beside every CATE result: a constant effect and the non-private EconML learner.

A CATE learner is only worth its heterogeneity if it beats predicting one number everywhere:

* the **true ATE** as a constant: sqrt(PEHE) = sd(tau), the best any constant can do;
* the learner's **own ATE** as a constant: sqrt(PEHE) = sqrt(sd(tau)^2 + (ATE^ - ATE)^2), i.e. what
  publishing only the learner's average would have scored on the same data;

and it should be read against a well-known non-private peer on the same data: EconML's learner of
the same kind (S, T, X, DR, or the R-learner as ``NonParamDML``) with the same base models.
EconML is a development dependency (``pip install -e ".[dev]"``).

Tables report the mean, the standard deviation and the range over replications x seeds, and how
many cells beat each constant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import LogisticRegression

from collabcausal.errors import ConfigError, InputError

PEERS = ("S", "T", "X", "DR", "R")


def constant_ate_pehe(tau: ArrayLike, ate_hat: float | None = None) -> float:
    """sqrt(PEHE) of predicting one number everywhere: the true ATE (default) or ``ate_hat``."""
    t = np.asarray(tau, dtype=float)
    level = float(t.mean()) if ate_hat is None else float(ate_hat)
    return float(np.sqrt(np.mean((t - level) ** 2)))


def gradient_boosting(seed: int) -> GradientBoostingRegressor:
    """The base regressor of the IHDP and EconML rows (100 trees of depth 3)."""
    return GradientBoostingRegressor(n_estimators=100, max_depth=3, random_state=seed)


def peer_of(learner: str) -> str:
    """The EconML learner compared with ``learner`` ("DP-EBM DR" -> "DR", "DP-CATE R linear" -> "R")."""
    words = learner.split()
    kind = words[0] if words[0] in PEERS else words[1]
    if kind not in PEERS:
        raise InputError(f"no EconML peer for learner {learner!r}", f"name a learner of kind {', '.join(PEERS)}")
    return kind


def econml_learner(kind: str, seed: int):
    """EconML's non-private learner of ``kind`` with gradient-boosting base models and logistic propensity.

    DR and R cross-fit on 2 folds (EconML stratifies them on T) with propensities clipped at 0.01,
    the settings of collabcausal's own DR and R learners.
    """
    try:
        from econml.dml import NonParamDML
        from econml.dr import DRLearner
        from econml.metalearners import SLearner, TLearner, XLearner
    except ImportError as exc:
        raise ConfigError(f"the EconML baseline needs econml ({exc})", 'install it: pip install -e ".[dev]"') from exc
    logit = LogisticRegression(max_iter=1000)
    gb = gradient_boosting(seed)
    if kind == "S":
        return SLearner(overall_model=gb)
    if kind == "T":
        return TLearner(models=gb)
    if kind == "X":
        return XLearner(models=gb, propensity_model=logit)
    if kind == "DR":
        return DRLearner(model_propensity=logit, model_regression=gb, model_final=gradient_boosting(seed), cv=2,
                         min_propensity=0.01, random_state=seed)
    if kind == "R":
        return NonParamDML(model_y=gb, model_t=logit, model_final=gradient_boosting(seed), discrete_treatment=True,
                           cv=2, random_state=seed)
    raise InputError(f"unknown EconML peer {kind!r}", f"use one of {', '.join(PEERS)}")


def econml_effect(kind: str, Y: ArrayLike, T: ArrayLike, X: ArrayLike, seed: int) -> NDArray[np.float64]:
    """tau^ at the training units from :func:`econml_learner` (within-sample, like the IHDP rows)."""
    model = econml_learner(kind, seed).fit(np.asarray(Y, float), np.asarray(T, int), X=np.asarray(X, float))
    return np.asarray(model.effect(np.asarray(X, float)), dtype=float).ravel()


def _cell(values: pd.Series) -> str:
    v = values.dropna()
    if v.empty:
        return "—"
    if len(v) == 1:
        return f"{v.iloc[0]:.3g}"
    return f"{v.mean():.3g} ({v.std(ddof=1):.2g}) [{v.min():.3g}–{v.max():.3g}]"


def _wins(score: pd.Series, constant: pd.Series) -> int:
    """Cells strictly better than the constant; a tie within 1e-9 (relative) is not a win.

    A constant prediction (e.g. the additive DP-EBM S-learner's) scores exactly its own-ATE
    constant up to rounding, which must not count as beating it.
    """
    return int((score < constant * (1.0 - 1e-9)).sum())


def baseline_summary(rows: pd.DataFrame, keys: Sequence[str], metric: str = "sqrt_pehe") -> pd.DataFrame:
    """Per ``keys`` group: mean (sd) [min–max] of the learner and its baselines, and the win counts.

    ``rows`` has one row per (replication or repetition, seed, learner, ...) with the columns
    ``metric`` (lower is better), ``econml_<metric>``, ``const_true_<metric>``,
    ``const_own_<metric>`` and optionally ``clipped_outcomes`` (share) and ``note``. Refused cells
    (metric NaN) count as losses.
    """
    peer, true, own = (f"{p}_{metric}" for p in ("econml", "const_true", "const_own"))
    out = []
    for key, g in rows.groupby(list(keys), sort=False, dropna=False):
        ok = g.dropna(subset=[metric])
        record = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        record.update({
            "cells": len(g),
            metric: _cell(g[metric]),
            "econml_peer": _cell(g[peer]),
            "const_true_ate": _cell(g[true]),
            "const_own_ate": _cell(g[own]),
            "beats_true_const": f"{_wins(ok[metric], ok[true])}/{len(g)}",
            "beats_own_const": f"{_wins(ok[metric], ok[own])}/{len(g)}",
        })
        if "clipped_outcomes" in g:
            worst = g["clipped_outcomes"].max()
            record["max_clipped_outcomes"] = "—" if np.isnan(worst) else f"{100 * worst:.1f}%"
        if "note" in g:
            notes = [n for n in g["note"].dropna() if n]
            record["note"] = f"refused in {len(notes)}/{len(g)} cells, e.g. {notes[0]}" if notes else ""
        out.append(record)
    return pd.DataFrame(out)


def to_markdown(summary: pd.DataFrame) -> str:
    """A GitHub markdown table of :func:`baseline_summary` (no extra dependency)."""
    cols = [c for c in summary.columns if not (c == "note" and not summary[c].astype(bool).any())]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for rec in summary[cols].itertuples(index=False):
        lines.append("| " + " | ".join("—" if (isinstance(v, float) and np.isinf(v)) else f"{v}" for v in rec) + " |")
    return "\n".join(lines)
