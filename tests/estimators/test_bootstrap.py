import gc

import numpy as np
import pytest

from collabcausal.errors import InputError, NumericalError
from collabcausal.estimators import bootstrap
from collabcausal.estimators.bootstrap import gap, run_replicates, stratified_resample, summarize
from collabcausal.randomness import child_rng


def _replicate(b):
    return float(child_rng(7, "bootstrap", b).normal())


def _paper_like_replicates(sd, ddof, B=1000):
    """B replicates with mean 1.5992 and standard deviation ``sd`` (with the given ddof)."""
    z = np.random.default_rng(0).normal(size=B)
    z = (z - z.mean()) / z.std(ddof=ddof)
    return 1.5992 + sd * z


def test_gap_reproduces_paper_003_table_2_psm_ia():
    # mean 1.5992, SE 0.1966, true ATE 1 -> gap 0.6306 (paper 003, Table 2, eq. 39)
    assert round(gap(_paper_like_replicates(0.1966, ddof=0), 1.0), 4) == 0.6306
    assert round(gap(_paper_like_replicates(0.1966, ddof=1), 1.0), 4) == 0.6306  # B = 1000
    assert round(gap(_paper_like_replicates(0.1966, ddof=1, B=100), 1.0), 4) == 0.6303  # not for B = 100


def test_gap_squared_is_ddof0_variance_plus_squared_bias():
    reps = np.random.default_rng(1).normal(2.0, 0.5, size=37)
    assert gap(reps, 1.5) ** 2 == pytest.approx(reps.var() + (reps.mean() - 1.5) ** 2)


def test_summarize_leaves_out_and_counts_failed_replicates():
    reps = np.r_[np.arange(1.0, 101.0), np.nan, np.nan]
    s = summarize(reps, benchmark=50.0, alpha=0.1)
    assert (s.n, s.n_failed) == (100, 2)
    assert s.mean == 50.5
    assert s.se == pytest.approx(np.std(np.arange(1.0, 101.0), ddof=1))
    assert (s.ci_low, s.ci_high) == tuple(np.quantile(np.arange(1.0, 101.0), [0.05, 0.95]))
    assert s.gap == pytest.approx(gap(np.arange(1.0, 101.0), 50.0))
    assert summarize(reps).gap is None


def test_summarize_with_fewer_than_two_successes_raises():
    with pytest.raises(NumericalError, match="1 of 3"):
        summarize([1.0, np.nan, np.nan])


def test_gap_rejects_nan_and_bad_benchmark():
    with pytest.raises(InputError, match="summarize"):
        gap([1.0, np.nan], 1.0)
    with pytest.raises(InputError, match="benchmark"):
        gap([1.0, 2.0], np.nan)


def test_stratified_resample_draws_within_each_group_reproducibly():
    local = stratified_resample([3, 5, 2], 42)
    assert [len(i) for i in local] == [3, 5, 2]
    assert all(i.min() >= 0 and i.max() < n for i, n in zip(local, [3, 5, 2], strict=True))
    glob = stratified_resample([3, 5, 2], 42, global_index=True)
    for i, g, off in zip(local, glob, [0, 3, 8], strict=True):
        np.testing.assert_array_equal(g, i + off)
    again = stratified_resample([3, 5, 2], np.random.default_rng(42))
    assert all(np.array_equal(a, b) for a, b in zip(local, again, strict=True))


def test_stratified_resample_rejects_empty_groups():
    with pytest.raises(InputError, match="group sizes"):
        stratified_resample([3, 0], 0)


def test_run_replicates_returns_results_in_order_whatever_n_jobs(capsys):
    serial = run_replicates(_replicate, 6)
    assert serial == [_replicate(b) for b in range(6)]
    assert run_replicates(_replicate, 6, n_jobs=2) == serial
    run_replicates(_replicate, 3, progress=True, desc="psm boot")
    assert "psm boot" in capsys.readouterr().err


def test_run_replicates_spawned_workers_get_closures_by_cloudpickle(monkeypatch):
    """Where workers cannot be forked (macOS, Windows) they are spawned: a closure still reaches them."""
    monkeypatch.setattr(bootstrap, "START_METHOD", "spawn")
    offset = 7
    assert run_replicates(lambda b: b + offset, 5, n_jobs=2) == [7, 8, 9, 10, 11]


def test_forked_workers_never_finalize_the_parents_garbage():
    # A DuckDB connection left in a reference cycle (as earlier work in the same test process leaves one): a forked
    # worker whose garbage collector destroyed it aborted ("std::system_error: Invalid argument"), the pool broke.
    duckdb = pytest.importorskip("duckdb")
    gc.disable()
    try:
        cycle: dict[str, object] = {"connection": duckdb.connect()}
        cycle["self"] = cycle
        cycle["connection"].execute("SELECT 1")  # type: ignore[attr-defined]
        del cycle
        assert run_replicates(_collected, 4, n_jobs=2) == [0, 1, 2, 3]
    finally:
        gc.enable()


def _collected(b: int) -> int:
    gc.collect()
    return b


def test_run_replicates_raises_a_failed_replicates_error():
    with pytest.raises(ZeroDivisionError):
        run_replicates(_fails_at_three, 400, n_jobs=2)


def _fails_at_three(b: int) -> float:
    return 1.0 / (b - 3)


def test_run_replicates_rejects_bad_counts():
    with pytest.raises(InputError, match="n_boot"):
        run_replicates(_replicate, 0)
    with pytest.raises(InputError, match="n_jobs"):
        run_replicates(_replicate, 2, n_jobs=0)
