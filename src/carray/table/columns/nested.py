"""Nested columns: a table column whose values are records of a structured dtype,
stored field by field.

On disk a nested column ``b`` of dtype ``[('sc1', 'i4'), ('sc3', 'f8')]`` is a
directory holding one column directory per field, ``b/sc1`` and ``b/sc3``, and
``b/__rootdirs__`` naming them in order: the layout the carray/BLZ proposals draw
for nested dtypes (the root of a nested type holds its components), and itself
a table directory, so each field is a real column that opens on its own.  A
field with a structured dtype is nested again, one directory level deeper.

``t.cols['b']['sc1']`` is the field's column; reading rows of ``b`` gives the
records, and rows of the table hold them as nested records.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.table.bcolz.refresh import is_nested_column
from carray.table.columns.kinds import clip_column, register_kind, wants_nested_column
from carray.table.store import NESTED
from carray.table.table import ctable


class NestedColumn(ctable):
    """A column of records stored as one column per field (see the module docstring).

    Parameters are those of :class:`carray.ctable`; ``values`` is a structured
    array (its fields become the sub-columns), or None to open ``rootdir``.
    """

    def __init__(self, values: Any = None, **kwargs: Any) -> None:
        if values is not None and not isinstance(values, np.ndarray):
            values = values[:]  # another nested column, or a carray of records
        if values is not None:
            values = np.asanyarray(values)  # masked fields become nullable columns
            if values.dtype.names is None:
                raise TypeError(f"a nested column holds records, not {values.dtype}")
        super().__init__(values, **kwargs)

    # -- what a table asks of a column ------------------------------------------------------

    @property
    def chunklen(self) -> int:
        """Rows per chunk of the field with the shortest chunks."""
        return min((c.chunklen for c in self.cols.values()), default=1)

    def read_rows(self, rows: range, out: np.ndarray | None = None) -> np.ndarray:
        """Records ``rows`` (a range) as a structured array, into ``out`` if given."""
        records = self[rows.start:rows.stop:rows.step] if rows.step > 0 else \
            self[np.asarray(rows, dtype=np.intp)]
        if out is None:
            return records
        out[...] = records
        return out

    def take(self, indices: Any) -> np.ndarray:
        """Records at ``indices`` (ints, any order, repeats allowed)."""
        return self[np.asarray(indices, dtype=np.intp)]

    def clip(self, nitems: int) -> None:
        """Hide records past ``nitems`` without writing (a read-only table's view)."""
        for col in self.cols.values():
            clip_column(col, nitems)
        self._set_length(min(nitems, len(self)))

    def null_count(self) -> int:
        """How many records are missing: 0 (a record is never missing as a whole; its
        fields are columns of their own, ``t.cols['b']['sc1'].null_count()``)."""
        return 0

    def __repr__(self) -> str:
        return f"NestedColumn({len(self)}, {self.dtype})"


register_kind(NESTED, NestedColumn)

__all__ = ["NestedColumn", "is_nested_column", "wants_nested_column"]
