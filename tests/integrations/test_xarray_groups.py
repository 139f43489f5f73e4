"""xarray Datasets in carray groups: ca.from_xarray, and the carray_group backend
(open_dataset, open_datatree), against NetCDF files written and read by xarray."""

from __future__ import annotations

import importlib.metadata
import os
import pickle
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="xarray is the 'xarray' extra (CI has it)")
pytest.importorskip("netCDF4", reason="netCDF4 is the 'netcdf' extra (CI has it)")

import carray as ca  # noqa: E402
from carray.integrations.xarray_group_backend import (  # noqa: E402
    GroupBackendArray,
    GroupBackendEntrypoint,
)

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


@pytest.fixture(autouse=True)
def engines_as_declared(monkeypatch):
    """xarray's engines with the ``xarray.backends`` entry points of this tree's
    pyproject.toml, as an install of this tree registers them (the installed metadata
    may come from another checkout)."""
    from xarray.backends import plugins

    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][
        "xarray.backends"]
    installed = [ep for ep in importlib.metadata.entry_points(group="xarray.backends")
                 if ep.name not in declared]
    ours = [importlib.metadata.EntryPoint(name, value, "xarray.backends")
            for name, value in declared.items()]
    engines = plugins.build_engines(importlib.metadata.EntryPoints(installed + ours))
    monkeypatch.setattr(plugins, "list_engines", lambda: engines)
    return engines


@pytest.fixture
def all_reads(count_reads, monkeypatch):
    """``count_reads``, with the scatter reads (``preadv_into``) counted too."""
    from carray.stores.local import LocalHandle

    preadv_into = LocalHandle.preadv_into

    def counting(self, bufs, offset):
        n = preadv_into(self, bufs, offset)
        count_reads["bytes"] += n
        count_reads["reads"].append(n)
        return n

    monkeypatch.setattr(LocalHandle, "preadv_into", counting)
    return count_reads


def cf_dataset(ntime: int = 6) -> xr.Dataset:
    """A small CF dataset: four float variables on (time, lat, lon), a time coordinate in
    days, a string variable, a masked integer variable, a non-dimension coordinate."""
    rng = np.random.default_rng(42)
    shape = (ntime, 4, 5)
    dims = ("time", "lat", "lon")
    temp = (280 + 10 * rng.random(shape)).astype("f4")
    temp[1, 2, 3] = np.nan
    quality = rng.integers(0, 100, shape).astype("f4")
    quality[0, 0, :2] = np.nan  # masked: stored as the int16 fill value
    time = np.datetime64("2000-01-01", "ns") + np.arange(ntime) * np.timedelta64(1, "D")
    ds = xr.Dataset(
        {
            "temp": (dims, temp, {"units": "K", "long_name": "air temperature"}),
            "precip": (dims, rng.random(shape), {"units": "mm"}),
            "wind": (dims, rng.random(shape).astype("f4") * 20, {"units": "m s-1"}),
            "pressure": (dims, 1000 + rng.random(shape), {"units": "hPa"}),
            "quality": (dims, quality, {"long_name": "quality flag"}),
            "station": ("lon", np.array(["Oslo", "Bergen", "Tromsø", "Bodø", "Alta"],
                                        dtype=object), {"long_name": "station name"}),
        },
        coords={
            "time": ("time", time, {"standard_name": "time"}),
            "lat": ("lat", np.linspace(50, 65, 4), {"units": "degrees_north"}),
            "lon": ("lon", np.linspace(5, 25, 5), {"units": "degrees_east"}),
            "elevation": (("lat", "lon"), rng.random((4, 5)) * 1000, {"units": "m"}),
        },
        attrs={"title": "test data", "Conventions": "CF-1.8", "version": np.int32(3)},
    )
    ds["time"].encoding = {"units": "days since 2000-01-01", "calendar": "standard",
                           "dtype": "int32"}
    ds["quality"].encoding = {"dtype": "int16", "_FillValue": np.int16(-999)}
    return ds


def _versions(path) -> list[str]:
    """The ids of the group's kept versions, oldest first."""
    with ca.open_group(path) as g:
        return [v.id for v in reversed(g.versions())]


def _raw(path, **kwargs):
    return xr.open_dataset(path, engine="carray_group", decode_cf=False, **kwargs)


# -- round trips ------------------------------------------------------------------------------

