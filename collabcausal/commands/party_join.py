"""``collabcausal party join --config party.toml``: serve one study as a party.

``--check`` validates everything the party would use, without connecting: the configuration, the
data (the table is read and validated), the certificate (issued by the study CA, in date, to this
party, with its private key) and the keys, and prints what the policy would let the study have.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from collabcausal.errors import ConfigError
from collabcausal.logs import progress_logger

if TYPE_CHECKING:
    from collections.abc import Iterable

    from collabcausal.party.chunked_table import ChunkedTable
    from collabcausal.party.config import PartyConfig
    from collabcausal.party.table import PartyTable

ANCHORED = ("dc_representation", "dp_representation")
"""Operations that derive the study's anchor from the anchor key (refused by a party without one)."""

DESCRIPTION = """\
Serve one study as a party. The party dials the analyst (no inbound port is needed at the
hospital), answers only the requests its [policy] allows, appends every release to its audit log,
and stops when the analyst ends the study. Progress, one line per event, goes to stderr.

examples:
  # once: your private key and a signing request; send certs/hospital-a.csr to the coordinator
  # and put the returned hospital-a.pem and ca.pem into certs/
  collabcausal certs request --party hospital-a --dir certs
  # check party.toml, the data, keys and certificates, and see what would be shared
  collabcausal party join --config party.toml --check
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
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate config, data, keys and certificates, print what would be shared; do not connect",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the configuration, build the party, serve until the study ends."""
    from collabcausal.party.config import load_party_config
    from collabcausal.party.process_lock import PartyFilesLock

    config = load_party_config(args.config)
    if args.check:
        print("\n".join(check(config, insecure=args.insecure)))
        return 0
    with PartyFilesLock(config.name, config.written_files()):  # one process per party (issue 38, item 1)
        return _serve(config, insecure=args.insecure)


def _serve(config: PartyConfig, *, insecure: bool) -> int:
    """Build the party and serve the study of ``config`` until it ends (the caller holds the party's files)."""
    from collabcausal.protocol.client import CONNECT_TIMEOUT, PartyClient
    from collabcausal.protocol.tls import TlsFiles

    party = config.build_party()
    conn = config.connection
    insecure = insecure or conn.insecure
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


def check(config: PartyConfig, *, insecure: bool = False) -> list[str]:
    """What ``--check`` verifies and prints: every check raises its one-line error; nothing is written."""
    from collabcausal.certs import check_node_files
    from collabcausal.commands.party_budget import ledger_path_from_config
    from collabcausal.party.policy import effective_guarantee
    from collabcausal.protocol.tls import require_loopback

    conn, policy = config.connection, config.policy
    keyed = sorted(policy.operations & set(ANCHORED))
    if keyed and config.anchor_key is None:
        raise ConfigError(
            f"{config.path}: [policy] operations list {', '.join(keyed)}, which needs the study's anchor key, "
            "but there is no [anchor] section",
            'add [anchor] key_file = "anchor.key" (the key every party of the study holds)',
        )
    table = config.load_table()
    if insecure or conn.insecure:
        require_loopback(conn.address)
        identity = "plaintext (insecure): no certificate, loopback only"
    else:
        identity = check_node_files(conn.ca, conn.cert, conn.key, config.name)  # type: ignore[arg-type]
    n = len(config.columns)
    components = min(n if policy.allow_full_rank else n - 1, policy.max_components or n)
    labels = "no treatment or outcome (not a label holder)"
    if table.has_labels:
        labels = f"label holder (treatment {config.data.get('treatment')!r}, outcome {config.data.get('outcome')!r})"
    if config.privacy is None:
        budget = "no [privacy] section: it answers no DP query"
    else:
        ledger = ledger_path_from_config(config.path)
        state = "exists: `party budget` shows what is spent" if ledger.is_file() else "not created yet: nothing spent"
        budget = (
            f"epsilon={config.privacy['epsilon']:g}, delta={config.privacy.get('delta', 0.0):g} over every study; "
            f"ledger {ledger} ({state})"
        )
    privacy = config.privacy
    guarantee = effective_guarantee(
        policy.operations,
        allow_plain_with_dp=policy.allow_plain_with_dp,
        epsilon=None if privacy is None else privacy["epsilon"],
        delta=0.0 if privacy is None else privacy.get("delta", 0.0),
    )
    return [
        f"{config.path}: valid",
        f"  party {config.name} of study {config.study!r}; dials {conn.address}",
        f"  {identity}",
        f"  data {table.source}: {table.n_subjects} subjects; {labels}{_out_of_core(table, policy.operations)}",
        "  would share, as its [policy] allows:",
        f"    operations: {', '.join(sorted(policy.operations))}",
        f"    columns: {', '.join(config.columns)}",
        f"    min_subjects {policy.min_subjects}; at most {components} components of {n} covariates; "
        f"anchor rows {policy.min_anchors}..{policy.max_anchors}; "
        f"at most {policy.max_representation_requests} representation requests per study",
        f"    privacy budget: {budget}",
        f"    effective guarantee: {guarantee}",
        f"  anchor key: {'read' if config.anchor_key is not None else 'none (no representation operation listed)'}",
        f"  secure aggregation: {secure_aggregation(config, insecure=insecure)}",
        f"  {_clipping(config, table)}",
        f"  audit log: {config.audit_path}",
        "checked without connecting: nothing was sent",
    ]


