"""Propensity-score matching: 1:1 nearest neighbour on |e_k - e_l|, with replacement.

Paper 003 (section 3 and DESIGN.md "Estimators"): the unobserved potential outcome of a subject is
the observed outcome of its nearest neighbour in the other arm on the propensity score,

    ATE = (1/n) sum_k (Y^_k(1) - Y^_k(0)),        ATT = (1/n1) sum_{T_k = 1} (Y_k - Y_match(k)).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.blocks import row_blocks
from collabcausal.estimators.results import EffectEstimate, wald_interval
from collabcausal.estimators.sandwich import LogisticNuisance, logistic_nuisance
from collabcausal.estimators.validation import check_estimand, check_propensity, check_treatment, check_vector


def nearest_neighbor_match(query_scores: ArrayLike, pool_scores: ArrayLike) -> NDArray[np.intp]:
    """For each query score, the index into ``pool_scores`` of the nearest pool score.

    O((n_query + n_pool) log(n_query + n_pool)): the pool and the queries are sorted once, and the
    sorted queries located in the sorted pool by binary search (``np.searchsorted``; sorted
    queries keep it cache-friendly); only the two pool scores around the insertion point can be
    nearest.

    Tie rule (deterministic): at equal distance the candidate with the smaller pool score wins;
    among equal pool scores the one with the lowest original index wins (the minimum index of each
    run of equal sorted scores, so the result does not depend on the sorting algorithm).

    Parameters
    ----------
    query_scores : array-like of shape (n_query,)
    pool_scores : array-like of shape (n_pool,), n_pool >= 1

    Returns
    -------
    ndarray of int, shape (n_query,)
    """
    q = check_vector(query_scores, "query_scores")
    pool = check_vector(pool_scores, "pool_scores")
    if pool.size == 0:
        raise InputError("pool_scores is empty: there is nobody to match to", "pass at least one pool score")
    order = np.argsort(pool)
    s = pool[order]
    new_run = np.empty(s.size, dtype=bool)
    new_run[0] = True
    np.not_equal(s[1:], s[:-1], out=new_run[1:])
    run_id = np.cumsum(new_run) - 1
    run_min = np.minimum.reduceat(order, np.flatnonzero(new_run))  # lowest original index per score
    q_order = np.argsort(q)
    qs = q[q_order]
    right = np.searchsorted(s, qs, side="left")  # s[right - 1] < q <= s[right]
    left = np.maximum(right - 1, 0)
    right = np.minimum(right, s.size - 1)  # beyond either end, left == right
    take_right = (s[right] - qs) < (qs - s[left])
    out = np.empty(q.size, dtype=np.intp)
    out[q_order] = run_min[run_id[np.where(take_right, right, left)]]
    return out


def psm(
    y: ArrayLike,
    t: ArrayLike,
    e: ArrayLike,
    estimand: str = "ate",
    caliper: float | None = None,
    *,
    compute_se: bool = True,
    alpha: float = 0.05,
    X_propensity: ArrayLike | LogisticNuisance | None = None,
    check_input: bool = True,
) -> EffectEstimate:
    """Propensity-score matching estimate of the ATE or ATT (paper 003; DESIGN.md "Estimators").

    Each subject (ATE) or each treated subject (ATT) is matched, with replacement, to the subjects
    of the other arm with the nearest propensity score; **all tied nearest subjects are averaged**
    (Abadie & Imbens 2006, section 2: M = 1 with ties, each of the ``M_k`` tied matches weighted
    ``1 / M_k``). The estimate therefore depends on the values only, never on the row order.

    Parameters
    ----------
    y : array-like of shape (n,)
        Outcomes.
    t : array-like of shape (n,)
        Treatment, coded 0/1.
    e : array-like of shape (n,)
        Propensity scores in (0, 1).
    estimand : {"ate", "att"}
    caliper : float or None
        Maximum |e_k - e_match| on the propensity scale; subjects without a match that close are
        dropped from the estimate (counted in ``diagnostics["n_unmatched"]``). None: no caliper.
    compute_se : bool, default True
        Compute the Abadie–Imbens standard error and the influence values (False skips them, e.g.
        inside a bootstrap loop).
    alpha : float, default 0.05
        Level of the normal interval.
    X_propensity : array-like of shape (n, m) or LogisticNuisance, optional
        Covariates the propensity was fitted on by ``LogisticPropensity()`` (unpenalized, with an
        intercept, unclipped; checked through the score equations). Given (and no caliper), the
        SE carries the Abadie–Imbens (2016) correction for the estimated propensity
        (:func:`_estimated_propensity_adjustment`). Or their
        :class:`~collabcausal.estimators.sandwich.LogisticNuisance`, shared by the estimators on one propensity.
    check_input : bool, default True
        Check ``y``, ``t`` and ``e``. False (as in scikit-learn) takes them as checked already: a
        float64 ``y``, ``t`` as :func:`~collabcausal.estimators.validation.check_treatment` returns
        it and ``e`` as :func:`~collabcausal.estimators.validation.check_propensity` does, of one
        length (:func:`~collabcausal.analyst.effects.estimate_effects` checks them once for its
        three estimators).

    Returns
    -------
    EffectEstimate
        ``se`` is the Abadie–Imbens (2006) standard error (see :func:`_abadie_imbens_variance`), with
        the Abadie–Imbens (2016) correction when ``X_propensity`` is given; None when an arm has
        a single subject, when the corrected variance is not positive, or with
        ``compute_se=False``; with a normal interval. ``diagnostics["se_kind"]`` says which.
        ``n_treated``/``n_control`` are the arm sizes given.
        Diagnostics: ``match_weights`` (per subject, its weight in the matched sample used for
        balance: ATT, treated 1 and control ``K_k``, the sum of ``1 / M`` over the queries it
        matches; ATE, 1 + ``K_k``; 0 for dropped subjects), ``n_matches`` (per query subject, the
        number of tied nearest matches, 0 when dropped or not a query), ``n_tied_queries``
        (queries with more than one nearest match), ``n_unmatched``, ``n_matched_controls`` and
        ``n_matched_treated``; with ``compute_se``, ``influence``: the linear representation
        ``estimate = sum_k a_k y_k`` with the matches held fixed, as ``n a_k (y_k - mean of k's
        arm)`` centred to mean 0 (used only for the BCa acceleration; the bootstrap is not valid
        for matching estimators, Abadie & Imbens 2008).
    """
    estimand = check_estimand(estimand)
    if check_input:
        t = check_treatment(t)
        y = check_vector(y, "y", n=t.size)
        e = check_propensity(e, "propensity", n=t.size)
    n = t.size
    if caliper is not None and not (np.isfinite(caliper) and caliper > 0.0):
        raise InputError(f"caliper must be a finite number > 0, got {caliper!r}", "pass e.g. caliper=0.05 or None")
    is_t = t == 1
    is_query = is_t if estimand == "att" else np.ones(n, dtype=bool)
    ties = TiedMatches(e, y, t, is_query, caliper, every_effect=compute_se)
    kept = ties.kept
    if not kept.any():
        raise InputError(
            f"no subject has a match within the caliper {caliper:g}",
            "widen the caliper or check the overlap of the propensity scores",
        )
    weights, factor = ties.pool_weights(variance=compute_se)
    diff = ties.effect if kept.all() else ties.effect[kept]
    estimate = float(diff.sum() / diff.size)
    se, se_kind = None, "not computed"
    if compute_se:
        var = _abadie_imbens_variance(ties.within_arm_variance(), factor, diff, estimate)
        se_kind = "propensity known (Abadie-Imbens 2006)"
        if var is not None and X_propensity is not None and caliper is None:
            logistic = logistic_nuisance(X_propensity, t, e)
            var -= _estimated_propensity_adjustment(logistic, y, t, e, estimate, estimand, ties)
            se_kind = "propensity estimated (Abadie-Imbens 2016)"
        se = None if var is None or var <= 0.0 else float(np.sqrt(var))
        if se is None:
            se_kind = "unavailable"
    lo, hi = (None, None) if se is None else wald_interval(estimate, se, alpha)
    n_kept = diff.size
    del diff
    per_subject = ties.count
    n_treated = int(np.count_nonzero(is_t))
    diagnostics = {
        "match_weights": weights,
        "n_matches": per_subject,
        "n_tied_queries": int(np.count_nonzero(per_subject > 1)),
        "n_unmatched": int(np.count_nonzero(is_query) - n_kept),
        "n_matched_treated": int(np.count_nonzero(weights[is_t])),
        "n_matched_controls": int(np.count_nonzero(weights[~is_t])),
        "caliper": caliper,
        "se_kind": se_kind,
    }
    if compute_se:
        diagnostics["influence"] = _linear_influence(y, is_t, weights, n_kept)
    return EffectEstimate(
        estimate=estimate,
        se=se,
        ci_low=lo,
        ci_high=hi,
        estimand=estimand,
        method="psm",
        n_treated=n_treated,
        n_control=n - n_treated,
        diagnostics=diagnostics,
    )


def _linear_influence(
    y: NDArray[np.float64], is_t: NDArray[np.bool_], weights: NDArray[np.float64], n_kept: int
) -> NDArray[np.float64]:
    """PSM's influence values: ``estimate = sum_k a_k y_k`` with ``a = +-weights / n_kept`` (matches held
    fixed), as ``n a_k (y_k - mean of k's arm)`` centred to mean 0 (:func:`psm`'s ``diagnostics``)."""
    influence = np.where(is_t, 1.0, -1.0)
    influence *= weights
    influence /= n_kept
    influence *= y.size
    centred = np.where(is_t, y[is_t].mean(), y[~is_t].mean())
    np.subtract(y, centred, out=centred)
    influence *= centred
    influence -= influence.mean()
    return influence


class TiedMatches:
    """Every subject's tied nearest subjects of the other arm on a score, summarised per run of equal scores.

    All scores are sorted once (stable: :func:`_argsort_ties_by_index`); each arm, read off in that
    order, is then sorted too, and is cut into runs of equal scores, whose sizes and outcome sums are
    kept. A subject's nearest
    subjects in the other arm are the whole run(s) of that arm at the smallest distance (two runs
    when it lies exactly midway), located by binary search of its (already sorted) arm in the
    other arm's run values: one O(n log n) sort, then O(n log n) searches that run through memory
    in order, for both arms at once. Each arm in score order also gives every subject's nearest
    subjects in its own arm (:meth:`within_arm_variance`).

    Parameters
    ----------
    scores, outcomes : ndarray of shape (n,)
    t : ndarray of int, shape (n,)
        Treatment coded 0/1, both arms present (as :func:`check_treatment` returns it).
    queries : ndarray of bool, shape (n,)
        The subjects whose matches count (those of the estimand).
    caliper : float or None, default None
        Queries without a match this close are not kept.
    every_effect : bool, default True
        Match every subject, queries or not (the ATT's Abadie-Imbens 2016 correction needs the
        controls' ``effect`` too). False: an arm without a query is not matched (the ATT's controls
        in a bootstrap replicate: half the work of its sorted searches); its subjects' ``effect`` is
        NaN, and the weights are the same.

    Attributes
    ----------
    order : ndarray of int, shape (n,)
        The stable argsort of ``scores`` (ties by index), for callers that need the sample sorted too.
    by_score : list of two ndarrays of int
        The control and the treated subjects (indices into the sample), by score, ties by index.
    effect : ndarray of shape (n,)
        Per subject, ``Y^(1) - Y^(0)``: its own outcome against the mean outcome of its tied nearest
        subjects in the other arm (NaN for an arm left unmatched, ``every_effect=False``).
    kept : ndarray of bool, shape (n,)
        The queries with a match within the caliper (all queries without one).
    count : ndarray of int, shape (n,)
        Per kept query, the number of its tied nearest subjects in the other arm (``M_k``); 0 for the
        other subjects.
    """

    def __init__(
        self,
        scores: NDArray[np.float64],
        outcomes: NDArray[np.float64],
        t: NDArray[np.int8],
        queries: NDArray[np.bool_],
        caliper: float | None = None,
        every_effect: bool = True,
    ) -> None:
        n = scores.size
        self.order, self.by_score, sorted_scores = _arms_by_score(scores, t)
        self.effect = np.empty(n)
        distance = None if caliper is None else np.empty(n)
        self.count = np.empty(n, dtype=np.intp)
        self._scores, self._outcomes = scores, outcomes  # references, for within_arm_variance
        self._queries = queries
        self._pool: list[_RunMatches | None] | None = []
        for w in (0, 1):
            query = self.by_score[1 - w]
            if not every_effect and not queries[query].any():  # nothing of this arm's matches is used
                self.effect[query] = np.nan
                self.count[query] = 0
                self._pool.append(None)
                continue
            out = (self.effect, distance)  # the effect holds the matched mean outcome first
            matches = _RunMatches(sorted_scores[w], outcomes[self.by_score[w]], sorted_scores[1 - w], out, query)
            self.count[query] = matches.count
            self._pool.append(matches)
        self.kept = queries if distance is None else queries & (distance <= caliper)
        self.count[~self.kept] = 0
        np.subtract(self.effect, outcomes, out=self.effect)  # control: mean matched outcome - own
        np.negative(self.effect, out=self.effect, where=t == 1)  # treated: own - mean matched outcome

    def pool_weights(self, variance: bool = True) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
        """Per subject, its weight in the matched sample and its factor in :func:`_abadie_imbens_variance`.

        With ``K_k`` and ``Q_k`` the sums of ``1 / M_q`` and of ``1 / M_q^2`` over the kept queries q
        matched to k: the weight ``K_k``, plus 1 when k is a kept query itself, and the factor
        ``K_k^2 - Q_k``, plus ``2 K_k`` when k is a query (None with ``variance=False``: neither Q
        nor the factor is formed). Once: the per-run matchers are released.
        """
        if self._pool is None:
            raise RuntimeError("TiedMatches.pool_weights was already called: its matchers are released")
        n = self.kept.size
        k_sum = np.zeros(n)  # a pool no kept query was matched in weighs 0
        k_sq = np.zeros(n) if variance else None
        for w, matches in enumerate(self._pool):
            if matches is not None:
                pool = self.by_score[w]
                k_sum[pool], sq = matches.pool_weights(self.kept[self.by_score[1 - w]], variance)
                if k_sq is not None:
                    k_sq[pool] = sq
        self._pool = None
        factor = None
        if k_sq is not None:
            factor = k_sum**2  # K^2 + 2 K (queries) - Q, in place
            twice = 2.0 * k_sum
            twice *= self._queries
            factor += twice
            factor -= k_sq
            del k_sq, twice
        k_sum += self.kept
        return k_sum, factor

    def within_arm_variance(self) -> NDArray[np.float64]:
        """sigma^2_k = mean over j of (Y_k - Y_j)^2 / 2, j the tied nearest other subjects of k's arm on the score.

        Abadie & Imbens (2006), J = 1, with ties averaged so the result does not depend on row
        order: subjects sharing k's score are its nearest (distance 0); otherwise the nearest
        run(s) of equal scores on either side. NaN for a subject alone in its arm.
        """
        out = np.full(self.count.size, np.nan)
        for arm in self.by_score:
            if arm.size >= 2:
                _within_sorted_variance(self._scores, self._outcomes, arm, out)
        return out


def _arms_by_score(
    scores: NDArray[np.float64], t: NDArray[np.int8]
) -> tuple[NDArray[np.intp], list[NDArray[np.intp]], list[NDArray[np.float64]]]:
    """The stable argsort of ``scores``, and each arm (control, treated) by score: its subjects and their scores."""
    order, s = _argsort_ties_by_index(scores)
    treated_sorted = t[order] == 1
    # positions in the sorted sample of each arm: its subjects by score (ties by index)
    positions = [np.flatnonzero(~treated_sorted), np.flatnonzero(treated_sorted)]
    return order, [order[p] for p in positions], [s[p] for p in positions]


class _RunMatches:
    """Sorted queries' tied nearest subjects among sorted pool scores, per run of equal pool scores.

    Parameters
    ----------
    pool_scores : ndarray of shape (n_pool,), sorted, n_pool >= 1
    pool_outcomes : ndarray of shape (n_pool,)
    query_scores : ndarray of shape (n_query,), sorted
    out : (ndarray, ndarray or None)
        Written at ``at`` with each query's mean outcome of its tied nearest pool subjects and their
        distance to it (the caller's per-subject arrays, None: no distances; the matcher keeps only
        what :meth:`pool_weights` needs, in 32-bit integers and booleans).
    at : ndarray of int, shape (n_query,)
        The queries' positions in ``out``.

    Attributes
    ----------
    count : ndarray of int32, shape (n_query,)
        Per query, its number of tied nearest pool subjects.
    """

    def __init__(
        self,
        pool_scores: NDArray[np.float64],
        pool_outcomes: NDArray[np.float64],
        query_scores: NDArray[np.float64],
        out: tuple[NDArray[np.float64], NDArray[np.float64] | None],
        at: NDArray[np.intp],
    ) -> None:
        # runs 1..R between sentinel runs at -inf and +inf (size 0), so no query falls off either end
        self._new_run, starts, values, run_size, run_sum = _sorted_runs(pool_scores, pool_outcomes)
        del starts
        right = np.searchsorted(values, query_scores, side="left")  # values[right - 1] < q <= values[right]
        self._left = right.astype(np.int32)  # kept for pool_weights: 32 bits hold any run of fewer than 2^31
        self._left -= 1
        d_left = query_scores - values[self._left]
        d_right = values[right] - query_scores
        self._use_left, self._use_right = d_left <= d_right, d_right <= d_left
        if out[1] is not None:
            out[1][at] = np.minimum(d_left, d_right, out=d_left)
        del d_left, d_right
        run_size = run_size.astype(np.int32)
        self.count = run_size[self._left] * self._use_left
        self.count += run_size[right] * self._use_right
        total = run_sum[self._left] * self._use_left
        total += run_sum[right] * self._use_right
        total /= self.count
        out[0][at] = total

    def pool_weights(
        self, kept: NDArray[np.bool_], squares: bool = True
    ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
        """Per pool subject (sorted), the sums over kept queries of ``1 / M_q`` and (``squares``) of ``1 / M_q^2``."""
        runs = np.count_nonzero(self._new_run) + 2
        run_of = np.cumsum(self._new_run)  # runs are numbered from 1 (0 is the sentinel)
        inv = kept / self.count
        sums = [self._per_run(inv, runs)[run_of]]
        if squares:
            inv /= self.count
            sums.append(self._per_run(inv, runs)[run_of])
        return sums[0], (sums[1] if squares else None)

    def _per_run(self, value: NDArray[np.float64], runs: int) -> NDArray[np.float64]:
        """Per pool run, the sum of ``value`` over the queries matched to it (the nearer run on each side)."""
        out = np.bincount(self._left, value * self._use_left, minlength=runs)
        out += np.bincount(self._left + 1, value * self._use_right, minlength=runs)
        return out


def _within_sorted_variance(
    scores: NDArray[np.float64], outcomes: NDArray[np.float64], arm: NDArray[np.intp], out: NDArray[np.float64]
) -> None:
    """:meth:`TiedMatches.within_arm_variance` of one arm, written into ``out[arm]``.

    ``arm`` holds the arm's subjects (two or more) by score. Per run of equal scores first
    (:func:`_within_run_sums`), then per subject block by block of rows.
    """
    ys = outcomes[arm]
    new_run, single, run_other, run_s1, run_s2 = _within_run_sums(scores[arm], ys)
    before = 0  # runs before the block (they are numbered from 1; 0 and the last are the sentinels)
    for rows in row_blocks(arm.size):
        run = np.cumsum(new_run[rows])
        run += before
        before = run[-1]
        y = ys[rows]
        shared = ~single[run]
        n_other = run_other[run]
        sum1 = run_s1[run]
        np.subtract(sum1, y, out=sum1, where=shared)  # the sum over j != k of (y_k - y_j)^2 has no j = k term
        sum2 = run_s2[run]
        square = y * y
        np.subtract(sum2, square, out=sum2, where=shared)
        value = n_other * y  # 0.5 (n_other y^2 - 2 y sum1 + sum2) / n_other
        value *= y
        np.multiply(2.0, y, out=square)
        square *= sum1
        value -= square
        value += sum2
        value /= n_other
        value *= 0.5
        out[arm[rows]] = value


def _within_run_sums(
    scores: NDArray[np.float64], ys: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The neighbours within its arm of each run of equal sorted ``scores``, for :func:`_within_sorted_variance`.

    Returns ``(new_run, single, n_other, sum1, sum2)``: whether each subject starts a run, and per
    run whether it holds one subject, the number of a member's neighbours and the sum and sum of
    squares of ``ys`` over them: its other members (the sums over all members: each subject takes
    itself off) or, for a run of one, the nearest run(s) on either side (infinitely far past a
    sentinel).
    """
    new_run, starts, v, run_size, s1 = _sorted_runs(scores, ys)
    s2 = np.zeros(v.size)
    s2[1:-1] = np.add.reduceat(ys * ys, starts)
    use_l, use_r = _nearer_sides(v)
    size = run_size.astype(np.float64)
    del starts, v, run_size  # per-run arrays the sums below no longer need
    single = size == 1.0
    n_other = _nearest_or_own(size, size - 1.0, single, use_l, use_r)
    _nearest_or_own(s1, s1, single, use_l, use_r)
    _nearest_or_own(s2, s2, single, use_l, use_r)
    return new_run, single, n_other, s1, s2


