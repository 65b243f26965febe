"""Reconstruction attacks on DC-QE representations, as an honest-but-curious or colluding analyst would run them.

One module per attack (issue 9, item 4), each a function taking only the arrays the analyst holds
and public facts (:class:`~collabcausal.attacks.calibration.PublicInfo`), plus the truth for
scoring only, and returning an :class:`~collabcausal.attacks.metrics.AttackResult`:

(a) :mod:`~collabcausal.attacks.known_anchor`: least squares with a known (or guessed) anchor;
(b) :mod:`~collabcausal.attacks.secret_anchor`: ICA or moment matching on A~ under the anchor's public law;
(c) :mod:`~collabcausal.attacks.representation_ica`: ICA on X~ alone;
(d) :mod:`~collabcausal.attacks.many_requests`: several requests for the same subjects, stacked;
(e) :mod:`~collabcausal.attacks.collusion`: the analyst holds a row partner's anchor key.

:mod:`~collabcausal.attacks.dp_bound` bounds what any attack achieves on DP representations.
They measure what the representations leak (``benchmarks/bench_reconstruction.py``); no study
uses them.

The empirical DP audits live here too: :mod:`~collabcausal.attacks.privacy_audit` (every DP
operation of a party, through :meth:`Party.handle`, on neighbouring tables) and
:mod:`~collabcausal.attacks.dp_audit` (a Gaussian release on worst-case neighbours).
"""
