"""NetCDF <-> ds datasets, through the netCDF4 library (the optional ``netcdf`` extra).

Both directions use the dataset structure of :mod:`carray.formats.ds`, so converting is
``ds.write(out, netcdf.read(src))`` and back. The mapping, and where it loses something:

* Variables, dimensions, attributes and dataset attributes of the root group map one to
  one; sub-groups are not read. ds has no dimension list: each variable names its dims in
  ``.dims``, and sizes come from the data.
* Missing values: netCDF4 masks values equal to ``_FillValue``/``missing_value`` (or the
  default fill value), giving masked arrays, which ds stores with its missing-value mask.
  Masked variables written to NetCDF get a ``_FillValue`` (the variable's own if it has
  one in its attributes, else netCDF4's default for the type). Values are read raw
  (``scale_factor``/``add_offset`` are kept as attributes and not applied), so a round
  trip does not scale twice.
* Unlimited dimensions are read as ordinary ones (ds has no such notion); pass
  ``unlimited=[...]`` to :func:`write` to create them.
* Types: numbers map to themselves. ``unicode`` is a NetCDF variable-length string (a
  masked string is written as ``""``: NetCDF strings have no missing value). ``str``
  (bytes) becomes a char array with an extra last dimension ``<var>_strlen``, and any char
  variable read joins its last dimension back into byte strings (trailing NUL bytes, as
  char padding, are dropped). ``bool`` is stored as int8 with the attribute
  ``dtype = "bool"`` (xarray's convention) and read back as bool.
* Attributes NetCDF cannot hold (dicts, nulls, lists mixing types) are written as their
  JSON text; bools as 0/1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from carray.core.dtypes import checked_dtype
from carray.errors import FormatError
from carray.formats import ds
from carray.formats.ds.header import NUMERIC_TYPES
from carray.formats.ds.reader import apply_outer, normalize_index
from carray.formats.local_write import write_bytes
from carray.stores.files import fsync_path
from carray.stores.tempnames import temporary_name

__all__ = ["Reader", "StreamWriter", "read", "read_header", "write"]

PathLike = str | os.PathLike


def _netcdf4():
    try:
        import netCDF4
    except ImportError:
        raise ImportError("NetCDF support needs the netCDF4 package: "
                          "pip install 'carray[netcdf]'") from None
    return netCDF4


def _open(path: str):
    netCDF4 = _netcdf4()
    try:
        return netCDF4.Dataset(path, "r")
    except OSError as exc:
        if not os.path.exists(path):
            raise
        raise FormatError(f"not a readable NetCDF file ({exc})", path=path) from None


def _attr_value(value):
    """A NetCDF attribute as a JSON-friendly Python value."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _read_attrs(obj) -> dict:
    return {name: _attr_value(obj.getncattr(name)) for name in obj.ncattrs()}


def _outer_keys(keys: tuple) -> tuple[tuple, tuple]:
    """Split outer keys into what netCDF4 reads (ints and slices) and what is then applied
    in memory (index arrays, relative to the span read)."""
    nc_keys, local = [], []
    for key in keys:
        if isinstance(key, (int, slice)):
            nc_keys.append(key)
            local.append(slice(None) if isinstance(key, slice) else None)
        elif key.size == 0:
            nc_keys.append(slice(0, 0))
            local.append(slice(None))
        else:
            lo = int(key.min())
            nc_keys.append(slice(lo, int(key.max()) + 1))
            local.append(key - lo)
    # Axes dropped by an integer key have no entry in memory.
    return tuple(nc_keys), tuple(k for k in local if k is not None)


def _read_var(var, index: tuple | None):
    char = var.dtype == np.dtype("S1") and var.ndim >= 1
    shape = var.shape[:-1] if char else var.shape
    keys = normalize_index(index, shape) if index is not None else (slice(None),) * len(shape)
    nc_keys, local = _outer_keys(keys)
    if char:
        var.set_auto_chartostring(False)
        nc_keys += (slice(None),)
    data = var[nc_keys] if nc_keys else var[...]
    if char:
        data = _join_chars(np.ma.getdata(data))
    data = apply_outer(data, tuple(local)) if local else data
    return data, keys


