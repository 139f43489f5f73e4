"""xarray backend for ds files: ``xarray.open_dataset("x.ds")`` and :func:`to_ds`.

Variables stay lazy: each is a :class:`DsBackendArray` (a
:class:`~carray.integrations.xarray_arrays.LazyBackendArray`) that, when indexed, reads
just the selected part of the file through :func:`carray.formats.ds.read_variable` (outer
indexing, so xarray hands it slices, ints and index arrays per dimension).  The arrays
of carray containers, :class:`CarrayBackendArray`, open their container on first read.

How ds features appear in xarray:

* Masked (``.missing``) numeric variables get a ``_FillValue`` (the variable's own
  ``_FillValue`` or ``missing_value`` attribute if it has one, NaN for floats, netCDF's
  default fill value for integers) and masked elements are read as that value, so xarray's usual decoding
  (``mask_and_scale=True``) turns them into NaN. An integer array that happens to hold
  the default fill value would be masked there too: the usual NetCDF caveat.
* Masked bool variables are handed over as int8 with ``_FillValue = -1`` (xarray has no
  masked bool), so they decode to floats 0/1/NaN.
* str/unicode variables are object arrays of bytes/str; masked strings are None.
* Variables without data (``.size: null``) are left out; dataset attributes become
  ``Dataset.attrs``; names are unescaped (a ds key ``\\.x`` is the variable ``.x``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import Any, Literal

import numpy as np
import xarray as xr
from xarray.backends import AbstractDataStore, BackendEntrypoint
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from carray.formats import ds
from carray.formats.ds.header import NUMERIC_TYPES, default_dims
from carray.integrations.xarray_arrays import LazyBackendArray

__all__ = ["CarrayBackendArray", "CarrayBackendEntrypoint", "DsBackendArray",
           "DsBackendEntrypoint", "DsDataStore", "to_ds"]

# netCDF's default fill values, so files converted to NetCDF and back look the same.
_INT_FILLS = {
    "int8": -127, "int16": -32767, "int32": -2147483647, "int64": -9223372036854775806,
    "uint8": 255, "uint16": 65535, "uint32": 4294967295, "uint64": 18446744073709551614,
}


class DsBackendArray(LazyBackendArray):
    """One variable of a ds file, read on indexing.  Each read opens and closes the file
    (no file stays open), so reads run at once from several threads."""

    concurrent_reads = True

    def __init__(self, path: str, key: str, shape: tuple[int, ...], dtype: np.dtype,
                 fill=None) -> None:
        super().__init__(shape, dtype)
        self.path = path
        self.key = key
        self.fill = fill  # value standing for masked elements (None: strings)

    def _arguments(self) -> tuple:
        return self.path, self.key, self.shape, self.dtype, self.fill

    def _open(self) -> Callable[[tuple], Any]:
        return functools.partial(ds.read_variable, self.path, self.key)

    def _read(self, opened: Callable[[tuple], Any], key: tuple) -> np.ndarray:
        data = opened(key)
        if isinstance(data, np.ma.MaskedArray):
            if data.dtype == np.bool_:
                data = np.ma.MaskedArray(data.astype(np.int8), mask=np.ma.getmask(data))
            if data.dtype == object:
                values = np.array(data.data, dtype=object)
                values[np.ma.getmaskarray(data)] = None
                data = values
            else:
                data = data.filled(self.fill)
        return np.asarray(data, dtype=self.dtype)


def _variable_spec(key: str, entry: dict) -> tuple[np.dtype, dict, Any]:
    """dtype xarray sees, extra attributes, and the fill value, for one header entry."""
    type_ = entry.get(".type", "float64")
    order: Literal["<", ">"] = "<" if entry.get(".endian", "b") == "l" else ">"
    attrs: dict = {}
    fill: Any = None
    if type_ in NUMERIC_TYPES:
        dtype = NUMERIC_TYPES[type_].newbyteorder(order)
    elif type_ == "bool":
        dtype = np.dtype(bool)
    else:
        dtype = np.dtype(object)
    if entry.get(".missing", False):
        if type_ == "bool":
            dtype, fill = np.dtype(np.int8), -1
        elif type_ in NUMERIC_TYPES:
            fill = entry.get("_FillValue", entry.get("missing_value"))
            if isinstance(fill, (list, tuple, np.ndarray)):
                # CF allows several missing values; any one will do.
                fill = np.ravel(np.asarray(fill))[0] if np.size(fill) else None
            if fill is None:
                fill = np.nan if type_.startswith("float") else _INT_FILLS[type_]
        if fill is not None:
            attrs["_FillValue"] = dtype.type(fill)
    return dtype, attrs, fill


class DsDataStore(AbstractDataStore):
    """The variables and attributes of one ds file, as xarray's store interface wants."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self.header = ds.read_header(self.path)

    def get_variables(self) -> dict:
        out = {}
        for key, entry in self.header.items():
            if key.startswith(".") or entry.get(".size", []) is None:
                continue
            entry = dict(entry)
            shape = tuple(entry.get(".size", []))
            named = entry.get(".dims")
            dims = tuple(default_dims(key, len(shape)) if named is None else named)
            dtype, extra, fill = _variable_spec(key, entry)
            attrs = {k: v for k, v in entry.items() if not k.startswith(".")}
            attrs.update(extra)
            data = indexing.LazilyIndexedArray(
                DsBackendArray(self.path, key, shape, dtype, fill))
            out[ds.unescape(key)] = xr.Variable(dims, data, attrs)
        return out

    def get_attrs(self) -> dict:
        return dict(self.header.get(".", {}))

    def get_dimensions(self) -> dict:
        sizes: dict[str, int] = {}
        for var in self.get_variables().values():
            sizes.update(zip(var.dims, var.shape, strict=True))
        return sizes

    def close(self) -> None:
        pass  # no file stays open: each read opens and closes the file


