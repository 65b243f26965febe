"""Differentially private effect estimates from a few sums per party (study kind ``dp_effects``).

The math of docs/dp-effects.md, as pure functions on in-memory arrays (no I/O, no ledger): the
party operations in :mod:`collabcausal.party.dp_effects` call them on their own rows and the
analyst pools what they release (:mod:`collabcausal.analyst.dp_effects`).

* :mod:`.design` — the public feature map: covariates clipped to declared ranges, a site one-hot;
* :mod:`.folds` — cross-fitting folds by position, keyed by a party secret;
* :mod:`.statistics` — per-arm sufficient statistics of a fold and their L2 sensitivity;
* :mod:`.nuisances` — propensity and outcome models fitted from (noisy) statistics;
* :mod:`.scores` — bounded AIPW and Hajek-IPW score sums for ATE and ATT, and their ranges;
* :mod:`.pooling` — estimates, standard errors and DP noise shares from the pooled sums.
"""
