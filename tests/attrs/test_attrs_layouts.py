"""Attributes round-trip exactly in every layout and container, are refused when set, and
stay readable by python-blosc2 and bcolz."""

from __future__ import annotations

import datetime as dt
import json
import os
import pathlib

import numpy as np
import pytest
from attr_values import assert_same, attr_dicts, json_attr_dicts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.errors import UnstorableAttributeError
from carray.layouts.b2nd.digests import RECORD_NAME

blosc2 = pytest.importorskip("blosc2", reason="blosc2 is a test dependency")

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
ARRAYS = {"superchunk": "a.carray", "bcolz": "a.bcolz", "b2nd": "a.b2nd"}

#: One of every kind (16 entries: a b2nd frame holds no more), for the tests that are
#: not property tests.
RICH = {
    "_FillValue": np.float64("nan"), "inf": np.inf, "ninf": -np.float32("inf"),
    "z": np.complex128(1 + 2j), "z8": np.complex64(complex(np.nan, -0.0)), "pz": 3 - 1j,
    "f16": np.float16(0.1), "ints": [np.uint64(2**64 - 1), np.bool_(True), 2**100],
    "when": np.datetime64("2020-01-01T00:00"), "nat": np.datetime64("NaT", "ns"),
    "span": np.timedelta64(-5, "ps"), "py": dt.datetime(2020, 1, 2, 3, 4, 5, 6),
    "dates": (dt.date(1, 1, 1), dt.timedelta(days=-1, microseconds=3)),
    "nested": {"t": (1, [np.int8(-3), None]), "s": {"x"}, "raw": b"\x00\xff"},
    "arr": np.arange(6, dtype=">i2").reshape(2, 3), "text": np.str_("é"),
}
#: The values of RICH bcolz's JSON has a form for.
RICH_JSON = {k: RICH[k] for k in ("_FillValue", "inf", "ninf", "f16", "ints", "arr", "text")}


def _strategy(fmt: str):
    """Attribute dicts of every kind, or of the kinds JSON holds for bcolz."""
    return json_attr_dicts if fmt == "bcolz" else attr_dicts


def _open(path, mode):
    return ca.open(path, mode=mode)


def _set(path, attrs):
    a = _open(path, "a")
    for k in list(a.attrs):
        del a.attrs[k]
    a.attrs.update(attrs)
    a.close()


def _get(path) -> dict:
    a = _open(path, "r")
    try:
        return a.attrs.getall()
    finally:
        a.close()


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    root = tmp_path_factory.mktemp("attrs")
    out = {}
    for fmt, name in ARRAYS.items():
        ca.carray(np.arange(10.0), rootdir=root / name, mode="w", format=fmt).close()
        out[fmt] = root / name
    return out


@pytest.mark.parametrize("fmt", list(ARRAYS))
@SETTINGS
@given(data=st.data())
def test_array_attributes_round_trip(arrays, fmt, data):
    attrs = data.draw(_strategy(fmt)())
    _set(arrays[fmt], attrs)
    assert_same(_get(arrays[fmt]), attrs)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    out = {}
    for fmt in ("bcolz", "superchunk"):
        t = ca.ctable({"x": np.arange(4), "s": np.array(["a", "bb", "", "c"], dtype=object)},
                      rootdir=root / f"t_{fmt}", mode="w", format=fmt)
        t.close()
        out[fmt] = root / f"t_{fmt}"
    return out


@pytest.mark.parametrize("fmt", ["bcolz", "superchunk"])
@SETTINGS
@given(data=st.data())
def test_table_and_column_attributes_round_trip(tables, fmt, data):
    attrs = data.draw(_strategy(fmt)(max_size=3))
    col_attrs = data.draw(_strategy(fmt)(max_size=2))
    t = ca.open(tables[fmt], mode="a")
    t.attrs.update(attrs)
    for name in ("x", "s"):
        t.cols[name].attrs.update(col_attrs)
    t.close()
    t = ca.open(tables[fmt], mode="r")
    try:
        got = t.attrs.getall()
        assert_same({k: got[k] for k in attrs}, attrs)
        for name in ("x", "s"):
            got = t.cols[name].attrs.getall()
            assert_same({k: got[k] for k in col_attrs}, col_attrs, name)
    finally:
        t.close()


