"""Bloscpack single files: fixtures from bloscpack 0.16, round trips, interop, append, corruption."""

from __future__ import annotations

import json
import os
import struct
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

import carray
from carray.core.params import CParams
from carray.errors import ChecksumError, FormatError, UnsupportedDTypeError
from carray.formats import bloscpack as bp
from carray.formats.bloscpack import frame

DATA = Path(__file__).parent.parent / "data" / "bloscpack"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
FIXTURES = {f["name"]: f for f in MANIFEST["fixtures"]}


@pytest.fixture(scope="module")
def peer(bloscpack_peer):
    return bloscpack_peer


def read_expected(fx):
    path = DATA / fx["expected"]
    return np.load(path) if fx["kind"] == "ndarray" else path.read_bytes()


# -- fixtures written by bloscpack 0.16 --------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_values(name):
    fx = FIXTURES[name]
    path = DATA / fx["path"]
    expected = read_expected(fx)
    if fx["kind"] == "ndarray":
        got = bp.unpack_array(path)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.isfortran(got) == np.isfortran(expected)
        assert got.tobytes(order="A") == expected.tobytes(order="A")
        assert bp.unpack_bytes(path) == expected.tobytes(order="A")
    else:
        assert bp.unpack_bytes(path) == expected
        with pytest.raises(FormatError, match="unpack_bytes"):
            bp.unpack_array(path)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_info_matches_manifest(name):
    fx = FIXTURES[name]
    em = fx["expected_meta"]
    path = DATA / fx["path"]
    d = bp.info(path)
    assert d["format_version"] == em["format_version"] == 3
    assert d["file_size"] == em["file_size"] == path.stat().st_size
    for key in ("typesize", "chunk_size", "last_chunk", "nchunks", "max_app_chunks"):
        assert d["header"][key] == em[key], key
    assert d["checksum"] == em["checksum"]
    assert d["offsets"] == em["offsets"]
    assert d["metadata"] == em["metadata"]
    mh, emh = d["metadata_header"], em["metadata_header"]
    if emh is None:
        assert mh is None
    else:
        assert mh["magic_format"].encode() == bytes.fromhex(emh["magic_format"]["$bytes"])
        for key in ("meta_checksum", "meta_codec", "meta_level", "meta_size", "max_meta_size",
                    "meta_comp_size"):
            assert mh[key] == emh[key], key
    header = frame.BlpHeader.unpack(path.read_bytes()[:32], path)
    assert header.pack().hex() == em["first_32_bytes_hex"]


# Fixtures written in one call (the appended one is covered by the append tests).
ONE_CALL = sorted(n for n, fx in FIXTURES.items() if "append" not in fx["api"])


@pytest.mark.parametrize("name", ONE_CALL)
def test_repacking_fixture_gives_the_same_layout(name, tmp_path):
    """Our writer with the fixture's parameters reproduces header, metadata and table."""
    fx = FIXTURES[name]
    p, em = fx["params"], fx["expected_meta"]
    kw = dict(chunk_size=p["chunk_size"], checksum=p.get("checksum", "adler32"),
              offsets=p.get("offsets", True), cparams=CParams(
                  clevel=p.get("clevel", 7), cname=p.get("cname", "blosclz"),
                  shuffle=int(p.get("shuffle", True))))
    if "max_app_chunks" in p:
        kw["max_app_chunks"] = p["max_app_chunks"]
    meta = p.get("meta") or {}
    if meta:
        kw["meta_checksum"] = meta.get("meta_checksum", "adler32")
        kw["meta_codec"] = None if meta.get("meta_codec") == "None" else "zlib"
        kw["max_meta_size"] = meta.get("max_meta_size")
    out = tmp_path / "x.blp"
    if fx["kind"] == "ndarray":
        bp.pack_array(read_expected(fx), out, **kw)
    else:
        bp.pack_bytes(read_expected(fx), out, typesize=p.get("typesize", 8),
                      metadata=p.get("metadata"), **kw)
    ours, theirs = out.read_bytes(), (DATA / fx["path"]).read_bytes()
    head = em["offsets"][0] if em["offsets"] else bp.info(out)["offsets"] or None
    if head is None:  # no table: the chunks start after header and metadata
        head = 32 + (0 if em["metadata_header"] is None else
                     32 + em["metadata_header"]["max_meta_size"] +
                     frame.get_checksum(em["metadata_header"]["meta_checksum"]).size)
    assert ours[:32] == theirs[:32]
    assert ours[:head] == theirs[:head]