def test_netcdf_to_group_to_xarray(tmp_path):
    nc = tmp_path / "in.nc"
    cf_dataset().to_netcdf(nc, engine="netcdf4")
    with xr.open_dataset(nc, engine="netcdf4") as source:
        ca.from_xarray(source, tmp_path / "g")
        back = xr.open_dataset(tmp_path / "g", engine="carray_group")
        xr.testing.assert_identical(back, source)
    raw = _raw(tmp_path / "g")
    assert raw.time.attrs["units"] == "days since 2000-01-01"
    assert raw.time.dtype == np.int32 and raw.time.values.tolist() == list(range(6))
    assert raw.quality.dtype == np.int16 and raw.quality.attrs["_FillValue"] == -999
    assert raw.quality.values[0, 0, :2].tolist() == [-999, -999]
    assert raw.station.dtype == np.dtype("U6")  # the longest name
    assert raw.temp.attrs["coordinates"] == "elevation"


def test_netcdf_written_by_netcdf4_with_bounds_chars_and_packing(tmp_path):
    import netCDF4

    nc = tmp_path / "raw.nc"
    with netCDF4.Dataset(nc, "w") as f:
        for dim, n in (("time", None), ("x", 3), ("nchar", 4), ("nv", 2)):
            f.createDimension(dim, n)
        t = f.createVariable("time", "f8", ("time",))
        t.setncatts({"units": "hours since 2001-01-01 00:00", "calendar": "gregorian",
                     "bounds": "time_bnds"})
        t[:] = [0, 6, 12]
        f.createVariable("time_bnds", "f8", ("time", "nv"))[:] = [[0, 6], [6, 12], [12, 18]]
        v = f.createVariable("v", "i2", ("time", "x"), fill_value=-1)
        v.setncatts({"scale_factor": 0.5, "add_offset": 100.0, "missing_value": np.int16(-1)})
        v[:] = np.ma.masked_array(np.arange(9).reshape(3, 3), mask=np.eye(3, dtype=bool))
        f.createVariable("code", "S1", ("x", "nchar"))[:] = netCDF4.stringtochar(
            np.array(["ab", "cde", "f"], "S4"))
        names = f.createVariable("name", str, ("x",))
        for i, text in enumerate(["α", "beta", "c"]):
            names[i] = text
        f.setncatts({"title": "raw netCDF4", "numbers": np.array([1, 2, 3], "i4")})
    with xr.open_dataset(nc, engine="netcdf4") as source:
        path = tmp_path / "g"
        ca.from_xarray(source.isel(time=slice(0, 2)), path).close()
        ca.from_xarray(source.isel(time=slice(2, 3)), path, mode="a",
                       append_dim="time").close()
        xr.testing.assert_identical(xr.open_dataset(path, engine="carray_group"), source)
    raw = _raw(path)
    assert "units" not in raw.time_bnds.attrs  # a bounds variable takes its parent's
    assert raw.v.dtype == np.int16 and raw.v.values[2, 2] == -1
    assert raw.code.values.tolist() == [b"ab", b"cde", b"f"]


def test_xarray_to_group_to_netcdf(tmp_path):
    ds = cf_dataset()
    ca.from_xarray(ds, tmp_path / "g")
    opened = xr.open_dataset(tmp_path / "g")  # the engine found by sniffing
    xr.testing.assert_identical(opened, ds)
    opened.to_netcdf(tmp_path / "out.nc", engine="netcdf4")
    with xr.open_dataset(tmp_path / "out.nc", engine="netcdf4") as back:
        xr.testing.assert_identical(back, ds)
        assert back.quality.encoding["dtype"] == np.int16
        assert back.time.encoding["units"] == "days since 2000-01-01"


def test_in_memory_round_trip():
    ds = cf_dataset()
    g = ca.from_xarray(ds, None)
    assert ds.time.encoding["dtype"] == "int32" and "units" not in ds.time.attrs  # untouched
    assert g.url is None
    assert set(g.keys()) == set(map(str, ds.variables))
    assert g.dims == {"time": 6, "lat": 4, "lon": 5}
    assert g.dims_of("temp") == ("time", "lat", "lon")
    assert g.attrs["title"] == "test data" and g["temp"].attrs["units"] == "K"
    xr.testing.assert_identical(xr.open_dataset(g, engine="carray_group"), ds)
    xr.testing.assert_identical(xr.open_dataset(g), ds)  # sniffed: an open Group