@pytest.mark.parametrize("fmt", list(ARRAYS))
def test_every_kind_round_trips_and_copies(tmp_path, fmt):
    path = tmp_path / ARRAYS[fmt]
    rich = RICH_JSON if fmt == "bcolz" else RICH
    a = ca.carray(np.arange(10.0), rootdir=path, mode="w", format=fmt)
    a.attrs.update(rich)
    a.close()
    assert_same(_get(path), rich)
    with ca.open(path, mode="r") as a:
        assert_same(a.copy().attrs.getall(), rich)
        other = "superchunk" if fmt == "b2nd" else "b2nd"
        target = tmp_path / ARRAYS[other]
        assert_same(a.copy(rootdir=target, mode="w", format=other).attrs.getall(), rich)
    assert_same(_get(target), rich)


def test_nan_fill_value_reproducer(tmp_path):
    # Every float64 CF variable carries one; earlier releases wrote "np.float64(nan)".
    a = ca.carray(np.arange(3.0), rootdir=tmp_path / "a", mode="w")
    a.attrs["_FillValue"] = np.float64("nan")
    a.attrs["inf"] = np.inf
    a.attrs["z"] = np.complex128(1 + 2j)
    a.close()
    from carray.versions import Manifest

    newest = sorted((tmp_path / "a" / "versions").glob("*.mf"))[-1]
    stored = Manifest.decode(newest.read_bytes()).members[0].attrs  # part of the version
    assert stored["_FillValue"] == {"type": "scalar", "dtype": "<f8", "value": "NaN"}
    assert stored["inf"] == {"type": "float", "value": "Infinity"}
    got = _get(tmp_path / "a")
    assert type(got["_FillValue"]) is np.float64 and np.isnan(got["_FillValue"])
    assert got["inf"] == np.inf and type(got["z"]) is np.complex128 and got["z"] == 1 + 2j


def test_files_of_earlier_releases_still_read(tmp_path):
    import shutil

    data = pathlib.Path(__file__).parents[1] / "data" / "carray_v2" / "a1d.carray"
    shutil.copytree(data, tmp_path / "a")  # a directory of format 2: meta/attrs
    old = {"_FillValue": {"type": "float", "value": "np.float64(nan)"},
           "inf": {"type": "float", "value": "np.float64(inf)"},
           "z": {"type": "complex", "value": ["np.float64(1.0)", "np.float64(2.0)"]},
           "t": {"type": "float", "value": 23.5},
           "f": {"type": "scalar", "dtype": "<f8", "encoding": "base64",
                 "value": "AAAAAAAA8H8="}}
    (tmp_path / "a" / "meta" / "attrs").write_text(json.dumps(old) + "\n")
    got = _get(tmp_path / "a")
    assert type(got["_FillValue"]) is np.float64 and np.isnan(got["_FillValue"])
    assert got["inf"] == np.inf and got["z"] == 1 + 2j and got["t"] == 23.5
    assert got["f"] == np.inf and type(got["f"]) is np.float64


@pytest.mark.parametrize("fmt", list(ARRAYS))
def test_unstorable_values_are_refused_when_set(tmp_path, fmt):
    path = tmp_path / ARRAYS[fmt]
    a = ca.carray(np.arange(3.0), rootdir=path, mode="w", format=fmt)
    a.attrs["kept"] = np.float32(1)
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for bad in (object(), lambda: 0, np.array([None]), {2: 1}, [1, {"k": object()}]):
        with pytest.raises(UnstorableAttributeError, match="'bad'"):
            a.attrs["bad"] = bad
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files
    a.close()
    assert_same(_get(path), {"kept": np.float32(1)})


# -- python-blosc2 reads our vlmeta, we read theirs ------------------------------------------

NATIVE = {"none": None, "t": True, "i": -(2**63), "u": 2**64 - 1, "f": float("nan"),
          "nz": -0.0, "s": "héllo", "b": b"\x00\x01", "l": [1, "x", [2.5]],
          "d": {"k": {"n": None}}, "tup": (1, ("a", b"b")), "c": 1 - 2j, "set": {1, 2},
          "arr": np.arange(6, dtype=">f4").reshape(2, 3),
          "rec": np.zeros(2, [("a", "<i4"), ("b", "S3")])}


def _theirs(path) -> dict:
    """The attributes python-blosc2 reads (without carray's record of digests)."""
    arr = blosc2.open(os.fspath(path), mode="r")
    return {k: arr.vlmeta[k] for k in arr.vlmeta.keys() if k != RECORD_NAME}


def test_python_blosc2_reads_what_we_write(tmp_path):
    path = tmp_path / "a.b2nd"
    with ca.carray(np.arange(5), rootdir=path, mode="w") as a:
        a.attrs.update(NATIVE)
    assert_same(_theirs(path), NATIVE)
    with ca.carray(np.arange(5), rootdir=path, mode="w") as a:
        a.attrs["f32"] = np.float32(1.5)
        a.attrs["when"] = np.datetime64("2020-01-01", "D")
    # Values python-blosc2 has no type for read there as a one-key dict.
    assert _theirs(path) == {
        "f32": {"__carray__": {"type": "scalar", "dtype": "<f4", "value": 1.5}},
        "when": {"__carray__": {"type": "scalar", "dtype": "<M8[D]", "value": 18262}}}