def _join_chars(chars: np.ndarray) -> np.ndarray:
    """Join the last axis of a char array into an object array of byte strings."""
    chars = np.ascontiguousarray(chars)
    joined = chars.view(f"S{chars.shape[-1]}").reshape(chars.shape[:-1]) if chars.shape[-1] \
        else np.zeros(chars.shape[:-1], "S1")
    out = np.empty(joined.shape, dtype=object)
    out[...] = joined.tolist() if joined.ndim else joined.item()
    return out


def _dims(var) -> list[str]:
    """A variable's dimensions as ds sees them: a char array's last one is its strings'."""
    dims = list(var.dimensions)
    return dims[:-1] if var.dtype == np.dtype("S1") and var.ndim >= 1 else dims


def _values(var, attrs: dict, index: tuple | None):
    """``var``'s values picked by the outer ``index`` (None: all) and the keys applied:
    char arrays joined into byte strings, bools (stored as int8) back to bool, a 0-d
    result a scalar (a 0-d masked array when missing)."""
    data, keys = _read_var(var, index)
    if attrs.get("dtype") == "bool" and np.asarray(data).dtype.kind in "iu":
        data = data.astype(bool)
    if np.ndim(data) == 0:
        data = data[()] if isinstance(data, np.ndarray) else data
        if data is np.ma.masked:
            data = np.ma.masked_array(np.zeros((), var.dtype), mask=True)
    return data, keys


