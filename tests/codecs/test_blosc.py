"""Blosc chunk codec: golden chunks from python-blosc and python-blosc2, and bad input."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import blosc as pyblosc
import numpy as np
import pytest

from carray.codecs import blosc, ranged
from carray.core.params import CParams
from carray.errors import CodecUnavailableError, FormatError

DATA = Path(__file__).parent.parent / "data" / "blosc_chunks"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["fixtures"]


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["name"] for e in MANIFEST])
def test_golden_chunk_decodes(entry):
    chunk = (DATA / entry["path"]).read_bytes()
    expected = (DATA / entry["expected"]).read_bytes()
    assert blosc.decompress(chunk) == expected
    header = blosc.validate_chunk(chunk, len(expected))
    assert header.nbytes == len(expected)
    assert header.is_blosc1 == entry["name"].startswith("b1_")


@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["params"]["typesize"] > 0],
                         ids=lambda e: e["name"])
def test_golden_chunk_partial_decode(entry):
    chunk = (DATA / entry["path"]).read_bytes()
    expected = (DATA / entry["expected"]).read_bytes()
    ts = blosc.read_header(chunk).typesize
    n = len(expected) // ts
    if n < 3:
        return
    start, count = n // 3, n // 3
    out = np.empty(count * ts, dtype=np.uint8)
    blosc.getitem_into(chunk, start * ts, out)
    assert out.tobytes() == expected[start * ts:(start + count) * ts]


@pytest.mark.parametrize("cname", ["blosclz", "lz4", "lz4hc", "zlib", "zstd"])
@pytest.mark.parametrize("shuffle", [0, 1, 2])
def test_blosc1_output_is_readable_by_c_blosc1(cname, shuffle):
    data = np.arange(5000, dtype="<i8") // 3
    chunk = blosc.compress1(data, 8, CParams(clevel=5, cname=cname, shuffle=shuffle))
    assert chunk[0] == 2  # format version of c-blosc 1.x
    assert np.array_equal(np.frombuffer(pyblosc.decompress(chunk), "<i8"), data)


def test_blosc2_roundtrip_and_getitem():
    data = np.linspace(0, 1, 100_000)
    chunk = blosc.compress2(data, 8, CParams(cname="zstd", shuffle=2))
    assert blosc.read_header(chunk).version >= 3
    out = np.empty_like(data)
    blosc.decompress_into(chunk, out)
    assert np.array_equal(out, data)
    part = np.empty(10)
    blosc.getitem_into(chunk, 500 * 8, part)
    assert np.array_equal(part, data[500:510])


def _chunk() -> bytes:
    return blosc.compress1(np.arange(10_000, dtype="<i4"), 4, CParams())


def test_truncated_chunk_is_rejected():
    chunk = _chunk()
    with pytest.raises(FormatError, match="truncated"):
        blosc.validate_chunk(chunk[:10], path="x.blp")
    with pytest.raises(FormatError, match="x.blp.*claims"):
        blosc.validate_chunk(chunk[:-5], path="x.blp")


def test_wrong_size_is_rejected_before_decoding():
    chunk = _chunk()
    with pytest.raises(FormatError, match="expected 8"):
        blosc.decompress_into(chunk, np.empty(2, dtype="i4"))


def test_corrupt_block_offsets_are_rejected():
    chunk = bytearray(_chunk())
    struct.pack_into("<i", chunk, 16, 2**30)
    with pytest.raises(FormatError, match="block offsets"):
        blosc.validate_chunk(bytes(chunk))


def test_unknown_version_and_reserved_flag():
    chunk = bytearray(_chunk())
    chunk[0] = 9
    with pytest.raises(FormatError, match="version 9"):
        blosc.validate_chunk(bytes(chunk))
    chunk = bytearray(_chunk())
    chunk[2] |= 0x08
    with pytest.raises(FormatError, match="reserved"):
        blosc.validate_chunk(bytes(chunk))


def test_snappy_chunk_raises_codec_unavailable():
    chunk = bytearray(_chunk())
    chunk[2] = (chunk[2] & 0x1F) | (2 << 5)
    with pytest.raises(CodecUnavailableError, match="Snappy"):
        blosc.validate_chunk(bytes(chunk))


def test_negative_sizes_are_rejected():
    chunk = bytearray(_chunk())
    struct.pack_into("<i", chunk, 4, -1)
    with pytest.raises(FormatError, match="impossible"):
        blosc.read_header(bytes(chunk))


def test_typesize_rule_matches_bcolz():
    assert blosc.blosc_typesize(np.dtype("S10")) == 1
    assert blosc.blosc_typesize(np.dtype("U5")) == 4
    assert blosc.blosc_typesize(np.dtype("i8")) == 8
    assert blosc.blosc_typesize(np.dtype([("a", "i4"), ("b", "f8")])) == 12
    assert blosc.blosc_typesize(np.dtype("V300")) == 1


# -- ranged reads: only the header, the block table and the blocks needed --------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(typesize=st.sampled_from([1, 2, 4, 8, 16]), nitems=st.integers(1, 40_000),
       cname=st.sampled_from(["lz4", "zstd", "blosclz", "zlib", "lz4hc"]),
       clevel=st.integers(0, 9), shuffle=st.integers(0, 2), blosc1=st.booleans(),
       noisy=st.booleans(), data=st.data())
def test_ranged_reads_match_whole_decodes(typesize, nitems, cname, clevel, shuffle, blosc1,
                                          noisy, data):
    rng = np.random.default_rng(nitems)
    n = nitems * typesize
    raw = rng.integers(0, 255, n).astype(np.uint8) if noisy else \
        (np.cumsum(rng.integers(-3, 4, n)) % 251).astype(np.uint8)
    cp = CParams(cname=cname, clevel=clevel, shuffle=shuffle)
    chunk = (blosc.compress1 if blosc1 else blosc.compress2)(raw, typesize, cp)
    a = data.draw(st.integers(0, nitems - 1))
    b = data.draw(st.integers(a + 1, nitems))
    out = np.empty((b - a) * typesize, np.uint8)
    ranged.getitem_ranged(lambda o, length: chunk[o:o + length], a * typesize, out, len(chunk),
                         None, n)
    np.testing.assert_array_equal(out, raw[a * typesize:b * typesize])


def test_ranged_read_of_one_item_fetches_one_block():
    x = np.arange(524_288, dtype="f8")
    for compress in (blosc.compress1, blosc.compress2):
        chunk = compress(x, 8, CParams(cname="lz4"))
        fetched = []

        def read_at(offset, length, chunk=chunk, fetched=fetched):
            fetched.append(length)
            return chunk[offset:offset + length]

        out = np.empty(1, "f8")
        ranged.getitem_ranged(read_at, 8 * 70_000, out, len(chunk), None, x.nbytes)
        assert out[0] == 70_000.0
        # The header read takes the block table with it (one read), then one block.
        assert len(fetched) <= 2
        assert sum(fetched) < blosc.HEAD_READ + len(chunk) / 8


def test_getitem_of_one_block_starting_inside_a_block():
    # libblosc2 returns the wrong block for exactly one block's worth of bytes
    # starting inside a block; carray splits such requests.
    data = np.arange(12, dtype="i8") * 3 - 7
    chunk = blosc.compress2(data, 8, CParams(), blocksize=32)
    for start in range(12):
        for count in range(1, 13 - start):
            for decode in (blosc.getitem_into, blosc.Decoder().getitem_into):
                out = np.empty(count, "i8")
                decode(chunk, 8 * start, out)
                np.testing.assert_array_equal(out, data[start:start + count])


def test_ranged_read_falls_back_for_delta_filtered_chunks():
    import blosc2

    x = np.arange(100_000, dtype="i8")
    chunk = blosc2.compress2(x, typesize=8, filters=[blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE],
                             blocksize=32768)
    out = np.empty(10, "i8")
    ranged.getitem_ranged(lambda o, length: chunk[o:o + length], 8 * 90_000, out, len(chunk),
                         None, x.nbytes)
    np.testing.assert_array_equal(out, x[90_000:90_010])


def _ranged(chunk: bytes, memo: dict | None):
    from carray.chunks.io import ChunkReader

    reads = []

    def read(offset, length):
        reads.append((offset, length))
        return chunk[offset:offset + length]

    return ChunkReader(len(chunk), read, None, memo), reads


@pytest.mark.parametrize("dtype", ["i8", "f4", "u2"])
def test_decode_point_reads_one_block_and_matches(dtype):
    data = (np.arange(50_000) * 7 % 1000).astype(dtype)
    chunk = blosc.compress2(data, data.itemsize, CParams(), blocksize=8192)
    h = blosc.read_header(chunk)
    dec = blosc.Decoder()
    assert blosc.Decoder.available()  # the wheel's libblosc2 passed the import self-check
    memo: dict = {}
    reader, reads = _ranged(chunk, memo)
    out = np.empty(1, dtype)
    for i in [0, 1, 1023, 1024, 25_000, 49_999 - 8192 // data.itemsize, 33_333]:
        reads.clear()
        assert dec.decode_point(reader, len(chunk), i * data.itemsize, out)
        assert out[0] == data[i]
        if "point" in memo and len(reads) == 1:  # after the first: one block, one read
            b = i * data.itemsize // h.blocksize
            assert reads[0][1] < h.blocksize + 64 or b == 0


def test_decode_point_reads_runs_of_blocks_with_one_read():
    data = (np.arange(100_000) * 7 % 1000).astype("i8")
    # One thread stores the blocks in order (with several they may be stored in any
    # order, and runs of blocks then take more than one read).
    chunk = blosc.compress2(data, 8, CParams(), blocksize=8192, nthreads=1)
    dec = blosc.Decoder()
    memo: dict = {}
    reader, reads = _ranged(chunk, memo)
    rng = np.random.default_rng(0)
    done = 0
    for _ in range(500):
        s = int(rng.integers(0, 100_000))
        n = int(rng.integers(1, min(5000, 100_000 - s) + 1))
        out = np.empty(n, "i8")
        reads.clear()
        if dec.decode_point(reader, len(chunk), s * 8, out):
            np.testing.assert_array_equal(out, data[s:s + n])
            assert len(reads) == 1 or done == 0  # the first also reads the block table
            done += 1
    assert done > 450


def test_decode_point_declines_what_it_cannot_do():
    data = np.arange(10_000, dtype="i8")
    chunk = blosc.compress2(data, 8, CParams(), blocksize=8192)
    dec = blosc.Decoder()
    reader, _ = _ranged(chunk, {})
    inside = np.empty(1024, "i8")  # exactly one block's worth, from inside a block
    assert not dec.decode_point(reader, len(chunk), 8, inside)
    delta = blosc.compress2(data, 8, CParams(filters=("delta", "shuffle")), blocksize=8192)
    reader, _ = _ranged(delta, {})
    assert not dec.decode_point(reader, len(delta), 5000 * 8, np.empty(1, "i8"))


def test_compress2_on_one_thread_gives_a_chunk_that_decodes_the_same():
    data = np.random.default_rng(3).integers(0, 50, 300_000)
    one = blosc.compress2(data, 8, CParams(), nthreads=1)
    out = np.empty_like(data)
    blosc.decompress_into(one, out)
    np.testing.assert_array_equal(out, data)


@pytest.mark.parametrize("itemsize", [3, 7, 12, 20])
@pytest.mark.parametrize("nthreads", [1, None])
def test_compress2_blocks_hold_whole_items(itemsize, nthreads):
    # Compressible records whose size does not divide the 16 KiB default block: libblosc2
    # shuffles a block that is not a whole number of items wrongly.
    n = 65536 // itemsize * 4 + 5
    raw = (np.arange(n * itemsize, dtype=np.uint64) // 97 % 251).astype(np.uint8)
    items = raw.view(f"V{itemsize}")
    chunk = blosc.compress2(items, itemsize, CParams(), nthreads=nthreads)
    assert blosc.read_header(chunk).blocksize % itemsize == 0
    out = np.empty_like(raw)
    blosc.decompress_into(chunk, out)
    assert out.tobytes() == raw.tobytes()
    with blosc.Decoder() as decoder:
        decoder.decompress_into(chunk, out)
    assert out.tobytes() == raw.tobytes()
