"""Differentially private DC-QE representations (docs/dcqe.md, "DP representations").

Plain DC-QE representations are not differentially private: the reducer is fitted on the party's
rows and the released rows are exact images of them, from which the covariates can be largely
recovered (docs/threat-model.md). The ``dp_representation`` operation releases instead, once per
study and for all of the party's subjects, rows that are (epsilon, delta)-DP under the project's
relation (substitution of one subject, n public; docs/differential-privacy.md):

1. **A data-independent map.** Each covariate is clipped to its public range ``[lo, hi]`` (the
   study's anchor ranges) and scaled to ``s = (x - mid) / half`` in ``[-1, 1]``; then
   ``z = R s`` with ``R`` an ``m~ x m`` matrix of orthonormal rows drawn from a stream keyed by the
   study's anchor key (:func:`collabcausal.party.anchor.keyed_stream`). No parameter of the map is
   fitted on the party's rows, so the map itself releases nothing, and the anchor's image
   ``A~ = f(X_anc)`` is a function of the key and public parameters only. The anchor is drawn
   independently of plain DC-QE's (:data:`DP_ANCHOR`).
2. **Clipping to a public norm.** A row with ``||z|| > C`` is scaled to norm ``C`` (``clip_norm``;
   default ``sqrt(m)``, which never binds because ``||R s|| <= ||s|| <= sqrt(m)``).
3. **Labels.** The label holder appends ``t_s = 2 t - 1`` and ``y_s = (clip(y) - mid_y) / half_y``
   on the study's public outcome range.
4. **Gaussian noise.** Every released entry gets ``N(0, sigma^2)`` from the vetted OpenDP sampler
   (:func:`collabcausal.estimators.dp.mechanisms.gaussian`), sigma the analytic Gaussian
   calibration (Balle & Wang 2018, Theorem 8) of the L2 sensitivity

       Delta = 2 sqrt(C^2 + 2 [labels])

   Substituting one subject changes one row of the release; the covariate part lies in a ball of
   radius ``C`` (diameter ``2C``) and each label coordinate moves by at most 2.

5. **Release order.** The rows leave in :func:`release_order`, a keyed permutation shared by the
   row group, so their position says nothing about the values to an analyst without the key.

The whole release is charged once to the party's ledger, before anything is computed from the
rows; everything that depends only on the request (validation, map, anchor image, sigma) is done
before the charge, so a charged request always releases. The calibration is audited on
worst-case neighbours by :mod:`collabcausal.attacks.dp_audit`. The analyst
bootstraps the released rows itself (no per-replicate requests, so no composition over replicates)
and corrects its propensity model for the known noise (:mod:`collabcausal.analyst.dp_release`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError, PolicyError, ProtocolError
from collabcausal.estimators.dp.calibration import public_scale, representation_sensitivity, representation_sigma
from collabcausal.estimators.dp.mechanisms import gaussian
from collabcausal.estimators.validation import check_bounds, check_delta, check_epsilon
from collabcausal.messages import Message
from collabcausal.party.anchor import anchor_columns, keyed_stream
from collabcausal.party.dp_queries import request_number, require_ledger
from collabcausal.party.node import Party
from collabcausal.party.operations import operation
from collabcausal.party.table import PartyTable

OPERATION = "dp_representation"
_FIX = "send a complete dp_representation request (see docs/protocol.md)"
DP_ANCHOR = "dp-anchor"
"""The anchor of DP representations is drawn independently of plain DC-QE's: its image A~ is exact
and the map is a rotation, so an analyst can recover it (ICA on independent uniform columns), and it
must then reveal nothing about the anchor of a plain ``dc_representation`` in the same study."""


@dataclass(frozen=True)
class PublicMap:
    """The data-independent map f(x) = R ((clip(x, lo, hi) - mid) / half) of step 1.

    Attributes
    ----------
    low, high : ndarray of shape (m,)
        Public range per covariate.
    rotation : ndarray of shape (m~, m)
        Orthonormal rows, keyed by the study's anchor key.
    """

    low: NDArray[np.float64]
    high: NDArray[np.float64]
    rotation: NDArray[np.float64]

    def transform(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Clip each column to its range, scale to [-1, 1] and rotate."""
        mid, half = self.low / 2.0 + self.high / 2.0, self.high / 2.0 - self.low / 2.0
        return ((np.clip(X, self.low, self.high) - mid) / half) @ self.rotation.T