def test_a_dataset_over_an_open_group_keeps_its_shape_as_the_group_grows():
    ds = cf_dataset()
    g = ca.from_xarray(ds.isel(time=slice(0, 3)), None)
    x = xr.open_dataset(g, engine="carray_group")
    ca.from_xarray(ds.isel(time=slice(3, 6)), g, mode="a", append_dim="time")
    xr.testing.assert_identical(x, ds.isel(time=slice(0, 3)))
    assert x.temp[::-1].shape == (3, 4, 5)
    xr.testing.assert_identical(xr.open_dataset(g, engine="carray_group"), ds)


def test_decoding_options_are_xarrays():
    g = ca.from_xarray(cf_dataset(), None)
    raw = xr.open_dataset(g, engine="carray_group", mask_and_scale=False, decode_times=False)
    assert raw.quality.dtype == np.int16 and raw.time.dtype == np.int32
    assert "elevation" in raw.coords  # decode_coords still on
    plain = xr.open_dataset(g, engine="carray_group", decode_coords=False)
    assert "elevation" in plain.data_vars


def test_other_dtypes_round_trip():
    times = np.array(["2000-01-01", "NaT", "2000-01-03"], dtype="datetime64[ns]")
    ds = xr.Dataset({
        "flag": ("x", np.array([True, False, True])),
        "lag": ("x", np.array([1, 2, 3], dtype="timedelta64[h]").astype("timedelta64[ns]")),
        "when": ("x", times),
        "scalar": ((), 3.5, {"units": "m"}),
        "raw": ("x", np.array([b"a", b"bb", b"ccc"], dtype=object)),
        "z": ("x", np.array([1 + 2j, 3, 4])),
        "empty": (("e", "x"), np.zeros((0, 3), "i2")),
    }, coords={"x": [10, 20, 30]})
    g = ca.from_xarray(ds, None)
    assert g["raw"].dtype == np.dtype("S3") and g["when"].dtype == np.int64
    assert g["lag"].attrs["units"] == "hours"
    xr.testing.assert_identical(xr.open_dataset(g, engine="carray_group"), ds)


def test_cftime_calendars_append_with_the_stored_units():
    def days(start, n):
        return xr.date_range(start, periods=n, calendar="noleap", use_cftime=True)

    ds = xr.Dataset({"v": ("time", np.arange(4.0))}, coords={"time": days("2000-02-27", 4)})
    g = ca.from_xarray(ds.isel(time=slice(0, 2)), None)
    ca.from_xarray(ds.isel(time=slice(2, 4)), g, mode="a", append_dim="time")
    assert g["time"].attrs["calendar"] == "noleap" and g["time"][:].tolist() == [0, 1, 2, 3]
    xr.testing.assert_identical(xr.open_dataset(g, engine="carray_group"), ds)


def test_times_the_stored_units_cannot_hold_are_refused():
    ds = xr.Dataset({"v": ("time", [1.0, 2.0])},
                    coords={"time": np.array(["2000-01-01", "2000-01-02"], "datetime64[ns]")})
    g = ca.from_xarray(ds, None)
    half = xr.Dataset({"v": ("time", [3.0])},
                      coords={"time": np.array(["2000-01-02T12"], "datetime64[ns]")})
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="units='hours since"):
        ca.from_xarray(half, g, mode="a", append_dim="time")
    assert g["time"][:].tolist() == [0, 1]


def test_scale_offset_and_dtype_from_encoding():
    ds = cf_dataset()
    enc = {"wind": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 10.0,
                    "_FillValue": np.int16(-1)}}
    g = ca.from_xarray(ds, None, encoding=enc)
    assert g["wind"].dtype == np.int16 and g["wind"].attrs["scale_factor"] == 0.01
    back = xr.open_dataset(g, engine="carray_group")
    np.testing.assert_allclose(back.wind.values, ds.wind.values, atol=0.006)


def test_mode_a_adds_and_replaces_variables_mode_w_replaces_all():
    g = ca.from_xarray(cf_dataset()[["temp"]], None)
    ca.from_xarray(xr.Dataset({"extra": ("lon", np.arange(5))}), g, mode="a")
    assert {"temp", "extra", "time"} <= set(g.keys())
    ca.from_xarray(xr.Dataset({"extra": ("lon", np.arange(5) * 2)}), g, mode="a")
    assert g["extra"][:].tolist() == [0, 2, 4, 6, 8]
    ca.from_xarray(xr.Dataset({"only": ("x", [1, 2])}, attrs={"a": 1}), g, mode="w")
    assert list(g.keys()) == ["only"] and dict(g.attrs) == {"a": 1}