# -- framing pieces ----------------------------------------------------------------------------

def test_checksum_registry_matches_zlib_and_hashlib():
    import hashlib
    data = b"bloscpack" * 100
    assert [c.size for c in frame.CHECKSUMS] == [0, 4, 4, 16, 20, 28, 32, 48, 64]
    assert frame.get_checksum("adler32").digest(data) == struct.pack("<I", zlib.adler32(data))
    assert frame.get_checksum("CRC32").digest(data) == struct.pack("<I", zlib.crc32(data))
    for c in frame.CHECKSUMS[3:]:
        assert c.digest(data) == hashlib.new(c.name, data).digest()
        assert frame.get_checksum(c.id) is c
    assert frame.get_checksum(None).digest(data) == b""
    with pytest.raises(ValueError, match="unknown checksum"):
        frame.get_checksum("sha3")
    with pytest.raises(ValueError):
        frame.get_checksum(9)


def test_header_round_trip_and_validation():
    h = frame.BlpHeader(True, True, 6, 8, 4096, 100, 7, 70)
    assert frame.BlpHeader.unpack(h.pack()) == h and len(h.pack()) == 32
    assert h.nbytes == 4096 * 6 + 100 and h.total_slots == 77
    with pytest.raises(FormatError, match="last_chunk"):
        frame.BlpHeader(True, False, 1, 8, 10, 11, 2)
    with pytest.raises(FormatError, match="without an offsets table"):
        frame.BlpHeader(False, False, 1, 8, 10, 10, 2, 5)
    with pytest.raises(FormatError, match="checksum"):
        frame.BlpHeader(False, False, 9, 8, 10, 10, 2)
    with pytest.raises(FormatError, match="overflows"):
        frame.BlpHeader(True, False, 1, 8, 10, 10, 2, 2**63 - 2)


@pytest.mark.parametrize("offset, value, match", [
    (0, b"blpX", "magic"), (4, b"\x02", "version 2"), (4, b"\x01", "version 1"),
    (4, b"\x07", "version 7"), (5, b"\x05", "reserved"), (6, b"\x09", "checksum id 9"),
    (8, struct.pack("<i", -5), "chunk_size"), (12, struct.pack("<i", 999999), "last_chunk"),
    (16, struct.pack("<q", -2), "nchunks"), (24, struct.pack("<q", -1), "max_app_chunks"),
])
def test_bad_header_fields(tmp_path, offset, value, match):
    good = frame.BlpHeader(True, False, 1, 8, 4096, 100, 3, 30).pack()
    bad = good[:offset] + value + good[offset + len(value):]
    with pytest.raises(FormatError, match=match) as exc:
        frame.BlpHeader.unpack(bad, "f.blp")
    assert exc.value.path == "f.blp" and exc.value.offset is not None
    path = tmp_path / "bad.blp"
    path.write_bytes(bad + bytes(200))
    with pytest.raises(FormatError, match=match):
        bp.unpack_bytes(path)


def test_metadata_section_encoding():
    section, h = frame.encode_metadata({"a": [1, 2, 3]})
    assert h.codec == 0 and h.level == 6  # zlib would grow 15 bytes: stored raw, level kept
    assert h.meta_size == len(b'{"a":[1,2,3]}') and h.max_meta_size == 10 * h.meta_size
    assert len(section) == h.section_size == 32 + h.max_meta_size + 4
    assert frame.decode_metadata(section)[0] == {"a": [1, 2, 3]}
    big = {"k": "x" * 500}
    section, h = frame.encode_metadata(big, checksum="sha512", max_meta_size=600)
    assert h.codec == 1 and h.meta_comp_size < h.meta_size and h.max_meta_size == 600
    obj, h2 = frame.decode_metadata(section)
    assert obj == big and h2 == h
    with pytest.raises(ValueError, match="cannot hold"):
        frame.encode_metadata(big, codec=None, max_meta_size=100)
    bad = bytearray(section)
    bad[40] ^= 0xFF
    with pytest.raises(ChecksumError):
        frame.decode_metadata(bytes(bad))
    assert frame.decode_metadata(section[:-1] + b"\0", verify=False)[0] == big
    with pytest.raises(FormatError, match="truncated"):
        frame.decode_metadata(section[:100])


