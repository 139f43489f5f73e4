"""Attribute values in the conventions of the libraries that read carray's exports.

carray keeps every attribute exactly (:mod:`carray.attrs.values`).  A file another
program reads holds each value as the library reading it writes it, so nothing
carray-specific shows there:

* JSON documents (bcolz ``__attrs__``, Zarr attributes, ds headers): Python's JSON
  values, as bcolz, zarr-python and ds-format write them: numpy scalars as their
  Python value, numpy arrays and tuples as lists, NaN and infinities as the ``NaN``
  and ``Infinity`` tokens (:func:`json_attrs`);
* NetCDF-4 attributes (netCDF4): text, numbers, numpy numeric scalars and 1-d arrays,
  lists of numbers or of text (:func:`netcdf_attrs`);
* HDF5 attributes (h5py): text, bytes, numbers, bools, numpy scalars and arrays of
  numbers, bools or bytes, lists of numbers or of text (:func:`hdf5_attrs`);
* ``_FillValue``: a scalar of the variable's own type (:func:`fill_value_for`), in Zarr
  attributes as xarray writes it (:func:`zarr_fill_to_json`).

A value the destination cannot hold raises :class:`UnstorableAttributeError` naming
the attribute when it is written, never a file the reading library cannot open.
Read back (:func:`native_value`), a value is what that library gives, so a round
trip through a foreign format keeps what the format keeps: a numpy ``float32``
comes back from JSON as a ``float``, a tuple as a list.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from carray.attrs.values import check_name
from carray.errors import UnstorableAttributeError

#: Kinds of numpy items JSON holds as numbers, bools or text.
_JSON_KINDS = "biufU"
#: Item types netCDF4 writes as attributes (no float16, no bools).
_NETCDF_TYPES = {np.dtype(t) for t in ("i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8",
                                        "f4", "f8")}
_INT64 = (-(2**63), 2**63)


def _type_name(value: Any) -> str:
    t = type(value)
    if isinstance(value, np.generic | np.ndarray):
        return f"{t.__name__} of dtype {value.dtype}"
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _refuse(fmt: str, holds: str, value: Any) -> UnstorableAttributeError:
    return UnstorableAttributeError(f"{fmt} attributes hold {holds}; a {_type_name(value)} "
                                    "has no place there (store it as text or numbers)")


def _attrs(attrs: Mapping[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    out = {}
    for key, value in attrs.items():
        name = check_name(key)
        try:
            out[name] = convert(value)
        except UnstorableAttributeError as exc:
            raise UnstorableAttributeError(f"attribute {name!r}: {exc}") from None
    return out


# -- JSON: bcolz, Zarr, ds -----------------------------------------------------------------------


def json_value(value: Any, fmt: str) -> Any:
    """``value`` as JSON libraries store it (see the module doc)."""
    t = type(value)
    if value is None or t in (bool, int, float, str):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in _JSON_KINDS and \
            (value.dtype.kind != "f" or value.dtype.itemsize <= 8):
        return value.item()
    if t is np.ndarray and value.dtype.kind in _JSON_KINDS and \
            (value.dtype.kind != "f" or value.dtype.itemsize <= 8):
        return value.tolist()
    if t in (list, tuple):
        return [json_value(v, fmt) for v in value]
    if t is dict:
        return {k: json_value(v, fmt) for k, v in value.items()}
    raise _refuse(fmt, "JSON values (text, numbers, bools, null, lists and objects)", value)


def json_attrs(attrs: Mapping[str, Any], fmt: str) -> dict[str, Any]:
    """Attributes as a JSON library (bcolz, zarr-python, ds-format) writes them.

    Raises
    ------
    UnstorableAttributeError
        A value JSON has no form for (complex, bytes, dates, sets...), named.
    """
    return _attrs(attrs, lambda v: json_value(v, fmt))


# -- NetCDF-4 and HDF5 ---------------------------------------------------------------------------


def _numbers(value: Any) -> np.ndarray | None:
    """A list or tuple of plain numbers (no bools) as a numpy array, else None."""
    if not value or any(type(v) not in (int, float) for v in value):
        return None
    arr = np.asarray(value)
    return arr if arr.dtype.kind in "if" else None


def _texts(value: Any) -> list[str] | None:
    return list(value) if value and all(type(v) is str for v in value) else None


def netcdf_value(value: Any) -> Any:
    """``value`` as netCDF4 writes an attribute (see the module doc)."""
    t = type(value)
    if t in (str, float, bytes) or (t is int and _INT64[0] <= value < _INT64[1]):
        return value
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.generic | np.ndarray) and value.dtype in _NETCDF_TYPES and \
            value.ndim <= 1 and value.size:
        return value
    if t in (list, tuple):
        found = _numbers(value)
        if found is not None and found.dtype in _NETCDF_TYPES:
            return found
        if _texts(value) is not None:
            return list(value)
    raise _refuse("NetCDF", "text and numbers (scalars, lists of numbers or of text)", value)


def netcdf_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as netCDF4 writes them; UnstorableAttributeError for the others."""
    return _attrs(attrs, netcdf_value)


