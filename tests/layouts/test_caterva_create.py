"""Caterva 0.7 frames created by carray (``format="caterva"``), not only read."""

from __future__ import annotations

import json
from pathlib import Path

import blosc2
import numpy as np
import pytest

import carray as ca
from carray.core.params import CParams
from carray.layouts import FORMATS
from carray.layouts.b2nd.frame import Frame

DATA = Path(__file__).parent.parent / "data" / "caterva"


def _make(tmp_path, arr, name="a.caterva", **kwargs):
    path = str(tmp_path / name)
    kwargs.setdefault("chunks", tuple(max(1, n // 3) for n in arr.shape))
    kwargs.setdefault("blocks", tuple(max(1, n // 7) for n in arr.shape))
    a = ca.carray(arr, rootdir=path, mode="w", format="caterva", **kwargs)
    a.flush()
    return path, a


def test_caterva_is_a_format_name():
    assert "caterva" in FORMATS


@pytest.mark.parametrize("dtype", ["f8", "i2", "u1", "c16", "<U3", "S5"])
def test_round_trip_through_our_reader(tmp_path, dtype):
    arr = (np.arange(40 * 30, dtype="i8") % 97).reshape(40, 30).astype(dtype)
    path, a = _make(tmp_path, arr)
    b = ca.open(path, mode="r")
    assert b.dtype == arr.dtype  # kept in the carray metalayer: caterva's has none
    assert b.shape == arr.shape and b.chunks == a.chunks and b.blocks == a.blocks
    np.testing.assert_array_equal(b[:], arr)
    np.testing.assert_array_equal(b[7, 3:11], arr[7, 3:11])


def test_frame_is_caterva_not_b2nd(tmp_path):
    arr = np.arange(24_000, dtype="f8").reshape(40, 30, 20)
    path, _ = _make(tmp_path, arr, chunks=(10, 10, 10), blocks=(5, 5, 5))
    with Frame(path) as f:
        assert f.kind == "caterva"
        assert "b2nd" not in f.meta_raw
        assert f.meta["caterva"] == [0, 3, [40, 30, 20], [10, 10, 10], [5, 5, 5]]
        assert f.dtype == np.dtype("u8")  # what a reader without our metalayer sees


def test_metalayer_laid_out_as_caterva_writes_it(tmp_path):
    """Same msgpack layout as caterva 0.7.3's own frames (the fixtures)."""
    fixture = json.loads((DATA / "MANIFEST.json").read_text())["fixtures"][0]
    with Frame(DATA / fixture["path"]) as theirs:
        shape, chunks, blocks = theirs.shape, theirs.chunkshape, theirs.blockshape
        want = theirs.meta_raw["caterva"]
        itemsize = theirs.header.typesize
    arr = np.zeros(shape, f"u{itemsize}")
    path, _ = _make(tmp_path, arr, chunks=chunks, blocks=blocks)
    with Frame(path) as ours:
        assert ours.meta_raw["caterva"] == want


def test_python_blosc2_opens_it_as_caterva_writes_it(tmp_path):
    arr = np.arange(24_000, dtype="f8").reshape(40, 30, 20)
    path, a = _make(tmp_path, arr, chunks=(10, 10, 10), blocks=(5, 5, 5),
                    cparams=CParams(cname="zstd", clevel=5))
    theirs = blosc2.open(path)
    fixture = blosc2.open(str(DATA / "cat_f8_2d_zstd.caterva"))
    assert type(theirs) is type(fixture)  # python-blosc2 sees both as a plain SChunk
    assert theirs.meta["caterva"] == [0, 3, [40, 30, 20], [10, 10, 10], [5, 5, 5]]
    assert theirs.nchunks == 4 * 3 * 2 and theirs.typesize == 8
    first = np.frombuffer(theirs.decompress_chunk(0), "f8").reshape(2, 2, 2, 5, 5, 5)
    # chunk 0 is stored block by block: block (0, 0, 0) first
    np.testing.assert_array_equal(first[0, 0, 0], arr[:5, :5, :5])


def test_grows_and_stays_caterva(tmp_path):
    arr = np.arange(600, dtype="f4").reshape(20, 30)
    path, a = _make(tmp_path, arr, chunks=(8, 10), blocks=(4, 5))
    a.append(np.ones((5, 30), "f4"))
    a.flush()
    b = ca.open(path, mode="r")
    assert b.dtype == np.dtype("f4")
    np.testing.assert_array_equal(b[:], np.concatenate([arr, np.ones((5, 30), "f4")]))
    with Frame(path) as f:
        assert f.kind == "caterva" and f.shape == (25, 30)


def test_sparse_caterva_frame(tmp_path):
    arr = np.arange(400, dtype="i4").reshape(20, 20)
    path, _ = _make(tmp_path, arr, name="s.caterva", storage={"contiguous": False})
    assert Path(path).is_dir()
    np.testing.assert_array_equal(ca.open(path, mode="r")[:], arr)


def test_at_most_eight_dimensions(tmp_path):
    arr = np.zeros((2,) * 9, "u1")
    with pytest.raises(ValueError, match="8 dimensions"):
        ca.carray(arr, rootdir=str(tmp_path / "nine.caterva"), format="caterva",
                  chunks=(1,) * 9, blocks=(1,) * 9)
    path, _ = _make(tmp_path, np.zeros((2,) * 8, "u1"), chunks=(1,) * 8, blocks=(1,) * 8)
    assert ca.open(path, mode="r").ndim == 8


def test_default_chunks_and_blocks(tmp_path):
    arr = np.arange(24_000, dtype="f8").reshape(40, 30, 20)
    path = str(tmp_path / "d.caterva")
    ca.carray(arr, rootdir=path, format="caterva").flush()
    b = ca.open(path, mode="r")
    assert b.blocks is not None
    np.testing.assert_array_equal(b[:], arr)
