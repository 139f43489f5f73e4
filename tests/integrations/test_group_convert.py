"""Groups to and from NetCDF-4, HDF5, Zarr v3 groups and ds files (carray.integrations.convert)."""

from __future__ import annotations

import datetime as dt
import os

import h5py
import netCDF4
import numpy as np
import pytest
import zarr

import carray as ca
from carray.errors import (
    ContainerExistsError,
    ContainerNotFoundError,
    FormatError,
    UnstorableAttributeError,
    UnsupportedDTypeError,
)
from carray.integrations import group_files, group_nodes
from carray.integrations.convert import convert

#: Attribute values every group format holds (JSON, NetCDF and HDF5 attributes).
GROUP_ATTRS = {
    "title": "a test", "count": 3, "scale": 0.5, "levels": [1, 2, 3],
    "f32": np.float32(1.5), "nan": float("nan"), "weights": np.array([0.5, 0.25]),
}


def _json(value):
    """A value as JSON gives it back (Zarr and ds attributes)."""
    if isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


def _native(value):
    """A value as netCDF4 and h5py give it back: lists of numbers as arrays, int64 and
    float64 scalars as Python numbers."""
    if isinstance(value, list | tuple):
        return np.asarray(value)
    if isinstance(value, np.int64 | np.float64):
        return value.item()
    return value


#: What each format gives back for an attribute value it holds.
READ_BACK = {"zarr": _json, "ds": _json, "nc": _native, "h5": _native, "hdf5": _native}


