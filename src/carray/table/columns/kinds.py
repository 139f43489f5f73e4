"""The columns of a table: reading any kind of column, and the ``t.cols`` mapping."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.errors import ColumnNotFoundError, FormatError
from carray.table.columns.category import CategoryColumn
from carray.table.columns.category_values import CategoricalValues
from carray.table.columns.strings import StringColumn
from carray.table.columns.timezones import ZonedTimes, arrow_type, zone_of


def field_dtype(col: Any) -> Any:
    """The dtype of a column's values inside a row record."""
    if isinstance(col, StringColumn):
        return np.dtype(object)
    return (col.dtype, col.shape[1:]) if col.ndim > 1 else col.dtype


class Cols(Mapping):
    """The columns of a table by name, in order (``t.cols['x']``)."""

    def __init__(self, cols: dict[str, Any]) -> None:
        self._cols = cols  # the table's own dict: a live, read-only view

    def __getitem__(self, name: str) -> Any:
        try:
            return self._cols[name]
        except KeyError:
            raise ColumnNotFoundError(f"no column {name!r} (columns: {list(self._cols)})"
                                      ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._cols)

    def __len__(self) -> int:
        return len(self._cols)

    @property
    def names(self) -> list[str]:
        return list(self._cols)

    def __repr__(self) -> str:
        return "\n".join(f"{n} : {c.dtype} ({len(c)} rows)" for n, c in self._cols.items())


def read_any(col: Any, rows: Any) -> np.ndarray:
    """Rows (int array or range) of any column; strings as an object array of str."""
    if isinstance(col, StringColumn):
        return col.read_rows(rows, as_object=True) if isinstance(rows, range) else \
            col.take(rows, as_object=True)
    return col.read_rows(rows) if isinstance(rows, range) else col.take(rows)


def select_rows(values: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``values[sel]`` for a mask or positions; ``compress`` avoids the branchy mask path
    (5x faster than boolean indexing on masks about half true)."""
    if sel.dtype == np.bool_:
        return np.compress(sel, values, axis=0)
    return values.take(sel, axis=0)


def clip_column(col: Any, length: int) -> None:
    """Hide rows past ``length`` without writing (read-only tables)."""
    if hasattr(col, "engine"):
        col.engine.clip(length)
    else:  # string and nested columns clip their own parts
        col.clip(length)


def empty_like(col: Any) -> Any:
    """No rows of a column like ``col`` (see :func:`read_part`)."""
    return read_part(col, range(0))


def like_column(col: Any, values: Any, valid: np.ndarray | None = None) -> Any:
    """``values`` read from column ``col`` (a categorical column's codes) as a new
    table's column takes them to be a column like ``col``: categorical with ``col``'s
    dictionary, masked where ``valid`` is False (a column that holds missing values
    stays one), timestamps with ``col``'s zone."""
    if isinstance(col, CategoryColumn):
        return CategoricalValues(np.asarray(values), col.categories, col.ordered)
    zone = zone_of(col)
    if zone is not None:
        values = ZonedTimes(values, zone)
    if valid is not None:
        return np.ma.MaskedArray(values, mask=~np.asarray(valid, dtype=bool))
    return values


def read_part(col: Any, rows: Any) -> Any:
    """Rows ``rows`` of column ``col`` as a new column like it takes them (see
    :func:`like_column`)."""
    codes = read_codes(col, rows)
    if codes is not None:
        return like_column(col, codes)
    return like_column(col, read_any(col, rows), read_valid(col, rows))


def read_masked(col: Any, rows: Any) -> np.ndarray:
    """:func:`read_any`, as a masked array where ``col`` holds missing values (masked
    where :func:`read_valid` says False)."""
    values = read_any(col, rows)
    valid = read_valid(col, rows)
    return values if valid is None else np.ma.MaskedArray(values, mask=~valid)


def python_values(col: Any, values: np.ndarray) -> list[Any]:
    """``values`` read from column ``col`` (masked where missing) as Python objects for
    rows: None where missing, zoned timestamps as aware ``datetime`` in their zone."""
    zone = zone_of(col) if col is not None else None
    if zone is None:
        return values.tolist()
    import pyarrow as pa

    data = np.ma.getdata(values)
    mask = np.ma.getmaskarray(values) | np.isnat(data)
    return pa.array(data, mask=mask, type=arrow_type(data, zone)).to_pylist()


def as_rows(rows: Any, names: list[str], out_flavor: Any) -> Iterator[Any]:
    """Rows (sequences of values) as tuples, or as namedtuples of ``names``."""
    if out_flavor in (tuple, "tuple"):
        yield from (tuple(values) for values in rows)
        return
    # Names that are not identifiers become _0, _1, ...; the others stay.
    row = namedtuple("row", names, rename=True)  # type: ignore[misc]
    for values in rows:
        yield row(*values)


def column_engines(col: Any) -> Iterator[Any]:
    """The engines of the arrays a column is made of."""
    if isinstance(col, carray):
        yield col.engine
    else:
        yield from col.engines()


# -- missing values and categories: the contract every table operation reads them by ----------


def read_valid(col: Any, rows: Any) -> np.ndarray | None:
    """Booleans, True where column ``col`` holds a value, for ``rows`` (a range or an
    int array, as :func:`read_any` takes); None when the column cannot hold missing
    values.  Where this says False, what :func:`read_any` returns is a filler (0, '',
    NaT) that means nothing.

    A column that can hold missing values answers itself: its ``valid(rows)`` method
    (:class:`carray.table.columns.nullable.NullableColumn`, and categorical columns)."""
    valid = getattr(col, "valid", None)
    return None if valid is None else np.asarray(valid(rows), dtype=bool)


def null_count(col: Any) -> int:
    """How many rows of ``col`` are missing (its ``null_count()``, else 0)."""
    count = getattr(col, "null_count", None)
    return 0 if count is None else int(count())


#: Column classes of the kinds a version records beyond array, string and nested
#: (``kind -> class``), registered by the modules that define them.
_KINDS: dict[str, Any] = {}


def register_kind(kind: str, cls: Any) -> None:
    """Make ``cls`` the column class of stored columns of ``kind`` (opened with
    ``cls(_storage=..., rootdir=..., mode=...)``; created with values first)."""
    _KINDS[kind] = cls


def wants_nested_column(values: Any) -> bool:
    """Whether a new column's values are records (a structured dtype, or a nested column)."""
    nested = _KINDS.get("nested")
    if nested is not None and isinstance(values, nested):
        return True
    dtype = getattr(values, "dtype", None)
    is_array = isinstance(values, np.ndarray) or hasattr(values, "read_rows")  # or a carray
    return is_array and isinstance(dtype, np.dtype) and dtype.names is not None


def column_class(kind: str, where: str | None = None) -> Any:
    """The column class registered for ``kind``.

    Raises
    ------
    FormatError
        No class is registered for ``kind`` (a table written by a newer carray).
    """
    try:
        return _KINDS[kind]
    except KeyError:
        raise FormatError(f"a column is of unknown kind {kind!r}", where) from None


def categories_of(col: Any) -> np.ndarray | None:
    """The dictionary of a categorical column (its values, in code order), or None when
    ``col`` is not categorical."""
    return col.categories if isinstance(col, CategoryColumn) else None


def read_codes(col: Any, rows: Any) -> np.ndarray | None:
    """The integer codes of a categorical column for ``rows`` (indexes into
    :func:`categories_of`; a missing row's code is -1), or None when ``col`` is not
    categorical.  :func:`read_any` returns the decoded values."""
    return col.codes(rows) if isinstance(col, CategoryColumn) else None
