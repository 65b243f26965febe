"""Sensitivity of DC-QE to m~ (components per party) and m^ (collaborative components).

Paper 003's values of m~ and m^ were lost with its formulas, so we report how the W-clb estimate,
its bootstrap SE and MASMD move over a grid of both (docs/dcqe.md shows the LaLonde table).
"""

from __future__ import annotations

from collections.abc import Sequence

from collabcausal.errors import NumericalError
from collabcausal.simulations.datasets import CausalDataset
from collabcausal.simulations.dcqe_experiment import ExperimentConfig, run_experiment
from collabcausal.simulations.partition import partition_grid
from collabcausal.simulations.settings import Setting


def sensitivity_table(
    dataset: CausalDataset,
    party_components: Sequence[int],
    n_components: Sequence[int],
    *,
    n_boot: int = 100,
    seed: int = 0,
    n_jobs: int = 1,
) -> list[dict[str, object]]:
    """W-clb rows for every (m~, m^) pair with m^ <= 2 m~ (the rank a 2x2 row group can carry).

    Returns rows with keys party_components, n_components, estimator, estimate, se, gap, masmd.
    """
    part = partition_grid(dataset, 2, seed=seed)
    every = tuple(p for row in part.names() for p in row)
    out: list[dict[str, object]] = []
    for m_tilde in party_components:
        for m_hat in n_components:
            if m_hat > len(part.column_groups) * m_tilde:
                continue
            config = ExperimentConfig(
                dataset,
                part,
                [Setting("W-clb", "collaboration", every, m_hat)],
                estimators=("psm", "ipw"),
                n_boot=n_boot,
                seed=seed,
                party_components=m_tilde,
                n_jobs=n_jobs,
            )
            try:
                rows = run_experiment(config).rows()
            except NumericalError:
                continue
            for row in rows:
                out.append(
                    {"party_components": m_tilde, "n_components": m_hat}
                    | {k: row[k] for k in ("estimator", "estimate", "se", "gap", "masmd")}
                )
    return out
