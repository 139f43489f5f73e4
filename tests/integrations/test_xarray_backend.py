"""xarray.open_dataset on ds files (lazy, partial reads) and to_ds."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="xarray is the 'xarray' extra (CI has it)")

from carray import registry  # noqa: E402
from carray.formats import ds  # noqa: E402
from carray.formats.ds import header as _ds_header  # noqa: E402
from carray.integrations.xarray_backend import (  # noqa: E402
    DsBackendArray,
    DsBackendEntrypoint,
    to_ds,
)

DATA = Path(__file__).parent.parent / "data" / "ds"




def test_open_dataset_finds_the_backend_by_itself():
    x = xr.open_dataset(DATA / "multidim_scalars.ds")
    d = ds.read(DATA / "multidim_scalars.ds")
    assert set(x.data_vars) == {k for k in d if k != "."}
    for name in x.data_vars:
        np.testing.assert_array_equal(x[name].values, d[name])
        assert list(x[name].dims) == d["."][name][".dims"]
    assert x["grid"].attrs == {"units": "K"} and x.attrs == {"Conventions": "CF-1.8"}
    assert x.grid.dtype == np.float64 and x.img.dtype == np.uint8


def test_masked_values_become_nan_and_strings_none():
    x = xr.open_dataset(DATA / "missing_values.ds", engine="carray_ds")
    d = ds.read(DATA / "missing_values.ds")
    for name in ("count", "temp", "small"):
        np.testing.assert_array_equal(np.isnan(x[name].values), d[name].mask)
        np.testing.assert_array_equal(x[name].values[~d[name].mask], d[name].compressed())
    assert x.zlabel.values.tolist() == [None, "bb", "ccc", None, "", "f", None, "h", "i", None]
    ok = x.ok.values
    assert np.isnan(ok[[0, 5]]).all() and ok[[1, 2]].tolist() == [0.0, 1.0]
    raw = xr.open_dataset(DATA / "missing_values.ds", mask_and_scale=False)
    assert raw.temp.values[0, 1] == -999.0  # its missing_value stands for masked values


def test_variables_are_lazy_and_indexing_reads_only_the_selection(tmp_path, count_reads):
    big = np.arange(500 * 200, dtype="f8").reshape(500, 200)  # 800 kB
    path = tmp_path / "big.ds"
    ds.write(path, {"v": big, "w": np.arange(3), ".": {"v": {".dims": ["t", "x"]}}})
    count_reads["bytes"] = 0
    x = xr.open_dataset(path)
    # the header only, and the first bytes xarray's guess_can_open sniffs (the registry's)
    assert count_reads["bytes"] <= _ds_header.PREFIX + registry.HEAD_BYTES
    count_reads["bytes"] = 0
    part = x.v.isel(t=slice(10, 15), x=[3, 1]).values
    np.testing.assert_array_equal(part, big[10:15][:, [3, 1]])
    assert count_reads["bytes"] <= _ds_header.PREFIX + 5 * 200 * 8
    np.testing.assert_array_equal(x.v[-1, ::-50].values, big[-1, ::-50])


def test_backend_array_pickles_without_an_open_file():
    array = DsBackendArray(str(DATA / "medium.ds"), "w", (10000,), np.dtype("<i2"))
    clone = pickle.loads(pickle.dumps(array))
    assert clone.path == array.path and clone.key == "w"
    x = xr.open_dataset(DATA / "medium.ds")
    lazy = pickle.loads(pickle.dumps(x.w.variable))
    np.testing.assert_array_equal(lazy.values, np.arange(10000))


def test_guess_can_open_sniffs_magic_then_suffix(tmp_path):
    entry = DsBackendEntrypoint()
    assert entry.guess_can_open(DATA / "medium.ds")
    assert not entry.guess_can_open(DATA / "medium.nc")
    renamed = tmp_path / "data.bin"
    renamed.write_bytes((DATA / "medium.ds").read_bytes())
    assert entry.guess_can_open(renamed)  # magic wins over the suffix
    fake = tmp_path / "fake.ds"
    fake.write_bytes(b"CDF\x01")
    assert not entry.guess_can_open(fake)
    assert entry.guess_can_open(tmp_path / "not-yet.ds")  # unreadable: the suffix decides
    assert not entry.guess_can_open(object())
    np.testing.assert_array_equal(xr.open_dataset(renamed, engine="carray_ds").w,
                                  np.arange(10000))


def test_to_ds_round_trip(tmp_path):
    time = np.array(["2020-01-01", "2020-01-02", "2020-01-04"], dtype="M8[ns]")
    original = xr.Dataset(
        {"temp": (("time", "x"), np.array([[1.0, np.nan], [3.0, 4.0], [np.nan, 6.0]],
                                          dtype="f4"), {"units": "K"}),
         "count": ("time", np.array([1, 2, 3], dtype="i2")),
         "name": ("x", np.array(["a", "bé"], dtype=object)),
         "flag": ("x", np.array([True, False]))},
        coords={"time": time, "x": [10, 20]},
        attrs={"title": "xr", "n": 3})
    path = tmp_path / "x.ds"
    to_ds(original, path)
    back = xr.open_dataset(path)
    xr.testing.assert_identical(back.load(), original)
    header = ds.read_header(path)
    assert header["temp"][".missing"] is True and "_FillValue" not in header["temp"]
    assert header["time"]["units"].startswith("days since")
    assert header["."] == {"title": "xr", "n": 3}


def test_to_ds_of_an_opened_file_is_the_same_data(tmp_path):
    x = xr.open_dataset(DATA / "missing_values.ds")
    to_ds(x, tmp_path / "again.ds")
    again = xr.open_dataset(tmp_path / "again.ds")
    xr.testing.assert_identical(again.load(), x.load())
    d = ds.read(tmp_path / "again.ds")
    np.testing.assert_array_equal(d["count"].mask, ds.read(DATA / "missing_values.ds")[
        "count"].mask)


# -- carray directories, .b2nd frames and tables ---------------------------------------------------

import carray as ca  # noqa: E402
from carray.integrations.xarray_backend import (  # noqa: E402
    CarrayBackendArray,
    CarrayBackendEntrypoint,
)


@pytest.fixture
def cube(tmp_path):
    values = np.random.default_rng(0).random((48, 100, 80)).astype("f4")
    a = ca.carray(values, rootdir=tmp_path / "temp.carray", mode="w", chunks=(4, 50, 80))
    a.attrs["dims"] = ["time", "y", "x"]
    a.attrs["units"] = "K"
    a.close()
    return tmp_path / "temp.carray", values


@pytest.mark.parametrize("suffix", [".carray", ".b2nd", ".bcolz"])
def test_open_dataset_finds_carray_containers_by_sniffing(tmp_path, suffix):
    values = np.arange(60.0).reshape(6, 10)
    fmt = {".carray": "superchunk", ".b2nd": "b2nd", ".bcolz": "bcolz"}[suffix]
    path = tmp_path / f"v{suffix}"
    ca.carray(values, rootdir=path, mode="w", format=fmt).close()
    assert CarrayBackendEntrypoint().guess_can_open(str(path))
    x = xr.open_dataset(path)  # no engine given: found by guess_can_open
    assert list(x.data_vars) == ["v"]
    assert x["v"].dims == ("v_dim_0", "v_dim_1")
    assert np.array_equal(x["v"].values, values)


def test_dims_from_attributes_and_outer_indexing(cube, count_reads):
    path, values = cube
    x = xr.open_dataset(path)
    var = x["temp"]
    assert var.dims == ("time", "y", "x") and var.attrs["units"] == "K"
    count_reads["bytes"] = 0
    assert np.array_equal(var.isel(time=3).values, values[3])
    one_frame = count_reads["bytes"]
    count_reads["bytes"] = 0
    assert np.array_equal(xr.open_dataset(path)["temp"].values, values)
    assert one_frame < count_reads["bytes"] / 2  # lazy: only the chunks of frame 3
    assert np.array_equal(var.isel(time=[1, 7], x=[0, 5]).values, values[[1, 7]][:, :, [0, 5]])
    assert np.array_equal(var[2:9:3, ::2, -1].values, values[2:9:3, ::2, -1])


def test_dask_chunks_are_carrays(cube):
    pytest.importorskip("dask", reason="dask is a test dependency")
    path, values = cube
    x = xr.open_dataset(path, chunks={})
    assert x["temp"].data.chunks == ((4,) * 12, (50, 50), (80,))
    assert float(x["temp"].sum().compute()) == pytest.approx(float(values.sum()))


def test_a_table_is_a_dataset_of_columns(tmp_path):
    n = 1000
    t = ca.ctable({"id": np.arange(n), "x": np.linspace(0, 1, n),
                   "name": np.array([f"s{i % 7}" for i in range(n)], dtype=object)},
                  rootdir=tmp_path / "t.ctable", mode="w")
    t.attrs["title"] = "obs"
    t.close()
    x = xr.open_dataset(tmp_path / "t.ctable")
    assert list(x.data_vars) == ["id", "x", "name"]
    assert x.sizes == {"row": n} and x.attrs == {"title": "obs"}
    assert x["name"][8:10].values.tolist() == ["s1", "s2"]
    assert np.array_equal(x["id"][[5, 900]].values, [5, 900])


def test_backend_array_pickles_without_its_handle(cube):
    path, values = cube
    arr = CarrayBackendArray(str(path), None, values.shape, values.dtype)
    arr._raw_getitem((slice(0, 1),))  # opens the array
    clone = pickle.loads(pickle.dumps(arr))
    assert np.array_equal(clone._raw_getitem((slice(2, 3), slice(None), slice(None))),
                          values[2:3])


def test_not_a_carray_container(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    assert not CarrayBackendEntrypoint().guess_can_open(str(tmp_path / "x.txt"))
    assert not CarrayBackendEntrypoint().guess_can_open(str(DATA / "multidim_scalars.ds"))
    assert not CarrayBackendEntrypoint().guess_can_open(str(tmp_path / "missing"))


def test_urls_open_with_the_engine_named():
    pytest.importorskip("fsspec", reason="fsspec is a test dependency")
    url = "memory://xarray-backend/v.carray"
    ca.carray(np.arange(100.0).reshape(10, 10), rootdir=url, mode="w").close()
    x = xr.open_dataset(url, engine="carray", storage_options={})
    assert np.array_equal(x["v"][2].values, np.arange(20.0, 30.0))
