"""Categorical (dictionary-encoded) table columns: integer codes plus a dictionary.

A categorical column of ``n`` rows is an ``int32`` carray of ``n`` codes and a
dictionary holding each distinct value once, in code order (code ``k`` means
``categories[k]``; code ``-1`` means missing, as in pandas and Arrow).  String
dictionaries are a :class:`carray.table.columns.strings.StringColumn`, numeric ones a carray.
One code width for every dictionary size: measured on 10M rows of 20 values, int8,
int16 and int32 codes compress to the same ~10 MB and scan equally fast (Blosc's
shuffle drops the zero bytes), and one width never has to be rewritten when the
dictionary grows.

On disk (only as a column of a versioned table, the default format) the column's
directory holds ``codes/``, ``dictionary/`` and a ``__category__`` marker naming the
dictionary's kind and the ``ordered`` flag; the codes and the dictionary's arrays
are members of the table's dataset, so appends, edits, versions and crash recovery
keep them together.  Writes extend the dictionary before the codes that refer to
it, so a code never points past the dictionary.

Where values come from: pandas ``Categorical`` columns, Arrow dictionary arrays,
values wrapped with :func:`carray.categorical` (:mod:`carray.table.columns.category_values` encodes
them), or a table's :meth:`categorize`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.array.container import Container
from carray.attrs.mapping import Attrs
from carray.core.checkedjson import dumps_checked, load_marker
from carray.core.params import CParams
from carray.errors import (
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    UnsupportedDTypeError,
)
from carray.layouts.memory import MemoryLayout
from carray.stores import LOCAL, Store, resolve
from carray.table.columns.category_values import (
    CategoricalValues,
    as_categorical,
    categorical,
    decode,
    encode_into,
    plain_values,
)
from carray.table.columns.functions import MissingAwareArray
from carray.table.columns.strings import StringColumn
from carray.versions.dataset import Membership

MARKER = "__category__"
#: The dtype of every code; -1 is a missing value.
CODE_DTYPE = np.dtype(np.int32)
STRING, ARRAY = "string", "array"
_MAX_CATEGORIES = int(np.iinfo(CODE_DTYPE).max)


# -- values on their way into a column ------------------------------------------------------
































# -- the column -------------------------------------------------------------------------------


def read_category_marker(store: Store, path: str) -> tuple[str, bool]:
    """``(dictionary kind, ordered)`` from ``path/__category__`` (FormatError: not a
    marker this build reads; ChecksumError: a damaged one)."""
    key = store.join(path, MARKER)
    marker = load_marker(store.get(key), store.url(key), MARKER, version_key="version",
                         readable=(1, 2), checked_from=2,
                         known=("format", "dictionary", "ordered"))
    if marker.get("format", "carray-category") != "carray-category" or \
            marker.get("dictionary") not in (STRING, ARRAY) or \
            not isinstance(marker.get("ordered", False), bool):
        raise FormatError(f"unsupported categorical column {marker!r:.80}", store.url(key))
    return marker["dictionary"], marker.get("ordered", False)


class CategoryColumn(MissingAwareArray, Container):
    """A column of values stored as ``int32`` codes into a dictionary (module doc).

    Reads (``col[...]``, :meth:`read_rows`, :meth:`take`) return the decoded values:
    an ``object`` array of ``str`` (None where missing) for text, else the dictionary's
    dtype (NaN/NaT/0 where missing).  :meth:`codes` and :attr:`categories` give the
    encoding, :meth:`valid` and :meth:`null_count` the missing rows.

    Parameters
    ----------
    values : optional
        What :func:`carray.categorical` takes; None opens ``rootdir``.
    categories, ordered
        As for :func:`carray.categorical` (a new column only).
    rootdir, mode, cparams, expectedlen, chunklen, fsync, storage_options
        As for :class:`carray.carray` (``chunklen``: the codes').  On disk only as a
        versioned table's column (``membership``).
    """

    def __init__(self, values: Any = None, *, categories: Any = None,
                 ordered: bool = False, rootdir: str | os.PathLike | None = None,
                 mode: str = "a", cparams: Any = None, expectedlen: int | None = None,
                 chunklen: int | None = None, fsync: bool = True,
                 storage_options: dict | None = None, format: str | None = None,  # noqa: A002
                 membership: Membership | None = None) -> None:
        self._rootdir = os.fspath(rootdir) if rootdir is not None else None
        self._membership = membership
        self._mode = mode
        self._store: Store = LOCAL
        self._path = ""
        self._cache: tuple[int, np.ndarray, dict] | None = None
        # (rows, categories) before the last append: what an in-memory undo goes back to.
        self._last_append: tuple[int, int] | None = None
        self._attrs = Attrs(MemoryLayout(), "a")
        if self._rootdir is not None:
            if membership is None or format == "bcolz":
                raise UnsupportedDTypeError(
                    f"{self._rootdir}: categorical columns are stored only in carray's own "
                    "(versioned) tables; bcolz 1.x has no dictionary-encoded columns "
                    "(store the decoded values instead)")
            self._store, self._path = resolve(self._rootdir, storage_options)
        common = dict(fsync=fsync, storage_options=storage_options)
        if values is None and self._rootdir is not None and self._store.exists(self._path):
            self._open(common)
            return
        if mode == "r":
            raise ContainerNotFoundError(f"{self._rootdir or 'categorical column'}: mode 'r' "
                                         "needs an existing categorical column")
        start = categorical(values if values is not None else [], categories, ordered)
        self._ordered = start.ordered
        self._kind = STRING if start.categories.dtype == np.dtype(object) else ARRAY
        expected = expectedlen or len(start) or 2**16
        kw: dict[str, Any] = dict(common, cparams=cparams, mode="a")
        if self._rootdir is not None:
            self._store.makedirs(self._path)
            marker = {"format": "carray-category", "version": 2, "dictionary": self._kind,
                      "ordered": self._ordered}
            self._store.put(self._store.join(self._path, MARKER), dumps_checked(marker),
                            fsync=fsync)
        self._codes = carray(np.zeros(0, CODE_DTYPE), expectedlen=expected, chunklen=chunklen,
                             rootdir=self._sub("codes"), storage=self._member("codes"), **kw)
        empty = start.categories[:0]
        if self._kind == STRING:
            self._dict: Any = StringColumn(
                np.zeros(0, object), rootdir=self._sub("dictionary"),
                membership=self._dict_membership(), expectedlen=1024, **kw)
        else:
            self._dict = carray(empty, expectedlen=1024, rootdir=self._sub("dictionary"),
                                storage=self._member("dictionary"), **kw)
        self._attrs = self._codes.attrs  # stored with the codes: part of each version
        if len(start.categories):
            self._dict.append(start.categories)  # as given: an ordered column's order
        self._codes.append(start.codes.astype(CODE_DTYPE))
        self.flush()

    def _open(self, common: dict[str, Any]) -> None:
        key = self._store.join(self._path, MARKER)
        if not self._store.isfile(key):
            raise FormatError(f"not a categorical column (no {MARKER} marker)", self._rootdir)
        self._kind, self._ordered = read_category_marker(self._store, self._path)
        mode = "r" if self._mode == "r" else "a"
        self._codes = carray(rootdir=self._sub("codes"), mode=mode,
                             storage=self._member("codes"), **common)
        if self._codes.dtype != CODE_DTYPE or self._codes.ndim != 1:
            raise FormatError(f"codes of dtype {self._codes.dtype}, expected int32",
                              self._sub("codes"))
        self._attrs = self._codes.attrs
        if self._kind == STRING:
            self._dict = StringColumn(rootdir=self._sub("dictionary"), mode=mode,
                                      membership=self._dict_membership(), **common)
        else:
            self._dict = carray(rootdir=self._sub("dictionary"), mode=mode,
                                storage=self._member("dictionary"), **common)

    def _sub(self, name: str) -> str | None:
        if self._rootdir is None:
            return None
        return self._store.url(self._store.join(self._path, name))

    def _member(self, name: str) -> dict[str, Any] | None:
        m = self._membership
        return None if m is None else {"member": Membership(m.dataset, f"{m.name}/{name}")}

    def _dict_membership(self) -> Membership | None:
        m = self._membership
        return None if m is None else Membership(m.dataset, f"{m.name}/dictionary")

    # -- what a table asks of a column ------------------------------------------------------

    def engines(self) -> list[Any]:
        """The engines of the codes and the dictionary's arrays."""
        parts = self._dict.engines() if isinstance(self._dict, StringColumn) else \
            [self._dict.engine]
        return [self._codes.engine, *parts]

    def storage_kind(self) -> str:
        return "category"

    def kind_details(self) -> dict[str, Any]:
        """What a table version records beside the kind: the dictionary's kind."""
        return {"dictionary": self._kind}

    def clip(self, nitems: int) -> None:
        """Hide rows past ``nitems`` without writing (read-only table views)."""
        self._codes.engine.clip(nitems)

    # -- properties -------------------------------------------------------------------------

    ndim = 1
    atomshape: tuple[int, ...] = ()

    @property
    def dtype(self) -> np.dtype:
        """The decoded values' dtype (``object`` for text)."""
        return self.categories.dtype

    @property
    def ordered(self) -> bool:
        return self._ordered

    @property
    def categories(self) -> np.ndarray:
        """The dictionary: every distinct value once, in code order (a copy)."""
        return self._lookup()[1].copy()

    def _lookup(self) -> tuple[int, np.ndarray, dict]:
        """The dictionary and value -> code, cached while its length is unchanged (a
        rolled-back change shortens it, so a stale cache is never used)."""
        n = len(self._dict)
        if self._cache is None or self._cache[0] != n:
            cats = self._dict.read(as_object=True) if isinstance(self._dict, StringColumn) \
                else self._dict[:]
            self._cache = (n, cats, {v: i for i, v in enumerate(cats.tolist())})
        return self._cache

    def code_of(self, value: Any) -> int | None:
        """The code of ``value``, or None when it is not in the dictionary."""
        _, cats, lookup = self._lookup()
        if cats.dtype != np.dtype(object):
            if isinstance(value, str) != (cats.dtype.kind == "M"):
                return None  # text never equals a number; a datetime is written as text
            try:
                given = np.asarray(np.datetime64(value) if isinstance(value, str) else value)
                cast = given.astype(cats.dtype)
                if not bool(cast.astype(given.dtype) == given):
                    return None  # not exactly representable: equals no category
            except (TypeError, ValueError, OverflowError):
                return None
            value = cast.tolist()
        elif not isinstance(value, str):
            return None
        return lookup.get(value)

    def categorical_values(self) -> CategoricalValues:
        """The whole column as codes and dictionary (see :func:`as_categorical`)."""
        return CategoricalValues(self.codes(), self.categories, self._ordered)

    def codes_array(self) -> carray:
        """The carray of codes itself (queries scan it and prune on its zone maps)."""
        return self._codes

    def __len__(self) -> int:
        return len(self._codes)

    @property
    def len(self) -> int:
        return len(self)

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def nbytes(self) -> int:
        return self._codes.nbytes + self._dict.nbytes

    @property
    def cbytes(self) -> int:
        return self._codes.cbytes + self._dict.cbytes

    @property
    def chunklen(self) -> int:
        return self._codes.chunklen

    @property
    def cparams(self) -> CParams:
        return self._codes.cparams

    # -- reading ----------------------------------------------------------------------------

    def codes(self, rows: Any = slice(None)) -> np.ndarray:
        """The codes of ``rows`` (a range, int positions or any key), -1 where missing."""
        if isinstance(rows, range):
            return self._codes.read_rows(rows) if rows.step > 0 else self._codes[
                np.asarray(rows, dtype=np.intp)]
        if isinstance(rows, np.ndarray) and rows.dtype.kind in "iu":
            return self._codes.take(rows)
        return np.asarray(self._codes[rows])

    def valid(self, rows: Any = slice(None)) -> np.ndarray:
        """True where a value is present (code >= 0), for ``rows`` as :meth:`codes`."""
        return self.codes(rows) >= 0

    def null_count(self) -> int:
        """How many rows are missing (chunks whose smallest code is known to be >= 0 are
        not read)."""
        zones = self._codes.zone_map()
        n, cl, total = len(self), self._codes.chunklen, 0
        for i, lo in enumerate(range(0, n, cl)):
            if zones is not None and i < len(zones) and zones.known[i] and zones.lo[i] >= 0:
                continue
            total += int(np.count_nonzero(self._codes.read_rows(range(lo, min(lo + cl, n))) < 0))
        return total

    def read_rows(self, rows: range, out: Any = None) -> np.ndarray:
        """Decoded rows ``rows`` (a range)."""
        return self._decoded(self.codes(rows))

    def take(self, rows: Any) -> np.ndarray:
        """Decoded rows at positions ``rows``."""
        return self._decoded(self._codes.take(np.asarray(rows, dtype=np.int64)))

    def read(self, key: Any = slice(None)) -> Any:
        """Decoded rows ``key`` (one value for an int)."""
        return self._decoded(np.asarray(self._codes[key]))

    def _decoded(self, codes: np.ndarray) -> np.ndarray:
        cats = self._lookup()[1]
        if codes.size and int(codes.max()) >= len(cats):
            raise FormatError(f"code {int(codes.max())} past the dictionary's {len(cats)} "
                              "values", self._rootdir)
        return decode(codes, cats)

    def __getitem__(self, key: Any) -> Any:
        return self.read(key)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.read()
        return out if dtype is None else out.astype(dtype)

    def masked_values(self) -> np.ma.MaskedArray:
        """Every row decoded, as a masked array (masked where missing)."""
        codes = self.codes()
        return np.ma.MaskedArray(self._decoded(codes), mask=codes < 0)

    def __iter__(self) -> Iterator[Any]:
        for block in self.iterblocks():
            yield from block.tolist()

    def iterblocks(self, blen: int | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[np.ndarray]:
        blen = blen or self.chunklen
        rows = range(len(self))[start:stop]
        for i in range(0, len(rows), blen):
            yield self.read_rows(rows[i:i + blen])

    def to_pandas(self) -> Any:
        """A ``pandas.Categorical`` with the same categories, order flag and codes."""
        import pandas as pd

        return pd.Categorical.from_codes(self.codes(), categories=self.categories,
                                         ordered=self._ordered)

    def to_arrow(self, start: int = 0, stop: int | None = None) -> Any:
        """Rows ``[start, stop)`` as a ``pyarrow.DictionaryArray`` (int32 indices,
        nulls where missing)."""
        import pyarrow as pa

        stop = len(self) if stop is None else max(start, min(stop, len(self)))
        codes = self.codes(range(start, stop))
        indices = pa.array(codes, mask=codes < 0, type=pa.int32())
        return pa.DictionaryArray.from_arrays(indices, self._arrow_dictionary(),
                                              ordered=self._ordered)

    def _arrow_dictionary(self) -> Any:
        import pyarrow as pa

        if isinstance(self._dict, StringColumn):
            return self._dict.to_arrow()
        return pa.array(self._dict[:])

    def arrow_type(self) -> Any:
        """The ``pyarrow.DictionaryType`` rows stream as."""
        import pyarrow as pa

        value = pa.large_string() if self._kind == STRING else \
            pa.from_numpy_dtype(self._dict.dtype)
        return pa.dictionary(pa.int32(), value, ordered=self._ordered)

    # -- writing ----------------------------------------------------------------------------

    def _writable(self) -> None:
        self._check_open()
        if self._mode == "r":
            raise ReadOnlyError(f"{self._rootdir or 'categorical column'}: opened in mode 'r'")

    def encode(self, values: Any) -> np.ndarray:
        """Codes of ``values`` in this column's dictionary, which new values extend (an
        ordered column's refuse them).  Nothing is written when they are refused."""
        n, cats, _ = self._lookup()
        enc = encode_into(values, cats, self._ordered)
        if len(enc.categories) > n:
            if len(enc.categories) > _MAX_CATEGORIES:
                raise ValueError(f"more than {_MAX_CATEGORIES} categories")
            self._dict.append(enc.categories[n:])  # before any code that refers to them
        return enc.codes.astype(CODE_DTYPE)

    def append(self, values: Any) -> None:
        """Append values (plain, pandas Categorical, Arrow dictionary; None/NaN missing)."""
        self._writable()
        if isinstance(values, (str, bytes)) or np.ndim(values) == 0 and \
                not isinstance(values, CategoricalValues) and as_categorical(values) is None:
            values = np.asarray(values, dtype=object).reshape(1)
        before = (len(self), len(self._dict))
        try:
            self._codes.append(self.encode(values))
        except BaseException:
            self._trim_dictionary(before[1])
            raise
        self._last_append = before

    def _trim_dictionary(self, length: int) -> None:
        """In memory, drop categories added since the dictionary had ``length`` (on disk
        the table's transaction puts codes and dictionary back together)."""
        if self._rootdir is None and len(self._dict) > length:
            self._dict.resize(length)

    def __setitem__(self, key: Any, value: Any) -> None:
        """Replace rows (numpy's keys and broadcasting); None/NaN writes a missing value."""
        self._writable()
        if np.ndim(value) == 0 and as_categorical(value) is None:
            value = np.asarray(value, dtype=object).reshape(1)
        codes = self.encode(value)
        self._codes[key] = codes if len(codes) != 1 else codes[0]
        self._last_append = None

    def resize(self, nitems: int) -> None:
        """Shrink to ``nitems`` rows, or grow with missing values."""
        self._writable()
        n = len(self)
        if nitems < n:
            self._codes.resize(nitems)
            if self._last_append is not None and nitems == self._last_append[0]:
                # An in-memory table undoing an append some other column refused.
                self._trim_dictionary(self._last_append[1])
        elif nitems > n:
            self._codes.append(np.full(nitems - n, -1, CODE_DTYPE))
        self._last_append = None

    def trim(self, nitems: int) -> None:
        self.resize(len(self) - nitems)

    def flush(self) -> None:
        # The dictionary first: the codes are the record of what exists.
        if self._mode != "r":
            self._dict.flush()
            self._codes.flush()

    def _release(self) -> None:
        self._dict.close()
        self._codes.close()

    def _parts(self) -> list[Any]:
        return [self._codes, self._dict]

    def discard(self) -> None:
        self._dict.discard()
        self._codes.discard()

    def free_cachemem(self) -> None:
        self._codes.free_cachemem()
        self._dict.free_cachemem()

    def copy(self, **kwargs: Any) -> CategoryColumn:
        """An in-memory copy (``cparams`` as for the constructor)."""
        return CategoryColumn(CategoricalValues(self.codes(), self.categories, self._ordered),
                              cparams=kwargs.get("cparams", self.cparams))

    def __reduce__(self) -> tuple:
        if self._rootdir is not None:
            raise TypeError("a stored categorical column pickles with its table")
        return (_rebuilt, (self.codes(), self.categories, self._ordered))

    def __repr__(self) -> str:
        return f"CategoryColumn({len(self)} rows, {len(self._dict)} categories)"


def _rebuilt(codes: np.ndarray, categories: np.ndarray, ordered: bool) -> CategoryColumn:
    return CategoryColumn(CategoricalValues(codes, categories, ordered))




def wants_category_column(values: Any) -> bool:
    """Whether a new column's values are dictionary-encoded."""
    return isinstance(values, CategoryColumn) or as_categorical(values) is not None


def text_options(values: Any, args: dict[str, Any]) -> dict[str, Any]:
    """The options of a table's new columns (``args``) that a string column (or, with
    ``chunklen`` too, a categorical one) made of ``values`` takes."""
    out = {"cparams": args.get("cparams"), "expectedlen": args.get("expectedlen")}
    if column_class(values) is CategoryColumn:
        out["chunklen"] = args.get("chunklen")
    return out


def column_class(values: Any) -> type:
    """The class of a new text-like column: categorical, else variable-length string."""
    return CategoryColumn if wants_category_column(values) else StringColumn


#: The class that opens a stored column of each kind a table records (beside arrays).
OPENERS: dict[str, type] = {"string": StringColumn, "category": CategoryColumn}


def loose_values(values: Any, col: Any) -> Any:
    """Incoming rows of string or categorical column ``col``: encoded values as they are
    for a categorical column (their codes are read directly), decoded for a string
    column; Arrow arrays as they are (their buffers are read directly); anything else
    as an ``object`` array."""
    encoded = as_categorical(values)
    if encoded is not None:
        return encoded if isinstance(col, CategoryColumn) else plain_values(encoded)
    if hasattr(values, "buffers"):
        return values
    return np.asarray(values, dtype=object).reshape(-1)


def storable(values: Any, fmt: str | None) -> Any:
    """A new column's values as a table of format ``fmt`` stores them: bcolz 1.x has no
    categorical columns, so there dictionary-encoded values are decoded."""
    encoded = as_categorical(values) if fmt == "bcolz" else None
    return values if encoded is None else plain_values(encoded)
