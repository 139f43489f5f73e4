"""Dictionary-encoded values on their way into and out of a categorical column.

:class:`CategoricalValues` is codes plus a dictionary (code ``k`` means
``categories[k]``, ``-1`` a missing value), whatever the source: pandas
``Categorical`` columns, Arrow dictionary arrays (:func:`as_categorical`), or
plain values encoded by :func:`categorical`.  A column
(:class:`carray.table.columns.category.CategoryColumn`) stores them; :func:`decode` turns
codes back into values.  Text is hashed by Arrow when it is installed (numpy would
sort the Python strings).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from carray.errors import UnsupportedDTypeError


class CategoricalValues:
    """Codes and their dictionary, as they travel from a source into a column.

    Parameters
    ----------
    codes : array of int
        Index into ``categories`` per row, -1 where missing.
    categories : array
        Distinct values (str, numbers or datetimes), in code order.
    ordered : bool
        Whether the categories' order is meaningful (``<`` compares by it).
    """

    def __init__(self, codes: Any, categories: Any, ordered: bool = False) -> None:
        self.codes = np.asarray(codes, dtype=np.int64).reshape(-1)
        self.categories = _dictionary_array(categories)
        self.ordered = bool(ordered)
        if len(self.codes) and (self.codes.min() < -1 or self.codes.max() >= len(self.categories)):
            raise ValueError(f"codes must be in -1..{len(self.categories) - 1}")

    def __len__(self) -> int:
        return len(self.codes)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = plain_values(self)
        return out if dtype is None else out.astype(dtype)


def categorical(values: Any, categories: Any = None, ordered: bool = False
                ) -> CategoricalValues:
    """Values to store as a categorical column (``ctable({'carrier': categorical(v)})``).

    Parameters
    ----------
    values : sequence, pandas Categorical/Series, Arrow dictionary array or column
        None, NaN and NaT are missing.
    categories : sequence, optional
        The dictionary's first values, in code order (values not among them extend it,
        unless ``ordered``).
    ordered : bool
        Whether the categories' order is meaningful.
    """
    if categories is None:  # the values' own (sorted, unless encoded already)
        found = as_categorical(values)
        if found is None:
            found = _factorize(values, _dictionary_array([], _values_dtype(values)), False)
        return found if found.ordered or not ordered else \
            CategoricalValues(found.codes, found.categories, True)
    cats = _dictionary_array(categories if categories is not None else [],
                             _values_dtype(values))
    return _factorize(values, cats, ordered)


def as_categorical(values: Any) -> CategoricalValues | None:
    """``values`` as codes and dictionary when they are dictionary-encoded already (a
    pandas Categorical or Series of one, an Arrow dictionary array, a categorical
    column), else None."""
    if isinstance(values, CategoricalValues):
        return values
    encoded = getattr(values, "categorical_values", None)  # a categorical column
    if callable(encoded):
        return encoded()
    dtype: Any = getattr(values, "dtype", None)
    if type(dtype).__name__ == "CategoricalDtype":
        cat = getattr(values, "array", values)  # a Series' Categorical
        return CategoricalValues(np.asarray(cat.codes), _pandas_categories(dtype.categories),
                                 bool(dtype.ordered))
    if type(values).__module__.startswith("pyarrow") and hasattr(values, "type"):
        import pyarrow as pa

        if pa.types.is_dictionary(values.type):
            return _arrow_categorical(values)
    return None


def _pandas_categories(index: Any) -> np.ndarray:
    values = index.to_numpy()
    if values.dtype == np.dtype(object) or index.dtype.kind in "OU" or \
            type(index.dtype).__name__ == "StringDtype":
        return np.asarray(values, dtype=object)
    return values


def _arrow_categorical(arr: Any) -> CategoricalValues:
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.unify_dictionaries()
        chunks = arr.chunks
        dictionary = chunks[0].dictionary if chunks else pa.array([], arr.type.value_type)
        indices = pa.chunked_array([c.indices for c in chunks], arr.type.index_type)
    else:
        dictionary, indices = arr.dictionary, arr.indices
    # Indices of any integer type (polars' are unsigned): int64, -1 where null.
    codes = np.asarray(indices.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False),
                       dtype=np.int64) if len(indices) else np.zeros(0, np.int64)
    if dictionary.null_count:  # Arrow allows a null in the dictionary: a missing value here
        valid = np.asarray(dictionary.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        remap = np.full(len(valid) + 1, -1, np.int64)  # the last entry: code -1 stays -1
        remap[np.flatnonzero(valid)] = np.arange(int(valid.sum()))
        codes, dictionary = remap[codes], dictionary.filter(pa.array(valid))
    cats = dictionary.to_numpy(zero_copy_only=False)
    if pa.types.is_string(dictionary.type) or pa.types.is_large_string(dictionary.type):
        cats = np.asarray(cats, dtype=object)
    return CategoricalValues(codes, cats, arr.type.ordered)


def _values_dtype(values: Any) -> np.dtype:
    """The dictionary dtype plain values call for: object for text, else numpy's."""
    given = as_categorical(values)
    if given is not None:
        return given.categories.dtype
    arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object) \
        if not hasattr(values, "__array__") else np.asarray(values)
    if arr.dtype.kind in "UST" or arr.dtype == np.dtypes.StringDType():
        return np.dtype(object)
    if arr.dtype != np.dtype(object):
        return arr.dtype
    first = next((v for v in arr.reshape(-1) if not _missing_scalar(v)), None)
    if first is None or isinstance(first, str):
        return np.dtype(object)
    present = arr.reshape(-1)[~_missing(arr.reshape(-1))]
    return np.asarray(present.tolist()).dtype


