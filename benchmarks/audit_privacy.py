"""Privacy audit of every DP operation a party offers, through ``Party.handle``.

    .venv/bin/python benchmarks/audit_privacy.py                  # 20,000 releases per neighbour
    .venv/bin/python benchmarks/audit_privacy.py --releases 2000  # the fast suite's size
    .venv/bin/python benchmarks/audit_privacy.py --quick          # 50 releases, seconds

For each operation and each neighbouring relation (substitution, the project's relation; and
add/remove, about which nothing is claimed), prints eps-hat of the best distinguishing event, its
Clopper-Pearson lower bound at confidence 1 - 1e-6 and the claimed epsilon. Under substitution the
lower bound must not exceed the claim (see collabcausal/attacks/privacy_audit.py and
docs/differential-privacy.md for the datasets, the attack and what the add/remove figures mean).
Exit 1 when one does.
"""

from __future__ import annotations

import sys
import time

from _run_mode import BenchmarkParser

from collabcausal.attacks.privacy_audit import AuditResult, run_audits


def _row(result: AuditResult) -> str:
    verdict = "ok" if result.epsilon_lower <= result.claimed_epsilon else "EXCEEDS CLAIM"
    if result.relation != "substitute-one":
        verdict = "no claim"
    return (
        f"{result.name:<20} {result.relation:<15} {result.epsilon_hat:>8.3f} {result.epsilon_lower:>9.3f} "
        f"{result.claimed_epsilon:>8.3f}  {verdict}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the audits and print one row per (operation, relation); 1 when a claim is exceeded."""
    parser = BenchmarkParser(__doc__)
    parser.add_size("--releases", type=int, full=20000, quick=50, help="releases per neighbouring dataset")
    args = parser.parse_args(argv)
    print(f"{args.releases} releases per dataset (half choose the event, half measure it); confidence 1 - 1e-6")
    print(f"{'operation':<20} {'relation':<15} {'eps-hat':>8} {'CP lower':>9} {'claimed':>8}")
    start = time.perf_counter()
    results = run_audits(args.releases, progress=lambda r: print(_row(r), flush=True))
    exceeded = [r.name for r in results if r.relation == "substitute-one" and r.epsilon_lower > r.claimed_epsilon]
    print(f"total {time.perf_counter() - start:.0f} s; claims exceeded under substitution: {exceeded or 'none'}")
    return 1 if exceeded else 0


if __name__ == "__main__":
    sys.exit(main())