def secure_aggregation(config: PartyConfig, *, insecure: bool = False) -> str:
    """What ``[secure_aggregation]`` lets the party do, its signing certificate checked; one line."""
    from collabcausal.certs import check_party_role, fingerprint
    from collabcausal.secagg import Signer

    peers = config.secure_aggregation
    if peers is None:
        return ('refused: no [secure_aggregation] section (add the peers\' fingerprints, `certs fingerprint`, '
                'or peers = "any")')
    conn = config.connection
    files = config.signing_files or (None if insecure or conn.insecure else (conn.cert, conn.key))
    if files is None:
        return f"{peers.describe()}; refused: no certificate signs this party's round keys (give cert and key)"
    signer = Signer.from_files(*files)  # type: ignore[arg-type]
    if check_party_role(signer.certificate, str(files[0])) != config.name:
        raise ConfigError(
            f"{files[0]} is the certificate of {signer.name!r}, not of this party {config.name!r}",
            f"sign round keys with {config.name}'s own certificate (`certs self-sign --party {config.name}`)",
        )
    return f"{peers.describe()}; this party's fingerprint for its peers: {fingerprint(signer.certificate)}"


def _out_of_core(table: PartyTable | ChunkedTable, operations: Iterable[str]) -> str:
    """For a table read out of core: its blocks, and the policy's operations it cannot answer."""
    from collabcausal.party.operations import lookup

    if table.in_memory:
        return ""
    refused = sorted(name for name in operations if not lookup(name).runs_on(table))
    note = f"; read out of core ({len(table.blocks)} row groups, {table.workers} workers)"
    return note + (f"; refuses {', '.join(refused)} (they need the table in memory)" if refused else "")


def _clipping(config: PartyConfig, table: PartyTable | ChunkedTable) -> str:
    """What every DP release would clip: values outside ``[ranges]``, counted here and never sent."""
    from collabcausal.party.clipping import values_outside

    if not config.ranges:
        return ("declared ranges: none in party.toml; add [ranges] (the study's, column = [lo, hi], the outcome as "
                "outcome) to count here what DP releases would clip (each release logs it too, never sends it)")
    counts = values_outside(table, config.ranges, config.data.get("outcome"))
    listed = ", ".join(f"{name} {k} of {table.n_subjects}" for name, k in counts.items())
    unknown = sorted(set(config.ranges) - set(counts) - {"outcome", config.data.get("outcome")})
    missing = f"; not columns of this table: {', '.join(unknown)}" if unknown else ""
    return (f"values outside the declared [ranges], clipped by every DP release (counted here, never sent): "
            f"{listed}{missing}")
