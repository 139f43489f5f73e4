"""Analysis of a table: group-by, sort, distinct values and their counts.

:class:`TableAnalysis` is a part of :class:`carray.table.table.ctable` (its ``groupby``,
``sort``, ``unique`` and ``value_counts`` call it); it uses only the table's public API.
The work is done by :mod:`carray.table.analysis.groupby` and
:mod:`carray.table.analysis.sort`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from carray.table.analysis import sort as table_sort
from carray.table.analysis.groupby import GroupBy, distinct
from carray.table.columns.category_values import CategoricalValues, decode


class TableAnalysis:
    """``groupby``, ``sort``, ``unique`` and ``value_counts`` of ``table``; results are
    new tables made by ``make`` (the table class: ``make(columns, rootdir=, mode=)``)."""

    def __init__(self, table: Any, make: Callable[..., Any]) -> None:
        self.table, self.make = table, make

    def _result_table(self, columns: dict[str, np.ndarray] | None, rootdir: Any = None,
                      mode: str = "w", **kwargs: Any) -> Any:
        """A new table from ``columns`` (or the table at ``rootdir`` opened, without them)."""
        return self.make(columns, rootdir=rootdir, mode=mode, **kwargs)

    def groupby(self, keys: str | Sequence[str], dropna: bool = True) -> GroupBy:
        """The groups of rows with equal values of column(s) ``keys``.

        Parameters
        ----------
        keys : str or list of str
            The key column(s): numbers, strings, datetimes or categoricals.
        dropna : bool
            Leave out rows whose key is missing (NaN included), as pandas does;
            ``False`` keeps them as a group of their own, last.

        Returns
        -------
        GroupBy
            ``.agg({'out': ('col', 'func'), ...})``, ``.size()``, ``.count()``; see
            :class:`carray.table.analysis.groupby.GroupBy`.

        Examples
        --------
        >>> t.groupby("route").agg({"delay": ("dep_delay", "mean"), "n": ("id", "count")})
        """
        return GroupBy(self.table, keys, dropna, make=self._result_table)

    def sort(self, by: str | Sequence[str], ascending: bool | Sequence[bool] = True,
             rootdir: Any = None, na_position: str = "last", *, mode: str = "w",
             memory: int | None = None) -> Any:
        """The table's rows in the order of column(s) ``by``, as a new table.

        The sort is stable and out of core: sorted runs of at most ``memory`` bytes of
        keys are spilled to a temporary directory, merged, and every column gathered
        in the new order block by block.

        Parameters
        ----------
        by : str or list of str
            The key column(s), most significant first.
        ascending : bool or list of bool
            The direction, for all keys or one per key.
        rootdir, mode : optional
            Where to store the result (default: in memory), as for :class:`ctable`.
            On disk the result appears whole or not at all.
        na_position : {'last', 'first'}
            Where rows with a missing key (NaN included) go.
        memory : int, optional
            The working memory to stay within, in bytes (default 256 MiB).

        Returns
        -------
        ctable
        """
        return table_sort.sort_table(self.table, by, ascending, na_position, memory,
                                     self._result_table, rootdir, mode)

    def unique(self, column: str) -> np.ndarray:
        """The distinct values of ``column`` in ascending order (as :func:`numpy.unique`;
        a categorical column's in its dictionary's order), missing values (NaN included)
        left out; zoned timestamps as UTC instants that keep their zone (``.timezone``)."""
        values, _ = distinct(self.table, column)
        if isinstance(values, CategoricalValues):
            return decode(values.codes, values.categories)
        return values

    def value_counts(self, column: str, dropna: bool = True, *, rootdir: Any = None,
                     mode: str = "w") -> Any:
        """How many rows hold each value of ``column``, as a ctable of ``column`` and
        ``count``, most frequent first (ties in ascending order of value), as pandas'
        ``Series.value_counts``; ``dropna=False`` counts missing values too (last among
        equal counts)."""
        values, counts = distinct(self.table, column, dropna=dropna, counts=True)
        assert counts is not None
        order = np.argsort(-counts, kind="stable")
        if isinstance(values, CategoricalValues):  # a categorical column stays one
            values = CategoricalValues(values.codes[order], values.categories, values.ordered)
        else:
            values = values[order]
        return self._result_table({column: values, "count": counts[order]},
                                  rootdir=rootdir, mode=mode)
