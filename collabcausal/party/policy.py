"""What a party allows, enforced on every request whatever the analyst asks.

A :class:`PartyPolicy` is the ``[policy]`` section of ``party.toml``. :meth:`PartyPolicy.authorize`
runs in :meth:`collabcausal.party.node.Party.handle` before any operation, in process and over
gRPC alike, and refuses with a :class:`~collabcausal.errors.PolicyError` naming the rule:

* ``operations``: only the listed operations run;
* ``columns``: the party's table may hold only these covariates, and a request naming columns
  (``params["columns"]``) may name only these;
* ``min_subjects``: the table, a resample (``rows``: distinct subjects) and every arm of a weighted
  request (``arms`` + ``weights``: distinct subjects whose summed weight is at least
  ``min_weight_ratio`` times the arm's largest) must cover at least this many subjects, so that no
  reply describes a handful of people (e.g. a one-hot weight vector, or weight 1 on one subject and
  1e-300 on the rest, would otherwise return one subject's covariates); ``arms`` and ``weights``
  must be 1-D, one value per requested row; exact weighted replies (``weighted_moments``) are also
  checked against differencing (:mod:`collabcausal.party.differencing`), DP ones
  (``dp_weighted_moments``) are not: the ledger composes their cost;
* differentially private operations need a privacy ledger (the ``[privacy]`` section);
* the DC-QE reduction (paper 003, section 4.2; docs/threat-model.md): ``dc_representation`` may ask
  for at most ``max_components`` components, by default strictly fewer than the party's covariates
  (a full-rank representation is an invertible affine image of the rows: only with
  ``allow_full_rank = true``); a variance fraction is refused unless full rank is allowed (its
  number of components is data-dependent); ``r`` must lie in ``[min_anchors, max_anchors]``; and at
  most ``max_representation_requests`` requests per study are answered (a study with B bootstrap
  replicates asks B + 1; a later block of anchor rows of the same request is not a new fit and
  not counted: :func:`~collabcausal.party.representation.continues_representation`), counted
  under the study the party joined (a request naming another is refused by
  :meth:`~collabcausal.party.node.Party.handle`) in its persisted request state
  (:mod:`collabcausal.party.request_state`), so neither a renamed study nor a restart resets it.
  ``dp_representation`` (:mod:`collabcausal.party.dp_representation`) obeys the same rules
  except that it may have full rank: its guarantee is differential privacy;
* a party's guarantee is the weakest thing it answers: a policy listing a differentially private
  operation may not list an exact row-level one (``dc_representation``, ``weighted_moments``), whose
  exact replies on the same columns would void the guarantee (:class:`ConfigError` at load;
  ``allow_plain_with_dp = true`` opts out, for simulations that compare both, and the party's
  effective guarantee is then "none": :func:`effective_guarantee`). Which operations are DP and
  which exact row-level is declared once, in the operation registry
  (:func:`collabcausal.party.operations.release_kinds`). Every DP operation may be asked about any
  column of the policy, so the DP operations cover every column the party allows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from collabcausal.errors import ConfigError, PolicyError
from collabcausal.messages import Message
from collabcausal.party.balance import MAX_SAMPLES
from collabcausal.party.operations import Operation, release_kinds
from collabcausal.party.representation import continues_representation
from collabcausal.party.request_limits import RequestLimits

if TYPE_CHECKING:
    from collabcausal.party.node import Party

_FIX = "ask the party to change its party.toml [policy], or change the study"


@dataclass(frozen=True)
class PartyPolicy:
    """A party's rules.

    Parameters
    ----------
    operations : iterable of str
        Operation names the party answers.
    columns : iterable of str
        Covariates the party lets the study use.
    min_subjects : int
        Smallest group of subjects a reply may describe.
    alignment_key : bytes, optional
        The row group's shared secret: subject ids leave the party only as HMAC-SHA256 under it
        (see :mod:`collabcausal.party.alignment`); ``None`` refuses alignment.
    """

    operations: frozenset[str]
    columns: frozenset[str]
    min_subjects: int = 10
    alignment_key: bytes | None = None
    max_components: int | None = None
    allow_full_rank: bool = False
    min_anchors: int = 10
    max_anchors: int = 1_000_000
    max_representation_requests: int = 1_100
    min_weight_ratio: float = 0.01
    limits: RequestLimits = field(default_factory=RequestLimits)
    allow_plain_with_dp: bool = False

    def __init__(
        self,
        operations: Iterable[str],
        columns: Iterable[str],
        min_subjects: int = 10,
        alignment_key: bytes | None = None,
        *,
        max_components: int | None = None,
        allow_full_rank: bool = False,
        min_anchors: int = 10,
        max_anchors: int = 1_000_000,
        max_representation_requests: int = 1_100,
        min_weight_ratio: float = 0.01,
        limits: RequestLimits | None = None,
        allow_plain_with_dp: bool = False,
    ) -> None:
        if isinstance(min_subjects, bool) or not isinstance(min_subjects, int) or min_subjects < 1:
            raise ConfigError(f"policy min_subjects must be a positive integer, got {min_subjects!r}", "e.g. 50")
        object.__setattr__(self, "operations", frozenset(operations))
        private, exact = release_kinds(self.operations)
        if private and exact and not allow_plain_with_dp:
            raise ConfigError(
                f"policy answers the DP operation {private[0]!r} and the exact row-level {exact[0]!r} on the same "
                "columns: the exact replies fall outside the DP guarantee and void it",
                f"drop {', '.join(map(repr, exact))} for a DP guarantee, drop the DP operations, or set "
                "allow_plain_with_dp = true (the party's guarantee is then none)",
            )
        object.__setattr__(self, "allow_plain_with_dp", bool(allow_plain_with_dp))
        object.__setattr__(self, "columns", frozenset(columns))
        object.__setattr__(self, "min_subjects", min_subjects)
        object.__setattr__(self, "alignment_key", alignment_key)
        for name, value in (
            ("min_anchors", min_anchors),
            ("max_anchors", max_anchors),
            ("max_representation_requests", max_representation_requests),
            ("max_components", 1 if max_components is None else max_components),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"policy {name} must be a positive integer, got {value!r}", "e.g. 2")
        if min_anchors > max_anchors:
            raise ConfigError(f"policy min_anchors {min_anchors} exceeds max_anchors {max_anchors}", "swap them")
        object.__setattr__(self, "max_components", max_components)
        object.__setattr__(self, "allow_full_rank", bool(allow_full_rank))
        object.__setattr__(self, "min_anchors", min_anchors)
        object.__setattr__(self, "max_anchors", max_anchors)
        object.__setattr__(self, "max_representation_requests", max_representation_requests)
        if not (isinstance(min_weight_ratio, (int, float)) and 0.0 <= float(min_weight_ratio) <= 1.0):
            raise ConfigError(f"policy min_weight_ratio must lie in [0, 1], got {min_weight_ratio!r}", "e.g. 0.01")
        object.__setattr__(self, "min_weight_ratio", float(min_weight_ratio))
        object.__setattr__(self, "limits", limits or RequestLimits())

    def authorize(self, party: Party, op: Operation, request: Message) -> None:
        """Return if the request is allowed; raise :class:`PolicyError` naming the rule if not."""
        who = f"party {party.name!r}"
        if op.name not in self.operations:
            raise PolicyError(f"{who} does not allow the operation {op.name!r}", _FIX)
        self.limits.check(who, request)
        if op.name == "align":
            self._check_align(who, party)
        extra = sorted(set(party.table.covariate_names) - self.columns)
        asked = request.params.get("columns")
        if asked is not None:
            extra += sorted(set(asked if isinstance(asked, list) else [asked]) - self.columns)
        if extra:
            raise PolicyError(f"{who} does not allow the column {extra[0]!r} to be used", _FIX)
        if op.differentially_private and party.ledger is None:
            raise PolicyError(f"{who} has no privacy budget for {op.name!r}", "configure [privacy] in party.toml")
        self._check_subjects(who, op, party.table.n_subjects, "the rows of its table")
        if "rows" in request.arrays:
            rows = np.asarray(request.arrays["rows"])
            n = party.table.n_subjects
            if rows.ndim != 1 or rows.dtype.kind not in "iu" or (rows.size and (rows.min() < 0 or rows.max() >= n)):
                raise PolicyError(
                    f"{who} refuses {op.name!r}: rows (shape {rows.shape}, dtype {rows.dtype}) are not 1-D positions "
                    f"of its {n} subjects",
                    "send subject positions as a 1-D int64 array, after aligning subjects",
                )
            self._check_subjects(who, op, _distinct(rows, n), "the requested rows")
        if op.name in ("dc_representation", "dp_representation"):
            self._check_reduction(who, len(party.table.covariate_names), request, private=op.differentially_private)
            if not continues_representation(request):
                label = f"in study {party.study!r}" if party.study else "in any study (it joined none by name)"
                party.requests.count_representation(who, party.study, self.max_representation_requests, label=label)
        if "arms" in request.arrays or "weights" in request.arrays:
            self._check_weighted(who, op, party, request)

    def _check_weighted(self, who: str, op: Operation, party: Party, request: Message) -> None:
        """Every arm of every sample must describe ``min_subjects`` distinct subjects of non-negligible weight.

        ``arms`` must be 1-D with one value per requested row (a (n, 1) array is refused, not
        flattened), coded 0/1; so must ``weights``, except that an exact ``weighted_moments`` request
        may stack k samples of the same rows as a (k, rows) array; both real numbers of at most 8
        bytes (no complex, no long double), all of it checked before the history admits anything
        (a request the operation would refuse must leave no trace in it). Weights are summed per
        subject (``rows`` may repeat a subject), and a subject counts only if its total weight is at
        least ``min_weight_ratio`` times the arm's largest: weight 1 on one subject and 1e-300 on the
        others describes one subject. Each sample of an exact reply is then checked against the
        party's differencing history of its study, persisted in its request state
        (:mod:`collabcausal.party.request_state`), in order, as if sent one request after another:
        the later samples against the earlier ones too, and the request is refused (nothing
        admitted) when any sample is.
        """
        n_subjects = party.table.n_subjects
        arrays = request.arrays
        rows = np.asarray(arrays["rows"]) if "rows" in arrays else None
        expected = n_subjects if rows is None else rows.size
        arms, weights = (np.asarray(arrays.get(k, np.empty(0))) for k in ("arms", "weights"))
        stackable = not op.differentially_private and weights.ndim == 2
        for name, values, ndim in (("arms", arms, 1), ("weights", weights, 2 if stackable else 1)):
            shaped = values.ndim == ndim and values.shape[-1] == expected
            if ndim == 2:
                shaped = shaped and 1 <= values.shape[0] <= MAX_SAMPLES
            if not shaped or values.dtype.kind not in "iuf" or values.dtype.itemsize > 8:  # numpy's float64 at most
                expected_shape = f"({expected},)" if ndim == 1 else f"(k, {expected}) with 1 <= k <= {MAX_SAMPLES}"
                raise PolicyError(
                    f"{who} refuses {op.name!r}: {name} has shape {values.shape} and dtype {values.dtype}, "
                    f"not one number per requested row {expected_shape}",
                    "send 1-D arms and weights, one per row"
                    + ("" if op.differentially_private else f" (weights may stack up to {MAX_SAMPLES} samples)"),
                )
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise PolicyError(f"{who} refuses {op.name!r}: weights must be finite and >= 0", "send valid weights")
        masks = [arms == arm for arm in (0, 1)]
        if not (masks[0] | masks[1]).all():  # refused here, before the history admits it, not by the operation
            raise PolicyError(f"{who} refuses {op.name!r}: arms must be coded 0/1", "send 0 (control) or 1 (treated)")
        subject = np.arange(expected) if rows is None else rows.astype(np.int64, copy=False)
        in_arm = [subject[mask] for mask in masks]  # each arm's subjects, the same in every sample
        samples = []
        for sample in weights if stackable else weights[None, :]:
            totals = []
            for arm in (0, 1):
                total = np.bincount(in_arm[arm], weights=sample[masks[arm]], minlength=n_subjects)
                largest = float(total.max()) if total.size else 0.0
                count = 0 if largest <= 0 else int(np.count_nonzero(total >= self.min_weight_ratio * largest))
                what = f"arm {arm} of the weights (distinct subjects of non-negligible weight)"
                self._check_subjects(who, op, count, what)
                totals.append(total)
            samples.append((totals[0], totals[1]))
        if op.differentially_private:
            return  # a DP release is charged to the ledger: composition, not the history, bounds differencing
        with party.requests.weighted_history(party.study, self.limits.max_moment_requests) as history:
            for totals in samples:
                history.admit(
                    who, op.name, totals, min_subjects=self.min_subjects, min_weight_ratio=self.min_weight_ratio
                )

    def _check_align(self, who: str, party: Party) -> None:
        """``align`` re-orders the party's rows: refused once a weighted request was answered.

        The differencing history (:mod:`collabcausal.party.differencing`) is kept by row position;
        re-aligning afterwards would let a dropped or moved subject escape the comparison.
        """
        answered = party.requests.weighted_count(party.study)
        if answered:
            raise PolicyError(
                f"{who} refuses 'align' after answering {answered} weighted requests",
                "align subjects first, at the start of the study",
            )

    def _check_reduction(self, who: str, n_covariates: int, request: Message, *, private: bool = False) -> None:
        """The reduction rules of the module docstring (the request limit is counted by the caller).

        A differentially private representation (``private``) may have full rank: its guarantee
        does not rest on the reduction.
        """
        p = request.params
        largest = n_covariates if self.allow_full_rank or private else n_covariates - 1
        if self.max_components is not None:
            largest = min(largest, self.max_components)
        asked = p.get("n_components")
        if isinstance(asked, bool) or not isinstance(asked, (int, float)):
            raise PolicyError(f"{who} refuses {request.operation!r}: n_components {asked!r} is not a number", _FIX)
        if isinstance(asked, float) and not self.allow_full_rank:
            raise PolicyError(
                f"{who} refuses a variance fraction of components ({asked:g}): its rank is data-dependent",
                f"ask for an integer number of components, at most {largest}",
            )
        if isinstance(asked, int) and asked > largest:
            capped = self.max_components is not None and largest == self.max_components
            rule = "max_components" if capped else f"fewer than its {n_covariates} covariates unless allow_full_rank"
            raise PolicyError(
                f"{who} releases at most {largest} components ({rule}), the study asked for {asked}",
                f"set party_components <= {largest} in study.toml (simulate --party-components)"
                if largest >= 1
                else _FIX,
            )
        r = p.get("n_anchors")
        if isinstance(r, bool) or not isinstance(r, int) or not self.min_anchors <= r <= self.max_anchors:
            raise PolicyError(
                f"{who} accepts {self.min_anchors} to {self.max_anchors} anchor rows, the study asked for {r!r}",
                "change n_anchors in study.toml",
            )

    def _check_subjects(self, who: str, op: Operation, count: int, what: str) -> None:
        if count < self.min_subjects:
            raise PolicyError(
                f"{who} refuses {op.name!r}: {what} cover only {count} subjects, below its minimum of "
                f"{self.min_subjects}",
                _FIX,
            )


def effective_guarantee(
    operations: Iterable[str], *, allow_plain_with_dp: bool, epsilon: float | None, delta: float = 0.0
) -> str:
    """The party's effective guarantee, one line: the weakest thing it answers.

    Parameters
    ----------
    operations : iterable of str
        The policy's operations.
    allow_plain_with_dp : bool
        The policy's opt-out.
    epsilon, delta : float
        The ``[privacy]`` budget; ``epsilon=None`` for a party without one.

    Returns
    -------
    str
        ``"none: ..."`` when the party answers no DP operation (no budget, or none listed) or also
        answers an exact row-level one (the opt-out), else the (epsilon, delta)-DP guarantee of its
        budget under substitution of one record (bounded DP, composed over every study).
    """
    private, exact = release_kinds(operations)
    if epsilon is None:
        return "none: no [privacy] budget, no DP release (exact replies bounded only by the policy's rules)"
    if exact and private:
        listed = ", ".join(exact)
        return (
            f"none: besides its DP operations it answers the exact row-level {listed} on the same columns "
            "(allow_plain_with_dp = true), which void the DP guarantee"
        )
    if exact:
        return f"none: it answers the exact row-level {', '.join(exact)} and no DP operation"
    return (
        f"({epsilon:g}, {delta:g})-DP under substitution of one record, over every release of its rows "
        "(the ledger's budget, composed over all studies)"
    )


def _distinct(rows: np.ndarray, n: int) -> int:
    """Number of distinct positions in ``rows``, 1-D positions in [0, n) (O(n), unlike sorting)."""
    seen = np.zeros(n, dtype=bool)
    seen[rows] = True
    return int(np.count_nonzero(seen))
