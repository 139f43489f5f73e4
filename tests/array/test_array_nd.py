"""N-d chunk grids in the carray: defaults, partial reads, persistence and errors.

The indexing paths themselves are compared with numpy in test_array_properties.py;
these are the behaviours around them.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import carray as ca
from carray.chunks.grid import NDGrid
from carray.chunks.io import ChunkIO
from carray.chunks.shapes import CacheSizes, default_blocks
from carray.codecs.blosc import Decoder
from carray.engine import writer as engine_writer
from carray.layouts.superchunk.layout import SuperchunkLayout

WHERE = ["memory", "disk"]


def make(where, tmp_path, data, **kw):
    root = None if where == "memory" else tmp_path / "a"
    return ca.carray(data, rootdir=root, **kw)


@pytest.fixture
def cube() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.integers(-1000, 1000, size=(40, 33, 21)).astype("f8")


def test_nd_data_gets_nd_chunks_and_blocks_by_default(cube):
    a = ca.carray(cube)
    assert len(a.chunks) == 3 and a.blocks is not None
    grid = NDGrid(cube.shape, a.chunks, a.blocks, 8)  # valid
    assert grid.nchunks >= 1
    np.testing.assert_array_equal(a[:], cube)
    # 1-d data keeps bcolz's runs of rows with Blosc's own blocks.
    b = ca.carray(np.arange(1000))
    assert b.blocks is None and len(b.chunks) == 1
    # chunklen means whole rows, as in bcolz.
    c = ca.carray(cube, chunklen=7)
    assert c.chunks == (7, 33, 21) and c.blocks is None


def test_default_blocks_follow_the_caches():
    small = default_blocks((96, 96, 96), 8, CacheSizes(32 * 2**10, 256 * 2**10, 8 * 2**20))
    large = default_blocks((96, 96, 96), 8, CacheSizes(64 * 2**10, 4 * 2**20, 64 * 2**20))
    assert math.prod(small) <= math.prod(large)
    for blocks in (small, large):
        # Blocks tile the chunk with little padding.
        assert all(96 % b == 0 or -(-96 // b) * b - 96 < b for b in blocks)


@pytest.mark.parametrize("where", WHERE)
def test_one_item_decodes_one_block(where, tmp_path, cube, monkeypatch):
    a = make(where, tmp_path, cube, chunks=(20, 33, 21), blocks=(4, 11, 7))
    if where == "disk":
        a = ca.open(tmp_path / "a", mode="r")
    fetched = []
    real = ChunkIO.decode_blocks

    def spy(self, nchunk, blocks, out, grid):
        fetched.append(list(blocks))
        return real(self, nchunk, blocks, out, grid)

    def runs_spy(real_runs, where):
        # The short path of boxes decodes runs of blocks (in memory, or fetched).
        def spy_runs(self, *args, **kwargs):
            got = real_runs(self, *args, **kwargs)
            starts, count = args[where:where + 2]
            if got is not None:
                fetched.append([s + j for s in starts for j in range(count)])
            return got
        return spy_runs

    monkeypatch.setattr(ChunkIO, "decode_blocks", spy)
    monkeypatch.setattr(Decoder, "decode_runs", runs_spy(Decoder.decode_runs, 1))
    monkeypatch.setattr(Decoder, "fetch_runs", runs_spy(Decoder.fetch_runs, 2))
    assert a[23, 12, 15] == cube[23, 12, 15]
    np.testing.assert_array_equal(a[23, 12:14, 15:17], cube[23, 12:14, 15:17])
    # The first read takes the single-item path (a byte range), the second one block.
    assert fetched == [[(3 // 4) * 9 + (12 // 11) * 3 + 15 // 7]]


def test_disk_reads_fetch_only_the_needed_bytes(tmp_path, cube, monkeypatch):
    ca.carray(cube, chunks=(20, 33, 21), blocks=(2, 11, 7), rootdir=tmp_path / "a").close()
    a = ca.open(tmp_path / "a", mode="r")
    read = []
    real = SuperchunkLayout.chunk_reader

    def counting(self, nchunk):
        read_at, size = real(self, nchunk)

        def counted(offset, length):
            data = read_at(offset, length)
            read.append(len(data))
            return data

        return counted, size

    monkeypatch.setattr(SuperchunkLayout, "chunk_reader", counting)
    np.testing.assert_array_equal(a[5, 0:11, 0:7], cube[5, 0:11, 0:7])
    chunk_cbytes = a.cbytes / a.grid.nchunks
    assert 0 < sum(read) < chunk_cbytes / 4


def test_storage_records_chunk_and_block_shapes(tmp_path, cube):
    ca.carray(cube, chunks=(20, 33, 21), blocks=(4, 11, 7), rootdir=tmp_path / "a").close()
    storage = json.loads((tmp_path / "a" / "meta" / "storage").read_text())
    assert storage["chunkshape"] == [20, 33, 21] and storage["blockshape"] == [4, 11, 7]
    a = ca.open(tmp_path / "a", mode="r")
    assert a.shape == (40, 33, 21) and a.versions()[0].shape == (40, 33, 21)
    assert a.chunks == (20, 33, 21) and a.blocks == (4, 11, 7)


@pytest.mark.parametrize("where", WHERE)
def test_any_axis_grows_and_shrinks_and_persists(where, tmp_path, cube):
    a = make(where, tmp_path, cube, chunks=(16, 10, 8), blocks=(4, 5, 4), dflt=7.5)
    a.resize((45, 40, 9))
    want = np.full((45, 40, 9), 7.5)
    want[:40, :33, :9] = cube[:, :, :9]
    np.testing.assert_array_equal(a[:], want)
    a.resize((12, 5, 30))
    want2 = np.full((12, 5, 30), 7.5)
    want2[:, :, :9] = want[:12, :5, :9]
    np.testing.assert_array_equal(a[:], want2)
    if where == "disk":
        a.close()
        np.testing.assert_array_equal(ca.open(tmp_path / "a", mode="r")[:], want2)


def test_bcolz_layout_resizes_rows_only(tmp_path, cube):
    a = ca.carray(cube, chunklen=8, rootdir=tmp_path / "b", format="bcolz")
    with pytest.raises(ValueError, match="first axis"):
        a.resize((40, 30, 21))
    np.testing.assert_array_equal(ca.open(tmp_path / "b", mode="r")[:], cube)
    with pytest.raises(ValueError, match="whole rows"):
        ca.carray(cube, chunks=(8, 11, 21), rootdir=tmp_path / "c", format="bcolz")


@pytest.mark.parametrize(("kw", "match"), [
    ({"chunks": (8, 0, 4)}, "positive"),
    ({"chunks": (8, 4)}, "one size per axis"),
    ({"chunks": (8, 4, 4), "blocks": (9, 4, 4)}, "larger than chunks"),
    ({"chunks": (8, 4, 4), "blocks": (2, 2)}, "one size per axis"),
    ({"chunklen": 4, "chunks": (4, 33, 21)}, "not both"),
    ({"chunklen": 0}, "positive"),
])
def test_bad_grids_are_refused(cube, kw, match):
    with pytest.raises(ValueError, match=match):
        ca.carray(cube, **kw)


@pytest.mark.parametrize("where", WHERE)
def test_appends_to_nd_grids_keep_memory_bounded(where, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_writer, "TAIL_BUDGET", 10_000)
    a = make(where, tmp_path, np.zeros((0, 30, 40)), chunks=(8, 10, 10), blocks=(4, 5, 5))
    rows = [np.full((1, 30, 40), i, dtype="f8") for i in range(21)]
    for r in rows:
        a.append(r)
        assert not a.engine.holds_tail  # too big to keep decoded: written at once
    np.testing.assert_array_equal(a[:], np.concatenate(rows))
    if where == "disk":
        a.close()
        np.testing.assert_array_equal(ca.open(tmp_path / "a", mode="r")[:], np.concatenate(rows))


def test_vindex_and_nd_masks_follow_numpy(cube):
    a = ca.carray(cube, chunks=(16, 10, 8), blocks=(4, 5, 4))
    idx = ([3, 39, 3], [0, 32, 5], [20, 1, 1])
    np.testing.assert_array_equal(a.vindex[idx], cube[idx])
    mask = cube[:, :, 0] > 0
    np.testing.assert_array_equal(a[mask], cube[mask])
    np.testing.assert_array_equal(a[mask, 3], cube[mask, 3])
    a.vindex[idx] = -1.0
    cube[idx] = -1.0
    np.testing.assert_array_equal(a[:], cube)
    # a[...] indexes every axis on its own.
    np.testing.assert_array_equal(a[[1, 2], [3, 4]], cube[np.ix_([1, 2], [3, 4])])
    np.testing.assert_array_equal(a.oindex[[1, 2], :, [3, 4]], cube[np.ix_([1, 2], range(33),
                                                                             [3, 4])])


def test_index_errors_are_numpy_errors(cube):
    a = ca.carray(cube, chunks=(16, 10, 8), blocks=(4, 5, 4))
    with pytest.raises(IndexError, match="out of bounds for axis 1"):
        a[0, 40]
    with pytest.raises(IndexError, match="too many indices"):
        a[0, 0, 0, 0]
    with pytest.raises(IndexError):
        a.vindex[[1, 2], [1, 2, 3]]  # shapes do not broadcast
    with pytest.raises(IndexError):
        a[np.array([1.5])]


def test_repr_and_info_show_the_grid(tmp_path, cube, capsys):
    from carray.cli.main import main

    a = ca.carray(cube, chunks=(20, 33, 21), blocks=(4, 11, 7), rootdir=tmp_path / "a")
    assert "blocks := (4, 11, 7)" in repr(a)
    a.close()
    assert main(["info", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "(20, 33, 21)" in out and "(4, 11, 7)" in out


@pytest.mark.parametrize("dtype", ["i1", "u2", "f4", "c16", "?", "S5", "U3", "M8[s]",
                                   [("a", "i4"), ("b", "f8")]])
@pytest.mark.parametrize("where", ["memory", "disk", "b2nd"])
def test_dtypes_round_trip_on_nd_grids(tmp_path, dtype, where):
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 120, size=(13, 9, 7))
    dt = np.dtype(dtype)
    if dt.names:
        data = np.zeros(raw.shape, dt)
        data["a"], data["b"] = raw, raw / 3
    elif dt.kind in "SU":
        data = raw.astype(str).astype(dt)
    else:
        data = raw.astype(dt)
    root = {"memory": None, "disk": tmp_path / "a", "b2nd": tmp_path / "a.b2nd"}[where]
    a = ca.carray(data, chunks=(5, 4, 7), blocks=(2, 2, 3), rootdir=root)
    a.append(data[:3])
    a[2, 1:5, ::2] = data[0, :4, ::2]
    want = np.concatenate([data, data[:3]])
    want[2, 1:5, ::2] = data[0, :4, ::2]
    if root is not None:
        a.close()
        a = ca.open(root, mode="r")
    assert a.dtype == want.dtype
    np.testing.assert_array_equal(a[:], want)
    np.testing.assert_array_equal(a[:, 3, 1:6], want[:, 3, 1:6])


@pytest.mark.parametrize("fmt", [None, "superchunk", "b2nd", "bcolz"])
def test_records_that_do_not_divide_a_block_read_back(fmt, tmp_path):
    # 12-byte records: full chunks use Blosc blocks that must hold whole records.
    a = np.ones(30_000, dtype="f4,f8")
    rootdir = None if fmt is None else str(tmp_path / ("r.b2nd" if fmt == "b2nd" else "r"))
    c = ca.carray(a, rootdir=rootdir, format=fmt)
    assert np.array_equal(c[:], a)
    if rootdir is not None:
        c.close()
        assert np.array_equal(ca.open(rootdir, mode="r")[:], a)


@pytest.mark.parametrize("fmt", ["superchunk", "bcolz"])
def test_raw_bytes_items_reopen(fmt, tmp_path):
    # The default value of a void dtype is kept as latin-1 text, like bytes strings.
    a = np.frombuffer(bytes(range(70)), dtype="V7")
    c = ca.carray(a, rootdir=str(tmp_path / "v"), format=fmt, dflt=b"abcdefg")
    c.close()
    got = ca.open(str(tmp_path / "v"), mode="r")
    assert got[:].tobytes() == a.tobytes() and got.dflt.tobytes() == b"abcdefg"
