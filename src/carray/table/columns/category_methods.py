"""Table methods for categorical columns (:class:`CategoryMethods`, a part of
:class:`carray.table.table.ctable`, whose ``categorize`` and ``decategorize`` call it).

A table gets a categorical column from a pandas ``Categorical`` or an Arrow
dictionary column, from values wrapped with :func:`carray.categorical`
(``ctable({'carrier': categorical(values)})``, ``t.addcol(categorical(v), 'c')``),
or by :meth:`CategoryMethods.categorize` of a column it holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.table.columns import timezones
from carray.table.columns.category import CategoryColumn
from carray.table.columns.category_values import categorical
from carray.table.columns.kinds import read_any


class CategoryMethods:
    """``categorize``/``decategorize`` of ``table`` (through its public API only)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def categorize(self, name: str, categories: Any = None, ordered: bool = False) -> None:
        """Store column ``name`` as codes into a dictionary of its distinct values (in
        place, at the same position); ``categories`` and ``ordered`` as for
        :func:`carray.categorical`.  A column that is categorical already is left alone."""
        t = self.table
        col = t.cols[name]
        if isinstance(col, CategoryColumn):
            return
        values = categorical(read_any(col, range(len(t))), categories, ordered)
        pos = t.names.index(name)
        t.delcol(name)
        t.addcol(values, name=name, pos=pos)

    def decategorize(self, name: str) -> None:
        """Store categorical column ``name`` as its plain values again (a missing value
        needs a column that can hold it: NaN in floats, NaT in datetimes)."""
        t = self.table
        col = t.cols[name]
        if not isinstance(col, CategoryColumn):
            return
        values = col.read_rows(range(len(t)))
        if col.null_count() and values.dtype.kind not in "fmM":
            raise ValueError(f"column {name!r} has {col.null_count()} missing values, which "
                             f"a plain column of {values.dtype} cannot hold")
        pos = t.names.index(name)
        t.delcol(name)
        t.addcol(values, name=name, pos=pos)


def result_columns(t: Any, rows: np.ndarray, names: list[str]) -> dict[str, Any]:
    """Columns ``names`` of ``rows`` (a query's structured result of table ``t``) as a
    new table's: categorical ones encoded with ``t``'s dictionary (its order too), zoned
    timestamps with their zone."""
    out: dict[str, Any] = {}
    for name in names:
        col = t.cols[name] if name in t.cols else None
        if isinstance(col, CategoryColumn):
            out[name] = categorical(rows[name], col.categories, col.ordered)
        elif (zone := timezones.zone_of(col)) is not None:
            out[name] = timezones.ZonedTimes(rows[name], zone)
        else:
            out[name] = rows[name]
    return out


def pandas_values(col: Any, rows: range) -> Any:
    """Rows ``rows`` of column ``col`` as pandas takes them: a ``Categorical`` with the
    column's whole dictionary (every part of a table the same dtype), zoned timestamps
    as a ``DatetimeArray`` in their zone, else the plain values."""
    if isinstance(col, CategoryColumn):
        import pandas as pd

        return pd.Categorical.from_codes(col.codes(rows), categories=col.categories,
                                         ordered=col.ordered)
    if (zone := timezones.zone_of(col)) is not None:
        return timezones.to_pandas(read_any(col, rows), zone)
    return read_any(col, rows)
