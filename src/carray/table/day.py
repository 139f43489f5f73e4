"""The small things a table user does every day: a look at the first or last rows, and
CSV files in and out.

:class:`TableDay` is a part of :class:`carray.table.table.ctable` (its ``head``, ``tail``
and ``to_csv`` call it; ``ctable.from_csv`` calls :func:`from_csv`); it uses only the
table's public API, the column contract of :mod:`carray.table.columns.kinds` (values,
missing values, categories) and :mod:`carray.table.csv`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from carray.table import csv as table_csv
from carray.table.columns import membership  # noqa: F401 - registers the columns' isin method
from carray.table.columns.kinds import categories_of, null_count, read_part

#: Categories ``carray info`` shows of a categorical column (its dictionary's first ones).
SHOWN_CATEGORIES = 5


def value_facts(col: Any) -> dict[str, Any]:
    """What ``carray info`` tells of a column's values: how many are missing, and a
    categorical column's dictionary (its size and first values)."""
    facts: dict[str, Any] = {"missing": int(null_count(col))}
    categories = categories_of(col)
    if categories is not None:
        facts["categories"] = {"count": len(categories),
                               "first": [str(v) for v in categories[:SHOWN_CATEGORIES]]}
    return facts


def index_facts(table: Any) -> list[str]:
    """The table's indexes as lines of text: ``column: kind, rows indexed, ...``."""
    lines = []
    for name, facts in table.indexes.items():
        usable = "" if facts.get("usable", True) else ", not usable (queries scan)"
        lines.append(f"{name}: {facts['kind']}, {facts['rows']} rows indexed, "
                     f"{facts['tail']} appended since, {facts['dirty']} edited since, "
                     f"{facts['cbytes']} bytes{usable}")
    return lines


def edge_rows(length: int, n: int, last: bool) -> range:
    """The rows ``head(n)`` (or ``tail(n)`` when ``last``) shows of ``length`` rows; a
    negative ``n`` means all but the other end's ``|n|``, as pandas."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    n = int(n)
    count = min(n, length) if n >= 0 else max(length + n, 0)
    return range(length - count, length) if last else range(0, count)


class TableDay:
    """``head``, ``tail`` and ``to_csv`` of ``table``."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def _rows_table(self, rows: range) -> Any:
        t = self.table
        cols = t.cols
        parts = {name: read_part(cols[name], rows) for name in t.names}
        return type(t)(parts, cparams=t.cparams)

    def head(self, n: int = 5) -> Any:
        """The first ``n`` rows as a new in-memory table (only those rows are read).

        Parameters
        ----------
        n : int
            Rows to keep; a negative ``n`` keeps all but the last ``|n|`` (as pandas).

        Returns
        -------
        ctable
        """
        return self._rows_table(edge_rows(len(self.table), n, last=False))

    def tail(self, n: int = 5) -> Any:
        """The last ``n`` rows as a new in-memory table (only those rows are read).

        Parameters
        ----------
        n : int
            Rows to keep; a negative ``n`` keeps all but the first ``|n|`` (as pandas).

        Returns
        -------
        ctable
        """
        return self._rows_table(edge_rows(len(self.table), n, last=True))

    def to_csv(self, path: str | os.PathLike, *, columns: Sequence[str] | None = None,
               delimiter: str = ",", header: bool = True,
               rows: int | None = None) -> None:
        """Write the table to a CSV file, a batch of rows at a time, to a temporary name
        renamed into place at the end (a failure leaves no half-written file).

        Parameters
        ----------
        path : str or path
            The CSV file to write (replaced if it exists).
        columns : sequence of str, optional
            The columns to write, in order (default: all).
        delimiter : str
            The field separator.
        header : bool
            Whether to write the column names first.
        rows : int, optional
            Rows per batch (default: :data:`carray.table.interop.STREAM_ROWS`).
        """
        table_csv.write_csv(self.table, path, columns, delimiter, header, rows)


def from_csv(cls: Any, path: str | os.PathLike, rootdir: str | os.PathLike | None = None,
             *, dtypes: dict[str, Any] | None = None, delimiter: str = ",",
             header: bool = True, names: Sequence[str] | None = None,
             usecols: Sequence[str] | None = None,
             null_values: Sequence[str] | None = None,
             block_size: int = table_csv.BLOCK_BYTES, **kwargs: Any) -> Any:
    """A table of class ``cls`` (``ctable.from_csv``) from a CSV file, read a block at a
    time (see :mod:`carray.table.csv`).

    Parameters
    ----------
    path : str or path
        The CSV file.
    rootdir : str or path, optional
        Where to store the table (None: in memory).  Nothing is left there when
        reading fails.
    dtypes : dict, optional
        Column name -> numpy dtype (or pyarrow type); the others are inferred
        from the first block.
    delimiter : str
        The field separator.
    header : bool
        Whether the first line names the columns (else ``f0, f1, ...`` or ``names``).
    names : sequence of str, optional
        The column names (replacing the header's, when there is one).
    usecols : sequence of str, optional
        Only these columns, in this order.
    null_values : sequence of str, optional
        The strings that mean a missing value (default: Arrow's: '', 'NA', 'null'...).
    block_size : int
        Bytes of the file parsed at a time: what bounds the memory used (about
        32 blocks of text, read ahead, and one block of decoded values).
    **kwargs
        Passed to the table (``cparams``, ``format``, ``chunklen``...).

    Returns
    -------
    ctable

    Raises
    ------
    carray.errors.CsvError
        The file is not valid CSV, or a value does not fit its column's type.
    """
    options = table_csv.CsvOptions(dtypes=dtypes, delimiter=delimiter, header=header,
                                   names=names, usecols=usecols, null_values=null_values,
                                   block_size=block_size)
    return table_csv.read_csv(cls, path, rootdir, options, kwargs)