def _nearer_sides(v: NDArray[np.float64]) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Per inner run of the sorted run values ``v``, whether its left and its right neighbour is the nearer.

    Both when equally near; ``v`` has a sentinel at each end.
    """
    d_left, d_right = v[1:-1] - v[:-2], v[2:] - v[1:-1]
    return d_left <= d_right, d_right <= d_left


def _nearest_or_own(
    a: NDArray[np.float64],
    own: NDArray[np.float64],
    single: NDArray[np.bool_],
    use_l: NDArray[np.bool_],
    use_r: NDArray[np.bool_],
) -> NDArray[np.float64]:
    """Per run, ``own`` (overwritten), or for a run of one subject the sum of ``a`` over its nearest run(s)."""
    near = a[:-2] * use_l
    near += a[2:] * use_r
    np.copyto(own[1:-1], near, where=single[1:-1])
    return own


def _sorted_runs(
    scores: NDArray[np.float64], outcomes: NDArray[np.float64] | None = None
) -> tuple[NDArray[np.bool_], NDArray[np.intp], NDArray[np.float64], NDArray[np.intp], NDArray[np.float64] | None]:
    """The runs of equal values of sorted ``scores`` (at least one).

    Returns ``(new_run, starts, values, size, outcome_sum)``: whether each score starts a run, the
    runs' first positions, and per run its score, its number of subjects and the sum of their
    ``outcomes`` (None without them), the last three with empty sentinel runs at -inf and +inf
    around the R runs (numbered 1 .. R).
    """
    new_run = np.empty(scores.size, dtype=bool)
    new_run[0] = True
    np.not_equal(scores[1:], scores[:-1], out=new_run[1:])
    starts = np.flatnonzero(new_run)
    runs = starts.size + 2
    values = np.empty(runs)
    values[0], values[-1] = -np.inf, np.inf
    values[1:-1] = scores[starts]
    size = np.zeros(runs, dtype=np.intp)
    np.subtract(starts[1:], starts[:-1], out=size[1:-2])  # each run to the next one's start, the last to the end
    size[-2] = scores.size - starts[-1]
    if outcomes is None:
        return new_run, starts, values, size, None
    outcome_sum = np.zeros(runs)
    outcome_sum[1:-1] = np.add.reduceat(outcomes, starts)
    return new_run, starts, values, size, outcome_sum


def _argsort_ties_by_index(scores: NDArray[np.float64]) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """``np.argsort(scores, kind="stable")`` and the sorted scores, for finite scores, faster.

    One SIMD sort of 64-bit keys instead of an argsort: each key is the score's bit pattern mapped
    to an unsigned integer of the same order, its low ``b`` bits replaced by the subject's index
    (``2**b >= n``). Sorted, the keys order the subjects by score truncated to ``64 - b`` bits, then
    by index: equal scores are in index order, and only distinct scores that agree in their leading
    bits can be out of order; the groups holding such a descent (rare: scores within about
    ``2**(b - 52)`` relative of each other) are re-sorted exactly by (score, index).
    """
    n = scores.size
    shift = np.uint64(max(1, (n - 1).bit_length()))
    key = _order_keys(scores)
    key >>= shift
    key <<= shift
    key |= np.arange(n, dtype=np.uint64)
    key.sort()
    key &= (np.uint64(1) << shift) - np.uint64(1)
    order = key.view(np.intp)  # the indices (below 2**63), in place of the keys
    s = scores[order]
    descent = s[1:] < s[:-1]
    if descent.any():
        truncated = _order_keys(s)
        truncated >>= shift  # the sorted keys' leading bits
        group = np.cumsum(np.r_[True, truncated[1:] != truncated[:-1]])
        pos = np.flatnonzero(np.isin(group, group[1:][descent]))
        exact = np.lexsort((order[pos], s[pos], group[pos]))
        order[pos] = order[pos][exact]
        s[pos] = s[pos][exact]
    return order, s


def _order_keys(x: NDArray[np.float64]) -> NDArray[np.uint64]:
    """Each finite value's bit pattern as an unsigned integer of the same order (-0.0 as 0.0), in a new array."""
    key = (x + 0.0).view(np.uint64)  # + 0.0 turns -0.0 into 0.0, which compares equal to it
    flip = key >> np.uint64(63)  # 1 for a negative value
    np.negative(flip, out=flip)  # every bit set for a negative value (unsigned wrap-around), none otherwise
    flip |= np.uint64(1 << 63)
    key ^= flip
    return key