def hdf5_value(value: Any) -> Any:
    """``value`` as h5py writes an attribute (see the module doc)."""
    t = type(value)
    if t in (str, float, bool, bytes, complex) or \
            (t is int and _INT64[0] <= value < 2**64):
        return value
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.generic | np.ndarray) and value.dtype.kind in "biufcS" and \
            not value.dtype.names and value.dtype.itemsize <= 16:
        return value
    if t in (list, tuple):
        found = _numbers(value)
        if found is not None:
            return found
        if _texts(value) is not None:
            return list(value)
    if t is np.ndarray and value.dtype.kind == "U" and value.ndim == 1 and value.size:
        return value.tolist()
    raise _refuse("HDF5", "text, bytes, numbers and bools (scalars, arrays, lists)", value)


def hdf5_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as h5py writes them; UnstorableAttributeError for the others."""
    return _attrs(attrs, hdf5_value)


def native_attrs(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as netCDF4 or h5py return them, as carray keeps them
    (:func:`native_value`); a ``_FillValue`` stays a scalar of the variable's type."""
    out = {str(k): native_value(v) for k, v in raw.items()}
    fill = raw.get("_FillValue")
    if isinstance(fill, np.generic | np.ndarray) and np.ndim(fill) == 0 and \
            np.asarray(fill).dtype.kind in "biufc":
        out["_FillValue"] = np.asarray(fill)[()]
    return out


def native_value(value: Any) -> Any:
    """An attribute value as netCDF4 or h5py returns it, as carray keeps it: text as
    ``str`` (a list for several), int64 and float64 scalars as Python numbers, bools
    as ``bool``."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "OUS":
        items = [x.decode("utf-8", "backslashreplace") if isinstance(x, bytes) else x
                 for x in value.ravel().tolist()]
        return items[0] if value.size == 1 else items
    if isinstance(value, np.bytes_ | bytes):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.int64 | np.float64 | np.bool_):
        return value.item()
    return value


# -- fill values ---------------------------------------------------------------------------------


def fill_value_for(value: Any, dtype: np.dtype, where: str) -> Any:
    """``value`` as a scalar of the variable's ``dtype`` (numbers, bools or text), the
    type NetCDF, HDF5, Zarr and xarray give a ``_FillValue``.

    Raises
    ------
    UnstorableAttributeError
        ``value`` is not a number, bool or text that ``dtype`` holds as it is (NaN for
        integers, a value out of range, text for numbers).
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "mM":  # datetimes are filled with a count of their unit, as xarray does
        dtype = np.dtype(np.int64)
    found = np.asarray(value)
    if found.size == 1 and found.ndim <= 1:
        found = found.reshape(())
    if found.ndim == 0 and dtype.kind in "US" and found.dtype.kind == dtype.kind:
        cast = np.asarray(found.item(), dtype=dtype)
        if cast.item() == found.item():  # not cut to the variable's width
            return cast[()]
    if found.ndim == 0 and dtype.kind in "biufc" and found.dtype.kind in "biuf":
        with np.errstate(all="ignore"):
            cast = found.astype(dtype)
        nan = found.dtype.kind == "f" and bool(np.isnan(found))
        if (nan and dtype.kind in "fc" and bool(np.isnan(cast))) or (not nan and cast == found):
            return cast[()]
    raise UnstorableAttributeError(f"{where}: _FillValue {value!r:.60} is not a value of the "
                                   f"variable's type {dtype}")


def zarr_fill_to_json(value: Any, dtype: np.dtype) -> Any:
    """A ``_FillValue`` (already of ``dtype``) as xarray stores it in Zarr attributes:
    floats as the base64 text of their little-endian float64 bytes, complex numbers as
    two of those, integers and bools as themselves, text as itself."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OTU":
        return str(value)
    if dtype.kind in "mM":
        return int(value)
    if dtype.kind == "f":
        return base64.standard_b64encode(struct.pack("<d", float(value))).decode("ascii")
    if dtype.kind == "c":
        return [zarr_fill_to_json(complex(value).real, np.dtype("f8")),
                zarr_fill_to_json(complex(value).imag, np.dtype("f8"))]
    if dtype.kind == "S":
        return base64.standard_b64encode(bytes(value)).decode("ascii")
    return np.asarray(value).item()


def zarr_fill_from_json(obj: Any, dtype: np.dtype, where: str) -> Any:
    """Inverse of :func:`zarr_fill_to_json`: a scalar of ``dtype``.

    Raises
    ------
    ValueError
        ``obj`` is not a fill value of ``dtype`` in that form.
    """
    dtype = np.dtype(dtype)
    try:
        if dtype.kind in "OT":
            return str(obj)
        if dtype.kind == "f":
            raw = base64.standard_b64decode(obj) if isinstance(obj, str) else None
            number = struct.unpack("<d", raw)[0] if raw is not None and len(raw) == 8 else obj
            return np.asarray(float(number)).astype(dtype)[()]
        if dtype.kind == "c":
            re, im = (zarr_fill_from_json(p, np.dtype("f8"), where) for p in obj)
            return np.asarray(complex(re, im)).astype(dtype)[()]
        if dtype.kind == "S":
            return np.asarray(base64.standard_b64decode(obj), dtype=dtype)[()]
        return fill_value_for(obj, dtype, where)
    except (TypeError, ValueError, binascii.Error, UnstorableAttributeError) as exc:
        raise ValueError(f"{where}: _FillValue {obj!r:.60} is not a {dtype} fill value "
                         f"({exc})") from None
