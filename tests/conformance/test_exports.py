"""Every export to a foreign format, read back by the real library in that format's own
conventions: values, dtypes, missing values (fill values) and attributes as that library
writes them, nothing of carray's own showing; and back into carray."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import carray as ca
from carray import registry
from carray.core.problems import tally
from carray.errors import UnstorableAttributeError, UnsupportedDTypeError
from carray.integrations.convert import convert

xr = pytest.importorskip("xarray")
netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")
blosc2 = pytest.importorskip("blosc2")

EXAMPLES = 100 if os.environ.get("CARRAY_SOAK") == "1" else 12
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _bcolz():
    return pytest.importorskip(
        "bcolz", reason="bcolz-zipline, the real bcolz, has wheels only for Python < 3.13")


def _private(mapping) -> list[str]:
    """Keys or values of carray's own encodings."""
    text = json.dumps({str(k): str(v) for k, v in dict(mapping).items()})
    return [k for k in mapping if str(k).startswith("_carray")] + \
        (["__carray__"] if "__carray__" in text else [])


# -- what the issue found, one by one ------------------------------------------------------------


def _cf_group(path) -> None:
    with ca.group(path, mode="w") as g, g.transaction():
        g.attrs.update({"title": "a run", "n": np.int16(3), "scale": np.float32(0.5)})
        g.create_array("time", np.arange(6).astype("M8[s]"), dims="time")
        g.create_array("temp", np.array([1, np.nan, 3, 4, 5, 6], "f4"), dims="time",
                       attrs={"units": "K", "_FillValue": np.nan})
        g.create_array("count", np.array([1, -1, 3, 4, 5, 6], "i4"), dims="time",
                       attrs={"_FillValue": np.int64(-1), "valid_range": [0, 10]})
        g.create_array("ok", np.arange(6) % 2 == 0, dims="time")
        g.create_array("label", np.array(["a", "bb", "c", "d", "e", "f"]), dims="time")


def test_a_zarr_group_carray_wrote_opens_in_xarray_and_carray(tmp_path):
    _cf_group(tmp_path / "g")
    convert(tmp_path / "g", tmp_path / "g.zarr")
    x = xr.open_zarr(tmp_path / "g.zarr", consolidated=False)
    assert np.isnan(x["temp"].values[1]) and x["temp"].dtype == np.float32
    assert x["count"].values[0] == 1 and np.isnan(x["count"].values[1])  # -1 masked
    assert x["ok"].dtype == bool and x["time"].dtype.kind == "M"
    assert x["label"].values.tolist() == ["a", "bb", "c", "d", "e", "f"]
    for name in ("temp", "count", "ok", "label", "time"):
        doc = json.loads((tmp_path / "g.zarr" / name / "zarr.json").read_text())
        assert not _private(doc["attributes"]), name
        fill = doc["fill_value"]  # the spec's: a value of the data type, or a float text
        assert isinstance(fill, bool | int | float | str) or fill is None, (name, fill)
    path = str(tmp_path / "g.zarr")  # carray info and verify take it
    fmt = registry.sniff(path)
    assert len(fmt.info(path, None)["variables"]) == 5
    problems, checked = tally(registry.verify(path))
    assert problems == [] and checked == 5


def test_netcdf_exports_carry_no_carray_attributes(tmp_path):
    _cf_group(tmp_path / "g")
    convert(tmp_path / "g", tmp_path / "g.nc")
    with netCDF4.Dataset(tmp_path / "g.nc") as f:
        assert not _private({k: f.getncattr(k) for k in f.ncattrs()})
        for var in f.variables.values():
            attrs = {k: var.getncattr(k) for k in var.ncattrs()}
            assert not _private(attrs), (var.name, attrs)
            if "_FillValue" in attrs:  # typed like the variable
                assert np.asarray(attrs["_FillValue"]).dtype == var.dtype, var.name
    x = xr.open_dataset(tmp_path / "g.nc")
    assert x["ok"].dtype == bool and x["time"].dtype.kind == "M"
    assert np.isnan(x["count"].values[1]) and np.isnan(x["temp"].values[1])