def _abadie_imbens_variance(
    sigma2: NDArray[np.float64], factor: NDArray[np.float64], diff: NDArray[np.float64], estimate: float
) -> float | None:
    """Abadie & Imbens (2006, Econometrica 74(1), Theorem 7) variance of matching with replacement.

    With ``K_k = sum_q w_qk`` the total weight of subject k as a match (``w_qk = 1 / M_q`` over the
    ``M_q`` tied matches of query q), ``Q_k = sum_q w_qk^2``, and sigma^2_k its conditional outcome
    variance (estimated by :meth:`TiedMatches.within_arm_variance`), over the N kept query subjects::

        ATE: V = (1/N^2) [sum (Y^_k(1) - Y^_k(0) - ATE)^2 + sum_k (K_k^2 + 2 K_k - Q_k) sigma^2_k]
        ATT: V = (1/N1^2) [sum_{T=1} (Y_k - Y^_k(0) - ATT)^2 + sum_{T=0} (K_k^2 - Q_k) sigma^2_k]

    With M matches for every query (``w = 1/M``) these are the paper's ``(K/M)^2 + ((2M-1)/M)(K/M)``
    and ``(K/M)^2 - K/M^2``; with M = 1, ``K^2 + K`` and ``K (K - 1)``. ``factor`` is
    :meth:`TiedMatches.pool_weights`' ``K^2 - Q`` plus ``2 K`` for the queries: every subject for
    the ATE, and for the ATT the treated, whose K and Q are 0 (no kept query matches them). The
    propensity is treated as known here (:func:`_estimated_propensity_adjustment` corrects for its
    estimation). None when an arm has a single subject.
    """
    involved = factor > 1e-12
    if np.isnan(sigma2[involved]).any():
        return None
    return float((np.sum((diff - estimate) ** 2) + factor[involved] @ sigma2[involved]) / diff.size**2)


