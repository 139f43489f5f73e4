"""Streaming Bloscpack pack, unpack and append: sources, bounded memory, progress, and
temporary names renamed only when complete."""

from __future__ import annotations

import io
import os
import tracemalloc

import numpy as np
import pytest

from carray.errors import FormatError
from carray.formats import bloscpack as bp
from carray.formats.bloscpack import stream
from carray.formats.bloscpack.read import nworkers
from carray.stores.tempnames import is_temporary

ARRAYS = {
    "c_f8": np.linspace(0, 1, 50_000).reshape(500, 100),
    "f_i4": np.asfortranarray(np.arange(60_000, dtype="<i4").reshape(200, 300)),
    "big_endian": np.arange(10_000, dtype=">u2"),
    "records": np.array([(i, i * 0.5) for i in range(3000)], dtype=[("a", "<i4"), ("b", "<f8")]),
    "zero_d": np.array(3.5),
    "empty": np.zeros((0, 4), dtype="f4"),
    "column": np.asfortranarray(np.arange(12.0).reshape(12, 1)),
}


def _save(tmp_path, a, name="a.npy"):
    path = tmp_path / name
    np.save(path, a)
    return path


# -- sources ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_npy_header_reads_what_numpy_writes_and_writes_it_back(tmp_path, name):
    a = ARRAYS[name]
    path = _save(tmp_path, a)
    source, info = stream.open_npy(path)
    try:
        assert (info.dtype, info.shape) == (a.dtype, a.shape)
        assert info.nbytes == a.nbytes
        assert source.read(a.nbytes).tobytes() == a.tobytes(order="A")
    finally:
        source.close()
    raw = path.read_bytes()
    assert stream.npy_header(info.dtype, info.shape, info.order) == raw[:info.offset]


def test_npy_source_refuses_non_npy_and_truncated_files(tmp_path):
    (tmp_path / "x").write_bytes(b"hello world")
    with pytest.raises(FormatError, match="not a .npy file"):
        stream.open_npy(tmp_path / "x")
    path = _save(tmp_path, np.arange(1000.0))
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(FormatError, match="truncated .npy"):
        stream.open_npy(path)


def test_file_source_reports_a_file_that_shrank():
    f = io.BytesIO(b"x" * 100)
    source = stream.bytes_source(f)
    f.truncate(50)
    with pytest.raises(FormatError, match="ended after 50 of 100"):
        source.read(100)


# -- pack -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_pack_npy_writes_what_pack_array_writes(tmp_path, name, bloscpack_peer):
    a = ARRAYS[name]
    path = _save(tmp_path, a)
    bp.pack_array(a, tmp_path / "mem.blp", chunk_size=4096 - 4096 % max(a.itemsize, 1))
    bp.pack_npy(path, tmp_path / "npy.blp", chunk_size=4096 - 4096 % max(a.itemsize, 1))
    assert (tmp_path / "npy.blp").read_bytes() == (tmp_path / "mem.blp").read_bytes()
    with open(path, "rb") as f:  # a file object works the same
        bp.pack_npy(f, tmp_path / "obj.blp", chunk_size=4096 - 4096 % max(a.itemsize, 1))
    assert (tmp_path / "obj.blp").read_bytes() == (tmp_path / "mem.blp").read_bytes()
    got = bloscpack_peer.unpack_ndarray_from_file(str(tmp_path / "npy.blp"))
    assert got.shape == a.shape and got.tobytes(order="A") == a.tobytes(order="A")


def test_pack_of_a_memmap_reads_it_in_place(tmp_path):
    a = np.arange(300_000, dtype="f8")
    path = _save(tmp_path, a)
    bp.pack_array(np.load(path, mmap_mode="r"), tmp_path / "m.blp", chunk_size="64K")
    bp.pack_array(a, tmp_path / "a.blp", chunk_size="64K")
    assert (tmp_path / "m.blp").read_bytes() == (tmp_path / "a.blp").read_bytes()