def test_a_nan_attribute_of_a_bcolz_array_reads_as_nan_in_bcolz(tmp_path):
    bcolz = _bcolz()
    path = str(tmp_path / "a.bcolz")
    with ca.carray(np.arange(5.0), rootdir=path, mode="w", format="bcolz") as a:
        a.attrs["_FillValue"] = float("nan")
        a.attrs["scale"] = np.float32(0.5)
    theirs = bcolz.open(path, mode="r")
    assert np.isnan(theirs.attrs["_FillValue"]) and theirs.attrs["scale"] == 0.5
    assert "__carray__" not in (tmp_path / "a.bcolz" / "__attrs__").read_text()


def test_b2nd_vlmeta_holds_the_users_attributes_only(tmp_path):
    path = str(tmp_path / "a.b2nd")
    with ca.carray(np.arange(50), rootdir=path, mode="w", chunks=(10,)) as a:
        a.attrs["units"] = "m"
    a = ca.open(path, mode="a")
    a[3] = 7  # a commit after the first
    a.close()
    theirs = blosc2.open(path, mode="r")
    assert list(theirs.vlmeta) == ["units"] and theirs[3] == 7


def test_a_bcolz_table_with_a_text_column_opens_in_bcolz(tmp_path):
    bcolz = _bcolz()
    import pandas as pd

    df = pd.DataFrame({"x": [1, 2, 3], "s": ["a", "bb", "ccc"]})
    path = str(tmp_path / "t.bcolz")
    ca.ctable.fromdataframe(df, rootdir=path, mode="w", format="bcolz").close()
    theirs = bcolz.open(path, mode="r")
    assert [tuple(r) for r in theirs[:].tolist()] == [(1, "a"), (2, "bb"), (3, "ccc")]
    with ca.open(path, mode="a") as t:
        with pytest.raises(UnsupportedDTypeError, match="cut"):
            t.append({"x": [4], "s": ["too long"]})  # fixed width: refused, not cut
        assert len(t) == 3


# -- round trips of random arrays ------------------------------------------------------------------

#: dtypes every group format holds, and those only some do.
COMMON = ["i1", "<i4", "<u2", "<i8", "<f4", "<f8", "?", "<M8[s]", "<m8[ms]", "<U4", "|S3"]
ONLY = {"h5": ["<f2", "<c8"], "zarr": ["<f2", "<c16"], "nc": [], "ds": []}


def _values(dtype: np.dtype):
    shapes = hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6)
    if dtype.kind in "mM":
        return hnp.arrays(np.int64, shapes, elements=st.integers(-10**9, 10**9)).map(
            lambda a: a.view(dtype))
    if dtype.kind == "U":
        return hnp.arrays(dtype, shapes, elements=st.text("abcé", max_size=4))
    if dtype.kind == "S":
        return hnp.arrays(dtype, shapes, elements=st.binary(min_size=1, max_size=3).filter(
            lambda b: b"\x00" not in b))
    return hnp.arrays(dtype, shapes, elements={"allow_subnormal": False}
                      if dtype.kind in "fc" else None)


def _attrs(ext: str):
    numbers = (st.integers(-2**31, 2**31) | st.floats(allow_infinity=False)
               | st.floats(width=32).map(np.float32) | st.integers(-99, 99).map(np.int16))
    leaves = numbers | st.text("xyzé ", max_size=6) | st.lists(st.integers(0, 9), min_size=2,
                                                                 max_size=3)
    if ext in ("zarr", "ds"):
        leaves |= st.booleans() | st.none()
    return st.dictionaries(st.sampled_from(["units", "title", "scale", "level", "note"]),
                           leaves, max_size=3)


def _as_read(ext: str, value):
    """An attribute value as ``ext``'s library gives it back."""
    if ext in ("zarr", "ds"):  # JSON
        return json.loads(json.dumps(value.tolist() if isinstance(value, np.generic) else
                                     value))
    if isinstance(value, list):
        return np.asarray(value)
    return value.item() if isinstance(value, np.int64 | np.float64) else value


def _equal(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, float | np.floating) and math.isnan(a):
        return isinstance(b, float | np.floating) and math.isnan(b)
    return a == b and (type(a) is type(b) or not isinstance(a, np.generic))


