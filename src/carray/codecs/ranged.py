"""Partial reads of stored Blosc chunks: only the byte ranges of the blocks a read needs
(the header and block table first, then runs of nearby blocks), for chunks in files or
object stores (docs/formats/blosc2-chunk.md, "Reading part of a chunk")."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import numpy as np

from carray.codecs.blosc import (
    HEADER_STRUCT,
    ReadAt,
    blocks_independent,
    chunk_index,
    decompress_into,
    getitem_into,
    validate_chunk,
)
from carray.errors import FormatError


def getitem_ranged(read_at: ReadAt, start: int, out: np.ndarray, size: int,
                   path: str | os.PathLike[str] | None = None, expected_nbytes: int | None = None) -> None:
    """Like :func:`getitem_into`, fetching only the bytes it needs through ``read_at``.

    ``read_at(offset, length)`` returns bytes of a stored chunk of ``size`` bytes.
    For a Blosc1 chunk this reads the header, the block-offset table and the
    blocks holding the range, then decodes those blocks as a chunk of their own
    (blocks are independent); other chunks are read whole.
    """
    index = chunk_index(read_at, size, path)
    h, head = index.header, index.head
    if expected_nbytes is not None and h.nbytes != expected_nbytes:
        raise FormatError(f"Blosc chunk holds {h.nbytes} bytes uncompressed, expected "
                          f"{expected_nbytes}", path)
    hs = h.header_size
    if not blocks_independent(h, head) or h.nbytes == 0 or out.nbytes == 0:
        chunk = read_at(0, h.cbytes)
        getitem_into(chunk, start, out, path, validate_chunk(chunk, h.nbytes, path))
        return
    if start < 0 or start + out.nbytes > h.nbytes:
        raise ValueError(f"byte range [{start}, {start + out.nbytes}) outside a chunk of "
                         f"{h.nbytes} bytes")
    if h.memcpyed:
        raw = read_at(hs + start, out.nbytes)
        if len(raw) != out.nbytes or h.cbytes != h.nbytes + hs:
            raise FormatError("raw Blosc chunk truncated", path)
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(raw, np.uint8)
        return
    bs, nblocks = h.blocksize, h.nblocks
    bstarts, bends = index.bstarts, index.bends
    # Compressed chunks whose blocks decode alone always have both tables.
    assert bstarts is not None and bends is not None
    first, last = start // bs, (start + out.nbytes - 1) // bs
    if first == last == nblocks - 1 and h.nbytes % bs and first:
        # A lone short last block would make a chunk smaller than one block, which
        # Blosc2 reads with a different block size: keep its full neighbour.
        first -= 1
    k = last - first + 1
    sub_nbytes = min(h.nbytes - first * bs, k * bs)
    sub_start = hs + 4 * k
    los = bstarts[first:last + 1].astype(np.int64)
    his = bends[first:last + 1]
    # One read spanning the blocks (they are usually stored in order, back to back).
    span_lo, span_hi = int(los.min()), int(his.max())
    span = head[span_lo:span_hi] if span_hi <= len(head) else read_at(span_lo, span_hi - span_lo)
    pieces, offsets, pos = [], [], sub_start
    for lo, hi in zip(los.tolist(), his.tolist(), strict=True):
        pieces.append(span[lo - span_lo:hi - span_lo])
        offsets.append(pos)
        pos += hi - lo
    # A chunk of just these blocks: the same header with its sizes and offsets updated.
    sub = bytearray(sub_start)
    sub[:hs] = head[:hs]
    HEADER_STRUCT.pack_into(sub, 0, h.version, h.versionlz, h.flags, h.typesize, sub_nbytes, bs, pos)
    struct.pack_into(f"<{k}i", sub, hs, *offsets)
    sub += b"".join(pieces)
    if len(sub) != pos:
        raise FormatError("Blosc chunk truncated inside a block", path)
    local = start - first * bs
    if local == 0 and out.nbytes == sub_nbytes:
        decompress_into(sub, out, path)
        return
    tmp = np.empty(sub_nbytes, dtype=np.uint8)
    decompress_into(sub, tmp, path)
    out.reshape(-1).view(np.uint8)[:] = tmp[local:local + out.nbytes]


def fetch_blocks(read_at: ReadAt, size: int, blocks: np.ndarray, path: str | os.PathLike[str] | None = None,
                 blocksize: int | None = None,
                 scratch: Callable[[int], np.ndarray] | None = None) -> np.ndarray | None:
    """The bytes of a stored chunk that decoding ``blocks`` of it needs, and no others.

    ``read_at(offset, length)`` reads the stored chunk of ``size`` bytes.  Returns
    a buffer as long as the chunk holding its header, block-offset table and the
    wanted blocks at their own offsets (the rest is left unset), ready for
    :meth:`Decoder.decompress_blocks`; or None when the chunk's blocks do not
    decode on their own or are not ``blocksize`` long (then read it whole).
    ``scratch(nbytes)``, if given, supplies a reusable buffer to fill.
    """
    index = chunk_index(read_at, size, path)
    h, head, bstarts, bends = index.header, index.head, index.bstarts, index.bends
    if bstarts is None or bends is None or (blocksize is not None and h.blocksize != blocksize):
        return None
    hs, nblocks = h.header_size, h.nblocks
    table_end = hs + 4 * nblocks
    buf = scratch(h.cbytes)[:h.cbytes] if scratch is not None else \
        np.empty(h.cbytes, dtype=np.uint8)
    buf[:hs] = np.frombuffer(head[:hs], np.uint8)
    buf[hs:table_end] = bstarts.view(np.uint8)
    read_into = getattr(read_at, "read_into", None)
    for start, stop in _byte_runs(bstarts, bends, blocks[blocks < nblocks]):
        if start < len(head):  # already read with the header
            buf[start:min(stop, len(head))] = np.frombuffer(head[start:stop], np.uint8)
            start = min(stop, len(head))
        if start < stop:
            if read_into is not None:  # straight into the buffer, no copy
                got = read_into(start, buf[start:stop])
            else:
                raw = read_at(start, stop - start)
                got = len(raw)
                buf[start:start + got] = np.frombuffer(raw, np.uint8)
            if got != stop - start:
                raise FormatError("Blosc chunk truncated inside a block", path)
    return buf


# Ranged reads: how much of a chunk the first read takes (the header and, usually,
# the whole block-offset table), the gap worth reading through rather than
# seeking over, and how many separate reads are worth making at all.
_READ_GAP = 16 * 1024
_MAX_READS = 8


def _byte_runs(bstarts: np.ndarray, bends: np.ndarray,
               blocks: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` byte ranges covering ``blocks`` of a chunk, as few reads.

    Blocks closer than ``_READ_GAP`` bytes are fetched in one read, and more than
    ``_MAX_READS`` reads become one: a syscall costs more than reading past a
    few blocks.
    """
    starts, stops = bstarts[blocks], bends[blocks]
    lo, hi = int(starts.min()), int(stops.max())
    if hi - lo <= int((stops - starts).sum()) + _READ_GAP:  # close together: one read
        return [(lo, hi)]
    order = np.argsort(starts)
    starts, stops = starts[order], stops[order]
    cut = (np.flatnonzero(starts[1:] > stops[:-1] + _READ_GAP) + 1).tolist()
    if len(cut) >= _MAX_READS:
        return [(lo, hi)]
    return [(int(starts[a]), int(stops[a:b].max()))
            for a, b in zip([0, *cut], [*cut, len(starts)], strict=True)]


