"""Lazy fill: chunks that only hold the fill value are recorded, never written or decoded."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.chunks.io import ChunkIO
from carray.codecs import blosc
from carray.errors import FormatError
from carray.layouts.b2nd.layout import B2ndLayout
from carray.layouts.superchunk import opening as superchunk_open
from carray.layouts.superchunk.layout import SuperchunkLayout

blosc2 = pytest.importorskip("blosc2", reason="blosc2 is a test dependency")


def _data_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "data").iterdir())


def _absent(root: Path) -> list[bool]:
    """Per chunk: whether the superchunk layout records it as absent."""
    layout, meta, _ = superchunk_open.open_dir(str(root), readonly=True)
    try:
        return [layout.special_chunk(n) is not None for n in range(meta.nchunks)]
    finally:
        layout.close()


@pytest.fixture
def no_codec(monkeypatch):
    """Fail on any compression, decompression or chunk fetch."""
    def refuse(*args, **kwargs):
        raise AssertionError("a fill chunk was encoded, fetched or decoded")

    monkeypatch.setattr(blosc, "compress2", refuse)
    monkeypatch.setattr(blosc, "compress1", refuse)
    monkeypatch.setattr(ChunkIO, "fetch", refuse)
    monkeypatch.setattr(ChunkIO, "_reader", refuse)


# -- the superchunk layout ------------------------------------------------------------------

def test_zeros_writes_no_chunk_and_reads_decode_nothing(tmp_path, no_codec):
    root = tmp_path / "cube.carray"
    a = ca.zeros((200, 300, 300), dtype="f4", rootdir=str(root), chunks=(64, 64, 64),
                 blocks=(16, 32, 32))
    a.flush()
    assert _data_files(root) == []
    assert all(_absent(root)) and len(_absent(root)) == 4 * 5 * 5 and a.cbytes == 0
    assert a[199, 299, 299] == 0 and a[:].sum() == 0
    assert a[3:150:7, 5, ::11].shape == (21, 28)
    b = ca.open(str(root), mode="r")
    assert b.shape == (200, 300, 300) and not b[::50, ::50, ::50].any()


def test_big_zeros_takes_a_handful_of_files(tmp_path, no_codec):
    root = tmp_path / "big.carray"
    a = ca.zeros((2000, 1000, 1000), dtype="f4", rootdir=str(root))
    a.flush()
    files = [f for _, _, names in os.walk(root) for f in names
             if not f.startswith("zonemap_")]  # chunk statistics: one file per 512 chunks
    assert len(files) <= 4, files                     # meta/storage, sizes, attrs
    assert a.nbytes == 8 * 10**9 and a.cbytes == 0


def test_writing_one_item_writes_one_chunk(tmp_path):
    root = tmp_path / "a.carray"
    a = ca.zeros((300, 200, 200), dtype="i8", rootdir=str(root), chunks=(50, 50, 50),
                 blocks=(10, 25, 25))
    a[123, 45, 167] = 9
    a.flush()
    absent = _absent(root)
    assert absent.count(False) == 1
    assert absent.index(False) == a.engine.grid.chunk_index((2, 0, 3))
    assert len(_data_files(root)) == 1
    b = ca.open(str(root), mode="r")
    assert b[123, 45, 167] == 9 and b[:].sum() == 9


def test_ones_and_fill_record_their_value(tmp_path, no_codec):
    o = ca.ones((70, 90), dtype="i2", rootdir=str(tmp_path / "o"), chunks=(32, 32),
                blocks=(8, 16))
    f = ca.fill((70, 90), np.nan, dtype="f8", rootdir=str(tmp_path / "n"), chunks=(32, 32),
                blocks=(8, 16))
    for arr in (o, f):
        arr.flush()
    assert _data_files(tmp_path / "o") == [] and _data_files(tmp_path / "n") == []
    assert (o[:] == 1).all() and o[69, 89] == 1 and o[5:60:3, [1, 88]].tolist() == \
        np.ones((19, 2), "i2").tolist()
    assert np.isnan(ca.open(str(tmp_path / "n"), mode="r")[:]).all()


def test_rewriting_a_chunk_with_the_fill_value_frees_it(tmp_path):
    root = tmp_path / "r.carray"
    a = ca.zeros((100, 100), dtype="f8", rootdir=str(root), chunks=(50, 50), blocks=(10, 50))
    a[:50, :50] = np.arange(2500.0).reshape(50, 50)
    a.flush()
    assert _absent(root).count(False) == 1
    a[:50, :50] = 0
    a.flush()
    assert all(_absent(root))
    assert not ca.open(str(root), mode="r")[:].any()


def test_assigning_the_fill_value_to_whole_chunks_encodes_nothing(tmp_path, monkeypatch):
    root = tmp_path / "s.carray"
    a = ca.carray(np.arange(200 * 300.0).reshape(200, 300), chunks=(50, 64), blocks=(10, 32),
                  rootdir=str(root))
    monkeypatch.setattr(blosc, "compress2", None)  # any compression would fail
    a[:50, :128] = 0.0                               # two whole chunks
    monkeypatch.undo()
    a.flush()
    assert _absent(root)[:3] == [True, True, False]
    expected = np.arange(200 * 300.0).reshape(200, 300)
    expected[:50, :128] = 0
    np.testing.assert_array_equal(ca.open(str(root), mode="r")[:], expected)


@pytest.mark.parametrize("new_shape", [(130, 40), (60, 95), (140, 100)])
def test_growing_any_axis_adds_absent_chunks(tmp_path, new_shape):
    root = tmp_path / "g.carray"
    a = ca.carray(np.arange(60 * 40).reshape(60, 40), rootdir=str(root), chunks=(20, 16),
                  blocks=(5, 8), dflt=-1)
    a.resize(new_shape)
    a.flush()  # a resize is a version at the next flush
    expected = np.full(new_shape, -1)
    expected[:60, :40] = np.arange(60 * 40).reshape(60, 40)
    np.testing.assert_array_equal(a[:], expected)
    np.testing.assert_array_equal(ca.open(str(root), mode="r")[:], expected)
    grid = a.engine.grid
    absent = _absent(root)
    for n in range(grid.nchunks):
        box = grid.chunk_slices(grid.chunk_coords(n))
        assert absent[n] == bool((expected[box] == -1).all()), n


def test_appending_constant_runs(tmp_path):
    root = tmp_path / "app.carray"
    a = ca.zeros((0, 64), dtype="f4", rootdir=str(root), chunks=(32, 64), blocks=(8, 64))
    a.append(np.broadcast_to(np.float32(0), (96, 64)))   # three runs of the fill value
    a.append(np.broadcast_to(np.float32(2), (32, 64)))   # constant, not the fill value
    a.append(np.zeros((32, 64), "f4"))                   # found constant when written
    a.flush()
    assert _absent(root) == [True, True, True, False, True]
    np.testing.assert_array_equal(ca.open(str(root), mode="r")[:, 0], [0] * 96 + [2] * 32 + [0] * 32)


def test_appending_a_broadcast_run_never_materialises_it(tmp_path):
    import tracemalloc

    root = tmp_path / "bc.carray"
    a = ca.zeros((0, 400, 400), dtype="f8", rootdir=str(root), chunks=(64, 100, 100),
                 blocks=(8, 50, 50))
    tracemalloc.start()
    try:
        a.append(np.broadcast_to(0.0, (300, 400, 400)))    # 384 MB of zeros
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20
    a.append(np.full((3, 400, 400), 2.0))                   # lands in the partial run
    a.flush()
    b = ca.open(str(root), mode="r")
    assert b.shape == (303, 400, 400) and b[299].sum() == 0 and (b[300:] == 2).all()
    assert _absent(root).count(False) == 16                 # the last run's chunks


def test_one_dimensional_zeros_and_tail(tmp_path):
    root = tmp_path / "v.carray"
    a = ca.zeros(10_000, dtype="i4", rootdir=str(root), chunklen=1000)
    a.append(np.arange(5, dtype="i4"))
    a.flush()
    assert all(_absent(root)[:10]) and not _absent(root)[10]
    b = ca.open(str(root), mode="r")
    assert b[:10_000].sum() == 0 and b[10_000:].tolist() == [0, 1, 2, 3, 4]


def test_failed_write_puts_fill_chunks_back(tmp_path, monkeypatch):
    root = tmp_path / "t.carray"
    a = ca.zeros((40, 40), dtype="i4", rootdir=str(root), chunks=(20, 20), blocks=(10, 10))
    a.flush()
    calls = []
    real = SuperchunkLayout.write_chunk

    def failing(self, nchunk, data, digest=None):
        calls.append(nchunk)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(self, nchunk, data, digest)

    monkeypatch.setattr(SuperchunkLayout, "write_chunk", failing)
    with pytest.raises(OSError):
        a[:, :] = 5
    monkeypatch.setattr(SuperchunkLayout, "write_chunk", real)
    assert not a[:].any()
    a.flush()
    assert all(_absent(root))
    assert not ca.open(str(root), mode="r")[:].any()


def test_zone_map_summary_of_fill_chunks(tmp_path):
    a = ca.fill(5000, 3, dtype="i4", rootdir=str(tmp_path / "z"), chunklen=1000)
    zm = a.zone_map()
    assert zm is not None  # 1-d numeric arrays always keep summaries
    assert zm.known[:5].all()
    assert (zm.lo[:5] == 3).all() and (zm.hi[:5] == 3).all()
    assert (a[:] == 3).all()


def _rewrite_manifest(root: Path, **changes) -> None:
    """Replace the newest manifest by a well-formed one with its member changed."""
    from carray.versions import Manifest

    path = sorted((root / "versions").glob("*.mf"))[-1]
    m = Manifest.decode(path.read_bytes())
    member = m.members[0].replace(**changes)
    path.write_bytes(m.replace(members=(member,)).encode())


def test_hostile_sizes_still_refused(tmp_path):
    root = tmp_path / "h.carray"
    a = ca.carray(np.arange(100), rootdir=str(root), chunklen=10)
    a.close()
    _rewrite_manifest(root, shape=(2**40,))  # its index still holds 10 chunks
    with pytest.raises(FormatError, match="chunks for shape"):
        ca.open(str(root), mode="r")


def test_a_lost_file_of_stored_chunks_is_an_error_not_fill(tmp_path):
    root = tmp_path / "e.carray"
    a = ca.zeros((40, 40), dtype="i4", rootdir=str(root), chunks=(20, 20), blocks=(10, 10))
    a[:] = np.arange(1600).reshape(40, 40)  # every chunk stored now: none is fill any more
    a.close()
    assert not any(_absent(root))
    for f in _data_files(root):
        os.unlink(root / "data" / f)
    b = ca.open(str(root), mode="r")
    with pytest.raises(FormatError, match="missing"):
        b[:]
    with pytest.raises(FormatError, match="missing"):
        b[0, 0]


def test_verify_accepts_absent_chunks_and_reports_lost_files(tmp_path):
    from carray.core.problems import Problem
    from carray.layouts.superchunk.verify import verify
    from carray.stores import LOCAL

    root = tmp_path / "w.carray"
    a = ca.zeros((40, 40), dtype="i4", rootdir=str(root), chunks=(20, 20), blocks=(10, 10),
                 storage={"superchunksize": 2})
    a[0, 0] = 1
    a[39, 39] = 1
    a.flush()
    assert not [f for f in verify(LOCAL, str(root)) if isinstance(f, Problem)]
    os.unlink(root / "data" / _data_files(root)[-1])
    problems = [f for f in verify(LOCAL, str(root)) if isinstance(f, Problem)]
    assert len(problems) == 1 and "missing" in problems[0].what


def test_blosc1_datasets_keep_real_chunks(tmp_path):
    root = tmp_path / "b1.carray"
    a = ca.zeros(3000, dtype="i4", rootdir=str(root), chunklen=1000,
                 storage={"blosc1": True, "spare": 0})
    a.flush()
    assert not any(_absent(root)) and len(_data_files(root)) >= 1
    assert a[:].sum() == 0


def test_bcolz_format_writes_real_chunks(tmp_path):
    root = tmp_path / "z.bcolz"
    a = ca.zeros(3000, dtype="f8", rootdir=str(root), chunklen=1000, format="bcolz")
    a.flush()
    assert len(list((root / "data").glob("__*.blp"))) == 3
    assert a[:].sum() == 0


def test_in_memory_zeros_cost_nothing(no_codec):
    a = ca.zeros((500, 400, 300), dtype="f8")
    assert a.cbytes < 100_000 and a[499, 399, 299] == 0
    assert not a[::100, ::100, ::100].any()


# -- Blosc2 frames --------------------------------------------------------------------------

def test_b2nd_zeros_and_ones_read_by_python_blosc2(tmp_path):
    z = ca.zeros((300, 200, 100), dtype="f8", rootdir=str(tmp_path / "z.b2nd"))
    z[5, 5, 5] = 3
    z.flush()
    assert (tmp_path / "z.b2nd").stat().st_size < 200_000    # one stored chunk of 12
    got = blosc2.open(str(tmp_path / "z.b2nd"))[:]
    assert got.sum() == 3 and got[5, 5, 5] == 3
    o = ca.ones((100, 60), dtype="i4", rootdir=str(tmp_path / "o.b2nd"), chunks=(32, 32),
                blocks=(8, 16))
    o.resize((150, 90))
    o.flush()
    assert (tmp_path / "o.b2nd").stat().st_size < 10_000
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "o.b2nd"))[:], np.ones((150, 90)))


def test_b2nd_fill_chunks_are_special_in_the_frame(tmp_path):
    path = tmp_path / "f.b2nd"
    a = ca.zeros((64, 64), dtype="i2", rootdir=str(path), chunks=(32, 32), blocks=(8, 32))
    a[0, 0] = 1
    a.flush()
    layout, meta, _ = B2ndLayout.open(str(path), readonly=True)
    try:
        assert [layout.special_chunk(n) is not None for n in range(4)] == [False, True, True,
                                                                           True]
    finally:
        layout.close()


def test_python_blosc2_special_chunks_read_without_decoding(tmp_path, no_codec):
    blosc2.zeros((100, 100), dtype="i2", urlpath=str(tmp_path / "q.b2nd"), mode="w")
    assert not ca.open(str(tmp_path / "q.b2nd"))[:].any()


def test_python_blosc2_full_reads(tmp_path):
    blosc2.full((100, 100), 7, dtype="i2", urlpath=str(tmp_path / "p.b2nd"), mode="w")
    assert (ca.open(str(tmp_path / "p.b2nd"))[:] == 7).all()


def test_sparse_b2nd_fill_chunks_read_by_python_blosc2(tmp_path):
    z = ca.zeros((100, 100), dtype="f4", rootdir=str(tmp_path / "z.b2nd"), chunks=(32, 32),
                 blocks=(8, 32), storage={"contiguous": False})
    z.flush()
    assert sorted(os.listdir(tmp_path / "z.b2nd")) == ["chunks.b2frame"]
    assert blosc2.open(str(tmp_path / "z.b2nd"))[:].sum() == 0
    o = ca.ones((100, 100), dtype="f4", rootdir=str(tmp_path / "o.b2nd"), chunks=(32, 32),
                blocks=(8, 32), storage={"contiguous": False})
    o[0, 0] = 5
    o.flush()
    got = blosc2.open(str(tmp_path / "o.b2nd"))[:]
    assert got[0, 0] == 5 and got.sum() == 10_004


def test_engine_tells_fill_chunks_apart(tmp_path):
    a = ca.fill((100, 100), 4, dtype="i4", rootdir=str(tmp_path / "c"), chunks=(50, 50),
                blocks=(10, 50))
    a[0, 0] = 1
    engine = a.engine
    assert engine.chunk_fill(0) is None
    assert [int(engine.chunk_fill(n)) for n in (1, 2, 3)] == [4, 4, 4]


@pytest.mark.parametrize("grow_to", [2, 7, 5000])
@pytest.mark.parametrize("cut_to", [0, 1, 3])
def test_a_cut_then_a_growth_reads_the_fill_value_not_the_committed_chunks(tmp_path, cut_to,
                                                                          grow_to):
    """Shrinking below committed chunks and growing again (no commit between) shows the
    fill value in the regrown rows, before and after the commit."""
    root = str(tmp_path / "a")
    a = ca.carray(np.arange(1, 4001), chunklen=2, rootdir=root, mode="w")
    a.resize(cut_to)
    a.resize(grow_to)
    expected = np.zeros(grow_to, dtype=np.int64)
    kept = min(cut_to, grow_to)
    expected[:kept] = np.arange(1, kept + 1)
    np.testing.assert_array_equal(a[:], expected)
    a.close()
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], expected)
