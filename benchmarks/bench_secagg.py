"""Cost of one secure-aggregation round and the noise it saves.

    .venv/bin/python benchmarks/bench_secagg.py [--quick]

For 4, 8 and 16 parties and a 1000-entry vector: the time of stage 1 (every party makes and signs
its round key), of one party's stage 2 (verify every advertisement, derive the pairwise seeds,
expand and add the masks; its OpenDP noise share apart) and of the coordinator's sum. Then the noise
the analyst sees on the sum: each party adding the full central noise (sd sqrt(R) sigma) against
distributed shares calibrated to R - 1 honest parties (sd sqrt(R / (R - 1)) sigma), measured on
seeded draws. One run on the shared machine; no target (``--quick``: 4 and 8 parties, fewer draws).
"""

from __future__ import annotations

import time

import numpy as np
from _run_mode import BenchmarkParser

from collabcausal.estimators.dp.zcdp import zcdp_rho
from collabcausal.secagg import (
    advertise,
    aggregate,
    encode,
    integer_sensitivity,
    masked_contribution,
    noise_share,
    share_sigma,
    simulation_identities,
)

D = 1000
SCALE_BITS = 16
EPSILON, DELTA = 1.0, 1e-6
RHO = zcdp_rho(EPSILON, DELTA)  # the zCDP target a party's ledger is charged for (eps, delta)


def _round(n_parties: int) -> tuple[float, float, float, float]:
    names = [f"party-{i:02d}" for i in range(n_parties)]
    signers, verifier = simulation_identities("bench", names)
    values = encode(np.random.default_rng(0).uniform(-1, 1, size=D), SCALE_BITS)
    sigma = share_sigma(integer_sensitivity(2.0, D, SCALE_BITS), RHO, n_parties - 1, D)
    start = time.perf_counter()
    keys = [advertise(signers[name], "bench", "1") for name in names]
    t_keys = time.perf_counter() - start
    ads = [ad for _, ad in keys]
    uploads, noise_times, mask_times = {}, [], []
    for name, (state, _) in zip(names, keys, strict=True):
        start = time.perf_counter()
        noisy = values + noise_share(D, sigma).view(np.uint64)
        middle = time.perf_counter()
        uploads[name] = masked_contribution(state, name, ads, verifier, noisy, "scores")
        noise_times.append(middle - start)
        mask_times.append(time.perf_counter() - middle)
    start = time.perf_counter()
    aggregate(uploads, names)
    return t_keys, float(np.median(noise_times)), float(np.median(mask_times)), time.perf_counter() - start


def _noise_sd(n_parties: int, n_honest: int, draws: int, rng: np.random.Generator) -> tuple[float, float]:
    sens = 1000
    sigma = share_sigma(sens, RHO, n_honest, 1)
    central = share_sigma(sens, RHO, 1, 1)
    distributed = sum(noise_share(draws, sigma, rng=rng) for _ in range(n_parties))
    full = sum(noise_share(draws, central, rng=rng) for _ in range(n_parties))
    return float(np.std(full)), float(np.std(distributed))


def main(argv: list[str] | None = None) -> None:
    """Print the round timings and the noise sd of the sum."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--parties", type=int, nargs="+", full=[4, 8, 16], quick=[4, 8], help="parties of a round")
    parser.add_size("--draws", type=int, full=4000, quick=1000, help="seeded draws of each noise sum")
    args = parser.parse_args(argv)
    print(f"one round, {D} entries: times in milliseconds")
    print(f"{'parties':>7} {'keys (all)':>11} {'noise (1 party)':>16} {'verify+mask (1 party)':>22} {'aggregate':>10}")
    for n in args.parties:
        t_keys, t_noise, t_mask, t_sum = _round(n)
        print(f"{n:>7} {t_keys * 1e3:>11.1f} {t_noise * 1e3:>16.1f} {t_mask * 1e3:>22.1f} {t_sum * 1e3:>10.2f}")
    rng = np.random.default_rng(1)
    print(f"\nnoise sd on the sum, sensitivity 1000, eps {EPSILON}, delta {DELTA} ({args.draws} seeded draws)")
    print(f"{'parties':>7} {'full noise each':>16} {'shares, R-1 honest':>19} {'gain':>6} {'sqrt(R-1)':>10}")
    for n in args.parties:
        full, shared = _noise_sd(n, n - 1, args.draws, rng)
        print(f"{n:>7} {full:>16.0f} {shared:>19.0f} {full / shared:>6.2f} {np.sqrt(n - 1):>10.2f}")


if __name__ == "__main__":
    main()