def test_offsets_table():
    h = frame.BlpHeader(True, False, 0, 1, 10, 10, 3, 2)
    table = frame.encode_offsets([100, 150, 170], h.total_slots)
    assert np.frombuffer(table, "<i8").tolist() == [100, 150, 170, -1, -1]
    assert frame.decode_offsets(table, h, None, 32, 200) == [100, 150, 170]
    with pytest.raises(FormatError, match="outside"):
        frame.decode_offsets(table, h, None, 32, 160)
    with pytest.raises(FormatError, match="not increasing"):
        frame.decode_offsets(frame.encode_offsets([100, 90, 170], 5), h, None, 32, 200)
    with pytest.raises(FormatError, match="expected -1"):
        frame.decode_offsets(frame.encode_offsets([100, 150, 170, 180], 5), h, None, 32, 200)


def test_calculate_chunks_as_bloscpack():
    assert frame.calculate_chunks(0, 1024) == (1, 0, 0)
    assert frame.calculate_chunks(100, 1024) == (1, 100, 100)
    assert frame.calculate_chunks(2048, 1024) == (2, 1024, 1024)
    assert frame.calculate_chunks(2049, 1024) == (3, 1024, 1)


# -- round trips -------------------------------------------------------------------------------

rng = np.random.default_rng(7)
ARRAYS = {
    "f8": np.linspace(0, 1, 5000) + rng.normal(0, 1e-3, 5000),
    "f4_2d": rng.normal(size=(70, 33)).astype("f4"),
    "f2": rng.normal(size=999).astype("f2"),
    "i1": rng.integers(-100, 100, 3001).astype("i1"),
    "u2": rng.integers(0, 60000, 2500).astype("u2"),
    "i8": np.cumsum(rng.integers(-3, 4, 4000)),
    "u8": rng.integers(0, 2**63, 1000, dtype="u8"),
    "bool": rng.random(4099) > 0.5,
    "c16": (rng.normal(size=500) + 1j * rng.normal(size=500)),
    "S7": np.array([b"abc", b"defghij", b""] * 333),
    "U3": np.array(["ab", "xyz", "é中"] * 300),
    "struct": np.array([(i, i / 3, b"r%d" % i) for i in range(800)],
                       dtype=[("a", "<i4"), ("b", "<f8"), ("c", "S3")]),
    "nested": np.zeros(50, dtype=[("p", [("x", "<f4"), ("y", "<f4")]), ("q", "<i2", (3,))]),
    "big_endian": np.arange(3000, dtype=">i4"),
    "datetime": np.arange(1000).astype("datetime64[s]"),
    "fortran_3d": np.asfortranarray(rng.normal(size=(9, 11, 13))),
    "fortran_2d_i2": np.asfortranarray(rng.integers(0, 9, (40, 60)).astype("i2")),
    "non_contiguous": np.arange(6000, dtype="i4").reshape(60, 100)[::2, ::3],
    "scalar": np.array(3.5),
    "empty": np.zeros(0, "f8"),
    "empty_2d": np.zeros((0, 7), "i4"),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("chunk_size", [None, 1200, 64])
def test_round_trip_arrays(tmp_path, name, chunk_size):
    a = ARRAYS[name]
    path = tmp_path / "a.blp"
    bp.pack_array(a, path, chunk_size=chunk_size and chunk_size - chunk_size % a.itemsize)
    b = bp.unpack_array(path)
    assert b.dtype == a.dtype and b.shape == a.shape
    assert np.isfortran(b) == np.isfortran(a)
    assert b.tobytes() == np.ascontiguousarray(a).tobytes()
    assert bp.info(path)["metadata"]["order"] == ("F" if np.isfortran(a) else "C")


@pytest.mark.parametrize("checksum", [c.name for c in frame.CHECKSUMS])
@pytest.mark.parametrize("cname", ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])
def test_round_trip_codecs_and_checksums(tmp_path, checksum, cname):
    a = ARRAYS["f8"]
    path = tmp_path / "a.blp"
    bp.pack_array(a, path, cparams=CParams(clevel=5, cname=cname, shuffle=2 if cname == "lz4"
                                           else 1), chunk_size=8000, checksum=checksum)
    d = bp.info(path)
    assert d["checksum"] == checksum and d["first_chunk"]["version"] == 2  # Blosc1
    assert d["header"]["nchunks"] == 5 and d["first_chunk"]["codec"] == \
        ("lz4" if cname == "lz4hc" else cname)
    np.testing.assert_array_equal(bp.unpack_array(path), a)