def test_we_read_what_python_blosc2_writes(tmp_path):
    path = tmp_path / "b.b2nd"
    theirs = blosc2.asarray(np.arange(5), urlpath=os.fspath(path), mode="w")
    for k, v in NATIVE.items():
        theirs.vlmeta[k] = v
    del theirs
    assert_same(_get(path), NATIVE)


def test_their_values_we_do_not_store_survive_our_writes(tmp_path):
    path = tmp_path / "c.b2nd"
    theirs = blosc2.asarray(np.arange(5), urlpath=os.fspath(path), mode="w")
    theirs.vlmeta["objs"] = np.array([1, "a", None], dtype=object)
    del theirs
    with ca.open(path, mode="a") as a:
        assert a.attrs["objs"].tolist() == [1, "a", None]
        a.attrs["ours"] = np.int16(7)
        with pytest.raises(UnstorableAttributeError, match="'objs'.*object"):
            a.copy(rootdir=tmp_path / "copy", mode="w")  # not in a carray directory
        assert not (tmp_path / "copy").exists()  # refused before anything is written
    assert _theirs(path)["objs"].tolist() == [1, "a", None]
    assert _get(path)["ours"] == 7


# -- bcolz reads plain JSON as it always did -----------------------------------------------

PLAIN = {"units": "K", "n": 3, "scale": 0.5, "flags": [1, "x", None, True],
         "coords": {"lat": 40.1, "nested": [{"a": []}]}, "big": 2**70, "neg": -0.0}


def test_plain_attributes_stay_plain_json(tmp_path):
    path = tmp_path / "a.bcolz"
    with ca.carray(np.arange(5), rootdir=path, mode="w", format="bcolz") as a:
        a.attrs.update(PLAIN)
        a.attrs["f32"] = np.float32(2.5)
        a.attrs["nan"] = np.float64("nan")
        a.attrs["pair"] = (1, np.int8(2))
    stored = json.loads((path / "__attrs__").read_text())
    assert {k: stored[k] for k in PLAIN} == PLAIN
    assert stored["f32"] == 2.5 and stored["pair"] == [1, 2]  # as bcolz writes them
    assert "NaN" in (path / "__attrs__").read_text() and "__carray__" not in \
        (path / "__attrs__").read_text()
    bcolz = pytest.importorskip(
        "bcolz", reason="bcolz-zipline, the real bcolz, has wheels only for Python < 3.13")
    theirs = bcolz.open(os.fspath(path), mode="r")
    assert {k: theirs.attrs[k] for k in PLAIN} == PLAIN
    assert theirs.attrs["f32"] == 2.5 and np.isnan(theirs.attrs["nan"])
    assert theirs.attrs["pair"] == [1, 2]
    assert_same(_get(path), {**PLAIN, "f32": np.float32(2.5), "nan": np.float64("nan"),
                             "pair": (1, np.int8(2))})  # exact for carray


def test_a_change_bcolz_makes_shows_and_what_json_cannot_hold_is_refused(tmp_path):
    bcolz = pytest.importorskip(
        "bcolz", reason="bcolz-zipline, the real bcolz, has wheels only for Python < 3.13")
    path = tmp_path / "a.bcolz"
    with ca.carray(np.arange(5), rootdir=path, mode="w", format="bcolz") as a:
        a.attrs.update({"f32": np.float32(2.5), "kept": np.int16(3), "gone": (1,)})
        for bad in (1j, b"raw", {1, 2}, np.datetime64("2020-01-01"), dt.date(2020, 1, 1)):
            with pytest.raises(UnstorableAttributeError, match="'bad'.*bcolz"):
                a.attrs["bad"] = bad
    theirs = bcolz.open(os.fspath(path), mode="a")
    theirs.attrs["f32"] = 7
    del theirs.attrs["gone"]
    theirs.flush()
    del theirs
    assert_same(_get(path), {"f32": 7, "kept": np.int16(3)})


def test_we_read_what_bcolz_writes(tmp_path):
    bcolz = pytest.importorskip(
        "bcolz", reason="bcolz-zipline, the real bcolz, has wheels only for Python < 3.13")
    path = os.fspath(tmp_path / "theirs.bcolz")
    theirs = bcolz.carray(np.arange(5), rootdir=path, mode="w")
    for k, v in PLAIN.items():
        theirs.attrs[k] = v
    theirs.flush()
    assert_same(_get(path), PLAIN)
