"""A covariate at its range's midpoint on every subject of a batch (design value exactly 0) in the three-party
statistics round (red3): the party that multiplies L's arm by it was charged and then refused, so a coordinator
asking for batches of one subject learnt which subjects sit at the midpoint. Now nothing is refused and the
released statistics are the exact ones, to the noise and the CKKS error."""

from __future__ import annotations

import numpy as np
import pytest
from three_rounds import STEPS, Three, opening, relayed
from vertical_parties import spent

from collabcausal.estimators.dp.effects.statistics import fold_statistics
from collabcausal.messages import Message
from collabcausal.party import PartyTable


@pytest.mark.slow
def test_a_batch_whose_covariate_is_at_its_midpoint_is_totalled_not_refused(tmp_path) -> None:
    """The registry's a2 is 0 (the midpoint of [-3, 3]) on the 150 subjects of batch 0: the round runs through both
    batches and L's opening equals the exact statistics within 6 sd of the two noise shares."""
    w = Three(tmp_path, epsilon=1000.0)
    w.X[:150, 2] = 0.0
    table = w.registry.table
    w.registry.table = PartyTable.from_arrays(np.column_stack([w.X[:, 2], table.column("b0")]), ["a2", "b0"])
    terms = w.terms("statistics", batch_rows=150)
    key = w.seal_key(w.insurer, terms["round"])
    replies = {}
    for batch in range(2):
        asked = terms | {"batch": batch}
        columns = w.label.handle(Message(STEPS["statistics"][0], asked))
        replies[1] = w.registry.handle(relayed(STEPS["statistics"][1], asked, columns, seal_keys={"2": key}))
        replies[2] = w.insurer.handle(relayed(STEPS["statistics"][1], asked, columns, sealed={1: replies[1]},
                                              receiver=2))
    released = w.label.handle(opening("statistics", terms, [replies[1], replies[2]])).array("values")
    fm = w.feature_map()
    exact = fold_statistics(fm.design(w.X, 0), w.T, fm.centred_outcome(w.Y), fm.outcome_width)
    sigma = float(replies[1].params["sigma"])
    assert np.abs(released - exact).max() < 6 * np.sqrt(2) * sigma + 0.05
    assert all(spent(p) > 0 for p in w.parties)
