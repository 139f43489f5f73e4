"""Attribute values: checked when set, and exact through every encoding (carray.attrs.values,
carray.attrs.pack) and in memory."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import struct
import zoneinfo

import numpy as np
import pytest
from attr_values import assert_same, attr_dicts, values
from hypothesis import example, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.attrs import pack as attrpack
from carray.attrs.values import (
    MARKER,
    decode_typed,
    display,
    encode_typed,
    float_from_json,
    float_to_json,
    from_json,
    normalise,
    to_json,
)
from carray.errors import FormatError, UnstorableAttributeError

FAST = settings(max_examples=120, deadline=None)


def _strict(obj) -> str:
    return json.dumps(obj, allow_nan=False)  # no NaN tokens: every form is valid JSON


@FAST
@given(values())
def test_normalise_keeps_every_value_exactly(value):
    assert_same(normalise("k", value), value)


@FAST
@given(values())
def test_typed_form_is_strict_json_and_exact(value):
    assert_same(decode_typed(json.loads(_strict(encode_typed(value)))), value)


@FAST
@given(values())
def test_plain_form_is_strict_json_and_exact(value):
    assert_same(from_json(json.loads(_strict(to_json(value)))), value)


@FAST
@given(values())
def test_msgpack_form_is_exact(value):
    assert_same(attrpack.unpack(attrpack.pack(value)), value)


plain_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=8)


@FAST
@given(plain_json)
def test_plain_json_values_stay_plain(value):
    assert to_json(value) == value and MARKER not in _strict(to_json(value))


@FAST
@given(attr_dicts())
@example({"0": np.str_("\x00")})  # str() drops a trailing NUL its dtype counts
def test_memory_carray_keeps_attributes_exactly(attrs):
    a = ca.carray(np.arange(3))
    a.attrs.update(attrs)
    for k, v in attrs.items():
        assert_same(a.attrs[k], v, k)
    assert_same(a.copy().attrs.getall(), attrs)


# -- floats as Zarr v3 writes fill values ---------------------------------------------------

@pytest.mark.parametrize("value, ftype, text", [
    (np.nan, np.float64, "NaN"), (np.inf, np.float32, "Infinity"),
    (-np.inf, np.float16, "-Infinity"), (-0.0, np.float64, -0.0), (1.5, np.float32, 1.5),
    (np.array(0x7FC00001, np.uint32).view(np.float32)[()], np.float32, "0x7fc00001"),
    (-np.float64(np.nan), np.float64, "0xfff8000000000000"),
])
def test_float_forms(value, ftype, text):
    out = float_to_json(value, ftype)
    assert out == text and type(out) is type(text)
    back = float_from_json(out, ftype)
    assert np.array(back).tobytes() == np.array(ftype(value)).tobytes()


def test_values_earlier_releases_wrote_still_read():
    nan64 = decode_typed({"type": "float", "value": "np.float64(nan)"})
    assert type(nan64) is np.float64 and np.isnan(nan64)
    assert decode_typed({"type": "float", "value": "np.float64(-inf)"}) == -np.inf
    assert np.isnan(decode_typed({"type": "float", "value": "nan"}))
    assert decode_typed({"type": "float", "value": "-inf"}) == -np.inf
    z = decode_typed({"type": "complex", "value": ["np.float64(1.0)", "np.float64(nan)"]})
    assert type(z) is np.complex128 and z.real == 1 and np.isnan(z.imag)
    assert decode_typed({"type": "complex", "value": ["1.0", "inf"]}) == complex(1, np.inf)
    old_nan = {"type": "scalar", "dtype": "<f8", "encoding": "base64", "value": "AAAAAAAA+H8="}
    assert np.isnan(decode_typed(old_nan))
    old_0d = decode_typed({"type": "array", "dtype": "<i4", "value": 7})
    assert old_0d.shape == () and old_0d.dtype == np.int32 and old_0d == 7
    assert decode_typed({"type": "scalar", "value": 23.5, "dtype": "float32"}) == 23.5


def test_bad_typed_values_are_errors():
    for bad in ({"type": "float", "value": "0x12"}, {"type": "int", "value": "1e3"},
                {"type": "nope"}, {"type": "scalar", "dtype": "<f4", "encoding": "base64",
                                   "value": "AAAA"},
                {"type": "array", "dtype": "<i2", "shape": [3], "encoding": "base64",
                 "value": "AAAA"}, {"type": "set", "value": [{"type": "list", "value": []}]}):
        with pytest.raises(ValueError):
            decode_typed(bad)
    with pytest.raises(ca.UnsafeDataError):
        decode_typed({"type": "scalar", "dtype": "|O", "value": 1})


def test_attribute_file_errors_name_the_file_and_key(tmp_path):
    import shutil

    data = pathlib.Path(__file__).parents[1] / "data" / "carray_v2" / "a1d.carray"
    shutil.copytree(data, tmp_path / "a")  # a directory of format 2: meta/attrs
    (tmp_path / "a" / "meta" / "attrs").write_text(
        json.dumps({"good": {"type": "int", "value": 1},
                    "bad": {"type": "float", "value": "not a float"}}))
    with pytest.raises(FormatError, match=r"meta/attrs.*'bad'"):
        ca.open(tmp_path / "a", mode="r").attrs.getall()


# -- refused when set --------------------------------------------------------------------------

class Thing:
    pass


UNSTORABLE = {
    "object": (object(), "object"),
    "lambda": (lambda: 1, "function"),
    "instance": (Thing(), "Thing"),
    "object array": (np.array([1, "a"], dtype=object), "dtype object"),
    "int keys": ({1: "a"}, "dict keys must be str, not int"),
    "nested": ([{"x": (1, object())}], "object"),
    "masked": (np.ma.masked_array([1, 2]), "MaskedArray"),
    "named zone": (dt.datetime(2020, 1, 1, tzinfo=zoneinfo.ZoneInfo("UTC")), "time zone"),
    "bytearray": (bytearray(b"x"), "bytearray"),
    "subclass": (type("Name", (str,), {})("x"), "Name"),
}


@pytest.mark.parametrize("key", list(UNSTORABLE))
def test_unstorable_values_are_refused_when_set(key):
    value, named = UNSTORABLE[key]
    a = ca.carray(np.arange(3))
    a.attrs["kept"] = 1
    with pytest.raises(UnstorableAttributeError, match=named) as err:
        a.attrs[key] = value
    assert isinstance(err.value, TypeError) and repr(key) in str(err.value)
    with pytest.raises(UnstorableAttributeError):
        a.attrs.update({"fine": 2, key: value})
    assert a.attrs.getall() == {"kept": 1}  # nothing changed, not even "fine"


def test_unstorable_names_and_depths_are_refused():
    a = ca.carray(np.arange(3))
    for name in (1, None, "\ud800"):
        with pytest.raises(UnstorableAttributeError, match="name"):
            a.attrs[name] = 1
    deep: list = []
    for _ in range(30):
        deep = [deep]
    with pytest.raises(UnstorableAttributeError, match="nest"):
        a.attrs["deep"] = deep
    looped: list = []
    looped.append(looped)
    with pytest.raises(UnstorableAttributeError, match="nest"):
        a.attrs["loop"] = looped
    assert a.attrs.getall() == {}


def test_lone_surrogates_in_values_round_trip():
    for value in ("a\ud800b", np.str_("\udfff"), ["\ud800"]):
        assert_same(attrpack.unpack(attrpack.pack(value)), value)
        assert_same(from_json(json.loads(json.dumps(to_json(value)))), value)


# -- text for people ----------------------------------------------------------------------------

def test_display():
    assert display(np.float64("nan")) == "nan" and display(float("-inf")) == "-inf"
    assert display(np.complex128(1 + 2j)) == "(1+2j)" and display(1 + 2j) == "(1+2j)"
    assert display(np.datetime64("2020-01-01T00:00")) == "2020-01-01T00:00"
    assert display("counts") == '"counts"' and display([1, 2]) == "[1, 2]"
    assert display({"a": np.float32(1.5), "b": (1,)}) == '{"a": 1.5, "b": (1,)}'
    assert display(np.arange(3, dtype="i2")) == "[0, 1, 2] (int16)"
    assert display(dt.date(2020, 1, 2)) == "2020-01-02" and display(b"x") == "b'x'"
    assert display(np.str_("x")) == '"x"'


def test_float_bits_survive_python_floats():
    snan = struct.unpack("<d", (0x7FF0000000000001).to_bytes(8, "little"))[0]
    assert struct.pack("<d", normalise("k", snan)) == struct.pack("<d", snan)
