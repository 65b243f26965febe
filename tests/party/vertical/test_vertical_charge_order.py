"""Refusals after a charge in the vertical operations, and whether they could depend on the private rows.

Every refusal of the six operations that follows a charge was listed (docs/dp-effects-vertical.md, "What a
refusal after the charge depends on"). Two could depend on one subject's values, which a coordinator reads from
the error channel (the refusal is not noised): the CKKS headroom of the evaluator's totals and of the score
program's intermediates, whose interval bounds used the largest plaintext the evaluator held (its design
products; the outcome, treatment and its own parts). Both are now checked before either party charges from
public quantities alone (:func:`~collabcausal.vertical.packing.check_headroom`,
:func:`~collabcausal.vertical.dp_effects_rounds.check_score_headroom`); these tests show each dependence on one
subject at the low level, and the refusal coming first at the party. A third candidate, the scores' key owner
refusing to encrypt a part beyond [-1, 1], never happens (last test).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hostile_rounds import GROUPS, feature_map, honest_program, relayed, request, small_world
from vertical_parties import spent

from collabcausal.errors import InputError
from collabcausal.estimators.dp.effects.design import FeatureMap
from collabcausal.estimators.dp.effects.nuisances import NuisanceModel
from collabcausal.estimators.dp.effects.vertical import ColumnGroups, PartLimits, group_design
from collabcausal.estimators.dp.effects.vertical_program import ScoreProgram, score_inputs
from collabcausal.party import PartyTable
from collabcausal.party.vertical import scores, statistics
from collabcausal.vertical import KeyOwner, load_public_context, preset
from collabcausal.vertical.column import EncryptedColumn, RelayedColumn
from collabcausal.vertical.dp_effects_rounds import _score_terms, check_score_headroom, score_summands
from collabcausal.vertical.parameters import CKKSParameters


def _scaled(program: ScoreProgram, s: float, fm) -> ScoreProgram:
    """The study model and its limits times ``s``, the replicates' changes not (a hostile program)."""
    m = program.model
    model = NuisanceModel(m.propensity_coef * s, (m.outcome_coef[0] * s, m.outcome_coef[1] * s))
    return ScoreProgram.build(model, PartLimits(program.limits.low * s, program.limits.high * s), program.changes,
                              program.trim, fm)


def _evaluates(program: ScoreProgram, plain, T, y) -> bool:
    """Whether the evaluator's program passes its interval checks on these plaintexts (no ciphertexts needed:
    the bounds are what the checks read)."""
    columns = [EncryptedColumn.bounds_only(preset(scores.DEPTH), T.size) for _ in plain]
    try:
        _score_terms(columns, plain, T, y, program.poly, program.parts, program.unit)
    except InputError:
        return False
    return True


def _threshold(program: ScoreProgram, fm, plain_of, T, y) -> float:
    """The smallest scale (to 1e-12 relative) at which the program's evaluation on these rows is refused."""
    low, high = 1.0, 1e7
    while high / low > 1 + 1e-12:
        mid = float(np.sqrt(low * high))
        low, high = (mid, high) if _evaluates(_scaled(program, mid, fm), plain_of(mid), T, y) else (low, mid)
    return high


def test_the_score_programs_headroom_refusal_depended_on_one_outcome_and_now_comes_first(tmp_path) -> None:
    """Rows A (continuous outcomes inside the range) and A' (A with subject 0's outcome at the range's edge):
    at a scale of the model between their thresholds, the evaluation of A computes and that of A' is refused,
    after the evaluator's charge as it was. Each party now refuses that program from the program alone."""
    w = small_world(tmp_path)
    fm, program = feature_map(w), honest_program(w)
    rng = np.random.default_rng(36)
    outcome = rng.uniform(0.1, 0.9, w.T.size)
    edge = outcome.copy()
    edge[0] = 1.0
    T = w.T.astype(float)
    label_design = group_design(fm, w.X[:, :3], 0, GROUPS, 0)

    def plain_of(s: float) -> list[np.ndarray]:
        return score_inputs(_scaled(program, s, fm), label_design, 0, GROUPS, fm)

    inside = _threshold(program, fm, plain_of, T, fm.centred_outcome(outcome))
    at_edge = _threshold(program, fm, plain_of, T, fm.centred_outcome(edge))
    assert at_edge < inside  # one subject's outcome moves the refusal
    s = float(np.sqrt(inside * at_edge))
    hostile = _scaled(program, s, fm)
    owner = KeyOwner(preset(scores.DEPTH))
    public = load_public_context(owner.public_context())
    theirs = [RelayedColumn(public, owner.encrypt(v).to_bytes(), w.T.size)
              for v in score_inputs(hostile, group_design(fm, w.X[:, 3:], 0, GROUPS, 1), 1, GROUPS, fm)]
    shares = np.full(len(hostile.parts), 1.0)
    assert len(score_summands(theirs, plain_of(s), T, fm.centred_outcome(outcome), hostile.poly, hostile.parts,
                              hostile.unit).packed(public, shares, 1.0)) == 1
    with pytest.raises(InputError, match="intermediate"):
        score_summands(theirs, plain_of(s), T, fm.centred_outcome(edge), hostile.poly, hostile.parts, hostile.unit)
    with pytest.raises(InputError, match="intermediate"):
        check_score_headroom(public.parameters, len(theirs), w.T.size, w.T.size, hostile.poly, hostile.parts,
                             hostile.unit, fm.outcome_width / 2, 1.0)


