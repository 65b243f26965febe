"""The party role: private table, intermediate representations, DP queries, policy, ledger."""

from collabcausal.party.node import Party
from collabcausal.party.table import PartyTable

__all__ = ["Party", "PartyTable"]
