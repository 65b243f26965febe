"""``collabcausal certs``: the study CA and the certificates of parties and analyst."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from collabcausal.certs import (
    ANALYST,
    DEFAULT_HOSTS,
    common_name,
    fingerprint,
    init_ca,
    issue,
    load_certificate,
    request_certificate,
    self_sign,
    sign_request,
)
from collabcausal.errors import InputError

DESCRIPTION = """\
Make the study's certificate authority (CA) and the certificates that parties and analyst present
to each other (mutual TLS). The coordinator keeps certs/ca.key private and gives every party
certs/ca.pem.

examples:
  # at the coordinator: the study CA and the analyst's certificate for the name parties dial
  collabcausal certs init --dir certs
  collabcausal certs issue --analyst --host coordinator.example.org --dir certs

  # either the coordinator issues a party's key and certificate and sends both with ca.pem ...
  collabcausal certs issue --party hospital-a --dir certs

  # ... or, so that the party's private key never leaves the hospital:
  collabcausal certs request --party hospital-a --dir certs     # at the hospital
  collabcausal certs sign --csr hospital-a.csr --dir certs      # at the coordinator

  # secure aggregation: each party prints its certificate's fingerprint and gives it to the other
  # parties out of band; each pins the others' in party.toml [secure_aggregation] peers
  collabcausal certs fingerprint --cert certs/hospital-a.pem
  # optional: a self-signed certificate for secure aggregation that no coordinator CA ever signs
  collabcausal certs self-sign --party hospital-a --dir secagg
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``certs init``, ``issue``, ``request`` and ``sign``."""
    parser = subparsers.add_parser(
        "certs",
        help="make the study CA and certificates",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init",
        help="make the study CA (ca.pem, ca.key)",
        **_example(
            "Make the study's certificate authority at the coordinator: ca.pem goes to every party, ca.key "
            "stays private (it signs every certificate of the study).",
            "certs init --dir certs",
        ),
    )
    init.add_argument("--dir", default="certs", help="folder for the CA files (default: certs)")
    init.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    init.add_argument("--force", action="store_true", help="overwrite an existing CA")
    init.set_defaults(func=run_init)
    iss = actions.add_parser(
        "issue",
        help="issue a party or analyst key and certificate",
        **_example(
            "Issue a private key and a certificate signed by the study CA, for a party (by roster name) or for "
            "the analyst (with the host names parties dial). The key is written beside the certificate: send it "
            "to the party over a secure channel, or use 'certs request' so that it never leaves the party.",
            "certs issue --party hospital-a --dir certs",
            "certs issue --analyst --host coordinator.example.org --dir certs",
        ),
    )
    who = iss.add_mutually_exclusive_group(required=True)
    who.add_argument("--party", metavar="NAME", help="a party's roster name")
    who.add_argument("--analyst", action="store_true", help="the analyst's server certificate")
    iss.add_argument(
        "--host",
        action="append",
        metavar="NAME",
        help=f"a host name or address parties dial (analyst; repeatable; default {', '.join(DEFAULT_HOSTS)})",
    )
    iss.add_argument("--dir", default="certs", help="folder holding the CA (default: certs)")
    iss.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    iss.add_argument("--force", action="store_true", help="overwrite existing files")
    iss.set_defaults(func=run_issue)
    req = actions.add_parser(
        "request",
        help="make a party key and a signing request (at the party)",
        **_example(
            "At the party: make its private key (kept here) and a certificate signing request to send to the "
            "coordinator, who answers with 'certs sign'.",
            "certs request --party hospital-a --dir certs",
        ),
    )
    req.add_argument("--party", required=True, metavar="NAME", help="the party's roster name")
    req.add_argument("--dir", default="certs", help="folder for NAME.key and NAME.csr (default: certs)")
    req.add_argument("--force", action="store_true", help="overwrite an existing key")
    req.set_defaults(func=run_request)
    sign = actions.add_parser(
        "sign",
        help="sign a party's request with the study CA (at the coordinator)",
        **_example(
            "At the coordinator: sign a party's request with the study CA; send the certificate and ca.pem back.",
            "certs sign --csr hospital-a.csr --dir certs",
        ),
    )
    sign.add_argument("--csr", required=True, metavar="FILE", help="the party's NAME.csr")
    sign.add_argument("--dir", default="certs", help="folder holding the CA (default: certs)")
    sign.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    sign.add_argument("--force", action="store_true", help="replace an existing party certificate of that name")
    sign.set_defaults(func=run_sign)
    fpr = actions.add_parser(
        "fingerprint",
        help="print a certificate's SHA-256 fingerprint, the value peers pin",
        **_example(
            "Print the SHA-256 fingerprint of a party's certificate as a line for the other parties' party.toml "
            "[secure_aggregation] peers. Send it out of band (phone, signed e-mail), never through the coordinator.",
            "certs fingerprint --cert certs/hospital-a.pem",
        ),
    )
    fpr.add_argument("--cert", required=True, metavar="FILE", help="the party's certificate (.pem)")
    fpr.set_defaults(func=run_fingerprint)
    own = actions.add_parser(
        "self-sign",
        help="make a party's own key and self-signed certificate for secure aggregation (at the party)",
        **_example(
            "At the party: a private key and a self-signed certificate that sign its secure-aggregation keys "
            "(party.toml [secure_aggregation] cert and key). No CA signs it, so the coordinator cannot mint a "
            "look-alike; peers trust it by the fingerprint they pin. Mutual TLS keeps the [analyst] certificate.",
            "certs self-sign --party hospital-a --dir secagg",
        ),
    )
    own.add_argument("--party", required=True, metavar="NAME", help="the party's roster name")
    own.add_argument("--dir", default="secagg", help="folder for NAME.key and NAME.pem (default: secagg)")
    own.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    own.add_argument("--force", action="store_true", help="overwrite an existing key")
    own.set_defaults(func=run_self_sign)
    anchor = actions.add_parser(
        "anchor-key",
        help="make the study's anchor key (at one party; give it to every party, never to the coordinator)",
        **_example(
            "At one party: make the secret key from which every party derives the DC-QE anchor. Give it to "
            "every party out of band and name it in [anchor] key_file; the coordinator must never see it.",
            "certs anchor-key --out anchor.key",
        ),
    )
    anchor.add_argument("--out", default="anchor.key", metavar="FILE", help="where to write it (default: anchor.key)")
    anchor.add_argument("--force", action="store_true", help="overwrite an existing key file")
    anchor.set_defaults(func=run_anchor_key)


def _example(description: str, *commands: str) -> dict:
    """``add_parser`` keywords: ``description`` above the options, ``commands`` as examples below."""
    lines = "\n".join(f"  collabcausal {c}" for c in commands)
    return {
        "description": textwrap.fill(description, 100),
        "epilog": f"example:\n{lines}",
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }


def run_init(args: argparse.Namespace) -> int:
    """Make the CA."""
    cert = init_ca(args.dir, days=args.days, force=args.force)
    print(f"study CA: {cert} (keep {cert.with_name('ca.key')} private; give ca.pem to every party)")
    return 0


def run_issue(args: argparse.Namespace) -> int:
    """Issue one certificate."""
    hosts = [*DEFAULT_HOSTS, *(args.host or [])]
    name = ANALYST if args.analyst else args.party
    issued = issue(args.dir, name, server=args.analyst, hosts=hosts, days=args.days, force=args.force)
    print(f"{name}: certificate {issued.cert}, private key {issued.key}")
    return 0


def run_request(args: argparse.Namespace) -> int:
    """Make a key and a signing request."""
    key, csr = request_certificate(args.dir, args.party, force=args.force)
    print(f"{args.party}: private key {key} (keep it here), request {csr} (send it to the coordinator)")
    return 0


def run_sign(args: argparse.Namespace) -> int:
    """Sign a request."""
    issued = sign_request(args.dir, args.csr, days=args.days, force=args.force)
    print(f"{issued.name}: certificate {issued.cert} (send it back with ca.pem)")
    return 0


def run_fingerprint(args: argparse.Namespace) -> int:
    """Print the certificate's name and fingerprint as a ``[secure_aggregation] peers`` entry."""
    cert = load_certificate(args.cert)
    print(f'{{name = "{common_name(cert, args.cert)}", fingerprint = "{fingerprint(cert)}"}}')
    return 0


def run_self_sign(args: argparse.Namespace) -> int:
    """Make a party's own key and self-signed certificate."""
    issued = self_sign(args.dir, args.party, days=args.days, force=args.force)
    print(f"{issued.name}: self-signed certificate {issued.cert}, private key {issued.key} (keep it here); "
          f"give the peers its fingerprint (`collabcausal certs fingerprint --cert {issued.cert}`)")
    return 0


def run_anchor_key(args: argparse.Namespace) -> int:
    """Write a fresh anchor key; refuse to overwrite one without --force."""
    from collabcausal.party.anchor import new_anchor_key

    out = Path(args.out)
    if out.exists() and not args.force:
        raise InputError(f"{out} exists: replacing it changes the study's anchor", "pass --force, or another --out")
    new_anchor_key(out)
    print(f"anchor key: {out} (mode 0600; give it to every party out of band, never to the coordinator)")
    return 0