def _is_ds(path) -> bool:
    """Whether the registry's ds entry recognises the file at ``path`` (its magic bytes)."""
    from carray import registry
    from carray.stores import resolve

    try:
        store, key = resolve(os.fspath(path))
        return registry.get("ds").sniff(registry.Probe(store, key))
    except (OSError, TypeError, ValueError):
        return False


class DsBackendEntrypoint(BackendEntrypoint):
    """Open ds files with ``xarray.open_dataset(path)`` (or ``engine="carray_ds"``)."""

    description = "ds files (ds-format's native format) through carray"
    url = "https://github.com/peterkuma/ds-format"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "mask_and_scale",
                               "decode_times", "concat_characters", "decode_coords",
                               "use_cftime", "decode_timedelta")

    def open_dataset(self, filename_or_obj, *, drop_variables: str | Iterable[str] | None = None,
                     mask_and_scale=True, decode_times=True, concat_characters=True,
                     decode_coords=True, use_cftime=None, decode_timedelta=None) -> xr.Dataset:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            raise TypeError("the carray ds backend opens files by path")
        store = DsDataStore(filename_or_obj)
        return StoreBackendEntrypoint().open_dataset(
            store, mask_and_scale=mask_and_scale, decode_times=decode_times,
            concat_characters=concat_characters, decode_coords=decode_coords,
            drop_variables=drop_variables, use_cftime=use_cftime,
            decode_timedelta=decode_timedelta)

    def guess_can_open(self, filename_or_obj) -> bool:
        """What is stored decides when the file can be read (the registry sniffs it); the
        suffix otherwise."""
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        if os.path.isfile(filename_or_obj):
            return _is_ds(filename_or_obj)
        from carray import registry

        fmt = registry.for_extension(filename_or_obj)
        return fmt is not None and fmt.name == "ds"


def to_ds(dataset: xr.Dataset, path: str | os.PathLike, *, fsync: bool = False) -> None:
    """Write an xarray Dataset to a ds file.

    Variables are CF-encoded first, as xarray does for NetCDF (datetimes to numbers with
    ``units``, non-index coordinates listed in a ``coordinates`` attribute), then values
    equal to a variable's ``_FillValue`` (and None in object arrays) become missing
    values of ds's mask, and the ``_FillValue`` attribute is dropped.

    Parameters
    ----------
    dataset : xarray.Dataset
        What to write (dask-backed variables are computed).
    path : str or os.PathLike
        Destination ``.ds`` file, written atomically.
    fsync : bool, default False
        Flush to stable storage before returning (see :func:`carray.formats.ds.write`).
    """
    from xarray import conventions

    # Where decoding turned fill values into NaN, the NaNs are the missing values. Taken
    # before encoding because xarray casts NaN to the fill value through float64, which
    # is not exact for 64-bit integers near their limits.
    was_masked = {}
    for name, var in dataset.variables.items():
        cf = {**var.encoding, **var.attrs}
        if var.dtype.kind == "f" and ("_FillValue" in cf or "missing_value" in cf):
            was_masked[name] = np.isnan(np.asarray(var.values))
    variables, attrs = conventions.encode_dataset_coordinates(dataset)
    variables, attrs = conventions.cf_encoder(variables, attrs)
    d: dict = {".": {".": dict(attrs)}}
    for name, var in variables.items():
        values = np.asarray(var.values)
        var_attrs = dict(var.attrs)
        fill = var_attrs.pop("_FillValue", None)
        mask: Any = was_masked.get(name, np.zeros(values.shape, bool))
        if values.dtype == object:
            mask = values == None  # noqa: E711 - elementwise: which items are None
        elif fill is not None:
            mask = mask | (np.isnan(values) if values.dtype.kind == "f" and np.isnan(fill)
                           else values == fill)
        if mask.any():
            if values.dtype == object:
                values = values.copy()
                values[mask] = ""  # a placeholder: masked values are not written
            values = np.ma.MaskedArray(values, mask=mask)
        key = ds.escape(str(name))
        d[key] = values
        d["."][key] = {**var_attrs, ".dims": [str(x) for x in var.dims]}
    ds.write(path, d, fsync=fsync)


