"""Attribute values: which ones carray stores, checked when set, and their JSON forms.

An attribute value is ``None``, a bool, int, float, complex, str or bytes, a
``datetime``/``date``/``time``/``timedelta``, a numpy scalar or array of a
fixed-size dtype, or a list, tuple, set, frozenset or str-keyed dict of these.
Anything else is refused by :func:`normalise` when the attribute is set.

Two JSON forms keep every such value exactly (same type, dtype and bits),
described in docs/formats/attributes.md, "The typed form":

* the *typed* form (:func:`encode_typed`), every value an object naming its
  type, as in superchunk ``meta/attrs``;
* the *plain* form (:func:`to_json`): values JSON holds exactly are written as
  themselves, anything else as ``{"__carray__": <typed form>}``, for files other
  programs read too (bcolz ``__attrs__``, Zarr attributes, ds headers).

Floats a JSON number cannot hold are written as Zarr v3 writes fill values:
``"NaN"``, ``"Infinity"``, ``"-Infinity"``, or ``"0x"`` and the hex digits of
their bits (a NaN other than the default one).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from carray.core.dtypes import FIXED_KINDS, checked_dtype, checked_shape
from carray.core.safejson import MAX_DEPTH, json_depth
from carray.errors import FormatError, UnsafeDataError, UnstorableAttributeError

#: The key of the one-entry object that marks a typed value inside the plain form.
MARKER = "__carray__"
#: Most containers nested in one another inside one value.
MAX_NESTING = 20
#: Integers beyond msgpack's range are written as decimal text.
_INT_RANGE = (-(2**63), 2**64)
_UINTS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_HALF: dict[int, type] = {8: np.float32, 16: np.float64}  # complex -> its parts


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def utf8_text(text: str) -> bool:
    """Whether UTF-8 can hold ``text`` (it has no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        return False
    return True


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"base64 text expected, got {text!r:.80}")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"bad base64 text: {exc}") from None


# -- names and values set by users -----------------------------------------------------------

def check_name(name: Any) -> str:
    """An attribute name: a str that UTF-8 can hold.

    Raises
    ------
    UnstorableAttributeError
        Not a str, or holding lone surrogates.
    """
    if type(name) is not str and not isinstance(name, np.str_):
        raise UnstorableAttributeError(
            f"attribute names must be str, not {_type_name(name)} ({name!r:.80})")
    if not utf8_text(name):
        raise UnstorableAttributeError(
            f"attribute name {name!r:.80} is not valid Unicode (lone surrogates)")
    return str(name)


def normalise(name: Any, value: Any) -> Any:
    """``value`` as it will read back: checked, and copied through its typed form.

    Raises
    ------
    UnstorableAttributeError
        The name or the value cannot be stored exactly; the message names the
        attribute and the type refused.
    """
    name = check_name(name)
    try:
        entry = encode_typed(value)
    except UnstorableAttributeError as exc:
        raise UnstorableAttributeError(f"attribute {name!r}: {exc}") from None
    # Files are read with a bound on nesting; what would not read back is refused now.
    depth = json_depth(json.dumps(entry))
    if depth >= MAX_DEPTH:
        raise UnstorableAttributeError(
            f"attribute {name!r}: the value nests {depth} levels deep when "
            f"stored (at most {MAX_DEPTH - 1})")
    return decode_typed(entry)


# -- floats ------------------------------------------------------------------------------------

def _default_nan_bits(ftype: type) -> int:
    return int(np.array(np.nan, ftype).view(_UINTS[np.dtype(ftype).itemsize]))


_NAN_BITS: dict[type, int] = {t: _default_nan_bits(t)
                              for t in (np.float16, np.float32, np.float64)}


def float_to_json(x: Any, ftype: type = np.float64) -> float | str:
    """A float of type ``ftype`` (2, 4 or 8 bytes) as a JSON number or Zarr v3 text."""
    x = ftype(x)
    if np.isfinite(x):
        return float(x)
    if np.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    size = np.dtype(ftype).itemsize
    bits = int(np.array(x).view(_UINTS[size]))
    return "NaN" if bits == _NAN_BITS[ftype] else f"0x{bits:0{2 * size}x}"


