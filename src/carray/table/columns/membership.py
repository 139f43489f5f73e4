"""``column.isin(values)``: which rows of a column hold one of some values, as pandas.

The column is read a block at a time (a categorical column's codes only, tested
against the codes of the categories that are members), and the answer is a
boolean numpy array of the column's shape, ready to select rows
(``t[t['carrier'].isin(['UA', 'AA'])]``).  As pandas: a missing row is a member
when ``values`` holds a missing marker (None, NaN, NaT), a NaN is a member of a
list holding NaN, and a value of another kind (a string against numbers) is
simply never equal.  Registered as the ``isin`` method of carrays and lazy
expressions (:class:`carray.compute.protocols.ComputeMixin`) and of string columns.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

import numpy as np

from carray.compute.ops import coerce, isin_values
from carray.compute.protocols import register_methods
from carray.errors import ExpressionError
from carray.table.columns.kinds import categories_of, read_any, read_codes, read_valid

#: Rows tested at a time (at least one chunk).
BLOCK_ROWS = 1 << 16


def _is_missing_marker(value: Any) -> bool:
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    return isinstance(value, np.datetime64 | np.timedelta64) and bool(np.isnat(value))


def _as_list(values: Any) -> list[Any]:
    if isinstance(values, (str, bytes)) or np.isscalar(values) or values is None:
        raise TypeError(f"isin needs a list-like of values, got {type(values).__name__} "
                        "(wrap a single value in a list)")
    if hasattr(values, "read") and hasattr(values, "chunklen") and not hasattr(values, "ndim"):
        return list(values.read(as_object=True))  # a string column
    if hasattr(values, "to_numpy"):
        values = values.to_numpy()
    return list(np.asarray(values).ravel()) if hasattr(values, "__array__") else list(values)


def members_for(dtype: np.dtype, values: Any) -> tuple[np.ndarray, bool, bool]:
    """``(members, holds_nan, holds_missing)``: ``values`` comparable with a column of
    ``dtype`` (values that cannot equal any of its items dropped), whether they hold a
    NaN (NaT), and whether they hold a missing marker."""
    fast = _numeric_members(dtype, values)
    if fast is not None:
        return fast
    kept, nan, missing = [], False, False
    for v in _as_list(values):
        if _is_missing_marker(v):
            missing = True
            nan = nan or v is not None
            continue
        try:
            plain = v.item() if isinstance(v, np.generic) and v.dtype.kind not in "mM" else v
            c = coerce(plain, dtype, "the column")
            if dtype.kind == "M" and isinstance(c, _dt.date):  # Python dates and datetimes
                if isinstance(c, _dt.datetime) and c.tzinfo is not None:
                    c = c.astimezone(_dt.UTC).replace(tzinfo=None)
                c = np.datetime64(c)
        except ExpressionError:
            continue  # a string against numbers: never equal, as pandas says
        if dtype.kind in "biufc" and not isinstance(c, (int, float, complex, np.number)):
            continue
        kept.append(c)
    if dtype.kind in "OT":  # strings meet other values as objects: 3 is not '3'
        out = np.empty(len(kept), dtype=object)
        out[:] = kept
    else:
        out = np.array(kept) if kept else np.empty(0, dtype=dtype)
    return out, nan, missing


def _numeric_members(dtype: np.dtype, values: Any) -> tuple[np.ndarray, bool, bool] | None:
    """:func:`members_for` without a look at each value, for an array of numbers (or
    dates) meeting a column of numbers (or dates); None for anything else."""
    if isinstance(values, (str, bytes, list, tuple, set, frozenset, dict)) or \
            not hasattr(values, "__array__") or hasattr(values, "arrow_rows"):
        return None
    arr = np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values[:]
                     if hasattr(values, "chunklen") else values)
    numbers = "biufc?"
    if not (arr.dtype.kind in numbers and dtype.kind in numbers or
            arr.dtype.kind == dtype.kind and dtype.kind in "mM"):
        return None
    flat = arr.ravel()
    holes = _nanlike(flat)
    found = bool(holes.any())
    return flat[~holes], found, found


def _nanlike(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "fc":
        return np.isnan(values)
    if values.dtype.kind in "mM":
        return np.isnat(values)
    return np.zeros(values.shape, bool)


def _block(col: Any, rows: range) -> np.ndarray:
    if hasattr(col, "read_rows"):
        return read_any(col, rows)
    return np.asarray(col[rows.start:rows.stop])  # a lazy expression


class _Lookup:
    """The members, prepared once for every block: sorted for numbers and dates (a
    binary search per item), an Arrow value set for string columns (their bytes are
    looked up without making a Python string per row)."""

    def __init__(self, members: np.ndarray) -> None:
        self.members = members
        numeric = members.dtype.kind in "biufcmM" and len(members)
        self.sorted = np.unique(members) if numeric else None
        self.texts = [m for m in members.tolist() if isinstance(m, str)] \
            if members.dtype.kind in "OUT" else None
        self.arrow: Any = None

    def hits(self, col: Any, rows: range) -> np.ndarray:
        if self.texts is not None and hasattr(col, "arrow_rows"):
            import pyarrow as pa
            import pyarrow.compute as pc

            values = col.arrow_rows(rows.start, rows.stop)
            if self.arrow is None:
                self.arrow = pa.array(self.texts, type=values.type)
            return pc.is_in(values, value_set=self.arrow).to_numpy(zero_copy_only=False)
        block = _block(col, rows)
        if self.sorted is not None and block.dtype.kind in "biufcmM":
            at = np.searchsorted(self.sorted, block).clip(max=len(self.sorted) - 1)
            return np.asarray(self.sorted[at] == block)
        return isin_values(block, self.members)


def isin(col: Any, values: Any, invert: bool = False) -> np.ndarray:
    """Booleans of ``col``'s shape: True where the item is one of ``values``.

    Parameters
    ----------
    col : carray, StringColumn or lazy expression
        The column (any array a table holds).
    values : list-like
        The members: a list, set, tuple, array, carray, string column or Series.
    invert : bool
        True where the item is *not* one of them (numpy's ``invert``).

    Returns
    -------
    numpy.ndarray of bool
    """
    dtype = np.dtype(getattr(col, "dtype", object))
    members, nan, missing = members_for(dtype, values)
    categories = categories_of(col)
    member_codes = None
    if categories is not None:
        cat_members, _, _ = members_for(np.asarray(categories).dtype, values)
        member_codes = np.flatnonzero(np.isin(categories, cat_members))
    length = len(col)
    shape = tuple(getattr(col, "shape", (length,)))
    out = np.empty(shape, dtype=bool)
    step = max(BLOCK_ROWS, int(getattr(col, "chunklen", 1)))
    lookup = _Lookup(members)
    for lo in range(0, length, step):
        rows = range(lo, min(lo + step, length))
        codes = read_codes(col, rows) if member_codes is not None else None
        if codes is not None and member_codes is not None:
            hit = np.isin(codes, member_codes)
        else:
            hit = lookup.hits(col, rows)
            if nan:
                hit |= _nanlike(_block(col, rows))
        valid = read_valid(col, rows)
        if valid is not None:
            valid = np.asarray(valid).reshape(len(rows), *(1,) * (hit.ndim - 1))
            hit = np.where(valid, hit, missing)
        out[lo:rows.stop] = ~hit if invert else hit
    return out


register_methods({"isin": isin})

__all__ = ["BLOCK_ROWS", "isin", "members_for"]
