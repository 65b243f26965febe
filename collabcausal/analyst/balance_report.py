"""The balance part of a DC-QE study's report: SMDs, their DP noise, the parties' spend, warnings.

``collabcausal analyst serve`` (kind ``"dcqe"``) and the ``"cate"`` kind report a
:class:`~collabcausal.analyst.dcqe.DCQEResult`'s balance through :func:`balance_report`. With exact
moments (no ``[balance]``) that is the SMD per estimator and the unweighted SMD. With ``[balance]``
(:class:`~collabcausal.analyst.balance.DPBalanceSpec`) it adds each SMD's first-order DP noise sd
(paper 003, eqs. 42-44 by the delta method: :func:`~collabcausal.estimators.balance.smd_noise_sd`),
every balance party's spend (requests x epsilon and requests x delta, basic composition, as the
party's ledger composes them) and warnings saying what is DP and where the noise makes the
diagnosis uninformative (noise sd above :data:`~collabcausal.estimators.balance.SMD_THRESHOLD`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from collabcausal.analyst.report_rows import party_spend
from collabcausal.estimators.balance import SMD_THRESHOLD

if TYPE_CHECKING:
    from collabcausal.analyst.dcqe import DCQEPlan, DCQEResult

UNDEFINED_SMD = (
    "undefined: an arm's noisy spread (sum_wx2 - sum_wx^2 / sum_w) is <= 0, the DP noise exceeds the arm's "
    "spread (heavy weights make the noise large); raise [balance] epsilon, add subjects, or trim extreme weights"
)
"""Why a DP SMD (and its noise sd, and the MASMD of its sample) is null in report.json."""

BALANCE_PRIVACY_NOTE = (
    "Only the balance moments are differentially private (dp_weighted_moments, charged per request); the "
    "DC-QE intermediate representations are not (their protection is that each party's reducer and the "
    "anchor stay with the parties, paper 003, section 4.2)."
)


def balance_report(result: DCQEResult, plan: DCQEPlan) -> dict[str, Any]:
    """The report keys of ``result``'s balance diagnostics (module docstring), JSON-ready.

    Returns ``smd`` ({estimator: {covariate: SMD}}) and ``smd_unweighted`` ({covariate: SMD});
    with DP moments also ``smd_noise_sd`` and ``smd_unweighted_noise_sd`` (same layout),
    ``privacy`` ({party: {"epsilon", "delta"}} spent on balance) and ``warnings`` (a list: empty
    for exact moments). A DP SMD that is undefined (NaN: :data:`UNDEFINED_SMD`) is listed with that
    reason under ``undefined`` (JSON path to reason; :mod:`collabcausal.strict_json` writes it as null).
    """
    covariates = result.covariates
    out: dict[str, Any] = {
        "smd": {name: _by_covariate(covariates, values) for name, values in result.smd.items()},
        "smd_unweighted": None if result.smd_unweighted is None else _by_covariate(covariates, result.smd_unweighted),
        "warnings": [],
    }
    spec = plan.dp_balance
    if spec is None:
        return out
    noise = dict(result.smd_noise_sd)
    if result.smd_unweighted_noise_sd is not None:
        noise["unweighted"] = result.smd_unweighted_noise_sd
    parties = [p for group in plan.balance_parties for p in group]
    requests = result.balance_requests
    samples = [(f"smd/{name}", f"smd_noise_sd/{name}", values) for name, values in result.smd.items()]
    if result.smd_unweighted is not None:
        samples.append(("smd_unweighted", "smd_unweighted_noise_sd", result.smd_unweighted))
    undefined = {
        f"{where}/{covariate}": UNDEFINED_SMD
        for smd_path, sd_path, values in samples
        for covariate, value in zip(covariates, values, strict=True)
        if np.isnan(value)
        for where in (smd_path, sd_path)
    }
    return out | ({"undefined": undefined} if undefined else {}) | {
        "smd_noise_sd": {name: _by_covariate(covariates, sd) for name, sd in result.smd_noise_sd.items()},
        "smd_unweighted_noise_sd": None
        if result.smd_unweighted_noise_sd is None
        else _by_covariate(covariates, result.smd_unweighted_noise_sd),
        "privacy": party_spend(parties, spec.epsilon, spec.delta, requests=requests),
        "warnings": balance_warnings(spec.epsilon, spec.delta, parties, requests, noise),
    }


def balance_warnings(
    epsilon: float,
    delta: float,
    parties: Sequence[str],
    requests: int,
    noise_sd: Mapping[str, NDArray[np.float64]],
) -> list[str]:
    """What the DP balance moments guarantee and cost, and which samples' SMDs the noise swamps.

    Parameters
    ----------
    epsilon, delta : float
        Charged per request.
    parties : sequence of str
        The balance parties (each charged ``requests`` times).
    requests : int
    noise_sd : mapping of sample (estimator or "unweighted") to ndarray
        The noise sd of each SMD; a value above :data:`SMD_THRESHOLD` makes that SMD uninformative
        (the noise alone is as large as the usual imbalance threshold), and NaN marks an undefined SMD.
    """
    out = [
        f"Balance moments: each party's weighted covariate moments are (eps = {epsilon:g}, delta = {delta:g})-DP "
        "per request (dp_weighted_moments: Gaussian noise, covariates clipped to [anchor_ranges], substitution "
        f"of one subject); each of the {len(parties)} parties ({', '.join(parties)}) was charged {requests} "
        f"requests, eps {requests * epsilon:g} and delta {requests * delta:g} by basic composition. The SMDs and "
        "MASMDs are post-processing of these releases; the DC-QE representations are not DP."
    ]
    swamped = {name: int(np.sum(~(np.asarray(sd) <= SMD_THRESHOLD))) for name, sd in noise_sd.items()}
    if any(swamped.values()):
        finite = [float(v) for sd in noise_sd.values() for v in np.asarray(sd).ravel() if np.isfinite(v)]
        undefined = sum(int(np.isnan(sd).sum()) for sd in noise_sd.values())
        listing = ", ".join(f"{name} {k} of {np.asarray(noise_sd[name]).size}" for name, k in swamped.items() if k)
        largest = f"largest {max(finite):.3g}" if finite else "none finite"
        out.append(
            f"Balance moments: the DP noise sd of the SMD exceeds {SMD_THRESHOLD:g} (the usual balance threshold) "
            f"or the SMD is undefined for {listing} covariates ({largest}; {undefined} undefined: an arm's noisy "
            "spread <= 0, null in report.json): the balance diagnosis is uninformative there; "
            "raise [balance] epsilon, add subjects, or trim extreme weights."
        )
    return out


def _by_covariate(covariates: Sequence[str], values: NDArray[np.float64]) -> dict[str, float]:
    return dict(zip(covariates, map(float, values), strict=True))
