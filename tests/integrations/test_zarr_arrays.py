"""Zarr v3 arrays through the registry and ``carray convert``, both ways."""

from __future__ import annotations

import json

import numpy as np
import pytest

zarr = pytest.importorskip("zarr", reason="zarr is the 'zarr' extra")

import carray as ca  # noqa: E402
from carray import registry  # noqa: E402
from carray.cli.main import main  # noqa: E402
from carray.core.problems import Problem, tally  # noqa: E402
from carray.errors import UnstorableAttributeError  # noqa: E402
from carray.integrations.convert import convert  # noqa: E402


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
    fmt = registry.sniff(tmp_path / "g.zarr")
    assert fmt.name == "zarr-group" and fmt.kind != "array"


def test_interrupted_conversion_leaves_nothing(values, tmp_path, monkeypatch):
    from carray.integrations import convert as convert_module

    def stop(source, progress):  # one block written, then Ctrl-C
        yield 0, np.asarray(source[:100])
        raise KeyboardInterrupt

    a = ca.carray(values, rootdir=tmp_path / "a.carray", mode="w")
    a.close()
    monkeypatch.setattr(convert_module, "_row_blocks", stop)
    with pytest.raises(KeyboardInterrupt):
        convert(tmp_path / "a.carray", tmp_path / "a.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.carray"]


def _zarr_with(path, values, compressors):
    z = zarr.create_array(str(path), shape=values.shape, dtype=values.dtype, chunks=(100, 70),
                          compressors=compressors)
    z[:] = values


@pytest.mark.parametrize("dst", ["y.carray", "y.b2nd", "y.bcolz"])
def test_convert_keeps_a_blosc_codec(values, tmp_path, dst):
    from zarr.codecs import BloscCodec

    _zarr_with(tmp_path / "x.zarr", values,
               BloscCodec(cname="zstd", clevel=7, shuffle="bitshuffle"))
    assert main(["convert", str(tmp_path / "x.zarr"), str(tmp_path / dst)]) == 0
    with ca.open(tmp_path / dst, mode="r") as y:
        assert (y.cparams.cname, y.cparams.clevel, y.cparams.shuffle) == \
            ("zstd", 7, ca.BITSHUFFLE)
        assert np.array_equal(y[:], values)


def test_convert_changes_only_the_level_asked_for(values, tmp_path):
    from zarr.codecs import BloscCodec

    _zarr_with(tmp_path / "x.zarr", values, BloscCodec(cname="zlib", clevel=4, shuffle="noshuffle"))
    assert main(["convert", str(tmp_path / "x.zarr"), str(tmp_path / "y"), "--clevel", "1"]) == 0
    with ca.open(tmp_path / "y", mode="r") as y:
        assert (y.cparams.cname, y.cparams.clevel, y.cparams.shuffle) == \
            ("zlib", 1, ca.NOSHUFFLE)


@pytest.mark.parametrize(("codec", "expected"), [
    (lambda: zarr.codecs.ZstdCodec(level=12), ("zstd", 9, ca.NOSHUFFLE)),
    (lambda: zarr.codecs.ZstdCodec(level=0), ("zstd", 3, ca.NOSHUFFLE)),  # zstd's default
    (lambda: zarr.codecs.GzipCodec(level=6), ("zlib", 6, ca.NOSHUFFLE)),
    (lambda: None, ("lz4", 0, ca.SHUFFLE)),  # nothing compressed: level 0
])
def test_other_zarr_compressors_become_the_nearest_blosc_codec(values, tmp_path, codec,
                                                                expected):
    _zarr_with(tmp_path / "x.zarr", values, codec())
    convert(tmp_path / "x.zarr", tmp_path / "y.carray")
    with ca.open(tmp_path / "y.carray", mode="r") as y:
        assert (y.cparams.cname, y.cparams.clevel, y.cparams.shuffle) == expected
        assert np.array_equal(y[:], values)


def test_info_shows_the_codecs_configuration(values, tmp_path, capsys):
    from zarr.codecs import BloscCodec

    _zarr_with(tmp_path / "x.zarr", values, BloscCodec(cname="zstd", clevel=7, shuffle="shuffle"))
    assert main(["info", str(tmp_path / "x.zarr")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("codecs"))
    assert "blosc(" in line and "cname=zstd" in line and "clevel=7" in line
    assert "shuffle=shuffle" in line


def test_convert_help_says_what_becomes_of_a_zarr_codec(capsys):
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "A Zarr input's Blosc codec is kept as it is" in text
    assert "nearest Blosc codec: zstd as zstd, gzip and zlib as zlib, lz4 as lz4" in text


def test_numpy_attributes_to_zarr_and_back(tmp_path, capsys):
    attrs = {"_FillValue": np.float64(-9999.0), "scale": np.float32(0.25), "top": np.inf,
             "span": (1, np.int16(3)), "units": "K", "levels": [1, 2.5]}
    with ca.carray(np.arange(10.0, dtype="f4"), rootdir=tmp_path / "a.carray", mode="w") as a:
        a.attrs.update(attrs)
    assert main(["convert", str(tmp_path / "a.carray"), str(tmp_path / "a.zarr")]) == 0
    text = (tmp_path / "a.zarr" / "zarr.json").read_text()
    stored = json.loads(text)["attributes"]
    # As zarr-python and xarray write them: _FillValue as xarray's base64 of a float64.
    assert stored["_FillValue"] == "AAAAAICHw8A=" and "__carray__" not in text
    assert stored["top"] == float("inf") and stored["span"] == [1, 3]
    assert stored["units"] == "K" and stored["levels"] == [1, 2.5] and stored["scale"] == 0.25
    pytest.importorskip("xarray")
    from xarray.backends.zarr import FillValueCoder  # how xarray reads it

    assert FillValueCoder.decode(stored["_FillValue"], "float32") == -9999.0
    assert main(["info", str(tmp_path / "a.zarr")]) == 0
    assert "attr _FillValue : -9999.0" in capsys.readouterr().out
    convert(tmp_path / "a.zarr", tmp_path / "b.carray")
    with ca.open(tmp_path / "b.carray", mode="r") as b:
        got = b.attrs.getall()
    assert list(got) == list(attrs)
    assert type(got["_FillValue"]) is np.float32 and got["_FillValue"] == -9999  # its type
    assert got == {**attrs, "_FillValue": -9999.0, "scale": 0.25, "span": [1, 3]}
    with ca.carray(np.arange(3.0), rootdir=tmp_path / "c.carray", mode="w") as a:
        a.attrs["z"] = np.complex64(1 - 2j)
    with pytest.raises(UnstorableAttributeError, match="'z'"):
        convert(tmp_path / "c.carray", tmp_path / "c.zarr")
    assert not (tmp_path / "c.zarr").exists()
