"""What a group conversion moves: groups, arrays and tables as plain descriptions.

Every group format (a carray group, NetCDF-4, HDF5, a Zarr v3 group, a flat ds file)
is read as a list of nodes, parents before their members, and written from one.
A node describes a member (its path in the root group, its attributes, its shape,
dtype, dims, chunks and compression) and gives its data as a fresh iterator of
consecutive row blocks, so any reader feeds any writer a block of rows at a time.

Foreign formats cannot hold every carray type or attribute value as itself.  The
writers store them as the format's own readers do (xarray's CF conventions for
bools, datetimes and timedeltas in NetCDF and ds files: :func:`cf_encoded`;
attribute values: :mod:`carray.attrs.peers`) and refuse what has no such form.  One
mark is carray's own, as no format has tables:

``_carray_table``
    On a group (NetCDF, Zarr) or a compound dataset (HDF5): the node is a table;
    JSON ``{"columns": [names in order], "dtypes": {name: [dtype, shape]}}``.

Axes without names, where a format needs names (NetCDF), get the names a group
gives them (``<array>_dim_<i>``, :meth:`carray.Group.dims_of`), which read back as
no names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from carray.core.dtypes import checked_dtype
from carray.core.params import CParams
from carray.errors import FormatError, UnstorableAttributeError, UnsupportedDTypeError

#: The table mark (read, it is left out of a table's ``attrs``).
TABLE_ATTR = "_carray_table"
#: The dimension a table's columns share in formats that name dimensions.
ROW_DIM = "row"
#: Bytes of one block of rows, at most (never less than a chunk's row of chunks).
BLOCK_BYTES = 16 * 2**20

Blocks = Callable[[], Iterator[np.ndarray]]


@dataclass
class GroupNode:
    """A group: its path in the root group (``""``: the root) and its attributes."""

    path: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ArrayNode:
    """An N-d array.

    Attributes
    ----------
    path : str
        Its path in the root group (``"a/b/temp"``).
    shape : tuple of int
    dtype : numpy.dtype
        Numbers, bools, datetimes, or fixed-width ``S``/``U`` text (never objects).
    dims : tuple of str, or None
        Its axes' names (None: unnamed).
    attrs : dict
    chunks : tuple of int, or None
        The source's chunk shape, if it has one.
    cparams : CParams, or None
        The nearest Blosc parameters to the source's compression (None: unknown).
    rows : callable
        ``rows()`` -> a fresh iterator of consecutive blocks of rows from the first
        (a 0-d array: one 0-d block).
    blocks : tuple of int, or None
        The source's block shape (a carray's), kept by carray destinations.
    source : carray, or None
        The source array when it is a carray: carray destinations move its stored
        chunks (:mod:`carray.array.transfer`) instead of reading ``rows``.
    """

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    dims: tuple[str, ...] | None
    attrs: dict[str, Any]
    chunks: tuple[int, ...] | None
    cparams: CParams | None
    rows: Blocks
    blocks: tuple[int, ...] | None = None
    source: Any = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass
class TableNode:
    """A table: its columns' dtypes in order (``object``: variable-length text; a
    subarray dtype for a column of N-d cells), row count, attributes, and
    ``batches()``, a fresh iterator of ``{column: rows}`` blocks from the first row."""

    path: str
    columns: dict[str, np.dtype]
    nrows: int
    attrs: dict[str, Any]
    batches: Callable[[], Iterator[dict[str, np.ndarray]]]

    @property
    def nbytes(self) -> int:
        return self.nrows * sum(d.itemsize if d.kind not in "OT" else 8
                                for d in self.columns.values())


Node = GroupNode | ArrayNode | TableNode


def made_up_dims(path: str, ndim: int) -> tuple[str, ...]:
    """The names a group gives the axes of the array at ``path`` when it was given none."""
    leaf = path.rsplit("/", 1)[-1]
    return tuple(f"{leaf}_dim_{i}" for i in range(ndim))


def named_dims(path: str, dims: Any) -> tuple[str, ...] | None:
    """``dims`` as a tuple of names; None when they are :func:`made_up_dims` (or none)."""
    names = tuple(str(d) for d in dims) if dims else ()
    return None if not names or names == made_up_dims(path, len(names)) else names


# -- blocks of rows ---------------------------------------------------------------------------


def row_step(shape: tuple[int, ...], itemsize: int, chunk_rows: int | None = None) -> int:
    """Rows per block: whole chunks' rows (``chunk_rows``), about :data:`BLOCK_BYTES`."""
    rowbytes = max(int(np.prod(shape[1:], dtype=np.int64)) * max(itemsize, 1), 1)
    step = max(chunk_rows or 1, 1)
    return max(step, BLOCK_BYTES // rowbytes // step * step)


def sliced_rows(read: Callable[[Any], Any], shape: tuple[int, ...], step: int,
                convert: Callable[[Any], np.ndarray] = np.asarray) -> Blocks:
    """A :data:`Blocks` over ``read(key)`` (``key`` a row slice, or ``()`` when 0-d)."""
    def rows() -> Iterator[np.ndarray]:
        if not shape:
            yield convert(read(()))
            return
        for lo in range(0, shape[0], step):
            yield convert(read(slice(lo, min(lo + step, shape[0]))))
    return rows


def text_width(blocks: Iterator[np.ndarray], encoding: str | None = None) -> int:
    """The longest item of blocks of strings (at least 1): characters, or bytes."""
    width = 1
    for block in blocks:
        items = np.asarray(block, dtype=object).ravel().tolist()
        if items:
            width = max(width, max(len(x if isinstance(x, bytes | str) else str(x))
                                   for x in items))
    return width


def _to_str(x: Any) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def as_text(block: Any, dtype: np.dtype) -> np.ndarray:
    """``block`` (strings of any kind, bytes decoded as UTF-8) as fixed-width ``dtype``."""
    arr = np.asarray(block)
    if arr.dtype.kind in "OT" and dtype.kind == "U" and arr.size:
        arr = np.vectorize(_to_str, otypes=[object])(arr)
    return arr.astype(dtype)


def as_objects(block: np.ndarray) -> np.ndarray:
    """Text as an object array of ``str`` (what variable-length string writers take)."""
    out = np.empty(block.shape, dtype=object)
    if block.ndim:
        out[...] = np.asarray(block).tolist()
    else:
        out[()] = np.asarray(block).item()
    return out


# -- blocks as carray dtypes and the table mark -------------------------------------------------


def restore(block: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """A block read from a foreign format as the carray dtype it was written from (and
    without the metadata some libraries put on their dtypes, which carray does not keep)."""
    block = np.asarray(block)
    if block.dtype.metadata and block.dtype.names is None and block.dtype.kind != "O":
        block = block.view(np.dtype(block.dtype.str))
    if dtype is None or block.dtype == dtype:
        return block
    if dtype.kind in "mM":
        return np.asarray(block).astype(np.int64).view(dtype)
    if dtype.kind in "US":
        return as_text(block, dtype)
    return np.asarray(block).astype(dtype)


def table_mark(node: TableNode) -> str:
    """The ``_carray_table`` JSON of a table."""
    return json.dumps({"columns": list(node.columns),
                       "dtypes": {name: [d.base.str, list(d.shape)]
                                  for name, d in node.columns.items()}})


def read_table_mark(value: Any, source: str) -> dict[str, np.dtype]:
    """Column name -> dtype from a ``_carray_table`` mark (JSON text or a dict)."""
    try:
        doc = json.loads(value) if isinstance(value, str | bytes) else value
        columns = doc["columns"]
        dtypes = doc["dtypes"]
        out = {}
        for name in columns:
            base, shape = dtypes[name]
            dt = checked_dtype(base, source=f"{source}: column {name!r}", allow_object=True)
            out[str(name)] = np.dtype((dt, tuple(shape))) if shape else dt
        return out
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"bad {TABLE_ATTR} mark: {exc}", source) from None


def own_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``attrs`` without the table mark."""
    return {k: v for k, v in attrs.items() if k != TABLE_ATTR}


# -- CF conventions for the types NetCDF and ds files lack (as xarray writes them) ------------


#: CF's names of the datetime units xarray decodes (numpy's unit -> CF's).
_CF_UNITS = {"D": "days", "h": "hours", "m": "minutes", "s": "seconds",
             "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
_NP_UNITS = {cf: unit for unit, cf in _CF_UNITS.items()}
CALENDAR = "proleptic_gregorian"
_EPOCH = "1970-01-01"
#: Attributes under which stored numbers are not the values themselves: such variables
#: are read raw, as carray reads every foreign variable.
_PACKING = ("scale_factor", "add_offset")


def cf_encoded(dtype: np.dtype, attrs: Mapping[str, Any], where: str
               ) -> tuple[np.dtype, dict[str, Any]]:
    """The dtype a format without bools, datetimes or timedeltas stores ``dtype`` as,
    and the attributes that say what it was, as xarray writes them: bools as int8 with
    ``dtype = "bool"``, datetimes as int64 counts of their unit ``since 1970-01-01``
    with ``calendar = "proleptic_gregorian"``, timedeltas as int64 counts with
    ``units`` and ``dtype = "timedelta64[<unit>]"``.

    Raises
    ------
    UnsupportedDTypeError
        Datetimes or timedeltas in units CF has no name for (weeks, months, years...).
    UnstorableAttributeError
        ``attrs`` already has one of the attributes that say the type.
    """
    stored: np.dtype
    if dtype.kind == "b":
        stored, extra = np.dtype("i1"), {"dtype": "bool"}
    elif dtype.kind in "mM":
        unit = np.datetime_data(dtype)[0]
        if unit not in _CF_UNITS:
            raise UnsupportedDTypeError(f"{where}: {dtype} values have no CF units; convert "
                                        "them to days or a finer unit first")
        stored = np.dtype("i8")
        extra = {"units": f"{_CF_UNITS[unit]} since {_EPOCH}", "calendar": CALENDAR} \
            if dtype.kind == "M" else {"units": _CF_UNITS[unit], "dtype": f"timedelta64[{unit}]"}
    else:
        return dtype, {}
    clash = sorted(k for k in extra if k in attrs)
    if clash:
        raise UnstorableAttributeError(
            f"{where}: attribute {clash[0]!r} has no place: {dtype} values are written as "
            f"numbers with CF attributes {', '.join(extra)} of their own")
    return stored, extra


def _is_epoch(text: str) -> bool:
    ref = text.strip().removesuffix("Z").removesuffix("UTC").removesuffix("+00:00").strip()
    try:
        return bool(np.datetime64(ref.replace(" ", "T")) == np.datetime64(_EPOCH))
    except ValueError:
        return False


def cf_decoded(dtype: np.dtype, attrs: dict[str, Any]) -> tuple[np.dtype, dict[str, Any]]:
    """Inverse of :func:`cf_encoded`: the dtype the stored ``dtype`` and ``attrs`` say the
    values are, and the attributes left.  Datetimes counted from another date than
    1970-01-01, and packed variables (``scale_factor``, ``add_offset``), stay numbers."""
    if any(k in attrs for k in _PACKING):
        return dtype, attrs
    units = attrs.get("units")
    if dtype == np.int8 and attrs.get("dtype") == "bool":
        return np.dtype(bool), {k: v for k, v in attrs.items() if k != "dtype"}
    if dtype != np.int64 or not isinstance(units, str):
        return dtype, attrs
    unit, since, ref = units.partition(" since ")
    if since and attrs.get("calendar") == CALENDAR and unit in _NP_UNITS and _is_epoch(ref):
        out = np.dtype(f"M8[{_NP_UNITS[unit]}]")
        return out, {k: v for k, v in attrs.items() if k not in ("units", "calendar")}
    if units in _NP_UNITS and attrs.get("dtype") == f"timedelta64[{_NP_UNITS[units]}]":
        out = np.dtype(f"m8[{_NP_UNITS[units]}]")
        return out, {k: v for k, v in attrs.items() if k not in ("units", "dtype")}
    return dtype, attrs
