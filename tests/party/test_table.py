"""PartyTable: declared columns, validation errors that name the problem and the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collabcausal.errors import InputError
from collabcausal.party.sources import DataSource, read_table
from collabcausal.party.table import PartyTable, read_table_file


def frame(n: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "id": [f"s{i}" for i in range(n)],
            "age": rng.normal(40, 10, n),
            "bmi": rng.normal(25, 3, n),
            "treat": np.arange(n) % 2,
            "y": rng.normal(size=n),
        }
    )


def load(df: pd.DataFrame, **kw: object) -> PartyTable:
    args = {"treatment": "treat", "outcome": "y", "subject_id": "id"} | kw
    return PartyTable.from_frame(df, ["age", "bmi"], **args)  # type: ignore[arg-type]


def test_valid_table_keeps_declared_columns_in_order() -> None:
    table = load(frame())
    assert table.covariate_names == ("age", "bmi")
    assert table.covariates.shape == (20, 2)
    assert table.has_labels and table.treatment.dtype == np.int8
    assert table.subject_ids[3] == "s3"
    np.testing.assert_array_equal(table.column("bmi"), frame()["bmi"].to_numpy())


def test_party_without_labels_is_not_a_label_holder() -> None:
    table = PartyTable.from_frame(frame(), ["age"])
    assert not table.has_labels and table.treatment is None


@pytest.mark.parametrize(
    ("mutate", "kwargs", "message"),
    [
        (lambda d: d.iloc[:0], {}, "has no rows"),
        (lambda d: d, {"covariates": ["age", "weight"]}, "unknown column 'weight'"),
        (lambda d: d, {"covariates": ["age", "age"]}, "declared twice"),
        (lambda d: d.assign(bmi=d["bmi"].astype(str).where(d.index != 4, "high")), {}, "'bmi' is not numeric (row 5"),
        (lambda d: d.assign(age=d["age"].where(d.index != 2, np.nan)), {}, "NaN or infinite value (row 3)"),
        (lambda d: d.assign(age=d["age"].where(d.index != 7, np.inf)), {}, "NaN or infinite value (row 8)"),
        (lambda d: d.assign(treat=d["treat"] + 1), {}, "must be coded 0/1, found 2"),
        (lambda d: d.assign(treat=0), {}, "only one arm"),
        (lambda d: d.assign(bmi=1.0), {}, "covariate 'bmi' is constant"),
        (lambda d: d.iloc[:5], {}, "fewer than the minimum 10"),
        (lambda d: d.assign(id="same"), {}, "has duplicates"),
        (lambda d: d, {"outcome": None}, "declared together"),
    ],
)
def test_bad_tables_are_refused_with_one_line_naming_the_problem(mutate, kwargs, message) -> None:
    df = mutate(frame())
    covariates = kwargs.pop("covariates", ["age", "bmi"])
    args = {"treatment": "treat", "outcome": "y", "subject_id": "id"} | kwargs
    with pytest.raises(InputError) as info:
        PartyTable.from_frame(df, covariates, **args)
    text = str(info.value)
    assert message in text and "fix:" in text and "\n" not in text


def test_constant_covariate_can_be_dropped_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="dropping constant covariates"):
        table = load(frame().assign(bmi=2.0), on_constant="drop")
    assert table.covariate_names == ("age",)


def test_repeated_header_is_refused() -> None:
    df = frame()
    df.columns = ["id", "age", "age", "treat", "y"]
    with pytest.raises(InputError, match="header repeats column 'age'"):
        PartyTable.from_frame(df, ["age"])


def test_files_load_from_csv_and_parquet(tmp_path) -> None:
    df = frame()
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet")
    a = read_table(DataSource(path=tmp_path / "t.csv"), ["age", "bmi"], treatment="treat", outcome="y")
    b = read_table(DataSource(path=tmp_path / "t.parquet"), ["age", "bmi"], treatment="treat", outcome="y")
    np.testing.assert_allclose(a.covariates, b.covariates)
    assert a.source.endswith("t.csv")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.csv", None, "no such file"),
        ("empty.csv", b"", "is empty"),
        ("bad.parquet", b"not parquet at all", "is not a readable parquet table"),
        ("table.xlsx", b"x", "unsupported file type"),
    ],
)
def test_unreadable_files_are_refused(tmp_path, name, content, message) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        read_table_file(path)


@pytest.mark.parametrize(("sep", "shown"), [(";", "';'"), ("\t", "tab"), ("|", "'|'")])
def test_a_csv_with_another_delimiter_is_named_as_such(tmp_path, sep: str, shown: str) -> None:
    """Issue 38, item 7: a ';'-separated file is one column to pandas; say so instead of listing it."""
    frame().to_csv(tmp_path / "t.csv", index=False, sep=sep)
    with pytest.raises(InputError) as refused:
        read_table(DataSource(path=tmp_path / "t.csv"), ["age", "bmi"], treatment="treat", outcome="y")
    message = str(refused.value)
    assert f"unknown column 'age': the header 'id{sep}age{sep}bmi{sep}treat{sep}y'".replace("\t", "\\t") in message
    assert f"looks {shown}-separated" in message and "save the table as comma-separated CSV" in message
    assert "use one of" not in message
