"""Blosc chunks: compress, decompress into a caller's buffer, decode single blocks.

Format facts relied on (docs/formats/blosc1-chunk.md and docs/formats/blosc2-chunk.md):

* Every chunk starts with a little-endian header: u8 version, u8 codec stream
  version, u8 flags, u8 typesize, i32 nbytes (uncompressed), i32 blocksize,
  i32 cbytes (compressed, header included).  Blosc1 writes version 2 and a
  16-byte header; Blosc2 writes versions 3 to 5 with a 32-byte header (flags
  0x01 and 0x04 both set mark the extended header).
* In a version-2 chunk, flags bit 0x02 means the data is stored raw right after
  the header; otherwise an int32 table of block starts (``bstarts``, counted from
  the chunk start) follows the header.  Bits 5-7 hold the codec's format:
  0 blosclz, 1 lz4/lz4hc, 2 snappy, 3 zlib, 4 zstd.
* libblosc2 decodes both generations; c-blosc 1.x decodes only version 2, so
  files that old readers (bcolz, bloscpack) must open are written with Blosc1.

Decoding goes through libblosc2 (the copy shipped inside the ``blosc2`` wheel)
by ctypes, because its ``blosc2_decompress`` writes straight into our output
array and ``blosc2_getitem`` decodes only the blocks a range touches.  Python
bindings of either library allocate a new bytes object per call instead.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import blosc as _blosc1
import blosc2 as _blosc2
import numpy as np

from carray.codecs._libcheck import PublicLibrary, fallback, self_check
from carray.codecs.pipeline import blosc2_filters, check_blosc1_filters, decode_error
from carray.errors import CodecError, CodecUnavailableError, FormatError
from carray.params import CParams

BLOSC1_HEADER = 16
BLOSC2_HEADER = 32
MAX_BUFFERSIZE = 2**31 - 1 - BLOSC2_HEADER
MAX_TYPESIZE = 255

#: A stored chunk: any buffer holding its bytes.
ChunkBytes = bytes | bytearray | memoryview | np.ndarray
#: ``read_at(offset, length)``: up to ``length`` bytes of a stored chunk from ``offset``.
ReadAt = Callable[[int, int], bytes]

_FORMAT_NAMES = {0: "blosclz", 1: "lz4", 2: "snappy", 3: "zlib", 4: "zstd"}
HEADER_STRUCT = struct.Struct("<BBBBiii")

_BLOSC2_CODECS = {
    "blosclz": _blosc2.Codec.BLOSCLZ,
    "lz4": _blosc2.Codec.LZ4,
    "lz4hc": _blosc2.Codec.LZ4HC,
    "zlib": _blosc2.Codec.ZLIB,
    "zstd": _blosc2.Codec.ZSTD,
}


def _load_libblosc2() -> ctypes.CDLL:
    libdir = os.path.join(os.path.dirname(_blosc2.__file__), "lib")
    for name in ("libblosc2.so", "libblosc2.dylib", "blosc2.dll", "libblosc2.so.9"):
        path = os.path.join(libdir, name)
        if os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:  # pragma: no cover - every supported wheel ships it
        raise ImportError(f"libblosc2 not found in {libdir}; reinstall the blosc2 package")
    vp, i32 = ctypes.c_void_p, ctypes.c_int32
    lib.blosc2_init.argtypes = []
    lib.blosc2_decompress.argtypes = [vp, i32, vp, i32]
    lib.blosc2_decompress.restype = ctypes.c_int
    lib.blosc2_getitem.argtypes = [vp, i32, ctypes.c_int, ctypes.c_int, vp, i32]
    lib.blosc2_getitem.restype = ctypes.c_int
    lib.blosc2_set_nthreads.argtypes = [ctypes.c_int16]
    lib.blosc2_set_nthreads.restype = ctypes.c_int16
    lib.blosc2_init()
    return lib


try:
    _lib: Any = _load_libblosc2()
except (OSError, AttributeError, ImportError) as _exc:  # a wheel laid out differently
    _lib = fallback(f"cannot load it: {_exc}")


def _dparams_fields() -> list[str] | None:
    """Field names of ``blosc2_dparams`` in the header shipped with this libblosc2.

    The struct is passed by value to ``blosc2_create_dctx``, so its layout must
    match the library exactly; without the header, per-thread contexts are off.
    """
    header = os.path.join(os.path.dirname(_blosc2.__file__), "include", "blosc2.h")
    try:
        with open(header, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    end = text.find("} blosc2_dparams;")
    start = text.rfind("typedef struct {", 0, end)
    if end < 0 or start < 0:
        return None
    body = re.sub(r"//[^\n]*|/\*.*?\*/", "", text[start + 16:end], flags=re.S)
    return [decl.split()[-1].lstrip("*") for decl in body.split(";") if decl.strip()]


_DPARAMS_TYPES = {"nthreads": ctypes.c_int16, "schunk": ctypes.c_void_p,
                  "postfilter": ctypes.c_void_p, "postparams": ctypes.c_void_p,
                  "typesize": ctypes.c_int32}


def _make_dparams_type() -> type | None:
    fields = _dparams_fields()
    if not fields or fields[0] != "nthreads" or any(f not in _DPARAMS_TYPES for f in fields):
        return None
    cls = type("DParams", (ctypes.Structure,),
               {"_fields_": [(f, _DPARAMS_TYPES[f]) for f in fields]})
    _lib.blosc2_create_dctx.argtypes = [cls]
    _lib.blosc2_create_dctx.restype = ctypes.c_void_p
    _lib.blosc2_free_ctx.argtypes = [ctypes.c_void_p]
    _lib.blosc2_free_ctx.restype = None
    _lib.blosc2_decompress_ctx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                           ctypes.c_void_p, ctypes.c_int32]
    _lib.blosc2_decompress_ctx.restype = ctypes.c_int
    _lib.blosc2_getitem_ctx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                        ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_int32]
    _lib.blosc2_getitem_ctx.restype = ctypes.c_int
    _lib.blosc2_set_maskout.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    _lib.blosc2_set_maskout.restype = ctypes.c_int
    return cls


try:
    _DParams = None if isinstance(_lib, PublicLibrary) else _make_dparams_type()
except AttributeError:  # no per-thread context functions: the library-wide calls remain
    _DParams = None
# Chunks made by python-blosc2's public API must decode through the ctypes calls above
# (whole, in part, on a context); otherwise the public API answers them instead.
if not isinstance(_lib, PublicLibrary) and (_problem := self_check(_lib, _DParams)):
    _lib, _DParams = fallback(_problem), None


# Runs of blocks from which one masked decode beats a getitem call per run.
_MASK_RUNS = 24


class Decoder:
    """A single-threaded decompression context of one's own.

    The library-wide functions share one context behind a lock, so threads
    calling them take turns; each thread holding its own ``Decoder`` decodes
    in parallel with the others.  Use as a context manager.
    """

    def __init__(self, nthreads: int = 1) -> None:
        self._ctx = None
        # decode_point's buffer and its ctypes view (a context serves one thread).
        self._point: tuple[bytearray, ctypes.Array[ctypes.c_char]] | None = None
        if _DParams is not None:
            self._ctx = _lib.blosc2_create_dctx(_DParams(nthreads=nthreads))

    @staticmethod
    def available() -> bool:
        return _DParams is not None

    def decompress_into(self, chunk: ChunkBytes, out: np.ndarray,
                        path: str | os.PathLike[str] | None = None) -> None:
        """As :func:`decompress_into`, on this context."""
        if self._ctx is None:
            decompress_into(chunk, out, path)
            return
        if not out.flags.c_contiguous:
            raise ValueError("output buffer must be C-contiguous")
        h = validate_chunk(chunk, out.nbytes, path)
        if h.nbytes == 0:
            return
        n = _lib.blosc2_decompress_ctx(self._ctx, _address(chunk), h.cbytes, out.ctypes.data,
                                       out.nbytes)
        if n != out.nbytes:
            raise decode_error(chunk, path, "decompress", n)

    def getitem_into(self, chunk: ChunkBytes, start: int, out: np.ndarray,
                     path: str | os.PathLike[str] | None = None, header: ChunkHeader | None = None) -> None:
        """As :func:`getitem_into`, on this context."""
        h = header or validate_chunk(chunk, None, path)
        if self._ctx is None or out.nbytes == 0 or \
                (not h.is_blosc1 and not blocks_independent(h, bytes(chunk[:BLOSC2_HEADER]))):
            getitem_into(chunk, start, out, path, h)
            return
        if start < 0 or start + out.nbytes > h.nbytes:
            raise ValueError(f"byte range [{start}, {start + out.nbytes}) outside a chunk of "
                             f"{h.nbytes} bytes")
        ts = h.typesize
        if start % ts or out.nbytes % ts:
            getitem_into(chunk, start, out, path, h)
            return
        src, dest = _address(chunk), out.ctypes.data
        for lo, hi in _getitem_parts(start, out.nbytes, h.blocksize):
            n = _lib.blosc2_getitem_ctx(self._ctx, src, h.cbytes, lo // ts, (hi - lo) // ts,
                                        dest + (lo - start), hi - lo)
            if n != hi - lo:
                raise decode_error(chunk, path, "decode items", n)

    def decompress_blocks(self, chunk: ChunkBytes, out: np.ndarray, blocks: np.ndarray,
                          path: str | os.PathLike[str] | None = None, header: ChunkHeader | None = None) -> None:
        """Decode only Blosc blocks ``blocks`` (sorted) of a chunk, each to its place in ``out``.

        ``out`` spans the whole decoded chunk; the bytes of other blocks are left
        as they were.  ``chunk`` need only hold the header, the block-offset table
        and the bytes of those blocks (see :func:`fetch_blocks`).  Each run of
        consecutive blocks is one ``getitem`` call: measured here, that costs a
        few microseconds where libblosc2's block mask costs about 50 per chunk; the
        mask wins when there are many separate runs (each block then costs ~2 us
        either way, each getitem call ~1 us more).
        """
        h = header if header is not None and header.nbytes == out.nbytes else \
            validate_chunk(chunk, out.nbytes, path)
        if h.nbytes == 0:
            return
        dest = out.reshape(-1).view(np.uint8)
        if self._ctx is None or h.typesize == 0 or h.blocksize % h.typesize or \
                (not h.is_blosc1 and not blocks_independent(h, bytes(chunk[:BLOSC2_HEADER]))):
            self.decompress_into(chunk, dest, path)
            return
        bs, ts = h.blocksize, h.typesize
        src, base = _address(chunk), dest.ctypes.data
        blocks = np.asarray(blocks, dtype=np.intp)
        if int(blocks[-1]) - int(blocks[0]) + 1 == len(blocks):
            cut = []  # one run
        else:
            cut = (np.flatnonzero(np.diff(blocks) != 1) + 1).tolist()
            if len(cut) >= _MASK_RUNS:
                nblocks = h.nblocks
                mask = np.ones(nblocks, dtype=np.bool_)  # True: leave the block out
                mask[blocks[blocks < nblocks]] = False
                _lib.blosc2_set_maskout(self._ctx, mask.ctypes.data, nblocks)
                n = _lib.blosc2_decompress_ctx(self._ctx, src, h.cbytes, base, dest.nbytes)
                if n < 0:
                    raise decode_error(chunk, path, "decompress", n)
                return
        for lo, hi in zip([0, *cut], [*cut, len(blocks)], strict=True):
            start = int(blocks[lo]) * bs
            stop = min((int(blocks[hi - 1]) + 1) * bs, h.nbytes)
            n = _lib.blosc2_getitem_ctx(self._ctx, src, h.cbytes, start // ts,
                                        (stop - start) // ts, base + start, stop - start)
            if n != stop - start:
                raise decode_error(chunk, path, "decode blocks", n)

    def decode_point(self, read_at: ReadAt, size: int, start: int, out: np.ndarray,
                     path: str | os.PathLike[str] | None = None) -> bool:
        """Decode the items at byte ``start`` of a stored chunk into ``out`` with one
        ranged read of the blocks holding them; False (nothing done) when the chunk or
        the request does not allow it (the caller then reads another way).

        The chunk's header and block table are parsed once and kept in the reader's
        ``memo`` (layouts cache readers per chunk), so a repeated read costs one
        ``pread`` of the blocks' compressed bytes and their decode.
        """
        memo = getattr(read_at, "memo", None)
        point: Any = memo.get("point") if memo is not None else None
        if point is None:
            index = chunk_index(read_at, size, path)
            h = index.header
            point = False
            if index.bstarts is not None and index.bends is not None and self._ctx is not None and h.typesize and \
                    not h.blocksize % h.typesize:
                point = (h, index.head[:h.header_size], index.bstarts.tolist(),
                         index.bends.tolist())
            if memo is not None:
                memo["point"] = point
        if not point:
            return False
        h, head, bstarts, bends = point
        bs, ts, nbytes = h.blocksize, h.typesize, out.nbytes
        first, local = divmod(start, bs)
        last = (start + nbytes - 1) // bs
        k = last - first + 1
        sub_nbytes = min(h.nbytes - first * bs, k * bs)
        # Declined, besides bad requests: a lone short last block (Blosc2 would read the
        # one-block chunk with another block size) and exactly one block's worth from
        # inside a block (which libblosc2's getitem mis-decodes; see _getitem_parts).
        if start < 0 or nbytes <= 0 or start + nbytes > h.nbytes or local % ts or \
                nbytes % ts or (sub_nbytes < bs and first) or (nbytes == bs and local) or \
                not out.flags.c_contiguous or \
                (k > 1 and bstarts[first + 1:last + 1] != bends[first:last]):
            return False  # the last test: blocks not stored back to back
        lo, hi = bstarts[first], bends[last]
        # A chunk of just these blocks, built in this context's buffer: the header with
        # its sizes, their offsets, their bytes read straight into place.
        hs = len(head)
        table = hs + 4 * k
        need = table + hi - lo
        if self._point is None or len(self._point[0]) < need:
            buf = bytearray(max(need, 1 << 16))
            self._point = (buf, (ctypes.c_char * len(buf)).from_buffer(buf))
        buf, src = self._point
        buf[:hs] = head
        HEADER_STRUCT.pack_into(buf, 0, h.version, h.versionlz, h.flags, ts, sub_nbytes, bs, need)
        struct.pack_into(f"<{k}i", buf, hs, *[table + s - lo for s in bstarts[first:last + 1]])
        reader = getattr(read_at, "read_into", None)
        if reader is not None:
            got = reader(lo, memoryview(buf)[table:need])
        else:
            data = read_at(lo, hi - lo)
            got = len(data)
            buf[table:table + got] = data
        if got != hi - lo:
            raise FormatError("Blosc chunk truncated inside a block", path)
        n = _lib.blosc2_getitem_ctx(self._ctx, src, need, local // ts, nbytes // ts,
                                    out.ctypes.data, nbytes)
        if n != nbytes:
            raise decode_error(bytes(buf[:BLOSC2_HEADER]), path, "decode items", n)
        return True

    def close(self) -> None:
        if self._ctx is not None:
            _lib.blosc2_free_ctx(self._ctx)
            self._ctx = None

    def __enter__(self) -> Decoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def set_library_threads(nthreads: int) -> None:
    """Set the thread count of every Blosc library carray drives.

    The public setting is ``carray.codecs.threads.set_nthreads``, which calls this.
    """
    _lib.blosc2_set_nthreads(nthreads)
    _blosc2.set_nthreads(nthreads)
    _blosc1.set_nthreads(nthreads)


# python-blosc then uses c-blosc's context API, so chunks can be (de)compressed on
# several threads at once (the Bloscpack reader and writer do).
_blosc1.set_releasegil(True)
# python-blosc2 builds a context per call; releasing the GIL around it lets writers
# compress several chunks at once, each on a single-threaded context.
_blosc2.set_releasegil(True)


class ChunkHeader(NamedTuple):
    """The fields every Blosc chunk header starts with (a tuple: parsed on every read)."""

    version: int
    versionlz: int
    flags: int
    typesize: int
    nbytes: int
    blocksize: int
    cbytes: int

    @property
    def is_blosc1(self) -> bool:
        return self.version <= 2

    @property
    def header_size(self) -> int:
        extended = (self.flags & 0x05) == 0x05
        return BLOSC2_HEADER if not self.is_blosc1 and extended else BLOSC1_HEADER

    @property
    def memcpyed(self) -> bool:
        return bool(self.flags & 0x02)

    @property
    def codec_name(self) -> str:
        return _FORMAT_NAMES.get(self.flags >> 5, f"unknown({self.flags >> 5})")

    @property
    def nblocks(self) -> int:
        if self.nbytes == 0:
            return 0
        return -(-self.nbytes // self.blocksize)


def read_header(buf: ChunkBytes, path: str | os.PathLike[str] | None = None, offset: int | None = None,
                size: int | None = None) -> ChunkHeader:
    """Parse and sanity-check the first bytes of a Blosc chunk of ``size`` bytes.

    ``size`` defaults to ``len(buf)``: pass it when ``buf`` holds only the header.

    Raises
    ------
    FormatError
        The buffer is too short, or a size field is negative or impossible.
    """
    if len(buf) < BLOSC1_HEADER:
        raise FormatError(
            f"Blosc chunk truncated: {len(buf)} bytes, a header needs {BLOSC1_HEADER}",
            path, offset)
    h = ChunkHeader(*HEADER_STRUCT.unpack(bytes(buf[:BLOSC1_HEADER])))
    # A chunk holding bytes is cut into blocks of blocksize > 0 bytes (every block
    # count and offset table is computed from it).
    if h.nbytes < 0 or h.cbytes < BLOSC1_HEADER or h.blocksize < 0 or \
            (h.nbytes > 0 and h.blocksize == 0):
        raise FormatError(
            f"Blosc header has impossible sizes (nbytes={h.nbytes}, blocksize={h.blocksize}, "
            f"cbytes={h.cbytes})", path, offset)
    size = len(buf) if size is None else size
    if h.cbytes > size:
        raise FormatError(
            f"Blosc chunk truncated: header claims {h.cbytes} bytes, only {size} present",
            path, offset)
    return h


def validate_chunk(buf: ChunkBytes, expected_nbytes: int | None = None, path: str | os.PathLike[str] | None = None,
                   offset: int | None = None) -> ChunkHeader:
    """Check a whole chunk before handing it to C code.

    Everything a decoder would trust is checked against the buffer: sizes, the
    version, the codec, and for Blosc1 chunks the block-start table.
    """
    h = read_header(buf, path, offset)
    if expected_nbytes is not None and h.nbytes != expected_nbytes:
        raise FormatError(
            f"Blosc chunk holds {h.nbytes} bytes uncompressed, expected {expected_nbytes}",
            path, offset)
    if h.nbytes == 0:
        return h
    if h.version == 0 or h.version > 5:
        raise FormatError(f"unknown Blosc format version {h.version}", path, offset)
    if h.typesize == 0 or h.blocksize <= 0:
        raise FormatError(
            f"Blosc header has typesize {h.typesize} and blocksize {h.blocksize}", path, offset)
    if h.is_blosc1:
        _validate_blosc1_body(buf, h, path, offset)
    return h


def _validate_blosc1_body(buf: ChunkBytes, h: ChunkHeader, path: str | os.PathLike[str] | None,
                          offset: int | None) -> None:
    if h.flags & 0x08:
        raise FormatError("Blosc1 header sets reserved flag bit 0x08", path, offset)
    if (h.flags & 0x05) == 0x05:
        raise FormatError("Blosc1 header sets both shuffle and bitshuffle", path, offset)
    if h.memcpyed:
        if h.cbytes != h.nbytes + BLOSC1_HEADER:
            raise FormatError(
                f"raw Blosc chunk should be {h.nbytes + BLOSC1_HEADER} bytes, header says "
                f"{h.cbytes}", path, offset)
        return
    fmt = h.flags >> 5
    if fmt == 2:
        raise CodecUnavailableError(
            f"{path or 'chunk'}: compressed with Snappy, which this Blosc build cannot decode")
    if fmt not in _FORMAT_NAMES:
        raise FormatError(f"unknown Blosc codec format {fmt}", path, offset)
    nblocks = h.nblocks
    table_end = BLOSC1_HEADER + 4 * nblocks
    if table_end > h.cbytes:
        raise FormatError(
            f"Blosc chunk of {h.cbytes} bytes cannot hold {nblocks} block offsets", path, offset)
    bstarts = np.frombuffer(buf, dtype="<i4", count=nblocks, offset=BLOSC1_HEADER)
    if nblocks and (bstarts.min() < table_end or bstarts.max() > h.cbytes - 4):
        raise FormatError("Blosc block offsets point outside the chunk", path, offset)


def _address(buf: ChunkBytes) -> int | bytes:
    """Something ctypes can pass as ``const void *`` without copying."""
    if isinstance(buf, bytes):
        return buf
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data


def decompress_into(chunk: ChunkBytes, out: np.ndarray, path: str | os.PathLike[str] | None = None) -> None:
    """Decode a whole chunk into the C-contiguous array ``out`` (no intermediate copy)."""
    if not out.flags.c_contiguous:
        raise ValueError("output buffer must be C-contiguous")
    h = validate_chunk(chunk, out.nbytes, path)
    if h.nbytes == 0:
        return
    n = _lib.blosc2_decompress(_address(chunk), h.cbytes, out.ctypes.data, out.nbytes)
    if n != out.nbytes:
        raise decode_error(chunk, path, "decompress", n)


def decompress(chunk: ChunkBytes, path: str | os.PathLike[str] | None = None) -> bytes:
    """Decode a whole chunk into new bytes."""
    h = validate_chunk(chunk, None, path)
    out = np.empty(h.nbytes, dtype=np.uint8)
    decompress_into(chunk, out, path)
    return out.tobytes()


def getitem_into(chunk: ChunkBytes, start: int, out: np.ndarray, path: str | os.PathLike[str] | None = None,
                 header: ChunkHeader | None = None) -> None:
    """Decode bytes ``[start, start + out.nbytes)`` of a chunk, touching only their blocks.

    ``start`` and ``out.nbytes`` must be multiples of the chunk's typesize.
    Callers that already validated the chunk pass its ``header``.
    """
    h = header or validate_chunk(chunk, None, path)
    if start < 0 or start + out.nbytes > h.nbytes:
        raise ValueError(f"byte range [{start}, {start + out.nbytes}) outside a chunk of "
                         f"{h.nbytes} bytes")
    if out.nbytes == 0:
        return
    if not h.is_blosc1 and not blocks_independent(h, bytes(chunk[:BLOSC2_HEADER])):
        # libblosc2's getitem mis-decodes DELTA-filtered blocks other than the first:
        # decode the whole chunk instead.
        whole = np.empty(h.nbytes, dtype=np.uint8)
        decompress_into(chunk, whole, path)
        out.reshape(-1).view(np.uint8)[:] = whole[start:start + out.nbytes]
        return
    ts = h.typesize
    src, dest = _address(chunk), out.ctypes.data
    for lo, hi in _getitem_parts(start, out.nbytes, h.blocksize):
        n = _lib.blosc2_getitem(src, h.cbytes, lo // ts, (hi - lo) // ts, dest + (lo - start),
                                hi - lo)
        if n != hi - lo:
            raise decode_error(chunk, path, "decode items", n)


def _getitem_parts(start: int, nbytes: int, blocksize: int) -> list[tuple[int, int]]:
    """Byte ranges to ask ``blosc2_getitem`` for, so that together they give ``nbytes``
    from ``start``.

    libblosc2 (seen with 2.x in python-blosc2 4.14) returns the wrong block when
    asked for exactly one block's worth of bytes starting inside a block; such a
    request is split at the block boundary.
    """
    if nbytes == blocksize and blocksize and start % blocksize:
        cut = (start // blocksize + 1) * blocksize
        return [(start, cut), (cut, start + nbytes)]
    return [(start, start + nbytes)]


def _read_head(read_at: ReadAt, size: int, path: str | os.PathLike[str] | None) -> tuple[ChunkHeader, bytes]:
    """The header of a stored chunk, and the first bytes read with it."""
    head = read_at(0, min(size, HEAD_READ))
    return read_header(head, path, size=size), head


class _ChunkIndex(NamedTuple):
    """What ranged reads need from a stored chunk's start: its header, the bytes read
    with it, its block-offset table and where each block's bytes end (both None
    when blocks cannot be read on their own: DELTA, dictionaries, special values,
    raw chunks or no data)."""

    header: ChunkHeader
    head: bytes
    bstarts: np.ndarray | None
    bends: np.ndarray | None


def chunk_index(read_at: ReadAt, size: int, path: str | os.PathLike[str] | None) -> _ChunkIndex:
    """The chunk's :class:`_ChunkIndex`, kept in the reader's ``memo`` when it has one
    (layouts that cache chunk heads share it between reads of the same chunk)."""
    memo = getattr(read_at, "memo", None)
    if memo is not None:
        known = memo.get("index")
        if isinstance(known, _ChunkIndex):
            return known
    h, head = _read_head(read_at, size, path)
    bstarts = bends = None
    if blocks_independent(h, head) and not h.memcpyed and h.nbytes:
        bstarts = _block_starts(read_at, h, path, head)
        bends = _block_ends(bstarts, bstarts, h.cbytes)
    index = _ChunkIndex(h, head, bstarts, bends)
    if memo is not None:
        memo["index"] = index
    return index


def _block_starts(read_at: ReadAt, h: ChunkHeader, path: str | os.PathLike[str] | None,
                  head: bytes = b"") -> np.ndarray:
    """The block-offset table of a chunk read through ``read_at`` (or found in the
    ``head`` bytes already read), checked."""
    hs, nblocks = h.header_size, h.nblocks
    table_end = hs + 4 * nblocks
    table = head[hs:table_end] if len(head) >= table_end else read_at(hs, 4 * nblocks)
    if len(table) != 4 * nblocks or table_end > h.cbytes:
        raise FormatError(f"Blosc chunk of {h.cbytes} bytes cannot hold {nblocks} block "
                          "offsets", path)
    bstarts = np.frombuffer(table, dtype="<i4")
    if bstarts.min() < table_end or bstarts.max() > h.cbytes - 4:
        raise FormatError("Blosc block offsets point outside the chunk", path)
    return bstarts


# Blosc2 filter code whose blocks depend on the chunk's first block.
_DELTA = 3


def blocks_independent(h: ChunkHeader, head: bytes) -> bool:
    """Whether any block of this chunk decodes on its own (so a few can be fetched).

    Blosc1 blocks always do.  A Blosc2 chunk qualifies when its extended header
    flags nothing special (no dictionary, special values or variable-length
    blocks: byte 31 is 0) and no DELTA filter ties blocks to the first one.
    """
    if h.is_blosc1:
        return True
    if h.header_size != BLOSC2_HEADER or len(head) < BLOSC2_HEADER:
        return False
    return head[31] == 0 and _DELTA not in head[16:22]

#: Bytes read first from a stored chunk: its header and, usually, its block table.
HEAD_READ = 4096


def _block_ends(bstarts: np.ndarray, starts: np.ndarray, cbytes: int) -> np.ndarray:
    """Where each block starting at ``starts`` ends: where the next stored one begins
    (threads may store blocks out of order)."""
    if len(bstarts) < 2 or (bstarts[1:] > bstarts[:-1]).all():
        stored = np.append(bstarts, cbytes).astype(np.int64)
    else:
        stored = np.append(np.sort(bstarts), cbytes).astype(np.int64)
    return stored[np.searchsorted(stored, starts, side="right")]


def blosc_typesize(dtype: np.dtype) -> int:
    """The typesize Blosc is told for a dtype, as bcolz chooses it."""
    if dtype.kind == "S":
        return 1
    if dtype.kind == "U":
        return 4
    size = dtype.base.itemsize
    return size if 0 < size <= MAX_TYPESIZE else 1


# Blocks are what a partial read decodes: small enough that reading one value
# is cheap, large enough that codecs keep their ratio and speed.  64 KiB measured
# best overall (benchmarks/bench_blocksize.py, 1-d float64 on disk): against 32 KiB,
# lz4 compresses 3% better and reads whole arrays 25% faster for 15% slower point
# reads; larger blocks gain 2-6% more ratio for 1.5-4x slower point reads.
_BLOCK = 64 * 1024


def default_blocksize(cname: str) -> int:
    """Bytes per Blosc block (the same for every codec)."""
    return _BLOCK


def compress1(data: np.ndarray, typesize: int, cparams: CParams) -> bytes:
    """Compress to a Blosc1 (format version 2) chunk that c-blosc 1.x can read.

    Raises
    ------
    CodecError
        ``cparams.filters`` is more than one shuffle: a Blosc1 chunk has no room
        for a filter pipeline.
    """
    check_blosc1_filters(cparams)
    data = np.ascontiguousarray(data)
    if data.nbytes > MAX_BUFFERSIZE:
        raise CodecError(f"a chunk of {data.nbytes} bytes exceeds Blosc's 2 GiB limit")
    if not data.nbytes:
        return bytes(_blosc1.compress(b"", typesize, cparams.clevel, int(cparams.shuffle or 0),
                                      cparams.cname))
    blocksize = default_blocksize(cparams.cname)
    if cparams.cname != "zstd":
        # c-blosc 1.x multiplies a forced blocksize by the typesize when it splits
        # blocks into byte streams (every codec but zstd), with a 64 KiB floor.
        blocksize = max(blocksize // max(typesize, 1), 1)
    _blosc1.set_blocksize(blocksize)
    try:
        return bytes(_blosc1.compress_ptr(data.ctypes.data, data.nbytes // typesize, typesize,
                                          cparams.clevel, int(cparams.shuffle or 0),
                                          cparams.cname))
    finally:
        _blosc1.set_blocksize(0)


def compress2(data: np.ndarray, typesize: int, cparams: CParams,
              blocksize: int | None = None, nthreads: int | None = None) -> bytes:
    """Compress to a Blosc2 chunk (faster, and carries the filter pipeline in its header).

    ``nthreads`` is the threads Blosc uses for this chunk (default: the process-wide
    setting); writers compressing several chunks at once pass 1.

    Raises
    ------
    CodecError
        The chunk is too large, or libblosc2 refuses the filters for this data
        (e.g. ``trunc_prec`` on items that are not 4- or 8-byte floats).
    """
    data = np.ascontiguousarray(data)
    if data.nbytes > MAX_BUFFERSIZE:
        raise CodecError(f"a chunk of {data.nbytes} bytes exceeds Blosc's 2 GiB limit")
    if blocksize is None:
        blocksize = default_blocksize(cparams.cname)
    filters, filters_meta = blosc2_filters(cparams)
    if len(filters) > 2:
        # libblosc2 (3.3) uses the source as scratch space once a pipeline passes
        # through more than two buffers: give it a copy, never the caller's array.
        data = data.copy()
    try:
        return bytes(_blosc2.compress2(
            data, typesize=typesize, clevel=cparams.clevel,
            codec=_BLOSC2_CODECS[cparams.cname], filters=filters, filters_meta=filters_meta,
            blocksize=blocksize, nthreads=nthreads or _blosc2.nthreads))
    except (RuntimeError, ValueError) as exc:
        raise CodecError(f"Blosc2 cannot compress {data.nbytes} bytes of typesize {typesize} "
                         f"with filters {list(cparams.filters or ())}: {exc}") from None
