"""Missing values: how values that may lack some entries reach a column, and leave it.

A column that can hold missing values keeps its values (a filler where one is
missing: 0, False, '', NaT) and, beside them, a boolean column of validity
(True where a value is present): :class:`carray.table.columns.nullable.NullableColumn`.
What counts as missing on the way in:

* ``numpy.ma.MaskedArray`` entries that are masked, and ``np.ma.masked`` itself;
* ``None`` among the values of a list or an ``object`` array;
* from pandas, what ``isna`` says (NaN, None, NaT and ``pd.NA``: as
  ``pyarrow.Table.from_pandas`` does); from Arrow, nulls.

A plain NaN in a numpy float array stays a value (numpy's meaning of NaN).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.errors import UnsupportedDTypeError


@dataclass
class WithValidity:
    """Values and their validity (True where present), as one column source.

    ``values`` is anything a column is built from (an array, or an Arrow string
    array); where ``valid`` is False it holds a filler.
    """

    values: Any
    valid: np.ndarray

    def __len__(self) -> int:
        return len(self.valid)


def filler(dtype: np.dtype) -> Any:
    """What a missing entry of ``dtype`` holds (it means nothing)."""
    if dtype.kind in "OUST":
        return ""
    if dtype.kind in "mM":
        return np.array("NaT", dtype=dtype)[()]
    return np.zeros((), dtype=dtype)[()]


def _is_missing_scalar(v: Any) -> bool:
    return v is None or v is np.ma.masked


def _is_nullable_column(values: Any) -> bool:
    """Another table's column with validity (categorical columns answer for themselves:
    their codes say what is missing)."""
    return hasattr(values, "valid") and hasattr(values, "read_rows") and \
        hasattr(values, "storage_kind") and values.storage_kind() == "nullable"


def _missing_of(values: Any) -> np.ndarray:
    """True where a list or ``object`` array holds None (a list: or ``np.ma.masked``)."""
    if isinstance(values, np.ndarray):  # one comparison per item, in C
        nothing: Any = None
        missing = np.atleast_1d(np.asarray(np.equal(values, nothing), dtype=np.bool_))
        if missing.ndim > 1:  # rows of an N-d column: missing as a whole
            missing = np.asarray(missing.reshape(len(missing), -1).any(axis=1))
        return missing
    return np.array([_is_missing_scalar(v) for v in values], dtype=bool)


def wants_nullable(values: Any) -> bool:
    """Whether a new column made of ``values`` needs a validity column: a masked array,
    values with validity, or a list/object array holding None."""
    if isinstance(values, WithValidity) or _is_nullable_column(values):
        return True
    if isinstance(values, np.ma.MaskedArray):
        return values.dtype.names is None
    if isinstance(values, list) or (isinstance(values, np.ndarray)
                                    and values.dtype == np.dtype(object)):
        return bool(_missing_of(values).any())
    return False


def has_missing(values: Any) -> bool:
    """Whether ``values`` (rows to write) lack any entry."""
    if _is_missing_scalar(values):
        return True
    if isinstance(values, WithValidity):
        return not values.valid.all()
    if isinstance(values, np.ma.MaskedArray):
        if values.dtype.names is not None:
            return False  # records: their fields, nested columns, answer for themselves
        return bool(np.ma.getmaskarray(values).any())
    return wants_nullable(values)


def bcolz_values(values: Any, name: str, where: Any) -> Any:
    """A new column's values for a bcolz 1.x table, which holds no missing values:
    masked arrays (or values with validity) with nothing missing as plain values.

    Raises
    ------
    UnsupportedDTypeError
        Records with missing fields (other missing values are refused by the column).
    """
    if isinstance(values, np.ma.MaskedArray) and values.dtype.names is not None:
        if np.ma.flatten_mask(np.ma.getmaskarray(values)).any():
            raise UnsupportedDTypeError(
                f"{where or 'a bcolz table'}: column {name!r} has records with missing "
                "values, which bcolz 1.x tables cannot hold")
        return np.ma.getdata(values)
    if wants_nullable(values) and not has_missing(values):  # a plain column, as bcolz's
        return np.ma.getdata(values) if isinstance(values, np.ma.MaskedArray) else \
            split_missing(values)[0]
    return values


def split_missing(values: Any, dtype: np.dtype | None = None) -> tuple[Any, np.ndarray | None]:
    """``values`` as ``(values with fillers, validity)``; validity is None when the
    source cannot say that anything is missing.  ``dtype``: the column's, when the
    values are written into an existing column (else inferred from what is present)."""
    if isinstance(values, WithValidity):
        return values.values, np.asarray(values.valid, dtype=bool)
    if _is_nullable_column(values):
        rows = range(len(values))
        return values.read_rows(rows), np.asarray(values.valid(rows), dtype=bool)
    if _is_missing_scalar(values):
        dtype = dtype if dtype is not None else np.dtype(float)
        return np.array([filler(dtype)], dtype=dtype), np.zeros(1, bool)
    if isinstance(values, np.ma.MaskedArray):
        mask: np.ndarray = np.asarray(np.ma.getmaskarray(values))
        if mask.ndim > 1:  # a row of a multi-dimensional column is missing as a whole
            mask = np.asarray(mask.reshape(len(mask), -1).all(axis=1), dtype=bool)
        data = np.array(np.ma.getdata(values), dtype=dtype)
        data[mask] = filler(data.dtype)
        return data, ~mask
    if isinstance(values, list) or (isinstance(values, np.ndarray)
                                    and values.dtype == np.dtype(object)):
        valid = ~_missing_of(values)
        if valid.all():
            return values, None
        if dtype is None and isinstance(values, np.ndarray) and not valid.any():
            dtype = np.dtype(object)  # an object array of nothing but None: strings
        return _from_objects(list(values), valid, dtype)
    return values, None


def _from_objects(items: list[Any], valid: np.ndarray, dtype: np.dtype | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Python values, some missing, as an array of ``dtype`` (inferred from the values
    present: strings stay ``object``)."""
    present = [v for v, ok in zip(items, valid, strict=True) if ok]
    if dtype is None:
        if present and all(isinstance(v, str) for v in present):
            dtype = np.dtype(object)
        else:
            dtype = np.asarray(present).dtype if present else np.dtype(float)
    assert dtype is not None
    out = np.empty(len(items), dtype=dtype)
    out[...] = filler(dtype)
    if present:
        out[valid] = np.asarray(present, dtype=dtype) if dtype != np.dtype(object) \
            else np.array(present, dtype=object)
    return out, valid