@pytest.mark.parametrize("key", [np.s_[::3], np.s_[:, ::2], np.s_[::-1, 1:5], np.s_[::2, 0]])
def test_pack_of_a_strided_array_copies_a_few_rows_at_a_time(tmp_path, key):
    base = np.arange(40_000, dtype="i8").reshape(400, 100)
    a = base[key]
    assert not a.flags.c_contiguous
    bp.pack_array(a, tmp_path / "s.blp", chunk_size=1000 * 8)
    bp.pack_array(np.ascontiguousarray(a), tmp_path / "c.blp", chunk_size=1000 * 8)
    assert (tmp_path / "s.blp").read_bytes() == (tmp_path / "c.blp").read_bytes()
    assert np.array_equal(bp.unpack_array(tmp_path / "s.blp"), a)


def test_strided_source_pieces_are_bounded():
    a = np.arange(2**21, dtype="f8").reshape(2**11, 2**10)[:, ::2]  # rows of 4 KiB
    source = stream.StridedSource(a)
    pieces = [source.read(10_000) for _ in range(a.nbytes // 10_000)]
    assert all(p.nbytes == 10_000 for p in pieces)
    assert source.pending.nbytes < 4096 + 10_000
    assert b"".join(p.tobytes() for p in pieces) == a.tobytes()[:len(pieces) * 10_000]


def test_pack_bytes_from_a_file_object(tmp_path):
    data = os.urandom(5000) + bytes(20_000)
    bp.pack_bytes(data, tmp_path / "a.blp", chunk_size=4096, typesize=4)
    (tmp_path / "src").write_bytes(b"skip" + data)
    with open(tmp_path / "src", "rb") as f:
        f.read(4)  # read from the file's position to its end
        bp.pack_bytes(f, tmp_path / "b.blp", chunk_size=4096, typesize=4)
    assert (tmp_path / "b.blp").read_bytes() == (tmp_path / "a.blp").read_bytes()


def test_pack_bytes_needs_a_seekable_file(tmp_path):
    r, w = os.pipe()
    os.write(w, b"abc")
    os.close(w)
    with os.fdopen(r, "rb") as f, pytest.raises(ValueError, match="seekable"):
        bp.pack_bytes(f, tmp_path / "a.blp")
    assert os.listdir(tmp_path) == []


# -- unpack -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_unpack_file_writes_the_npy_numpy_would(tmp_path, name):
    a = ARRAYS[name]
    bp.pack_array(a, tmp_path / "a.blp", chunk_size=4096 - 4096 % max(a.itemsize, 1))
    assert bp.unpack_file(tmp_path / "a.blp", tmp_path / "out.npy") == "npy"
    np.save(tmp_path / "ref.npy", bp.unpack_array(tmp_path / "a.blp"))
    assert (tmp_path / "out.npy").read_bytes() == (tmp_path / "ref.npy").read_bytes()
    got = np.load(tmp_path / "out.npy")
    assert got.dtype == a.dtype and got.shape == a.shape
    assert got.tobytes(order="A") == a.tobytes(order="A")


def test_unpack_file_raw_bytes(tmp_path):
    data = os.urandom(3000) + bytes(10_000)
    bp.pack_bytes(data, tmp_path / "b.blp", chunk_size=1024)
    assert bp.unpack_file(tmp_path / "b.blp", tmp_path / "b.out") == "raw"
    assert (tmp_path / "b.out").read_bytes() == data
    a = np.arange(5000, dtype="i2")
    bp.pack_array(a, tmp_path / "a.blp", chunk_size=1024)
    assert bp.unpack_file(tmp_path / "a.blp", tmp_path / "a.raw", npy=False) == "raw"
    assert (tmp_path / "a.raw").read_bytes() == a.tobytes()
    with pytest.raises(FormatError, match="does not hold a NumPy array"):
        bp.unpack_file(tmp_path / "b.blp", tmp_path / "x.npy", npy=True)
    assert not (tmp_path / "x.npy").exists()


def test_unpack_array_into_a_given_array(tmp_path):
    a = np.asfortranarray(np.arange(20_000.0).reshape(100, 200))
    bp.pack_array(a, tmp_path / "a.blp", chunk_size="16K")
    out = np.lib.format.open_memmap(tmp_path / "out.npy", mode="w+", dtype=a.dtype,
                                    shape=a.shape, fortran_order=True)
    assert bp.unpack_array(tmp_path / "a.blp", out=out) is out
    out.flush()
    assert np.array_equal(np.load(tmp_path / "out.npy"), a)
    for bad in (np.empty((100, 200)), np.empty((100, 201), order="F"),
                np.empty((100, 200), dtype="f4", order="F")):
        with pytest.raises(ValueError, match="out is"):
            bp.unpack_array(tmp_path / "a.blp", out=bad)


# -- progress ---------------------------------------------------------------------------------

def test_progress_is_reported_after_every_chunk(tmp_path):
    a = np.arange(10_000, dtype="f8")  # 80,000 bytes: 9 chunks of 8 KiB and a short one
    calls: dict[str, list] = {"pack": [], "unpack": [], "file": [], "append": []}
    bp.pack_array(a, tmp_path / "a.blp", chunk_size="8K",
                  progress=lambda d, t: calls["pack"].append((d, t)))
    bp.unpack_array(tmp_path / "a.blp", progress=lambda d, t: calls["unpack"].append((d, t)))
    bp.unpack_file(tmp_path / "a.blp", tmp_path / "o.npy",
                   progress=lambda d, t: calls["file"].append((d, t)))
    bp.append(tmp_path / "a.blp", np.ones(3000), progress=lambda d, t: calls["append"].append((d, t)))
    for name in ("pack", "file"):
        assert calls[name][0] == (0, 80_000) and calls[name][-1] == (80_000, 80_000)
        assert len(calls[name]) == 11
    assert [d for d, _ in calls["unpack"]] == [8192 * k for k in range(10)] + [80_000]
    # The short last chunk (6272 bytes) is filled first, then three chunks follow.
    assert [d for d, _ in calls["append"]] == [0, 1920, 10_112, 18_304, 24_000]


# -- bounded memory ---------------------------------------------------------------------------

class CountingFile(io.FileIO):
    """A file that counts the chunk-sized reads made of it."""

    reads = 0

    def readinto(self, buf):
        type(self).reads += 1
        return super().readinto(buf)


def test_pack_reads_only_a_few_chunks_ahead_of_the_writes(tmp_path):
    np.save(tmp_path / "a.npy", np.random.default_rng(0).random(2**17))  # 1 MiB, 64 chunks
    ahead: list[int] = []
    CountingFile.reads = 0
    with CountingFile(tmp_path / "a.npy", "rb") as f:
        bp.pack_npy(f, tmp_path / "a.blp", chunk_size="16K",
                    progress=lambda d, t: ahead.append(CountingFile.reads - d // 16384))
    assert len(ahead) == 65 and ahead[-1] >= 0
    # At most two chunks per thread are read ahead of the one being written.
    assert max(ahead) <= 2 * nworkers(64)


@pytest.mark.parametrize("verb", ["pack", "unpack", "append", "strided"])
def test_memory_stays_a_few_chunks_whatever_the_size(tmp_path, verb):
    chunk = 2**18
    a = np.random.default_rng(1).integers(0, 1000, 2**22)  # 32 MiB of int64
    np.save(tmp_path / "a.npy", a)
    bp.pack_array(a[:chunk // 8], tmp_path / "small.blp", chunk_size=chunk, max_app_chunks=200)
    if verb != "pack":
        bp.pack_npy(tmp_path / "a.npy", tmp_path / "a.blp", chunk_size=chunk)
    strided = a.reshape(-1, 2)[:, 0] if verb == "strided" else None  # 16 MiB, not contiguous
    del a
    tracemalloc.start()
    try:
        if verb == "strided":
            bp.pack_array(strided, tmp_path / "s.blp", chunk_size=chunk)
        elif verb == "pack":
            bp.pack_npy(tmp_path / "a.npy", tmp_path / "b.blp", chunk_size=chunk)
        elif verb == "unpack":
            bp.unpack_file(tmp_path / "a.blp", tmp_path / "b.npy")
        else:
            with open(tmp_path / "a.npy", "rb") as f:
                bp.append(tmp_path / "small.blp", f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # 32 MiB went through; a handful of 256 KiB chunks (in and out) were held at once.
    assert peak < (4 * nworkers(128) + 6) * chunk, peak
    if verb == "unpack":
        assert np.array_equal(np.load(tmp_path / "b.npy"), np.load(tmp_path / "a.npy"))
    if verb == "append":
        assert bp.unpack_array(tmp_path / "small.blp").shape == (chunk // 8 + 2**22,)


# -- temporary names --------------------------------------------------------------------------

def test_pack_writes_under_a_temporary_name_until_complete(tmp_path):
    seen: list[list[str]] = []
    dst = tmp_path / "a.blp"
    bp.pack_array(np.arange(50_000), dst, chunk_size="64K",
                  progress=lambda d, t: seen.append(sorted(os.listdir(tmp_path))))
    # While chunks are written only a temporary file exists beside the destination.
    assert len(seen) > 2
    assert all(len(names) == 1 and is_temporary(names[0], "a.blp") for names in seen), seen
    assert os.listdir(tmp_path) == ["a.blp"]


def test_unpack_file_writes_under_a_temporary_name_until_complete(tmp_path):
    bp.pack_array(np.arange(50_000), tmp_path / "a.blp", chunk_size="64K")
    seen: list[list[str]] = []
    bp.unpack_file(tmp_path / "a.blp", tmp_path / "o.npy",
                   progress=lambda d, t: seen.append(sorted(os.listdir(tmp_path))))
    assert len(seen) > 2 and "o.npy" not in seen[-1]
    assert sorted(os.listdir(tmp_path)) == ["a.blp", "o.npy"]


def _interrupt_at(n: int):
    def progress(done, total):
        if done >= n:
            raise KeyboardInterrupt

    return progress


def test_interrupted_calls_leave_nothing_behind(tmp_path):
    a = np.arange(100_000)
    bp.pack_array(a, tmp_path / "a.blp", chunk_size="64K")
    original = (tmp_path / "a.blp").read_bytes()
    with pytest.raises(KeyboardInterrupt):
        bp.pack_array(a, tmp_path / "b.blp", chunk_size="64K", progress=_interrupt_at(200_000))
    with pytest.raises(KeyboardInterrupt):
        bp.unpack_file(tmp_path / "a.blp", tmp_path / "o.npy", progress=_interrupt_at(200_000))
    with pytest.raises(KeyboardInterrupt):
        bp.append(tmp_path / "a.blp", a, progress=_interrupt_at(200_000))
    assert os.listdir(tmp_path) == ["a.blp"]
    assert (tmp_path / "a.blp").read_bytes() == original


# -- append -----------------------------------------------------------------------------------

def test_append_from_files_matches_append_from_memory(tmp_path):
    a, b = np.arange(30_000, dtype="f4"), np.arange(7_000, dtype="f4")
    for name in ("mem.blp", "npy.blp"):
        bp.pack_array(a, tmp_path / name, chunk_size="16K")
    np.save(tmp_path / "b.npy", b)
    bp.append(tmp_path / "mem.blp", b)
    with open(tmp_path / "b.npy", "rb") as f:
        assert bp.append(tmp_path / "npy.blp", f) == 2
    assert (tmp_path / "npy.blp").read_bytes() == (tmp_path / "mem.blp").read_bytes()
    data = os.urandom(20_000)
    bp.pack_bytes(b"x" * 5000, tmp_path / "raw.blp", chunk_size=4096)
    (tmp_path / "more").write_bytes(data)
    with open(tmp_path / "more", "rb") as f:
        bp.append(tmp_path / "raw.blp", f)
    assert bp.unpack_bytes(tmp_path / "raw.blp") == b"x" * 5000 + data


def test_append_npy_must_match_order_and_dtype(tmp_path):
    bp.pack_array(np.zeros((4, 3)), tmp_path / "a.blp")
    np.save(tmp_path / "f.npy", np.asfortranarray(np.ones((5, 3))))
    np.save(tmp_path / "i.npy", np.ones((5, 3), dtype="i8"))
    with open(tmp_path / "f.npy", "rb") as f, pytest.raises(ValueError, match="F-ordered"):
        bp.append(tmp_path / "a.blp", f)
    with open(tmp_path / "i.npy", "rb") as f, pytest.raises(ValueError, match="int64"):
        bp.append(tmp_path / "a.blp", f)
    assert bp.unpack_array(tmp_path / "a.blp").shape == (4, 3)