def float_from_json(v: Any, ftype: type = np.float64) -> Any:
    """Inverse of :func:`float_to_json`, also reading the repr text earlier releases
    wrote (``"nan"``, ``"-inf"``, ``"np.float64(nan)"``); a numpy scalar of ``ftype``."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        x = float(v)
        if math.isfinite(x) and abs(x) > float(np.finfo(ftype).max):
            raise ValueError(f"{v!r:.40} is out of range for {np.dtype(ftype)}")
        return ftype(x)
    if not isinstance(v, str) or len(v) > 64:
        raise ValueError(f"not a float: {v!r:.80}")
    named = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}
    if v in named:
        return ftype(named[v])
    size = np.dtype(ftype).itemsize
    if v.startswith("0x"):
        if len(v) != 2 + 2 * size:
            raise ValueError(f"{v!r} is not the bits of a {np.dtype(ftype)}")
        return np.array(int(v, 16), _UINTS[size]).view(ftype)[()]
    if v.startswith("np.float64(") and v.endswith(")"):  # repr written by earlier releases
        v = v[len("np.float64("):-1]
    return ftype(float(v))


def _legacy_np(v: Any) -> bool:
    return isinstance(v, str) and v.startswith("np.float64(")


# -- numpy scalars and arrays ---------------------------------------------------------------

def _descr(dtype: np.dtype) -> Any:
    return np.lib.format.dtype_to_descr(dtype)


def _checked(dtype: np.dtype) -> np.dtype:
    if dtype.hasobject or dtype.kind not in FIXED_KINDS:
        raise UnstorableAttributeError(
            f"numpy values of dtype {dtype} cannot be stored (only fixed-size "
            "items: no objects)")
    return dtype


def _full_text(x: np.generic) -> str:
    """A text scalar's characters, trailing NULs included (``str(x)`` drops them; its
    dtype counts them)."""
    raw = x.tobytes()[:x.dtype.itemsize]  # an empty one gives one NUL
    return raw.decode("utf-32-le" if sys.byteorder == "little" else "utf-32-be",
                      "surrogatepass")


def _scalar_entry(x: np.generic) -> dict[str, Any]:
    dtype = _checked(x.dtype)
    entry: dict[str, Any] = {"type": "scalar", "dtype": _descr(dtype)}
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        entry["value"] = bool(x)
    elif kind in "iu":
        entry["value"] = int(x)
    elif kind == "f" and size <= 8:
        entry["value"] = float_to_json(x, dtype.type)
    elif kind == "c" and size <= 16:
        part = _HALF[size]
        entry["value"] = [float_to_json(x.real, part), float_to_json(x.imag, part)]
    elif kind in "Mm":
        entry["value"] = int(np.array(x).view(np.int64))
    elif kind == "U" and utf8_text(_full_text(x)):
        entry["value"] = _full_text(x)
    else:  # float128, complex256, bytes, records, raw void; text with lone surrogates
        raw = x.tobytes()[:size]  # an empty bytes_ gives one byte
        entry["encoding"], entry["value"] = "base64", _b64(raw)
    return entry


def _listable(arr: np.ndarray) -> bool:
    # Nested JSON lists are readable, but exact only for these items.
    if arr.dtype.kind in "biu":
        return True
    return arr.dtype.kind == "f" and arr.dtype.itemsize <= 8 and bool(np.isfinite(arr).all())


def _array_entry(arr: np.ndarray) -> dict[str, Any]:
    if type(arr) is not np.ndarray:
        raise UnstorableAttributeError(
            f"values of type {_type_name(arr)} cannot be stored (numpy.ndarray "
            "subclasses would read back as plain arrays)")
    dtype = _checked(arr.dtype)
    entry: dict[str, Any] = {"type": "array", "dtype": _descr(dtype), "shape": list(arr.shape)}
    if _listable(arr):
        entry["value"] = arr.tolist()
    else:
        entry["encoding"], entry["value"] = "base64", _b64(arr.tobytes())
    return entry


def parse_dtype(descr: Any) -> np.dtype:
    """A dtype stored with an attribute: never objects, never absurd sizes."""
    return checked_dtype(descr, source="attribute", allow_empty=True)


def _native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=") if dtype.byteorder in "<>" else dtype


def _scalar_value(entry: dict[str, Any]) -> Any:
    dtype, value = parse_dtype(entry.get("dtype")), entry.get("value")
    kind = dtype.kind
    if entry.get("encoding") == "base64":
        raw = _unb64(value)
        if kind == "S":
            return np.bytes_(raw)
        if len(raw) != dtype.itemsize:
            raise ValueError(f"{len(raw)} bytes for one item of {dtype}")
        return np.frombuffer(raw, dtype).reshape(())[()]
    if kind == "b" and isinstance(value, bool):
        return np.bool_(value)
    if kind in "iu" and type(value) is int:
        return np.array(value, dtype)[()]
    if kind == "f" and dtype.itemsize <= 8:
        return float_from_json(value, _native(dtype).type)
    if kind == "c" and dtype.itemsize <= 16 and isinstance(value, list) and len(value) == 2:
        out = np.zeros((), _native(dtype))
        part = _HALF[dtype.itemsize]
        out.real, out.imag = float_from_json(value[0], part), float_from_json(value[1], part)
        return out[()]
    if kind in "Mm" and type(value) is int:
        return np.array(value, np.int64).view(_native(dtype))[()]
    if kind == "U" and isinstance(value, str):
        return np.str_(value)
    raise ValueError(f"scalar of dtype {dtype} holds {value!r:.80}")


def _array_value(entry: dict[str, Any]) -> np.ndarray:
    dtype, value = parse_dtype(entry.get("dtype")), entry.get("value")
    shape = checked_shape(entry.get("shape", []), itemsize=dtype.itemsize, source="attribute")
    if entry.get("encoding") == "base64":
        raw = _unb64(value)
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"{len(raw)} bytes for an array {list(shape)} of {dtype}")
        return np.frombuffer(raw, dtype).reshape(shape).copy()
    # Only numbers are stored as JSON lists, so a list allocates about its own size.
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise ValueError(f"array of dtype {dtype} stored as a JSON list")
    try:
        arr = np.array(value, dtype=dtype)
    except (OverflowError, TypeError) as exc:
        raise ValueError(f"array value does not fit {dtype}: {exc}") from None
    if "shape" in entry and arr.shape != shape:
        arr = arr.reshape(shape)
    return arr


# -- the typed form -------------------------------------------------------------------------

def _int_entry(v: int) -> dict[str, Any]:
    if _INT_RANGE[0] <= v < _INT_RANGE[1]:
        return {"type": "int", "value": v}
    try:
        return {"type": "int", "value": str(v)}
    except ValueError as exc:  # more digits than Python converts
        raise UnstorableAttributeError(
            f"int of {v.bit_length()} bits cannot be stored: {exc}") from None


def _str_entry(v: str) -> dict[str, Any]:
    if utf8_text(v):
        return {"type": "string", "value": v}
    return {"type": "string", "encoding": "base64",
            "value": _b64(v.encode("utf-8", "surrogatepass"))}


def _tz_checked(v: dt.datetime | dt.time) -> None:
    # Only a fixed offset without a name survives ISO text.
    tz = v.tzinfo
    if tz is None:
        return
    offset = v.utcoffset()
    if type(tz) is not dt.timezone or offset is None or tz != dt.timezone(offset) \
            or tz.tzname(None) != dt.timezone(offset).tzname(None):
        raise UnstorableAttributeError(
            f"{_type_name(v)} with time zone {tz!r:.60} cannot be stored exactly "
            "(only datetime.timezone offsets without a name)")


def _iso_entry(kind: str, v: Any) -> dict[str, Any]:
    if kind == "date":
        return {"type": kind, "value": v.isoformat()}
    _tz_checked(v)
    # The offset apart: Python 3.11 reads "+00:00:00.000001" back as UTC.
    entry: dict[str, Any] = {"type": kind, "value": v.replace(tzinfo=None).isoformat()}
    offset = v.utcoffset()
    if offset is not None:
        entry["utcoffset"] = [offset.days, offset.seconds, offset.microseconds]
    if v.fold:
        entry["fold"] = 1
    return entry


_SIMPLE: dict[type, Callable[[Any], dict[str, Any]]] = {
    type(None): lambda v: {"type": "none", "value": None},
    bool: lambda v: {"type": "bool", "value": v},
    int: _int_entry,
    float: lambda v: {"type": "float", "value": float_to_json(v)},
    complex: lambda v: {"type": "complex",
                        "value": [float_to_json(v.real), float_to_json(v.imag)]},
    str: _str_entry,
    bytes: lambda v: {"type": "bytes", "value": _b64(v)},
    dt.datetime: lambda v: _iso_entry("datetime", v),
    dt.date: lambda v: _iso_entry("date", v),
    dt.time: lambda v: _iso_entry("time", v),
    dt.timedelta: lambda v: {"type": "timedelta",
                             "value": [v.days, v.seconds, v.microseconds]},
}
_SEQUENCES: dict[type, str] = {
    list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


def encode_typed(value: Any, _depth: int = 0) -> dict[str, Any]:
    """One attribute value in the typed form (JSON-able, and msgpack-able).

    Raises
    ------
    UnstorableAttributeError
        A value of a type carray does not store, an object array, a dict with
        keys that are not str, or containers nested deeper than :data:`MAX_NESTING`.
    """
    if isinstance(value, np.generic):  # before the builtins: np.float64 is a float
        return _scalar_entry(value)
    if isinstance(value, np.ndarray):
        return _array_entry(value)
    simple = _SIMPLE.get(type(value))
    if simple is not None:
        return simple(value)
    kind = _SEQUENCES.get(type(value))
    if kind is None and type(value) is not dict:
        raise UnstorableAttributeError(f"values of type {_type_name(value)} cannot be stored")
    if _depth >= MAX_NESTING:
        raise UnstorableAttributeError(f"containers nest deeper than {MAX_NESTING} levels")
    if kind is not None:
        return {"type": kind, "value": [encode_typed(v, _depth + 1) for v in value]}
    for k in value:
        if type(k) is not str:
            raise UnstorableAttributeError(
                f"dict keys must be str, not {_type_name(k)} ({k!r:.60})")
        if not utf8_text(k):
            raise UnstorableAttributeError(
                f"dict key {k!r:.60} is not valid Unicode (lone surrogates)")
    return {"type": "dict", "value": {k: encode_typed(v, _depth + 1) for k, v in value.items()}}


def _iso_value(kind: str, entry: dict[str, Any]) -> Any:
    text = entry.get("value")
    if not isinstance(text, str) or len(text) > 64:
        raise ValueError(f"{kind} attribute holds {text!r:.80}")
    parsers: dict[str, Callable[[str], Any]] = {
        "datetime": dt.datetime.fromisoformat, "date": dt.date.fromisoformat,
        "time": dt.time.fromisoformat}
    out = parsers[kind](text)
    if "utcoffset" in entry:
        out = out.replace(tzinfo=dt.timezone(_timedelta_value(entry["utcoffset"])))
    fold = entry.get("fold", 0)
    if fold not in (0, 1) or isinstance(fold, bool):
        raise ValueError(f"bad fold {fold!r:.20}")
    return out.replace(fold=1) if fold else out


def _float_value(value: Any) -> Any:
    x = float_from_json(value)
    return x if _legacy_np(value) else float(x)


def _complex_value(value: Any) -> Any:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"complex attribute holds {value!r:.80}")
    z = complex(float_from_json(value[0]), float_from_json(value[1]))
    return np.complex128(z) if any(_legacy_np(v) for v in value) else z


def _int_value(value: Any) -> int:
    if type(value) is int:
        return value
    if isinstance(value, str) and 0 < len(value) <= 4300 and value.lstrip("-").isdigit():
        return int(value)
    raise ValueError(f"int attribute holds {value!r:.80}")


def _string_value(entry: dict[str, Any]) -> str:
    value = entry.get("value")
    if entry.get("encoding") == "base64":
        return _unb64(value).decode("utf-8", "surrogatepass")
    if not isinstance(value, str):
        raise ValueError(f"string attribute holds {value!r:.80}")
    return value


def _timedelta_value(value: Any) -> dt.timedelta:
    if not isinstance(value, list) or len(value) != 3 or \
            not all(type(v) is int for v in value):
        raise ValueError(f"timedelta attribute holds {value!r:.80}")
    return dt.timedelta(days=value[0], seconds=value[1], microseconds=value[2])


def _bool_value(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"bool attribute holds {value!r:.80}")
    return value


_DECODERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "none": lambda e: None,
    "bool": lambda e: _bool_value(e.get("value")),
    "int": lambda e: _int_value(e.get("value")),
    "float": lambda e: _float_value(e.get("value")),
    "complex": lambda e: _complex_value(e.get("value")),
    "string": _string_value,
    "bytes": lambda e: _unb64(e.get("value")),
    "datetime": lambda e: _iso_value("datetime", e),
    "date": lambda e: _iso_value("date", e),
    "time": lambda e: _iso_value("time", e),
    "timedelta": lambda e: _timedelta_value(e.get("value")),
    "scalar": _scalar_value,
    "array": _array_value,
}
_CONTAINERS: dict[str, Callable[[list], Any]] = {
    "list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def decode_typed(entry: Any) -> Any:
    """Inverse of :func:`encode_typed`; also reads what earlier releases wrote.

    Raises
    ------
    ValueError
        ``entry`` is not a typed value (FormatError for a bad dtype).
    UnsafeDataError
        A dtype holding Python objects.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise ValueError(f"not a typed attribute: {entry!r:.80}")
    kind, value = entry["type"], entry.get("value")
    decoder = _DECODERS.get(kind)
    try:
        if decoder is not None:
            return decoder(entry)
    except UnsafeDataError:
        raise
    except (OverflowError, TypeError) as exc:
        raise ValueError(f"{kind} attribute holds {value!r:.80}: {exc}") from None
    if kind in _CONTAINERS:
        if not isinstance(value, list):
            raise ValueError(f"{kind} attribute holds {value!r:.80}")
        try:
            return _CONTAINERS[kind]([decode_typed(v) for v in value])
        except TypeError as exc:  # a set of unhashable items
            raise ValueError(f"{kind} attribute: {exc}") from None
    if kind == "dict":
        if not isinstance(value, dict):
            raise ValueError(f"dict attribute holds {value!r:.80}")
        return {k: decode_typed(v) for k, v in value.items()}
    raise ValueError(f"unknown attribute type {kind!r:.40}")