# -- pandas and Arrow ---------------------------------------------------------------------------


def from_series(series: Any) -> Any:
    """A pandas Series with missing entries (``isna``) as values with validity: numbers
    keep their numpy dtype (Int64 becomes int64), strings become ``object``."""
    valid = ~np.asarray(series.isna(), dtype=bool)
    dtype = series.dtype
    numpy_dtype = getattr(dtype, "numpy_dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "biufcmM":
        values = series.to_numpy(copy=True)
        values[~valid] = filler(dtype)
    elif numpy_dtype is not None and numpy_dtype.kind in "biufc":
        values = series.to_numpy(dtype=numpy_dtype, na_value=filler(numpy_dtype))
    else:
        items = list(series.to_numpy(dtype=object))
        if not all(isinstance(v, str) for v, ok in zip(items, valid, strict=True) if ok):
            raise UnsupportedDTypeError(f"column {series.name!r} holds values of mixed "
                                        "types; only str columns can be stored from object "
                                        "dtype")
        values, _ = _from_objects(items, valid, np.dtype(object))  # str, even all missing
    return WithValidity(values, valid)


def from_arrow(arr: Any) -> Any:
    """An Arrow array with nulls as values with validity (strings stay Arrow strings)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return WithValidity(pc.fill_null(arr.cast(pa.large_string()), ""), valid)
    if pa.types.is_null(arr.type):
        return WithValidity(np.zeros(len(arr)), valid)
    if pa.types.is_temporal(arr.type):  # NaT where null: a filler of their own
        return WithValidity(arr.to_numpy(zero_copy_only=False), valid)
    if pa.types.is_fixed_size_list(arr.type):  # rows of an N-d column
        width = arr.type.list_size
        child = arr.values[arr.offset * width:(arr.offset + len(arr)) * width]
        flat = from_arrow(child).values if child.null_count else \
            child.to_numpy(zero_copy_only=False)
        return WithValidity(np.asarray(flat).reshape(len(arr), width), valid)
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type) or \
            pa.types.is_boolean(arr.type):
        fill = pa.scalar(False if pa.types.is_boolean(arr.type) else 0)
        filled = pc.fill_null(arr, fill.cast(arr.type))
        return WithValidity(filled.to_numpy(zero_copy_only=False), valid)
    values = arr.to_numpy(zero_copy_only=False)  # others: what numpy makes of them
    if values.dtype == np.dtype(object):
        values[~valid] = filler(values.dtype)
    return WithValidity(values, valid)


def to_arrow(values: np.ndarray, valid: np.ndarray, arrow_type: Any = None) -> Any:
    """Values and validity as an Arrow array with nulls."""
    import pyarrow as pa

    if values.ndim > 1:  # rows of an N-d column: fixed-size lists
        width = int(np.prod(values.shape[1:]))
        return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), width,
                                                 mask=pa.array(~valid))
    return pa.array(values, mask=~valid, type=arrow_type, from_pandas=False)


def to_pandas(values: np.ndarray, valid: np.ndarray) -> Any:
    """Values and validity as what a DataFrame column holds: NaN/NaT in float and
    datetime columns (as pyarrow's ``to_pandas`` gives), pandas' nullable arrays for
    integers and booleans, ``None`` among ``object`` strings."""
    import pandas as pd

    kind = values.dtype.kind
    if kind in "fcmM":
        out = values.copy()
        out[~valid] = np.nan if kind in "fc" else np.array("NaT", dtype=values.dtype)
        return out
    if kind in "iu":
        return pd.arrays.IntegerArray(values, ~valid)
    if kind == "b":
        return pd.arrays.BooleanArray(values, ~valid)
    out = np.array(values, dtype=object)
    out[~valid] = None
    return out