def test_writes_breaking_a_shared_dimension_are_refused_before_any_change():
    g = ca.from_xarray(xr.Dataset({"v": ("t", [1.0, 2.0])}), None)
    longer = xr.Dataset({"w": ("t", [1.0, 2.0, 3.0])})
    for group in (None, "sub/deeper"):  # a sub-group shares its ancestors' dimensions
        with pytest.raises(ValueError, match="'t' is 3 long in the dataset but 2 in 'v'"):
            ca.from_xarray(longer, g, mode="a", group=group)
        assert list(g) == ["v"]
    ca.from_xarray(longer.rename(t="u"), g, mode="a", group="sub")
    with pytest.raises(ValueError, match="'u' is 2 long in the dataset but 3 in 'sub/w'"):
        ca.from_xarray(xr.Dataset({"x": ("u", [1, 2])}), g, mode="a")  # sub shares it
    ca.from_xarray(xr.Dataset({"v": ("t", [1.0, 2.0, 3.0])}), g, mode="a")  # v replaced
    assert g.dims["t"] == 3


# -- appending --------------------------------------------------------------------------------

def test_append_along_time_one_version_each(tmp_path):
    ds, path = cf_dataset(), tmp_path / "g"
    parts = [ds.isel(time=part) for part in (slice(0, 2), slice(2, 4), slice(4, 6))]
    ca.from_xarray(parts[0], path, storage={"versions": "all"}).close()
    seen = _versions(path)
    for new in parts[1:]:
        new["time"].encoding = {"units": "hours since 1990-01-01"}  # the stored units win
        ca.from_xarray(new, path, mode="a", append_dim="time").close()
        now = _versions(path)
        assert now[:-1] == seen and len(now) == len(seen) + 1
        seen = now
    joined = xr.concat(parts, "time", data_vars="minimal", coords="minimal",
                       compat="identical")
    xr.testing.assert_identical(xr.open_dataset(path, engine="carray_group"), joined)
    raw = _raw(path)
    assert raw.time.values.tolist() == list(range(6)) and raw.time.dtype == np.int32
    assert raw.time.attrs["units"] == "days since 2000-01-01"
    assert raw.quality.values[0, 0, 0] == -999
    before = xr.open_dataset(path, engine="carray_group", version=seen[-2])
    xr.testing.assert_identical(before, ds.isel(time=slice(0, 4)))


def test_append_in_memory_and_attrs_update():
    ds = cf_dataset()
    g = ca.from_xarray(ds.isel(time=slice(0, 3)), None)
    later = ds.isel(time=slice(3, 6))
    later.attrs["history"] = "appended"
    assert ca.from_xarray(later, g, mode="a", append_dim="time") is g
    assert g.attrs["history"] == "appended" and g.dims["time"] == 6
    back = xr.open_dataset(g, engine="carray_group")
    xr.testing.assert_identical(back.drop_attrs(deep=False), ds.drop_attrs(deep=False))


@pytest.mark.parametrize("change, message", [
    (lambda d: d.drop_vars("temp"), "lacks \\['temp'\\]"),
    (lambda d: d.assign(new=d.temp * 2), "adds \\['new'\\]"),
    (lambda d: d.assign(temp=d.temp.transpose("time", "lon", "lat")), "dims"),
    (lambda d: d.isel(lat=slice(0, 3)), "'lat' has length 3"),
    (lambda d: d.assign(temp=d.temp.astype(str)), "temp"),
    (lambda d: d.assign(precip=d.time.broadcast_like(d.precip)), "precip"),
    (lambda d: d.rename({"time": "t"}), "append_dim 'time' is not a dimension"),
    (lambda d: d.assign_coords(lon=d.lon + 1), "coordinate 'lon' differs"),
])
def test_append_mismatches_are_refused_and_change_nothing(tmp_path, change, message):
    ds, path = cf_dataset(), tmp_path / "g"
    ca.from_xarray(ds.isel(time=slice(0, 3)), path).close()
    versions = _versions(path)
    with pytest.raises(ValueError, match=message):
        ca.from_xarray(change(ds.isel(time=slice(3, 6))), path, mode="a", append_dim="time")
    assert _versions(path) == versions
    xr.testing.assert_identical(xr.open_dataset(path, engine="carray_group"),
                                ds.isel(time=slice(0, 3)))


