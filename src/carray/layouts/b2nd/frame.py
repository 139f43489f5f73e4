"""Blosc2 frames: python-blosc2 ``.b2nd`` / ``.b2frame`` files and sparse directories,
and caterva 0.7 frames, read and written without python-blosc2's frame code.

Format facts relied on (docs/formats/b2frame.md, docs/formats/blosc2-chunk.md);
byte-level details are in :mod:`._b2frame_header`, chunk checks in
:mod:`._b2frame_chunk`, index math in :mod:`carray.chunks.geometry`; region reads go
through carray's own chunk reader (:class:`carray.chunks.io.ChunkIO`):

* A contiguous frame is ``header | chunk 0 | chunk 1 | ... | offsets chunk |
  trailer``. Chunk *i* starts at ``header_len + offset[i]``; the offsets chunk
  (a Blosc2 chunk of int64 LE offsets) at ``header_len + cbytes``.
* A sparse frame is a directory: ``chunks.b2frame`` holds header, offsets
  chunk (right after the header) and trailer; a non-negative offset is the
  number *n* of the file ``%08X.chunk`` holding that chunk.
* Negative offsets are special chunks that take no space (zeros, NaN,
  uninitialised). ``nbytes == 0`` means no chunks and no offsets chunk.
* An N-d array is described by the ``b2nd`` metalayer (shape, chunkshape,
  blockshape, dtype string) or the older ``caterva`` one (no dtype). Every
  stored chunk holds ``chunkshape`` rounded up to whole blocks, blocks in C
  order, each block C-ordered; the frame's chunksize is that padded size
  times the item size and its blocksize one block.
* Plain SChunks (no N-d layer) are byte streams cut into ``chunksize`` pieces,
  the last one possibly short.
* python-blosc2 msgpack-packs user metalayer and vlmeta values; vlmeta values
  are then stored as Blosc2 chunks in the trailer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
from numpy.typing import DTypeLike

from carray.attrs import pack as attrpack
from carray.chunks import geometry as geo
from carray.chunks.grid import NDGrid, plan
from carray.chunks.io import ChunkIO, ChunkReader
from carray.chunks.keys import orthogonal_key
from carray.chunks.shapes import default_chunks_blocks
from carray.codecs.blosc import BLOSC2_HEADER, read_header
from carray.codecs.pages import ChunkDigests
from carray.core.params import CParams
from carray.errors import ContainerNotFoundError, FormatError, UnsafeDataError
from carray.layouts.b2nd import chunk as _chunk
from carray.layouts.b2nd.digests import FrameDigests, is_marked, read_record
from carray.layouts.b2nd.header import (
    SPARSE_INDEX,
    TRAILER_TAIL,
    FrameHeader,
    locate_trailer,
    parse_fixed_header,
    parse_metalayers,
    parse_nd_meta,
    trailer_entries,
)
from carray.layouts.b2nd.write import (
    _copy_dtype,
    write_array,
)
from carray.stores import Handle, Location, Store, resolve

__all__ = ["Frame", "decode_vlmeta", "default_chunks_blocks",
           "read_array", "read_frame", "read_region", "write_array"]

# The first read of a frame takes its header whole (unless it is larger than this).
_FIRST_READ = 4096
# Parses of a frame a writer keeps changing before giving up (see Frame._parse_settled).
_PARSE_ATTEMPTS = 5


def _unpack(raw: bytes) -> Any:
    """A msgpack value, or the raw bytes when they are not exactly one msgpack object."""
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except (ValueError, msgpack.UnpackException, TypeError, RecursionError):
        return raw


def decode_vlmeta(raw: bytes, where: str) -> Any:
    """One vlmeta value as python-blosc2 stores it: a Blosc2 chunk of a msgpack value
    (:mod:`carray.attrs.pack`).

    Checked before decoding (``where`` names the file and entry in errors);
    values that are not msgpack come back as raw bytes.
    """
    h, _ = _chunk.check_chunk(raw, where, None)
    data = np.empty(h.nbytes, np.uint8)
    _chunk.decode_into(raw, data, where, None)
    try:
        return attrpack.unpack(data.tobytes())
    except UnsafeDataError as exc:
        raise UnsafeDataError(f"{where}: {exc}") from None
    except ValueError as exc:
        raise FormatError(f"vlmeta value does not decode: {exc}"[:400], where) from None


class Frame:
    """An open Blosc2 frame (contiguous file or sparse directory), read-only.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.b2nd`` / ``.b2frame`` / ``.caterva`` file, or a sparse frame directory.
    dtype : dtype-like, optional
        Item type for frames that store none (caterva, plain SChunks); must have
        the frame's item size. Defaults to an unsigned int of that size, or raw
        void bytes for other sizes.
    verify : bool
        Check carray's digests (see ``digests``).

    Attributes
    ----------
    kind : str
        ``"b2nd"``, ``"caterva"`` or ``"schunk"`` (no N-d metalayer).
    shape, chunkshape, blockshape : tuple of int
        Array geometry. A plain SChunk reads as a 1-d array whose chunks are
        ``chunksize // itemsize`` long (the last one may be short).
    dtype : numpy.dtype
    nchunks : int
    meta : dict
        Metalayers, msgpack-decoded where they are msgpack (raw bytes otherwise).
    meta_raw : dict of bytes
    vlmeta : dict
        Variable-length metadata (user attributes), decoded on first access.
    vlmeta_raw : dict of bytes
        The same, as stored: one Blosc2 chunk per entry.
    index_start, trailer_start : int
        Where the offsets chunk and the trailer begin in the (index) file.
    header : FrameHeader
        The decoded header fields (typesize, chunksize, codec, ...).
    header_bytes : bytes
        The header as read (metalayers included).
    digests : FrameDigests or None
        The digests carray recorded when it last committed the frame, once checked
        against it (:mod:`._b2frame_digests`); None for frames another program wrote
        or changed since, or with ``verify=False``.  Chunk reads check them.
    record_len : int
        The bytes of carray's record after the frame (0: none that applies).
    """

    def __init__(self, path: Location, *, dtype: DTypeLike | None = None,
                 storage_options: dict[str, Any] | None = None, verify: bool = True) -> None:
        self.store: Store
        self.store, self._key = resolve(path, storage_options)
        store = self.store
        self.path = store.url(self._key)
        self.contiguous = not store.isdir(self._key)
        self._verify = verify
        index = self._key if self.contiguous else store.join(self._key, SPARSE_INDEX)
        try:
            self._fd: Handle | None = store.open(index)
        except FileNotFoundError:
            what = "no such file" if self.contiguous else f"a directory without {SPARSE_INDEX}"
            raise ContainerNotFoundError(f"{self.path}: {what}") from None
        try:
            self._parse_settled(index, dtype)
        except BaseException:
            self.close()
            raise
        if not self.contiguous:
            self.close()  # everything needed from chunks.b2frame is in memory now

    # -- parsing -------------------------------------------------------------------------

    def _parse_settled(self, index: str, dtype: DTypeLike | None) -> None:
        """Parse the frame as one writer's commit left it.

        A writer (carray's, in another process) may commit while this reads: it appends
        what its header will point at and rewrites the header last, in place, or renames
        a rewritten file over the frame.  Reads that overlap that can see a header torn
        between two commits, or one commit's header and another's sizes, so the header
        is read again at the end: if it changed, the file is opened again and parsed
        again (a few times at most), so what is parsed is one commit, never parts of two.
        """
        url = self.store.url(index)
        for attempt in range(_PARSE_ATTEMPTS):
            fd = self._fd
            if fd is None:
                raise ValueError(f"{self.path}: the frame file is closed")
            head = fd.pread(_FIRST_READ, 0)
            try:
                rest = self._parse(fd, head, url)
                self._setup_geometry(dtype)
                # Last: a frame that is not what its digest says gets the message of
                # the first structural check that fails, if one does.
                self.digests = self._read_digests(fd, rest)
            except FormatError:
                # The handle's size is the file's at open: a commit since may have grown
                # it under a header read after (or renamed another file into place).
                if attempt + 1 == _PARSE_ATTEMPTS or (fd.pread(len(head), 0) == head
                                                      and self._size_now(index) == fd.size):
                    raise
            else:
                if fd.pread(len(self.header_bytes), 0) == self.header_bytes:
                    return
                if attempt + 1 == _PARSE_ATTEMPTS:
                    raise FormatError(f"the frame changed every time it was read "
                                      f"({_PARSE_ATTEMPTS} times)", url, 0)
            fd.close()
            self._fd = self.store.open(index)

    def _size_now(self, index: str) -> int:
        try:
            return self.store.size(index)
        except FileNotFoundError:
            return -1

    def _parse(self, fd: Handle, head: bytes, index: str) -> bytes:
        """Parse the frame whose first bytes are ``head`` (see :meth:`_parse_settled`);
        returns the bytes from the offsets chunk to the end."""
        hdr = parse_fixed_header(head, index, fd.size)
        want_type = 0 if self.contiguous else 1
        if hdr.frame_type != want_type:
            kinds = ("contiguous", "sparse")
            raise FormatError(f"frame says it is {kinds[hdr.frame_type % 2]} but is stored "
                              f"as a {'file' if self.contiguous else 'directory'}", index, 26)
        header = head[:hdr.header_len] + fd.pread(hdr.header_len - len(head), len(head)) \
            if hdr.header_len > len(head) else head[:hdr.header_len]
        if len(header) != hdr.header_len:
            raise FormatError("frame header truncated", index, len(header))
        parse_metalayers(header, hdr, index)
        index_start = hdr.header_len + (hdr.cbytes if self.contiguous else 0)
        if index_start + TRAILER_TAIL > hdr.frame_len:
            raise FormatError(f"chunks end at {index_start}, past the trailer of a frame of "
                              f"{hdr.frame_len} bytes", index, 38)
        # The offsets chunk and the trailer, in one read.
        rest = fd.pread(hdr.frame_len - index_start, index_start)
        if len(rest) != hdr.frame_len - index_start:
            raise FormatError("frame truncated before its trailer", index, index_start)
        trailer_len = locate_trailer(rest[-TRAILER_TAIL:], hdr.frame_len, hdr.header_len,
                                     index)
        trailer_start = hdr.frame_len - trailer_len
        if index_start > trailer_start:
            raise FormatError(f"chunks end at {index_start}, after the trailer starts at "
                              f"{trailer_start}", index, 38)
        entries = trailer_entries(rest[trailer_start - index_start:], trailer_start, index)
        self.vlmeta_raw: dict[str, bytes] = {n: v for n, _, v in entries}
        self.index_start, self.trailer_start = index_start, trailer_start
        self.header: FrameHeader = hdr
        self.header_bytes = bytes(header)
        self.meta_raw: dict[str, bytes] = dict(hdr.meta)
        self.meta: dict[str, Any] = {k: _unpack(v) for k, v in hdr.meta.items()}
        self._vlmeta: dict[str, Any] | None = None
        self._index = index
        self.nchunks = 0
        self._offsets: _chunk.Offsets | None = None
        if hdr.nbytes:
            if index_start + BLOSC2_HEADER > trailer_start:
                raise FormatError("no room for the chunk offsets before the trailer", index,
                                  index_start)
            expect = -(-hdr.nbytes // hdr.chunksize) if hdr.chunksize else None
            self._offsets = _chunk.Offsets(rest[:trailer_start - index_start], expect, index,
                                           index_start)
            self.nchunks = len(self._offsets)
        return rest

    def _read_digests(self, fd: Handle, rest: bytes) -> FrameDigests | None:
        """The digests carray recorded after this frame, when they apply (see
        :mod:`._b2frame_digests`): None for frames another program wrote or changed.
        Sets :attr:`record_len`, the bytes of the record (0: none applies)."""
        self.record_len = 0
        if not is_marked(self.header_bytes):
            return None
        frame_len = self.header.frame_len
        try:
            record = read_record(fd.pread, frame_len, fd.size, self._index)
        except FormatError:
            if self._verify:
                raise
            return None
        self.record_len = len(record)
        if not self._verify:
            return None
        return FrameDigests.read(record, self.header_bytes, rest, self.offsets_array(),
                                 self._index, frame_len)

    def _setup_geometry(self, dtype: DTypeLike | None) -> None:
        hdr, path = self.header, self._index
        ts = hdr.typesize
        layer = "b2nd" if "b2nd" in self.meta_raw else (
            "caterva" if "caterva" in self.meta_raw else None)
        if dtype is not None:
            dtype = np.dtype(dtype)
            if dtype.itemsize != ts:
                raise ValueError(f"dtype {dtype} has {dtype.itemsize}-byte items, the frame "
                                 f"{ts}-byte ones")
        if layer is None:
            self.kind = "schunk"
            n = hdr.nbytes
            if dtype is None:
                dtype = _copy_dtype(ts) if n % ts == 0 and hdr.chunksize % ts == 0 else None
            if dtype is None:
                dtype, ts = np.dtype(np.uint8), 1
            self.dtype = dtype
            self.shape: tuple[int, ...] = (n // ts,)
            self.chunkshape: tuple[int, ...] = ((hdr.chunksize // ts) or self.shape[0],)
            self.blockshape: tuple[int, ...] = self.chunkshape
            return
        self.kind = layer
        offset = hdr.meta_offsets[layer]
        nd = parse_nd_meta(self.meta_raw[layer], layer, path, offset)
        max_dim = geo.B2ND_MAX_DIM if layer == "b2nd" else geo.CATERVA_MAX_DIM
        reason = geo.check_geometry(nd.shape, nd.chunkshape, nd.blockshape, ts, max_dim)
        if reason:
            raise FormatError(f"{layer} metalayer: {reason}", path, offset)
        if nd.dtype is not None:
            if nd.dtype.hasobject:
                raise FormatError(f"b2nd dtype {nd.dtype} holds Python objects; refusing it",
                                  path, offset)
            if nd.dtype.itemsize != ts:
                raise FormatError(f"b2nd dtype {nd.dtype} has {nd.dtype.itemsize}-byte "
                                  f"items but the frame typesize is {ts}", path, offset)
            dtype = dtype or nd.dtype
        self.dtype = dtype if dtype is not None else _copy_dtype(ts)
        self.shape, self.chunkshape, self.blockshape = nd.shape, nd.chunkshape, nd.blockshape
        g = self.geometry
        want = g.nchunks
        if want == 0:
            if hdr.nbytes:
                raise FormatError(f"empty array of shape {g.shape} but the frame holds "
                                  f"{hdr.nbytes} bytes", path, 29)
            return
        if hdr.chunksize != g.chunk_nbytes:
            raise FormatError(f"frame chunksize {hdr.chunksize} but the {layer} layout needs "
                              f"{g.chunk_nbytes} bytes per chunk", path, 57)
        if hdr.nbytes != want * g.chunk_nbytes:
            raise FormatError(f"frame holds {hdr.nbytes} bytes, {want} chunks of "
                              f"{g.chunk_nbytes} bytes expected", path, 29)

    # -- basic properties ----------------------------------------------------------------

    @property
    def geometry(self) -> geo.Geometry:
        return geo.Geometry(self.shape, self.chunkshape, self.blockshape, self.header.typesize)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def vlmeta(self) -> dict[str, Any]:
        if self._vlmeta is None:
            self._vlmeta = {name: decode_vlmeta(raw, f"{self._index} (vlmeta {name!r})")
                            for name, raw in self.vlmeta_raw.items()}
        return self._vlmeta

    def offsets_array(self) -> np.ndarray:
        """Every chunk offset (int64; negative ones mark special chunks), as stored.

        Raises
        ------
        FormatError
            The table is too large to load at once.
        """
        if self._offsets is None:
            return np.empty(0, np.int64)
        try:
            return self._offsets.array().astype(np.int64, copy=True)
        except MemoryError:
            raise FormatError(f"{self.nchunks} chunk offsets are too many to load",
                              self._index, self.index_start) from None

    def take_handle(self) -> Handle:
        """The open handle of a contiguous frame, which the caller now owns (reads through
        it see the file this frame was parsed from, whatever is renamed over its path)."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the frame file is closed")
        fd, self._fd = self._fd, None
        return fd

    def close(self) -> None:
        """Release the file handle (sparse frames hold none after opening)."""
        if self._fd is not None:
            self._fd.close()
            self._fd = None

    def __enter__(self) -> Frame:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __repr__(self) -> str:
        layout = "contiguous" if self.contiguous else "sparse"
        return (f"Frame({self.path!r}, {self.kind}, {layout}, shape={self.shape}, "
                f"chunks={self.chunkshape}, blocks={self.blockshape}, dtype={self.dtype})")

    # -- chunks --------------------------------------------------------------------------

    def chunk_nbytes(self, i: int) -> int | None:
        """Uncompressed size of chunk ``i`` (None for variable-size SChunks)."""
        cs, nb = self.header.chunksize, self.header.nbytes
        if not cs:
            return None
        return min(cs, nb - i * cs)

    def _locate(self, i: int) -> tuple[int, str | None, int, int, ChunkDigests | None]:
        """(special code, file, start, size, digests) of chunk ``i``; file None for special
        chunks, digests None where carray recorded none."""
        if not 0 <= i < self.nchunks:
            raise IndexError(f"chunk {i} out of range for {self.nchunks} chunks")
        if self._offsets is None:  # an empty frame has no chunks (nchunks is 0)
            raise IndexError(f"chunk {i} of a frame without chunks")
        off = self._offsets[i]
        if off < 0:
            return _chunk.special_of_offset(off, self._index, None), None, 0, BLOSC2_HEADER, None
        digests = self.digests.get(i) if self.digests is not None else None
        if self.contiguous:
            end = self.header.cbytes
            if off + 16 > end or (digests is not None and off + digests.size > end):
                raise FormatError(f"chunk {i} offset {off} points past the {end} bytes of "
                                  "chunk data", self.path)
            start = self.header.header_len + off
            if digests is not None:  # its size is recorded: no header to read first
                return 0, self._key, start, digests.size, digests
            h = read_header(self._read(self._key, 32 if off + 32 <= end else 16, start),
                            self.path, start, size=end - off)
            return 0, self._key, start, h.cbytes, None
        if off >= 2**32:
            raise FormatError(f"chunk {i} file number {off} is out of range", self._index)
        name = self.store.join(self._key, f"{off:08X}.chunk")
        try:
            size = self.store.size(name)
        except FileNotFoundError:
            raise FormatError(f"chunk file {off:08X}.chunk of chunk {i} is missing",
                              self.path) from None
        if digests is not None and size != digests.size:
            raise FormatError(f"chunk file of {size} bytes, {digests.size} recorded",
                              self.store.url(name))
        return 0, name, 0, size, digests

    def _read(self, name: str, n: int, offset: int) -> bytes:
        if name == self._key and self._fd is not None:
            return self._fd.pread(n, offset)
        with self.store.open(name) as h:
            return h.pread(n, offset)

    def read_chunk(self, i: int) -> bytes:
        """The stored bytes of chunk ``i`` (a synthesised 32-byte chunk for special offsets)."""
        code, name, start, size, digests = self._locate(i)
        if name is None:
            nb = self.chunk_nbytes(i)
            if nb is None:
                raise FormatError(f"chunk {i} is special in a variable-size frame", self.path)
            return _chunk.special_chunk(code, nb, self.header.typesize, self.header.blocksize)
        data = self._read(name, size, start)
        if len(data) != size:
            raise FormatError(f"chunk {i} truncated: {len(data)} of {size} bytes", name, start)
        if digests is not None:
            digests.check(data, self.store.url(name), start)
        return data

    def chunk_reader(self, i: int) -> tuple[Callable[[int, int], bytes], int]:
        """``(read_at, size)`` for ranged reads of chunk ``i``'s stored bytes.

        ``read_at(offset, length)`` returns up to ``length`` bytes from ``offset``
        within the chunk, never past its ``size``.
        """
        code, name, start, size, digests = self._locate(i)
        if name is None:
            data = self.read_chunk(i)
            return (lambda off, n: data[off:off + n]), len(data)
        if digests is not None:  # every byte handed out checked against its page's digest
            return digests.reader(lambda off, n: self._read(name, n, start + off),
                                  self.store.url(name), start).read, size

        def read_at(off: int, n: int) -> bytes:
            off = max(0, min(off, size))
            return self._read(name, max(0, min(n, size - off)), start + off)

        return read_at, size

    def decode_chunk(self, i: int, out: np.ndarray | None = None) -> np.ndarray:
        """Chunk ``i`` decompressed, as flat uint8 (into ``out`` when given)."""
        buf = self.read_chunk(i)
        nb = self.chunk_nbytes(i)
        if nb is None:
            nb = read_header(buf, self.path).nbytes
        if out is None:
            out = np.empty(nb, np.uint8)
        where = self._where(i)
        _chunk.decode_into(buf, out, where, None, typesize=self.header.typesize)
        return out

    def _where(self, i: int) -> str:
        return f"{self.path} (chunk {i})"

    # -- arrays --------------------------------------------------------------------------

    def read_bytes(self) -> bytes:
        """All chunks decompressed back to back (the SChunk's byte content)."""
        hdr = self.header
        out = np.empty(hdr.nbytes, np.uint8)
        pos = 0
        for i in range(self.nchunks):
            buf = self.read_chunk(i)
            nb = self.chunk_nbytes(i)
            if nb is None:
                nb = read_header(buf, self.path).nbytes
            if pos + nb > hdr.nbytes:
                raise FormatError(f"chunks hold more than the frame's {hdr.nbytes} bytes",
                                  self.path)
            _chunk.decode_into(buf, out[pos:pos + nb], self._where(i), None,
                               typesize=hdr.typesize)
            pos += nb
        if pos != hdr.nbytes:
            raise FormatError(f"chunks hold {pos} bytes, the frame says {hdr.nbytes}",
                              self.path)
        return out.tobytes()

    def read(self) -> np.ndarray:
        """The whole array."""
        if self.kind == "schunk":
            return np.frombuffer(self.read_bytes(), self.dtype).reshape(self.shape).copy()
        return self.read_region(...)

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.read_region(key)

    def read_region(self, key: Any) -> np.ndarray:
        """``array[key]``, decoding only the chunks (and, inside them, the blocks) the
        selection touches.

        Keys are those of a carray (:func:`carray.chunks.keys.orthogonal_key`): ints,
        slices with any step, ``...``, ``None``, and per axis an int array or a
        1-d mask (every axis indexed on its own).
        """
        if self.kind == "schunk":
            return self.read()[key]
        g = self.geometry
        okey = orthogonal_key(key, g.shape)
        vt = _copy_dtype(g.itemsize)
        out = np.empty(okey.sel_shape, vt)
        if okey.size:  # (an empty frame may have empty chunks, which no grid holds)
            # The same piece reader as every carray: only the blocks a piece touches.
            grid = NDGrid(g.shape, g.chunkshape, g.blockshape, g.itemsize)
            io = ChunkIO(_FrameChunks(self), out.dtype, g.blockshape, CParams())
            for piece in plan(grid, okey):
                io.read_piece(grid, piece, out)
        result = okey.finish(out).view(self.dtype)
        return result[()] if result.ndim == 0 and key != Ellipsis else result


