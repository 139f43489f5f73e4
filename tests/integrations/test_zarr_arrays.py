"""Zarr v3 arrays through the registry and ``carray convert``, both ways."""

from __future__ import annotations

import json

import numpy as np
import pytest

zarr = pytest.importorskip("zarr", reason="zarr is the 'zarr' extra")

import carray as ca  # noqa: E402
from carray import registry  # noqa: E402
from carray.cli.main import main  # noqa: E402
from carray.convert import convert  # noqa: E402
from carray.problems import Problem, tally  # noqa: E402


@pytest.fixture
def values():
    return (np.arange(600 * 70, dtype="f4").reshape(600, 70) % 97) / 7


def test_npy_to_zarr_to_carray_and_back(values, tmp_path):
    np.save(tmp_path / "x.npy", values)
    assert main(["convert", str(tmp_path / "x.npy"), str(tmp_path / "x.zarr")]) == 0
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="r")
    assert z.metadata.zarr_format == 3
    assert np.array_equal(z[:], values)
    assert registry.sniff(tmp_path / "x.zarr").name == "zarr"

    assert main(["convert", str(tmp_path / "x.zarr"), str(tmp_path / "y.carray")]) == 0
    with ca.open(tmp_path / "y.carray", mode="r") as y:
        assert np.array_equal(y[:], values)
        assert y.chunks == tuple(z.chunks)  # the source's chunks are kept

    convert(tmp_path / "y.carray", tmp_path / "z.zarr",
            cparams=ca.CParams(cname="zstd", clevel=3))
    z2 = zarr.open_array(str(tmp_path / "z.zarr"), mode="r")
    assert np.array_equal(z2[:], values)
    assert "blosc" in str(z2.compressors).lower()


def test_attributes_travel_both_ways(values, tmp_path):
    a = ca.carray(values, rootdir=tmp_path / "a.carray", mode="w")
    a.attrs["units"] = "K"
    a.close()
    convert(tmp_path / "a.carray", tmp_path / "a.zarr")
    assert dict(zarr.open_array(str(tmp_path / "a.zarr")).attrs) == {"units": "K"}
    convert(tmp_path / "a.zarr", tmp_path / "b.carray")
    with ca.open(tmp_path / "b.carray", mode="r") as b:
        assert b.attrs["units"] == "K"


def test_info_head_verify(values, tmp_path, capsys):
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=values.shape, chunks=(100, 70),
                          dtype=values.dtype)
    z[:] = values
    assert main(["info", str(tmp_path / "x.zarr")]) == 0
    out = capsys.readouterr().out
    assert "zarr" in out and "[600, 70]" in out
    assert main(["head", str(tmp_path / "x.zarr")]) == 0
    assert len(capsys.readouterr().out.splitlines()) < 30
    assert main(["verify", str(tmp_path / "x.zarr")]) == 0
    assert "6 chunks" in capsys.readouterr().out


def test_verify_names_a_damaged_chunk(values, tmp_path):
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=values.shape, chunks=(100, 70),
                          dtype=values.dtype)
    z[:] = values
    chunk = tmp_path / "x.zarr" / "c" / "2" / "0"
    chunk.write_bytes(b"not zstd" * 10)
    problems, checked = tally(registry.verify(tmp_path / "x.zarr"))
    assert checked == 5
    assert len(problems) == 1 and isinstance(problems[0], Problem)
    assert "200:300" in str(problems[0])


def test_a_zarr_group_is_not_an_array(tmp_path):
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(ca.errors.FormatError):
        registry.sniff(tmp_path / "g.zarr")


def test_interrupted_conversion_leaves_nothing(values, tmp_path, monkeypatch):
    from carray import convert as convert_module

    def stop(source, progress):  # one block written, then Ctrl-C
        yield 0, np.asarray(source[:100])
        raise KeyboardInterrupt

    a = ca.carray(values, rootdir=tmp_path / "a.carray", mode="w")
    a.close()
    monkeypatch.setattr(convert_module, "_row_blocks", stop)
    with pytest.raises(KeyboardInterrupt):
        convert(tmp_path / "a.carray", tmp_path / "a.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.carray"]


def test_numpy_attributes_to_zarr_and_back(tmp_path, capsys):
    attrs = {"_FillValue": np.float64("nan"), "scale": np.float32(0.25), "top": np.inf,
             "z": np.complex64(1 - 2j), "when": np.datetime64("2020-01-01T00:00"),
             "span": (1, np.timedelta64(3, "s")), "units": "K", "levels": [1, 2.5]}
    with ca.carray(np.arange(10.0), rootdir=tmp_path / "a.carray", mode="w") as a:
        a.attrs.update(attrs)
    assert main(["convert", str(tmp_path / "a.carray"), str(tmp_path / "a.zarr")]) == 0
    stored = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())["attributes"]
    assert stored["_FillValue"] == {"__carray__": {"type": "scalar", "dtype": "<f8",
                                                   "value": "NaN"}}
    assert stored["top"] == {"__carray__": {"type": "float", "value": "Infinity"}}
    assert stored["units"] == "K" and stored["levels"] == [1, 2.5]  # plain stays plain
    assert main(["info", str(tmp_path / "a.zarr")]) == 0
    out = capsys.readouterr().out
    assert "attr _FillValue : nan" in out and "(1-2j)" in out
    convert(tmp_path / "a.zarr", tmp_path / "b.carray")
    with ca.open(tmp_path / "b.carray", mode="r") as b:
        got = b.attrs.getall()
    assert list(got) == list(attrs)
    assert type(got["_FillValue"]) is np.float64 and np.isnan(got["_FillValue"])
    for k in ("scale", "top", "z", "when", "units", "levels", "span"):
        assert type(got[k]) is type(attrs[k]) and got[k] == attrs[k], k
    assert got["z"].dtype == np.complex64 and got["when"].dtype == attrs["when"].dtype
