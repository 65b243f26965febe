"""The public feature map of ``dp_effects``: declared ranges, a site one-hot, a centred outcome.

Every bound a sensitivity rests on comes from here, and every one is public (declared in the
study, never estimated from the rows):

* covariate ``j`` is clipped to its declared range ``[lo_j, hi_j]`` and mapped affinely onto
  ``[-1, 1]``: ``z_j = clip(2 (x_j - lo_j) / (hi_j - lo_j) - 1, -1, 1)``;
* the design row of a subject of site ``s`` (of ``S`` sites) is ``d = (onehot_S(s), z)``, so
  ``||d||^2 <= 1 + m`` and every ``d_i^2 <= 1``; the one-hot is the site's intercept (the site is a
  covariate: Hahn 1998, and docs/dp-effects.md, "site-level nuisances");
* the outcome is clipped to the declared ``[y_lo, y_hi]`` and centred on its midpoint,
  ``y' = clip(y) - (y_lo + y_hi) / 2`` in ``[-R/2, R/2]`` with ``R = y_hi - y_lo``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from collabcausal.errors import InputError
from collabcausal.estimators.validation import check_bounds, check_matrix, check_vector, refuse_unknown_keys

SPEC_KEYS = frozenset({"bounds", "outcome_range", "n_sites"})
"""The keys of :meth:`FeatureMap.to_spec`, each required: a design carrying any other is refused
(:meth:`FeatureMap.from_spec`)."""


@dataclass(frozen=True)
class FeatureMap:
    """The declared ranges and the site layout shared by every party of a study.

    Parameters
    ----------
    bounds : sequence of (lo, hi)
        One public range per covariate, in the study's covariate order.
    outcome_range : (lo, hi)
        The public outcome range; outcomes are clipped to it.
    n_sites : int
        Sites in the one-hot (1 when each party fits its own nuisances).
    """

    bounds: tuple[tuple[float, float], ...]
    outcome_range: tuple[float, float]
    n_sites: int = 1

    def __post_init__(self) -> None:
        if not self.bounds:
            raise InputError("dp_effects needs at least one covariate", "declare the covariates and their ranges")
        object.__setattr__(self, "bounds", tuple(check_bounds(tuple(b), "covariate range") for b in self.bounds))
        object.__setattr__(self, "outcome_range", check_bounds(tuple(self.outcome_range), "outcome_range"))
        if int(self.n_sites) < 1:
            raise InputError(f"n_sites must be >= 1, got {self.n_sites}", "pass the number of parties")

    @property
    def n_covariates(self) -> int:
        """``m``."""
        return len(self.bounds)

    @property
    def dim(self) -> int:
        """Length of a design row, ``S + m``."""
        return self.n_sites + self.n_covariates

    @property
    def squared_norm_bound(self) -> float:
        """``max ||d||^2 = 1 + m`` over design rows."""
        return 1.0 + self.n_covariates

    @property
    def outcome_width(self) -> float:
        """``R = y_hi - y_lo``."""
        return self.outcome_range[1] - self.outcome_range[0]

    @property
    def outcome_mid(self) -> float:
        """The centre ``(y_lo + y_hi) / 2`` subtracted from every outcome."""
        return 0.5 * (self.outcome_range[0] + self.outcome_range[1])

    def design(self, X: ArrayLike, site: int) -> NDArray[np.float64]:
        """Design rows ``(onehot(site), z)`` of the covariate matrix ``X`` (n x m)."""
        arr = check_matrix(X, "covariates")
        if arr.shape[1] != self.n_covariates:
            raise InputError(
                f"covariates have {arr.shape[1]} columns but {self.n_covariates} ranges are declared",
                "declare one range per covariate, in the same order",
            )
        if not 0 <= int(site) < self.n_sites:
            raise InputError(f"site {site} is not in 0..{self.n_sites - 1}", "pass the party's index in the study")
        box = np.asarray(self.bounds)
        z = np.clip(2.0 * (arr - box[:, 0]) / (box[:, 1] - box[:, 0]) - 1.0, -1.0, 1.0)
        onehot = np.zeros((arr.shape[0], self.n_sites))
        onehot[:, int(site)] = 1.0
        return np.hstack([onehot, z])

    def centred_outcome(self, y: ArrayLike) -> NDArray[np.float64]:
        """``clip(y, y_lo, y_hi) - mid``, in ``[-R/2, R/2]``."""
        return np.clip(check_vector(y, "outcome"), *self.outcome_range) - self.outcome_mid

    def to_spec(self) -> dict[str, object]:
        """A JSON-ready description (sent in requests, echoed in reports)."""
        return {"bounds": [list(b) for b in self.bounds], "outcome_range": list(self.outcome_range),
                "n_sites": self.n_sites}

    @classmethod
    def from_spec(cls, spec: object) -> FeatureMap:
        """Inverse of :meth:`to_spec`; a one-line :class:`InputError` for a malformed spec or one with a key it
        does not apply."""
        if not isinstance(spec, dict) or not SPEC_KEYS <= set(spec):
            raise InputError("malformed dp_effects feature map", "send bounds, outcome_range and n_sites")
        refuse_unknown_keys(spec, SPEC_KEYS, "dp_effects design")
        bounds = spec["bounds"]
        n_sites = spec["n_sites"]
        if not isinstance(bounds, Sequence) or isinstance(n_sites, bool) or not isinstance(n_sites, int):
            raise InputError("malformed dp_effects feature map", "send bounds as [[lo, hi], ...] and n_sites as int")
        return cls(tuple(tuple(b) for b in bounds), tuple(spec["outcome_range"]), n_sites)

