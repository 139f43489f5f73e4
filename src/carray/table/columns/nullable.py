"""Columns that can hold missing values: a column and its validity, stored side by side.

A nullable column ``x`` is a small table of two columns: ``x/values`` (any column:
numbers, booleans, strings, records) and ``x/valid`` (booleans, True where a value
is present).  Both are members of the table's versioned dataset like any other
column's arrays, so appends, edits, resizes, transactions, commits, versions and
read-only opens keep them in step with no machinery of their own; a version
describes the column as ``{"kind": "nullable", "columns": {...}}``
(docs/formats/table.md).  Where a value is missing, ``values`` holds a filler (0,
False, '', NaT).

Reading ``col[key]`` gives a ``numpy.ma.MaskedArray`` (always, even when nothing is
missing in the rows read: one type per column), a single missing row
``np.ma.masked``; the table's own reads (:func:`carray.table.columns.kinds.read_any`) give
the fillers, and :func:`carray.table.columns.kinds.read_valid` the validity.  Reductions
skip missing rows, as pandas and polars do.  bcolz 1.x cannot store missing values:
a ``format='bcolz'`` table refuses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.attrs.mapping import Attrs
from carray.errors import UnsupportedDTypeError
from carray.table.columns import timezones
from carray.table.columns.functions import MissingAwareArray
from carray.table.columns.kinds import clip_column, read_any, register_kind
from carray.table.columns.missing_values import (
    WithValidity,
    filler,
    split_missing,
    to_arrow,
    to_pandas,
)
from carray.table.columns.strings import StringColumn
from carray.table.store import NULLABLE
from carray.table.table import ctable

_VALUES, _VALID = "values", "valid"


class NullableColumn(MissingAwareArray, ctable):
    """A column with missing values (see the module docstring).

    Parameters
    ----------
    values : optional
        A masked array, :class:`carray.table.columns.missing_values.WithValidity`, or a list / object
        array with ``None`` for the missing entries; None opens ``rootdir``.
    **kwargs
        As for :class:`carray.ctable` (the table passes where the column lives).
    """

    def __init__(self, values: Any = None, **kwargs: Any) -> None:
        if values is not None:
            if kwargs.get("format") == "bcolz":
                raise UnsupportedDTypeError(
                    f"{kwargs.get('rootdir') or 'a bcolz table'}: bcolz 1.x tables cannot "
                    "hold missing values; fill them first, or use carray's own format")
            data, valid = split_missing(values)
            if valid is None:
                valid = np.ones(len(data), dtype=bool)
            values = {_VALUES: data, _VALID: valid}
        super().__init__(values, **kwargs)

    # -- its parts ----------------------------------------------------------------------------

    @property
    def data(self) -> Any:
        """The column of values (fillers where missing)."""
        return self.column_dict()[_VALUES]

    @property
    def validity(self) -> carray:
        """The boolean column, True where a value is present."""
        col: carray = self.column_dict()[_VALID]
        return col

    def storage_kind(self) -> str:
        return NULLABLE

    @property
    def attrs(self) -> Attrs:
        """The column's user attributes (kept with its values)."""
        attrs: Attrs = self.data.attrs
        return attrs

    def valid(self, rows: Any = None) -> np.ndarray:
        """True where a value is present, for ``rows`` (a range or int positions;
        None: every row)."""
        rows = range(len(self)) if rows is None else rows
        return read_any(self.validity, rows)

    def null_count(self) -> int:
        """How many rows are missing."""
        n = len(self)
        present = sum(int(np.count_nonzero(self.validity.read_rows(range(i, min(i + 2**20, n)))))
                      for i in range(0, n, 2**20))
        return n - present

    def isnull(self) -> np.ndarray:
        """True where a row is missing (``isna``)."""
        return ~self.valid()

    def notnull(self) -> np.ndarray:
        """True where a row holds a value (``notna``)."""
        return self.valid()

    isna, notna = isnull, notnull

    # -- what a table asks of a column ------------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype (``object`` for strings)."""
        data = self.data
        return np.dtype(object) if isinstance(data, StringColumn) else data.dtype

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (len(self), *self.data.shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        # The stored validity, not a count kept beside it: a rolled-back change
        # leaves nothing stale.
        return len(self.validity)

    def filled_zone_map(self) -> Any:
        """The per-chunk min/max of the stored values, fillers included (None unless
        they are a carray): bounds of the values present, for skipping blocks."""
        data = self.data
        return data.zone_map() if isinstance(data, carray) else None

    @property
    def parallel_reads(self) -> bool:
        """Whether worker threads may read it at once (its values are a carray)."""
        return isinstance(self.data, carray)

    @property
    def chunklen(self) -> int:
        return int(self.data.chunklen)

    def read_rows(self, rows: range, out: np.ndarray | None = None,
                  as_object: bool = True) -> np.ndarray:
        """Values of ``rows`` (fillers where missing), into ``out`` if given."""
        data = self.data
        if out is not None and isinstance(data, carray):
            return data.read_rows(rows, out=out)
        values = read_any(data, rows)
        if out is None:
            return values
        out[...] = values
        return out

    def take(self, indices: Any, as_object: bool = True) -> np.ndarray:
        """Values at ``indices`` (fillers where missing)."""
        return read_any(self.data, np.asarray(indices, dtype=np.intp))

    def clip(self, nitems: int) -> None:
        for col in self.column_objects():
            clip_column(col, nitems)
        self._set_length(min(nitems, len(self)))

    def _read(self, key: Any) -> tuple[Any, Any]:
        data = self.data
        values = data.read(key, as_object=True) if isinstance(data, StringColumn) else data[key]
        return values, self.validity[key]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, carray):
            key = key[:]
        values, valid = self._read(key)
        if np.ndim(valid) == 0:
            return values if valid else np.ma.masked
        mask = ~np.asarray(valid)
        if np.ndim(values) > 1:
            mask = np.broadcast_to(mask.reshape(-1, *[1] * (np.ndim(values) - 1)),
                                   np.shape(values))
        return np.ma.MaskedArray(values, mask=mask)

    def __iter__(self) -> Iterator[Any]:
        n = len(self)
        for i in range(0, n, self.chunklen):
            yield from self[i:min(i + self.chunklen, n)]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The values; missing ones NaN (NaT) where the values' kind has such a marker,
        else their filler."""
        masked = self[:]
        out = np.ma.getdata(masked)
        if out.dtype.kind in "fcmM" and np.ma.is_masked(masked):
            out = out.copy()
            out[np.ma.getmaskarray(masked)] = np.nan if out.dtype.kind in "fc" else \
                np.array("NaT", out.dtype)
        return out if dtype is None else out.astype(dtype)

    # -- writing ------------------------------------------------------------------------------

    def append(self, rows: Any) -> None:
        """Append values (masked, with None, or plain: all present)."""
        data, valid = split_missing(rows, self.dtype)
        n, before = len(data), len(self.data)
        self.data.append(data)
        try:
            self.validity.append(np.ones(n, bool) if valid is None else valid)
        except BaseException:
            self.data.resize(before)  # the two stay the same length (in memory too)
            raise
        self._set_length(len(self))

    def __setitem__(self, key: Any, value: Any) -> None:
        """Set rows ``key``: ``None`` or ``np.ma.masked`` makes them missing; masked
        arrays and lists with None set values and validity together."""
        if isinstance(value, np.ndarray) and value.ndim == 0 and \
                not isinstance(value, np.ma.MaskedArray):
            value = value[()]  # one field of a row
        if value is None or value is np.ma.masked:
            self.validity[key] = False
            return
        if isinstance(value, (np.ma.MaskedArray, list, WithValidity)) or \
                (isinstance(value, np.ndarray) and value.dtype == np.dtype(object)):
            data, valid = split_missing(value, self.dtype)
        else:
            data, valid = value, None
        if valid is not None and isinstance(key, (int, np.integer)):
            data, valid = data[0], valid[0]
        self.data[key] = data
        self.validity[key] = True if valid is None else valid

    def resize(self, nitems: int) -> None:
        """Grow (the new rows missing) or shrink to ``nitems`` rows."""
        self.data.resize(nitems)
        self.validity.resize(nitems)
        self._set_length(nitems)

    def copy(self, **kwargs: Any) -> NullableColumn:
        """A copy (keyword arguments as for :class:`carray.ctable`)."""
        return NullableColumn(WithValidity(read_any(self.data, range(len(self))), self.valid()),
                              **kwargs)

    # -- reductions: missing rows are skipped ---------------------------------------------------

    def present(self) -> np.ndarray:
        """The values that are present, in order."""
        n, step = len(self), max(self.chunklen, 1 << 16)
        parts = [read_any(self.data, range(i, min(i + step, n)))[
            self.validity.read_rows(range(i, min(i + step, n)))] for i in range(0, n, step)]
        if not parts:
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)
        return np.concatenate(parts)

    def count(self) -> int:
        """Rows holding a value."""
        return len(self) - self.null_count()

    # numpy's reductions, as methods (over the rows by default); numpy's functions skip
    # missing rows too (carray.table.columns.functions).

    def sum(self, axis: Any = 0, **kwargs: Any) -> Any:
        return np.sum(self, axis=axis, **kwargs)

    def mean(self, axis: Any = 0, **kwargs: Any) -> Any:
        return np.mean(self, axis=axis, **kwargs)

    def var(self, axis: Any = 0, ddof: float = 0, **kwargs: Any) -> Any:
        return np.var(self, axis=axis, ddof=ddof, **kwargs)

    def std(self, axis: Any = 0, ddof: float = 0, **kwargs: Any) -> Any:
        return np.std(self, axis=axis, ddof=ddof, **kwargs)

    def min(self, axis: Any = 0, **kwargs: Any) -> Any:
        return np.min(self, axis=axis, **kwargs)

    def max(self, axis: Any = 0, **kwargs: Any) -> Any:
        return np.max(self, axis=axis, **kwargs)

    def masked_values(self) -> np.ma.MaskedArray:
        """Every row as a masked array (masked where missing)."""
        out: np.ma.MaskedArray = self[:]
        return out

    # -- pandas and Arrow ---------------------------------------------------------------------

    def arrow_type(self) -> Any:
        import pyarrow as pa

        if isinstance(self.data, StringColumn):
            return pa.large_string()
        zone = timezones.zone_of(self)
        if zone is not None:
            return timezones.arrow_type(self, zone)
        item = pa.from_numpy_dtype(self.dtype)
        if self.ndim > 1:
            return pa.list_(item, int(np.prod(self.shape[1:])))
        return item

    def arrow_rows(self, start: int, stop: int) -> Any:
        """Rows ``[start, stop)`` as an Arrow array, missing rows as nulls."""
        rows = range(start, max(start, min(stop, len(self))))
        values = read_any(self.data, rows)
        return to_arrow(values, self.valid(rows), self.arrow_type() if values.ndim == 1 else None)

    def to_arrow(self, columns: list[str] | None = None) -> Any:
        """The column as an Arrow array with nulls (``columns`` is not used: one column)."""
        return self.arrow_rows(0, len(self))

    def to_pandas(self) -> Any:
        """The column as a DataFrame column holds it (:func:`carray.table.columns.missing_values.to_pandas`)."""
        rows = range(len(self))
        values = to_pandas(read_any(self.data, rows), self.valid(rows))
        zone = timezones.zone_of(self)
        return values if zone is None else timezones.to_pandas(values, zone)

    def __repr__(self) -> str:
        return f"NullableColumn({len(self)}, {self.dtype}, {self.null_count()} missing)"


register_kind(NULLABLE, NullableColumn)

__all__ = ["NULLABLE", "NullableColumn", "filler"]