class Reader:
    """An open NetCDF file whose variables are read a block of rows at a time.

    ``header`` is what :func:`read_header` returns; :meth:`iter_rows` gives a variable's
    rows (first axis) ``step`` at a time, each a hyperslab netCDF4 reads on its own.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self._file = _open(self.path)
        self._file.set_auto_scale(False)
        self.header = _header_of(self._file)

    def iter_rows(self, key: str, step: int) -> Iterator:
        """Rows of the variable ``key`` (a dataset key), ``step`` at a time, in order."""
        var = self._file.variables[ds.unescape(key)]
        attrs = _read_attrs(var)
        shape = self.header[key][".size"]
        if not shape:
            yield _values(var, attrs, None)[0]
            return
        for r0 in range(0, shape[0], max(step, 1)):
            yield _values(var, attrs, (slice(r0, r0 + max(step, 1)),))[0]

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read(path: PathLike, variables: Iterable[str] | str | None = None,
         sel: Mapping[str, object] | None = None) -> ds.Dataset:
    """Read a NetCDF file into a ds dataset.

    Parameters
    ----------
    path : str or os.PathLike
        A NetCDF 3 or 4 file.
    variables : list of str, optional
        Variables to read (default: all of the root group).
    sel : dict, optional
        ``{dim: key}`` as for :func:`carray.formats.ds.reader`; netCDF4 reads only the
        selected hyperslab (index arrays read the span between their ends).

    Returns
    -------
    dict
        The dataset (see :mod:`carray.formats.ds`); each variable's metadata has its
        attributes, ``.dims``, ``.size`` and ``.type``.
    """
    path = os.fspath(path)
    f = _open(path)
    with f:
        f.set_auto_scale(False)
        names = list(f.variables) if variables is None else \
            [variables] if isinstance(variables, str) else list(variables)
        if sel:
            known = set(f.dimensions)
            for dim in sel:
                if dim not in known:
                    raise KeyError(f"{path}: no dimension {dim!r}")
        d: ds.Dataset = {".": {".": _read_attrs(f)}}
        for name in names:
            if name not in f.variables:
                raise KeyError(f"{path}: no variable {name!r}")
            var = f.variables[name]
            attrs = _read_attrs(var)
            dims = _dims(var)
            index = tuple(sel.get(dim, slice(None)) for dim in dims) \
                if sel and any(dim in sel for dim in dims) else None
            data, keys = _values(var, attrs, index)
            dims = [dim for dim, k in zip(dims, keys, strict=True) if not isinstance(k, int)]
            if attrs.get("dtype") == "bool" and np.asarray(data).dtype == bool:
                del attrs["dtype"]  # NetCDF has no bools: _values made them of int8
            key = ds.escape(name)
            d[key] = data
            attrs[".dims"] = dims
            attrs[".size"] = list(np.shape(data))
            attrs[".type"] = _ds_type(data)
            d["."][key] = attrs
    return d


def read_header(path: PathLike) -> dict:
    """Metadata of a NetCDF file in the shape of a ds header (no data read): variable ->
    attributes with ``.dims``, ``.size`` and ``.type``; ``'.'`` -> dataset attributes."""
    with _open(os.fspath(path)) as f:
        return _header_of(f)


def _header_of(f) -> dict:
    """The ds-shaped header of the open NetCDF file ``f`` (see :func:`read_header`)."""
    out = {}
    for name, var in f.variables.items():
        attrs = _read_attrs(var)
        dims, shape = list(var.dimensions), list(var.shape)
        type_: str | None
        if var.dtype == str:
            type_ = "unicode"
        elif var.dtype == np.dtype("S1") and var.ndim >= 1:
            type_, dims, shape = "str", dims[:-1], shape[:-1]
        elif attrs.get("dtype") == "bool":
            type_ = "bool"
            del attrs["dtype"]
        else:
            type_ = _ds_type(np.zeros(0, var.dtype))
        out[ds.escape(name)] = {**attrs, ".dims": dims, ".size": shape, ".type": type_}
    out["."] = _read_attrs(f)
    return out


def _ds_type(data) -> str | None:
    arr = np.asanyarray(data)
    try:
        return ds._type_of("", arr, np.ravel(np.ma.getdata(arr)))
    except TypeError:
        return None


def _nc_attr(value):
    """An attribute value netCDF4 can store (see the module docstring)."""
    if isinstance(value, bool | np.bool_):
        return np.int8(value)
    if isinstance(value, str | bytes | int | float | np.generic | np.ndarray):
        return value
    if isinstance(value, list | tuple) and value:
        arr = np.asarray(value)
        if arr.ndim == 1 and arr.dtype.kind in "iufU" and \
                all(type(x) is type(value[0]) for x in value):
            return arr
    return json.dumps(value)


def _set_attrs(obj, attrs: Mapping, where: str) -> None:
    for name, value in attrs.items():
        if name.startswith("."):
            continue
        try:
            obj.setncattr(name, _nc_attr(value))
        except (TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"{where}: attribute {name!r} cannot be written to NetCDF: "
                             f"{exc}") from None


def write(path: PathLike, d: Mapping, *, unlimited: Iterable[str] = (),
          fsync: bool = True) -> None:
    """Write a ds dataset as a NetCDF-4 file, atomically (built in memory, then written
    to a temporary name and renamed).

    Parameters
    ----------
    path : str or os.PathLike
        Destination; replaced if it exists.
    d : dict
        The dataset (see :mod:`carray.formats.ds`).
    unlimited : list of str
        Dimensions to create as unlimited.
    fsync : bool, default True
        Flush to stable storage before the rename.
    """
    netCDF4 = _netcdf4()
    unlimited = set(unlimited)
    names = ds.variables(d)
    datas = {name: ds._as_array(name, d[name]) for name in names}
    metadata = d.get(".", {})
    sizes: dict[str, int] = {}
    for name in names:
        if datas[name] is not None:
            for dim, n in zip(ds.dims(d, name), datas[name].shape, strict=False):
                if sizes.setdefault(dim, n) != n:
                    raise ValueError(f"dimension {dim!r} has different sizes")
    for name in names:
        if datas[name] is None:
            for dim in ds.dims(d, name):
                sizes.setdefault(dim, 0)
    f = netCDF4.Dataset(os.fspath(path), "w", format="NETCDF4", memory=1 << 16)
    try:
        for dim, n in sizes.items():
            f.createDimension(dim, None if dim in unlimited else n)
        for name in names:
            _write_var(f, ds.unescape(name), datas[name], ds.dims(d, name),
                       dict(metadata.get(name, {})), netCDF4)
        _set_attrs(f, metadata.get(".", {}), "dataset")
    except BaseException:
        f.close()
        raise
    write_bytes(os.fspath(path), bytes(f.close()), fsync=fsync)


def _write_var(f, name: str, data, dims: list[str], attrs: dict, netCDF4) -> None:
    fill = attrs.pop("_FillValue", None)
    if data is None:
        type_ = attrs.get(".type", "float64")
        # ".type" comes from the dataset being converted: checked like any stored dtype.
        dtype = str if type_ == "unicode" else "S1" if type_ == "str" else \
            np.dtype(bool) if type_ == "bool" else \
            checked_dtype(type_, source=f"variable {name!r} .type")
        if dtype == np.dtype(bool):
            dtype, attrs["dtype"] = np.dtype("i1"), "bool"
        var = f.createVariable(name, dtype, tuple(dims))
        _set_attrs(var, attrs, f"variable {name!r}")
        return
    mask = np.ma.getmask(data)
    masked = mask is not np.ma.nomask and bool(mask.any())
    type_ = ds._type_of(name, data, np.ravel(np.ma.getdata(data))[~np.ravel(mask)]
                        if masked else np.ravel(np.ma.getdata(data)))
    values = np.ma.getdata(data)
    if type_ == "unicode":
        values = np.asarray(values, dtype=object)
        if masked:
            values = values.copy()
            values[mask] = ""
        var = f.createVariable(name, str, tuple(dims))
        _set_attrs(var, attrs, f"variable {name!r}")
        if values.ndim:
            var[...] = values
        else:
            var[()] = values.item()
        return
    if type_ == "str":
        items = [b"" if m else bytes(x) for x, m in
                 zip(np.ravel(values).tolist(), np.ravel(np.ma.getmaskarray(data)), strict=True)]
        width = max([len(x) for x in items] + [1])
        strlen = f"{name}_strlen"
        if strlen not in f.dimensions:
            f.createDimension(strlen, width)
        fixed = np.array(items, dtype=f"S{width}")
        chars = fixed.view("S1").reshape((*values.shape, width))
        var = f.createVariable(name, "S1", (*dims, strlen))
        _set_attrs(var, attrs, f"variable {name!r}")
        var.set_auto_chartostring(False)
        var[...] = chars
        return
    if type_ == "bool":
        values, attrs["dtype"] = values.astype("i1"), "bool"
        if masked and fill is None:
            fill = -1
    # netCDF4 wants native order spelled "=" (a dtype named by its name is native).
    dtype = np.dtype(values.dtype.name)
    values = values.astype(dtype, copy=False)
    if masked and fill is None:
        fill = netCDF4.default_fillvals[dtype.str[1:]]
    var = f.createVariable(name, dtype, tuple(dims),
                           fill_value=None if fill is None else dtype.type(fill))
    _set_attrs(var, attrs, f"variable {name!r}")
    out = np.ma.MaskedArray(values, mask=mask) if masked else values
    if out.ndim:
        var[...] = out
    else:
        var[()] = out


class StreamWriter:
    """A NetCDF-4 file written a variable at a time, each variable a block of rows at a
    time, straight into a temporary file beside ``path`` that :meth:`close` renames into
    place (leaving a ``with`` block without :meth:`close` leaves nothing at ``path``).

    ``sizes`` are the dimensions (name -> size; ``unlimited`` ones are created so).
    Variables are stored as :func:`write` stores them; a variable that may hold missing
    values is given its fill value up front (its ``_FillValue`` attribute, else
    netCDF4's default for its type), as it cannot be given one once written.
    """

    def __init__(self, path: PathLike, sizes: Mapping[str, int], *,
                 unlimited: Iterable[str] = (), fsync: bool = True) -> None:
        netCDF4 = _netcdf4()
        self._path, self._fsync = os.fspath(path), fsync
        self._tmp = temporary_name(self._path)
        self._file = netCDF4.Dataset(self._tmp, "w", format="NETCDF4")
        unlimited = set(unlimited)
        for dim, n in sizes.items():
            self._file.createDimension(dim, None if dim in unlimited else n)

    def add(self, key: str, attrs: Mapping, dims: list[str], type_: str,
            shape: list[int] | None, blocks: Iterable, *, maybe_missing: bool,
            strlen: int = 1) -> None:
        """Write the variable ``key`` from ``blocks`` (its rows in order, as for
        :meth:`carray.formats.ds.stream.StreamWriter.add`); ``strlen`` is the longest of
        a ``str`` variable's byte strings."""
        netCDF4, name = _netcdf4(), ds.unescape(key)
        attrs = {k: v for k, v in attrs.items() if not k.startswith(".")}
        if shape is None:
            _write_var(self._file, name, None, dims, {**attrs, ".type": type_}, netCDF4)
            return
        var = self._define(name, type_, dims, attrs, maybe_missing, strlen)
        row = 0
        for block in blocks:
            values = self._stored(type_, block, strlen)
            if not shape:
                var[()] = values
                continue
            var[row:row + len(values)] = values
            row += len(values)

    def _define(self, name: str, type_: str, dims: list[str], attrs: dict,
                maybe_missing: bool, strlen: int):
        netCDF4 = _netcdf4()
        fill = attrs.pop("_FillValue", None)
        if type_ in ("unicode", "str"):
            if type_ == "unicode":
                var = self._file.createVariable(name, str, tuple(dims))
            else:
                strdim = f"{name}_strlen"
                if strdim not in self._file.dimensions:
                    self._file.createDimension(strdim, max(strlen, 1))
                var = self._file.createVariable(name, "S1", (*dims, strdim))
                var.set_auto_chartostring(False)
            _set_attrs(var, attrs, f"variable {name!r}")
            return var
        if type_ == "bool":
            dtype, attrs["dtype"] = np.dtype("i1"), "bool"
            fill = -1 if maybe_missing and fill is None else fill
        else:
            dtype = NUMERIC_TYPES[type_]
            if maybe_missing and fill is None:
                fill = netCDF4.default_fillvals[dtype.str[1:]]
        var = self._file.createVariable(name, dtype, tuple(dims),
                                        fill_value=None if fill is None else dtype.type(fill))
        _set_attrs(var, attrs, f"variable {name!r}")
        return var

    @staticmethod
    def _stored(type_: str, block, strlen: int):
        """A block as the variable stores it: strings without missing values (NetCDF
        strings have none: ``""``), byte strings as chars, bools as int8."""
        if isinstance(block, str | bytes):
            block = np.array(block, dtype=object)
        mask = np.ma.getmaskarray(block)
        data = np.ma.getdata(block)
        if type_ == "unicode":
            values = np.asarray(data, dtype=object).copy()
            values[mask] = ""
            return values if values.ndim else values.item()
        if type_ == "str":
            items = [b"" if m else bytes(x) for x, m in
                     zip(np.ravel(data).tolist(), np.ravel(mask), strict=True)]
            fixed = np.array(items, dtype=f"S{max(strlen, 1)}")
            return fixed.view("S1").reshape((*np.shape(data), max(strlen, 1)))
        values = np.asarray(data).astype("i1" if type_ == "bool" else NUMERIC_TYPES[type_])
        return np.ma.MaskedArray(values, mask=mask) if mask.any() else values

    def close(self, attrs: Mapping) -> None:
        """Write the dataset attributes and put the file in place."""
        _set_attrs(self._file, attrs, "dataset")
        self._file.close()
        if self._fsync:
            fsync_path(self._tmp)
        os.replace(self._tmp, self._path)
        if self._fsync:
            fsync_path(os.path.dirname(os.path.abspath(self._path)))

    def discard(self) -> None:
        """Close and remove the temporary file, if still there."""
        if self._file.isopen():
            self._file.close()
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.discard()
