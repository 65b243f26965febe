"""How well any attack can correlate with a column after a DP representation (docs/threat-model.md).

Each party's DP representation (:mod:`collabcausal.party.dp_representation`) releases a subject's
row as ``v(x) + N(0, sigma^2 I)`` with ``v`` a fixed map whose values lie within L2 distance
``Delta`` of each other (the sensitivity). Let a subject's values be drawn independently of the
other subjects' (the usual sampling model), let ``f`` be any attack that outputs a guess for the
subject from everything the analyst holds (the subject's noisy rows from every party of its row
group, the other subjects' rows, public information), and ``s`` any function of the subject's true
values (e.g. one covariate). Then

    corr(f, s)^2  <=  c / (2 + c),    c = exp(sum_j mu_j^2) - 1,   mu_j = Delta_j / sigma_j.

Proof. Write ``m(x) = E[f | x]``. Since ``f - m(x)`` is uncorrelated with every function of ``x``,
``corr(f, s)^2 = Cov(m, s)^2 / (Var f Var s) <= Var m / Var f``. Given ``x``, the analyst's view is
the product of the subject's Gaussian rows ``N(v_j(x), sigma_j^2 I)`` and the other subjects' rows
(independent of ``x``), so the chi-square divergence between the views under ``x`` and ``x'`` is
``exp(sum_j ||v_j(x) - v_j(x')||^2 / sigma_j^2) - 1 <= c``. By Cauchy-Schwarz,
``|m(x) - m(x')| <= sqrt(c) sd(f | x')``; averaging over independent ``x, x'`` gives
``Var m = E(m(x) - m(x'))^2 / 2 <= (c / 2) E Var(f | x)``, and with
``Var f = Var m + E Var(f | x)`` the bound follows. It depends only on the mechanism's
``mu = Delta / sigma`` (its Gaussian-DP parameter, Dong, Roth & Su 2022), so it is what the
(epsilon, delta) calibration allows, whatever the attack.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def correlation_bound(mus: Iterable[float]) -> float:
    """Largest |corr| any attack can reach with a function of a subject's values (module docstring).

    Parameters
    ----------
    mus : iterable of float
        ``Delta_j / sigma_j`` of every DP release that covers the subject.
    """
    c = math.expm1(sum(float(mu) ** 2 for mu in mus))
    return math.sqrt(c / (2.0 + c))