def _dictionary_array(categories: Any, dtype: np.dtype | None = None) -> np.ndarray:
    """A dictionary as an array: object of str for text, else numbers or datetimes."""
    if isinstance(categories, np.ndarray) and categories.dtype.kind in "biufmM":
        cats = categories
    else:
        cats = np.asarray(list(categories) if not isinstance(categories, np.ndarray)
                          else categories)
        if cats.size == 0:
            cats = np.empty(0, dtype=dtype if dtype is not None else object)
        elif cats.dtype.kind in "OUT" or cats.dtype == np.dtypes.StringDType():
            cats = cats.astype(object)
            if not all(isinstance(v, str) for v in cats):
                raise UnsupportedDTypeError("categories must all be str, or all numbers "
                                            "or datetimes")
        elif cats.dtype.kind not in "biufmM":
            raise UnsupportedDTypeError(f"categories of dtype {cats.dtype} cannot be stored")
    cats = cats.reshape(-1)
    if _missing(cats).any():
        raise ValueError("categories cannot hold missing values")
    if len(set(cats.tolist())) != len(cats):
        raise ValueError("categories must be distinct")
    return cats


def _missing_scalar(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or \
        type(v).__name__ in ("NAType", "NaTType") or \
        (isinstance(v, (np.datetime64, np.timedelta64)) and np.isnat(v))


def _missing(values: np.ndarray) -> np.ndarray:
    """True where ``values`` holds a missing value (None, NaN, NaT, pandas.NA)."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype.kind in "mM":
        return np.isnat(values)
    if values.dtype == np.dtype(object):
        return np.frompyfunc(_missing_scalar, 1, 1)(values).astype(bool)
    return np.zeros(values.shape, bool)


def _plain(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(values, missing)``: an array of the values and where they are missing."""
    given = as_categorical(values)
    if given is not None:
        codes, cats = given.codes, given.categories
        arr = cats.take(np.maximum(codes, 0)) if len(cats) else \
            np.empty(len(codes), dtype=cats.dtype)
        return arr, codes < 0
    arr = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object) \
        if not hasattr(values, "__array__") else np.asarray(values)
    if arr.dtype == np.dtypes.StringDType() or arr.dtype.kind in "US":
        arr = arr.astype(object)
    arr = arr.reshape(-1)
    return arr, _missing(arr)


def _factorize(values: Any, categories: np.ndarray, ordered: bool,
               sort: bool = True) -> CategoricalValues:
    """Values as codes into ``categories``, which new values extend (sorted, or in
    order of first appearance), unless ``ordered``."""
    if categories.dtype == np.dtype(object) and as_categorical(values) is None:
        arr = np.asarray(values, dtype=object).reshape(-1) if not isinstance(
            values, np.ndarray) or values.dtype != np.dtype(object) else values.reshape(-1)
        hashed = _text_codes(arr)
        if hashed is not None:
            return _merge(*hashed, categories, ordered, sort)
    arr, miss = _plain(values)
    present = arr[~miss]
    if categories.dtype == np.dtype(object):
        bad = next((v for v in present if not isinstance(v, str)), None)
        if bad is not None:
            raise UnsupportedDTypeError(f"a column of str categories holds {bad!r}")
    elif len(present):
        try:
            cast = present.astype(categories.dtype)
            fits = bool(np.all(cast == present)) if present.dtype.kind not in "mM" or \
                categories.dtype.kind in "mM" else False
        except (TypeError, ValueError):
            fits = False
        if not fits:
            raise UnsupportedDTypeError(f"values of dtype {present.dtype} do not fit "
                                        f"categories of dtype {categories.dtype}")
        present = cast
    uniq, first, inverse = np.unique(present, return_index=True, return_inverse=True) \
        if len(present) else (present[:0], np.zeros(0, np.intp), np.zeros(0, np.intp))
    codes = np.full(len(arr), -1, np.int64)
    codes[~miss] = inverse.reshape(-1)
    if not sort:  # distinct values in order of first appearance
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        uniq, codes = uniq[order], np.append(rank, -1)[codes]
    return _merge(uniq, codes, categories, ordered, sort)


