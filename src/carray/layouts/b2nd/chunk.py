"""Blosc2 chunks as a frame stores them: checks before decoding, special values, offsets.

Facts relied on (docs/formats/blosc2-chunk.md and docs/formats/b2frame.md, their
chunk and offsets sections and "What a reader checks"):

* A chunk has the 32-byte extended header iff its version is >= 3 and flags
  bits 0x01 and 0x04 are both set. Byte 31 holds the special-value code in
  bits 4-6 (1 zeros, 2 NaN, 3 one repeated value whose bytes follow the
  header, 4 uninitialised) and a lazy-chunk bit 0x08 that must never be on
  disk; byte 30 bit 0 marks variable-length blocks (version 6).
* Non-special chunks: ``nblocks = ceil(nbytes / blocksize)`` int32 block
  starts follow the header (after an optional dictionary), each inside the
  chunk; memcpyed chunks (flags 0x02) hold ``nbytes`` raw bytes after the header.
* Filter ids 0-4 are built in; codec format (flags bits 5-7) 0 blosclz, 1 lz4,
  3 zlib, 4 zstd, 6 = compcode in byte 22 (0,1,2,4,5 built in).
* Frame offsets are int64; a negative one is a chunk that is not stored:
  bit 63 set and the low 3 bits of its top byte give the special code
  (1 zeros, 2 NaN, 4 uninitialised). When all offsets are equal the offsets
  chunk may itself be a special "value" chunk.
"""

from __future__ import annotations

import numpy as np

from carray.codecs.blosc import (
    BLOSC2_HEADER,
    ChunkHeader,
    decompress_into,
    getitem_into,
    read_header,
    validate_chunk,
)
from carray.errors import CodecUnavailableError, FormatError

ZERO, NAN, VALUE, UNINIT = 1, 2, 3, 4
MAX_BLOCKSIZE = 536_866_816
#: Offset tables up to this size are decoded at once; bigger ones entry by entry.
_EAGER_OFFSETS = 64 * 2**20
_KNOWN_FORMATS = {0, 1, 3, 4}
_KNOWN_COMPCODES = {0, 1, 2, 4, 5}
_KNOWN_FILTERS = {0, 1, 2, 3, 4}


def is_extended(h: ChunkHeader) -> bool:
    return h.version >= 3 and (h.flags & 0x05) == 0x05


def special_code(buf, h: ChunkHeader) -> int:
    """The special-value code of a checked chunk (0 for an ordinary one)."""
    return (buf[31] >> 4) & 0x07 if is_extended(h) else 0


def check_chunk(buf, path, offset: int | None, *, nbytes: int | None = None,
                typesize: int | None = None) -> tuple[ChunkHeader, int]:
    """Validate a stored chunk before anything is sized or decoded from it.

    Parameters
    ----------
    buf : bytes-like
        The chunk, at least ``cbytes`` long.
    nbytes : int, optional
        Uncompressed size the container expects.
    typesize : int, optional
        The container's item size; checked against the chunk when it fits the
        chunk's one-byte field (Blosc2 stores 1 for wider items).

    Returns
    -------
    (header, special code)
    """
    h = read_header(buf, path, offset)
    if nbytes is not None and h.nbytes != nbytes:
        raise FormatError(f"chunk holds {h.nbytes} bytes uncompressed, expected {nbytes}",
                          path, offset)
    if h.version == 0 or h.version > 5:
        what = "variable-length-block" if h.version == 6 else "unknown"
        raise CodecUnavailableError(
            f"{path}: chunk at offset {offset} uses {what} Blosc format version {h.version}, "
            "which this reader does not support")
    if not is_extended(h):
        validate_chunk(buf, nbytes, path, offset)
        return h, 0
    if len(buf) < BLOSC2_HEADER or h.cbytes < BLOSC2_HEADER:
        raise FormatError("Blosc2 chunk shorter than its 32-byte header", path, offset)
    if buf[31] & 0x08:
        raise FormatError("chunk is marked lazy (an in-memory view), invalid on disk",
                          path, offset)
    if buf[30] & 0x01:
        raise CodecUnavailableError(f"{path}: chunk at offset {offset} uses variable-length "
                                    "blocks, which this reader does not support")
    code = special_code(buf, h)
    if code:
        _check_special(h, code, path, offset)
        return h, code
    if typesize is not None and typesize <= 255 and h.typesize != typesize and h.nbytes:
        raise FormatError(f"chunk typesize {h.typesize} differs from the frame's {typesize}",
                          path, offset)
    if h.nbytes == 0:
        return h, 0
    if h.typesize == 0 or not 0 < h.blocksize <= MAX_BLOCKSIZE:
        raise FormatError(f"chunk has typesize {h.typesize} and blocksize {h.blocksize}",
                          path, offset)
    if h.memcpyed:
        if h.cbytes != h.nbytes + BLOSC2_HEADER:
            raise FormatError(f"raw chunk should be {h.nbytes + BLOSC2_HEADER} bytes, header "
                              f"says {h.cbytes}", path, offset)
        return h, 0
    _check_codec(buf, h, path, offset)
    _check_block_table(buf, h, path, offset)
    return h, 0


