"""Tables with missing values: rows to write checked against the columns, and columns
that gain their validity (see :mod:`carray.table.columns.missing_values`), and
:class:`MissingTable`, the part of a table that makes a column nullable and counts
missing values.

Rule: a column is made nullable when it is created from values with missing entries
(or with ``t.make_nullable(name)``); a column without validity that is appended rows
with missing entries gains it first, as one version of its own (its values are
copied once into the new column, which then lives in a directory of its own).
Setting a missing value (``t['x'][i] = None``) needs a nullable column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.core.dtypes import fitted_text
from carray.errors import UnsupportedDTypeError
from carray.table.columns.category import CategoryColumn, loose_values
from carray.table.columns.kinds import field_dtype, null_count, read_any, read_valid
from carray.table.columns.missing_values import WithValidity, filler, has_missing
from carray.table.columns.strings import StringColumn
from carray.table.interop import normalise_rows


def conform_rows(t: Any, values: Any) -> dict[str, Any]:
    """Rows to append to table ``t`` as one converted array per column, all checked before
    any write; a column without validity that gets missing values gains it first."""
    cols = normalise_rows(values, t.names)
    for name, v in cols.items():
        if not hasattr(t.cols[name], "valid") and has_missing(v):
            t.make_nullable(name)
    out, lengths = {}, set()
    for name, col in t.column_dict().items():
        v = cols[name]
        nullable = hasattr(col, "valid")
        if nullable and not isinstance(v, WithValidity) and np.ndim(v) == 0:
            v = [v]  # one row: None and np.ma.masked included
        if isinstance(col, CategoryColumn):
            v = loose_values(v, col)  # codes of encoded values are read directly
        elif nullable and (isinstance(v, np.ma.MaskedArray) or has_missing(v)):
            pass  # the column splits values from validity
        elif isinstance(col, StringColumn):
            v = loose_values(v, col)
        elif col.dtype == np.dtype(object):
            v = np.asarray(v, dtype=object).reshape(-1) if not hasattr(v, "buffers") else v
        else:
            # Text too long for a fixed-width column is refused, never cut; masked records
            # go to a nested column.
            v = fitted_text(v, col.dtype, f"column {name!r}") if col.dtype.kind in "US" \
                and not isinstance(v, np.ma.MaskedArray) else np.asanyarray(v, dtype=col.dtype)
            if v.shape == col.shape[1:]:
                v = v.reshape((1, *v.shape))
            if v.shape[1:] != col.shape[1:]:
                raise ValueError(f"column {name!r}: rows of shape {v.shape[1:]}, expected "
                                 f"{col.shape[1:]}")
        out[name] = v
        lengths.add(len(v))
    if len(lengths) > 1:
        raise ValueError(f"appended columns have different lengths: {sorted(lengths)}")
    return out


def conform_column(t: Any, name: str, values: Any) -> Any:
    """New values of a whole column ``name`` of table ``t`` (``t[name] = values``): when
    some are missing, the column gains validity first."""
    if not hasattr(t.cols[name], "valid") and has_missing(values):
        t.make_nullable(name)
    return values


def conform_record(t: Any, value: Any) -> Any:
    """A row to set (a tuple) with None or ``np.ma.masked`` among its values as a masked
    record of table ``t``'s row dtype; the columns it leaves missing gain validity first.
    Any other value as it is."""
    if not isinstance(value, tuple) or not any(_is_missing(v) for v in value):
        return value
    if len(value) != len(t.names):
        raise ValueError(f"a row has {len(value)} values, the table {len(t.names)} columns")
    mask = tuple(_is_missing(v) for v in value)
    for name, missing in zip(t.names, mask, strict=True):
        if missing:
            t.make_nullable(name)
    filled = tuple(filler(np.dtype(field_dtype(t.cols[n]) if not isinstance(
        field_dtype(t.cols[n]), tuple) else field_dtype(t.cols[n])[0])) if m else v
        for n, v, m in zip(t.names, value, mask, strict=True))
    return np.ma.MaskedArray(np.array([filled], dtype=t.dtype), mask=[mask])[0]


def _is_missing(v: Any) -> bool:
    return v is None or v is np.ma.masked


def masked_rows(cols: dict[str, Any], names: list[str], rows: Any, out: np.ndarray) -> Any:
    """Rows ``out`` (a structured array of ``rows`` of columns ``names``) as a masked
    array when any of those columns (or a nested column's fields) holds missing values,
    else as they are."""
    masks = {}
    for n in names:
        col = cols[n]
        if _kind(col) == "nested":  # a table of fields: their masks
            fields = col.column_dict()
            sub = masked_rows(fields, list(fields), rows, out[n])
            if np.ma.isMaskedArray(sub):
                masks[n] = np.ma.getmaskarray(sub)
            continue
        valid = read_valid(col, rows)
        if valid is not None:
            masks[n] = ~valid
    if not masks:
        return out
    mask: Any = np.zeros(out.shape, dtype=np.ma.make_mask_descr(out.dtype))
    for n, m in masks.items():
        target = mask[n]
        if m.dtype.names is None and target.ndim > m.ndim:  # rows of an N-d column
            m = m.reshape(m.shape + (1,) * (target.ndim - m.ndim))
        target[...] = m
    return np.ma.MaskedArray(out, mask=mask)


def _kind(col: Any) -> str | None:
    kind = getattr(col, "storage_kind", None)
    return kind() if kind is not None else None


class MissingTable:
    """Missing values of ``table``'s columns (a part of :class:`carray.table.table.ctable`,
    whose ``make_nullable`` and ``null_counts`` call it); uses the table's public API."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def make_nullable(self, name: str) -> None:
        """Give column ``name`` a validity column (all its rows present), as one
        version; nothing happens to a column that has one."""
        t = self.table
        t.check_writable()
        col = t.column_dict()[name]
        if hasattr(col, "valid"):
            return
        if t.format == "bcolz":
            raise UnsupportedDTypeError(f"{t.rootdir}: column {name!r} of a bcolz 1.x "
                                        "table cannot hold missing values")
        t.replace_column(name, WithValidity(read_any(col, range(len(t))),
                                            np.ones(len(t), dtype=bool)))

    def null_counts(self) -> dict[str, int]:
        """Missing rows per column."""
        return {n: null_count(c) for n, c in self.table.cols.items()}
