"""xarray.open_dataset on ds files (lazy, partial reads) and to_ds."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="xarray is the 'xarray' extra (CI has it)")

from carray import registry  # noqa: E402
from carray.formats import _ds_header, ds  # noqa: E402
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