def _check_codec(buf, h: ChunkHeader, path, offset: int | None) -> None:
    """Refuse codecs and filters this build cannot decode (never as corruption)."""
    fmt = h.flags >> 5
    codec_ok = fmt in _KNOWN_FORMATS or (fmt == 6 and buf[22] in _KNOWN_COMPCODES)
    if not codec_ok:
        name = "snappy" if fmt == 2 else f"format {fmt} / codec id {buf[22]}"
        raise CodecUnavailableError(f"{path}: chunk at offset {offset} uses codec {name}, "
                                    "which this build cannot decode")
    bad_filters = sorted(set(buf[16:22]) - _KNOWN_FILTERS)
    if bad_filters:
        raise CodecUnavailableError(f"{path}: chunk at offset {offset} uses filter(s) "
                                    f"{bad_filters}, which this build cannot decode")


def _check_block_table(buf, h: ChunkHeader, path, offset: int | None) -> None:
    """The block starts (and dictionary, if any) lie inside the chunk."""
    nblocks = -(-h.nbytes // h.blocksize)
    table_end = BLOSC2_HEADER + 4 * nblocks
    if table_end > h.cbytes:
        raise FormatError(f"chunk of {h.cbytes} bytes cannot hold {nblocks} block starts",
                          path, offset)
    first_data = table_end
    if buf[31] & 0x01:  # a dictionary (int32 size + bytes) precedes the streams
        if table_end + 4 > h.cbytes:
            raise FormatError("chunk dictionary truncated", path, offset)
        dsize = int(np.frombuffer(buf, "<i4", 1, table_end)[0])
        first_data = table_end + 4 + dsize
        if dsize < 0 or first_data > h.cbytes:
            raise FormatError(f"chunk dictionary of {dsize} bytes does not fit", path, offset)
    bstarts = np.frombuffer(buf, dtype="<i4", count=nblocks, offset=BLOSC2_HEADER)
    if bstarts.min() < first_data or bstarts.max() > h.cbytes - 4:
        raise FormatError("block starts point outside the chunk", path, offset)


def _check_special(h: ChunkHeader, code: int, path, offset) -> None:
    if code == VALUE:
        t = h.cbytes - BLOSC2_HEADER
        if not 0 < t <= h.nbytes or h.nbytes % t:
            raise FormatError(f"repeated-value chunk with a {t}-byte value cannot fill "
                              f"{h.nbytes} bytes", path, offset)
    elif code in (NAN, UNINIT):
        if h.typesize == 0 or h.nbytes % h.typesize:
            raise FormatError(f"special chunk of {h.nbytes} bytes is not whole items of "
                              f"{h.typesize} bytes", path, offset)
        if code == NAN and h.typesize not in (4, 8):
            raise FormatError(f"NaN chunk with typesize {h.typesize} (4 or 8 expected)",
                              path, offset)
    elif code != ZERO:
        raise FormatError(f"unknown special chunk code {code}", path, offset)


def fill_special(out: np.ndarray, code: int, buf, h: ChunkHeader) -> None:
    """Write the value of a special chunk into the flat uint8 array ``out``."""
    if code == VALUE:
        t = h.cbytes - BLOSC2_HEADER
        value = np.frombuffer(buf, np.uint8, t, BLOSC2_HEADER)
        out.reshape(-1, t)[:] = value
    elif code == NAN:
        out.view(f"<f{h.typesize}")[:] = np.nan
    else:  # zeros, and uninitialised (c-blosc2 leaves those bytes undefined; zero is safest)
        out[:] = 0


def decode_into(buf, out: np.ndarray, path, offset, *, typesize: int | None = None) -> None:
    """Check a chunk and decode all of it into the flat uint8 array ``out``."""
    h, code = check_chunk(buf, path, offset, nbytes=out.nbytes, typesize=typesize)
    if code:
        fill_special(out, code, buf, h)
    elif h.nbytes:
        decompress_into(buf, out, path)


def decode_range_into(buf, start: int, out: np.ndarray, path, offset, *,
                      typesize: int | None = None) -> None:
    """Decode bytes ``[start, start + out.nbytes)`` of a chunk, only the blocks they touch."""
    h, code = check_chunk(buf, path, offset, typesize=typesize)
    if not 0 <= start <= start + out.nbytes <= h.nbytes:
        raise FormatError(f"byte range [{start}, {start + out.nbytes}) is outside a chunk of "
                          f"{h.nbytes} bytes", path, offset)
    if code:
        if code == VALUE:
            t = h.cbytes - BLOSC2_HEADER
            if start % t or out.nbytes % t:
                full = np.empty(h.nbytes, np.uint8)
                fill_special(full, code, buf, h)
                out[:] = full[start:start + out.nbytes]
                return
        fill_special(out, code, buf, h)
        return
    ts = max(h.typesize, 1)
    # DELTA is taken against block 0 and libblosc2's getitem decodes such ranges
    # wrongly (checked against the nd_delta_shuffle fixture), so decode it all.
    delta = 3 in buf[16:22] if is_extended(h) else bool(h.flags & 0x08)
    if start % ts or out.nbytes % ts or delta:
        full = np.empty(h.nbytes, np.uint8)
        decompress_into(buf, full, path)
        out[:] = full[start:start + out.nbytes]
        return
    getitem_into(buf, start, out, path, h)


def special_chunk(code: int, nbytes: int, typesize: int, blocksize: int) -> bytes:
    """The 32-byte chunk a negative frame offset stands for."""
    header = np.zeros(BLOSC2_HEADER, np.uint8)
    header[:4] = (5, 1, 0x05, typesize if typesize <= 255 else 1)
    header[4:16].view("<i4")[:] = (nbytes, max(blocksize, 1), BLOSC2_HEADER)
    header[31] = code << 4
    return header.tobytes()


def special_of_offset(off: int, path, where: int | None) -> int:
    """Special code of a negative frame offset."""
    code = ((off & 0xFFFF_FFFF_FFFF_FFFF) >> 56) & 0x07
    if code not in (ZERO, NAN, UNINIT):
        raise FormatError(f"chunk offset 0x{off & 0xFFFF_FFFF_FFFF_FFFF:016x} is negative "
                          f"without a valid special code", path, where)
    return code


def special_offset(code: int) -> int:
    """The int64 offset that marks an unstored special chunk."""
    return -(1 << 63) | (code << 56)


class Offsets:
    """The chunk offsets table of a frame, decoded once or, when huge, entry by entry."""

    def __init__(self, buf: bytes, nchunks: int | None, path, where: int) -> None:
        want = None if nchunks is None else 8 * nchunks
        h, code = check_chunk(buf, path, where, nbytes=want)
        if h.nbytes % 8:
            raise FormatError(f"offsets chunk holds {h.nbytes} bytes, not whole int64s",
                              path, where)
        self.n = h.nbytes // 8
        self._buf, self._h, self._path, self._where = buf, h, path, where
        self._const: int | None = None
        self._array: np.ndarray | None = None
        if code in (NAN, UNINIT):
            raise FormatError("offsets chunk is a NaN/uninitialised special chunk", path, where)
        if code in (ZERO, VALUE):
            one = np.zeros(8, np.uint8)
            if code == VALUE:
                t = h.cbytes - BLOSC2_HEADER
                if t != 8:
                    raise FormatError(f"offsets chunk repeats a {t}-byte value, not an int64",
                                      path, where)
                one[:] = np.frombuffer(buf, np.uint8, 8, BLOSC2_HEADER)
            self._const = int(one.view("<i8")[0])
        elif h.nbytes <= _EAGER_OFFSETS:
            out = np.empty(h.nbytes, np.uint8)
            decode_into(buf, out, path, where)
            self._array = out.view("<i8")

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(i)
        if self._const is not None:
            return self._const
        if self._array is not None:
            return int(self._array[i])
        one = np.empty(8, np.uint8)
        getitem_into(self._buf, 8 * i, one, self._path, self._h)
        return int(one.view("<i8")[0])

    def array(self) -> np.ndarray:
        """All offsets (only for tables small enough to decode at once)."""
        if self._const is not None:
            return np.full(self.n, self._const, np.int64)
        if self._array is None:
            raise MemoryError(f"offset table of {self.n} entries is too large to load")
        return self._array


