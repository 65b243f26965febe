"""Analysis settings of a grid simulation (paper 003, section 5.1).

``CA``: centralized analysis on all raw covariates (the ideal, impossible in practice).
``IA``: one party alone on its raw covariates. A collaboration: DC-QE over any subset of parties.
On a 2x2 grid the paper's names apply: L (p11 + p21), R (p12 + p22), T (p11 + p12), B (p21 + p22),
W (all four); ``L-IA`` and ``R-IA`` are p11 and p12 alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from collabcausal.errors import InputError

if TYPE_CHECKING:
    from collabcausal.simulations.partition import GridPartition

Kind = Literal["central", "individual", "collaboration"]


@dataclass(frozen=True)
class Setting:
    """One analysis setting.

    Attributes
    ----------
    name : str
        Label in tables, e.g. ``"W-clb"``.
    kind : {"central", "individual", "collaboration"}
    parties : tuple of str
        The parties whose data the setting uses (all parties for CA).
    n_components : int or None
        m^ for a collaboration (None: the default of
        :func:`collabcausal.analyst.collaboration.collaborative_representation`).
    """

    name: str
    kind: Kind
    parties: tuple[str, ...]
    n_components: int | None = None

    def estimator_label(self, estimator: str) -> str:
        """``PSM`` for IA/CA rows, ``DC-QE(PSM)`` for collaborations (paper 003's tables)."""
        return f"DC-QE({estimator.upper()})" if self.kind == "collaboration" else estimator.upper()


PAPER_2X2: dict[str, tuple[str, ...]] = {
    "L": ("p11", "p21"),
    "R": ("p12", "p22"),
    "T": ("p11", "p12"),
    "B": ("p21", "p22"),
    "W": ("p11", "p12", "p21", "p22"),
}
PAPER_2X2_IA = {"L-IA": "p11", "R-IA": "p12"}
DEFAULT_2X2 = ("L-IA", "R-IA", "L", "R", "T", "B", "W", "CA")


def parse_settings(
    tokens: Sequence[str], partition: GridPartition, n_components: dict[str, int] | None = None
) -> list[Setting]:
    """Settings from tokens.

    Tokens: ``CA``; ``IA:p21`` (one party alone; ``L-IA``/``R-IA`` on 2x2); ``W`` (every party);
    ``L``, ``R``, ``T``, ``B`` (2x2 only); ``p11+p22`` (any subset, named by its parties).
    ``n_components`` maps a setting name to its m^.
    """
    every = [p for row in partition.names() for p in row]
    is_2x2 = partition.shape == (2, 2)
    out: list[Setting] = []
    for raw in tokens:
        token = raw.strip()
        if token == "CA":
            setting = Setting("CA", "central", tuple(every))
        elif token.startswith("IA:") or (is_2x2 and token in PAPER_2X2_IA):
            party = token[3:] if token.startswith("IA:") else PAPER_2X2_IA[token]
            setting = Setting(token if token in PAPER_2X2_IA else f"IA-{party}", "individual", (party,))
        elif token == "W":
            setting = Setting("W-clb", "collaboration", tuple(every))
        elif is_2x2 and token in PAPER_2X2:
            setting = Setting(f"{token}-clb", "collaboration", PAPER_2X2[token])
        elif "+" in token:
            setting = Setting(token, "collaboration", tuple(p.strip() for p in token.split("+")))
        else:
            hint = "CA, IA:pIJ, W, pIJ+pKL" + (", L, R, T, B, L-IA, R-IA" if is_2x2 else "")
            raise InputError(f"unknown setting {token!r}", f"use {hint}")
        unknown = [p for p in setting.parties if p not in every]
        if unknown:
            raise InputError(f"setting {token!r} names unknown party {unknown[0]!r}", f"parties are {every}")
        if n_components and setting.name in n_components:
            setting = Setting(setting.name, setting.kind, setting.parties, int(n_components[setting.name]))
        out.append(setting)
    if len({s.name for s in out}) != len(out):
        raise InputError("a setting is listed twice", "list each setting once")
    return out
