"""Merging dataset files a block at a time: the bytes merging in memory gives, between .ds
and .nc, errors before anything is written, and memory that does not grow with the files."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from carray.cli.main import main
from carray.errors import UnsupportedDTypeError
from carray.formats import ds, merge
from carray.formats.ds.reader import Reader
from carray.formats.merge import merge_files


def _part(i: int, n: int) -> dict:
    """A dataset of ``n`` times: every ds type, missing values, variables joined along the
    first and the second axis, and variables not along ``time`` at all."""
    rng = np.random.default_rng(i)
    return {
        "time": np.arange(n) + 100 * i,
        "temp": np.ma.MaskedArray(rng.random((n, 3)), mask=rng.random((n, 3)) < 0.3),
        "flag": np.ma.MaskedArray(rng.random(n) < 0.5, mask=rng.random(n) < 0.2),
        "ok": rng.random(n) < 0.5,
        "name": np.ma.MaskedArray(np.array([f"é{j}" * (j % 4) for j in range(n)], dtype=object),
                                  mask=rng.random(n) < 0.3),
        "raw": np.array([bytes([j % 256]) * (j % 5) + b"\0" for j in range(n)], dtype=object),
        "side": rng.random((3, n)).astype("f4"),
        "count": np.arange(n, dtype="i2" if i == 1 else "i4"),  # joined: int32
        "station": "here" if i == 0 else "there",
        "level": np.uint8(7),
        "nodata": None,
        ".": {"time": {".dims": ["time"], "units": "s"}, "temp": {".dims": ["time", "x"]},
              "flag": {".dims": ["time"]}, "ok": {".dims": ["time"]},
              "name": {".dims": ["time"]}, "raw": {".dims": ["time"]},
              "side": {".dims": ["x", "time"]}, "count": {".dims": ["time"]},
              "nodata": {".dims": ["time"], ".type": "int16"}, ".": {"part": i}},
    }


@pytest.fixture
def parts(tmp_path) -> list[str]:
    paths = []
    for i, n in enumerate([7, 0, 13, 1]):
        ds.write(tmp_path / f"p{i}.ds", _part(i, n))
        paths.append(str(tmp_path / f"p{i}.ds"))
    return paths


@pytest.mark.parametrize("block", [1, 40, merge.BLOCK_BYTES])
def test_the_file_is_what_merging_in_memory_writes(parts, tmp_path, monkeypatch, block):
    monkeypatch.setattr(merge, "BLOCK_BYTES", block)  # 1: a row per block
    merge_files(parts, "time", tmp_path / "streamed.ds")
    ds.write(tmp_path / "in_memory.ds", ds.merge(parts, "time"))
    assert (tmp_path / "streamed.ds").read_bytes() == (tmp_path / "in_memory.ds").read_bytes()
    d = ds.read(tmp_path / "streamed.ds")
    assert d["time"].tolist() == [*range(7), *range(200, 213), 300]
    assert d["side"].shape == (3, 21) and d["station"] == "here" and d["."]["."] == {"part": 0}


def _same_values(a, b) -> None:
    if a is None:
        assert b is None
        return
    np.testing.assert_array_equal(np.ma.getmaskarray(a), np.ma.getmaskarray(b))
    assert np.ma.asarray(a).compressed().tolist() == np.ma.asarray(b).compressed().tolist()


def test_between_ds_and_netcdf(parts, tmp_path, monkeypatch):
    netcdf = pytest.importorskip("carray.formats.netcdf", reason="needs netCDF4, the 'netcdf' extra")
    pytest.importorskip("netCDF4", reason="netCDF4 is the 'netcdf' extra (CI has it)")
    monkeypatch.setattr(merge, "BLOCK_BYTES", 64)
    merge_files(parts, "time", tmp_path / "all.nc")
    netcdf.write(tmp_path / "in_memory.nc", ds.merge(parts, "time"))
    expected = netcdf.read(tmp_path / "in_memory.nc")
    got = netcdf.read(tmp_path / "all.nc")
    assert sorted(got) == sorted(expected)
    for key in ds.variables(expected):
        _same_values(got[key], expected[key])
        assert got["."][key] == expected["."][key]
    assert got["."]["time"]["units"] == "s" and got["."]["."] == {"part": 0}
    # And back: NetCDF inputs give what merging them in memory gives.
    for i, path in enumerate(parts):
        netcdf.write(tmp_path / f"p{i}.nc", ds.read(path))
    ncs = [tmp_path / f"p{i}.nc" for i in range(len(parts))]
    merge_files(ncs, "time", tmp_path / "from_nc.ds")
    ds.write(tmp_path / "in_memory.ds", ds.merge([netcdf.read(p) for p in ncs], "time"))
    assert (tmp_path / "from_nc.ds").read_bytes() == (tmp_path / "in_memory.ds").read_bytes()


@pytest.mark.parametrize(("change", "error", "message"), [
    (lambda d: d.pop("temp"), ValueError, "p1.ds: no variable 'temp' to merge along 'time'"),
    (lambda d: d.update(temp=np.zeros((3, 2))) or d["."]["temp"].update(
        {".dims": ["x", "time"]}), ValueError, "variable 'temp': dims ['x', 'time'] in"),
    (lambda d: d.update(temp=np.zeros((2, 4)), side=np.zeros((4, 2), "f4")), ValueError,
     "variable 'side': shape [4, 2] in"),
    (lambda d: d.update(count=np.array(["a", "b"], dtype=object)), UnsupportedDTypeError,
     "variable 'count' is of types"),
])
def test_bad_inputs_are_refused_before_anything_is_written(tmp_path, change, error, message):
    second = _part(1, 2)
    change(second)
    ds.write(tmp_path / "p0.ds", _part(0, 3))
    ds.write(tmp_path / "p1.ds", second)
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        merge_files([tmp_path / "p0.ds", tmp_path / "p1.ds"], "time", tmp_path / "out.ds")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p0.ds", "p1.ds"]


def test_a_dimension_no_variable_has_is_refused(parts, tmp_path):
    with pytest.raises(KeyError, match="no variable along dimension 'depth'"):
        merge_files(parts, "depth", tmp_path / "out.ds")


def test_cli_merge_memory_stays_bounded(tmp_path, capsys, monkeypatch):
    # Three inputs of 16 MiB each; blocks of 1 MiB.
    n = 1 << 20
    rng = np.random.default_rng(0)
    inputs = []
    for i in range(3):
        inputs.append(tmp_path / f"big{i}.ds")
        ds.write(inputs[-1], {
            "time": np.arange(n, dtype="f8") + i * n,
            "v": np.ma.MaskedArray(rng.random(n), mask=rng.random(n) < 0.1),
            ".": {"time": {".dims": ["time"]}, "v": {".dims": ["time"]}}}, fsync=False)
    monkeypatch.setattr(merge, "BLOCK_BYTES", 1 << 20)
    tracemalloc.start()
    try:
        code = main(["ds", "merge", "time", *map(str, inputs), str(tmp_path / "all.ds")])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 0, capsys.readouterr().err
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB for 48 MiB of inputs"
    with Reader(tmp_path / "all.ds") as reader:
        v = reader.header.layouts["v"]
        assert v.shape == (3 * n,) and v.missing
    tail = ds.read(tmp_path / "all.ds", ["time"], {"time": slice(-2, None)})
    assert tail["time"].tolist() == [3 * n - 2, 3 * n - 1]