def public_map(
    key: bytes, study: str, columns: Sequence[str], ranges: Mapping[str, Sequence[float]], n_components: int
) -> PublicMap:
    """The map of step 1 for the party's ``columns``; the same for every party holding them.

    ``R`` is the first ``n_components`` rows of the orthogonal factor of a keyed Gaussian matrix
    (a Haar-random rotation, signs fixed by the diagonal of the triangular factor).
    """
    bounds = []
    for name in columns:
        if not isinstance(ranges, Mapping) or name not in ranges:
            raise InputError(f"no public range for covariate {name!r}", "declare [low, high] for every covariate")
        bounds.append(check_bounds(tuple(ranges[name]), f"public range of {name!r}"))
        public_scale(bounds[-1], f"public range of {name!r}")
    m = len(columns)
    gaussians = keyed_stream(key, f"dp-rotation/{study}/" + "\x1f".join(columns)).standard_normal((m, m))
    q, r = np.linalg.qr(gaussians)
    q = q * np.sign(np.diag(r))
    low, high = (np.array(b, dtype=np.float64) for b in zip(*bounds, strict=True))
    return PublicMap(low, high, np.ascontiguousarray(q.T[:n_components]))


def release_order(key: bytes, study: str, n_subjects: int) -> NDArray[np.int64]:
    """Which subject each released row describes: row ``i`` is subject ``release_order(...)[i]``.

    A keyed permutation of the ``n`` rows, the same for every party of a row group (same key, study
    and n, so their rows stay aligned) and unknown to the analyst. Released in table order, the
    rows would carry whatever the table's order says about the values (a table sorted by treatment
    gave the treatment away through the noise: ``tests/attacks/test_dp_representation_order.py``);
    in a keyed order the position says nothing without the key.
    """
    return keyed_stream(key, f"dp-order/{study}/{int(n_subjects)}").permutation(int(n_subjects))


def exact_release(
    table: PartyTable, mapping: PublicMap, clip_norm: float, outcome_range: tuple[float, float] | None
) -> NDArray[np.float64]:
    """The release before noise, in table order: the clipped mapped rows and, with an
    ``outcome_range``, ``t_s = 2t - 1`` and ``y_s`` (steps 1-3 of the module docstring).

    Every row lies in the ball of radius ``clip_norm`` (covariates) times ``[-1, 1]^2`` (labels), so
    two rows differ by at most :func:`representation_sensitivity` in L2.
    """
    Z, _ = clip_norms(mapping.transform(table.covariates), clip_norm)
    if outcome_range is None:
        return Z
    (y_lo, y_hi), (mid, half) = outcome_range, public_scale(outcome_range, "outcome_range")
    t_s = 2.0 * np.clip(table.treatment.astype(np.float64), 0.0, 1.0) - 1.0
    y_s = (np.clip(table.outcome, y_lo, y_hi) - mid) / half
    return np.column_stack([Z, t_s, y_s])


def clip_norms(Z: NDArray[np.float64], clip_norm: float) -> tuple[NDArray[np.float64], int]:
    """Scale rows with L2 norm above ``clip_norm`` down to it; return them and how many moved."""
    norms = np.linalg.norm(Z, axis=1)
    factor = np.minimum(1.0, clip_norm / np.maximum(norms, np.finfo(float).tiny))
    return Z * factor[:, None], int(np.count_nonzero(factor < 1.0))


@operation(OPERATION, parameters={"epsilon", "delta", "n_components", "n_anchors", "anchor_ranges", "clip_norm",
                                  "labels", "outcome_range"}, differentially_private=True)
