"""The b2nd frame layout: conformance, python-blosc2 interop both ways, crash safety, bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import blosc2
import numpy as np
import pytest
from layout_conformance import CHUNKLEN, PersistentLayoutConformance, meta, snapshot

from carray.chunks.grid import deblock, reblock
from carray.codecs import blosc, ranged
from carray.core.params import CParams
from carray.errors import (
    CArrayError,
    ChecksumError,
    ContainerExistsError,
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
)
from carray.layouts import FORMATS, create_layout, open_layout
from carray.layouts.b2nd import layout as b2l
from carray.layouts.b2nd.digests import RECORD_NAME
from carray.layouts.b2nd.frame import read_array, read_frame
from carray.layouts.b2nd.layout import B2ndLayout
from carray.layouts.base import ArrayMeta
from carray.stores.local import LocalStore
from carray.stores.tempnames import is_temporary, temporary_name

DATA = Path(__file__).parent.parent / "data"
CP = CParams(cname="zstd", clevel=3)


# -- the shared suite ---------------------------------------------------------------------

class _B2ndConformance(PersistentLayoutConformance):
    contiguous = True
    stores_zonemaps = False  # zone maps keep the base class's no-op methods

    def array_meta(self, length=0):
        return meta(length).replace(blocks=(CHUNKLEN,))

    def _path(self, tmp_path):
        return tmp_path / "a.b2nd"

    def make(self, tmp_path, meta):
        return B2ndLayout.create(self._path(tmp_path), meta, fsync=False,
                                 contiguous=self.contiguous)

    def reopen(self, layout, tmp_path, readonly=False):
        return B2ndLayout.open(self._path(tmp_path), readonly=readonly, fsync=False)[0]


class TestContiguousConformance(_B2ndConformance):
    contiguous = True


class TestSparseConformance(_B2ndConformance):
    contiguous = False


# -- helpers ------------------------------------------------------------------------------

def chunk_bytes(arr: np.ndarray, m: ArrayMeta, n: int, cparams: CParams = CP) -> bytes:
    """Chunk ``n`` of ``arr`` as the array code stores it: padded, in block order."""
    g = m.grid
    ext = np.zeros(g.ext_chunks, arr.dtype)
    valid = arr[g.chunk_slices(g.chunk_coords(n))]
    ext[tuple(slice(0, k) for k in valid.shape)] = valid
    return blosc.compress2(reblock(ext, g), arr.dtype.itemsize, cparams,
                           blocksize=g.block_nbytes)


def store(layout: B2ndLayout, arr: np.ndarray, m: ArrayMeta, first: int = 0) -> None:
    for n in range(first, m.grid.nchunks):
        layout.write_chunk(n, chunk_bytes(arr, m, n))


def read_all(layout: B2ndLayout, m: ArrayMeta) -> np.ndarray:
    """The whole array through ``read_chunk`` (what the array code does)."""
    g = m.grid
    out = np.empty(m.shape, m.dtype)
    for n in range(g.nchunks):
        raw = np.empty(g.chunk_nbytes, np.uint8)
        blosc.decompress_into(layout.read_chunk(n), raw, layout.chunk_path(n))
        sl = g.chunk_slices(g.chunk_coords(n))
        ext = deblock(raw, g).view(m.dtype).reshape(g.ext_chunks)
        out[sl] = ext[tuple(slice(0, s.stop - s.start) for s in sl)]
    return out


def b2_read(path) -> np.ndarray:
    arr = blosc2.open(os.fspath(path), mode="r")
    return np.asarray(arr[()] if arr.ndim == 0 else arr[...])


def b2_vlmeta(path) -> dict:
    """The user attributes python-blosc2 sees (carray's record of digests, which it reads
    as bytes, left out)."""
    arr = blosc2.open(os.fspath(path), mode="r")  # the vlmeta view needs its owner alive
    vl = arr.vlmeta
    got = {k: vl[k] for k in vl.keys()}
    assert isinstance(got.pop(RECORD_NAME, b""), bytes)
    return got


def new_meta(shape=(0, 7), chunks=(4, 3), blocks=(2, 2), dtype="f8", **kw) -> ArrayMeta:
    kw.setdefault("cparams", CP)
    return ArrayMeta(np.dtype(dtype), shape, chunks, blocks, **kw)


# -- python-blosc2 reads what we write ----------------------------------------------------

@pytest.mark.parametrize("contiguous", [True, False])
def test_python_blosc2_reads_every_commit(tmp_path, contiguous):
    path = tmp_path / "x.b2nd"
    m = new_meta(dflt=np.float64(1.5), expectedlen=50)
    lay = B2ndLayout.create(path, m, contiguous=contiguous, fsync=False)
    assert b2_read(path).shape == (0, 7)
    header_len = read_frame(path).header.header_len
    a = np.arange(70.0).reshape(10, 7)
    m1 = m.replace(shape=(10, 7))
    store(lay, a, m1)
    lay.commit(m1, 123)
    assert np.array_equal(b2_read(path), a)
    a[0:4, 0:3] = -1  # replace one chunk
    lay.write_chunk(0, chunk_bytes(a, m1, 0))
    lay.commit(m1, 1)
    assert np.array_equal(b2_read(path), a)
    lay.commit(m.replace(shape=(5, 7)), 1)  # shrink: chunks past the grid go
    assert np.array_equal(b2_read(path), a[:5])
    m3 = m.replace(shape=(8, 9))  # grow along axis 1: every chunk is renumbered
    b = np.arange(72.0).reshape(8, 9)
    lay.drop_chunks(0)
    store(lay, b, m3)
    lay.commit(m3, 1)
    assert np.array_equal(b2_read(path), b)
    lay.commit(m.replace(shape=(12, 9)), 1)  # grow without writing: zero chunks
    want = np.zeros((12, 9))
    want[:8] = b
    assert np.array_equal(b2_read(path), want)
    assert np.array_equal(read_array(path), want)
    assert read_frame(path).header.header_len == header_len  # rewritten in place
    lay.close()
    again, m_again, cbytes = B2ndLayout.open(path, readonly=True)
    assert (m_again.shape, m_again.chunks, m_again.blocks) == ((12, 9), (4, 3), (2, 2))
    assert m_again.dtype == np.dtype("f8") and m_again.cparams.cname == "zstd"
    assert m_again.dflt == 1.5 and m_again.expectedlen == 50 and cbytes == 1
    assert np.array_equal(read_all(again, m_again), want)
    again.close()


@pytest.mark.parametrize("dtype", ["u1", ">i4", "c16", "S3", "<U5", "b1",
                                   [("a", "<i4"), ("b", "<f8")]], ids=str)
def test_dtypes_and_zero_dims(tmp_path, dtype):
    dt = np.dtype(dtype)
    for shape, chunks, blocks in (((9, 5), (4, 5), (3, 2)), ((), (), ()), ((3,) * 9, (2,) * 9,
                                                                        (1,) * 9)):
        path = tmp_path / f"d{len(shape)}.b2nd"
        a = np.arange(int(np.prod(shape)), dtype="i8").reshape(shape).astype(dt)
        m = ArrayMeta(dt, shape, chunks, blocks)
        lay = B2ndLayout.create(path, m, mode="w", fsync=False)
        store(lay, a, m)
        lay.commit(m, 0)
        lay.close()
        assert np.array_equal(b2_read(path), a), (dtype, shape)
        lay, m2, _ = B2ndLayout.open(path, readonly=True)
        assert m2.dtype == dt and np.array_equal(read_all(lay, m2), a)
        lay.close()


def test_zero_chunks_are_not_stored(tmp_path):
    path = tmp_path / "z.b2nd"
    m = new_meta(shape=(8, 3), chunks=(4, 3), blocks=(4, 3))
    lay = B2ndLayout.create(path, m, fsync=False)
    zero = bytes(b2l._chunk.special_chunk(b2l._chunk.ZERO, m.grid.chunk_nbytes, 8, 96))
    size = os.path.getsize(path)
    assert lay.write_chunk(0, zero) == 0
    assert os.path.getsize(path) == size
    assert lay.write_chunk(1, chunk_bytes(np.ones((8, 3)), m, 1)) > 0
    lay.commit(m, 0)
    want = np.ones((8, 3))
    want[:4] = 0
    assert np.array_equal(b2_read(path), want)
    assert np.array_equal(read_all(lay, m), want)


# -- we read and modify what python-blosc2 writes ----------------------------------------

@pytest.mark.parametrize("contiguous", [True, False])
def test_modify_python_blosc2_frames(tmp_path, contiguous):
    path = tmp_path / "theirs.b2nd"
    a = np.random.default_rng(0).normal(size=(10, 13)).astype("f4")
    blosc2.asarray(a, urlpath=str(path), mode="w", chunks=(4, 5), blocks=(2, 3),
                   contiguous=contiguous, cparams={"codec": blosc2.Codec.LZ4, "clevel": 7})
    theirs = blosc2.open(str(path), mode="a")
    theirs.vlmeta["owner"] = {"name": "py", "n": [1, 2]}
    del theirs
    lay, m, _ = B2ndLayout.open(path)
    assert (m.shape, m.chunks, m.blocks, m.dtype) == ((10, 13), (4, 5), (2, 3), np.dtype("f4"))
    assert (m.cparams.cname, m.cparams.clevel) == ("lz4", 7)
    assert lay.load_attrs() == {"owner": {"name": "py", "n": [1, 2]}}
    assert np.array_equal(read_all(lay, m), a)
    # Append rows (the old edge chunks are rewritten), replace chunk 0, add attributes.
    b = np.concatenate([a, np.full((6, 13), 7, "f4")])
    b[:4, :5] = -3
    m2 = m.replace(shape=(16, 13))
    lay.write_chunk(0, chunk_bytes(b, m2, 0))
    store(lay, b, m2, first=2 * 3)
    lay.save_attrs({**lay.load_attrs(), "ours": "yes"})
    lay.commit(m2, 0)
    lay.close()
    assert np.array_equal(b2_read(path), b)
    assert b2_vlmeta(path) == {"owner": {"name": "py", "n": [1, 2]}, "ours": "yes"}
    assert np.array_equal(read_array(path), b)
    # python-blosc2 goes on writing; we read its changes.
    theirs = blosc2.open(str(path), mode="a")
    theirs[15, :] = 99
    theirs.resize((18, 13))
    del theirs
    b = np.concatenate([b, np.zeros((2, 13), "f4")])
    b[15] = 99
    lay, m3, _ = B2ndLayout.open(path, readonly=True)
    assert m3.shape == (18, 13) and np.array_equal(read_all(lay, m3), b)


def test_open_every_fixture(tmp_path):
    for fmt in ("blosc2", "caterva"):
        manifest = json.loads((DATA / fmt / "MANIFEST.json").read_text())["fixtures"]
        for fx in manifest:
            path = DATA / fmt / fx["path"]
            if not fx["expected"].endswith(".npy"):
                with pytest.raises(FormatError, match="SChunk"):
                    B2ndLayout.open(path, readonly=True)
                continue
            want = np.load(DATA / fmt / fx["expected"])
            lay, m, _ = open_layout(path, readonly=True)
            assert isinstance(lay, B2ndLayout)
            got = read_all(lay, m)
            assert got.tobytes() == want.tobytes() and got.shape == want.shape, fx["name"]
            lay.close()


def test_caterva_frames_stay_caterva(tmp_path):
    src = DATA / "caterva" / "cat_f8_2d_zstd.caterva"
    path = tmp_path / "c.caterva"
    (shutil.copytree if src.is_dir() else shutil.copy)(src, path)
    want = np.load(DATA / "caterva" / "cat_f8_2d_zstd.expected.npy")
    lay, m, _ = B2ndLayout.open(path)
    assert m.dtype == np.dtype("u8")  # caterva stores no dtype: Frame's fallback
    grown = np.zeros((want.shape[0] + 3, want.shape[1]), "f8")
    grown[:want.shape[0]] = want
    m2 = m.replace(shape=grown.shape)
    store(lay, grown.view("u8"), m2)
    lay.commit(m2, 0)
    lay.close()
    with read_frame(path, dtype="f8") as f:
        assert f.kind == "caterva" and np.array_equal(f.read(), grown)


def test_open_python_blosc2_special_chunks(tmp_path):
    path = tmp_path / "full.b2nd"
    blosc2.full((50, 30), 7.5, chunks=(20, 10), blocks=(5, 5), urlpath=str(path), mode="w")
    lay, m, _ = B2ndLayout.open(path)
    assert np.array_equal(read_all(lay, m), np.full((50, 30), 7.5))
    path = tmp_path / "empty.b2nd"
    blosc2.empty((30, 7), dtype="i4", chunks=(10, 7), urlpath=str(path), mode="w")
    lay, m, _ = B2ndLayout.open(path)
    assert not read_all(lay, m).any()  # uninitialised chunks decode as zeros
    read_at, size = lay.chunk_reader(1)
    assert size == 32 and len(read_at(0, 32)) == 32


# -- vlmeta, dispatch, modes --------------------------------------------------------------

def test_attrs_both_ways(tmp_path):
    path = tmp_path / "v.b2nd"
    lay = B2ndLayout.create(path, new_meta(), fsync=False)
    attrs = {"t": 23.5, "s": "C", "l": [1, "x", None], "d": {"k": b"raw"}, "big": 2**40}
    lay.save_attrs(attrs)
    assert b2_vlmeta(path) == attrs  # saved attributes are committed at once
    theirs = blosc2.open(str(path), mode="a")
    theirs.vlmeta["added"] = [3, 4]
    del theirs
    lay.close()
    lay, _, _ = B2ndLayout.open(path)
    assert lay.load_attrs() == {**attrs, "added": [3, 4]}
    with pytest.raises(ValueError):
        lay.save_attrs({f"k{i}": i for i in range(17)})  # c-blosc2 writes at most 16
    with pytest.raises(ValueError):
        lay.save_attrs({"x" * 40: 1})
    with pytest.raises(TypeError):
        lay.save_attrs({"x": object()})
    assert lay.load_attrs() == {**attrs, "added": [3, 4]}


def test_dispatch_and_modes(tmp_path):
    assert "b2nd" in FORMATS
    m = new_meta()
    lay = create_layout(tmp_path / "a.b2nd", m, fsync=False)  # chosen by the suffix
    assert isinstance(lay, B2ndLayout) and lay.contiguous
    sparse = create_layout(tmp_path / "s", m, format="b2nd", storage={"contiguous": False},
                           fsync=False)
    assert not sparse.contiguous and (tmp_path / "s" / "chunks.b2frame").is_file()
    for p in (tmp_path / "a.b2nd", tmp_path / "s"):
        opened, m2, _ = open_layout(p, readonly=True)
        assert isinstance(opened, B2ndLayout) and m2.shape == (0, 7)
    with pytest.raises(ContainerExistsError):
        B2ndLayout.create(tmp_path / "a.b2nd", m)
    B2ndLayout.create(tmp_path / "s", m, mode="w", fsync=False)  # replaces the directory
    assert (tmp_path / "s").is_file()
    with pytest.raises(ValueError, match="block"):
        B2ndLayout.create(tmp_path / "n.b2nd", m.replace(blocks=None))
    with pytest.raises(ValueError, match="at most 16"):
        B2ndLayout.create(tmp_path / "n.b2nd", new_meta((1,) * 17, (1,) * 17, (1,) * 17))
    with pytest.raises(ContainerNotFoundError):
        B2ndLayout.open(tmp_path / "missing.b2nd")
    (tmp_path / "plain").mkdir()
    with pytest.raises(FormatError, match="chunks.b2frame"):
        B2ndLayout.open(tmp_path / "plain")


@pytest.mark.parametrize("contiguous", [True, False])
def test_readonly_refuses_writes(tmp_path, contiguous):
    path = tmp_path / "r.b2nd"
    m = new_meta(shape=(8, 7))
    lay = B2ndLayout.create(path, m, contiguous=contiguous, fsync=False)
    store(lay, np.ones((8, 7)), m)
    lay.commit(m, 0)
    lay.close()
    before = snapshot(tmp_path)
    ro, _, _ = B2ndLayout.open(path, readonly=True)
    for call in (lambda: ro.write_chunk(0, chunk_bytes(np.ones((8, 7)), m, 0)),
                 lambda: ro.drop_chunks(0), lambda: ro.commit(m, 0),
                 lambda: ro.save_attrs({"a": 1})):
        with pytest.raises(ReadOnlyError):
            call()
    assert np.array_equal(read_all(ro, m), np.ones((8, 7)))
    ro.close()
    assert snapshot(tmp_path) == before


def test_bad_chunks_and_metas_are_refused(tmp_path):
    m = new_meta(shape=(8, 7))
    lay = B2ndLayout.create(tmp_path / "c.b2nd", m, fsync=False)
    with pytest.raises(ValueError, match="Blosc2"):
        lay.write_chunk(0, blosc.compress1(np.zeros(36), 8, CP))
    with pytest.raises(ValueError, match="padded"):
        lay.write_chunk(0, blosc.compress2(np.zeros(10), 8, CP))
    with pytest.raises(IndexError):
        lay.write_chunk(7, chunk_bytes(np.ones((8, 7)), m, 0))  # 6 chunks: 0-6 allowed
    with pytest.raises(ValueError, match="cannot record"):
        lay.commit(m.replace(chunks=(2, 3)), 0)


# -- reads: ranged, concurrent ------------------------------------------------------------

@pytest.mark.parametrize("contiguous", [True, False])
def test_chunk_reader_reads_only_what_is_asked(tmp_path, count_reads, contiguous):
    path = tmp_path / "big.b2nd"
    m = new_meta(shape=(64, 256), chunks=(64, 256), blocks=(8, 256))
    a = np.random.default_rng(1).normal(size=(64, 256))
    lay = B2ndLayout.create(path, m, contiguous=contiguous, fsync=False)
    store(lay, a, m)
    lay.commit(m, 0)
    lay.close()
    lay, _, _ = B2ndLayout.open(path, readonly=True)
    count_reads["bytes"] = 0
    read_at, size = lay.chunk_reader(0)
    out = np.empty(16, "f8")
    ranged.getitem_ranged(read_at, 8 * 3 * 256, out, size, None, m.grid.chunk_nbytes)
    assert np.array_equal(out, a.reshape(-1)[3 * 256:3 * 256 + 16])
    assert count_reads["bytes"] < size // 3


def test_concurrent_reads(tmp_path):
    path = tmp_path / "t.b2nd"
    m = new_meta(shape=(400, 7))
    a = np.arange(2800.0).reshape(400, 7)
    lay = B2ndLayout.create(path, m, fsync=False)
    store(lay, a, m)
    lay.commit(m, 0)
    lay.close()
    lay, _, _ = B2ndLayout.open(path, readonly=True)
    assert lay.concurrent_reads
    results, errors = [], []

    def work():
        try:
            results.append(np.array_equal(read_all(lay, m), a))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(results) and len(results) == 6


# -- dead space and compaction ------------------------------------------------------------

def test_dead_space_is_compacted(tmp_path):
    path = tmp_path / "d.b2nd"
    m = new_meta(shape=(40, 7), chunks=(8, 7), blocks=(4, 7))
    lay = B2ndLayout.create(path, m, fsync=False)
    rng = np.random.default_rng(2)
    sizes = []
    for _ in range(12):  # rewrite everything: each commit leaves the old chunks dead
        a = rng.normal(size=(40, 7))
        store(lay, a, m)
        lay.commit(m, 0)
        sizes.append(os.path.getsize(path))
        assert np.array_equal(b2_read(path), a)
    assert max(sizes) < 2.5 * min(sizes)  # bounded: compaction kept it packed
    stamp = lay.chunk_stamp(0)
    lay.write_chunk(0, chunk_bytes(a, m, 0))
    assert lay.chunk_stamp(0) != stamp
    lay.close()
    lay, m2, _ = B2ndLayout.open(path)
    assert np.array_equal(read_all(lay, m2), a)


def test_shrinking_to_nothing_leaves_an_empty_frame(tmp_path):
    path = tmp_path / "e.b2nd"
    m = new_meta(shape=(8, 7))
    lay = B2ndLayout.create(path, m, fsync=False)
    store(lay, np.ones((8, 7)), m)
    lay.commit(m, 0)
    lay.commit(m.replace(shape=(0, 7)), 0)
    assert read_frame(path).header.cbytes == 0
    theirs = blosc2.open(str(path), mode="a")  # python-blosc2 can grow it again
    theirs.resize((3, 7))
    theirs[...] = 2
    del theirs
    lay.close()
    lay, m2, _ = B2ndLayout.open(path)
    assert np.array_equal(read_all(lay, m2), np.full((3, 7), 2.0))


# -- crash safety -------------------------------------------------------------------------

class _Crash(BaseException):
    """A simulated kill: nothing after it runs, not even cleanup."""


class _Injector:
    """Counts file operations and 'kills' the writer at operation number ``at``."""

    def __init__(self, at: int) -> None:
        self.at, self.count = at, 0

    def hit(self) -> bool:
        self.count += 1
        return self.count == self.at


class _CrashingHandle:
    """A local file handle whose writes, truncations and syncs are counted."""

    def __init__(self, handle, inj: _Injector) -> None:
        self._h, self._inj = handle, inj

    def __getattr__(self, name):
        return getattr(self._h, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._h.close()

    def pwrite(self, data, pos):
        if self._inj.hit():
            if pos:  # killed half way through appending chunk bytes
                self._h.pwrite(bytes(data)[:len(data) // 2], pos)
            raise _Crash  # the header at 0 is one write of less than a page: all or nothing
        self._h.pwrite(data, pos)

    def truncate(self, size):
        if self._inj.hit():
            raise _Crash
        self._h.truncate(size)

    def sync(self):
        if self._inj.hit():
            raise _Crash
        self._h.sync()


class _CrashingStore(LocalStore):
    """The local store with every write, sync, rename and delete counted; the writer is
    'killed' at operation number ``inj.at``."""

    def __init__(self, inj: _Injector) -> None:
        self._inj = inj

    def open(self, path, mode="r"):
        return _CrashingHandle(super().open(path, mode), self._inj)

    def put(self, path, data, *, fsync=True):
        if self._inj.hit():  # killed while writing the temporary file: half of it is there
            parts = [data] if isinstance(data, (bytes, bytearray, memoryview)) else list(data)
            blob = b"".join(bytes(p) for p in parts)
            with open(temporary_name(path), "wb") as f:
                f.write(blob[:len(blob) // 2])
            raise _Crash
        super().put(path, data, fsync=fsync)
        if self._inj.hit():  # killed right after the rename
            raise _Crash


def _guard(name: str):
    def op(self, *args, **kwargs):
        if self._inj.hit():
            raise _Crash
        return getattr(LocalStore, name)(self, *args, **kwargs)
    return op


for _name in ("sync_dir", "sync_file", "delete", "rename", "rmtree"):
    setattr(_CrashingStore, _name, _guard(_name))


def _state(path) -> tuple[bytes, dict]:
    """What both readers see; they must agree."""
    lay, m, _ = B2ndLayout.open(path, readonly=True)
    ours = read_all(lay, m)
    attrs = lay.load_attrs()
    lay.close()
    theirs = b2_read(path)
    assert theirs.shape == ours.shape and theirs.tobytes() == ours.tobytes()
    assert b2_vlmeta(path) == attrs
    return ours.shape, ours.tobytes(), attrs["v"]


@pytest.mark.parametrize("contiguous", [True, False])
def test_killed_writer_leaves_last_commit(tmp_path, monkeypatch, contiguous):
    pristine, path = tmp_path / "pristine.b2nd", tmp_path / "x.b2nd"
    m = new_meta(shape=(10, 7))
    a = np.arange(70.0).reshape(10, 7)
    lay = B2ndLayout.create(pristine, m, contiguous=contiguous)
    store(lay, a, m)
    lay.commit(m, 0)
    lay.save_attrs({"v": 1})
    lay.close()
    m2, m3 = m.replace(shape=(14, 7)), m.replace(shape=(6, 7))
    b = -np.arange(98.0).reshape(14, 7)
    chunks2 = [chunk_bytes(b, m2, n) for n in range(m2.grid.nchunks)]
    allowed = {"S1": _state(pristine)[:2] + (1,)}
    allowed["S1'"] = allowed["S1"][:2] + (2,)
    allowed["S2"] = ((14, 7), b.tobytes(), 2)
    allowed["S3"] = ((6, 7), b[:6].tobytes(), 2)
    seen = []
    for at in range(1, 500):
        (shutil.copytree if not contiguous else shutil.copy)(pristine, path)
        crashing, lay = _CrashingStore(_Injector(at)), None
        try:
            lay = B2ndLayout.open(path, store=crashing)[0]
            for n, c in enumerate(chunks2):
                lay.write_chunk(n, c)
            lay.save_attrs({"v": 2})
            lay.commit(m2, 0)
            lay.commit(m3, 0)
            lay.close()  # (a sparse writer deletes the chunk files it no longer uses)
            finished = True
        except _Crash:
            finished = False
        del lay  # its handles close; it writes nothing more
        state = _state(path)
        name = next((k for k, v in allowed.items() if v == state), None)
        assert name is not None, f"operation {at}: a state no commit made"
        seen.append(name)
        # The next writer cleans up after the dead one, and the frame still works.
        again, m_again, _ = B2ndLayout.open(path)
        if not contiguous:
            files = {f for f in os.listdir(path) if f.endswith(".chunk")}
            with read_frame(path) as frame:
                used = {b2l.chunk_file_name(int(o)) for o in frame.offsets_array() if o >= 0}
            assert files == used and not [f for f in os.listdir(path) if is_temporary(f)]
        else:
            with read_frame(path) as frame:  # the frame, then carray's record
                assert os.path.getsize(path) == frame.header.frame_len + frame.record_len
        again.commit(m_again.replace(shape=(0, 7)), 0)
        again.close()
        assert b2_read(path).shape == (0, 7)
        shutil.rmtree(path) if not contiguous else os.unlink(path)
        if finished:
            break
    assert seen[-1] == "S3" and {"S1", "S1'", "S2", "S3"} <= set(seen), seen
    assert len(seen) > 20


_WRITER = """
import sys
import numpy as np
from carray.codecs import blosc
from carray.layouts.b2nd import layout as b2frame
from carray.layouts.base import ArrayMeta
from carray.core.params import CParams