def test_the_evaluator_refuses_a_program_beyond_its_headroom_before_its_charge(tmp_path, monkeypatch) -> None:
    """A key owner that skipped the check (or another implementation of it) signs columns for the hostile
    program: the evaluator refuses them from the program before its own charge."""
    w = small_world(tmp_path)
    hostile = _scaled(honest_program(w), 1e6, feature_map(w))
    sent = request(w, "scores", program=hostile)
    with monkeypatch.context() as patched:
        patched.setattr(scores, "_check_headroom", lambda *args: None)
        reply = w.other.handle(sent)
    with pytest.raises(InputError, match="intermediate"):
        w.label.handle(relayed("scores", sent, reply))
    assert spent(w.label) == 0.0


NARROW = CKKSParameters(8192, (52, 38, 38, 60), 38, error_bound=1e-5, rotation_base=2)
"""Depth 1 with a headroom of 2^12 = 4,096 (the statistics preset's 2^20 reached at 300 subjects, not 10^6)."""


def test_the_statistics_headroom_refusal_depended_on_one_covariate_and_now_comes_first(tmp_path, monkeypatch) -> None:
    """The evaluator's cross totals bounded each sum by its largest design product: with the headroom at 4,096
    and one chunk of 4,096 slots, rows whose covariates stay inside 90% of the box were totalled and rows with
    one subject at the box's edge refused, after the charge. Now both parties refuse the round from n first."""
    w = small_world(tmp_path, epsilon=1e4)
    monkeypatch.setattr(statistics, "preset", lambda depth: NARROW)
    box = 0.9 * 3.0
    inside = np.column_stack([np.clip(w.X[:, 3:5], -box, box), np.clip(w.X[:, 5], 0.05, 0.95)])
    edge = inside.copy()
    edge[0, 0] = 3.0
    quarter = {k: request(w, "statistics").params[k] / 4 for k in ("rho", "delta")}  # three rounds at P
    sent = request(w, "statistics", **quarter)
    with monkeypatch.context() as patched:
        patched.setattr(statistics, "check_headroom", lambda *args: None)
        reply = w.label.handle(sent)
    charged = spent(w.label)
    columns = relayed("statistics", sent, reply)
    for rows, refused in ((inside, False), (edge, True)):
        w.other.table = PartyTable.from_arrays(rows, ("b0", "b1", "b2"))
        w.other.vertical_evaluations.clear()  # P evaluates the round again
        before = spent(w.other)
        with monkeypatch.context() as patched:
            patched.setattr(statistics, "check_headroom", lambda *args: None)
            if refused:
                with pytest.raises(InputError, match="headroom"):
                    w.other.handle(columns)
            else:
                w.other.handle(columns)
        assert spent(w.other) > before  # charged either way: the refusal came after the charge
    w.other.vertical_evaluations.clear()  # P evaluates the round again
    before = spent(w.other)
    with pytest.raises(InputError, match="headroom"):
        w.other.handle(columns)
    with pytest.raises(InputError, match="headroom"):
        w.label.handle(request(w, "statistics", **quarter, round="another"))
    assert spent(w.label) == charged and spent(w.other) == before


def test_the_key_owners_encryption_never_refuses_after_its_charge_whatever_the_program() -> None:
    """The scores' key owner encrypts ``score_inputs`` after its charge, and encryption refuses a value beyond
    [-1, 1]: that refusal would depend on its rows. Over 400 random hostile programs (coefficients and limits from
    1e-302 to 1e302, degenerate and overlapping limits, 0-2 replicates; the ones `build` refuses skipped), both
    groups' parts on every corner of the covariate box and 500 random rows, both sites, stay within [-1, 1]
    (measured worst 0.99997): the scales are the parts' own bounds, and float rounding is monotone."""
    groups = ColumnGroups(((0, 1, 2), (3, 4, 5)))
    fm = FeatureMap(((-3.0, 3.0),) * 5 + ((0.0, 1.0),), (0.0, 1.0), 2)
    rng = np.random.default_rng(0)
    box = np.asarray(fm.bounds)
    X = np.vstack([np.array(list(itertools.product(*box))), rng.uniform(box[:, 0], box[:, 1], (500, 6))])
    built = 0
    for _ in range(400):
        size = rng.choice([-300, -100, -10, -3, 0, 3, 10, 100, 300])

        def coef(size=size):
            return rng.standard_normal(fm.dim) * 10.0 ** (size + rng.uniform(-2, 2, fm.dim))

        def limits(size=size):
            low = rng.standard_normal((3, 2)) * 10.0 ** (size + rng.uniform(-3, 3, (3, 2)))
            high = low + np.abs(rng.standard_normal((3, 2))) * 10.0 ** (size + rng.uniform(-3, 3, (3, 2)))
            return PartLimits(low, low.copy() if rng.random() < 0.2 else high)

        try:
            changes = [(NuisanceModel(coef(), (coef(), coef())), limits()) for _ in range(int(rng.integers(0, 3)))]
            program = ScoreProgram.build(NuisanceModel(coef(), (coef(), coef())), limits(), changes,
                                         float(rng.choice([0.01, 0.1, 0.3])), fm)
        except InputError:
            continue
        built += 1
        for site, group in itertools.product(range(2), range(2)):
            design = group_design(fm, X[:, list(groups.groups[group])], site, groups, group)
            for values in score_inputs(program, design, group, groups, fm):
                assert np.all(np.isfinite(values)) and np.max(np.abs(values)) <= 1.0
    assert built > 300
