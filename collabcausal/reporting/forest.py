"""The report's forest plot and section for ``dp_effects`` effect modification (docs/dp-cate-projection.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from collabcausal.reporting.figures import _pyplot, to_svg


def forest_plot(labels: Sequence[str], estimates: Sequence[float], low: Sequence[float], high: Sequence[float], *,
                title: str, xlabel: str):
    """One row per estimate: a marker at the estimate and a line over its interval; a dashed line at 0."""
    plt = _pyplot()
    k = len(labels)
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + 0.38 * k))
    y = list(range(k))[::-1]
    for yi, e, lo, hi in zip(y, estimates, low, high, strict=True):
        ax.plot([lo, hi], [yi, yi], color="C0", lw=1.6)
        ax.plot([e], [yi], "s", color="C0", ms=5)
    ax.axvline(0.0, color="grey", ls="--", lw=0.8)
    ax.set_yticks(y, list(labels))
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def effect_modification_rows(section: Mapping[str, Any] | None) -> list[tuple[str, float, float, float, float]]:
    """(label, estimate, 95% low, high, DP noise share) of each projection coefficient and estimated subgroup effect
    of report.json's ``effect_modification`` (docs/dp-cate-projection.md); none without the section."""
    if not section:
        return []
    rows = [(f"slope: {c['name']} (per half range)" if c["name"] != "intercept" else "projection at the midpoints",
             c["estimate"], c["ci_low"], c["ci_high"], c["noise_share"]) for c in section.get("coefficients", [])]
    return rows + [(s["subgroup"], s["estimate"], s["ci_low"], s["ci_high"], s["noise_share"])
                   for s in section.get("subgroups", []) if s.get("estimate") is not None]


def effect_modification_section(section: Mapping[str, Any] | None,
                                privacy: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """HTML: the forest plot of the modifier coefficients and subgroup effects, the eps spent, the noise shares."""
    rows = effect_modification_rows(section)
    if not rows or section is None:
        return []
    fig = forest_plot([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
                      title="Effect modification: projection coefficients and subgroup effects",
                      xlabel="effect (outcome units)")
    joint = " simultaneous over the subgroups (Bonferroni)" if section.get("simultaneous") == "bonferroni" else ""
    spent = ", ".join(f"{p}: eps {s['epsilon']:.4g}" for p, s in (privacy or {}).items())
    caption = (f"Squares: estimates; lines: 95% intervals{joint}, carrying sampling, DP noise, the noise in the "
               "variance terms and the nuisance-noise replicates. Every number is post-processing of the same "
               f"two releases per party as the ATE ({spent or 'see the privacy table'}); the modifiers and subgroups "
               f"raised the noise sd of every score sum {section.get('noise_growth', 1.0):.2f}-fold.")
    table = "".join(f"<tr><td>{escape(str(r[0]))}</td><td class=\"num\">{r[1]:.4g}</td><td class=\"num\">"
                    f"[{r[2]:.4g}, {r[3]:.4g}]</td><td class=\"num\">{r[4]:.3g}</td></tr>" for r in rows)
    return ["<h2>Effect modification (differentially private)</h2>",
            f"<figure>{to_svg(fig)}<figcaption>{escape(caption)}</figcaption></figure>",
            "<table><tr><th></th><th>estimate</th><th>95% interval</th><th>DP noise share</th></tr>"
            f"{table}</table>"]