def _same(a, b) -> bool:
    """Attribute values equal as carray keeps them (NaN equal to NaN, types checked)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and \
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and np.isnan(a):
        return isinstance(b, float) and np.isnan(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and \
            all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _same_attrs(a: dict, b: dict, read_back=lambda v: v) -> None:
    assert a.keys() == b.keys(), (sorted(a), sorted(b))
    for k in a:
        want = a[k] if k == "_FillValue" else read_back(a[k])  # a fill value keeps its type
        assert _same(want, b[k]), (k, a[k], b[k])


def make_group(path) -> None:
    """A group with nested groups, dims, attrs, every kind of value, and a table."""
    rng = np.random.default_rng(7)
    with ca.group(path, mode="w") as g, g.transaction():
        g.attrs.update(GROUP_ATTRS)
        g.create_array("time", np.arange(50, dtype="i8"), dims="time", chunks=(16,))
        g.create_array("temp", rng.random((50, 4)), dims=("time", "x"), chunks=(16, 4),
                       attrs={"units": "K", "valid": [0.0, 1.0]},
                       cparams=ca.CParams(cname="zstd", clevel=7))
        g.create_array("count", np.arange(20, dtype="u2").reshape(4, 5))  # unnamed axes
        g.create_array("scalar", np.float32(2.5))
        g.create_group("obs", attrs={"station": "north", "id": np.int16(12)})
        g.create_array("obs/ok", np.arange(50) % 3 == 0, dims="time")
        g.create_array("obs/label", np.array(["a", "bb", "ccc", "éé"]), dims="site")
        g.create_array("obs/code", np.array([b"x", b"yy", b"", b"zzzz"]), dims="site")
        g.create_array("obs/deep/when", np.arange(4).astype("M8[s]"), dims="site")
        g.create_array("obs/deep/lag", np.arange(4).astype("m8[ms]"), dims="site",
                       attrs={"_FillValue": np.int64(-1)})
        g.create_table("obs/log", {"n": np.arange(6), "v": np.linspace(0, 1, 6),
                                   "name": np.array(["p", "q", "rr", "", "s", "tt"], dtype=object),
                                   "xy": np.arange(12.0).reshape(6, 2)},
                       attrs={"source": "sensor"})


def assert_same_group(a, b, *, fmt: str | None = None) -> None:
    """Every node of ``a`` is in ``b`` with the same values, dtypes, dims and attrs, as
    format ``fmt`` keeps them (None: exactly; text as wide as its longest value)."""
    read_back = READ_BACK.get(fmt, lambda v: v)
    _same_attrs(dict(a.attrs.getall()), dict(b.attrs.getall()), read_back)
    mine = [(p, k) for p, k, _ in a.walk()]
    assert mine == [(p, k) for p, k, _ in b.walk()]
    for path, kind, obj in a.walk():
        other = b[path]
        _same_attrs(dict(obj.attrs.getall()), dict(other.attrs.getall()), read_back)
        if kind == "array":
            x, y = obj[...], other[...]
            if fmt in ("nc", "h5", "hdf5") and x.dtype.kind == "U":  # variable-length text
                x = x.astype(f"U{max(1, max(len(s) for s in x.ravel().tolist()))}")
            assert x.dtype == y.dtype, (path, x.dtype, y.dtype)
            assert np.array_equal(x, y), (path, x, y)
            assert a.dims_of(path) == b.dims_of(path), path
        elif kind == "table":
            assert obj.names == other.names
            for name in obj.names:
                assert np.array_equal(obj.cols[name][:], other.cols[name][:]), (path, name)
                assert obj.cols[name].dtype == other.cols[name].dtype, (path, name)


@pytest.fixture
def group_path(tmp_path):
    path = tmp_path / "src.cagroup"
    make_group(path)
    return path


@pytest.mark.parametrize("ext", ["nc", "zarr", "h5", "hdf5"])
def test_round_trip_keeps_tree_values_dims_and_attrs(group_path, tmp_path, ext):
    out, back = tmp_path / f"out.{ext}", tmp_path / "back.cagroup"
    convert(group_path, out)
    convert(out, back)
    with ca.open_group(group_path) as a, ca.open_group(back) as b:
        assert_same_group(a, b, fmt=ext)
        assert b["temp"].chunks == (16, 4)
        assert b.dims == a.dims


def test_a_group_copies_to_a_group_in_one_version(group_path, tmp_path):
    convert(group_path, tmp_path / "copy")
    with ca.open_group(group_path) as a, ca.open_group(tmp_path / "copy") as b:
        assert_same_group(a, b)
        assert b["temp"].cparams.cname == "zstd" and b["temp"].cparams.clevel == 7
        for path, kind, obj in a.walk():
            if kind == "array" and obj.ndim:
                assert (obj.chunks, obj.blocks) == (b[path].chunks, b[path].blocks), path
        assert [v.message for v in b.versions()][0] == f"converted from {group_path}"


def test_to_zarr_keeps_chunks_codec_and_dimension_names(group_path, tmp_path):
    convert(group_path, tmp_path / "g.zarr")
    root = zarr.open_group(tmp_path / "g.zarr", mode="r")
    temp = root["temp"]
    assert temp.chunks == (16, 4) and temp.metadata.dimension_names == ("time", "x")
    blosc = temp.compressors[0].to_dict()
    assert blosc["name"] == "blosc" and blosc["configuration"]["cname"] == "zstd"
    assert blosc["configuration"]["clevel"] == 7
    assert root["obs"].attrs["station"] == "north"
    log = root["obs/log"]
    assert isinstance(log, zarr.Group) and log.attrs["_carray_table"]["columns"] == \
        ["n", "v", "name", "xy"]
    assert list(log["name"][:]) == ["p", "q", "rr", "", "s", "tt"]
    assert log["xy"].metadata.dimension_names == ("row", "xy_dim1")


def test_to_netcdf_is_readable_by_netcdf4(group_path, tmp_path):
    convert(group_path, tmp_path / "g.nc")
    with netCDF4.Dataset(tmp_path / "g.nc") as f:
        assert f.title == "a test" and f.count == 3
        assert f["temp"].dimensions == ("time", "x") and f["temp"].units == "K"
        assert f["temp"].chunking() == [16, 4] and f["temp"].filters()["zlib"]
        assert f.groups["obs"]["ok"].dimensions == ("time",)  # the root's dimension
        assert list(f.groups["obs"]["label"][:]) == ["a", "bb", "ccc", "éé"]
        log = f.groups["obs"].groups["log"]
        assert len(log.dimensions["row"]) == 6 and log["v"].dimensions == ("row",)
        assert list(log["name"][:]) == ["p", "q", "rr", "", "s", "tt"]
        assert f["count"].dimensions == ("count_dim_0", "count_dim_1")
        assert f.groups["obs"].groups["deep"]["lag"]._FillValue == -1


def test_to_hdf5_is_readable_by_h5py(group_path, tmp_path):
    convert(group_path, tmp_path / "g.h5")
    with h5py.File(tmp_path / "g.h5", "r") as f:
        assert f.attrs["title"] == "a test"
        temp = f["temp"]
        assert temp.chunks == (16, 4) and temp.compression == "gzip"
        assert list(temp.attrs["_ARRAY_DIMENSIONS"]) == ["time", "x"]
        log = f["obs/log"]
        assert log.dtype.names == ("n", "v", "name", "xy") and log.shape == (6,)
        assert log["xy"].shape == (6, 2)
        assert [x.decode() for x in log["name"]] == ["p", "q", "rr", "", "s", "tt"]
        assert f["obs/label"].asstr()[:].tolist() == ["a", "bb", "ccc", "éé"]


def test_ds_round_trip_of_a_flat_group(tmp_path):
    with ca.group(tmp_path / "flat", mode="w") as g, g.transaction():
        g.attrs.update({"title": "flat", "n": 2, "flag": False})
        g.create_array("time", np.arange(5.0), dims="time", attrs={"units": "s"})
        g.create_array("ok", np.array([True, False, True, True, False]), dims="time")
        g.create_array("name", np.array(["a", "bcd"]), dims="n")
        g.create_array("when", np.arange(2).astype("M8[D]"), dims="n")
        g.create_array("grid", np.arange(12, dtype="i4").reshape(3, 4))
    convert(tmp_path / "flat", tmp_path / "flat.ds")
    d = ca.ds.read(tmp_path / "flat.ds")
    assert list(d["time"]) == [0, 1, 2, 3, 4] and d["."]["time"][".dims"] == ["time"]
    convert(tmp_path / "flat.ds", tmp_path / "back")
    with ca.open_group(tmp_path / "flat") as a, ca.open_group(tmp_path / "back") as b:
        assert_same_group(a, b)


def test_ds_refuses_sub_groups_and_tables_naming_them(group_path, tmp_path):
    with pytest.raises(ValueError, match=r"ds file is flat.*obs.*obs/log"):
        convert(group_path, tmp_path / "g.ds")
    assert os.listdir(tmp_path) == ["src.cagroup"]


def test_netcdf_written_by_netcdf4_becomes_a_group(tmp_path):
    path = tmp_path / "in.nc"
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        f.setncattr("history", "made by netCDF4")
        t = f.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(7.0)
        v = f.createVariable("v", "i2", ("time", "x"), fill_value=np.int16(-99),
                             zlib=True, complevel=3, chunksizes=(4, 3))
        v.scale_factor = np.float32(0.1)
        v[:] = np.arange(21, dtype="i2").reshape(7, 3)
        v[2, 1] = np.ma.masked
        sub = f.createGroup("sub")
        sub.kind = "child"
        s = sub.createVariable("names", str, ("x",))
        s[:] = np.array(["one", "two", "three"], dtype=object)
        sub.createDimension("len", 4)
        c = sub.createVariable("chars", "S1", ("x", "len"))
        c[:] = netCDF4.stringtochar(np.array([b"ab", b"cdef", b""], dtype="S4"))
    convert(path, tmp_path / "g")
    with ca.open_group(tmp_path / "g") as g:
        assert g.attrs["history"] == "made by netCDF4"
        assert g.dims_of("v") == ("time", "x") and g.dims == {"time": 7, "x": 3}
        # Raw: packed by scale_factor when written, not unpacked; the fill value stays.
        expected = np.arange(21, dtype="i2").reshape(7, 3) * np.int16(10)
        expected[2, 1] = -99
        assert g["v"].dtype == np.int16 and np.array_equal(g["v"][:], expected)
        assert g["v"].attrs["_FillValue"] == -99 and g["v"].attrs["scale_factor"] == \
            np.float32(0.1) and isinstance(g["v"].attrs["scale_factor"], np.float32)
        assert g["v"].chunks == (4, 3) and g["v"].cparams.cname == "zlib"
        assert g["v"].cparams.clevel == 3
        assert g["time"].attrs["units"] == "days since 2000-01-01"
        assert g["sub"].attrs["kind"] == "child"
        assert g["sub/names"][:].tolist() == ["one", "two", "three"]
        assert g["sub/names"].dtype == np.dtype("U5")
        assert g["sub/chars"][:].tolist() == [b"ab", b"cdef", b""]
        assert g.dims_of("sub/chars") == ("x",)


def test_zarr_group_written_by_zarr_becomes_a_group(tmp_path):
    from zarr.codecs import BloscCodec

    root = zarr.create_group(tmp_path / "in.zarr", attributes={"title": "zarr made",
                                                                "n": [1, 2]})
    a = root.create_array("a", shape=(100, 6), dtype="f4", chunks=(25, 3),
                          dimension_names=["y", "x"], attributes={"units": "m"},
                          compressors=BloscCodec(cname="lz4hc", clevel=4, shuffle="bitshuffle"))
    a[:] = np.arange(600, dtype="f4").reshape(100, 6)
    sub = root.create_group("inner", attributes={"deep": True})
    s = sub.create_array("words", shape=(3,), dtype=str, chunks=(2,))
    s[:] = np.array(["x", "yyy", "zz"], dtype=object)
    b = sub.create_array("flags", shape=(5,), dtype=bool, chunks=(5,))
    b[:] = [True, False, False, True, True]
    convert(tmp_path / "in.zarr", tmp_path / "g", "group")
    with ca.open_group(tmp_path / "g") as g:
        assert g.attrs["title"] == "zarr made" and g.attrs["n"] == [1, 2]
        assert g["a"].chunks == (25, 3) and g.dims_of("a") == ("y", "x")
        assert (g["a"].cparams.cname, g["a"].cparams.clevel) == ("lz4hc", 4)
        assert g["a"].cparams.shuffle == ca.Shuffle.BITSHUFFLE
        assert np.array_equal(g["a"][:], np.arange(600, dtype="f4").reshape(100, 6))
        assert g["inner"].attrs["deep"] is True
        assert g["inner/words"][:].tolist() == ["x", "yyy", "zz"]
        assert g["inner/flags"][:].tolist() == [True, False, False, True, True]


def test_hdf5_written_by_h5py_becomes_a_group(tmp_path):
    path = tmp_path / "in.h5"
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "h5py made"
        f.attrs["version"] = np.int32(3)
        x = f.create_dataset("x", data=np.arange(4.0))
        x.make_scale("x")
        d = f.create_dataset("grid/data", data=np.arange(40, dtype="i8").reshape(10, 4),
                             chunks=(5, 4), compression="gzip", compression_opts=6,
                             shuffle=True)
        y = f.create_dataset("grid/y", data=np.arange(10))
        y.make_scale("y")
        d.dims[0].attach_scale(y)
        d.dims[1].attach_scale(x)
        d.attrs["units"] = "counts"
        f.create_dataset("grid/words", data=np.array(["α", "bb"], dtype=object),
                         dtype=h5py.string_dtype())
        rows = np.array([(1, 2.5, b"ab"), (2, 3.5, b"c")],
                        dtype=[("i", "i4"), ("f", "f8"), ("s", "S2")])
        f.create_dataset("grid/records", data=rows)
    convert(path, tmp_path / "g")
    with ca.open_group(tmp_path / "g") as g:
        assert g.attrs["title"] == "h5py made" and g.attrs["version"] == 3
        assert np.array_equal(g["grid/data"][:], np.arange(40).reshape(10, 4))
        assert g.dims_of("grid/data") == ("y", "x") and g["grid/data"].chunks == (5, 4)
        assert g["grid/data"].cparams.cname == "zlib" and g["grid/data"].cparams.clevel == 6
        assert g["grid/data"].attrs.getall() == {"units": "counts"}
        assert g["grid/words"][:].tolist() == ["α", "bb"]
        assert g.kind_of("grid/records") == "table"
        t = g["grid/records"]
        assert t.names == ["i", "f", "s"] and t.cols["s"][:].tolist() == [b"ab", b"c"]
        assert t.cols["f"][:].tolist() == [2.5, 3.5]


def test_dimension_scales_of_a_netcdf4_file_read_through_h5py(tmp_path):
    with netCDF4.Dataset(tmp_path / "in.nc", "w") as f:
        f.createDimension("t", 3)
        f.createDimension("unnamed", 2)  # a dimension with no variable: a placeholder
        f.createVariable("t", "i4", ("t",))[:] = [1, 2, 3]
        f.createVariable("v", "f4", ("t", "unnamed"))[:] = np.ones((3, 2))
    os.replace(tmp_path / "in.nc", tmp_path / "in.h5")
    convert(tmp_path / "in.h5", tmp_path / "g")
    with ca.open_group(tmp_path / "g") as g:
        assert sorted(g) == ["t", "v"]  # no placeholder dataset
        assert g.dims_of("v") == ("t", "unnamed") and g["t"][:].tolist() == [1, 2, 3]
        assert g["v"].attrs.getall() == {}


def test_a_netcdf_file_converts_to_zarr_and_hdf5_directly(tmp_path):
    with netCDF4.Dataset(tmp_path / "in.nc", "w") as f:
        f.createDimension("t", 4)
        f.createVariable("v", "f8", ("t",))[:] = [1, 2, 3, 4]
    convert(tmp_path / "in.nc", tmp_path / "out.zarr")
    convert(tmp_path / "in.nc", tmp_path / "out.h5")
    assert zarr.open_group(tmp_path / "out.zarr", mode="r")["v"][:].tolist() == [1, 2, 3, 4]
    with h5py.File(tmp_path / "out.h5", "r") as f:
        assert f["v"][:].tolist() == [1, 2, 3, 4]


def test_rows_move_a_block_of_chunks_at_a_time(group_path, monkeypatch):
    monkeypatch.setattr(group_nodes, "BLOCK_BYTES", 1)
    with group_files.read_carray_group(str(group_path), None) as nodes:
        temp = next(n for n in nodes if n.path == "temp")
        assert [len(b) for b in temp.rows()] == [16, 16, 16, 2]
        log = next(n for n in nodes if n.path == "obs/log")
        assert all(len(b["n"]) <= 6 for b in log.batches())


def test_a_failed_conversion_leaves_nothing(group_path, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = group_nodes.sliced_rows

    def failing(read, shape, step, convert=np.asarray):
        rows = real(read, shape, step, convert)

        def broken():
            for block in rows():
                calls["n"] += 1
                if calls["n"] > 3:
                    raise OSError("disk full")
                yield block
        return broken

    monkeypatch.setattr(group_files, "sliced_rows", failing)
    # Between carray groups the arrays' chunks move as bytes, not a block of rows at a time.
    from carray.engine.moves import StoredChunks
    stored = StoredChunks.stored

    def failing_stored(self, nchunk):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError("disk full")
        return stored(self, nchunk)
    monkeypatch.setattr(StoredChunks, "stored", failing_stored)
    for ext in ("nc", "zarr", "h5", "cagroup"):
        before = sorted(os.listdir(tmp_path))
        calls["n"] = 0
        with pytest.raises(OSError, match="disk full"):
            convert(group_path, tmp_path / f"out.{ext}")
        assert sorted(os.listdir(tmp_path)) == before, ext


def test_an_existing_destination_is_replaced_only_when_asked(group_path, tmp_path):
    (tmp_path / "out.nc").write_bytes(b"old")
    with pytest.raises(ContainerExistsError, match="already exists"):
        convert(group_path, tmp_path / "out.nc")
    assert (tmp_path / "out.nc").read_bytes() == b"old"
    convert(group_path, tmp_path / "out.nc", overwrite=True)
    with netCDF4.Dataset(tmp_path / "out.nc") as f:
        assert "obs" in f.groups


def test_bad_input_is_a_clear_error(tmp_path, group_path):
    (tmp_path / "fake.h5").write_text("not hdf5 at all")
    with pytest.raises(FormatError, match=r"fake\.h5.*not an HDF5 file"):
        convert(tmp_path / "fake.h5", tmp_path / "g")
    with pytest.raises(ContainerNotFoundError, match="no such"):
        convert(tmp_path / "missing.h5", tmp_path / "g")
    with pytest.raises(ContainerNotFoundError, match="no such"):
        convert(tmp_path / "missing", tmp_path / "g.nc")
    assert not (tmp_path / "g").exists() and not (tmp_path / "g.nc").exists()


def test_groups_and_single_arrays_do_not_convert_into_each_other(group_path, tmp_path):
    ca.carray(np.arange(10), rootdir=tmp_path / "a.carray").close()
    for dst in ("x.b2nd", "x.npy", "x.parquet", "x.ctable"):
        with pytest.raises(ValueError, match="carray group.*convert one member") as info:
            convert(group_path, tmp_path / dst)
        assert "one is a dataset" not in str(info.value)
    for dst, to in (("x.h5", None), ("x", "group"), ("x.cagroup", None)):
        with pytest.raises(ValueError, match="an array.*holds groups of arrays"):
            convert(tmp_path / "a.carray", tmp_path / dst, to)
    assert sorted(os.listdir(tmp_path)) == ["a.carray", "src.cagroup"]


def test_datasets_to_group_formats_no_longer_say_dataset_and_array(tmp_path):
    with netCDF4.Dataset(tmp_path / "in.nc", "w") as f:
        f.createDimension("t", 2)
        f.createVariable("v", "i4", ("t",))[:] = [5, 6]
    ca.ds.write(tmp_path / "in.ds", {"v": np.array([1, 2]), ".": {"v": {".dims": ["t"]}}})
    for src in ("in.nc", "in.ds"):
        for dst in ("g.zarr", "g.h5", "g", "g.cagroup"):
            convert(tmp_path / src, tmp_path / dst, overwrite=True)
    with ca.open_group(tmp_path / "g.cagroup") as g:
        assert g["v"][:].tolist() == [1, 2] and g.dims_of("v") == ("t",)


def test_complex_values_are_refused_by_netcdf_naming_the_member(tmp_path):
    with ca.group(tmp_path / "c", mode="w") as g:
        g.create_array("sub/z", np.array([1 + 2j, 3j]))
    with pytest.raises(UnsupportedDTypeError, match="sub/z.*complex"):
        convert(tmp_path / "c", tmp_path / "c.nc")
    assert not (tmp_path / "c.nc").exists()
    convert(tmp_path / "c", tmp_path / "c.h5")  # HDF5 holds complex numbers
    convert(tmp_path / "c.h5", tmp_path / "back")
    with ca.open_group(tmp_path / "back") as b:
        assert b["sub/z"][:].tolist() == [1 + 2j, 3j]


def test_masked_ds_values_are_filled_and_the_fill_recorded(tmp_path):
    data = np.ma.MaskedArray([1.0, 2.0, 3.0], mask=[False, True, False])
    ca.ds.write(tmp_path / "m.ds", {"v": data, ".": {"v": {".dims": ["t"]}}})
    convert(tmp_path / "m.ds", tmp_path / "g")
    with ca.open_group(tmp_path / "g") as g:
        fill = g["v"].attrs["_FillValue"]
        assert g["v"][:].tolist() == [1.0, fill, 3.0]


def test_no_carray_marks_but_the_table_mark(group_path, tmp_path):
    convert(group_path, tmp_path / "g.nc")
    with netCDF4.Dataset(tmp_path / "g.nc") as f:
        found = []

        def walk(grp):
            found.extend(k for k in grp.ncattrs() if k.startswith("_carray"))
            for var in grp.variables.values():
                found.extend(f"{var.name}.{k}" for k in var.ncattrs() if k.startswith("_carray"))
            for sub in grp.groups.values():
                walk(sub)
        walk(f)
        assert found == ["_carray_table"]  # the table obs/log's, on its group
        assert f.groups["obs"]["ok"].getncattr("dtype") == "bool"  # as xarray writes it


@pytest.mark.parametrize(("ext", "value"), [
    ("nc", True), ("nc", None), ("nc", {"a": 1}), ("nc", dt.datetime(2020, 1, 2)),
    ("h5", None), ("h5", {"a": 1}), ("zarr", 1j), ("zarr", b"raw"), ("ds", {1, 2}),
])
def test_values_a_format_cannot_hold_are_refused_when_written(tmp_path, ext, value):
    with ca.group(tmp_path / "g", mode="w") as g, g.transaction():
        g.attrs["odd"] = value
        g.create_array("a", np.arange(3), dims="t")
    with pytest.raises(UnstorableAttributeError, match="attribute 'odd'"):
        convert(tmp_path / "g", tmp_path / f"g.{ext}")
    assert not (tmp_path / f"g.{ext}").exists()


def test_json_values_round_trip_through_zarr(tmp_path):
    attrs = {"flag": True, "meta": {"a": 1, "b": "x"}, "none": None, "t": (1, 2.5)}
    with ca.group(tmp_path / "g", mode="w") as g, g.transaction():
        g.attrs.update(attrs)
    convert(tmp_path / "g", tmp_path / "g.zarr")
    assert zarr.open_group(tmp_path / "g.zarr", mode="r").attrs.asdict() == _json(attrs)
    convert(tmp_path / "g.zarr", tmp_path / "back")
    with ca.open_group(tmp_path / "back") as b:
        assert b.attrs.getall() == _json(attrs)


def test_progress_counts_bytes_up_to_the_total(group_path, tmp_path):
    seen = []
    convert(group_path, tmp_path / "g.nc", progress=lambda done, total: seen.append((done, total)))
    dones = [d for d, _ in seen]
    totals = {t for _, t in seen}
    assert len(seen) > 5 and dones == sorted(dones) and len(totals) == 1
    assert dones[-1] == totals.pop() > 50 * 4 * 8


def test_carray_groups_at_urls_convert_and_foreign_files_stay_local(tmp_path):
    with ca.group("memory://gconv/src", mode="w") as g:
        g.create_array("a/b", np.arange(10), dims="t")
    try:
        convert("memory://gconv/src", tmp_path / "g.nc")
        convert(tmp_path / "g.nc", "memory://gconv/back")
        with ca.open_group("memory://gconv/back") as b:
            assert b["a/b"][:].tolist() == list(range(10)) and b.dims_of("a/b") == ("t",)
        with pytest.raises(ValueError, match="local paths only"):
            convert("memory://gconv/src", "memory://gconv/g.nc")
    finally:
        import fsspec

        fsspec.filesystem("memory").rm("/gconv", recursive=True)


def test_xarray_decodes_bools_and_datetimes_of_the_netcdf_written(group_path, tmp_path):
    import xarray as xr

    convert(group_path, tmp_path / "g.nc")
    with xr.open_dataset(tmp_path / "g.nc", group="obs") as obs:
        assert obs["ok"].dtype == bool and obs["ok"].values.tolist() == \
            (np.arange(50) % 3 == 0).tolist()
        assert obs["label"].values.tolist() == ["a", "bb", "ccc", "éé"]
    with xr.open_dataset(tmp_path / "g.nc", group="obs/deep") as deep:
        assert deep["when"].values.astype("M8[s]").tolist() == \
            np.arange(4).astype("M8[s]").tolist()