# -- the plain form -------------------------------------------------------------------------

def to_json(value: Any) -> Any:
    """``value`` (checked by :func:`normalise`) as plain JSON where that is exact, the
    typed form under :data:`MARKER` where it is not."""
    t = type(value)
    if value is None or t in (bool, int, str) or (t is float and math.isfinite(value)):
        return value
    if t is list:
        return [to_json(v) for v in value]
    if t is dict and (len(value) != 1 or MARKER not in value):
        return {k: to_json(v) for k, v in value.items()}
    return {MARKER: encode_typed(value)}


def from_json(obj: Any) -> Any:
    """Inverse of :func:`to_json`; any other JSON value reads as itself.

    Raises
    ------
    ValueError, UnsafeDataError
        A marked value that is not a typed value (see :func:`decode_typed`).
    """
    if type(obj) is list:
        return [from_json(v) for v in obj]
    if type(obj) is dict:
        if len(obj) == 1 and MARKER in obj:
            return decode_typed(obj[MARKER])
        return {k: from_json(v) for k, v in obj.items()}
    return obj


def _load(obj: dict, source: str, decode: Callable[[Any], Any]) -> dict[str, Any]:
    out = {}
    for key, value in obj.items():
        try:
            out[key] = decode(value)
        except UnsafeDataError as exc:
            raise UnsafeDataError(f"{source}: attribute {key!r}: {exc}") from None
        except (ValueError, TypeError, KeyError, IndexError, OverflowError,
                RecursionError) as exc:
            raise FormatError(f"bad attribute {key!r}: {exc}"[:400], source) from None
    return out