m = ArrayMeta(np.dtype("i8"), (64, 64), (16, 16), (8, 8))
lay = b2frame.B2ndLayout.open(sys.argv[1])[0]
g = m.grid
k = 0
while True:
    k += 1
    chunk = blosc.compress2(np.full(g.chunk_items, k, "i8"), 8, CParams(),
                            blocksize=g.block_nbytes)
    for n in range(g.nchunks):
        lay.write_chunk(n, chunk)
    lay.save_attrs({"k": k + 1})
    lay.commit(m, 0)
    print(k, flush=True)
"""


@pytest.mark.parametrize("contiguous", [True, False])
def test_sigkilled_writer(tmp_path, contiguous):
    """A real writer process killed at a random moment: the frame is at a commit."""
    path = tmp_path / "k.b2nd"
    m = ArrayMeta(np.dtype("i8"), (64, 64), (16, 16), (8, 8))
    B2ndLayout.create(path, m, contiguous=contiguous).close()
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        last = 0
        while last < 5:
            line = proc.stdout.readline()
            assert line, "the writer died on its own"
            last = int(line)
        time.sleep(np.random.default_rng().uniform(0, 0.02))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for lines in proc.stdout:
        last = max(last, *(int(x) for x in lines.split()))
    lay, m2, _ = B2ndLayout.open(path, readonly=True)
    data, attrs = read_all(lay, m2), lay.load_attrs()
    lay.close()
    value = int(data[0, 0])
    # Each round saves attrs k + 1 (a commit of its own), then commits data k.
    assert (data == value).all() and value >= last and attrs["k"] in (value + 1, value + 2)
    assert np.array_equal(b2_read(path), data) and b2_vlmeta(path) == attrs


# -- bad input ----------------------------------------------------------------------------

def _frame(tmp_path, contiguous=True, clevel=5) -> Path:
    path = tmp_path / ("c.b2nd" if contiguous else "s.b2nd")
    m = new_meta(shape=(10, 7), cparams=CParams(clevel=clevel))
    lay = B2ndLayout.create(path, m, contiguous=contiguous, fsync=False)
    store(lay, np.arange(70.0).reshape(10, 7), m)
    lay.commit(m, 0)
    lay.save_attrs({"a": "b"})
    lay.close()
    return path


def _open_and_read(path):
    lay, m, _ = B2ndLayout.open(path, readonly=True)
    try:
        lay.load_attrs()
        return read_all(lay, m)
    finally:
        lay.close()


def _patch(path: Path, offset: int, new: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[offset:offset + len(new)] = new
    path.write_bytes(bytes(data))


def test_truncated_frames(tmp_path):
    src = _frame(tmp_path)
    data = src.read_bytes()
    bad = tmp_path / "t.b2nd"
    for n in list(range(0, 200, 3)) + list(range(200, len(data), 17)) + [len(data) - 1]:
        bad.write_bytes(data[:n])
        with pytest.raises(FormatError) as err:
            _open_and_read(bad)
        assert str(bad) in str(err.value)


def _unmark(path) -> None:
    """Make a frame carray wrote look changed by c-blosc2 since (its own thread counts in
    the header): carray's digests no longer apply, so the checks below are what stands."""
    _patch(path, 63, b"\x00\x01\xd1\x00\x01")