def _theirs(ext: str, path):
    """The array ``v`` and the attributes, read by the format's own library."""
    if ext == "nc":
        with netCDF4.Dataset(path) as f:
            var = f["v"]
            var.set_auto_maskandscale(False)
            values = np.asarray(var[...])
            if values.dtype == np.dtype("S1"):  # a char array: its last axis the text
                values = netCDF4.chartostring(values, encoding="bytes")
            return (values, {k: var.getncattr(k) for k in var.ncattrs()},
                    {k: f.getncattr(k) for k in f.ncattrs()})
    if ext == "h5":
        with h5py.File(path, "r") as f:
            d = f["v"]
            text = h5py.check_string_dtype(d.dtype)
            values = d.asstr()[...] if text is not None and text.length is None else d[...]
            return values, dict(d.attrs), dict(f.attrs)
    if ext == "zarr":
        g = zarr.open_group(str(path), mode="r")
        return np.asarray(g["v"][...]), dict(g["v"].attrs), dict(g.attrs)
    ds_format = pytest.importorskip("ds_format")
    d = ds_format.read(str(path))
    return np.asarray(d["v"]), {k: v for k, v in d["."]["v"].items()
                                if not k.startswith(".")}, d["."]["."]


def _stored_as(ext: str, values: np.ndarray) -> np.ndarray:
    """What the library shows for carray's values: CF numbers for NetCDF and ds."""
    if ext in ("nc", "ds") and values.dtype.kind in "mM":
        return values.view(np.int64)
    if ext in ("nc", "ds") and values.dtype.kind == "b":
        return values.astype("i1")
    return values


@pytest.mark.parametrize("ext", ["nc", "h5", "zarr", "ds"])
@SETTINGS
@given(data=st.data())
def test_groups_round_trip_through_every_format_and_its_library(tmp_path_factory, ext, data):
    dtype = np.dtype(data.draw(st.sampled_from(COMMON + ONLY[ext]), "dtype"))
    values = data.draw(_values(dtype), "values")
    attrs, gattrs = data.draw(_attrs(ext), "attrs"), data.draw(_attrs(ext), "group attrs")
    if dtype.kind in "mM" and ext in ("nc", "ds"):
        attrs.pop("units", None)  # the CF units of the values (as xarray, carray refuses one)
    if dtype.kind in "iuf" and data.draw(st.booleans(), "fill"):
        attrs["_FillValue"] = np.asarray(values.flat[0]).astype(dtype)[()]
    tmp = tmp_path_factory.mktemp(ext)
    dims = ("x", "y")[:values.ndim]
    with ca.group(tmp / "g", mode="w") as g, g.transaction():
        g.attrs.update(gattrs)
        g.create_array("v", values, dims=dims, attrs=attrs)
    out = tmp / f"g.{ext}"
    convert(tmp / "g", out)
    got, their_attrs, their_gattrs = _theirs(ext, out)
    want = _stored_as(ext, values)
    if want.dtype.kind in "US":
        assert np.asarray(got).astype(want.dtype).tolist() == want.tolist()
    else:
        assert np.array_equal(np.asarray(got).astype(want.dtype), want, equal_nan=True)
    assert not _private(their_attrs) and not _private(their_gattrs)
    for key, value in attrs.items():
        if key != "_FillValue":
            assert _equal(_as_read(ext, value), their_attrs[key]), (key, value, their_attrs)
    # Back into carray: the same values, dtypes, fill value (of the variable's type).
    convert(out, tmp / "back")
    with ca.open_group(tmp / "back") as b:
        back = b["v"]
        # ds keeps text without a width (ds_format itself reads it as objects).
        assert back.dtype == dtype or (dtype.kind == back.dtype.kind == "U") or \
            (ext == "ds" and dtype.kind == back.dtype.kind == "S")
        assert b.dims_of("v") == dims
        if dtype.kind in "US":
            assert back[...].tolist() == values.tolist()
        else:
            assert np.array_equal(back[...], values, equal_nan=dtype.kind in "fc")
        if "_FillValue" in attrs:
            fill = back.attrs["_FillValue"]
            assert np.asarray(fill).dtype == dtype and _equal(fill.item(),
                                                               attrs["_FillValue"].item())
        for key, value in gattrs.items():
            assert _equal(_as_read(ext, value), b.attrs[key]), (key, value)


