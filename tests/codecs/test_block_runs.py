"""Decoding runs of whole blocks: Decoder.decode_runs (chunks in memory) and
Decoder.fetch_runs (chunks read by ranges, one read spanning the runs)."""

from __future__ import annotations

import numpy as np
import pytest

from carray.chunks.io import ChunkReader
from carray.codecs import blosc
from carray.core.params import CParams

BS = 4096  # bytes per block: 512 int64 items
N = 64 * 512  # 64 blocks


def ranged(chunk: bytes):
    """A reader of ``chunk`` that records its reads, with a memo as layouts keep."""
    reads: list[tuple[int, int]] = []

    def read(offset, length):
        reads.append((offset, length))
        return chunk[offset:offset + length]

    return ChunkReader(len(chunk), read, None, {}), reads


def reordered(chunk: bytes, order: list[int] | None = None) -> bytes:
    """The same chunk with its blocks stored in ``order`` (default: reversed), as
    several threads may store them, the offset table changed to match."""
    h = blosc.read_header(chunk)
    starts = np.frombuffer(chunk, "<i4", count=h.nblocks, offset=32).tolist()
    ends = [*starts[1:], h.cbytes]
    out = bytearray(chunk[:32 + 4 * h.nblocks])
    new = [0] * h.nblocks
    for j in order or reversed(range(h.nblocks)):
        new[j] = len(out)
        out += chunk[starts[j]:ends[j]]
    out[32:32 + 4 * h.nblocks] = np.array(new, "<i4").tobytes()
    return bytes(out)


@pytest.fixture
def data() -> np.ndarray:
    return (np.arange(N) * 7 % 1000).astype("i8")


@pytest.fixture
def chunk(data) -> bytes:
    return blosc.compress2(data, 8, CParams(), blocksize=BS, nthreads=1)


def runs_of(data: np.ndarray, starts: list[int], count: int) -> np.ndarray:
    blocks = data.reshape(-1, BS // 8)
    return np.concatenate([blocks[s:s + count].reshape(-1) for s in starts])


@pytest.mark.parametrize(("starts", "count"), [([0], 64), ([5], 1), ([3, 9, 40], 2),
                                                ([62], 2), (list(range(0, 64, 4)), 3)])
def test_decode_runs_matches(data, chunk, starts, count):
    dec = blosc.Decoder()
    got = dec.decode_runs(chunk, starts, count, (N * 8, BS))
    assert got is not None
    np.testing.assert_array_equal(got.view("i8"), runs_of(data, starts, count))


def test_decode_runs_declines_what_it_cannot_do(data, chunk):
    dec = blosc.Decoder()
    assert dec.decode_runs(chunk, [0], 1, (N * 8, 2 * BS)) is None  # other block size
    assert dec.decode_runs(chunk, [0], 1, (N * 4, BS)) is None  # other size
    delta = blosc.compress2(data, 8, CParams(filters=("delta", "shuffle")), blocksize=BS)
    assert dec.decode_runs(delta, [0], 1, (N * 8, BS)) is None  # blocks depend on block 0
    assert dec.decode_runs(chunk[:20], [0], 1, (N * 8, BS)) is None  # not even a header
    with pytest.raises(ValueError, match="outside"):
        dec.decode_runs(chunk, [63], 2, (N * 8, BS))


@pytest.mark.parametrize("order", ["stored in order", "stored in reverse"])
def test_fetch_runs_reads_once_and_matches(data, chunk, order):
    if order == "stored in reverse":
        chunk = reordered(chunk)
    dec = blosc.Decoder()
    reader, reads = ranged(chunk)
    assert dec.fetch_runs(reader, len(chunk), [0], 1, (N * 8, BS)) is not None
    for starts, count in [([10], 4), ([3, 7, 11], 2), ([60], 4), ([20, 21], 1)]:
        reads.clear()
        got = dec.fetch_runs(reader, len(chunk), starts, count, (N * 8, BS))
        assert got is not None
        np.testing.assert_array_equal(got.view("i8"), runs_of(data, starts, count))
        assert len(reads) == 1  # the header and block table were kept by the first
    # The one-item path reads through the same spans.
    out = np.empty(3, "i8")
    assert dec.decode_point(reader, len(chunk), 9000 * 8, out)
    np.testing.assert_array_equal(out, data[9000:9003])


def test_fetch_runs_declines_scattered_blocks():
    # Blocks 31 and 32 stored first and last: the span holding both holds every
    # other block too, so reading it would read the whole chunk.
    dense = np.random.default_rng(1).integers(0, 2**40, N)
    order = [31, *(j for j in range(64) if j not in (31, 32)), 32]
    chunk = reordered(blosc.compress2(dense, 8, CParams(), blocksize=BS, nthreads=1), order)
    assert len(chunk) > 64 * 1024
    dec = blosc.Decoder()
    reader, _ = ranged(chunk)
    assert dec.fetch_runs(reader, len(chunk), [31], 2, (N * 8, BS)) is None
    got = dec.fetch_runs(reader, len(chunk), [1, 5], 2, (N * 8, BS))
    assert got is not None
    np.testing.assert_array_equal(got.view("i8"), runs_of(dense, [1, 5], 2))
    assert dec.fetch_runs(reader, len(chunk), [0], 1, (N * 8, 2 * BS)) is None


def test_fetch_runs_reports_a_truncated_chunk(chunk):
    dec = blosc.Decoder()
    short = chunk[:len(chunk) - 100]
    reader, _ = ranged(short)
    with pytest.raises(Exception, match="truncated"):
        dec.fetch_runs(reader, len(short), [60], 4, (N * 8, BS))


@pytest.mark.parametrize(("cname", "kib"), [("lz4", 16), ("blosclz", 16), ("zstd", 64),
                                            ("zlib", 64)])
def test_default_blocks_are_small_for_fast_codecs(data, cname, kib):
    """One item decodes one block: lz4 and blosclz chunks use 16 KiB blocks (reading an
    item costs a quarter of 64 KiB), zstd and zlib keep 64 KiB (their decoders pay
    more per block); the default applies whenever no block size is asked for."""
    chunk = blosc.compress2(data, 8, CParams(cname=cname))
    assert blosc.read_header(chunk).blocksize == kib * 1024
    dec = blosc.Decoder()
    reader, reads = ranged(chunk)
    out = np.empty(1, "i8")
    assert dec.decode_point(reader, len(chunk), 20_000 * 8, out)
    reads.clear()
    assert dec.decode_point(reader, len(chunk), 30_000 * 8, out) and out[0] == data[30_000]
    assert len(reads) == 1 and reads[0][1] <= kib * 1024


def test_blosc1_chunks_keep_their_block_size(data):
    chunk = blosc.compress1(data, 8, CParams(cname="lz4"))
    assert blosc.read_header(chunk).blocksize == 64 * 1024
