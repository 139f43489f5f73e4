"""Blosc2 frame header, metalayers, trailer and the b2nd/caterva layer: parse and build.

Facts relied on (docs/formats/b2frame.md: header, metalayers, trailer, N-d arrays;
byte offsets from c-blosc2 ``frame.h``, checked against the shared fixtures):

* The header is a msgpack fixarray of 14 whose first 87 bytes have fixed
  positions: magic ``9E A8 "b2frame\\0"``; ``D2`` int32 header_len at 10;
  ``CF`` uint64 frame_len at 15; ``A4`` + 4 flag bytes at 24 (general flags:
  low nibble format version, bits 4-5 offset width, 1 = 64 bit; frame type
  0 contiguous / 1 sparse; compcode | clevel << 4; splitmode - 1); ``D3``
  int64 nbytes at 29 and cbytes at 38; ``D2`` int32 typesize 47, blocksize 52,
  chunksize 57; ``D1`` int16 threads at 62 and 65; ``C2``/``C3`` has-vlmeta at
  68; ``D8`` fixext16 at 69 holding filter count, 6 filters, udcodec,
  compcode_meta, 6 filters_meta, other_flags2, a reserved byte. All big-endian.
* From 87: ``93 CD idx_size DE n {fixstr name, D2 int32 offset}×n DC n
  {C6 uint32 len, bytes}×n``; each offset points at the value's ``C6`` byte,
  counted from the frame start; at most 16 metalayers, names shorter than 32.
  ``idx_size`` counts from the ``93`` byte to the end of the name map.
* The trailer is ``94 01`` then the same index/value layout for vlmetalayers,
  offsets counted from the trailer start and ``idx_size`` counted from the
  ``CD`` byte; then ``CE`` uint32 trailer_len, ``D8 00`` and 16 zero bytes
  (fingerprint "none"): the trailer is found from the last 23 bytes.
  Each vlmeta value is itself a Blosc2 chunk of the msgpack-packed value.
* ``b2nd`` layer: ``97 00 ndim`` + ``9N {D3 int64}`` shape + ``9N {D2 int32}``
  chunkshape + ``9N {D2 int32}`` blockshape + dtype_format (0 = NumPy) +
  ``DB`` str32 dtype string. ``caterva`` layer: ``95`` and the first five.
  c-blosc2 writes each array marker as ``0x90 + ndim`` (b2nd.c
  ``b2nd_serialize_meta``), so 16 dimensions give ``A0``, not a valid fixarray;
  readers skip the byte. ndim is at most 16 for b2nd, 8 for caterva.
* Every integer of those layers is fixed-width, so rewriting the shape never
  changes the header's length; the fixed fields sit at the offsets above, so a
  commit patches them in place (``patch_header``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from carray.chunks.geometry import B2ND_MAX_DIM, CATERVA_MAX_DIM
from carray.core.dtypes import checked_dtype
from carray.errors import FormatError

MAGIC = b"\x9e\xa8b2frame\x00"
FIXED_HEADER = 87
TRAILER_TAIL = 23  # CE uint32 trailer_len, D8 type, 16-byte fingerprint
MIN_TRAILER = 35
MAX_METALAYERS = 16
MAX_VLMETALAYERS_READ = 8192
MAX_NAME = 31
SPARSE_INDEX = "chunks.b2frame"

_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


@dataclass
class FrameHeader:
    """The decoded fixed part of a frame header plus its raw metalayers."""

    header_len: int
    frame_len: int
    version: int
    frame_type: int
    variable_chunks: bool
    compcode: int
    clevel: int
    nbytes: int
    cbytes: int
    typesize: int
    blocksize: int
    chunksize: int
    has_vlmeta: bool
    filters: tuple[int, ...]
    filters_meta: tuple[int, ...]
    meta: dict[str, bytes] = field(default_factory=dict)
    meta_offsets: dict[str, int] = field(default_factory=dict)


def _marker(buf, pos: int, want: int, what: str, path, base: int = 0) -> None:
    if pos >= len(buf) or buf[pos] != want:
        got = f"0x{buf[pos]:02x}" if pos < len(buf) else "end of data"
        raise FormatError(f"{what}: expected msgpack byte 0x{want:02x}, found {got}",
                          path, base + pos)


def parse_fixed_header(buf: bytes, path, file_size: int) -> FrameHeader:
    """Decode the 87 fixed bytes of a frame header (``buf`` holds at least those).

    ``file_size`` bounds ``header_len`` and ``frame_len``: nothing sized from the
    header is trusted before this check.
    """
    if len(buf) < FIXED_HEADER:
        raise FormatError(f"Blosc2 frame truncated: {len(buf)} bytes, the header needs at "
                          f"least {FIXED_HEADER}", path, 0)
    if buf[:10] != MAGIC:
        raise FormatError("not a Blosc2 frame (magic 9E A8 'b2frame\\0' missing)", path, 0)
    for pos, want, what in ((10, 0xD2, "header_len"), (15, 0xCF, "frame_len"),
                            (24, 0xA4, "flags"), (29, 0xD3, "nbytes"), (38, 0xD3, "cbytes"),
                            (47, 0xD2, "typesize"), (52, 0xD2, "blocksize"),
                            (57, 0xD2, "chunksize"), (62, 0xD1, "compression threads"),
                            (65, 0xD1, "decompression threads"),
                            (69, 0xD8, "filter pipeline")):
        _marker(buf, pos, want, f"frame header field {what}", path)
    if buf[68] not in (0xC2, 0xC3):
        raise FormatError(f"frame header has-vlmeta flag is 0x{buf[68]:02x}, not a msgpack "
                          "bool", path, 68)
    header_len = _I32.unpack_from(buf, 11)[0]
    frame_len = struct.unpack_from(">Q", buf, 16)[0]
    if not FIXED_HEADER <= header_len <= frame_len:
        raise FormatError(f"frame header_len {header_len} is not between {FIXED_HEADER} and "
                          f"frame_len {frame_len}", path, 11)
    if frame_len > file_size:
        raise FormatError(f"frame_len {frame_len} is larger than the file ({file_size} bytes);"
                          " truncated?", path, 16)
    general, ftype, codec, split = buf[25], buf[26], buf[27], buf[28]
    version = general & 0x0F
    if version > 3 or version == 0:
        raise FormatError(f"unsupported Blosc2 frame format version {version}", path, 25)
    if (general >> 4) & 0x03 != 1:
        raise FormatError("frame offsets are not 64-bit (the only width Blosc2 implements)",
                          path, 25)
    if general & 0x80:
        raise FormatError("frame uses variable-length blocks, which this reader does not "
                          "support", path, 25)
    nbytes = struct.unpack_from(">q", buf, 30)[0]
    cbytes = struct.unpack_from(">q", buf, 39)[0]
    typesize, blocksize, chunksize = (_I32.unpack_from(buf, p)[0] for p in (48, 53, 58))
    if nbytes < 0 or cbytes < 0:
        raise FormatError(f"frame sizes are negative (nbytes {nbytes}, cbytes {cbytes})",
                          path, 29)
    if typesize <= 0:
        raise FormatError(f"frame typesize {typesize} is not positive", path, 47)
    if chunksize < 0 or blocksize < 0:
        raise FormatError(f"frame chunksize {chunksize} / blocksize {blocksize} negative",
                          path, 52)
    if (buf[26] & 0x0F) == 0 and header_len + cbytes > frame_len:
        # Only contiguous frames hold their chunks; a sparse index counts its chunk files.
        raise FormatError(f"frame claims {cbytes} bytes of chunks after a {header_len}-byte "
                          f"header, more than the frame's {frame_len} bytes", path, 38)
    nfilters = buf[70]
    if nfilters > 6:
        raise FormatError(f"frame header lists {nfilters} filters, at most 6 fit", path, 70)
    del split  # the split mode only matters to writers appending chunks
    return FrameHeader(
        header_len=header_len, frame_len=frame_len, version=version, frame_type=ftype & 0x0F,
        variable_chunks=bool(general & 0x40), compcode=codec & 0x0F, clevel=codec >> 4,
        nbytes=nbytes, cbytes=cbytes, typesize=typesize, blocksize=blocksize,
        chunksize=chunksize, has_vlmeta=buf[68] == 0xC3,
        filters=tuple(buf[71:77]), filters_meta=tuple(buf[79:85]))


def _parse_index(buf, pos: int, base: int, limit: int, max_n: int, what: str,
                 path) -> list[tuple[str, int, bytes]]:
    """Parse ``DE n {name: D2 offset} DC n`` at ``pos`` and fetch each value by offset.

    Offsets are relative to ``buf[0]``, which sits at file offset ``base``;
    values must end before ``limit`` (an index into ``buf``).
    Returns (name, value offset, value bytes) triples.
    """
    _marker(buf, pos, 0xDE, f"{what} name map", path, base)
    if pos + 3 > len(buf):
        raise FormatError(f"{what} index truncated", path, base + pos)
    n = _U16.unpack_from(buf, pos + 1)[0]
    if n > max_n:
        raise FormatError(f"{n} {what}s, at most {max_n} are allowed", path, base + pos)
    pos += 3
    names = []
    for _ in range(n):
        if pos >= len(buf) or not 0xA0 <= buf[pos] <= 0xBF:
            raise FormatError(f"{what} name is not a msgpack fixstr", path, base + pos)
        ln = buf[pos] & 0x1F
        raw = bytes(buf[pos + 1:pos + 1 + ln])
        pos += 1 + ln
        _marker(buf, pos, 0xD2, f"{what} offset", path, base)
        if pos + 5 > len(buf) or len(raw) != ln:
            raise FormatError(f"{what} index truncated", path, base + pos)
        off = _I32.unpack_from(buf, pos + 1)[0]
        pos += 5
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{what} name {raw!r} is not UTF-8", path, base + pos) from None
        names.append((name, off))
    _marker(buf, pos, 0xDC, f"{what} value list", path, base)
    if pos + 3 > len(buf) or _U16.unpack_from(buf, pos + 1)[0] != n:
        raise FormatError(f"{what} value count does not match the {n} names", path, base + pos)
    first_value = pos + 3
    out = []
    for name, off in names:
        if off < first_value or off + 5 > limit:
            raise FormatError(f"{what} {name!r}: value offset {off} outside "
                              f"[{first_value}, {limit})", path, base + off)
        _marker(buf, off, 0xC6, f"{what} {name!r} value", path, base)
        ln = _U32.unpack_from(buf, off + 1)[0]
        if off + 5 + ln > limit:
            raise FormatError(f"{what} {name!r}: {ln} bytes of value do not fit", path,
                              base + off)
        out.append((name, off, bytes(buf[off + 5:off + 5 + ln])))
    return out


def parse_metalayers(header: bytes, hdr: FrameHeader, path) -> None:
    """Fill ``hdr.meta`` from the full header bytes (``len(header) == header_len``)."""
    buf = header
    _marker(buf, FIXED_HEADER, 0x93, "metalayer block", path)
    _marker(buf, FIXED_HEADER + 1, 0xCD, "metalayer index size", path)
    for name, off, value in _parse_index(buf, FIXED_HEADER + 4, 0, hdr.header_len,
                                         MAX_METALAYERS, "metalayer", path):
        hdr.meta[name] = value
        hdr.meta_offsets[name] = off


def parse_trailer(trailer: bytes, start: int, path) -> dict[str, bytes]:
    """Raw vlmeta chunks from the whole trailer, which begins at file offset ``start``."""
    return {name: value for name, _, value in trailer_entries(trailer, start, path)}


def trailer_entries(trailer: bytes, start: int, path) -> list[tuple[str, int, bytes]]:
    """``(name, offset of the value's C6 byte in the trailer, value)`` of every vlmeta
    entry of the whole trailer, which begins at file offset ``start``."""
    n = len(trailer)
    if n < MIN_TRAILER or trailer[0] != 0x94 or trailer[1] != 0x01:
        raise FormatError("frame trailer does not start with 94 01 (fixarray 4, version 1)",
                          path, start)
    _marker(trailer, 2, 0x93, "vlmetalayer block", path, start)
    _marker(trailer, 3, 0xCD, "vlmetalayer index size", path, start)
    return _parse_index(trailer, 6, start, n - TRAILER_TAIL, MAX_VLMETALAYERS_READ,
                        "vlmetalayer", path)


def locate_trailer(tail: bytes, frame_len: int, header_len: int, path) -> int:
    """Trailer length from the last 23 bytes of a frame."""
    if len(tail) != TRAILER_TAIL or tail[0] != 0xCE or tail[5] != 0xD8:
        raise FormatError("frame trailer length marker (CE ... D8) missing", path,
                          frame_len - TRAILER_TAIL)
    trailer_len = _U32.unpack_from(tail, 1)[0]
    if not MIN_TRAILER <= trailer_len <= frame_len - header_len:
        raise FormatError(f"frame trailer_len {trailer_len} does not fit a frame of "
                          f"{frame_len} bytes with a {header_len}-byte header", path,
                          frame_len - TRAILER_TAIL + 1)
    return trailer_len


# -- the N-d metalayers -------------------------------------------------------------------

@dataclass(frozen=True)
class NDMeta:
    """Contents of a ``b2nd`` or ``caterva`` metalayer."""

    kind: str
    shape: tuple[int, ...]
    chunkshape: tuple[int, ...]
    blockshape: tuple[int, ...]
    dtype: np.dtype | None


def parse_nd_meta(raw: bytes, kind: str, path, offset: int | None) -> NDMeta:
    """Decode a ``b2nd`` (7 elements) or ``caterva`` (5 elements) metalayer byte by byte.

    The fixed-width integer forms are required, as every writer uses them.
    """
    def bad(msg, pos=None):
        at = None if offset is None else offset + 5 + (pos or 0)
        return FormatError(f"{kind} metalayer: {msg}", path, at)

    want_head = 0x97 if kind == "b2nd" else 0x95
    if len(raw) < 3:
        raise bad(f"{len(raw)} bytes is too short")
    if raw[0] != want_head:
        if kind == "caterva" and raw[0] == 0x93:
            raise bad("pre-0.2 caterva layout (no version, no blocks) is not supported")
        raise bad(f"starts with 0x{raw[0]:02x}, expected fixarray 0x{want_head:02x}", 0)
    if raw[1] != 0:
        raise bad(f"version {raw[1]} is not 0", 1)
    ndim = raw[2]
    max_dim = B2ND_MAX_DIM if kind == "b2nd" else CATERVA_MAX_DIM
    if ndim > max_dim:
        raise bad(f"{ndim} dimensions, at most {max_dim} are supported", 2)
    pos = 3
    arrays: list[tuple[int, ...]] = []
    for what, marker, fmt in (("shape", 0xD3, ">q"), ("chunkshape", 0xD2, ">i"),
                              ("blockshape", 0xD2, ">i")):
        width = struct.calcsize(fmt)
        if pos >= len(raw) or raw[pos] != _array_marker(ndim):
            raise bad(f"{what} is not a fixarray of {ndim}", pos)
        pos += 1
        values = []
        for _ in range(ndim):
            if pos + 1 + width > len(raw) or raw[pos] != marker:
                raise bad(f"{what} entry is not msgpack 0x{marker:02x}", pos)
            values.append(struct.unpack_from(fmt, raw, pos + 1)[0])
            pos += 1 + width
        arrays.append(tuple(values))
    dtype = None
    if kind == "b2nd":
        if pos + 6 > len(raw):
            raise bad("dtype missing", pos)
        if raw[pos] != 0:
            raise bad(f"dtype format {raw[pos]} is not 0 (NumPy); unsupported", pos)
        if raw[pos + 1] != 0xDB:
            raise bad("dtype is not a msgpack str32", pos + 1)
        ln = _U32.unpack_from(raw, pos + 2)[0]
        pos += 6
        if pos + ln > len(raw):
            raise bad(f"dtype string of {ln} bytes does not fit", pos)
        dtype = parse_dtype(bytes(raw[pos:pos + ln]), path, offset)
        pos += ln
    if pos != len(raw):
        raise bad(f"{len(raw) - pos} trailing bytes", pos)
    shape, chunkshape, blockshape = arrays
    return NDMeta(kind, shape, chunkshape, blockshape, dtype)


def parse_dtype(raw: bytes, path, offset) -> np.dtype:
    """A NumPy dtype from its b2nd string: ``dtype.str`` or a literal descr (never eval).

    Checked by :func:`carray.core.dtypes.checked_dtype`: object items and variable-size
    kinds raise :class:`~carray.errors.UnsafeDataError`.  A sub-array type (``'1f8'``)
    is refused: writers record scalar or record items, the array's axes in its shape.
    """
    where = f"{path} (b2nd dtype at offset {offset})"
    dtype = checked_dtype(bytes(raw), source=where)
    if dtype.subdtype is not None:
        raise FormatError(f"dtype {bytes(raw)[:40]!r} is a sub-array type ({dtype}); a "
                          "frame's items are scalars or records", path, offset)
    return dtype


def dtype_string(dtype: np.dtype) -> str:
    """The b2nd dtype string python-blosc2 writes: ``dtype.str``, or the descr for records."""
    return str(dtype) if dtype.fields is not None else dtype.str


def _array_marker(ndim: int) -> int:
    # c-blosc2's ``0x90 + ndim``: a fixarray up to 15, 0xA0 for 16 (see module doc).
    return 0x90 + ndim


def build_nd_meta(shape, chunkshape, blockshape, dtype: np.dtype | None) -> bytes:
    """Bytes of a ``b2nd`` layer (``dtype`` given) or a ``caterva`` layer (``dtype`` None)."""
    ndim = len(shape)
    out = bytearray([0x97 if dtype is not None else 0x95, 0, ndim])
    for values, marker, fmt in ((shape, 0xD3, ">q"), (chunkshape, 0xD2, ">i"),
                                (blockshape, 0xD2, ">i")):
        out.append(_array_marker(ndim))
        for v in values:
            out.append(marker)
            out += struct.pack(fmt, v)
    if dtype is not None:
        text = dtype_string(dtype).encode("utf-8")
        out += b"\x00\xdb" + _U32.pack(len(text)) + text
    return bytes(out)


# -- building -----------------------------------------------------------------------------

def _check_name(name: str, what: str) -> bytes:
    raw = name.encode("utf-8")
    if not 0 < len(raw) <= MAX_NAME:
        raise ValueError(f"{what} name {name!r} must be 1 to {MAX_NAME} UTF-8 bytes")
    return raw


def _build_index(items: list[tuple[str, bytes]], prefix_len: int, what: str,
                 ) -> tuple[bytes, bytes]:
    """(name map, value list) whose value offsets count from ``prefix_len`` bytes before
    the name map."""
    names = [_check_name(n, what) for n, _ in items]
    map_len = 3 + sum(1 + len(r) + 5 for r in names)
    values_start = prefix_len + map_len + 3
    name_map = bytearray(b"\xde" + _U16.pack(len(items)))
    values = bytearray(b"\xdc" + _U16.pack(len(items)))
    pos = values_start
    for raw, (_, value) in zip(names, items, strict=True):
        name_map += bytes([0xA0 | len(raw)]) + raw + b"\xd2" + _I32.pack(pos)
        values += b"\xc6" + _U32.pack(len(value)) + value
        pos += 5 + len(value)
    return bytes(name_map), bytes(values)


def build_header(*, frame_type: int, nbytes: int, cbytes: int, typesize: int,
                 blocksize: int, chunksize: int, compcode: int, clevel: int,
                 filters: bytes, filters_meta: bytes, has_vlmeta: bool,
                 metalayers: list[tuple[str, bytes]], data_len: int,
                 trailer_len: int) -> bytes:
    """A complete frame header. ``data_len`` is what follows it before the trailer
    (chunks and offsets chunk), so frame_len can be filled in."""
    if len(metalayers) > MAX_METALAYERS:
        raise ValueError(f"at most {MAX_METALAYERS} metalayers")
    name_map, values = _build_index(metalayers, FIXED_HEADER + 4, "metalayer")
    idx_size = 4 + len(name_map)
    header_len = FIXED_HEADER + 4 + len(name_map) + len(values)
    frame_len = header_len + data_len + trailer_len
    out = bytearray(MAGIC)
    out += b"\xd2" + _I32.pack(header_len)
    out += b"\xcf" + struct.pack(">Q", frame_len)
    # Format version 2 (fixed-size chunks) with 64-bit offsets; chunksize 0 means
    # variable-size chunks, which Blosc2 marks with bit 6 and version 3.
    general = 0x12 if chunksize else 0x53
    out += b"\xa4" + bytes([general, frame_type, (compcode & 0x0F) | (clevel << 4), 0x02])
    out += b"\xd3" + struct.pack(">q", nbytes) + b"\xd3" + struct.pack(">q", cbytes)
    for v in (typesize, blocksize, chunksize):
        out += b"\xd2" + _I32.pack(v)
    out += b"\xd1\x00\x01\xd1\x00\x01"
    out.append(0xC3 if has_vlmeta else 0xC2)
    out += b"\xd8\x06" + bytes(filters[:6]).ljust(6, b"\0") + bytes([compcode, 0])
    out += bytes(filters_meta[:6]).ljust(6, b"\0") + b"\x00\x00"
    assert len(out) == FIXED_HEADER
    out += b"\x93\xcd" + _U16.pack(idx_size) + name_map + values
    return bytes(out)


def build_trailer(vlmeta_chunks: list[tuple[str, bytes]]) -> bytes:
    """A complete trailer holding the given (already compressed) vlmeta chunks."""
    if len(vlmeta_chunks) > MAX_METALAYERS:
        # c-blosc2 refuses to write more than 16 into a trailer.
        raise ValueError(f"at most {MAX_METALAYERS} vlmeta entries can be stored")
    name_map, values = _build_index(vlmeta_chunks, 6, "vlmeta")
    body = b"\x94\x01\x93\xcd" + _U16.pack(3 + len(name_map)) + name_map + values
    trailer_len = len(body) + TRAILER_TAIL
    return body + b"\xce" + _U32.pack(trailer_len) + b"\xd8\x00" + bytes(16)


def patch_header(header: bytearray, *, frame_len: int, nbytes: int, cbytes: int,
                 has_vlmeta: bool, chunksize: int | None = None,
                 blocksize: int | None = None) -> None:
    """Rewrite the size fields of a complete header in place (its length never changes).

    ``chunksize``/``blocksize`` are only written when given; a header that had
    chunksize 0 (an empty python-blosc2 array: variable-size chunks, format
    version 3) is switched to fixed-size chunks, version 2.
    """
    struct.pack_into(">Q", header, 16, frame_len)
    struct.pack_into(">q", header, 30, nbytes)
    struct.pack_into(">q", header, 39, cbytes)
    if chunksize is not None:
        if _I32.unpack_from(header, 58)[0] == 0 and chunksize:
            header[25] = 0x12
        _I32.pack_into(header, 58, chunksize)
    if blocksize is not None:
        _I32.pack_into(header, 53, blocksize)
    header[68] = 0xC3 if has_vlmeta else 0xC2
