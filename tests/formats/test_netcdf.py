"""NetCDF <-> ds conversion, checked against the NetCDF companions of the ds fixtures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from carray.errors import FormatError
from carray.formats import ds

netCDF4 = pytest.importorskip("netCDF4", reason="netCDF4 is the 'netcdf' extra (CI has it)")
from carray.formats import netcdf  # noqa: E402

DATA = Path(__file__).parent.parent / "data" / "ds"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
WITH_NC = sorted(f["name"] for f in MANIFEST["fixtures"] if "netcdf" in f)


def assert_values(actual, expected, mask):
    np.testing.assert_array_equal(np.ma.getmaskarray(actual), mask)
    data = np.asarray(np.ma.getdata(actual))
    expected = np.asarray(expected)
    assert data.shape == expected.shape
    assert data[~mask].tolist() == expected[~mask].tolist()


def expected_nc(name):
    meta = json.loads((DATA / f"{name}.nc.expected.json").read_text())
    with np.load(DATA / f"{name}.nc.expected.npz") as z:
        return meta, {k: z[k] for k in z.files}


@pytest.mark.parametrize("name", WITH_NC)
def test_netcdf_companions_read_to_expected(name):
    meta, values = expected_nc(name)
    d = netcdf.read(DATA / f"{name}.nc")
    assert sorted(k for k in d if k != ".") == sorted(meta["var_kinds"])
    for var in meta["var_kinds"]:
        mask = values.get(f"{var}.mask", np.zeros(np.shape(values[var]), bool))
        assert_values(d[var], values[var], mask)
        assert d["."][var] == meta["read_meta"][var]
    assert d["."]["."] == meta["read_meta"].get(".", {})
    assert netcdf.read_header(DATA / f"{name}.nc") == {
        k: v for k, v in d["."].items()}


@pytest.mark.parametrize("name", WITH_NC)
def test_ds_fixture_to_netcdf_matches_the_companion(tmp_path, name):
    """Converting the .ds gives a NetCDF file netCDF4 reads like ds-format's own .nc."""
    d = ds.read(DATA / f"{name}.ds")
    out = tmp_path / f"{name}.nc"
    netcdf.write(out, d)
    _, companion = expected_nc(name)
    with netCDF4.Dataset(out) as f:
        for var, data in d.items():
            if var == ".":
                continue
            got = f.variables[var]
            if var in companion:  # the variables ds-format could write to NetCDF
                mask = companion.get(f"{var}.mask", np.zeros(companion[var].shape, bool))
                assert_values(got[...], companion[var], mask)
            assert list(got.dimensions[:np.ndim(data)]) == d["."][var][".dims"]
        assert {k: f.getncattr(k) for k in f.ncattrs()}.keys() == d["."]["."].keys()
    back = netcdf.read(out)
    for var, data in d.items():
        if var == "." or d["."][var][".type"] == "unicode":
            continue
        assert_values(back[var], np.ma.getdata(data), np.ma.getmaskarray(data))


