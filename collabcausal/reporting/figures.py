"""The report's figures: Love plot, propensity overlap, bootstrap distributions.

Every figure has a title, labelled axes with units and a legend outside the data. Figures are
returned as matplotlib Figures; :func:`to_svg` turns one into inline SVG for the HTML report
(glyphs as paths, so the file needs no fonts or network access to view).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np

from collabcausal.estimators.balance import SMD_THRESHOLD

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def love_plot(
    covariates: Sequence[str],
    unweighted: Sequence[float],
    weighted: Mapping[str, Sequence[float]],
    *,
    title: str,
    unweighted_sd: Sequence[float] | None = None,
    weighted_sd: Mapping[str, Sequence[float]] | None = None,
):
    """|SMD| per covariate before (unweighted) and after weighting, one marker per weighting.

    With DP balance moments, ``unweighted_sd`` and ``weighted_sd`` (same keys as ``weighted``) give
    each SMD's DP noise sd, drawn as horizontal error bars of +- one sd.

    Parameters
    ----------
    covariates : sequence of str
    unweighted : sequence of float
        |SMD| of the raw sample (paper 003, eq. 42).
    weighted : mapping of label to sequence of float
        |SMD| of each balanced sample (eqs. 43-44), e.g. ``{"W-clb PSM": [...]}``.
    title : str
    """
    plt = _pyplot()
    k = len(covariates)
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.38 * k))
    y = np.arange(k)
    ax.scatter(np.abs(unweighted), y, marker="o", facecolors="none", edgecolors="black", s=46, label="unweighted")
    _error_bars(ax, unweighted, unweighted_sd, y, "black")
    for i, (label, values) in enumerate(weighted.items()):
        ax.scatter(np.abs(values), y, marker=MARKERS[(i + 1) % len(MARKERS)], s=34, color=f"C{i}", label=label)
        _error_bars(ax, values, None if weighted_sd is None else weighted_sd.get(label), y, f"C{i}")
    ax.axvline(SMD_THRESHOLD, color="grey", ls="--", lw=1, label=f"|SMD| = {SMD_THRESHOLD}")
    ax.set_yticks(y, list(covariates))
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel("absolute standardized mean difference |SMD| (pooled SDs, unitless)")
    ax.set_ylabel("covariate")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def _error_bars(ax, values: Sequence[float], sd: Sequence[float] | None, y, color: str) -> None:
    """+- one DP noise sd around |SMD| (nothing for exact moments; a non-finite sd draws no bar)."""
    if sd is None:
        return
    ax.errorbar(np.abs(values), y, xerr=np.asarray(sd, dtype=float), fmt="none", ecolor=color, elinewidth=1,
                capsize=2, alpha=0.7)


def overlap_plot(histograms: Mapping[str, Mapping[str, Sequence[float]]], *, title: str):
    """Propensity score histograms by arm, one panel per setting.

    Parameters
    ----------
    histograms : mapping of setting to {"edges", "treated", "control"}
        Bin edges on [0, 1] and subject counts per bin and arm.
    title : str
    """
    plt = _pyplot()
    names = list(histograms)
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.7 * rows + 0.6), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        h = histograms[name]
        edges = np.asarray(h["edges"], dtype=float)
        widths, lefts = np.diff(edges), edges[:-1]
        for arm, color in (("control", "C0"), ("treated", "C1")):
            counts = np.asarray(h[arm], dtype=float)
            share = counts / max(counts.sum(), 1.0)
            label = f"{arm} (n={int(counts.sum())})"
            ax.bar(lefts, share, width=widths, align="edge", alpha=0.55, color=color, label=label)
        ax.set_title(name, fontsize=10)
        ax.set_xlim(0, 1)
        ax.set_xlabel("propensity score P(T=1 | x)")
        ax.set_ylabel("share of arm's subjects")
        ax.legend(fontsize=7, loc="upper center", frameon=False)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def bootstrap_plot(
    replicates: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    estimand: str,
    unit: str,
    benchmark: float | None = None,
    n_boot: int | None = None,
):
    """Bootstrap distributions of the estimate, one panel per estimator, one box per setting.

    Parameters
    ----------
    replicates : mapping of estimator to mapping of setting to replicate estimates
    estimand : str
        "ate" or "att", for the axis label.
    unit : str
        The outcome's unit, for the axis label (e.g. "$1000").
    benchmark : float, optional
        Drawn as a dashed line (the true or experimental effect).
    n_boot : int, optional
        Replicates requested, for the title.
    """
    plt = _pyplot()
    estimators = list(replicates)
    fig, axes = plt.subplots(1, len(estimators), figsize=(5.2 * len(estimators), 4.4), squeeze=False)
    for ax, estimator in zip(axes[0], estimators, strict=True):
        settings = list(replicates[estimator])
        data = [np.asarray(replicates[estimator][s], dtype=float) for s in settings]
        data = [d[np.isfinite(d)] if np.isfinite(d).any() else np.array([np.nan]) for d in data]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, len(settings) + 1), settings, rotation=45, ha="right")
        if benchmark is not None:
            ax.axhline(benchmark, color="tab:red", ls="--", lw=1, label=f"benchmark {benchmark:.3g}")
            ax.legend(loc="best", fontsize=8)
        ax.set_xlabel("setting (parties whose data the estimate uses)")
        ax.set_ylabel(f"{estimand.upper()} estimate ({unit})")
        reps = f"{n_boot} bootstrap replicates" if n_boot else "bootstrap replicates"
        ax.set_title(f"{estimator.upper()}: {estimand.upper()} over {reps}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def to_svg(fig) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog); closes the figure."""
    plt = _pyplot()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]