def load_typed(obj: dict, source: str) -> dict[str, Any]:
    """Attributes from their typed form; errors name ``source`` and the attribute."""
    return _load(obj, source, decode_typed)


def load_plain(obj: dict, source: str) -> dict[str, Any]:
    """Attributes from their plain form; errors name ``source`` and the attribute."""
    return _load(obj, source, from_json)


# -- text for people ------------------------------------------------------------------------

def display(value: Any) -> str:
    """``value`` as one readable line: plain JSON values as JSON, numpy scalars as their
    value (``nan``, ``(1+2j)``, ``2020-01-01T00:00``), containers item by item."""
    t = type(value)
    if value is None or t in (bool, int, str) or (t is float and math.isfinite(value)):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, np.generic):
        if isinstance(value, (np.str_, np.bytes_)):
            return display(value.item())
        return str(value)
    if isinstance(value, np.ndarray):
        text = np.array2string(value, separator=", ", threshold=50)
        return f"{text} ({value.dtype})"
    if t in (dt.datetime, dt.date, dt.time):
        return value.isoformat()
    if t in (list, tuple, set, frozenset):
        items = [display(v) for v in value]
        if t is tuple:
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if t is list:
            return f"[{', '.join(items)}]"
        return f"{t.__name__}({{{', '.join(items)}}})" if items else f"{t.__name__}()"
    if t is dict:
        inner = ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {display(v)}"
                          for k, v in value.items())
        return f"{{{inner}}}"
    return repr(value) if t in (float, complex, bytes) else str(value)
