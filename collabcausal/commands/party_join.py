"""``collabcausal party join --config party.toml``: serve one study as a party."""

from __future__ import annotations

import argparse

from collabcausal.logs import progress_logger

DESCRIPTION = """\
Serve one study as a party. The party dials the analyst (no inbound port is needed at the
hospital), answers only the requests its [policy] allows, appends every release to its audit log,
and stops when the analyst ends the study. Progress, one line per event, goes to stderr.

examples:
  # once: your private key and a signing request; send certs/hospital-a.csr to the coordinator
  # and put the returned hospital-a.pem and ca.pem into certs/
  collabcausal certs request --party hospital-a --dir certs
  # join the study described by party.toml (analyst address, certificates, data, policy)
  collabcausal party join --config party.toml
  # afterwards: what was released and what privacy budget is left
  collabcausal party budget --config party.toml

A complete party.toml: examples/lalonde-2x2/p11/party.toml.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``party join``."""
    parser = subparsers.add_parser(
        "join",
        help="join a study as a party",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", required=True, metavar="PARTY.TOML", help="the party's configuration")
    parser.add_argument("--insecure", action="store_true", help="plaintext, loopback only (overrides party.toml)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the configuration, build the party, serve until the study ends."""
    from collabcausal.party.config import load_party_config
    from collabcausal.protocol.client import CONNECT_TIMEOUT, PartyClient
    from collabcausal.protocol.tls import TlsFiles

    config = load_party_config(args.config)
    party = config.build_party()
    conn = config.connection
    insecure = args.insecure or conn.insecure
    tls = None if insecure else TlsFiles(conn.ca, conn.cert, conn.key)  # type: ignore[arg-type]
    progress = progress_logger(party.name)
    progress(f"{party.table.n_subjects} subjects, columns {list(party.table.covariate_names)}; dialing {conn.address}")
    client = PartyClient(
        party,
        conn.address,
        tls=tls,
        study=config.study,
        reconnect_timeout=conn.reconnect_timeout,
        connect_timeout=min(CONNECT_TIMEOUT, conn.reconnect_timeout),
        progress=progress,
    )
    client.run()
    progress(f"done: {client.tasks_done} tasks answered; audit log {config.audit_path}")
    return 0