def test_append_longer_strings_are_refused():
    g = ca.from_xarray(xr.Dataset({"name": ("t", ["a", "bb"])}), None)
    ca.from_xarray(xr.Dataset({"name": ("t", ["cc"])}), g, mode="a", append_dim="t")
    assert g["name"][:].tolist() == ["a", "bb", "cc"]
    with pytest.raises(ValueError, match="longer than the stored width"):
        ca.from_xarray(xr.Dataset({"name": ("t", ["ddd"])}), g, mode="a", append_dim="t")


def test_bad_arguments():
    ds = cf_dataset()
    with pytest.raises(ValueError, match="mode"):
        ca.from_xarray(ds, None, mode="x")
    with pytest.raises(ValueError, match="append_dim needs mode='a'"):
        ca.from_xarray(ds, None, append_dim="time")
    with pytest.raises(ValueError, match="xarray.Dataset or DataTree, got DataArray"):
        ca.from_xarray(ds.temp, None)
    with pytest.raises(ValueError, match="not a variable"):
        ca.from_xarray(ds, None, encoding={"nope": {"chunks": (1, 1, 1)}})
    with pytest.raises(ValueError, match="unknown keys \\['zlib'\\]"):
        ca.from_xarray(ds, None, encoding={"temp": {"zlib": True}})
    with pytest.raises(ValueError, match="chunks"):
        ca.from_xarray(ds, None, encoding={"temp": {"chunks": (2, 2)}})
    with pytest.raises(ValueError, match="cparams"):
        ca.from_xarray(ds, None, encoding={"temp": {"compressor": "nope"}})
    with pytest.raises(ValueError, match="missing strings"):
        ca.from_xarray(xr.Dataset({"s": ("x", np.array(["a", None], dtype=object))}), None)
    with pytest.raises(ValueError, match="names must be"):
        ca.from_xarray(xr.Dataset({"a/b": ("x", [1])}), None)
    with pytest.raises(ValueError, match="attributes of 'x'"):
        ca.from_xarray(xr.Dataset({"x": ("x", [1], {"bad": object()})}), None)


def test_append_to_nothing_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no group to append to"):
        ca.from_xarray(cf_dataset(), tmp_path / "missing", mode="a", append_dim="time")
    with pytest.raises(ValueError, match="no array of the group has the dimension 'time'"):
        g = ca.from_xarray(xr.Dataset({"x": ("x", [1])}), None)
        ca.from_xarray(cf_dataset(), g, mode="a", append_dim="time")


# -- reading ----------------------------------------------------------------------------------

def test_chunks_are_carrays_and_storage_encoding_is_honoured(tmp_path):
    enc = {"temp": {"chunks": {"time": 2, "lat": 2}, "compressor": "zstd"},
           "precip": {"chunks": (3, 4, 5), "cparams": {"cname": "zlib", "clevel": 1}}}
    ca.from_xarray(cf_dataset(), tmp_path / "g", encoding=enc).close()
    g = ca.open_group(tmp_path / "g")
    assert tuple(g["temp"].chunks) == (2, 2, 5) and g["temp"].cparams.cname == "zstd"
    assert tuple(g["precip"].chunks) == (3, 4, 5) and g["precip"].cparams.cname == "zlib"
    x = xr.open_dataset(tmp_path / "g", engine="carray_group", chunks={})
    assert x.temp.chunks == ((2, 2, 2), (2, 2), (5,))
    assert x.precip.chunks == ((3, 3), (4,), (5,))
    wind = tuple(g["wind"].chunks)
    assert x.wind.data.chunksize == wind and x.wind.encoding["chunks"] == wind
    assert x.wind.encoding["preferred_chunks"] == dict(zip(("time", "lat", "lon"), wind,
                                                          strict=True))
    xr.testing.assert_identical(x.compute(), cf_dataset())