class _FrameChunks:
    """A frame's stored chunks as the read-only chunk source a :class:`ChunkIO` reads."""

    blosc1 = False
    in_memory = False
    concurrent_reads = False  # one Frame handle: ChunkIO serialises the reads
    pads_edges = True

    def __init__(self, frame: Frame) -> None:
        self.frame = frame

    def read_chunk(self, nchunk: int) -> bytes:
        return self.frame.read_chunk(nchunk)

    def read_chunk_into(self, nchunk: int, scratch: Callable[[int], np.ndarray]) -> bytes:
        return self.frame.read_chunk(nchunk)

    def chunk_reader(self, nchunk: int) -> tuple[ChunkReader, int]:
        read_at, size = self.frame.chunk_reader(nchunk)
        return ChunkReader(size, read_at), size

    def chunk_path(self, nchunk: int) -> str:
        return f"{self.frame.path} (chunk {nchunk})"

    def special_chunk(self, nchunk: int) -> bytes | None:
        return None  # special chunks are decoded like any other here


def read_frame(path: str | os.PathLike, *, dtype=None,
               storage_options: dict | None = None) -> Frame:
    """Open a Blosc2 frame (contiguous file or sparse directory).

    Parameters
    ----------
    path : str or os.PathLike
        A local path or any fsspec URL (``s3://bucket/x.b2nd``).
    dtype : dtype-like, optional
        Item type for caterva frames and plain SChunks, which store only the item size.
    storage_options : dict, optional
        Passed to the fsspec file system of a URL.

    Returns
    -------
    Frame
        Close it (or use it as a context manager) to release its file descriptor.

    Raises
    ------
    FormatError
        The bytes do not form a valid frame; the message names the file and offset.
    CodecUnavailableError
        A chunk uses a codec or filter this build cannot decode.
    """
    return Frame(path, dtype=dtype, storage_options=storage_options)


def read_array(path: str | os.PathLike, *, dtype=None,
               storage_options: dict | None = None) -> np.ndarray:
    """Read a whole ``b2nd`` / ``caterva`` array (or a plain SChunk as 1-d) into numpy.

    Parameters
    ----------
    path : str or os.PathLike
        A local path or any fsspec URL.
    dtype : dtype-like, optional
        See :func:`read_frame`.
    storage_options : dict, optional
        Passed to the fsspec file system of a URL.

    Returns
    -------
    numpy.ndarray
    """
    with Frame(path, dtype=dtype, storage_options=storage_options) as f:
        return f.read()


def read_region(path: str | os.PathLike, key, *, dtype=None,
                storage_options: dict | None = None) -> np.ndarray:
    """``array[key]`` of a stored array, decoding only the chunks the selection touches.

    Parameters
    ----------
    path : str or os.PathLike
        A local path or any fsspec URL.
    key : int, slice, Ellipsis or a tuple of them
    dtype : dtype-like, optional
        See :func:`read_frame`.
    storage_options : dict, optional
        Passed to the fsspec file system of a URL.

    Returns
    -------
    numpy.ndarray
    """
    with Frame(path, dtype=dtype, storage_options=storage_options) as f:
        return f.read_region(key)
