"""``collabcausal party join --config party.toml``: serve one study as a party.

The party dials the analyst (no inbound port needed), answers the requests its policy allows and
logs every release to its audit log, until the analyst ends the study. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time

from collabcausal.party.config import load_party_config
from collabcausal.protocol.client import CONNECT_TIMEOUT, PartyClient
from collabcausal.protocol.tls import TlsFiles


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``party join``."""
    parser = subparsers.add_parser("join", help="join a study as a party", description=__doc__)
    parser.add_argument("--config", required=True, metavar="PARTY.TOML", help="the party's configuration")
    parser.add_argument("--insecure", action="store_true", help="plaintext, loopback only (overrides party.toml)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the configuration, build the party, serve until the study ends."""
    config = load_party_config(args.config)
    party = config.build_party()
    conn = config.connection
    insecure = args.insecure or conn.insecure
    tls = None if insecure else TlsFiles(conn.ca, conn.cert, conn.key)  # type: ignore[arg-type]
    start = time.monotonic()

    def progress(event: str) -> None:
        print(f"[{time.monotonic() - start:7.1f}s] {party.name}: {event}", file=sys.stderr, flush=True)

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
