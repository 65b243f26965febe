"""The party side of vertical ``dp_effects``: two parties hold different covariates of the same subjects.

A row group's label holder L (T, Y, its covariates) and one other party P (other covariates of the same,
aligned subjects) compute the study's two releases without either, or the coordinator, seeing the
other's per-subject values (docs/dp-effects-vertical.md). Each release is three operations, relayed
by the coordinator, each checked before anything is charged:

==================  ==============================  ==============================  ===========================
release             key owner encrypts (charged)    evaluator totals (charged)      key owner opens
==================  ==============================  ==============================  ===========================
statistics          L ``vertical_statistics_        P ``vertical_statistics_        L ``vertical_statistics_
                    columns``                       totals``                        open``
scores              P ``vertical_scores_columns``   L ``vertical_scores_totals``    P ``vertical_scores_open``
==================  ==============================  ==============================  ===========================

Both parties charge each release (``rho``-zCDP under the ledger's one relation, substitution of one
subject's whole record) before computing: the key owner when it encrypts, the evaluator once it has
verified what it was relayed. Each adds a DP noise share that alone gives the release's guarantee (the
evaluator inside the encrypted total, the key owner when it opens), so a coordinator that colludes
with the other party still faces this party's share. What travels is signed (:mod:`collabcausal.vertical.transcript`)
and checked against the party's pinned peers (party.toml ``[secure_aggregation] peers``).

Modules: :mod:`.request` (the public terms both parties check), :mod:`.rounds` (the key owner's round
state), :mod:`.statistics` and :mod:`.scores` (the operations).
"""