# -- carray directories, .b2nd frames and tables -------------------------------------------------

#: Attributes naming an array's dimensions: carray's own, then the one xarray writes to Zarr.
DIM_ATTRS = ("dims", "_ARRAY_DIMENSIONS")
#: The dimension every column of a table runs along.
ROW_DIM = "row"


class CarrayBackendArray(LazyBackendArray):
    """One carray, or one column of a table, read on indexing (carray reads only the
    chunks and blocks touched); one reader at a time per open container.
    """

    def __init__(self, path: str, column: str | None, shape: tuple[int, ...],
                 dtype: np.dtype, storage_options: dict | None = None,
                 version: str | None = None) -> None:
        super().__init__(shape, dtype)
        self.path, self.column = path, column
        self.storage_options = storage_options
        self.version = version  # the version described: read at it, never at a newer one

    def _arguments(self) -> tuple:
        return (self.path, self.column, self.shape, self.dtype, self.storage_options,
                self.version)

    def _open(self) -> Any:
        from carray import registry

        if self.version is None:
            opened = registry.open_any(self.path, "r", self.storage_options)
        else:
            from carray.api import open as open_container

            opened = open_container(self.path, "r", storage_options=self.storage_options,
                                    version=self.version)
        return opened if self.column is None else opened.cols[self.column]

    def _read(self, opened: Any, key: tuple) -> np.ndarray:
        if all(isinstance(k, slice) for k in key) or len(key) <= 1:
            values = opened[key[0] if len(key) == 1 else key]
        else:
            values = opened.oindex[key]
        if callable(getattr(opened, "codes", None)) and not np.ma.isMaskedArray(values):
            # Decoded categories: where a code is missing the value is a placeholder.
            values = np.ma.masked_array(values, ~opened.valid(key[0]))
        return _as_xarray_values(values, self.dtype)


def _as_xarray_values(values: Any, dtype: np.dtype) -> np.ndarray:
    """Values read from a carray or column as the variable's ``dtype``, missing ones
    (masked, or decoded categories' missing codes) as NaN, NaT or None."""
    if not np.ma.isMaskedArray(values):
        return np.asarray(values).astype(dtype, copy=False)
    missing = np.ma.getmaskarray(values)
    out = np.ma.getdata(values).astype(dtype)
    if not missing.any():
        return out
    out[missing] = None if dtype.kind == "O" else np.datetime64("NaT") \
        if dtype.kind == "M" else np.timedelta64("NaT") if dtype.kind == "m" else np.nan
    return out


def _xarray_dtype(a: Any) -> np.dtype:
    """The dtype xarray shows for a carray or column: text as objects, and, as for a
    pandas column, integers and bools of a column missing some values as float64."""
    if a.dtype.kind in "OT" or a.dtype == object:
        return np.dtype(object)
    if a.dtype.kind in "biu" and callable(getattr(a, "null_count", None)) and a.null_count():
        return np.dtype(np.float64)
    return np.dtype(a.dtype)


def _dims(name: str, ndim: int, attrs: dict, first: str | None = None) -> tuple[str, ...]:
    """Dimension names: from a ``dims``/``_ARRAY_DIMENSIONS`` attribute, else ``first``
    (a table's row dimension) and ``<name>_dim_N``."""
    for key in DIM_ATTRS:
        value = attrs.get(key)
        if isinstance(value, (list, tuple)) and len(value) == ndim and \
                all(isinstance(d, str) for d in value):
            return tuple(value)
    names = [f"{name}_dim_{i}" for i in range(ndim)]
    if first is not None and ndim:
        names[0] = first
    return tuple(names)


def _variable(path: str, column: str | None, name: str, a: Any, attrs: dict,
              storage_options: dict | None, first: str | None = None,
              version: str | None = None) -> xr.Variable:
    dtype = _xarray_dtype(a)
    dims = _dims(name, len(a.shape), attrs, first)
    lazy = indexing.LazilyIndexedArray(
        CarrayBackendArray(path, column, tuple(a.shape), dtype, storage_options, version))
    var = xr.Variable(dims, lazy, {k: v for k, v in attrs.items() if k not in DIM_ATTRS})
    chunks = getattr(a, "chunks", None)
    if chunks is None:  # a string column: runs of rows
        chunks = (getattr(a, "chunklen", len(a)),)
    var.encoding["preferred_chunks"] = dict(zip(dims, chunks, strict=False))
    var.encoding["chunks"] = tuple(chunks)
    return var


