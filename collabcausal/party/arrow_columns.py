"""Arrow columns of a party's source as numpy arrays: numeric only, no NULLs, one-line errors.

Shared by the in-memory reader (:mod:`collabcausal.party.sources`) and the out-of-core table
(:mod:`collabcausal.party.chunked_table`); ``start`` is the row of the column's first value in the
source, so an error names the source's row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from collabcausal.errors import InputError

__all__ = ["check_no_nulls", "float_column"]


def float_column(column: pa.Array, name: str, where: str, start: int) -> NDArray[np.float64]:
    """A numeric (or boolean, decimal) Arrow column as float64; NULLs and text are refused.

    Integers beyond 2**53 round to the nearest float64, as numpy's ``astype`` rounds those of a
    table built from a frame, so a table's values do not depend on the file format it was read from.
    """
    check_no_nulls(column, name, where, start)
    kind = column.type
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_boolean)
    if not any(is_kind(kind) for is_kind in numeric):
        raise InputError(
            f"{where}: column {name!r} is not numeric (type {kind})",
            "encode it as numbers (e.g. one-hot, or a CASE expression in the query)",
        )
    return column.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)


def check_no_nulls(column: pa.Array, name: str, where: str, start: int) -> None:
    """Refuse a column with a NULL, naming its (1-based) row in the source."""
    if column.null_count:
        row = start + int(np.argmax(column.is_null().to_numpy(zero_copy_only=False))) + 1
        raise InputError(
            f"{where}: column {name!r} has a NULL (row {row})",
            "drop or impute missing values (in a query: WHERE ... IS NOT NULL or COALESCE)",
        )