COVARIANCE_NEIGHBOURS = 2  # L of the Abadie-Imbens (2016) covariance estimates (Stata's default nn(2))


def _estimated_propensity_adjustment(
    logistic: LogisticNuisance,
    y: NDArray[np.float64],
    t: NDArray[np.int8],
    e: NDArray[np.float64],
    estimate: float,
    estimand: str,
    ties: TiedMatches,
) -> float:
    """The amount to subtract from the variance for matching on an estimated logistic propensity.

    Abadie & Imbens (2016, Econometrica 84(2), Theorems 1 and 2), with ``f_k = e_k (1 - e_k)`` the
    logistic density at the index, x the design ``[1, X]``, ``I = sum_k f_k x_k x_k'`` the Fisher
    information of the whole sample and ``cov_w,k = cov(x, Y | e = e_k, T = w)``::

        ATE: V_adj = V - c' I^{-1} c,                  c = (1/n) sum_k f_k (cov_1,k / e_k + cov_0,k / (1 - e_k))
        ATT: V_adj = V - c' I^{-1} c + d' I^{-1} d,    c = (1/n1) sum_k f_k (cov_1,k + e_k/(1 - e_k) cov_0,k)
                                                       d = (1/n1) sum_k f_k x_k (Y^_k(1) - Y^_k(0) - ATT)

    so this returns ``c' I^{-1} c`` (ATE) or ``c' I^{-1} c - d' I^{-1} d`` (ATT). ``cov_w,k`` is
    the sample covariance of (x, Y) over the ``L = 2`` subjects of arm w nearest to k on e
    (k itself included when it is in arm w; whole runs of tied scores, so row order never
    matters), as in the paper's section 4 and Stata's ``teffects psmatch``. ``ties`` is the
    matching on ``e``, whose sorted sample and arms the neighbourhoods are read off (they do not
    depend on the order among equal scores), and whose ``effect`` is every subject's own
    ``Y^_k(1) - Y^_k(0)``, its mean matched outcome in the other arm standing for the missing one:
    the ATT needs the controls' too.
    """
    n = t.size
    D = logistic.design
    n1 = int(np.count_nonzero(t))
    # c = sum_k g_w,k cov_w,k over both arms, with g the weights of c above and cov_w,k the
    # covariance over the neighbourhood N_w(k) of k in arm w:
    # cov_w,k = (sum_N D_j y_j - (sum_N D_j)(sum_N y_j) / M_k) / (M_k - 1), M_k = |N_w(k)|, so
    # c = sum_j D_j (y_j a_j - b_j) with a_j, b_j the sums over the queries k whose neighbourhood
    # holds j of g_k / (M_k - 1) and g_k (sum_N y) / (M_k (M_k - 1)): no per-query covariance is formed.
    pooled = np.zeros(n)  # y_j a_j - b_j per subject (j in its own arm's pool)
    for w, pool in enumerate(ties.by_score):
        pooled[pool] = _pooled_covariance_weights(e[pool], y[pool], e, ties.order, w, estimand)
    c = D.tdot(pooled) / (n if estimand == "ate" else n1)
    information_inverse = logistic.information_inverse / n  # inverse of the whole-sample information
    if estimand == "ate":
        return float(c @ information_inverse @ c)
    d = D.tdot(e * (1.0 - e) * (ties.effect - estimate)) / n1
    return float(c @ information_inverse @ c - d @ information_inverse @ d)


