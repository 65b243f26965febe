"""Reproduce paper 000 (DP-EBM CATE learners: MSE, bias^2, variance vs eps and n on setups A-E)
and paper 004 (DP-CATE: PEHE vs eps on dataset 2, finite and functional releases).

Writes under results/cate/: paper000.csv, paper000_setup<S>.png (MSE vs eps per n, one panel per
learner), paper000_bias_variance.png (DR learner), paper004.csv, paper004.png, claims.json,
paper000_rows.csv / paper004_rows.csv (every repetition) and
paper000.md / paper004.md: every row beside the constant-ATE baselines and EconML's non-private
learner of the same kind on the same data, mean (sd) [min–max] over repetitions (use --reps >= 5).

    .venv/bin/python scripts/cate_figures.py [--quick] [--papers 000 004] [--setups A B C D E]
        [--ns 500 ... 32000] [--reps 5] [--reps004 10] [--jobs 2] [--scheduler tcp://host:8786]
        [--eps004 1 10 100] [--seed 0] [--out results/cate]

``--quick`` runs the CI grid of paper 000 (setup A, n in {500, 8000}, eps in {1, 16}, --reps
repetitions) and paper 004's dataset 1 (600 samples, eps in {1, 1000}); ``--scheduler`` is
ignored there. ``--eps004`` restricts paper 004's epsilons.
``--scheduler`` sends every cell of the full sweeps to a Dask cluster (joblib's dask backend).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from collabcausal.simulations.cate_baselines import baseline_summary, to_markdown
from collabcausal.simulations.cate_experiments import (
    PAPER000_EPS,
    PAPER000_NS,
    PAPER004_EPS,
    Paper004Config,
    paper000_means,
    paper000_quick,
    paper000_rows,
    paper004_rows,
)
from collabcausal.strict_json import write_json


def plot_paper000(res, out: Path) -> None:
    for setup, part in res.groupby("setup"):
        learners = sorted(part["learner"].unique())
        fig, axes = plt.subplots(1, len(learners), figsize=(4.2 * len(learners), 3.8), sharey=True)
        for ax, lr in zip(np.atleast_1d(axes), learners, strict=True):
            for n, cell in part[part["learner"] == lr].groupby("n"):
                ax.plot(cell["epsilon"], cell["mse"], marker="o", label=f"n={n}")
            ax.axhline(float(part["var_tau"].iloc[0]), color="grey", ls="--", lw=1, label="Var(tau)")
            ax.set(xscale="log", yscale="log", xlabel="privacy budget epsilon (log scale)",
                   title=f"setup {setup}: DP-EBM-{lr.upper()}")
        np.atleast_1d(axes)[0].set_ylabel("test MSE of tau (squared outcome units)")
        np.atleast_1d(axes)[-1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"paper000_setup{setup}.png", dpi=150)
        plt.close(fig)
    dr = res[res["learner"] == "dr"]
    n_max = int(dr["n"].max())
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, (setup, cell) in enumerate(dr[dr["n"] == n_max].groupby("setup")):
        ax.plot(cell["epsilon"], cell["variance"], marker="o", color=f"C{k}", label=f"{setup} variance")
        ax.plot(cell["epsilon"], cell["bias2"].clip(lower=1e-6), marker="x", ls=":", color=f"C{k}",
                label=f"{setup} bias^2")
    ax.set(xscale="log", yscale="log", xlabel="privacy budget epsilon (log scale)",
           ylabel="integrated bias^2 or variance (squared outcome units)",
           title=f"DP-EBM-DR, n={n_max}: squared bias and variance of tau")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "paper000_bias_variance.png", dpi=150)
    plt.close(fig)


def plot_paper004(res, out: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k, (variant, cell) in enumerate(res.groupby("variant")):
        private = cell[np.isfinite(cell["epsilon"])]
        ax.errorbar(private["epsilon"], private["pehe"], yerr=private["pehe_sd"], marker="o", capsize=3,
                    color=f"C{k}", label=f"DP-CATE {variant}")
        ax.axhline(float(cell.loc[~np.isfinite(cell["epsilon"]), "pehe"].iloc[0]), color=f"C{k}", ls="--", lw=1,
                   label=f"non-private {variant}")
    ax.set(xscale="log", yscale="log", xlabel="privacy budget epsilon (log scale)",
           ylabel="PEHE (outcome units, mean ± SD)", title="Paper 004, dataset 2: DP-CATE accuracy against epsilon")
    # the dashed non-private lines of different variants can lie on top of each other: the legend
    # names each one, two columns keep it off the curves
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(out / "paper004.png", dpi=150)
    plt.close(fig)


def claims000(r0) -> dict:
    """Paper 000's qualitative findings on our numbers (first setup, smallest/largest n)."""
    a = r0[r0["setup"] == r0["setup"].min()].set_index(["n", "epsilon", "learner"])
    n_lo, n_hi = int(a.index.get_level_values(0).min()), int(a.index.get_level_values(0).max())
    e_lo, e_hi = float(a.index.get_level_values(1).min()), float(a.index.get_level_values(1).max())
    out = {"s_mse_over_var_tau": {f"n={n},eps={e:g}": float(a.loc[(n, e, "s"), "mse"] / a["var_tau"].iloc[0])
                                  for n in (n_lo, n_hi) for e in (e_lo, e_hi)}}
    for lr in ("dr", "r"):
        rise = {n: float(a.loc[(n, e_lo, lr), "mse"] - a.loc[(n, e_hi, lr), "mse"]) for n in (n_lo, n_hi)}
        dvar = float(a.loc[(n_lo, e_lo, lr), "variance"] - a.loc[(n_lo, e_hi, lr), "variance"])
        dbias = float(a.loc[(n_lo, e_lo, lr), "bias2"] - a.loc[(n_lo, e_hi, lr), "bias2"])
        out[lr] = {"mse_rise_small_n": rise[n_lo], "mse_rise_large_n": rise[n_hi],
                   "variance_growth_small_n": dvar, "bias2_change_small_n": dbias}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--papers", nargs="+", choices=["000", "004"], default=["000", "004"])
    parser.add_argument("--setups", nargs="+", default=["A", "B", "C", "D", "E"])
    parser.add_argument("--ns", type=int, nargs="+", default=list(PAPER000_NS), help="paper 000 sample sizes")
    parser.add_argument("--reps", type=int, default=5, help="paper 000 repetitions")
    parser.add_argument("--reps004", type=int, default=10, help="paper 004 repetitions")
    parser.add_argument("--eps004", type=float, nargs="+", default=list(PAPER004_EPS), help="paper 004 epsilons")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://10.0.0.1:8786")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/cate"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = {"seed": args.seed, "n_jobs": args.jobs, "scheduler": args.scheduler, "peers": True}
    results = {}
    if "000" in args.papers:
        if args.quick:
            rows0 = paper000_quick(seed=args.seed, n_jobs=args.jobs, reps=args.reps, peers=True)
        else:
            rows0 = paper000_rows(args.setups, args.ns, PAPER000_EPS, ("dr", "r", "s"), args.reps, **run)
        rows0.to_csv(args.out / "paper000_rows.csv", index=False)
        r0 = paper000_means(rows0)
        r0.to_csv(args.out / "paper000.csv", index=False)
        plot_paper000(r0, args.out)
        results["paper000"] = claims000(r0)
        table0 = to_markdown(baseline_summary(rows0, ["setup", "n", "epsilon", "learner"], metric="mse"))
        (args.out / "paper000.md").write_text(table0 + "\n")
        print("paper 000: test MSE of tau, mean (sd) [min–max] over repetitions\n" + table0)
    if "004" in args.papers:
        if args.quick:
            cfg = Paper004Config(dataset=1, n=600, epsilons=(1.0, 1000.0), variants=("linear", "functional"), reps=1)
        else:
            cfg = Paper004Config(epsilons=tuple(args.eps004), reps=args.reps004)
        rows4 = paper004_rows(cfg, **run)
        rows4.to_csv(args.out / "paper004_rows.csv", index=False)
        r4 = rows4.groupby(["variant", "epsilon"], as_index=False)["pehe"].agg(["mean", "std"])
        r4 = r4.rename(columns={"mean": "pehe", "std": "pehe_sd"})
        r4.to_csv(args.out / "paper004.csv", index=False)
        plot_paper004(r4, args.out)
        results["paper004_pehe"] = {f"{v}@{e:g}": float(x) for (v, e), x in r4.set_index(["variant", "epsilon"])[
            "pehe"].items()}
        table4 = to_markdown(baseline_summary(rows4, ["variant", "epsilon"], metric="pehe"))
        (args.out / "paper004.md").write_text(table4 + "\n")
        print(f"paper 004, dataset {cfg.dataset}: sqrt(PEHE), mean (sd) [min–max] over repetitions\n" + table4)
    write_json(args.out / "claims.json", results)


if __name__ == "__main__":
    main()
