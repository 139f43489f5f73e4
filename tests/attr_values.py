"""Hypothesis strategies for attribute values, and an exact comparison.

``values()`` draws every kind of value carray stores as an attribute: Python and
numpy scalars of every kind (floats from raw bit patterns, so NaN payloads, signs
and infinities come up), datetimes, numpy arrays of those kinds and byte orders,
and lists, tuples, dicts and sets of them.  ``assert_same`` checks type, dtype
and bits, not ``==``.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

UNITS = ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"]
HAS_LONGDOUBLE = np.dtype(np.longdouble).itemsize > 8
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _float_bits(ftype: type) -> st.SearchStrategy:
    size = np.dtype(ftype).itemsize
    nan = int(np.array(np.nan, ftype).view(_UINT[size]))
    inf = int(np.array(np.inf, ftype).view(_UINT[size]))
    special = st.sampled_from([nan, inf, inf | (1 << (8 * size - 1)), 1 << (8 * size - 1),
                               nan | 1, inf | 1, nan | (1 << (8 * size - 1))])
    bits = special | st.integers(0, 2 ** (8 * size) - 1)
    return bits.map(lambda b: np.array(b, _UINT[size]).view(ftype)[()])


def _complex(ctype: type, part: type) -> st.SearchStrategy:
    def make(parts: tuple) -> Any:
        out = np.zeros((), ctype)
        out.real, out.imag = parts
        return out[()]
    return st.tuples(_float_bits(part), _float_bits(part)).map(make)


def _dates(kind: str) -> st.SearchStrategy:
    # Every int64 (NaT is the smallest) in every unit.
    return st.tuples(st.integers(-(2**63), 2**63 - 1), st.sampled_from(UNITS)).map(
        lambda p: np.array(p[0], np.int64).view(f"{kind}8[{p[1]}]")[()])


_offsets = st.timedeltas(min_value=dt.timedelta(hours=-23, minutes=-59),
                         max_value=dt.timedelta(hours=23, minutes=59))
timezones = st.none() | st.just(dt.UTC) | _offsets.map(dt.timezone)


def numpy_scalars() -> st.SearchStrategy:
    ints = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
    out = st.booleans().map(np.bool_) | st.one_of(*(hnp.from_dtype(np.dtype(t)) for t in ints))
    out |= st.one_of(*(_float_bits(t) for t in (np.float16, np.float32, np.float64)))
    out |= _complex(np.complex64, np.float32) | _complex(np.complex128, np.float64)
    out |= _dates("M") | _dates("m")
    out |= st.text(max_size=6).map(np.str_) | st.binary(max_size=6).map(np.bytes_)
    if HAS_LONGDOUBLE:
        out |= st.floats().map(np.longdouble)
        out |= st.tuples(st.floats(), st.floats()).map(
            lambda p: np.clongdouble(complex(*p)))
    return out


def python_scalars() -> st.SearchStrategy:
    return (st.none() | st.booleans() | st.integers() | st.integers(-(2**200), 2**200)
            | _float_bits(np.float64).map(float) | st.floats()
            | st.tuples(_float_bits(np.float64), _float_bits(np.float64)).map(
                lambda p: complex(float(p[0]), float(p[1])))
            | st.text(max_size=8) | st.binary(max_size=8)
            | st.datetimes(timezones=timezones) | st.dates()
            | st.times(timezones=timezones) | st.timedeltas())


ARRAY_DTYPES = ["i1", "<i2", ">i4", "<i8", ">u2", "<u8", "<f2", ">f4", "<f8", ">f8",
                "<c8", ">c16", "<M8[s]", ">M8[ns]", "<m8[D]", "<U3", "|S3", "|V4"]


def numpy_arrays() -> st.SearchStrategy:
    shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
    any_bits = st.sampled_from(ARRAY_DTYPES).flatmap(
        lambda d: hnp.arrays(np.uint8, shapes.map(lambda s: (*s, np.dtype(d).itemsize)))
        .map(lambda raw, d=d: raw.view(d).reshape(raw.shape[:-1])))
    plain = st.sampled_from(["?", "i4", "f8", "u1"]).flatmap(
        lambda d: hnp.arrays(d, shapes))
    return any_bits | plain


def leaves() -> st.SearchStrategy:
    return python_scalars() | numpy_scalars() | numpy_arrays()


def _hashables() -> st.SearchStrategy:
    return st.integers() | st.text(max_size=4) | st.binary(max_size=4) | st.none()


def values(max_leaves: int = 6) -> st.SearchStrategy:
    """Any attribute value: leaves, and containers of them (the marker key and the
    tuple tag of other formats included, as data)."""
    keys = st.text(max_size=5) | st.sampled_from(["__carray__", "type", "value", "__tuple__"])

    def nest(children: st.SearchStrategy) -> st.SearchStrategy:
        return (st.lists(children, max_size=3)
                | st.lists(children, max_size=3).map(tuple)
                | st.dictionaries(keys, children, max_size=3)
                | children.map(lambda v: {"__carray__": v})
                | st.lists(children, max_size=2).map(lambda r: ["__tuple__", *r]))

    sets = st.sets(_hashables(), max_size=3) | st.frozensets(_hashables(), max_size=3)
    return st.recursive(leaves() | sets, nest, max_leaves=max_leaves)


def names(max_size: int = 7) -> st.SearchStrategy:
    """Attribute names (c-blosc2 allows 31 bytes: 7 characters of up to 4)."""
    return st.text(min_size=1, max_size=max_size)


def attr_dicts(max_size: int = 4) -> st.SearchStrategy:
    return st.dictionaries(names(), values(), max_size=max_size)


def json_values(max_leaves: int = 6) -> st.SearchStrategy:
    """Attribute values JSON has a form for (bcolz, Zarr and ds attributes): numbers,
    bools, text and None, as Python or numpy scalars and arrays, in lists, tuples and
    str-keyed dicts."""
    ints = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
    scalars = (st.none() | st.booleans() | st.integers() | st.integers(-(2**200), 2**200)
               | _float_bits(np.float64).map(float) | st.text(max_size=8)
               | st.booleans().map(np.bool_)
               | st.one_of(*(hnp.from_dtype(np.dtype(t)) for t in ints))
               | st.one_of(*(_float_bits(t) for t in (np.float16, np.float32, np.float64)))
               | st.text(max_size=6).map(np.str_))
    shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
    arrays = st.sampled_from(["?", "<i4", ">u2", "<f4", ">f8", "<U3"]).flatmap(
        lambda d: hnp.arrays(d, shapes))
    keys = st.text(max_size=5) | st.sampled_from(["__carray__", "type", "value"])
    return st.recursive(scalars | arrays, lambda children: (
        st.lists(children, max_size=3) | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(keys, children, max_size=3)), max_leaves=max_leaves)


def json_attr_dicts(max_size: int = 4) -> st.SearchStrategy:
    return st.dictionaries(names(), json_values(), max_size=max_size)


# -- exact comparison -----------------------------------------------------------------------

def _bits(arr: np.ndarray) -> bytes:
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    kind, size = arr.dtype.kind, arr.dtype.itemsize
    parts = 2 if kind == "c" else 1
    if kind in "fc" and size // parts > 8 and np.finfo(np.longdouble).nmant == 63:
        # x87 extended precision: 10 bytes of value, the rest padding never compared.
        raw = raw.reshape(-1, size // parts)[:, :10]
    return raw.tobytes()


def assert_same(got: Any, want: Any, where: str = "value") -> None:
    """``got`` is ``want``: same type, same dtype, same bits, container by container."""
    assert type(got) is type(want), f"{where}: {type(got)} is not {type(want)}"
    if isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} is not {want.dtype}"
        assert np.shape(got) == np.shape(want), f"{where}: shape"
        if want.dtype.kind == "S" and isinstance(want, np.generic):
            assert got.tobytes() == want.tobytes(), f"{where}: {got!r} != {want!r}"
        elif want.dtype.kind == "U" and isinstance(want, np.generic):
            assert str.__eq__(got, want), f"{where}: {got!r} != {want!r}"
        else:
            assert _bits(np.asarray(got)) == _bits(np.asarray(want)), \
                f"{where}: {got!r} != {want!r}"
    elif isinstance(want, float):
        assert struct.pack("<d", got) == struct.pack("<d", want), f"{where}: {got!r}"
    elif isinstance(want, complex):
        assert_same(got.real, want.real, where)
        assert_same(got.imag, want.imag, where)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{where}: length"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, (dt.datetime, dt.time)):
        assert got == want and got.fold == want.fold, f"{where}: {got!r} != {want!r}"
        assert got.tzinfo == want.tzinfo and got.tzname() == want.tzname(), f"{where}: tz"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"