def _pooled_covariance_weights(
    pool_scores: NDArray[np.float64],
    pool_outcomes: NDArray[np.float64],
    scores: NDArray[np.float64],
    order: NDArray[np.intp],
    arm: int,
    estimand: str,
) -> NDArray[np.float64]:
    """``y_j a_j - b_j`` for the subjects j of one arm (:func:`_estimated_propensity_adjustment`).

    ``pool_scores`` (sorted) and ``pool_outcomes`` are the arm's; the queries are every subject,
    by score (``scores[order]``), taken block by block of rows. A query's neighbourhood is its at
    least :data:`COVARIANCE_NEIGHBOURS` nearest pool subjects, runs of equal pool scores taken whole
    (:func:`_expand_runs`), so it depends on the values only, never on the row order; it is a
    contiguous range of the sorted runs, over which the query's ``sum_N y`` is summed and onto
    which its weights ``a_k = g_k / (M_k - 1)`` and ``b_k = a_k (sum_N y) / M_k`` are spread (g of
    :func:`_covariance_query_weights`). Sorted, a block's queries touch a short range of runs, so
    no per-query array of the whole sample is formed.
    """
    new_run, starts, values, run_size, run_sum = _sorted_runs(pool_scores, pool_outcomes)
    run_count = run_size.astype(np.float64)
    del starts, run_size
    spread_a, spread_b = np.zeros(values.size), np.zeros(values.size)
    for rows in row_blocks(order.size):
        q = scores[order[rows]]
        lo, hi, count = _expand_runs(values, run_count, q, COVARIANCE_NEIGHBOURS)
        a = _covariance_query_weights(q, arm, estimand)
        a /= count - 1.0
        # run lo + k of each neighbourhood (k = 0 .. width - 1), or none past its end
        inside = [np.ones(q.size, dtype=bool)] + [lo + k < hi for k in range(1, int(np.max(hi - lo)))]
        b = run_sum[lo]
        for k, held in enumerate(inside[1:], start=1):
            b += run_sum[np.where(held, lo + k, 0)]  # run 0 is the empty sentinel
        b *= a
        b /= count
        base = lo[0]  # the queries are sorted, so are their first runs
        span = slice(base, int(np.max(hi)))
        for k, held in enumerate(inside):
            local = np.where(held, lo + k, lo) - base
            spread_a[span] += np.bincount(local, np.where(held, a, 0.0), minlength=span.stop - base)
            spread_b[span] += np.bincount(local, np.where(held, b, 0.0), minlength=span.stop - base)
    del values, run_count, run_sum
    run_of = np.cumsum(new_run)  # runs are numbered from 1 (0 is the sentinel)
    pooled = spread_a[run_of]
    pooled *= pool_outcomes
    pooled -= spread_b[run_of]
    return pooled


