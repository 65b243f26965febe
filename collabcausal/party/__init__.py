"""The party role: private table, intermediate representations, DP queries, policy, ledger.

Importing this package registers every party operation: each module named in
``OPERATION_MODULES`` defines operations with :func:`collabcausal.party.operations.operation`.
"""

import importlib

from collabcausal.party.node import Party
from collabcausal.party.table import PartyTable

OPERATION_MODULES: tuple[str, ...] = (
    "representation",
    "dp_representation",
    "balance",
    "dp_balance",
    "dp_queries",
    "alignment",
    "discovery",
    "discovery_vote",
    "dp_effects",
    "secagg",
    "vertical.statistics",
    "vertical.scores",
)

for _module in OPERATION_MODULES:
    importlib.import_module(f"collabcausal.party.{_module}")

__all__ = ["OPERATION_MODULES", "Party", "PartyTable"]
