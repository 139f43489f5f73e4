"""Blosc chunks: decompress into a caller's buffer, decode single blocks (compressing:
:mod:`carray.codecs.compress`, re-exported here).

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

import contextlib
import ctypes
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import blosc as _blosc1
import blosc2 as _blosc2
import numpy as np

from carray.codecs._libcheck import (
    PublicLibrary,
    dparams_type,
    fallback,
    load_library,
    self_check,
)

# The encoding half lives in carray.codecs.compress; callers find it here too.
from carray.codecs.compress import MAX_BUFFERSIZE as MAX_BUFFERSIZE
from carray.codecs.compress import MAX_TYPESIZE as MAX_TYPESIZE
from carray.codecs.compress import blosc_typesize as blosc_typesize
from carray.codecs.compress import compress1 as compress1
from carray.codecs.compress import compress2 as compress2
from carray.codecs.compress import default_blocksize as default_blocksize
from carray.codecs.pipeline import decode_error
from carray.errors import CodecUnavailableError, FormatError

BLOSC1_HEADER = 16
BLOSC2_HEADER = 32

#: A stored chunk: any buffer holding its bytes.
ChunkBytes = bytes | bytearray | memoryview | np.ndarray
#: ``read_at(offset, length)``: up to ``length`` bytes of a stored chunk from ``offset``.
ReadAt = Callable[[int, int], bytes]

_FORMAT_NAMES = {0: "blosclz", 1: "lz4", 2: "snappy", 3: "zlib", 4: "zstd"}
HEADER_STRUCT = struct.Struct("<BBBBiii")



try:
    _lib: Any = load_library()
except (OSError, AttributeError, ImportError) as _exc:  # a wheel laid out differently
    _lib = fallback(f"cannot load it: {_exc}")
try:
    _DParams = None if isinstance(_lib, PublicLibrary) else dparams_type(_lib)
except AttributeError:  # no per-thread context functions: the library-wide calls remain
    _DParams = None
# Chunks made by python-blosc2's public API must decode through the ctypes calls above
# (whole, in part, on a context); otherwise the public API answers them instead.
if not isinstance(_lib, PublicLibrary) and (_problem := self_check(_lib, _DParams)):
    _lib, _DParams = fallback(_problem), None


# Runs of blocks from which one masked decode beats a getitem call per run.
_MASK_RUNS = 24
# Bytes of other blocks a ranged read of some blocks may read through.
_SPAN_SLACK = 16 * 1024
_OFFSET = struct.Struct("<i")


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
        # decode_runs' and fetch_runs' output buffer and its address.
        self._runs_buf: tuple[np.ndarray, int] | None = None
        if _DParams is not None:
            with _env_without("BLOSC_NTHREADS"):  # it would override nthreads
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

    def item_reader(self, chunk: ChunkBytes, h: ChunkHeader, itemsize: int
                    ) -> Callable[[int, int, int], int] | None:
        """A lean ``read(start, count, dest)`` of ``count`` items of ``itemsize`` bytes
        from item ``start`` of a validated chunk into the address ``dest``, returning the
        bytes written (negative: a libblosc2 error code); for loops that decode a chunk
        a piece at a time on one thread.  None when this context cannot (then use
        :meth:`getitem_into`).  ``chunk`` must stay alive while the reader is used."""
        ts = h.typesize
        if self._ctx is None or not ts or itemsize % ts or \
                (not h.is_blosc1 and not blocks_independent(h, bytes(chunk[:BLOSC2_HEADER]))):
            return None
        per, src, cbytes, ctx = itemsize // ts, _address(chunk), h.cbytes, self._ctx
        getitem = _lib.blosc2_getitem_ctx

        def read(start: int, count: int, dest: int) -> int:
            return int(getitem(ctx, src, cbytes, start * per, count * per, dest,
                               count * itemsize))

        return read

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
        """Decode the items at byte ``start`` of a stored chunk into ``out`` (see
        :meth:`point_bytes`); False (nothing done) when the chunk or the request does
        not allow it (the caller then reads another way)."""
        got = self.point_bytes(read_at, size, start, out.nbytes, path) \
            if out.flags.c_contiguous else None
        if got is None:
            return False
        out.reshape(-1).view(np.uint8)[:] = got
        return True

    def point_bytes(self, read_at: ReadAt, size: int, start: int, nbytes: int,
                    path: str | os.PathLike[str] | None = None) -> np.ndarray | None:
        """Bytes ``[start, start + nbytes)`` of a stored chunk, decoded with one ranged
        read of the blocks holding them, as a view of this context's buffer (valid until
        its next call); None (nothing done) when the chunk or the request does not
        allow it.

        The chunk's header and block table are parsed once and kept in the reader's
        ``memo`` (layouts cache readers per chunk), so a repeated read costs one
        ``pread`` of the blocks' compressed bytes and their decode.
        """
        point = self._point_index(read_at, size, path)
        if not point:
            return None
        h = point[0]
        bs, ts = h.blocksize, h.typesize
        first, local = divmod(start, bs)
        last = (start + nbytes - 1) // bs
        # Declined, besides bad requests: a lone short last block (Blosc2 would read the
        # one-block chunk with another block size) and exactly one block's worth from
        # inside a block (which libblosc2's getitem mis-decodes; see _getitem_parts).
        if start < 0 or nbytes <= 0 or start + nbytes > h.nbytes or local % ts or \
                nbytes % ts or (h.nbytes - first * bs < bs and first) or \
                (nbytes == bs and local):
            return None
        cbytes = self._fetch_span(read_at, point, first, last, path)
        if not cbytes:
            return None  # the blocks are scattered over the chunk
        assert self._point is not None  # made by _fetch_span
        buf, src = self._point
        # Into this context's buffer, whose address is known (asking numpy for an
        # array's address costs more than the copy out of it).
        got, dest = self._box(nbytes)
        n = _lib.blosc2_getitem_ctx(self._ctx, src, cbytes, local // ts, nbytes // ts, dest,
                                    nbytes)
        if n != nbytes:
            raise decode_error(bytes(buf[:BLOSC2_HEADER]), path, "decode items", n)
        return got

    def _point_index(self, read_at: ReadAt, size: int,
                     path: str | os.PathLike[str] | None) -> Any:
        """``(header, header bytes, block starts, block ends)`` of a stored chunk whose
        blocks this context can decode one by one (False: it cannot), parsed once and
        kept in the reader's ``memo`` where it has one."""
        memo = getattr(read_at, "memo", None)
        point: Any = memo.get("point") if memo is not None else None
        if point is None:
            index = chunk_index(read_at, size, path)
            h = index.header
            point = False
            if index.bstarts is not None and index.bends is not None and \
                    self._ctx is not None and h.typesize and not h.blocksize % h.typesize:
                point = (h, index.head[:h.header_size], index.bstarts.tolist(),
                         index.bends.tolist())
            if memo is not None:
                memo["point"] = point
        return point

    def _fetch_span(self, read_at: ReadAt, point: Any, first: int, last: int,
                    path: str | os.PathLike[str] | None) -> int:
        """Blocks ``first..last`` of a stored chunk (``point``: its :meth:`_point_index`)
        as a chunk of their own, built in this context's buffer: the header with its
        sizes, their offsets, then one read of the stored bytes spanning them, straight
        into place.  Returns the size of that chunk; 0, with nothing read, when other
        blocks fill too much of the span (threads may store blocks in any order)."""
        h, head, bstarts, bends = point
        starts = bstarts[first:last + 1]
        lo, hi = starts[0], bends[last]
        if first != last and starts[1:] != bends[first:last]:  # not stored in order
            ends = bends[first:last + 1]
            lo, hi = min(starts), max(ends)
            if hi - lo > 2 * (sum(ends) - sum(starts)) + _SPAN_SLACK:
                return 0
        k, bs, hs = last - first + 1, h.blocksize, len(head)
        table = hs + 4 * k
        need = table + hi - lo
        if self._point is None or len(self._point[0]) < need:
            buf = bytearray(max(need, 1 << 16))
            self._point = (buf, (ctypes.c_char * len(buf)).from_buffer(buf))
        buf = self._point[0]
        buf[:hs] = head
        HEADER_STRUCT.pack_into(buf, 0, h.version, h.versionlz, h.flags, h.typesize,
                                min(h.nbytes - first * bs, k * bs), bs, need)
        if k == 1:
            _OFFSET.pack_into(buf, hs, table)
        else:
            struct.pack_into(f"<{k}i", buf, hs, *[table + x - lo for x in starts])
        reader = getattr(read_at, "read_into", None)
        if reader is not None:
            got = reader(lo, memoryview(buf)[table:need])
        else:
            data = read_at(lo, hi - lo)
            got = len(data)
            buf[table:table + got] = data
        if got != hi - lo:
            raise FormatError("Blosc chunk truncated inside a block", path)
        return int(need)

    def decode_runs(self, chunk: bytes | bytearray | memoryview, starts: Sequence[int], count: int,
                    expect: tuple[int, int], path: str | os.PathLike[str] | None = None
                    ) -> np.ndarray | None:
        """Decode runs of ``count`` whole blocks, beginning at blocks ``starts``
        (ascending), of a Blosc2 chunk held in memory, one after another into this
        context's buffer: one ``getitem`` call per run.

        Returns a byte view of what was decoded (valid until this context's next
        call); None, with nothing done, when the chunk's blocks do not decode on their
        own or its ``(nbytes, blocksize)`` is not ``expect``: the caller then takes
        the general path, which checks the chunk in full.
        """
        if len(chunk) < BLOSC2_HEADER or self._ctx is None:
            return None
        version, _, flags, ts, nbytes, bs, cbytes = HEADER_STRUCT.unpack_from(chunk)
        # The checks validate_chunk and blocks_independent make, for this one kind.
        if (nbytes, bs) != expect or not 3 <= version <= 5 or (flags & 0x05) != 0x05 or \
                not 0 < cbytes <= len(chunk) or ts <= 0 or bs % ts or nbytes % bs or \
                chunk[31] or _DELTA in chunk[16:22]:
            return None
        if starts[0] < 0 or (starts[-1] + count) * bs > nbytes:
            raise ValueError(f"blocks {starts[0]}..{starts[-1] + count - 1} outside a chunk "
                             f"of {nbytes // bs}")
        out, dest = self._box(len(starts) * count * bs)
        failed = self._getitem_runs(_address(chunk), cbytes, bs, ts, starts, 0, count, dest)
        if failed:
            raise decode_error(chunk, path, "decode blocks", failed)
        return out

    def _box(self, nbytes: int) -> tuple[np.ndarray, int]:
        """This context's buffer of decoded runs, ``nbytes`` long, and its address."""
        if self._runs_buf is None or len(self._runs_buf[0]) < nbytes:
            buf = np.empty(max(nbytes, 1 << 16), dtype=np.uint8)
            self._runs_buf = (buf, buf.ctypes.data)
        buf, address = self._runs_buf
        return buf[:nbytes], address

    def _getitem_runs(self, src: Any, cbytes: int, bs: int, ts: int, starts: Sequence[int],
                      first: int, count: int, dest: int) -> int:
        """One ``getitem`` per run of blocks (from ``starts``, less ``first``) of the
        chunk at ``src``, one after another from address ``dest``; returns 0, or the
        error code of the first that failed."""
        step = count * bs
        for r, b in enumerate(starts):
            n = _lib.blosc2_getitem_ctx(self._ctx, src, cbytes, (b - first) * bs // ts,
                                        step // ts, dest + r * step, step)
            if n != step:
                return n if n < 0 else -1
        return 0

    def fetch_runs(self, read_at: ReadAt, size: int, starts: Sequence[int], count: int,
                   expect: tuple[int, int], path: str | os.PathLike[str] | None = None
                   ) -> np.ndarray | None:
        """As :meth:`decode_runs`, for a stored chunk read through ``read_at``: one
        ranged read spanning the runs' blocks (kept in this context's buffer as a chunk
        of its own), then one ``getitem`` call per run.  None, with nothing done, when
        the chunk does not allow it (blocks not independent, not whole, or scattered;
        its ``(nbytes, blocksize)`` not ``expect``)."""
        point = self._point_index(read_at, size, path)
        if not point:
            return None
        h = point[0]
        bs = h.blocksize
        first, last = starts[0], starts[-1] + count - 1
        if h.nbytes % bs or expect != (h.nbytes, bs) or first < 0 or last >= h.nblocks:
            return None
        cbytes = self._fetch_span(read_at, point, first, last, path)
        if not cbytes:
            return None
        assert self._point is not None  # made by _fetch_span
        buf, src = self._point
        out, dest = self._box(len(starts) * count * bs)
        # getitem, even for one run (the chunk built): it always decodes on the calling
        # thread, where a context's decompress follows BLOSC_NTHREADS when it is set.
        failed = self._getitem_runs(src, cbytes, bs, h.typesize, starts, first, count, dest)
        if failed:
            raise decode_error(bytes(buf[:BLOSC2_HEADER]), path, "decode blocks", failed)
        return out

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


_ENV_LOCK = threading.Lock()


@contextlib.contextmanager
def _env_without(name: str) -> Iterator[None]:
    """``name`` out of the process environment meanwhile: libblosc2 reads
    ``BLOSC_NTHREADS`` when it makes a context and lets it override the threads asked
    for, which would give every per-thread context threads of its own."""
    with _ENV_LOCK:
        saved = os.environ.pop(name, None)
        try:
            yield
        finally:
            if saved is not None:
                os.environ[name] = saved


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
