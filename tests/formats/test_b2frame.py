"""Blosc2 frames (b2nd, caterva, SChunk): fixtures, round trips, python-blosc2 interop, bad input."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import blosc2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carray.chunks import geometry as geo
from carray.errors import (
    CArrayError,
    ContainerExistsError,
    FormatError,
    UnsupportedDTypeError,
)
from carray.layouts.b2nd.digests import RECORD_NAME
from carray.layouts.b2nd.frame import (
    default_chunks_blocks,
    read_array,
    read_frame,
    read_region,
    write_array,
)

DATA = Path(__file__).parent.parent / "data"


def _manifest(fmt: str) -> list[dict]:
    return json.loads((DATA / fmt / "MANIFEST.json").read_text())["fixtures"]


FIXTURES = [(fmt, fx) for fmt in ("blosc2", "caterva") for fx in _manifest(fmt)]
ND_FIXTURES = [(fmt, fx) for fmt, fx in FIXTURES if fx["expected"].endswith(".npy")]


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return (got.dtype == want.dtype and got.shape == want.shape
            and got.tobytes() == want.tobytes())


def _b2_read(path) -> np.ndarray:
    arr = blosc2.open(os.fspath(path), mode="r")
    return np.asarray(arr[()] if arr.ndim == 0 else arr[...])


def _b2_vlmeta(path) -> dict:
    """The user attributes python-blosc2 sees (carray's record of digests, which it reads
    as bytes, left out)."""
    arr = blosc2.open(os.fspath(path), mode="r")  # the vlmeta view needs its owner alive
    vl = arr.vlmeta
    out = {k: vl[k] for k in vl.keys()}
    del vl, arr
    assert isinstance(out.pop(RECORD_NAME, b""), bytes)
    return out


# -- fixtures -----------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,fx", FIXTURES, ids=[fx["name"] for _, fx in FIXTURES])
def test_fixture_reads_exactly(fmt, fx):
    path = DATA / fmt / fx["path"]
    em = fx["expected_meta"]
    with read_frame(path) as f:
        assert f.contiguous == (not path.is_dir())
        if fx["expected"].endswith(".bin"):
            assert f.kind == "schunk"
            assert f.read_bytes() == (DATA / fmt / fx["expected"]).read_bytes()
            assert f.nchunks == em["nchunks"]
            assert f.header.chunksize == em["chunksize"]
            assert f.header.typesize == em["typesize"]
            assert f.meta == em["metalayers"]
            assert f.vlmeta == em["vlmeta"]
            return
        want = np.load(DATA / fmt / fx["expected"])
        assert list(f.shape) == em["shape"]
        assert list(f.chunkshape) == em["chunks"]
        assert list(f.blockshape) == em["blocks"]
        if fmt == "caterva":
            assert f.kind == "caterva"
            assert f.header.typesize == em["itemsize"] == want.dtype.itemsize
            for name, layer in em["metalayers"].items():
                assert f.meta_raw[name] == bytes.fromhex(layer["raw_hex"])
            assert f.meta["caterva"] == em["metalayers"]["caterva"]["msgpack_decoded"]
            got = read_array(path, dtype=want.dtype)
        else:
            assert f.kind == "b2nd"
            assert str(f.dtype) == em["dtype"]
            assert f.header.typesize == em["typesize"]
            assert f.nchunks == em["nchunks"]
            assert f.header.chunksize == em["chunksize_bytes"] or f.nchunks == 0
            assert f.meta == em["metalayers"]
            assert f.vlmeta == em["vlmeta"]
            got = read_array(path)
    assert _same(got, want)


def test_caterva_default_dtype_is_unsigned_of_the_item_size():
    got = read_array(DATA / "caterva" / "cat_i2_3d_sparse.caterva")
    want = np.load(DATA / "caterva" / "cat_i2_3d_sparse.expected.npy")
    assert got.dtype == np.uint16
    assert _same(got.view(want.dtype), want)
    with pytest.raises(ValueError, match="2-byte"):
        read_frame(DATA / "caterva" / "cat_i2_3d_sparse.caterva", dtype="f8")


@pytest.mark.parametrize("fmt,fx", ND_FIXTURES, ids=[fx["name"] for _, fx in ND_FIXTURES])
def test_fixture_regions_match_numpy(fmt, fx):
    want = np.load(DATA / fmt / fx["expected"])
    rng = np.random.default_rng(len(fx["name"]))
    with read_frame(DATA / fmt / fx["path"], dtype=want.dtype) as f:
        for _ in range(12):
            key = []
            for n in want.shape:
                a, b = sorted(rng.integers(0, n + 1, 2)) if n else (0, 0)
                step = int(rng.choice([1, 1, 2, 3, -1]))
                key.append(int(rng.integers(n)) if n and rng.random() < 0.2
                           else slice(a, b, step) if step > 0 else slice(b, a, step))
            key = tuple(key)
            assert _same(f[key], want[key]), key


def test_fixture_special_chunks_are_not_stored():
    path = DATA / "blosc2" / "nd_zeros_special.b2nd"
    with read_frame(path) as f:
        assert f.header.cbytes == 0
        chunk = f.read_chunk(0)
        assert len(chunk) == 32 and chunk[31] >> 4 == 1
        read_at, size = f.chunk_reader(1)
        assert size == 32 and read_at(0, 100) == f.read_chunk(1)


def test_chunk_reader_reads_ranges_of_stored_chunks():
    path = DATA / "blosc2" / "nd_i4_2d_zstd_shuffle.b2nd"
    with read_frame(path) as f:
        for i in range(f.nchunks):
            whole = f.read_chunk(i)
            read_at, size = f.chunk_reader(i)
            assert size == len(whole)
            assert read_at(0, size) == whole
            assert read_at(5, 7) == whole[5:12]
            assert read_at(size - 3, 10) == whole[-3:]
            assert len(f.decode_chunk(i)) == f.header.chunksize


# -- round trips --------------------------------------------------------------------------

_RNG = np.random.default_rng(7)
ROUND_TRIP = {
    "i4_2d": (_RNG.integers(-1000, 1000, (10, 100), dtype="<i4"), (4, 30), (2, 7)),
    "f8_3d": (_RNG.normal(size=(9, 8, 7)), (4, 4, 4), (2, 2, 2)),
    "f4_4d": (_RNG.random((5, 6, 7, 8), dtype="f4"), (2, 3, 4, 5), (1, 2, 2, 3)),
    "scalar": (np.array(3.25), (), ()),
    "empty": (np.zeros((0, 3), "i2"), (0, 3), (0, 3)),
    "bool": (_RNG.random((30, 40)) > 0.5, (16, 16), (8, 8)),
    "c16": (_RNG.random((6, 10)) + 1j * _RNG.random((6, 10)), (4, 4), (2, 2)),
    "c8": (_RNG.random((33,)).astype("c8"), (10,), (4,)),
    "S3": (np.array([b"ab", b"cde", b""] * 7, "S3"), (7,), (3,)),
    "S300": (np.array([b"x" * 300, b"y"] * 5, "S300"), (4,), (2,)),
    "U5": (np.array(["h\u00e9llo", "x", "\u4e2d\u6587"] * 10, "<U5"), (7,), (3,)),
    "big_endian": (np.arange(100, dtype=">i4"), (40,), (8,)),
    "big_endian_f8": (np.linspace(0, 1, 50).astype(">f8").reshape(5, 10), (2, 3), (1, 2)),
    "structured": (np.array([(i, i / 3) for i in range(77)], [("a", "<i4"), ("b", "<f8")]),
                   (20,), (5,)),
    "u2_5d": (_RNG.integers(0, 60000, (3, 4, 2, 5, 3), dtype="u2"), (2, 3, 2, 2, 3),
              (1, 2, 1, 2, 2)),
    "datetime": (np.arange(20).astype("M8[s]"), (6,), (4,)),
    "i1_8d": (_RNG.integers(-5, 5, (2,) * 8, dtype="i1"), (1, 2) * 4, (1, 1) * 4),
}


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
@pytest.mark.parametrize("name", list(ROUND_TRIP))
def test_round_trip_and_python_blosc2_reads_ours(tmp_path, name, contiguous):
    a, chunks, blocks = ROUND_TRIP[name]
    path = tmp_path / "a.b2nd"
    attrs = {"units": "m", "n": 3, "list": [1, 2.5, None], "nested": {"k": [True]}}
    write_array(a, path, chunks=chunks, blocks=blocks, contiguous=contiguous, vlmeta=attrs)
    assert path.is_dir() != contiguous
    assert _same(read_array(path), a)
    with read_frame(path) as f:
        assert f.vlmeta == attrs
        assert (f.chunkshape, f.blockshape) == (chunks, blocks)
    assert _same(_b2_read(path), a)
    assert _b2_vlmeta(path) == attrs
    b2 = blosc2.open(os.fspath(path), mode="r")
    assert b2.chunks == chunks and b2.blocks == blocks


def test_b2nd_metalayer_is_byte_identical_to_python_blosc2(tmp_path):
    for name in ("i4_2d", "structured", "U5", "scalar", "big_endian", "S3"):
        a, chunks, blocks = ROUND_TRIP[name]
        ours, theirs = tmp_path / f"{name}.ours.b2nd", tmp_path / f"{name}.b2.b2nd"
        write_array(a, ours, chunks=chunks, blocks=blocks)
        blosc2.asarray(a, chunks=chunks or None, blocks=blocks or None, urlpath=str(theirs),
                       mode="w")
        with read_frame(ours) as f, read_frame(theirs) as g:
            assert f.meta_raw["b2nd"] == g.meta_raw["b2nd"], name
            dstr = f.meta["b2nd"][6].encode()
            assert f.meta_raw["b2nd"][-len(dstr) - 5] == 0xDB  # str32 even when short
            assert f.header.chunksize == g.header.chunksize
            assert f.header.blocksize == g.header.blocksize
            assert f.header.typesize == g.header.typesize


@pytest.mark.parametrize("cname", ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
def test_codecs_round_trip(tmp_path, cname, shuffle):
    a = np.cumsum(_RNG.integers(-3, 4, (40, 50)), axis=1).astype("i8")
    path = tmp_path / "a.b2nd"
    write_array(a, path, chunks=(16, 20), blocks=(4, 10),
                cparams={"cname": cname, "clevel": 7, "shuffle": shuffle})
    with read_frame(path) as f:
        assert f.header.clevel == 7
        assert f.header.compcode == {"blosclz": 0, "lz4": 1, "lz4hc": 2, "zlib": 4,
                                     "zstd": 5}[cname]
        assert _same(f.read(), a)
    assert _same(_b2_read(path), a)


def test_zero_chunks_become_special_offsets(tmp_path):
    a = np.zeros((40, 40))
    a[30:, 30:] = 1.0
    path = tmp_path / "z.b2nd"
    write_array(a, path, chunks=(20, 20), blocks=(10, 10))
    with read_frame(path) as f:
        assert f.header.cbytes < 1000  # three of the four chunks take no space
        assert sum(len(f.read_chunk(i)) == 32 for i in range(4)) >= 3
    assert _same(read_array(path), a)
    assert _same(_b2_read(path), a)
    write_array(a, tmp_path / "zs.b2nd", chunks=(20, 20), blocks=(10, 10), contiguous=False)
    assert sorted(os.listdir(tmp_path / "zs.b2nd")) == ["00000000.chunk", "chunks.b2frame"]
    assert _same(_b2_read(tmp_path / "zs.b2nd"), a)


def test_default_chunks_and_blocks(tmp_path):
    a = _RNG.random((300, 200, 50))
    chunks, blocks = default_chunks_blocks(a.shape, 8)
    assert geo.check_geometry(a.shape, chunks, blocks, 8) is None
    assert np.prod(chunks) * 8 <= 8 * 2**20 and np.prod(blocks) * 8 <= 32 * 2**10
    path = tmp_path / "d.b2nd"
    write_array(a, path, meta={"extra": {"a": 1}})
    assert _same(read_array(path), a)
    b2 = blosc2.open(str(path))
    assert b2.schunk.meta["extra"] == {"a": 1}
    del b2
    write_array(a[:, :, 0], path, chunks=(64, 64))  # blocks derived from the chunks
    with read_frame(path) as f:
        assert f.chunkshape == (64, 64) and all(b <= 64 for b in f.blockshape)


def test_overwrite_replaces_previous_frame(tmp_path):
    path = tmp_path / "o.b2nd"
    write_array(np.arange(10), path, contiguous=False)
    write_array(np.arange(5.0), path)
    assert path.is_file() and _same(read_array(path), np.arange(5.0))
    write_array(np.arange(3), path, contiguous=False)
    assert path.is_dir() and _same(read_array(path), np.arange(3))
    assert sorted(os.listdir(tmp_path)) == ["o.b2nd"]
    other = tmp_path / "dir"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(ContainerExistsError):
        write_array(np.arange(3), other)
    assert (other / "keep.txt").exists()


def test_write_rejects_bad_arguments(tmp_path):
    p = tmp_path / "x.b2nd"
    with pytest.raises(ValueError, match="at most 16"):
        write_array(np.zeros((1,) * 17), p)
    with pytest.raises(UnsupportedDTypeError):
        write_array(np.array([1, "a"], dtype=object), p)
    with pytest.raises(ValueError, match="larger than chunk"):
        write_array(np.zeros(10), p, chunks=(4,), blocks=(5,))
    with pytest.raises(ValueError, match="differ in length"):
        write_array(np.zeros((4, 4)), p, chunks=(4,), blocks=(4,))
    with pytest.raises(ValueError, match="items but chunk"):
        write_array(np.zeros(4), p, chunks=(0,), blocks=(0,))
    with pytest.raises(ValueError, match="name"):
        write_array(np.zeros(4), p, vlmeta={"x" * 40: 1})
    with pytest.raises(TypeError):
        write_array(np.zeros(4), p, vlmeta={"x": object()})
    assert not p.exists()


def test_sixteen_dimensions_both_ways(tmp_path):
    # b2nd allows 16 (B2ND_MAX_DIM); c-blosc2 marks the 16-entry arrays with 0xA0.
    a = np.arange(2**16, dtype="u1").reshape((2,) * 16)
    ours, theirs = tmp_path / "ours.b2nd", tmp_path / "theirs.b2nd"
    write_array(a, ours, chunks=(1,) * 8 + (2,) * 8, blocks=(1,) * 12 + (2,) * 4)
    assert _same(_b2_read(ours), a)
    blosc2.asarray(a, urlpath=str(theirs), mode="w", chunks=(1,) * 8 + (2,) * 8,
                   blocks=(1,) * 12 + (2,) * 4)
    assert _same(read_array(theirs), a)
    assert ours.read_bytes().count(b"\x97\x00\x10\xa0") == 1


def test_caterva_frames_stay_at_eight_dimensions(tmp_path):
    src = DATA / "caterva" / "cat_f8_2d_zstd.caterva"
    bad = tmp_path / "c.caterva"
    shutil.copy(src, bad)
    with read_frame(bad) as f:
        at = f.header.meta_offsets["caterva"] + 5
    _patch(bad, at + 2, b"\x09")
    with pytest.raises(FormatError, match="at most 8"):
        read_frame(bad)


# -- hypothesis: geometry round trips ----------------------------------------------------

@st.composite
def geometries(draw, max_dim=4):
    ndim = draw(st.integers(0, max_dim))
    shape = tuple(draw(st.integers(1, 13)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, s + 2)) for s in shape)
    blocks = tuple(draw(st.integers(1, c)) for c in chunks)
    return shape, chunks, blocks


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(geom=geometries(), contiguous=st.booleans(), data=st.data())
def test_round_trip_any_geometry(tmp_path, geom, contiguous, data):
    shape, chunks, blocks = geom
    dtype = data.draw(st.sampled_from(["u1", "<i2", ">f4", "f8", "c16", "S5", "<U3"]))
    a = np.arange(int(np.prod(shape)), dtype="i8").reshape(shape).astype(dtype)
    path = tmp_path / f"h{int(contiguous)}.b2nd"
    write_array(a, path, chunks=chunks, blocks=blocks, contiguous=contiguous)
    with read_frame(path) as f:
        assert _same(f.read(), a)
        key = tuple(slice(*sorted(data.draw(st.tuples(st.integers(0, n), st.integers(0, n)))))
                    for n in shape)
        assert _same(f[key], a[key])
    assert _same(_b2_read(path), a)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(geom=geometries(), contiguous=st.booleans())
def test_read_what_python_blosc2_writes(tmp_path, geom, contiguous):
    shape, chunks, blocks = geom
    a = np.random.default_rng(1).normal(size=shape).astype("f4")
    path = tmp_path / f"b{int(contiguous)}.b2nd"
    blosc2.asarray(a, chunks=chunks or None, blocks=blocks or None, urlpath=str(path),
                   contiguous=contiguous, mode="w")
    assert _same(read_array(path), a)
    if a.ndim:
        key = tuple(slice(n // 3, n) for n in shape)
        assert _same(read_region(path, key), a[key])


def test_read_python_blosc2_specials_and_vlmeta(tmp_path):
    p = tmp_path / "full.b2nd"
    blosc2.full((50, 30), 7.5, chunks=(20, 10), blocks=(5, 5), urlpath=str(p), mode="w")
    assert _same(read_array(p), np.full((50, 30), 7.5))
    p = tmp_path / "nan.b2nd"
    blosc2.full((40,), np.nan, dtype="f4", chunks=(16,), urlpath=str(p), mode="w")
    assert np.isnan(read_array(p)).all()
    p = tmp_path / "e.b2nd"
    b = blosc2.empty((30, 7), dtype="i4", chunks=(10, 7), urlpath=str(p), mode="w",
                     contiguous=False)
    b[5:12] = 3
    b.vlmeta["k"] = {"a": [1, 2], "b": b"raw"}
    want = np.asarray(b[...])
    got = read_array(p)
    assert _same(got[5:12], want[5:12])
    with read_frame(p) as f:
        assert f.vlmeta == {"k": {"a": [1, 2], "b": b"raw"}}


def test_regions_take_carray_keys():
    # Region reads go through carray's chunk grid: every axis indexed on its own.
    path = DATA / "blosc2" / "nd_i4_2d_zstd_shuffle.b2nd"
    want = np.load(DATA / "blosc2" / "nd_i4_2d_zstd_shuffle.expected.npy")
    with read_frame(path) as f:
        assert _same(f[[7, 0, 7], ::-13], want[np.ix_([7, 0, 7], range(99, -1, -13))])
        assert _same(f[want[:, 0] > want[5, 0], 4], want[want[:, 0] > want[5, 0], 4])
        assert _same(f[None, 3, ..., 2:5], want[None, 3, ..., 2:5])
        with pytest.raises(IndexError):
            f[10]
        with pytest.raises(IndexError):
            f[0, 0, 0]


def test_blocked_layout_helpers():
    ext, bs = (4, 6), (2, 3)
    chunk = np.arange(24).reshape(ext)
    stored = geo.to_blocked(chunk, bs).reshape(-1)
    # block (0, 0) first, C-ordered inside: rows 0-1, columns 0-2
    assert list(stored[:6]) == [0, 1, 2, 6, 7, 8]
    assert np.array_equal(geo.blocked_view(stored, ext, bs).reshape(ext), chunk)
    assert geo.blocked_is_c_order((4, 6), (2, 6))
    assert geo.blocked_is_c_order((4, 6), (2, 3)) is False
    assert geo.blocked_is_c_order((4, 6), (1, 3))  # one-row blocks follow each other
    assert geo.blocked_is_c_order((4, 6, 5), (1, 3, 5))
    assert geo.blocked_is_c_order((4, 6, 5), (1, 3, 1)) is False
    assert geo.ext_chunkshape((4, 30), (2, 7)) == (4, 35)


# -- bad input ----------------------------------------------------------------------------

def _small_frame(tmp_path, contiguous=True, **kw) -> Path:
    a = np.arange(600, dtype="<i4").reshape(20, 30)
    path = tmp_path / ("s.b2nd" if contiguous else "d.b2nd")
    kw.setdefault("cparams", {"cname": "zstd", "clevel": 5})
    write_array(a, path, chunks=(8, 16), blocks=(4, 8), contiguous=contiguous,
                vlmeta={"a": "b"}, **kw)
    return path


def _read_all(path):
    with read_frame(path) as f:
        f.vlmeta  # noqa: B018 - decoding the trailer values is part of reading
        if f.ndim == 2:  # a mutated layer name turns the frame into a plain SChunk
            f[3:9, 5:20]  # ranged block reads take another path than whole chunks
        return f.read()


def test_truncated_files_raise_format_error(tmp_path):
    src = _small_frame(tmp_path)
    data = src.read_bytes()
    bad = tmp_path / "t.b2nd"
    for n in list(range(0, 120)) + list(range(120, len(data), 7)) + [len(data) - 1]:
        bad.write_bytes(data[:n])
        with pytest.raises(FormatError) as err:
            _read_all(bad)
        assert str(bad) in str(err.value)


def test_truncated_or_missing_sparse_chunk_files(tmp_path):
    src = _small_frame(tmp_path, contiguous=False)
    chunk = src / "00000002.chunk"
    data = chunk.read_bytes()
    for n in (0, 10, 31, 40, len(data) - 1):
        chunk.write_bytes(data[:n])
        with pytest.raises(FormatError):
            _read_all(src)
    chunk.unlink()
    with pytest.raises(FormatError, match="00000002.chunk"):
        _read_all(src)
    index = src / "chunks.b2frame"
    for n in (0, 50, 90, len(index.read_bytes()) - 1):
        index.write_bytes(index.read_bytes()[:n])
        with pytest.raises(FormatError):
            _read_all(src)


def _patch(path: Path, offset: int, new: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[offset:offset + len(new)] = new
    path.write_bytes(bytes(data))


def _b2nd_offset(path: Path) -> int:
    with read_frame(path) as f:
        return f.header.meta_offsets["b2nd"] + 5  # past C6 + uint32 length


@pytest.mark.parametrize("what,rel,new,match", [
    ("ndim 17", 2, b"\x11", "at most 16"),
    ("ndim 3", 2, b"\x03", "fixarray"),
    ("version", 1, b"\x01", "version"),
    ("not an array", 0, b"\x96", "fixarray"),
    ("shape negative", 4, b"\xd3" + struct.pack(">q", -20), "negative"),
    ("shape huge", 4, b"\xd3" + struct.pack(">q", 2**40), "bytes"),
    ("shape wrong marker", 4, b"\xd2", "0xd3"),
    ("chunk zero", 23, b"\xd2" + struct.pack(">i", 0), "chunk 0"),
    ("chunk smaller than block", 23, b"\xd2" + struct.pack(">i", 2), "block 4 larger"),
    ("chunk grows", 23, b"\xd2" + struct.pack(">i", 9), "chunksize"),
    ("block zero", 34, b"\xd2" + struct.pack(">i", 0), "block 0"),
    ("dtype format", 44, b"\x01", "dtype format"),
    ("dtype marker", 45, b"\xd9", "str32"),
    ("dtype length", 46, struct.pack(">I", 999), "does not fit"),
    ("dtype garbage", 50, b"zz4", "not a NumPy dtype"),
    ("dtype other size", 50, b"<i8", "typesize"),
])
def test_garbage_b2nd_metalayer(tmp_path, what, rel, new, match):
    path = _small_frame(tmp_path)
    _patch(path, _b2nd_offset(path) + rel, new)
    with pytest.raises(FormatError, match=match) as err:
        _read_all(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("offset,new,match", [
    (0, b"\x9f", "magic"),
    (3, b"X", "magic"),
    (10, b"\xd3", "0xd2"),
    (11, struct.pack(">i", 10**6), "header_len"),
    (11, struct.pack(">i", 20), "header_len"),
    (16, struct.pack(">Q", 2**40), "larger than the file"),
    (25, b"\x05", "version"),
    (25, b"\x22", "64-bit"),
    (26, b"\x01", "sparse"),
    (30, struct.pack(">q", -5), "negative"),
    (39, struct.pack(">q", 2**40), "chunks"),
    (48, struct.pack(">i", 0), "typesize"),
    (58, struct.pack(">i", 1000), "chunksize|expected"),
    (68, b"\x00", "bool"),
    (70, b"\x09", "filters"),
    (87, b"\x92", "metalayer"),
    (92, b"\xff\xff", "at most 16"),
])
def test_mutated_header(tmp_path, offset, new, match):
    path = _small_frame(tmp_path)
    _patch(path, offset, new)
    with pytest.raises(FormatError, match=match):
        _read_all(path)


def test_bad_offsets_and_trailer(tmp_path):
    path = _small_frame(tmp_path, cparams={"clevel": 0})  # memcpyed offsets chunk
    with read_frame(path) as f:
        index_at = f.header.header_len + f.header.cbytes + 32
        n, frame_len = f.nchunks, f.header.frame_len
    data = path.read_bytes()
    cases = [
        (index_at + 8, struct.pack("<q", 10**9), "past"),
        (index_at, struct.pack("<q", -1), "special"),
        (index_at, struct.pack("<q", 3), None),  # not a chunk start
        (index_at - 32 + 4, struct.pack("<i", 8 * n + 8), "expected"),
        (frame_len - 23, b"\xcd", "trailer"),
        (frame_len - 22, struct.pack(">I", 10**6), "trailer_len"),
        (frame_len - 22, struct.pack(">I", 10), "trailer_len"),
    ]
    for offset, new, match in cases:
        path.write_bytes(data)
        _patch(path, offset, new)
        with pytest.raises(FormatError):  # carray's frame digest, or the structure
            _read_all(path)
        _patch(path, 63, b"\x00\x01\xd1\x00\x01")  # as if c-blosc2 changed it since
        with pytest.raises(FormatError, match=match):
            _read_all(path)


def test_wrong_container_kind(tmp_path):
    src = _small_frame(tmp_path, contiguous=False)
    d = tmp_path / "asfile.b2nd"
    shutil.copy(src / "chunks.b2frame", d)
    with pytest.raises(FormatError, match="sparse"):
        _read_all(d)
    with pytest.raises(FileNotFoundError):
        read_frame(tmp_path / "nope.b2nd")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        read_frame(tmp_path / "empty")


@pytest.mark.parametrize("contiguous", [True, False])
def test_random_byte_mutations_never_crash(tmp_path, contiguous):
    """Any single-byte change either still reads or raises a carray error."""
    src = _small_frame(tmp_path, contiguous=contiguous)
    target = src if contiguous else src / "chunks.b2frame"
    data = target.read_bytes()
    rng = np.random.default_rng(3)
    positions = list(range(len(data))) if len(data) < 700 else list(
        rng.choice(len(data), 600, replace=False))
    raised = 0
    for pos in positions:
        mutated = bytearray(data)
        mutated[pos] ^= int(rng.integers(1, 256))
        target.write_bytes(bytes(mutated))
        try:
            _read_all(src)
        except CArrayError:
            raised += 1
    assert raised > len(positions) // 4
    if not contiguous:
        chunk = src / "00000001.chunk"
        cdata = chunk.read_bytes()
        target.write_bytes(data)
        for pos in range(len(cdata)):
            mutated = bytearray(cdata)
            mutated[pos] ^= 0x5A
            chunk.write_bytes(bytes(mutated))
            try:
                _read_all(src)
            except CArrayError:
                pass


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 2**40), min_size=0, max_size=15), st.data())
def test_nd_metalayer_is_msgpack_with_fixed_width_ints(shape, data):
    # Hand-built because c-blosc2 wants every shape entry as int64 (D3) and every
    # chunk/block entry as int32 (D2), which msgpack's packer (shortest form) never
    # writes; the bytes must still be msgpack that decodes to the same values.
    import msgpack

    from carray.layouts.b2nd.header import build_nd_meta

    chunks = [data.draw(st.integers(1, 2**20)) for _ in shape]
    blocks = [data.draw(st.integers(1, c)) for c in chunks]
    raw = build_nd_meta(shape, chunks, blocks, np.dtype("<f8"))
    assert msgpack.unpackb(raw) == [0, len(shape), shape, chunks, blocks, 0, "<f8"]
    assert raw.count(b"\xd3") >= len(shape) and len(raw) == 3 + 3 + 9 * len(shape) \
        + 10 * len(shape) + 1 + 5 + 3
