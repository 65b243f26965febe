"""IHDP runner: any folder of IHDP-npci replications, format errors, declared bounds, baselines beside rows."""

import runpy
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import InputError
from collabcausal.simulations.ihdp import (
    bundled_dir,
    clipping_notes,
    estimate,
    ihdp_quick,
    ihdp_table,
    load_ihdp,
    replications_in,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ihdp.py"


def test_loader_reads_747_units_139_treated_and_recodes_x14():
    data = load_ihdp(1)
    assert data.X.shape == (747, 25)
    assert int(data.T.sum()) == 139
    assert set(np.unique(data.X[:, 13])) == {0.0, 1.0}
    assert data.tau.mean() == pytest.approx(4.016, abs=1e-3)
    assert replications_in(bundled_dir()) == (1, 2, 3, 4, 5)


def test_unknown_replication_is_refused():
    with pytest.raises(InputError, match="not bundled"):
        load_ihdp(7)


def _folder(tmp_path: Path, rep: int = 1, scale: float = 1.0) -> Path:
    frame = pd.read_csv(bundled_dir() / f"ihdp_npci_{rep}.csv")
    for col in ("y_factual", "y_cfactual", "mu0", "mu1"):
        frame[col] *= scale
    frame.to_csv(tmp_path / f"ihdp_npci_{40 + rep}.csv", index=False)
    return tmp_path


def test_a_headerless_cevae_file_reads_like_the_bundled_one(tmp_path):
    shutil.copy(bundled_dir() / "ihdp_npci_2.csv", tmp_path / "src.csv")
    lines = (tmp_path / "src.csv").read_text().splitlines()[1:]
    (tmp_path / "ihdp_npci_12.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "src.csv").unlink()
    ours, bundled = load_ihdp(12, tmp_path), load_ihdp(2)
    assert replications_in(tmp_path) == (12,)
    assert np.array_equal(ours.X, bundled.X) and np.array_equal(ours.Y, bundled.Y)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda f: f.drop(columns=["x25"]), "has 29 columns; the IHDP-npci format has 30"),
    (lambda f: f.assign(treatment=f["treatment"] * 2), "treatment must be 0/1"),
    (lambda f: f.assign(mu0=["a"] * len(f)), "non-numeric values in column 'mu0'"),
    (lambda f: f.rename(columns={"mu1": "m1"}), r"lacks the columns \['mu1'\]"),
])
def test_malformed_replications_are_refused_with_one_line_naming_the_file(tmp_path, edit, message):
    edit(pd.read_csv(bundled_dir() / "ihdp_npci_1.csv")).to_csv(tmp_path / "ihdp_npci_3.csv", index=False)
    with pytest.raises(InputError, match=message) as info:
        load_ihdp(3, tmp_path)
    assert "ihdp_npci_3.csv" in str(info.value) and "\n" not in str(info.value)


def test_an_empty_or_missing_folder_is_refused(tmp_path):
    with pytest.raises(InputError, match="no ihdp_npci"):
        replications_in(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        ihdp_table(data_dir=tmp_path / "nowhere", learners=("S",))


def test_private_learners_without_declared_outcome_bounds_are_refused_before_any_fit():
    with pytest.raises(InputError, match="declared public outcome bounds"):
        ihdp_table((1,), ("S", "DP-EBM S"))


def test_quick_table_puts_the_constant_and_econml_baselines_beside_every_row():
    table = ihdp_quick(seed=0)
    sd_tau = float(np.std(load_ihdp(1).tau))
    assert len(table) == 6 and set(table["seed"]) == {0, 1}
    assert np.allclose(table["const_true_sqrt_pehe"], sd_tau)
    # no constant beats the true ATE
    assert (table["const_own_sqrt_pehe"] >= table["const_true_sqrt_pehe"] - 1e-12).all()
    s_rows = table[table["learner"] == "S"]
    assert (s_rows["sqrt_pehe"] < sd_tau).all()  # boosting on [X, T] finds real heterogeneity here
    # collabcausal's learners and EconML's with the same base models agree closely on the same data
    np.testing.assert_allclose(s_rows["sqrt_pehe"], s_rows["econml_sqrt_pehe"], rtol=0.02)
    dr = table[table["learner"] == "DR"]
    np.testing.assert_allclose(dr["sqrt_pehe"], dr["econml_sqrt_pehe"], rtol=1e-6)  # same stratified folds
    private = table[table["learner"] == "DP-EBM S"]
    assert (private["epsilon"] == 8.0).all() and (private["clipped_outcomes"] == 0.0).all()
    assert np.isfinite(private["sqrt_pehe"]).all()


def test_outcomes_beyond_the_declared_bounds_are_counted_and_warned_about(tmp_path, capsys):
    folder = _folder(tmp_path, scale=6.0)  # a replication with a larger outcome scale than 1-5
    data = load_ihdp(41, folder)
    expected = float(((data.Y < -5) | (data.Y > 25)).mean())
    assert expected > 0.05
    est = estimate("DP-EBM S", data, 8.0, 0, outcome_bounds=(-5.0, 25.0))
    assert est.clipped_outcomes == pytest.approx(expected)
    row = pd.DataFrame([{"replication": 41, "learner": "DP-EBM S", "epsilon": 8.0,
                         "clipped_outcomes": est.clipped_outcomes}])
    (note,) = clipping_notes(row)
    assert f"{100 * expected:.1f}% of the outcomes" in note


def test_script_runs_on_a_data_dir_and_prints_the_clipping_warning(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    folder = _folder(tmp_path / "data", scale=6.0)
    main = runpy.run_path(str(SCRIPT))["main"]
    code = main(["--data-dir", str(folder), "--learners", "S", "DP-EBM S", "--epsilons", "8", "--seeds", "0",
                 "--outcome-bounds", "-5", "25", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 0
    assert "| DP-EBM S | 8.0 |" in printed and "econml_peer" in printed and "const_true_ate" in printed
    assert "warning: replication 41, DP-EBM S (eps 8)" in printed
    assert (tmp_path / "out" / "ihdp.md").read_text().startswith("| learner |")


def test_script_exits_with_the_input_error_code_and_one_line(tmp_path, capsys):
    main = runpy.run_path(str(SCRIPT))["main"]
    assert main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no ihdp_npci") and "\n" not in err
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_finite_queries_at_every_unit_are_refused_with_the_predicted_noise():
    with pytest.raises(InputError, match=r"predicted noise sd .* exceeds the declared outcome range 30"):
        estimate("DP-CATE R linear", load_ihdp(1), 1.0, 0, outcome_bounds=(-5.0, 25.0))
