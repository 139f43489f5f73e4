"""Attribute values as msgpack, the way python-blosc2 keeps a frame's vlmeta.

What python-blosc2 writes and reads back as it was is written as it writes it,
so either side reads the other's attributes (docs/formats/b2frame.md, "vlmeta"):
None, bool, int (64-bit), float, str, bytes, lists, str-keyed dicts as msgpack's
own; a tuple as a list starting with ``"__tuple__"``; complex numbers, sets and
numpy arrays as python-blosc2's extension types 44, 45 and 46.  Every other value
(numpy scalars, datetimes, ...) is a map ``{"__carray__": <typed form>}``
(:mod:`carray.attrs.values`), which python-blosc2 reads as a dict.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import msgpack
import numpy as np

from carray.attrs.values import MARKER, decode_typed, encode_typed, parse_dtype, utf8_text
from carray.core.dtypes import FIXED_KINDS, checked_shape
from carray.errors import FormatError, UnsafeDataError

TUPLE_TAG = "__tuple__"
#: python-blosc2's msgpack extension codes (msgpack_utils.py).
COMPLEX_EXT, SET_EXT, NDARRAY_EXT = 44, 45, 46
_COMPLEX = struct.Struct(">dd")


def _packb(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _ndarray_ext(arr: np.ndarray) -> msgpack.ExtType:
    dtype = arr.dtype
    spec = {"descr": dtype.descr} if dtype.fields is not None else {"str": dtype.str}
    payload = {"dtype": spec, "shape": list(arr.shape), "data": arr.tobytes()}
    # Packed as python-blosc2 packs it: the descr's tuples tagged as tuples.
    return msgpack.ExtType(NDARRAY_EXT, _packb(_native(payload)))


def _native(value: Any) -> Any:
    """``value`` (checked by :func:`carray.attrs.values.normalise`) as msgpack objects."""
    t = type(value)
    if value is None or t in (bool, float, bytes, msgpack.ExtType):
        return value
    if (t is int and -(2**63) <= value < 2**64) or (t is str and utf8_text(value)):
        return value
    if t is complex:
        return msgpack.ExtType(COMPLEX_EXT, _COMPLEX.pack(value.real, value.imag))
    if t is tuple:
        return [TUPLE_TAG, *(_native(v) for v in value)]
    if t is list and not (value and type(value[0]) is str and value[0] == TUPLE_TAG):
        return [_native(v) for v in value]
    if t is dict and (len(value) != 1 or MARKER not in value) and \
            all(type(k) is str and utf8_text(k) for k in value):
        return {k: _native(v) for k, v in value.items()}
    if t is set:
        return msgpack.ExtType(SET_EXT, _packb([_native(v) for v in value]))
    if t is np.ndarray and value.dtype.kind in FIXED_KINDS and not value.dtype.hasobject:
        return _ndarray_ext(value)
    if t is np.ndarray and value.dtype == object:
        # Only ever read from python-blosc2's files (never accepted when set): kept as is.
        payload = {"values": [_native(v) for v in value.ravel().tolist()],
                   "shape": list(value.shape)}
        return msgpack.ExtType(NDARRAY_EXT, _packb(payload))
    return {MARKER: encode_typed(value)}


def pack(value: Any) -> bytes:
    """msgpack bytes of one attribute value.

    Raises
    ------
    UnstorableAttributeError
        A value carray does not store.
    """
    return _packb(_native(value))


def _walk(obj: Any) -> Any:
    t = type(obj)
    if t is list:
        if obj and type(obj[0]) is str and obj[0] == TUPLE_TAG:
            return tuple(_walk(v) for v in obj[1:])
        return [_walk(v) for v in obj]
    if t is dict:
        if len(obj) == 1 and MARKER in obj:
            return decode_typed(obj[MARKER])
        return {k: _walk(v) for k, v in obj.items()}
    return obj


def _ndarray(data: bytes) -> np.ndarray:
    payload = _walk(msgpack.unpackb(data, raw=False))
    if not isinstance(payload, dict) or not isinstance(payload.get("shape"), list):
        raise ValueError("numpy array extension without a shape")
    if "values" in payload:  # python-blosc2's object arrays: msgpack values, no pickle
        shape = checked_shape(payload["shape"], itemsize=8, source="attribute")
        values = [_walk(v) for v in payload["values"]]
        if len(values) != math.prod(shape):
            raise ValueError(f"{len(values)} values for an object array {list(shape)}")
        out = np.empty(len(values), object)
        for i, v in enumerate(values):
            out[i] = v
        return out.reshape(shape)
    spec = payload.get("dtype")
    if not isinstance(spec, dict):
        raise ValueError("numpy array extension without a dtype")
    if "str" in spec:
        dtype = parse_dtype(spec["str"])
    else:
        dtype = parse_dtype(np.lib.format.descr_to_dtype(_fields(spec.get("descr"))))
    shape = checked_shape(payload["shape"], itemsize=dtype.itemsize, source="attribute")
    raw = payload.get("data")
    if not isinstance(raw, bytes) or len(raw) != math.prod(shape) * dtype.itemsize:
        raise ValueError(f"numpy array extension: data is not {list(shape)} items of {dtype}")
    return np.frombuffer(raw, dtype).reshape(shape).copy()


def _fields(descr: Any) -> list:
    # numpy's descr with its tuples as tuples or lists: (name or (title, name), spec, shape?).
    if not isinstance(descr, list):
        raise ValueError(f"bad numpy descr {descr!r:.80}")
    out = []
    for field in descr:
        if not isinstance(field, (list, tuple)) or len(field) not in (2, 3):
            raise ValueError(f"bad numpy descr field {field!r:.80}")
        name, spec = field[0], field[1]
        item = (tuple(name) if isinstance(name, (list, tuple)) else name,
                _fields(spec) if isinstance(spec, list) else spec)
        out.append(item + ((tuple(field[2]),) if len(field) == 3 else ()))
    return out


def _ext(code: int, data: bytes) -> Any:
    try:
        if code == COMPLEX_EXT and len(data) == _COMPLEX.size:
            return complex(*_COMPLEX.unpack(data))
        if code == SET_EXT:
            return set(_walk(msgpack.unpackb(data, raw=False, ext_hook=_ext)))
        if code == NDARRAY_EXT:
            return _ndarray(data)
    except UnsafeDataError:
        raise
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        # Raised through msgpack's unpacker, told from its own errors by type.
        raise FormatError(f"extension {code}: {exc}"[:300]) from None
    return msgpack.ExtType(code, data)  # kept as it is (python-blosc2's own objects)


def unpack(data: bytes) -> Any:
    """Inverse of :func:`pack`; reads what python-blosc2 writes too.

    Bytes that are not exactly one msgpack object come back unchanged.

    Raises
    ------
    FormatError, UnsafeDataError
        A carray value or an extension that does not decode.
    """
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext)
    except (FormatError, UnsafeDataError):
        raise
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException):
        return data
    try:
        return _walk(obj)
    except RecursionError:
        raise ValueError("msgpack value nests too deep") from None