def _covariance_query_weights(s: NDArray[np.float64], arm: int, estimand: str) -> NDArray[np.float64]:
    """The weights ``g_w,k`` of ``cov_w,k`` in ``c`` (:func:`_estimated_propensity_adjustment`) for scores ``s``."""
    g = s * (1.0 - s)  # f_k, then g_w,k in place
    if estimand == "ate":
        g /= s if arm == 1 else 1.0 - s
    elif arm == 0:
        g *= s
        g /= 1.0 - s
    return g


def _expand_runs(
    values: NDArray[np.float64], run_count: NDArray[np.float64], q: NDArray[np.float64], size: int
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.float64]]:
    """Each query's neighbourhood among runs of scores ``values`` holding ``run_count`` subjects.

    The neighbourhoods of :func:`_pooled_covariance_weights`: runs of equal pool scores are taken
    whole and the nearer run on either side is added first (both when equally near) until the
    count reaches ``size``.

    ``values`` starts with -inf and ends with +inf, two empty runs that are never taken (a query
    stops growing once both its next runs are sentinels). Returns (lo, hi, count): each query's
    neighbourhood is the runs ``lo .. hi - 1``. Each pass adds a subject or more to every query still
    growing, so there are at most ``size`` passes, over the whole block.
    """
    last = values.size - 1
    right = np.searchsorted(values, q, side="left")  # values[right - 1] < q <= values[right]
    left = right - 1
    count = np.zeros(q.size)
    growing = np.ones(q.size, dtype=bool)
    while growing.any():
        d_left, d_right = q - values[left], values[right] - q  # infinite at a sentinel
        take_left = growing & (d_left <= d_right)
        take_right = growing & (d_right <= d_left)
        count += run_count[left] * take_left + run_count[right] * take_right
        left -= take_left
        right += take_right
        growing &= (count < size) & ((left > 0) | (right < last))
    return left + 1, right, count