def test_round_trip_through_netcdf_keeps_types_masks_and_attributes(tmp_path):
    d = {
        "t": np.arange(4, dtype="i8"),
        "temp": np.ma.MaskedArray(np.arange(12, dtype=">f4").reshape(4, 3),
                                  mask=np.eye(4, 3, dtype=bool)),
        "count": np.ma.MaskedArray(np.arange(4, dtype="u2"), mask=[0, 1, 0, 0]),
        "flag": np.ma.MaskedArray([True, False, True, True], mask=[0, 0, 1, 0]),
        "raw": np.array([b"a\x00b", b"", b"\xff\xfe", b"xyz"], dtype=object),
        "name": np.array(["α", "", "中文", "long text"], dtype=object),
        "scalar": np.float64(2.5),
        ".": {"t": {".dims": ["t"], "units": "days"},
              "temp": {".dims": ["t", "x"], "units": "K", "valid": [1.0, 2.0]},
              "count": {".dims": ["t"], "_FillValue": 9},
              "flag": {".dims": ["t"]}, "raw": {".dims": ["t"]}, "name": {".dims": ["t"]},
              ".": {"title": "round trip", "meta": {"k": None}, "on": True}},
    }
    path = tmp_path / "x.nc"
    netcdf.write(path, d, unlimited=["t"])
    with netCDF4.Dataset(path) as f:
        assert f.dimensions["t"].isunlimited() and not f.dimensions["x"].isunlimited()
        assert f.variables["count"].getncattr("_FillValue") == 9
        assert f.variables["flag"].getncattr("dtype") == "bool"
    back = netcdf.read(path)
    for var in ("t", "temp", "count", "flag"):
        assert_values(back[var], np.ma.getdata(d[var]), np.ma.getmaskarray(d[var]))
        assert np.ma.getdata(back[var]).dtype.name == np.ma.getdata(d[var]).dtype.name
    assert back["raw"].tolist() == [b"a\x00b", b"", b"\xff\xfe", b"xyz"]
    assert back["name"].tolist() == d["name"].tolist()
    assert back["scalar"] == 2.5
    assert back["."]["temp"]["units"] == "K" and back["."]["temp"]["valid"] == [1.0, 2.0]
    assert back["."]["flag"][".type"] == "bool" and "dtype" not in back["."]["flag"]
    assert back["."]["raw"][".dims"] == ["t"] and back["."]["raw"][".type"] == "str"
    assert back["."]["."] == {"title": "round trip", "meta": '{"k": null}', "on": 1}
    # ...and on to ds and back: same values.
    ds.write(tmp_path / "x.ds", back)
    again = ds.read(tmp_path / "x.ds")
    for var in ("t", "temp", "count", "flag", "raw", "name"):
        assert_values(again[var], np.ma.getdata(back[var]), np.ma.getmaskarray(back[var]))


def test_unlimited_dimensions_are_read(tmp_path):
    path = tmp_path / "u.nc"
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("time", None)
        f.createDimension("x", 2)
        v = f.createVariable("v", "f4", ("time", "x"), fill_value=-1.0)
        v[0:3, :] = np.arange(6).reshape(3, 2)
        v[4, :] = [8, 9]  # row 3 is never written: fill values, so masked
    d = netcdf.read(path)
    assert d["v"].shape == (5, 2) and d["."]["v"][".dims"] == ["time", "x"]
    assert d["v"].mask[3].all() and not d["v"].mask[[0, 1, 2, 4]].any()
    ds.write(tmp_path / "u.ds", d)
    r = ds.read(tmp_path / "u.ds")
    assert r["v"].mask[3].all() and r["v"][4].tolist() == [8, 9]


def test_selection_reads_a_hyperslab(tmp_path):
    d = netcdf.read(DATA / "multidim_scalars.nc", ["grid", "lat", "scalar_f"],
                    {"y": [2, 0], "x": slice(1, 3), "t": 1})
    full = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(d["grid"], full[1][[2, 0]][:, 1:3])
    assert d["."]["grid"][".dims"] == ["y", "x"] and d["."]["grid"][".size"] == [2, 2]
    assert d["lat"].tolist() == [10.0, -10.0] and d["scalar_f"] == 273.15
    with pytest.raises(KeyError, match="no variable 'nope'"):
        netcdf.read(DATA / "medium.nc", ["nope"])
    with pytest.raises(KeyError, match="no dimension 'q'"):
        netcdf.read(DATA / "medium.nc", sel={"q": 1})


def test_not_netcdf_is_a_format_error(tmp_path):
    path = tmp_path / "fake.nc"
    path.write_bytes(b"ds-1.0\n{}\n")
    with pytest.raises(FormatError, match="fake.nc.*not a readable NetCDF"):
        netcdf.read(path)
    with pytest.raises(FileNotFoundError):
        netcdf.read(tmp_path / "missing.nc")


def test_missing_netcdf4_gives_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "netCDF4", None)
    with pytest.raises(ImportError, match=r"pip install 'carray\[netcdf\]'"):
        netcdf.read(DATA / "medium.nc")