def _text_codes(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(distinct str in order of first appearance, codes into them, -1 where missing)``
    of an object array of str and missing values, hashed by Arrow (numpy would sort the
    Python strings: 25x slower); None without pyarrow or for other values."""
    try:
        import pyarrow as pa
    except ImportError:
        return None
    try:
        parr = pa.array(arr, from_pandas=True)  # None and NaN become nulls
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if pa.types.is_null(parr.type):
        return np.empty(0, dtype=object), np.full(len(arr), -1, np.int64)
    if not (pa.types.is_string(parr.type) or pa.types.is_large_string(parr.type)):
        return None
    enc = parr.dictionary_encode()
    codes = np.asarray(enc.indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    return np.asarray(enc.dictionary.to_numpy(zero_copy_only=False), dtype=object), codes


def _merge(uniq: np.ndarray, codes: np.ndarray, categories: np.ndarray, ordered: bool,
           sort: bool) -> CategoricalValues:
    """Codes into the distinct values ``uniq`` made codes into ``categories``, which the
    values new to it extend (sorted when ``sort``, else in ``uniq``'s order)."""
    lookup = {v: i for i, v in enumerate(categories.tolist())}
    is_new = np.asarray([u not in lookup for u in uniq.tolist()], dtype=bool)
    if is_new.any() and ordered:
        raise ValueError(f"{uniq[is_new][0]!r} is not among the ordered categories")
    if is_new.any():
        added = np.sort(uniq[is_new]) if sort else uniq[is_new]
        base = len(categories)
        categories = np.concatenate([categories, added.astype(categories.dtype)])
        lookup.update((v, base + i) for i, v in enumerate(added.tolist()))
    remap = np.asarray([lookup[u] for u in uniq.tolist()] + [-1], dtype=np.int64)
    return CategoricalValues(remap[codes], categories, ordered)


def filler(categories: np.ndarray) -> Any:
    """What a missing row decodes to: None (text), NaN, NaT, or 0 (integers)."""
    kind = categories.dtype.kind
    if kind == "O":
        return None
    if kind == "f":
        return np.nan
    if kind in "mM":
        return categories.dtype.type("NaT")
    return 0


def decode(codes: np.ndarray, categories: np.ndarray) -> np.ndarray:
    """The values ``codes`` stand for; missing rows (-1) hold :func:`filler`."""
    codes = np.asarray(codes)
    if codes.ndim == 0:
        return decode(codes.reshape(1), categories)[0]
    missing = codes < 0
    if len(categories) == 0:
        return np.full(codes.shape, filler(categories), dtype=categories.dtype)
    out = categories.take(np.where(missing, 0, codes))
    if missing.any():
        out[missing] = filler(categories)
    return out


def _recode(values: CategoricalValues, categories: np.ndarray, ordered: bool
            ) -> CategoricalValues:
    """``values``' codes translated into ``categories`` (extended by its new ones)."""
    mapped = _factorize(values.categories, categories, ordered, sort=False)
    remap = np.append(mapped.codes, -1)  # code -1 picks the last entry: missing stays
    return CategoricalValues(remap[values.codes], mapped.categories, ordered)


def plain_values(values: CategoricalValues) -> np.ndarray:
    """Decoded values for a column that is not categorical: missing ones as None (text),
    NaN or NaT; integers cannot hold them.

    Raises
    ------
    ValueError
        Integer (or boolean) categories with missing values.
    """
    if values.categories.dtype.kind in "biu" and (values.codes < 0).any():
        raise ValueError(f"{int((values.codes < 0).sum())} missing values, which a column "
                         f"of {values.categories.dtype} cannot hold")
    return decode(values.codes, values.categories)


def encode_into(values: Any, categories: np.ndarray, ordered: bool) -> CategoricalValues:
    """``values`` (plain or encoded) as codes into ``categories``, which the values new
    to it extend (sorted; encoded values' new categories in their order), unless
    ``ordered`` (then a new value raises ValueError)."""
    given = as_categorical(values)
    return _factorize(values, categories, ordered) if given is None else \
        _recode(given, categories, ordered)