class CarrayDataStore(AbstractDataStore):
    """A carray (one variable) or a ctable (one variable per column) as an xarray store."""

    def __init__(self, path: str | os.PathLike, storage_options: dict | None = None,
                 at: dict[str, Any] | None = None) -> None:
        from carray import registry
        from carray.api import open as open_container

        self.path = os.fspath(path)
        self.storage_options = storage_options
        self.format = registry.guess(self.path, storage_options)
        if not self.format.container:
            raise ValueError(f"{self.path}: a {self.format.description}, not a carray or "
                             "ctable (open it with its own backend)")
        self._variables: dict[str, xr.Variable] = {}
        self._attrs: dict = {}
        at = {k: v for k, v in (at or {}).items() if v is not None}
        c: Any
        with open_container(self.path, "r", storage_options=storage_options, **at) as c:
            version = getattr(c, "version", None)  # the arrays read that one, no newer
            if self.format.kind == "table":
                self._attrs = dict(c.attrs.getall())
                for name in c.names:
                    col = c.cols[name]
                    col_attrs = getattr(col, "attrs", None)  # nested columns have none
                    self._variables[name] = _variable(
                        self.path, name, name, col, dict(col_attrs or {}), storage_options,
                        ROW_DIM, version)
            else:
                attrs = dict(c.attrs.getall())
                name = str(attrs.pop("name", None) or _stem(self.path))
                self._variables[name] = _variable(self.path, None, name, c, attrs,
                                                  storage_options, version=version)

    def get_variables(self) -> dict:
        return dict(self._variables)

    def get_attrs(self) -> dict:
        return dict(self._attrs)

    def get_dimensions(self) -> dict:
        sizes: dict = {}
        for var in self._variables.values():
            sizes.update(zip(var.dims, var.shape, strict=True))
        return sizes

    def close(self) -> None:
        pass  # each variable opens its container on first read and keeps it


def _stem(path: str) -> str:
    base = os.path.basename(path.rstrip("/\\")) or "data"
    return os.path.splitext(base)[0] or base


class CarrayBackendEntrypoint(BackendEntrypoint):
    """Open carray directories, bcolz and ``.b2nd`` arrays, and ctables with
    ``xarray.open_dataset(path)`` (or ``engine="carray"``).

    An array becomes one variable named by its ``name`` attribute (else the path's
    stem), with dimensions from its ``dims`` (or ``_ARRAY_DIMENSIONS``) attribute;
    a table becomes one variable per column along the ``row`` dimension (with the
    column's attributes), its attributes the dataset's.  Variables are lazy; ``chunks={}`` gives dask arrays
    chunked as carray's chunks.  ``version=``, ``tag=`` or ``as_of=`` open an earlier
    version (as :func:`carray.open` does), which every variable then reads.
    """

    description = "carray directories, bcolz and .b2nd arrays, and ctables"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "mask_and_scale",
                               "decode_times", "decode_coords", "use_cftime",
                               "decode_timedelta", "storage_options", "version", "tag",
                               "as_of")

    def open_dataset(self, filename_or_obj, *, drop_variables: str | Iterable[str] | None = None,
                     mask_and_scale=True, decode_times=True, decode_coords=True,
                     use_cftime=None, decode_timedelta=None,
                     storage_options: dict | None = None, version: str | None = None,
                     tag: str | None = None, as_of: Any = None) -> xr.Dataset:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            raise TypeError("the carray backend opens datasets by path or URL")
        store = CarrayDataStore(filename_or_obj, storage_options,
                                {"version": version, "tag": tag, "as_of": as_of})
        return StoreBackendEntrypoint().open_dataset(
            store, mask_and_scale=mask_and_scale, decode_times=decode_times,
            decode_coords=decode_coords, drop_variables=drop_variables,
            use_cftime=use_cftime, decode_timedelta=decode_timedelta)

    def guess_can_open(self, filename_or_obj) -> bool:
        """Whether the registry recognises a carray container at this local path."""
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        if not os.path.exists(filename_or_obj):
            return False
        from carray import registry
        from carray.errors import CArrayError

        named = registry.for_extension(filename_or_obj)
        if os.path.isfile(filename_or_obj) and (named is None or not named.container):
            return False  # a single file: only .b2nd/.caterva frames are read, by name first
        try:
            return registry.sniff(filename_or_obj).container
        except (CArrayError, OSError, ValueError):
            return False