def dp_representation(party: Party, request: Message) -> Message:
    """An (epsilon, delta)-DP representation of all the party's subjects (module docstring).

    Request params: ``study``, ``epsilon``, ``delta``, ``n_components`` (int m~ <= m),
    ``n_anchors``, ``anchor_ranges`` ({column: [lo, hi]}, also the map's public ranges),
    ``clip_norm`` (optional C <= sqrt(m)), ``labels`` (bool) and, with labels, ``outcome_range``
    ([lo, hi]). No ``rows``: the release covers every subject once.
    Reply params: ``sigma``, ``sensitivity``, ``clip_norm``, ``epsilon``, ``delta``,
    ``n_components``. Reply arrays: ``x_tilde`` (n x m~, noisy), ``a_tilde`` (r x m~, exact:
    no private data), and with labels ``t_noisy`` and ``y_noisy`` (noisy ``t_s`` and ``y_s``). The
    rows come in :func:`release_order`. Everything that depends only on the request (validation,
    map, anchor image) is done before the charge, so a charged request always releases.
    """
    p = request.params
    if "rows" in request.arrays:
        raise PolicyError(
            f"party {party.name!r} releases a DP representation of all its subjects, not of resampled rows",
            "bootstrap the released rows on the analyst's side",
        )
    if party.anchor_key is None:
        raise PolicyError(
            f"party {party.name!r} has no anchor key, so it cannot build the study's map and anchor",
            "give every party the study's anchor key: [anchor] key_file in party.toml",
        )
    try:
        study, labels = p["study"], p.get("labels", False)
        eps = check_epsilon(request_number(p["epsilon"], "epsilon", OPERATION), f"epsilon of {OPERATION}")
        delta = check_delta(request_number(p["delta"], "delta", OPERATION), f"delta of {OPERATION}")
        n_components, n_anchors = p["n_components"], p["n_anchors"]
        ranges: Mapping[str, Sequence[float]] = p["anchor_ranges"]
    except KeyError as exc:
        raise ProtocolError(f"dp_representation request lacks {exc.args[0]!r}", _FIX) from None
    columns = party.table.covariate_names
    m = len(columns)
    if not isinstance(study, str) or not isinstance(labels, bool):
        raise InputError("dp_representation needs a text study and a true/false labels", _FIX)
    if _not_int(n_components) or not 1 <= n_components <= m:
        raise InputError(f"n_components must be an integer in 1..{m}, got {n_components!r}", "fix the study plan")
    if _not_int(n_anchors) or n_anchors < 1:
        raise InputError(f"n_anchors must be a positive integer, got {n_anchors!r}", "fix the study plan")
    if delta <= 0.0:
        raise InputError("a DP representation needs delta > 0 (Gaussian mechanism)", "e.g. delta = 1e-6")
    if delta >= 1.0 / party.table.n_subjects:
        raise InputError(
            f"delta {delta:g} is not below 1/n = 1/{party.table.n_subjects}: it would allow releasing a subject "
            "in the clear",
            "ask for a delta well below 1/n, e.g. 1e-6",
        )
    if labels and not party.table.has_labels:
        raise InputError(f"party {party.name!r} holds no treatment/outcome", "ask the row group's label holder")
    clip_norm = _clip_norm(p.get("clip_norm"), m)
    if labels and not isinstance(p.get("outcome_range"), (list, tuple)):
        raise InputError("the label holder's DP representation needs a public outcome_range", "add [lo, hi]")
    outcome_range = None
    if labels:
        outcome_range = check_bounds(tuple(p["outcome_range"]), "outcome_range")
        public_scale(outcome_range, "outcome_range")
    mapping = public_map(party.anchor_key, study, columns, ranges, n_components)
    a_tilde = mapping.transform(anchor_columns(party.anchor_key, study, columns, ranges, n_anchors, purpose=DP_ANCHOR))
    sensitivity = representation_sensitivity(clip_norm, labels)
    sigma = representation_sigma(clip_norm, labels, eps, delta)
    require_ledger(party, OPERATION).charge(
        OPERATION,
        eps,
        delta,
        study=study,
        details={"columns": list(columns), "n_components": n_components, "clip_norm": clip_norm, "labels": labels},
    )
    values = exact_release(party.table, mapping, clip_norm, outcome_range)
    noisy = gaussian(values[release_order(party.anchor_key, study, party.table.n_subjects)], sensitivity, eps, delta)
    arrays = {"x_tilde": noisy[:, :n_components], "a_tilde": a_tilde}
    if labels:
        arrays["t_noisy"], arrays["y_noisy"] = noisy[:, n_components], noisy[:, n_components + 1]
    params = {
        "n_components": n_components,
        "sigma": sigma,
        "sensitivity": sensitivity,
        "clip_norm": clip_norm,
        "epsilon": eps,
        "delta": delta,
    }
    return Message(OPERATION, params, arrays)


def _not_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


def _clip_norm(value: object, m: int) -> float:
    """The request's norm bound C in (0, sqrt(m)], or sqrt(m) when absent (above it, C never binds)."""
    if value is None:
        return math.sqrt(m)
    c = request_number(value, "clip_norm", OPERATION)
    if not (math.isfinite(c) and 0.0 < c <= math.sqrt(m) * (1.0 + 1e-12)):
        raise InputError(
            f"clip_norm must lie in (0, sqrt(m)] = (0, {math.sqrt(m):.6g}], got {value!r}",
            "omit it (sqrt(m), never binds) or ask for a smaller bound",
        )
    return min(c, math.sqrt(m))
