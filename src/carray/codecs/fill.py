"""Blosc2 special chunks: a chunk that holds one value repeated, as 32 (or 32 + T) bytes.

Facts relied on (docs/formats/blosc2-chunk.md, "Special chunks"): a special
chunk is a 32-byte extended header (version >= 3, flags bits 0x01 and 0x04
set) with no body; bits 4-6 of byte 31 give its code: 1 all zero bytes, 2 NaN
of width ``typesize`` (4 or 8), 3 the T bytes after the header repeated (cbytes
32 + T), 4 uninitialised (carray reads zeros).  c-blosc2 and python-blosc2
decode them like any chunk.

carray writes them for chunks that only hold an array's fill value: layouts
that know the value without storing anything (the superchunk layout, Blosc2
frames) record such chunks in their index instead, and reads fill the output
without decoding (:meth:`carray.chunks.io.ChunkIO.fill_of`).
"""

from __future__ import annotations

import numpy as np

ZERO, NAN, VALUE, UNINIT = 1, 2, 3, 4
HEADER = 32
# c-blosc2 keeps the typesize in one byte; wider repeated values have no special chunk.
_MAX_VALUE_SIZE = 255


def special_code(chunk: bytes | memoryview) -> int:
    """The special-value code of a Blosc2 chunk (0 for an ordinary one or a Blosc1 one)."""
    if len(chunk) < HEADER or chunk[0] < 3 or (chunk[2] & 0x05) != 0x05:
        return 0
    return (chunk[31] >> 4) & 0x07


def fill_chunk(item: bytes, nbytes: int, blocksize: int) -> bytes | None:
    """The special chunk of ``nbytes`` decoded bytes repeating the item bytes ``item``.

    ``blocksize`` is recorded as the chunk's block size.  Returns None when Blosc2
    has no special chunk for it (items wider than 255 bytes that are not all zero).
    """
    size = len(item)
    zero = not any(item)
    if size == 0 or nbytes % size or (not zero and size > _MAX_VALUE_SIZE):
        return None
    header = np.zeros(HEADER, np.uint8)
    header[:4] = (5, 1, 0x05, size if size <= _MAX_VALUE_SIZE else 1)
    cbytes = HEADER if zero else HEADER + size
    header[4:16].view("<i4")[:] = (nbytes, max(blocksize, 1), cbytes)
    header[31] = (ZERO if zero else VALUE) << 4
    return header.tobytes() + (b"" if zero else bytes(item))


def special_item(chunk: bytes | memoryview, dtype: np.dtype) -> bytes | None:
    """The item bytes a special chunk repeats, read as ``dtype`` items; None when
    ``chunk`` is not special (or its value does not fit ``dtype``)."""
    code = special_code(chunk)
    size = dtype.itemsize
    if code in (ZERO, UNINIT):
        return bytes(size)
    if code == VALUE:
        cbytes = int.from_bytes(bytes(chunk[12:16]), "little")
        if cbytes == HEADER + size and len(chunk) >= cbytes:
            return bytes(chunk[HEADER:cbytes])
        return None
    if code == NAN and dtype.kind == "f" and size in (4, 8):
        return np.full((), np.nan, dtype).tobytes()
    return None
