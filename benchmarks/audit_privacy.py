"""Privacy audit of every DP operation a party offers, through ``Party.handle``.

    .venv/bin/python benchmarks/audit_privacy.py                  # 20,000 releases per neighbour
    .venv/bin/python benchmarks/audit_privacy.py --releases 2000  # the fast suite's size

For each operation and each neighbouring relation (substitution, the project's relation; and
add/remove, about which nothing is claimed), prints eps-hat of the best distinguishing event, its
Clopper-Pearson lower bound at confidence 1 - 1e-6 and the claimed epsilon. Under substitution the
lower bound must not exceed the claim (see collabcausal/attacks/privacy_audit.py and
docs/differential-privacy.md for the datasets, the attack and what the add/remove figures mean).
"""

from __future__ import annotations

import argparse
import time

from collabcausal.attacks.privacy_audit import AuditResult, run_audits


def _row(result: AuditResult) -> str:
    verdict = "ok" if result.epsilon_lower <= result.claimed_epsilon else "EXCEEDS CLAIM"
    if result.relation != "substitute-one":
        verdict = "no claim"
    return (
        f"{result.name:<20} {result.relation:<15} {result.epsilon_hat:>8.3f} {result.epsilon_lower:>9.3f} "
        f"{result.claimed_epsilon:>8.3f}  {verdict}"
    )


def main() -> None:
    """Run the audits and print one row per (operation, relation)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=20000, help="releases per neighbouring dataset")
    args = parser.parse_args()
    print(f"{args.releases} releases per dataset (half choose the event, half measure it); confidence 1 - 1e-6")
    print(f"{'operation':<20} {'relation':<15} {'eps-hat':>8} {'CP lower':>9} {'claimed':>8}")
    start = time.perf_counter()
    run_audits(args.releases, progress=lambda r: print(_row(r), flush=True))
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
