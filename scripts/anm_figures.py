"""Reproduce paper 002's Figures 1-2 on synthetic ANM pairs (or score any folder of pairs).

Writes under results/anm_pairs/: records.csv (every pair, score, epsilon), summary.csv (mean
probability of the correct direction per m, score, epsilon; epsilon=inf is non-private),
table.md (the accuracy table at m = 500 and 2000), within.csv (smallest epsilon within 5 points of
the non-private accuracy), training.csv, figure1.png (test-set privacy, every score),
figure2.png (HSIC under training-set privacy vs lambda, and with the best lambda) and
results.json.

    .venv/bin/python scripts/anm_figures.py [--quick] [--replicates 2] [--seed 0]
    .venv/bin/python scripts/anm_figures.py --pairs FOLDER   # weighted accuracy on your own pairs
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from collabcausal.simulations.anm_pairs import PRIVATE_SCORES, run_experiment, run_pair_folder


def accuracy_table(summary: pd.DataFrame) -> str:
    """Markdown table: rows (m, score), columns epsilon (inf = non-private)."""
    wide = summary.pivot_table(index=["m", "score"], columns="epsilon", values="accuracy")
    header = "| m | score | " + " | ".join(f"eps={e:g}" for e in wide.columns) + " |"
    lines = [header, "|" + "---|" * (len(wide.columns) + 2)]
    for (m, score), row in wide.iterrows():
        lines.append(f"| {m} | {score} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    return "\n".join(lines)


def figure1(summary: pd.DataFrame, path: Path) -> None:
    sizes = sorted(summary["m"].unique())
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4.2), squeeze=False)
    for ax, m in zip(axes[0], sizes, strict=True):
        for i, score in enumerate(PRIVATE_SCORES):
            part = summary[(summary["m"] == m) & (summary["score"] == score)].sort_values("epsilon")
            private = part[np.isfinite(part["epsilon"])]
            ax.plot(private["epsilon"], private["accuracy"], marker="o", color=f"C{i}", label=score)
            ax.axhline(
                part[np.isinf(part["epsilon"])]["accuracy"].item(), color=f"C{i}", ls=":", lw=1,
                label=f"{score}, non-private",
            )
        ax.set(
            xscale="log",
            ylim=(0, 1.02),
            xlabel="privacy budget epsilon (log scale)",
            ylabel="P(correct direction), share of pairs",
            title=f"test-set privacy, m = {m}",
        )
        ax.legend(loc="lower right", fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def figure2(training: pd.DataFrame, path: Path) -> None:
    sizes = sorted(training["m"].unique())
    fig, axes = plt.subplots(1, len(sizes) + 1, figsize=(5 * (len(sizes) + 1), 4.2), squeeze=False)
    for ax, m in zip(axes[0][:-1], sizes, strict=True):
        for eps, part in training[training["m"] == m].groupby("epsilon"):
            ax.plot(part["regularization"], part["accuracy"], marker="o", label=f"eps={eps:g}")
        ax.set(
            xscale="log",
            ylim=(0.4, 1.02),
            xlabel="KRR regularization lambda (log scale)",
            ylabel="P(correct direction), share of pairs",
            title=f"HSIC, training-set privacy, m = n = {m}",
        )
        ax.legend()
    best = training.groupby(["m", "epsilon"])["accuracy"].max().reset_index()
    for m, part in best.groupby("m"):
        axes[0][-1].plot(part["epsilon"], part["accuracy"], marker="o", label=f"m = {m}")
    axes[0][-1].set(
        xscale="log",
        ylim=(0.4, 1.02),
        xlabel="privacy budget epsilon (log scale)",
        ylabel="P(correct direction) at the best lambda",
        title="best lambda per epsilon",
    )
    axes[0][-1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main() -> None:
    """Run the experiment (or the folder runner) and write the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="m = 100, few pairs (seconds)")
    parser.add_argument("--replicates", type=int, default=2, help="pairs per (function, noise) (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs", type=Path, help="a folder of pairs: report weighted accuracy only")
    parser.add_argument("--out", type=Path, default=Path("results/anm_pairs"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.pairs is not None:
        summary = run_pair_folder(args.pairs, seed=args.seed)
        summary.to_csv(args.out / "folder_summary.csv", index=False)
        print(summary.pivot(index="score", columns="epsilon", values="accuracy").round(3).to_string())
        return
    result = run_experiment(quick=args.quick, replicates=args.replicates, seed=args.seed)
    result.records.to_csv(args.out / "records.csv", index=False)
    result.summary.to_csv(args.out / "summary.csv", index=False)
    result.within.to_csv(args.out / "within.csv", index=False)
    result.training.to_csv(args.out / "training.csv", index=False)
    table = accuracy_table(result.summary)
    (args.out / "table.md").write_text(table + "\n")
    figure1(result.summary, args.out / "figure1.png")
    figure2(result.training, args.out / "figure2.png")
    within = result.within.replace({np.nan: None}).to_dict(orient="records")
    (args.out / "results.json").write_text(
        json.dumps({"within_5_points": within, "pairs": int(result.records["pair"].nunique())}, indent=2, default=float)
    )
    print(table)
    print()
    print(result.within.to_string(index=False))


if __name__ == "__main__":
    main()
