"""``carray ds ls|meta|cat|select|merge`` and ``carray convert``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from carray.cli.main import main
from carray.formats import ds
from carray.integrations.convert import read_any

netCDF4 = pytest.importorskip("netCDF4", reason="netCDF4 is the 'netcdf' extra (CI has it)")

DATA = Path(__file__).parent.parent / "data" / "ds"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_ls_lists_variables_types_and_dims(capsys):
    code, out, _ = run(capsys, "ds", "ls", DATA / "missing_values.ds")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "dims: n=10, y=3, x=4"
    assert "temp    float32  (y=3, x=4) masked" in lines
    assert "nomask  float64  (n=10)" in lines


def test_ls_several_files_and_json(capsys):
    code, out, _ = run(capsys, "ds", "ls", DATA / "medium.ds", DATA / "medium.nc")
    assert code == 0 and out.count("dims: a=200, b=50, c=10000") == 2
    code, out, _ = run(capsys, "ds", "ls", "--json", DATA / "objects_empty_none.ds")
    listing = json.loads(out)[str(DATA / "objects_empty_none.ds")]
    by_name = {v["name"]: v for v in listing["variables"]}
    assert by_name["nodata"]["size"] is None and by_name["zobytes"]["type"] == "str"
    assert listing["dims"] == {"e": 0, "k": 3, "n": 3}


def test_meta_prints_the_header(capsys):
    code, out, _ = run(capsys, "ds", "meta", DATA / "attributes.ds")
    assert code == 0 and json.loads(out) == ds.read_header(DATA / "attributes.ds")
    code, out, _ = run(capsys, "ds", "meta", DATA / "attributes.ds", "x")
    assert json.loads(out)["unicode"] == "é中"
    code, _, err = run(capsys, "ds", "meta", DATA / "attributes.ds", "nope")
    assert code == 1 and "no variable 'nope'" in err


def test_cat_prints_rows(capsys):
    code, out, _ = run(capsys, "ds", "cat", "temp", DATA / "missing_values.ds")
    assert code == 0
    assert out.splitlines() == ["0.0 -- 2.0 3.0", "-- -- 6.0 7.0", "8.0 9.0 10.0 --"]
    _, out, _ = run(capsys, "ds", "cat", "zobytes", DATA / "objects_empty_none.ds")
    assert out.splitlines() == ["x", "\\x00\\x01", ""]
    _, out, _ = run(capsys, "ds", "cat", "scalar_i", DATA / "multidim_scalars.ds")
    assert out == "-7\n"
    _, out, _ = run(capsys, "ds", "cat", "lat", DATA / "multidim_scalars.nc")
    assert out.split() == ["-10.0", "0.0", "10.0"]


def test_select_variables_and_ranges_between_formats(capsys, tmp_path):
    out_nc = tmp_path / "part.nc"
    code, _, err = run(capsys, "ds", "select", "grid", "lat", "y=1:", "x=0,2",
                       DATA / "multidim_scalars.ds", out_nc)
    assert code == 0, err
    full = ds.read(DATA / "multidim_scalars.ds")
    code, _, _ = run(capsys, "convert", out_nc, tmp_path / "part.ds")
    assert code == 0
    back = ds.read(tmp_path / "part.ds")
    assert sorted(k for k in back if k != ".") == ["grid", "lat"]
    np.testing.assert_array_equal(back["grid"], full["grid"][:, 1:][:, :, [0, 2]])
    np.testing.assert_array_equal(back["lat"], full["lat"][1:])
    code, _, _ = run(capsys, "ds", "select", "t=0", DATA / "multidim_scalars.ds",
                     tmp_path / "t0.ds")
    d = ds.read(tmp_path / "t0.ds")
    assert d["cube4"].shape == (3, 4, 2) and d["."]["cube4"][".dims"] == ["y", "x", "c"]


def _grid(path) -> None:
    ds.write(path, {"time": np.arange(4.0), "lat": np.array([-10.0, 0.0, 10.0]),
                    "temp": np.arange(12.0).reshape(4, 3), "n": np.arange(5), "other": np.ones(5),
                    ".": {"time": {".dims": ["time"], "units": "s"}, "lat": {".dims": ["lat"]},
                          "temp": {".dims": ["time", "lat"]}, "n": {".dims": ["n"]},
                          "other": {".dims": ["n"]}}})


@pytest.mark.parametrize("ext", [".ds", ".nc"])
def test_select_keeps_the_coordinates_of_the_variables_dimensions(capsys, tmp_path, ext):
    _grid(tmp_path / "grid.ds")
    code, _, err = run(capsys, "ds", "select", "temp", "time=1:3", tmp_path / "grid.ds",
                       tmp_path / f"part{ext}")
    assert code == 0, err
    back = read_any(str(tmp_path / f"part{ext}"))
    assert sorted(k for k in back if k != ".") == ["lat", "temp", "time"]  # not n, other
    assert back["time"].tolist() == [1.0, 2.0] and back["lat"].tolist() == [-10.0, 0.0, 10.0]
    assert back["."]["time"]["units"] == "s"
    np.testing.assert_array_equal(back["temp"], np.arange(12.0).reshape(4, 3)[1:3])


def test_select_of_a_coordinate_alone(capsys, tmp_path):
    _grid(tmp_path / "grid.ds")
    code, _, err = run(capsys, "ds", "select", "time", tmp_path / "grid.ds", tmp_path / "t.ds")
    assert code == 0, err
    assert [k for k in ds.read(tmp_path / "t.ds") if k != "."] == ["time"]


def test_merge_along_a_dimension(capsys, tmp_path):
    for i in range(3):
        ds.write(tmp_path / f"p{i}.ds", {
            "time": np.arange(2) + 2 * i, "v": np.ma.MaskedArray([i, i], mask=[i == 1, 0]),
            "station": "here", ".": {"time": {".dims": ["time"]}, "v": {".dims": ["time"]},
                                     ".": {"part": i}}})
    code, _, err = run(capsys, "ds", "merge", "time", *(tmp_path / f"p{i}.ds" for i in range(3)),
                       tmp_path / "all.nc")
    assert code == 0, err
    code, _, _ = run(capsys, "convert", tmp_path / "all.nc", tmp_path / "all.ds")
    d = ds.read(tmp_path / "all.ds")
    assert d["time"].tolist() == [0, 1, 2, 3, 4, 5]
    assert d["v"].tolist() == [0, 0, None, 1, 2, 2]
    assert d["station"] == "here" and d["."]["."] == {"part": 0}


def test_convert_round_trip_and_unlimited(capsys, tmp_path):
    nc = tmp_path / "m.nc"
    code, _, _ = run(capsys, "convert", DATA / "missing_values.ds", nc, "--unlimited", "n")
    assert code == 0
    with netCDF4.Dataset(nc) as f:
        assert f.dimensions["n"].isunlimited()
    code, _, _ = run(capsys, "convert", nc, tmp_path / "m.ds")
    before, after = ds.read(DATA / "missing_values.ds"), ds.read(tmp_path / "m.ds")
    for name in ("count", "temp", "small", "nomask", "ok"):
        np.testing.assert_array_equal(np.ma.getmaskarray(after[name]),
                                      np.ma.getmaskarray(before[name]))
        assert np.ma.getdata(after[name])[~np.ma.getmaskarray(after[name])].tolist() == \
            np.ma.getdata(before[name])[~np.ma.getmaskarray(before[name])].tolist()
    code, _, _ = run(capsys, "convert", DATA / "medium.ds", tmp_path / "as_nc.data",
                     "--to", "netcdf")
    assert code == 0
    with netCDF4.Dataset(tmp_path / "as_nc.data") as f:
        assert f.variables["w"][-1] == 9999


@pytest.mark.parametrize("argv, message", [
    (["convert", "{bad}", "{tmp}/x.ds"], "bad.ds at offset 0: not a ds file"),
    (["convert", "{data}/medium.ds", "{tmp}/x.h9"], "no dataset reader or writer for"),
    (["convert", "{data}/medium.ds", "{tmp}/x.ds", "--unlimited", "a"],
     "ds output does not take unlimited"),
    (["ds", "cat", "nope", "{data}/medium.ds"], "no variable 'nope'"),
    (["ds", "ls", "{bad}"], "not a ds file"),
    (["ds", "select", "a=x", "{data}/medium.ds", "{tmp}/x.ds"], "bad selection 'a=x'"),
    (["ds", "select", "q=1", "{data}/medium.ds", "{tmp}/x.ds"], "no dimension 'q'"),
    (["ds", "merge", "a", "{data}/medium.ds"], "at least one input and an output"),
    (["ds", "meta", "{tmp}/missing.ds"], "No such file"),
])
def test_bad_input_is_a_one_line_error(capsys, tmp_path, argv, message):
    bad = tmp_path / "bad.ds"
    bad.write_bytes(b"\x89HDF\r\n")
    argv = [a.format(bad=bad, tmp=tmp_path, data=DATA) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert err.startswith("carray: error:") and message in err and "Traceback" not in err


def test_ds_without_a_verb_shows_usage(capsys):
    code, _, err = run(capsys, "ds")
    assert code == 2 and "ls" in err and "merge" in err


@pytest.mark.parametrize("verb", ["select", "merge"])
@pytest.mark.parametrize("flag", [[], ["--fsync"]], ids=["default", "fsync"])
def test_ds_outputs_are_synced_only_with_the_flag(capsys, tmp_path, monkeypatch, verb, flag):
    src = tmp_path / "in.ds"
    ds.write(src, {"x": np.arange(4), ".": {"x": {".dims": ["n"]}}})
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    args = ["x", src] if verb == "select" else ["n", src, src]
    code, _, err = run(capsys, "ds", verb, *args, tmp_path / "out.ds", *flag)
    assert code == 0, err
    assert len(synced) == (2 if flag else 0)  # the file, then its directory
    assert ds.read(tmp_path / "out.ds")["x"].tolist() == ([0, 1, 2, 3] if verb == "select"
                                                         else [0, 1, 2, 3] * 2)
