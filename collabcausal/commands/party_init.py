"""``collabcausal party init --out party.toml``: write a commented party.toml to fill in."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Write a commented party.toml template: every section a party needs (identity, analyst address and
certificates, data, policy, privacy budget, audit log, secure-aggregation peers) with the optional
ones commented out. The default is the private study kind, dp_effects (two DP sums per party, secure
aggregation); --kind dcqe writes the template of a plain DC-QE study (exact representations, not
differentially private; it adds the anchor key). Fill in the values, then check it without connecting
with `party join --check`. An existing file is kept unless --force.

For a private study (dp_effects, secure aggregation) the parties pin each other: each prints its
certificate's fingerprint and gives it to the others out of band (never through the coordinator,
which holds the study CA), and lists theirs in [secure_aggregation] peers.

examples:
  collabcausal party init --out party.toml
  collabcausal party init --kind dcqe --out party.toml
  collabcausal certs fingerprint --cert certs/hospital-a.pem     # give this line to the other parties
  collabcausal party join --config party.toml --check
"""
TEMPLATE_OF_KIND = {"dp_effects": "party.toml", "dcqe": "party-dcqe.toml"}
"""``--kind`` -> the template it writes; the private kind first (the default)."""


def register(actions: argparse._SubParsersAction) -> None:
    """Add the ``init`` action to the ``party`` group."""
    parser = actions.add_parser(
        "init",
        help="write a commented party.toml template",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", default="party.toml", metavar="FILE", help="where to write it (default party.toml)")
    parser.add_argument(
        "--kind", choices=tuple(TEMPLATE_OF_KIND), default="dp_effects",
        help="dp_effects: the private effect estimate (default); dcqe: plain DC-QE, not differentially private",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the template; return 0."""
    from collabcausal.templates import write_template

    path = write_template(TEMPLATE_OF_KIND[args.kind], args.out, force=args.force)
    print(f"wrote {path}: fill it in, then `collabcausal party join --config {path} --check`")
    return 0