def test_dask_chunks_become_carrays_written_slab_by_slab(monkeypatch):
    ds = cf_dataset().chunk({"time": 2, "lat": 3})
    created = {}
    create_array = ca.Group.create_array

    def noting(self, name, data=None, **kwargs):
        created[name] = np.shape(data)
        return create_array(self, name, data, **kwargs)

    monkeypatch.setattr(ca.Group, "create_array", noting)
    g = ca.from_xarray(ds, None)
    assert created["temp"] == (2, 4, 5) and created["lat"] == (4,)  # a slab, then appends
    xr.testing.assert_identical(xr.open_dataset(g, engine="carray_group"), cf_dataset())
    assert tuple(g["temp"].chunks) == (2, 3, 5)
    assert tuple(g["temp"].chunks) != tuple(ca.from_xarray(cf_dataset(), None)["temp"].chunks)
    g = ca.from_xarray(ds, None, encoding={"temp": {"chunks": (6, 4, 5)}})  # explicit wins
    assert tuple(g["temp"].chunks) == (6, 4, 5)


def test_open_datatree_and_sub_groups(tmp_path):
    ds, path = cf_dataset(), tmp_path / "g"
    ca.from_xarray(ds, path).close()
    run = xr.Dataset({"bias": (("lat",), np.arange(4.0))}, coords={"lat": ds.lat},
                     attrs={"run": "a"})
    ca.from_xarray(run, path, mode="a", group="model/run1").close()
    ca.from_xarray(run.assign_attrs(run="b"), path, mode="a", group="model/run2").close()
    tree = xr.open_datatree(path, engine="carray_group")
    assert sorted(tree.groups) == ["/", "/model", "/model/run1", "/model/run2"]
    xr.testing.assert_identical(tree.to_dataset(inherit=False), ds)
    # the tree keeps lat once, in the root: the sub-group inherits it
    xr.testing.assert_identical(tree["model/run1"].to_dataset()["bias"], run["bias"])
    assert tree["model/run1"].attrs == {"run": "a"}
    assert tree["model/run2"].attrs == {"run": "b"}
    sub = xr.open_dataset(path, engine="carray_group", group="model/run1")
    xr.testing.assert_identical(sub, run)
    part = xr.open_datatree(path, engine="carray_group", group="model")
    assert sorted(part.groups) == ["/", "/run1", "/run2"]
    assert sorted(xr.open_datatree(path).groups) == sorted(tree.groups)  # sniffed
    with pytest.raises(ValueError, match="no such group"):
        xr.open_dataset(path, engine="carray_group", group="model/run3")


def test_a_datatree_is_written_in_one_version_and_read_back(tmp_path):
    ds = cf_dataset()
    run = xr.Dataset({"bias": (("lat",), np.arange(4.0), {"units": "K"})},
                     attrs={"run": "a"})
    tree = xr.DataTree.from_dict({"/": ds, "/model/run1": run,
                                  "/model/run2": run.assign_attrs(run="b") * 2})
    path = tmp_path / "g"
    ca.from_xarray(tree, path, encoding={"/model/run1": {"bias": {"chunks": (2,)}}},
                   storage={"versions": "all"}).close()
    assert len(_versions(path)) == 2  # the group made, then everything in one version
    back = xr.open_datatree(path, engine="carray_group")
    xr.testing.assert_identical(back, tree)
    with ca.open_group(path) as g:
        assert tuple(g["model/run1/bias"].chunks) == (2,)
        assert g.dims_of("model/run1/bias") == ("lat",)  # the root's lat, inherited
    with pytest.raises(ValueError, match="does not have: \\['nope'\\]"):
        ca.from_xarray(tree, None, encoding={"/nope": {}})
    with pytest.raises(ValueError, match="append_dim needs mode='a' and a Dataset"):
        ca.from_xarray(tree, path, mode="a", append_dim="time")


def test_open_at_a_tag(tmp_path):
    path = tmp_path / "g"
    ca.from_xarray(cf_dataset(ntime=2), path).close()
    with ca.open_group(path, mode="a") as g:
        g.snapshot("first")
    ca.from_xarray(cf_dataset().isel(time=slice(2, 6)), path, mode="a",
                   append_dim="time").close()
    old = xr.open_dataset(path, engine="carray_group", tag="first")
    xr.testing.assert_identical(old, cf_dataset(ntime=2))
    assert xr.open_dataset(path, engine="carray_group").sizes["time"] == 6