@pytest.mark.parametrize("size", [0, 1, 7, 4096, 10001])
@pytest.mark.parametrize("offsets", [True, False])
def test_round_trip_bytes(tmp_path, size, offsets):
    data = os.urandom(size // 2) + bytes(size - size // 2)
    path = tmp_path / "b.blp"
    bp.pack_bytes(data, path, chunk_size="4K", typesize=3, offsets=offsets,
                  metadata={"name": "x"})
    assert bp.unpack_bytes(path) == data
    d = bp.info(path)
    assert d["metadata"] == {"name": "x"} and d["header"]["typesize"] == 3
    assert d["header"]["max_app_chunks"] == (10 * d["header"]["nchunks"] if offsets else 0)


def test_empty_input_is_one_empty_chunk(tmp_path):
    bp.pack_bytes(b"", tmp_path / "e.blp", chunk_size=1024)
    h = bp.info(tmp_path / "e.blp")["header"]
    assert (h["nchunks"], h["chunk_size"], h["last_chunk"]) == (1, 0, 0)
    assert (tmp_path / "e.blp").read_bytes() == (DATA / "by_empty.blp").read_bytes()


def test_pack_argument_errors(tmp_path):
    path = tmp_path / "x.blp"
    with pytest.raises(UnsupportedDTypeError):
        bp.pack_array(np.array([object()]), path)
    with pytest.raises(UnsupportedDTypeError):
        bp.pack_array(np.zeros(3, "V300"), path)
    with pytest.raises(ValueError, match="multiple of the itemsize"):
        bp.pack_array(np.zeros(100), path, chunk_size=100)
    with pytest.raises(ValueError, match="reserved"):
        bp.pack_array(np.zeros(3), path, metadata={"shape": [1]})
    with pytest.raises(ValueError, match="unknown checksum"):
        bp.pack_bytes(b"x", path, checksum="md4")
    with pytest.raises(ValueError, match="size"):
        bp.pack_bytes(b"x", path, chunk_size="lots")
    assert not path.exists()
    assert bp.parse_size("1M") == 2**20 and bp.parse_size("512K") == 2**19
    assert bp.parse_size("max") == frame.MAX_CHUNK_SIZE


def test_default_chunk_size_is_whole_items(tmp_path):
    a = np.zeros(200_000, dtype=[("a", "<i4"), ("b", "<f8"), ("c", "S3")])  # 15-byte items
    bp.pack_array(a, tmp_path / "s.blp")
    h = bp.info(tmp_path / "s.blp")["header"]
    assert h["chunk_size"] == 2**20 - 2**20 % 15 and h["nchunks"] == 3
    np.testing.assert_array_equal(bp.unpack_array(tmp_path / "s.blp"), a)


def test_exposed_as_carray_bloscpack():
    assert carray.bloscpack is bp and "bloscpack" in carray.__all__


# -- interoperability with the real bloscpack 0.16 ----------------------------------------------

@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_bloscpack_reads_our_arrays(peer, tmp_path, name):
    a = ARRAYS[name]
    path = str(tmp_path / "a.blp")
    bp.pack_array(a, path, chunk_size=2400 - 2400 % a.itemsize, checksum="sha1")
    b = peer.unpack_ndarray_from_file(path)
    assert b.dtype == a.dtype and b.shape == a.shape and np.isfortran(b) == np.isfortran(a)
    assert b.tobytes() == np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_we_read_bloscpack_arrays(peer, tmp_path, name):
    a = ARRAYS[name]
    path = str(tmp_path / "a.blp")
    peer.pack_ndarray_to_file(a, path, chunk_size=2400 - 2400 % a.itemsize,
                              bloscpack_args=peer.BloscpackArgs(checksum="md5"))
    b = bp.unpack_array(path)
    assert b.dtype == a.dtype and b.shape == a.shape and np.isfortran(b) == np.isfortran(a)
    assert b.tobytes() == np.ascontiguousarray(a).tobytes()


def test_our_file_is_byte_identical_to_bloscpacks(peer, tmp_path):
    a = ARRAYS["i8"]
    bp.pack_array(a, tmp_path / "ours.blp", chunk_size=8000)
    peer.pack_ndarray_to_file(a, str(tmp_path / "theirs.blp"), chunk_size=8000)
    assert (tmp_path / "ours.blp").read_bytes() == (tmp_path / "theirs.blp").read_bytes()


@pytest.mark.parametrize("checksum", [c.name for c in frame.CHECKSUMS])
def test_bytes_both_ways(peer, tmp_path, checksum):
    data = os.urandom(3000) + bytes(9000) + b"abc" * 999
    bp.pack_bytes(data, tmp_path / "o.blp", chunk_size=4000, checksum=checksum,
                  metadata={"k": [1, "two"]})
    got, meta = peer.unpack_bytes_from_file(str(tmp_path / "o.blp"))
    assert got == data and meta == {"k": [1, "two"]}
    peer.pack_bytes_to_file(data, str(tmp_path / "t.blp"), chunk_size=4000,
                            bloscpack_args=peer.BloscpackArgs(checksum=checksum),
                            metadata={"k": 2})
    assert bp.unpack_bytes(tmp_path / "t.blp") == data
    assert bp.info(tmp_path / "t.blp")["metadata"] == {"k": 2}


def test_we_read_after_bloscpack_appends(peer, tmp_path):
    base, more = os.urandom(5000), bytes(3000) + os.urandom(9000)
    path = str(tmp_path / "a.blp")
    peer.pack_bytes_to_file(base, path, chunk_size=2048)
    (tmp_path / "more").write_bytes(more)
    peer.append.append(path, str(tmp_path / "more"))
    assert bp.unpack_bytes(path) == base + more
    # a shrinking rewrite of the last chunk leaves stale bytes behind: still readable
    peer.append.append(path, str(tmp_path / "more"))
    assert bp.unpack_bytes(path) == base + more + more


def test_bloscpack_append_leaves_array_metadata_stale(peer, tmp_path):
    a = np.arange(1000, dtype="f8")
    path = str(tmp_path / "a.blp")
    bp.pack_array(a, path, chunk_size=2048)
    a[:].tofile(str(tmp_path / "more"))
    peer.append.append(path, str(tmp_path / "more"))
    with pytest.raises(FormatError, match="shape"):
        bp.unpack_array(path)
    assert bp.unpack_bytes(path) == a.tobytes() * 2


# -- append ------------------------------------------------------------------------------------

def _packed(tmp_path, data=b"", **kw):
    path = tmp_path / "a.blp"
    bp.pack_bytes(data, path, **kw)
    return path


def test_append_fills_the_last_chunk_only(tmp_path):
    base = os.urandom(5000)
    path = _packed(tmp_path, base, chunk_size=2048, checksum="crc32", max_app_chunks=5)
    before = bp.info(path)
    assert bp.append(path, b"x" * 1000) == 0
    after = bp.info(path)
    assert after["header"]["nchunks"] == 3 and after["header"]["last_chunk"] == 904 + 1000
    assert after["header"]["max_app_chunks"] == 5
    assert after["offsets"] == before["offsets"]
    assert bp.unpack_bytes(path) == base + b"x" * 1000


def test_append_uses_reserved_slots(peer, tmp_path):
    base, more = os.urandom(5000), os.urandom(7777)
    path = _packed(tmp_path, base, chunk_size=2048, checksum="crc32", max_app_chunks=20)
    assert bp.append(path, more) == 4
    d = bp.info(path)
    h = d["header"]
    assert (h["nchunks"], h["last_chunk"], h["max_app_chunks"]) == (7, 489, 16)
    assert len(d["offsets"]) == 7
    # same layout as bloscpack's own append (fixture by_appended, same parameters)
    em = FIXTURES["by_appended"]["expected_meta"]
    assert (em["nchunks"], em["last_chunk"], em["max_app_chunks"]) == (7, 489, 16)
    assert bp.unpack_bytes(path) == base + more
    assert peer.unpack_bytes_from_file(str(path))[0] == base + more


def test_append_out_of_slots_leaves_file_intact(tmp_path):
    path = _packed(tmp_path, os.urandom(5000), chunk_size=2048, max_app_chunks=1)
    original = path.read_bytes()
    with pytest.raises(FormatError, match="only 1 offset slots"):
        bp.append(path, os.urandom(5000))
    assert path.read_bytes() == original
    assert bp.append(path, os.urandom(2000)) == 1  # exactly one slot's worth still fits
    with pytest.raises(FormatError, match="only 0 offset slots"):
        bp.append(path, os.urandom(3000))


def test_append_needs_offsets(tmp_path):
    path = _packed(tmp_path, b"abc", offsets=False)
    with pytest.raises(FormatError, match="no offsets table"):
        bp.append(path, b"def")
    assert bp.unpack_bytes(path) == b"abc"


def _fail_third_compress(monkeypatch) -> None:
    """Make the third chunk compressed from now on fail, as a full disk would."""
    calls = {"n": 0}
    real = bp._compress

    def failing(*args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full")
        return real(*args)

    monkeypatch.setattr(bp, "_compress", failing)


def test_append_failure_midway_keeps_old_file(tmp_path, monkeypatch):
    path = _packed(tmp_path, os.urandom(5000), chunk_size=2048)
    original = path.read_bytes()
    _fail_third_compress(monkeypatch)
    with pytest.raises(OSError, match="disk full"):
        bp.append(path, os.urandom(9000))
    assert path.read_bytes() == original
    assert os.listdir(tmp_path) == ["a.blp"]  # no temporary left behind



@pytest.mark.parametrize("offsets", [True, False])
def test_pack_failure_midway_leaves_nothing(tmp_path, monkeypatch, offsets):
    path = tmp_path / "a.blp"
    bp.pack_bytes(b"old", path)
    original = path.read_bytes()
    _fail_third_compress(monkeypatch)
    with pytest.raises(OSError, match="disk full"):
        bp.pack_bytes(os.urandom(9000), path, chunk_size=1024, offsets=offsets)
    assert path.read_bytes() == original
    assert os.listdir(tmp_path) == ["a.blp"]  # no temporary left behind


def test_pack_with_and_without_fsync_write_the_same(tmp_path):
    data = os.urandom(3000) + bytes(9000)
    bp.pack_bytes(data, tmp_path / "a.blp", chunk_size=2048, fsync=True)
    bp.pack_bytes(data, tmp_path / "b.blp", chunk_size=2048, fsync=False)
    assert (tmp_path / "a.blp").read_bytes() == (tmp_path / "b.blp").read_bytes()
    assert bp.unpack_bytes(tmp_path / "a.blp") == data
    assert sorted(os.listdir(tmp_path)) == ["a.blp", "b.blp"]

def test_append_arrays_c_and_fortran(peer, tmp_path):
    a = np.arange(3000, dtype="i4").reshape(300, 10)
    path = tmp_path / "c.blp"
    bp.pack_array(a, path, chunk_size=4000)
    more = np.arange(950, dtype="i4").reshape(95, 10)
    assert bp.append(path, more) > 0
    expected = np.concatenate([a, more])
    np.testing.assert_array_equal(bp.unpack_array(path), expected)
    np.testing.assert_array_equal(peer.unpack_ndarray_from_file(str(path)), expected)

    f = np.asfortranarray(np.arange(600, dtype="f8").reshape(20, 30))
    path = tmp_path / "f.blp"
    bp.pack_array(f, path, chunk_size=800)
    more = np.asfortranarray(np.ones((20, 7)))
    bp.append(path, more)
    got = bp.unpack_array(path)
    np.testing.assert_array_equal(got, np.concatenate([f, more], axis=1))
    assert np.isfortran(got)
    with pytest.raises(ValueError, match="all but the last axis"):
        bp.append(path, np.ones((21, 2)))
    with pytest.raises(ValueError, match="float64 items"):
        bp.append(path, np.ones((20, 2), "f4"))
    with pytest.raises(ValueError, match="append an array"):
        bp.append(path, b"raw")


def test_append_array_metadata_must_fit(tmp_path):
    path = tmp_path / "a.blp"
    room = len(frame.dumps_metadata({"dtype": "'|u1'", "shape": [9000], "order": "C",
                                     "container": "numpy"}))
    bp.pack_array(np.zeros(9000, "u1"), path, chunk_size=1000, max_meta_size=room,
                  meta_codec=None)
    original = path.read_bytes()
    with pytest.raises(FormatError, match="reserved room"):
        bp.append(path, np.zeros(1000, "u1"))  # shape [10000] needs one more byte
    assert path.read_bytes() == original
    bp.append(path, np.ones(999, "u1"))  # shape [9999] still fits
    assert bp.unpack_array(path).tolist() == [0] * 9000 + [1] * 999


def test_append_to_empty_file(tmp_path):
    path = tmp_path / "e.blp"
    bp.pack_array(np.zeros(0, "f8"), path, max_app_chunks=3)
    more = np.arange(300_000, dtype="f8")  # 2.4 MB: three default-size chunks
    assert bp.append(path, more) == 2
    np.testing.assert_array_equal(bp.unpack_array(path), more)
    h = bp.info(path)["header"]
    assert (h["nchunks"], h["chunk_size"], h["max_app_chunks"]) == (3, 2**20, 1)


def test_append_nothing_is_a_no_op(tmp_path):
    path = _packed(tmp_path, b"abc")
    original = path.read_bytes()
    assert bp.append(path, b"") == 0 and path.read_bytes() == original


# -- corrupt input -----------------------------------------------------------------------------

CORRUPTIBLE = ["nd_sha1_f4_offsets", "nd_adler32_i4_nooffsets", "by_adler32_meta",
               "nd_none_f8_offsets", "by_appended", "nd_structured"]


def _chunk_end(path) -> int:
    d = bp.info(path)
    return d["file_size"] if not d["offsets"] else d["offsets"][-1] + 16


@pytest.mark.parametrize("name", CORRUPTIBLE)
def test_truncation_anywhere_is_a_format_error(tmp_path, name):
    raw = (DATA / FIXTURES[name]["path"]).read_bytes()
    path = tmp_path / "t.blp"
    reader = bp.unpack_array if FIXTURES[name]["kind"] == "ndarray" else bp.unpack_bytes
    for cut in sorted({*range(0, 200, 7), *range(0, len(raw), max(1, len(raw) // 150)),
                       len(raw) - 1}):
        path.write_bytes(raw[:cut])
        with pytest.raises(FormatError):
            reader(path)
        with pytest.raises(FormatError):
            bp.info(path)


@pytest.mark.parametrize("name", ["nd_sha1_f4_offsets", "by_md5_meta", "by_crc32_nometa"])
def test_flipped_chunk_bytes_fail_the_checksum(tmp_path, name):
    raw = bytearray((DATA / FIXTURES[name]["path"]).read_bytes())
    d = bp.info(DATA / FIXTURES[name]["path"])
    digest = frame.get_checksum(d["checksum"]).size
    path = tmp_path / "c.blp"
    # the digest of the first chunk, and a byte inside the second chunk's data
    first_end = d["offsets"][1] if d["offsets"] else None
    targets = [first_end - digest] if first_end else []
    targets.append(len(raw) - digest - 3)
    for at in targets:
        bad = bytearray(raw)
        bad[at] ^= 0x5A
        path.write_bytes(bad)
        with pytest.raises(ChecksumError, match=r"chunk \d+: .*checksum mismatch") as exc:
            bp.unpack_bytes(path)
        assert str(path) in str(exc.value) and exc.value.offset is not None


def test_flipped_digest_passes_without_verification(tmp_path):
    raw = bytearray((DATA / "by_crc32_nometa.blp").read_bytes())
    raw[-1] ^= 0xFF
    path = tmp_path / "d.blp"
    path.write_bytes(raw)
    with pytest.raises(ChecksumError):
        bp.unpack_bytes(path)
    assert bp.unpack_bytes(path, verify=False) == (DATA / "by_crc32_nometa.expected.bin"
                                                   ).read_bytes()


def test_flipped_metadata_digest(tmp_path):
    raw = bytearray((DATA / "nd_sha1_f4_offsets.blp").read_bytes())
    mh = bp.info(DATA / "nd_sha1_f4_offsets.blp")["metadata_header"]
    raw[32 + 32 + mh["max_meta_size"]] ^= 1
    path = tmp_path / "m.blp"
    path.write_bytes(raw)
    with pytest.raises(ChecksumError, match="metadata"):
        bp.unpack_array(path)


def _patch(tmp_path, name, at, value: bytes):
    raw = bytearray((DATA / FIXTURES[name]["path"]).read_bytes())
    raw[at:at + len(value)] = value
    path = tmp_path / "p.blp"
    path.write_bytes(raw)
    return path


def test_bad_offsets(tmp_path):
    name = "nd_sha256_u2_offsets"  # metadata section is 32 + 640 + 4 bytes
    table = 32 + 32 + 640 + 4
    size = FIXTURES[name]["expected_meta"]["file_size"]
    for i, value, match in [(1, size + 100, "outside"), (2, 1148, "not increasing"),
                            (0, 0, "outside"), (3, 4413, "starts at"), (5, 5000, "expected -1")]:
        path = _patch(tmp_path, name, table + 8 * i, struct.pack("<q", value))
        with pytest.raises(FormatError, match=match):
            bp.unpack_array(path)


def test_huge_metadata_size_is_refused_without_allocating(tmp_path):
    # max_meta_size (u32 at metadata offset 16) = 4 GiB - 1
    path = _patch(tmp_path, "nd_single_chunk", 32 + 16, struct.pack("<I", 2**32 - 1))
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="past the end"):
            bp.unpack_array(path)
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()


def test_huge_app_chunks_is_refused(tmp_path):
    path = _patch(tmp_path, "nd_single_chunk", 24, struct.pack("<q", 2**62))
    with pytest.raises(FormatError, match="offsets table"):
        bp.unpack_array(path)
    path = _patch(tmp_path, "by_adler32_meta", 16, struct.pack("<q", 2**40))
    with pytest.raises(FormatError, match="chunks cannot fit"):
        bp.unpack_bytes(path)


def test_chunk_claims_checked_before_allocating(tmp_path):
    first = bp.info(DATA / "nd_single_chunk.blp")["offsets"][0]
    path = _patch(tmp_path, "nd_single_chunk", first + 12, struct.pack("<i", 10**6))
    with pytest.raises(FormatError, match="truncated"):
        bp.unpack_array(path)
    # a chunk claiming to inflate ~2 GB from a few hundred bytes
    first = bp.info(DATA / "by_none_nometa.blp")["offsets"][0]
    path = _patch(tmp_path, "by_none_nometa", first + 4, struct.pack("<i", 2**31 - 100))
    raw = bytearray(path.read_bytes())
    raw[8:16] = struct.pack("<ii", 2**31 - 100, 2**31 - 100)
    path.write_bytes(raw)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="beyond any Blosc codec"):
            bp.unpack_bytes(path)
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()


def test_chunk_size_disagrees_with_header(tmp_path):
    path = _patch(tmp_path, "by_none_nometa", 8, struct.pack("<i", 3000))
    with pytest.raises(FormatError, match="header says"):
        bp.unpack_bytes(path)


@pytest.mark.parametrize("text, match", [
    (b'{"dtype":"__import__(\'os\')","shape":[100],"order":"C","container":"numpy"}',
     "not a NumPy dtype"),
    (b'{"dtype":"\'<f4\'","shape":[99],"order":"C","container":"numpy"}   ', "shape"),
    (b'{"dtype":"\'<f4\'","shape":[-1],"order":"C","container":"numpy"}   ', "shape"),
    (b'{"dtype":"\'<f4\'","shape":[100],"order":"X","container":"numpy"}  ', "order"),
    (b'{"dtype":"\'<f4\'","shape":[100],"order":"C","container":"nump', "not valid JSON"),
    (b'{"dtype":"\'<f4\'","shape":[100],"order":"C","container":"other"}  ', "NumPy array"),
])
def test_bad_array_metadata(tmp_path, text, match):
    raw = bytearray((DATA / "nd_single_chunk.blp").read_bytes())
    mh = bp.info(DATA / "nd_single_chunk.blp")["metadata_header"]
    section, _ = frame.encode_metadata_bytes(text, codec=None, checksum=mh["meta_checksum"],
                                             max_meta_size=mh["max_meta_size"])
    assert len(section) == 32 + mh["max_meta_size"] + 4
    raw[32:32 + len(section)] = section
    path = tmp_path / "meta.blp"
    path.write_bytes(raw)
    with pytest.raises(FormatError, match=match):
        bp.unpack_array(path)


def test_metadata_zlib_size_mismatch(tmp_path):
    raw = bytearray((DATA / "nd_structured.blp").read_bytes())
    raw[32 + 12:32 + 16] = struct.pack("<I", 99)  # meta_size: real JSON is 100 bytes
    path = tmp_path / "z.blp"
    path.write_bytes(raw)
    with pytest.raises(FormatError, match="inflates"):
        bp.unpack_array(path)


def test_not_a_bloscpack_file(tmp_path):
    for content in (b"", b"blpk", b"\x93NUMPY" + bytes(100)):
        (tmp_path / "n.blp").write_bytes(content)
        with pytest.raises(FormatError, match="not a Bloscpack file"):
            bp.unpack_bytes(tmp_path / "n.blp")


@pytest.mark.parametrize("name", ["nd_none_f8_offsets", "by_none_nometa", "nd_clevel0"])
def test_random_corruption_never_crashes(tmp_path, name):
    """Without digests to catch them, flipped bytes must still end in FormatError or data."""
    raw = (DATA / FIXTURES[name]["path"]).read_bytes()
    gen = np.random.default_rng(1)
    path = tmp_path / "r.blp"
    for _ in range(300):
        bad = bytearray(raw)
        for at in gen.integers(0, len(raw), gen.integers(1, 4)):
            bad[at] = int(gen.integers(0, 256))
        path.write_bytes(bad)
        try:
            bp.unpack_bytes(path)
        except FormatError:
            pass
