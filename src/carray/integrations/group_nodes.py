"""What a group conversion moves: groups, arrays and tables as plain descriptions.

Every group format (a carray group, NetCDF-4, HDF5, a Zarr v3 group, a flat ds file)
is read as a list of nodes, parents before their members, and written from one.
A node describes a member (its path in the root group, its attributes, its shape,
dtype, dims, chunks and compression) and gives its data as a fresh iterator of
consecutive row blocks, so any reader feeds any writer a block of rows at a time.

Foreign formats cannot hold every carray type or attribute value as itself.  The
writers store them in ways documented in :mod:`carray.integrations.group_files`,
and mark what they changed with attributes whose names start with ``_carray_``;
the helpers here write and read those marks:

``_carray_dtype``
    The numpy dtype (``dtype.str``) of an array stored as another type: text as
    variable-length strings, bools as int8 (NetCDF), datetimes and timedeltas as
    int64.
``_carray_json``
    The names of attributes stored as JSON text (carray's plain JSON form, see
    :mod:`carray.attrvalues`), as a JSON list: every value but text, Python ints
    and floats, numeric numpy scalars and 1-d numeric arrays of 2 items or more.
``_carray_numpy``
    The names of int64 and float64 attributes set as numpy scalars (others of those
    types read back as Python numbers), as a JSON list.
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

from carray import attrvalues
from carray.dtypes import checked_dtype
from carray.errors import FormatError
from carray.params import CParams

#: Attribute names the writers reserve (and the readers leave out of ``attrs``).
MARK = "_carray_"
DTYPE_ATTR = "_carray_dtype"
JSON_ATTR = "_carray_json"
NUMPY_ATTR = "_carray_numpy"
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
        chunks (:mod:`carray.transfer`) instead of reading ``rows``.
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


# -- marks ------------------------------------------------------------------------------------


def stored_dtype(attrs: Mapping[str, Any], source: str) -> np.dtype | None:
    """The dtype a ``_carray_dtype`` attribute names (None when there is none)."""
    text = attrs.get(DTYPE_ATTR)
    if text is None:
        return None
    return checked_dtype(str(text), source=f"{source}: {DTYPE_ATTR}")


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
    """``attrs`` without the ``_carray_`` marks."""
    return {k: v for k, v in attrs.items() if not k.startswith(MARK)}


# -- attribute values in formats with typed attributes (NetCDF, HDF5) --------------------------


def _native(value: Any) -> bool:
    """Whether NetCDF and HDF5 attributes hold ``value`` as itself (and read it back so)."""
    t = type(value)
    if t is str or t is float:
        return True
    if t is int:
        return -2**63 <= value < 2**63
    if isinstance(value, np.generic) and not isinstance(value, np.bool_):
        return value.dtype.kind in "iuf"
    if isinstance(value, np.ndarray):
        return value.ndim == 1 and value.size >= 2 and value.dtype.kind in "iuf"
    return False


def encode_typed_attrs(attrs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Attributes as NetCDF or HDF5 store them: native values as themselves, the rest as
    JSON text named in a ``_carray_json`` attribute (see the module docstring)."""
    out: dict[str, Any] = {}
    as_json, numpy = [], []
    for name, value in attrs.items():
        if _native(value):
            out[name] = value
            if isinstance(value, np.int64 | np.float64):
                numpy.append(name)  # read back as Python numbers unless listed
            continue
        try:
            out[name] = json.dumps(attrvalues.to_json(value), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: attribute {name!r} cannot be stored: {exc}") from None
        as_json.append(name)
    if as_json:
        out[JSON_ATTR] = json.dumps(as_json)
    if numpy:
        out[NUMPY_ATTR] = json.dumps(numpy)
    return out


def _plain(value: Any, numpy: bool = False) -> Any:
    """An attribute value as a NetCDF or HDF5 library returns it, as carray keeps it
    (int64 and float64 scalars as Python numbers unless ``numpy``)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OUS":
            items = [x.decode("utf-8", "backslashreplace") if isinstance(x, bytes) else x
                     for x in value.ravel().tolist()]
            return items[0] if value.size == 1 else items
        return value
    if isinstance(value, np.bytes_ | bytes):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.int64 | np.float64) and not numpy:
        return value.item()
    return value


def _listed(attrs: Mapping[str, Any], mark: str, source: str) -> list[str]:
    text = attrs.get(mark)
    if text is None:
        return []
    try:
        names = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise FormatError(f"bad {mark} attribute: {exc}", source) from None
    if not isinstance(names, list):
        raise FormatError(f"bad {mark} attribute: not a list of names", source)
    return [str(n) for n in names]


def decode_typed_attrs(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Inverse of :func:`encode_typed_attrs`; ``_carray_`` marks left in (see
    :func:`own_attrs`), other libraries' values kept as near as they are."""
    numpy = set(_listed({k: _plain(v) for k, v in raw.items() if k == NUMPY_ATTR},
                        NUMPY_ATTR, source))
    attrs = {str(k): _plain(v, str(k) in numpy) for k, v in raw.items()}
    decoded = {}
    for name in _listed(attrs, JSON_ATTR, source):
        if name in attrs:
            try:
                decoded[name] = json.loads(attrs[name])
            except (ValueError, TypeError) as exc:
                raise FormatError(f"attribute {name!r}: bad JSON: {exc}", source) from None
    attrs.update(attrvalues.load_plain(decoded, source))
    return attrs