def test_bad_offsets(tmp_path):
    path = _frame(tmp_path, clevel=0)  # a memcpyed offsets chunk: entries at known places
    with read_frame(path) as f:
        at = f.index_start + 32
    data = path.read_bytes()
    for new, match in ((struct.pack("<q", 10**9), "past"), (struct.pack("<q", -1), "special"),
                       (struct.pack("<q", 3), None)):
        path.write_bytes(data)
        _patch(path, at + 8, new)
        with pytest.raises(ChecksumError, match="offsets or trailer"):
            _open_and_read(path)
        _unmark(path)
        with pytest.raises(FormatError, match=match) as err:
            _open_and_read(path)
        assert str(path) in str(err.value)
    sparse = _frame(tmp_path, contiguous=False, clevel=0)
    index = sparse / "chunks.b2frame"
    with read_frame(sparse) as f:
        at = f.index_start + 32
    data = index.read_bytes()
    _unmark(index)
    _patch(index, at, struct.pack("<q", 2**33))
    with pytest.raises(FormatError, match="out of range"):
        _open_and_read(sparse)
    index.write_bytes(data)
    os.unlink(sparse / "00000003.chunk")
    with pytest.raises(FormatError, match="00000003.chunk"):
        _open_and_read(sparse)


@pytest.mark.parametrize("rel,new,match", [
    (2, b"\x11", "at most 16"),                                   # ndim 17
    (4, b"\xd3" + struct.pack(">q", -10), "negative"),            # shape
    (4, b"\xd3" + struct.pack(">q", 13), "expected"),             # shape vs nbytes
    (13, b"\xd3" + struct.pack(">q", 0), "empty"),                # zero extent, chunks stored
    (23, b"\xd2" + struct.pack(">i", 0), "chunk 0"),              # zero chunk
    (23, b"\xd2" + struct.pack(">i", 1), "larger than chunk"),    # block bigger than chunk
    (23, b"\xd2" + struct.pack(">i", 6), "chunksize"),            # chunkshape vs chunksize
    (34, b"\xd2" + struct.pack(">i", -2), "negative"),            # blockshape
])
def test_bad_b2nd_metalayer(tmp_path, rel, new, match):
    path = _frame(tmp_path)
    with read_frame(path) as f:
        at = f.header.meta_offsets["b2nd"] + 5
    _patch(path, at + rel, new)
    with pytest.raises(FormatError, match=match) as err:
        _open_and_read(path)
    assert str(path) in str(err.value)


def test_bad_carray_metalayer(tmp_path):
    path = _frame(tmp_path)
    with read_frame(path) as f:
        at = f.header.meta_offsets["carray"] + 5
    raw = bytearray(path.read_bytes())
    raw[at] = 0x93  # no longer a map
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="carray"):
        _open_and_read(path)


@pytest.mark.parametrize("contiguous", [True, False])
def test_random_mutations_never_crash(tmp_path, contiguous):
    src = _frame(tmp_path, contiguous=contiguous)
    target = src if contiguous else src / "chunks.b2frame"
    data = target.read_bytes()
    rng = np.random.default_rng(5)
    raised = 0
    for pos in rng.choice(len(data), min(len(data), 250), replace=False).tolist():
        mutated = bytearray(data)
        mutated[pos] ^= int(rng.integers(1, 256))
        target.write_bytes(bytes(mutated))
        try:
            _open_and_read(src)
        except CArrayError:
            raised += 1
    assert raised > 50
