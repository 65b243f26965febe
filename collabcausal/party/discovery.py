"""Private causal discovery on two of a party's own columns (paper 002): ``dp_discover``.

The request names two covariates (``columns = [x, y]``) and the private release to make. The
party validates the request (names, bounds, score/protection: no private data), charges its ledger,
and only then splits its rows (with its own fresh randomness), fits the two regressions and
releases the scores with OpenDP noise.

A party releases only scores whose guarantee covers every one of its rows: ``protect="both"``,
which only HSIC supports (Laplace noise calibrated to the larger of the test-set and the
training-set sensitivity, paper 002, section 4.2 and Theorem 7), with public bounds for both
columns. Test-only or training-only releases leave the other split unprotected: they are not DP
for the dataset, are refused here and are never charged to a ledger (``collabcausal discover``
computes them locally with :func:`discover_unrecorded`, labelled as such).

Request ``params``: ``columns`` [x, y], ``epsilon``, ``x_bounds``, ``y_bounds``, and optionally
``score`` ("hsic"), ``protect`` ("both"), ``delta`` (0), ``regularization`` (1.0),
``kernel_width``, ``hsic_widths``, ``test_size``, ``release`` ("scores": both scores, each with its
own Laplace noise; "margin": their margin alone with one, the same budget, docs/causal-discovery.md),
``study``. Reply ``params``: the fields of
:class:`~collabcausal.estimators.discovery.private_scores.PrivateDiscovery`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.errors import InputError, NoAnswerError, PolicyError
from collabcausal.estimators.discovery.anm import AdditiveNoiseModel, check_pair
from collabcausal.estimators.discovery.private_scores import PrivateDiscovery, check_form, check_protection, release
from collabcausal.estimators.dp.calibration import public_scale
from collabcausal.estimators.validation import check_bounds
from collabcausal.messages import Message
from collabcausal.party.dp_queries import request_number
from collabcausal.party.operations import operation

if TYPE_CHECKING:
    from collabcausal.ledger import PrivacyLedger
    from collabcausal.party.node import Party

OPERATION = "dp_discover"
MIN_REGULARIZATION = 1e-8
"""Smallest KRR lambda a party accepts. The fit factorises K + (n lambda / 2) I with K a Gaussian kernel
matrix (PSD, entries in [0, 1], so ||K|| <= n); Cholesky succeeds whatever the values when the added
diagonal exceeds its rounding error, about n^2 u (u = 1.1e-16): with lambda >= 1e-8 that holds for
n < 4e7. Below it, success or a LinAlgError after the charge would depend on the values (close or
repeated x), an un-noised answer. Such a lambda also makes the training-set noise astronomical."""


@dataclass(frozen=True)
class DiscoveryRequest:
    """What to release; every field is public (no private data).

    Attributes mirror :class:`AdditiveNoiseModel` and :func:`release`. ``x_bounds`` and
    ``y_bounds`` are needed whenever the training split is protected.
    """

    epsilon: float
    score: str = "hsic"
    protect: str = "both"
    delta: float = 0.0
    x_bounds: tuple[float, float] | None = None
    y_bounds: tuple[float, float] | None = None
    regularization: float = 1.0
    kernel_width: float = 0.3
    hsic_widths: tuple[float, float] = field(default=(0.3, 0.1))
    test_size: float = 0.5
    release: str = "scores"

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DiscoveryRequest:
        """Build from a request's params (its fields only, the rest are the operation's; missing ones take defaults)."""
        if "epsilon" not in params:
            raise InputError(f"{OPERATION} request has no epsilon", "pass params={'epsilon': ..., ...}")
        names = {f for f in cls.__dataclass_fields__ if f in params}
        return cls(**{name: params[name] for name in names})

    def checked(self) -> DiscoveryRequest:
        """Validate everything that can be checked before any private data is read.

        Every number must be a real number (not text, not a bool) in the range its proof needs:
        ``regularization`` in [:data:`MIN_REGULARIZATION`, 1] (paper 002, Theorem 5), ``kernel_width`` and both
        ``hsic_widths`` finite and > 0 (a negative residual width gives the kernel of its absolute
        value but a negative training-set sensitivity, which ``max(test, train)`` would drop), and
        bounds that scale into [-1, 1] with finite numbers. A request that fails any of these is
        refused here, before the ledger is charged, never after it.
        """
        numbers = {name: request_number(getattr(self, name), name, OPERATION)
                   for name in ("epsilon", "delta", "regularization", "kernel_width", "test_size")}
        score, protect, eps, delta = check_protection(self.score, self.protect, numbers["epsilon"], numbers["delta"])
        form = check_form(self.release, score, protect)
        in_range = {"regularization": lambda v: MIN_REGULARIZATION <= v <= 1.0, "kernel_width": _usable_width,
                    "test_size": lambda v: 0.0 < v < 1.0}
        for name, ok in in_range.items():
            if not ok(numbers[name]):
                raise InputError(f"{name} of {OPERATION} is {numbers[name]!r}, outside its range", _range_fix(name))
        widths = self.hsic_widths
        if not isinstance(widths, (list, tuple)) or len(widths) != 2:
            raise InputError(f"hsic_widths of {OPERATION} must be two numbers, got {widths!r}",
                             _range_fix("hsic_widths"))
        widths = tuple(request_number(w, "hsic_widths", OPERATION) for w in widths)
        if not all(_usable_width(w) for w in widths):
            raise InputError(f"hsic_widths of {OPERATION} must be finite and > 0, got {widths!r}",
                             _range_fix("hsic_widths"))
        bounds = {}
        for name, value in (("x_bounds", self.x_bounds), ("y_bounds", self.y_bounds)):
            bounds[name] = None if value is None else check_bounds(value, name)
            if value is not None:
                public_scale(bounds[name], f"{name} of {OPERATION}")
        if protect != "test" and None in bounds.values():
            raise InputError(
                f"protect={protect!r} needs public bounds for both columns",
                "declare x_bounds and y_bounds (CLI: --x-bounds LO HI --y-bounds LO HI)",
            )
        return replace(
            self,
            epsilon=eps,
            score=score,
            protect=protect,
            delta=delta,
            x_bounds=bounds["x_bounds"],
            y_bounds=bounds["y_bounds"],
            regularization=numbers["regularization"],
            kernel_width=numbers["kernel_width"],
            hsic_widths=widths,
            test_size=numbers["test_size"],
            release=form,
        )


def _usable_width(width: float) -> bool:
    """A Gaussian kernel width: finite, > 0, with a normal (not underflowing) square, exp(-d^2 / (2 h^2))."""
    return math.isfinite(width) and width > 0.0 and width * width >= sys.float_info.min


def _range_fix(name: str) -> str:
    ranges = {"regularization": f"a number in [{MIN_REGULARIZATION:g}, 1], e.g. 1.0",
              "kernel_width": "a number > 0, e.g. 0.3", "test_size": "a number in (0, 1), e.g. 0.5",
              "hsic_widths": "two numbers > 0, e.g. [0.3, 0.1]"}
    return f"send {name} = {ranges[name]}"


def discover(
    ledger: PrivacyLedger,
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    request: DiscoveryRequest,
    *,
    study: str = "",
    columns: tuple[str, str] = ("x", "y"),
) -> PrivateDiscovery:
    """Charge ``ledger`` for a fully protected ``request``, then compute the private release.

    Epsilon-DP under substitution of one row with n public: the reply's ``m_test``, ``n_train`` and
    ``noise_scale`` are functions of n, ``test_size`` and the request only; the split is a fresh
    uniform permutation of the n positions, independent of the values.

    Raises
    ------
    PolicyError
        ``protect`` is not ``"both"``: rows of the other split would enter unprotected, so the
        release is not DP for the dataset and is never charged to a ledger
        (:func:`discover_unrecorded` computes it, labelled).
    BudgetExceededError
        Over budget; nothing computed.
    NoAnswerError
        Propose-test-release refused (the budget is spent all the same).
    """
    req = request.checked()
    if req.protect != "both":
        raise PolicyError(
            f"protect={req.protect!r} leaves the other split's rows unprotected: not DP for the dataset, so it "
            "cannot be charged to a privacy ledger",
            "ask for score='hsic' with protect='both' and public bounds",
        )
    x, y, _ = check_pair(x, y, req.test_size)
    details = {"columns": list(columns), "score": req.score, "release": req.release}
    ledger.charge(OPERATION, req.epsilon, req.delta, study=study, details=details)
    return _release(x, y, req, columns)


def discover_unrecorded(
    x: NDArray[np.float64], y: NDArray[np.float64], request: DiscoveryRequest, *, columns: tuple[str, str] = ("x", "y")
) -> PrivateDiscovery:
    """A split-protected release (``protect`` "test" or "train"): charged to no ledger.

    Paper 002's model treats the other split as public; for the dataset as a whole the release is
    not differentially private (its other split enters exactly), so it spends no budget and the
    caller must label it so.
    """
    req = request.checked()
    x, y, _ = check_pair(x, y, req.test_size)
    return _release(x, y, req, columns)


def _release(
    x: NDArray[np.float64], y: NDArray[np.float64], req: DiscoveryRequest, columns: tuple[str, str]
) -> PrivateDiscovery:
    model = AdditiveNoiseModel(
        regularization=req.regularization,
        kernel_width=req.kernel_width,
        hsic_widths=req.hsic_widths,
        test_size=req.test_size,
        x_bounds=req.x_bounds,
        y_bounds=req.y_bounds,
        random_state=None,
    ).fit(x, y)
    result = release(model, req.score, epsilon=req.epsilon, delta=req.delta, protect=req.protect, form=req.release)
    if not result.answered:
        raise NoAnswerError(
            f"propose-test-release declined to answer for the {req.score} score ({columns[0]}, {columns[1]}) "
            f"at epsilon={req.epsilon:g}, delta={req.delta:g}",
            "the data are not stable enough at this budget: use more rows, a larger epsilon, or another score",
        )
    return result


@operation(OPERATION, parameters={"columns", *(f.name for f in fields(DiscoveryRequest))}, differentially_private=True)
def dp_discover(party: Party, request: Message) -> Message:
    """Release the ANM direction between two of the party's covariates (fully protected only)."""
    columns = request.params.get("columns")
    if not isinstance(columns, (list, tuple)) or len(columns) != 2 or columns[0] == columns[1]:
        raise InputError(f"{OPERATION} needs columns=[x, y] (two different covariates), got {columns!r}", "fix it")
    req = DiscoveryRequest.from_params(request.params).checked()
    if req.protect != "both":
        raise PolicyError(
            f"party {party.name!r} releases only discovery scores that protect every row; "
            f"protect={req.protect!r} leaves the other split unprotected",
            "ask for score='hsic' with protect='both' and public bounds",
        )
    if party.ledger is None:
        raise PolicyError(f"party {party.name!r} has no privacy ledger for {OPERATION}", "configure [privacy]")
    x_name, y_name = (str(c) for c in columns)
    x, y = party.table.column(x_name), party.table.column(y_name)
    result = discover(party.ledger, x, y, req, study=str(request.params.get("study", "")), columns=(x_name, y_name))
    return Message(OPERATION, asdict(result))