def test_opening_reads_no_data_and_slices_read_only_themselves(tmp_path, all_reads,
                                                               monkeypatch):
    count_reads = all_reads
    big = np.random.default_rng(1).random((60, 100, 100))  # 4.8 MB, hardly compressible
    ds = xr.Dataset({"v": (("t", "y", "x"), big)}, coords={"t": np.arange(60)})
    ca.from_xarray(ds, tmp_path / "g", encoding={"v": {"chunks": (10, 50, 50)}}).close()
    keys = []
    raw_getitem = GroupBackendArray._raw_getitem

    def noting(self, key):
        keys.append((self.member, key))
        return raw_getitem(self, key)

    monkeypatch.setattr(GroupBackendArray, "_raw_getitem", noting)
    count_reads["bytes"] = 0
    x = xr.open_dataset(tmp_path / "g", engine="carray_group")
    assert [m for m, _ in keys] == ["t"]  # the index only, for xarray's index
    assert count_reads["bytes"] < 50_000  # metadata and the 60 stamps, not v's data
    keys.clear()
    count_reads["bytes"] = 0
    part = x.v.isel(t=slice(12, 14), y=[3, 70], x=slice(0, 10)).values
    np.testing.assert_array_equal(part, big[12:14][:, [3, 70]][:, :, :10])
    assert len(keys) == 1 and keys[0][0] == "v"
    assert keys[0][1][0] == slice(12, 14, 1)
    assert count_reads["bytes"] < 2 * 10 * 50 * 50 * 8  # at most the two chunks touched
    count_reads["bytes"] = 0
    np.testing.assert_array_equal(x.v.values, big)
    assert count_reads["bytes"] > 10 * 2 * 10 * 50 * 50 * 8  # what a whole read costs
    np.testing.assert_array_equal(x.v[-1, ::-30, 7].values, big[-1, ::-30, 7])


def test_lazy_variables_pickle_without_an_open_handle(tmp_path):
    ca.from_xarray(cf_dataset(), tmp_path / "g").close()
    x = xr.open_dataset(tmp_path / "g", engine="carray_group")
    clone = pickle.loads(pickle.dumps(x.temp.variable))
    np.testing.assert_array_equal(clone.values, cf_dataset().temp.values)
    inner = x.precip.variable._data
    while not isinstance(inner, GroupBackendArray):
        inner = inner.array
    state = pickle.loads(pickle.dumps(inner))
    assert not state.is_open and state.source._root is None


def test_datasets_pickle_and_compute_elsewhere(tmp_path):
    ca.from_xarray(cf_dataset(), tmp_path / "g").close()
    for chunks in (None, {}):
        x = xr.open_dataset(tmp_path / "g", engine="carray_group", chunks=chunks)
        clone = pickle.loads(pickle.dumps(x))
        xr.testing.assert_identical(clone.compute(), cf_dataset())


def test_guess_can_open_recognises_groups_only(tmp_path, engines_as_declared):
    ca.from_xarray(cf_dataset(), tmp_path / "g").close()
    ca.carray(np.arange(3), rootdir=tmp_path / "a.carray", mode="w").flush()
    entry = GroupBackendEntrypoint()
    assert entry.guess_can_open(tmp_path / "g") and entry.guess_can_open(str(tmp_path / "g"))
    assert not entry.guess_can_open(tmp_path / "a.carray")
    assert not entry.guess_can_open(tmp_path / "missing")
    assert not entry.guess_can_open(b"bytes")
    claims = [name for name, e in engines_as_declared.items()
              if e.guess_can_open(str(tmp_path / "g"))]
    assert claims == ["carray_group"]


def test_a_group_at_an_fsspec_url(tmp_path):
    pytest.importorskip("fsspec", reason="fsspec is the 'remote' extra (CI has it)")
    ds, url = cf_dataset(), f"memory://xarray-groups/{tmp_path.name}/g"
    ca.from_xarray(ds.isel(time=slice(0, 3)), url, storage_options={}).close()
    ca.from_xarray(ds.isel(time=slice(3, 6)), url, mode="a", append_dim="time").close()
    x = xr.open_dataset(url, engine="carray_group", storage_options={}, chunks={})
    xr.testing.assert_identical(pickle.loads(pickle.dumps(x)).compute(), ds)


def test_importing_carray_leaves_xarray_unloaded():
    code = ("import sys, carray\n"
            "assert 'xarray' not in sys.modules\n"
            "assert carray.from_xarray.__module__ == 'carray.integrations.xarray_groups'\n"
            "assert 'xarray' in sys.modules\n")
    src = str(Path(ca.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_open_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="by its path"):
        xr.open_dataset(b"not a group", engine="carray_group")
    g = ca.from_xarray(cf_dataset(), None)
    with pytest.raises(ValueError, match="version=, tag= and as_of="):
        xr.open_dataset(g, engine="carray_group", version="abc")