@SETTINGS
@given(data=st.data())
def test_arrays_round_trip_through_peer_layouts(tmp_path_factory, bloscpack_peer, data):
    """``.b2nd`` frames read by python-blosc2, bcolz directories by bcolz, ``.blp`` files by
    bloscpack, Zarr arrays by zarr: values, and attributes as each keeps them."""
    dtype = np.dtype(data.draw(st.sampled_from(["<i4", "<f8", "<u2", "?"]), "dtype"))
    values = data.draw(hnp.arrays(dtype, st.integers(1, 3000)), "values")
    attrs = data.draw(st.dictionaries(st.sampled_from(["units", "scale", "n"]),
                                      st.integers(-99, 99).map(np.int16)
                                      | st.floats(allow_infinity=False) | st.text(max_size=5),
                                      max_size=3), "attrs")
    tmp = tmp_path_factory.mktemp("peer")
    src = str(tmp / "a.carray")
    with ca.carray(values, rootdir=src, mode="w", chunklen=512) as a:
        a.attrs.update(attrs)
    for ext in ("b2nd", "bcolz", "blp", "zarr"):
        convert(src, str(tmp / f"a.{ext}"))
    nan = dtype.kind == "f"
    theirs = blosc2.open(str(tmp / "a.b2nd"), mode="r")
    assert np.array_equal(theirs[:], values, equal_nan=nan)
    assert sorted(theirs.vlmeta) == sorted(attrs)
    z = zarr.open_array(str(tmp / "a.zarr"), mode="r")
    assert np.array_equal(z[:], values, equal_nan=nan) and not _private(dict(z.attrs))
    got = bloscpack_peer.unpack_ndarray_from_file(str(tmp / "a.blp"))
    assert got.dtype == dtype and np.array_equal(got, values, equal_nan=nan)
    b = _bcolz().open(str(tmp / "a.bcolz"), mode="r")
    assert np.array_equal(b[:], values, equal_nan=nan)
    for key, value in attrs.items():  # as bcolz's JSON keeps them
        assert _equal(_as_read("zarr", value), b.attrs[key])
    for ext in ("b2nd", "bcolz", "zarr"):  # back into carray: the values and attributes
        with ca.open(str(tmp / f"a.{ext}"), mode="r") if ext != "zarr" else \
                _zarr_back(tmp) as back:
            assert np.array_equal(back[:], values, equal_nan=nan), ext
            for key, value in attrs.items():
                want = value if ext != "zarr" else _as_read("zarr", value)
                assert _equal(want, back.attrs[key]), (ext, key, value, back.attrs[key])


def _zarr_back(tmp):
    convert(str(tmp / "a.zarr"), str(tmp / "z.carray"))
    return ca.open(str(tmp / "z.carray"), mode="r")


@pytest.mark.parametrize(("ext", "dtype"), [("nc", "f2"), ("nc", "c8"), ("ds", "c16"),
                                            ("ds", "f2"), ("nc", "M8[M]")])
def test_a_type_the_format_has_not_is_refused_when_written(tmp_path, ext, dtype):
    with ca.group(tmp_path / "g", mode="w") as g, g.transaction():
        g.create_array("v", np.zeros(3, dtype), dims="x")
    with pytest.raises(UnsupportedDTypeError):
        convert(tmp_path / "g", tmp_path / f"g.{ext}")
    assert not (tmp_path / f"g.{ext}").exists()


@pytest.mark.parametrize("ext", ["zarr", "ds", "nc", "h5"])
def test_an_attribute_the_format_has_not_is_refused_when_written(tmp_path, ext):
    with ca.group(tmp_path / "g", mode="w") as g, g.transaction():
        g.create_array("v", np.zeros(3), dims="x", attrs={"when": np.datetime64("2020-01-01")})
    with pytest.raises(UnstorableAttributeError, match="'when'"):
        convert(tmp_path / "g", tmp_path / f"g.{ext}")
    assert not (tmp_path / f"g.{ext}").exists()
