"""collabcausal: privacy-preserving causal inference across institutions.

Roles
-----
- :mod:`collabcausal.party`: a data holder's node (validation, intermediate representations,
  differentially private queries, policy, ledger, audit log).
- :mod:`collabcausal.analyst`: the study coordinator (collaborative representations, estimation).
- :mod:`collabcausal.estimators`: pure math on in-memory arrays.
- :mod:`collabcausal.protocol`: transports (in-process and gRPC with mutual TLS).
- :mod:`collabcausal.simulations`: datasets, grid partitioning, paper reproductions.
"""

from collabcausal.errors import CollabCausalError

__version__ = "0.1.0"
__all__ = ["CollabCausalError", "__version__"]
