"""IHDP replications 1-5: sqrt(PEHE) and ATE error of every learner, private and not.

Writes under results/ihdp/: ihdp.csv (every replication), ihdp_summary.csv (mean and sd over
replications), ihdp.png and ihdp.json.

    .venv/bin/python scripts/ihdp.py [--replications 1 2 3 4 5] [--epsilons 1 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collabcausal.simulations.ihdp import REPLICATIONS, ihdp_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replications", type=int, nargs="+", default=list(REPLICATIONS))
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 8.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/ihdp"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table = ihdp_table(args.replications, epsilons=args.epsilons, seed=args.seed)
    table.to_csv(args.out / "ihdp.csv", index=False)
    summary = table.groupby(["learner", "epsilon"], as_index=False, sort=False)[["sqrt_pehe", "ate_error"]].agg(
        ["mean", "std"])
    summary.columns = ["learner", "epsilon", "sqrt_pehe", "sqrt_pehe_sd", "ate_error", "ate_error_sd"]
    summary.to_csv(args.out / "ihdp_summary.csv", index=False)
    labels = [f"{r.learner}" + ("" if np.isinf(r.epsilon) else f" eps={r.epsilon:g}") for r in summary.itertuples()]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.bar(range(len(summary)), summary["sqrt_pehe"], yerr=summary["sqrt_pehe_sd"], capsize=2)
    ax.set_xticks(range(len(summary)), labels, rotation=60, ha="right", fontsize=7)
    ax.set(yscale="log", xlabel="learner (privacy budget epsilon)", ylabel="sqrt(PEHE), within-sample (outcome units)",
           title=f"IHDP replications {args.replications}: CATE error per learner")
    fig.tight_layout()
    fig.savefig(args.out / "ihdp.png", dpi=150)
    (args.out / "ihdp.json").write_text(json.dumps(summary.replace([np.inf], "inf").to_dict("records"), indent=2))
    print(summary.to_string(index=False))


if __name__ == "__main__":
    main()
