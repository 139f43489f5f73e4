"""The b2nd layout: an array kept as a python-blosc2 ``.b2nd`` frame, read and modified in place.

Format facts relied on are in docs/formats/b2frame.md (frames, metalayers, special
offsets, vlmeta) and docs/formats/blosc2-chunk.md; parsing and validation are
:class:`carray.formats.b2frame.Frame`'s, byte building :mod:`carray.formats._b2frame_header`'s.
A frame we create also carries the fixed metalayer ``carray`` (``dflt``,
``expectedlen``, ``cbytes``; fixed-width ints, rewritten in place); frames written by
others keep the metalayers they have.  Chunks need not be packed: c-blosc2 itself
appends new and updated chunks at ``header_len + cbytes`` and leaves replaced ones
where they were, and python-blosc2 reads such frames.

Crash safety.  The committed state is what the header (contiguous) or
``chunks.b2frame`` (sparse) points at.  Contiguous: chunk bytes are only ever
appended past everything the committed state references; a commit appends the
new offsets chunk and trailer, fsyncs, then rewrites the header with one
``pwrite`` of less than a page (the commit point) and fsyncs again.  Replaced
chunks and old offsets/trailers become dead space inside the data region; once
it exceeds half the file (and ``COMPACT_MIN``) the file is rewritten packed
under a temporary name and renamed over the old one, as is any commit of an
empty frame (c-blosc2 wants its trailer right after the header then) or of a
header larger than a page.  Sparse: every new chunk version goes to a new
file number (temporary name, then rename); a commit fsyncs them and the
directory, replaces ``chunks.b2frame`` atomically, fsyncs the directory, and
only then deletes the files nothing references any more.  A writer killed at
any point leaves the frame at its last commit; the next writer drops what it
left behind (bytes past ``frame_len``, orphan chunk files).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray import attrvalues
from carray import geometry as geo
from carray.codecs.blosc import BLOSC1_HEADER, BLOSC2_HEADER, ChunkBytes, read_header
from carray.errors import (
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    UnsupportedDTypeError,
)
from carray.formats import _b2frame_chunk as _chunk
from carray.formats._b2frame_header import (
    SPARSE_INDEX,
    build_nd_meta,
    build_trailer,
    patch_header,
)
from carray.formats._b2frame_write import encode_vlmeta, offsets_chunk, special_code_of
from carray.formats.b2frame import Frame, decode_vlmeta
from carray.grid import NDGrid
from carray.layouts._b2frame_meta import (
    CARRAY_META,
    _ChunkFile,
    carray_meta,
    chunk_file_name,
    cparams_of,
    is_b2nd_frame,
    new_frame_parts,
    parse_carray_meta,
    recorded_dtype,
)
from carray.layouts._b2frame_plugins import frame_decoded
from carray.layouts.base import ArrayMeta, ChunkReader, Layout, clear_for_create
from carray.stores import LOCAL, Handle, Store

__all__ = ["B2ndLayout", "chunk_file_name", "is_b2nd_frame"]

#: Dead space below this is never worth a rewrite.
COMPACT_MIN = 64 * 2**10
# The header must fit one page for its rewrite to be a single-sector-ish atomic write.
_PAGE = 4096
_ZERO = _chunk.special_offset(_chunk.ZERO)
_NOT_STORED = (_chunk.ZERO, _chunk.NAN, _chunk.UNINIT)
_CHUNK_FILE = re.compile(r"([0-9A-F]{8})\.chunk")
_TMP_FILE = re.compile(r".+\.\d+\.tmp")


class B2ndLayout(Layout):
    """A python-blosc2 ``b2nd`` frame: one file (contiguous) or a sparse directory.

    Use :meth:`create` or :meth:`open`; see the module docstring for the format
    and the commit protocol.  Frames written by python-blosc2 and caterva open
    too (caterva frames store no dtype: their items read as unsigned ints of the
    item size, or raw bytes).
    """

    in_memory = False
    blosc1 = False
    concurrent_reads = True  # preads on shared descriptors; caches behind a lock
    pads_edges = True

    def __init__(self, path: str, frame: Frame, readonly: bool, fsync: bool,
                 store: Store = LOCAL) -> None:
        super().__init__(readonly)
        self.store = store
        self.path = path
        self.fsync = fsync
        self.contiguous = frame.contiguous
        self._index_path = path if frame.contiguous else store.join(path, SPARSE_INDEX)
        self._lock = threading.Lock()
        self._fd: Handle | None = None
        self._retired: list[Handle] = []  # handles on files compaction replaced
        self._serial = 0
        self._stamps: dict[int, tuple[int, int]] = {}
        self._load(frame)

    # -- creation and opening -------------------------------------------------------------

    @classmethod
    def create(cls, path: str, meta: ArrayMeta, mode: str = "a",
               fsync: bool = True, contiguous: bool = True,
               store: Store = LOCAL, kind: str = "b2nd") -> B2ndLayout:
        """Write a new frame holding ``meta``'s shape, every chunk zeros (not stored).

        Parameters
        ----------
        path : path
            The ``.b2nd`` file (contiguous) or directory (sparse); must not exist
            unless ``mode='w'``, which replaces whatever is there.
        meta : ArrayMeta
            dtype, shape (at most 16 dimensions), chunks, blocks (required),
            cparams (recorded in the frame header), dflt and expectedlen.
        contiguous : bool
            One file, or a directory with ``chunks.b2frame`` and a file per chunk.
        kind : {'b2nd', 'caterva'}
            The N-d metalayer (caterva 0.7's has no dtype: the ``carray`` one keeps it).

        Raises
        ------
        ContainerExistsError
            ``path`` exists and ``mode`` is not ``'w'``.
        ValueError
            No block shape, or shapes Blosc2 cannot store.
        UnsupportedDTypeError
            Object or zero-size items.
        """
        path = os.fspath(path)
        dtype = np.dtype(meta.dtype)
        if meta.blocks is None:
            raise ValueError("a b2nd frame needs a block shape: meta.blocks is None")
        if dtype.hasobject or dtype.itemsize == 0:
            raise UnsupportedDTypeError(f"dtype {dtype} cannot be stored in a Blosc2 frame")
        reason = geo.check_geometry(meta.shape, meta.chunks, meta.blocks, dtype.itemsize)
        if reason:
            raise ValueError(reason)
        grid = meta.grid  # refuses zero-sized chunks and blocks
        if grid.block_nbytes > _chunk.MAX_BLOCKSIZE:
            raise ValueError(f"blocks of {grid.block_nbytes} bytes exceed Blosc2's limit of "
                             f"{_chunk.MAX_BLOCKSIZE}")
        clear_for_create(store, path, mode)
        parent = store.dirname(path)
        store.makedirs(parent)
        header, index, trailer = new_frame_parts(meta, grid, contiguous, kind)
        if contiguous:
            store.put(path, (header, index, trailer), fsync=fsync)
        else:
            # Built under a temporary name so a half-made directory is never a frame.
            tmp = f"{path}.{os.getpid()}.tmp"
            if store.exists(tmp):
                store.rmtree(tmp)
            store.makedirs(tmp)
            try:
                store.put(store.join(tmp, SPARSE_INDEX), (header, index, trailer), fsync=fsync)
                store.rename(tmp, path)
            except BaseException:
                if store.exists(tmp):
                    store.rmtree(tmp)
                raise
        if fsync:
            store.sync_dir(parent)
        return cls.open(path, readonly=False, fsync=fsync, store=store)[0]

    @classmethod
    def open(cls, path: str, readonly: bool = False, fsync: bool = True,
             store: Store = LOCAL) -> tuple[B2ndLayout, ArrayMeta, int]:
        """Open a frame file or sparse frame directory: ``(layout, meta, cbytes)``.

        Raises
        ------
        ContainerNotFoundError
            Nothing at ``path``.
        FormatError
            Not a valid b2nd/caterva frame (the message names the file).
        """
        path = os.fspath(path)
        if not store.exists(path):
            raise ContainerNotFoundError(f"{store.url(path)}: no such Blosc2 frame")
        try:
            frame = Frame((store, path))
        except FileNotFoundError:
            raise FormatError(f"directory without {SPARSE_INDEX}: not a sparse Blosc2 frame",
                              store.url(path)) from None
        try:
            layout = cls(path, frame, readonly, fsync, store)
        finally:
            frame.close()
        return layout, layout._opened_meta, layout._opened_cbytes

    def _load(self, frame: Frame) -> None:
        """Take everything from a validated frame; check what ``Frame`` checks lazily."""
        hdr, path = frame.header, self._index_path
        if frame.kind not in ("b2nd", "caterva"):
            raise FormatError("a plain Blosc2 SChunk (no b2nd or caterva metalayer), not an "
                              "N-d array", path)
        self._kind = frame.kind
        self._dtype = frame.dtype
        self._typesize = hdr.typesize
        # b2nd allows chunk and block 0 on empty axes; one item is as good there, and
        # the recorded shape is kept to report and to write back while the axis is empty.
        self._declared = tuple(frame.chunkshape)
        self._chunks = tuple(max(c, 1) for c in frame.chunkshape)
        self._blocks = tuple(max(b, 1) for b in frame.blockshape)
        self._shape = tuple(frame.shape)
        grid = self._grid(self._shape)
        self._chunk_nbytes, self._block_nbytes = grid.chunk_nbytes, grid.block_nbytes
        self._header_len = hdr.header_len
        self._nd_at = hdr.meta_offsets[self._kind] + 5  # past C6 and the uint32 length
        self._nd_len = len(frame.meta_raw[self._kind])
        self._vlmeta = dict(frame.vlmeta_raw)
        self._cparams = cparams_of(hdr.compcode, hdr.clevel, hdr.filters, hdr.filters_meta)
        self._plugins = hdr.compcode == 6 or any(f >= 32 and f != 35 for f in hdr.filters)
        self._carray_at: int | None = None
        dflt, expectedlen, cbytes = np.zeros((), self._dtype), None, hdr.cbytes
        if CARRAY_META in frame.meta_raw:
            self._carray_at = hdr.meta_offsets[CARRAY_META] + 5
            raw = frame.meta_raw[CARRAY_META]
            self._dtype = recorded_dtype(raw, self._dtype, path, self._carray_at)
            dflt, expectedlen, cbytes = parse_carray_meta(
                frame.meta_raw[CARRAY_META], self._dtype, path, self._carray_at)
            self._carray_len = len(frame.meta_raw[CARRAY_META])
        offsets = frame.offsets_array()
        self._check_offsets(offsets, hdr.cbytes)
        self._committed = offsets
        self._offs = offsets.copy()
        self._cb = np.full(len(offsets), -1, np.int64)  # stored size per chunk, -1 unknown
        self._n = len(offsets)
        self._frame_len = hdr.frame_len
        if self.contiguous:
            self._fd = self.store.open(self.path, "r" if self.readonly else "r+")
            if not self.readonly and self._fd.size > hdr.frame_len:
                # Left by a writer killed before its commit: nothing committed is there.
                self._fd.truncate(hdr.frame_len)
            self._data_end = hdr.header_len + hdr.cbytes  # where the offsets chunk starts
            self._end = hdr.frame_len                     # where new chunks go
            self._tail = hdr.frame_len - self._data_end   # offsets chunk + trailer
        else:
            self._committed_files = {int(o) for o in offsets[offsets >= 0]}
            self._pending: set[int] = set()
            self._next_file = max(self._committed_files, default=-1) + 1
            if not self.readonly:
                self._remove_orphans()
        self._header = self._read_header(hdr.header_len)
        self._opened_meta = ArrayMeta(
            dtype=self._dtype, shape=self._shape, chunks=self._chunks, blocks=self._blocks,
            cparams=self._cparams, dflt=dflt,
            expectedlen=expectedlen if expectedlen is not None else
            (self._shape[0] if self._shape else 0))
        self._opened_cbytes = cbytes

    def _read_header(self, length: int) -> bytearray:
        if self._fd is not None:
            data = self._fd.pread(length, 0)
        else:
            with self.store.open(self._index_path) as h:
                data = h.pread(length, 0)
        if len(data) != length:
            raise FormatError("frame header truncated", self._index_path)
        return bytearray(data)

    def _check_offsets(self, offsets: np.ndarray, cbytes: int) -> None:
        """Every offset is a valid special code, a chunk start inside the data region
        (contiguous) or a chunk file number (sparse), checked once, vectorised."""
        for off in np.unique(offsets[offsets < 0]).tolist():
            _chunk.special_of_offset(off, self._index_path, None)
        stored = offsets[offsets >= 0]
        if not stored.size:
            return
        top = int(stored.max())
        if self.contiguous and top + BLOSC1_HEADER > cbytes:
            raise FormatError(f"chunk offset {top} points past the {cbytes} bytes of chunk "
                              "data", self._index_path)
        if not self.contiguous and top >= 2**32:
            raise FormatError(f"chunk file number {top} is out of range", self._index_path)

    def declared_chunks(self) -> tuple[int, ...] | None:
        return self._declared if self._declared != self._chunks else None

    def _recorded_shapes(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...],
                                                                 tuple[int, ...]]:
        """Chunk and block shapes to record: the file's zeros stay while their axis is empty."""
        keep = [d == 0 and n == 0 for d, n in zip(self._declared, shape, strict=True)]
        chunks = tuple(0 if k else c for k, c in zip(keep, self._chunks, strict=True))
        blocks = tuple(0 if k else b for k, b in zip(keep, self._blocks, strict=True))
        return chunks, blocks

    def _grid(self, shape: tuple[int, ...]) -> NDGrid:
        return ArrayMeta(dtype=self._dtype, shape=shape, chunks=self._chunks,
                         blocks=self._blocks).grid

    def _remove_orphans(self) -> None:
        """Delete chunk and temporary files no commit refers to (an interrupted writer's)."""
        removed = False
        for name in self.store.listdir(self.path):
            m = _CHUNK_FILE.fullmatch(name)
            orphan = m is not None and int(m.group(1), 16) not in self._committed_files
            if orphan or _TMP_FILE.fullmatch(name):
                try:
                    self.store.delete(self.store.join(self.path, name))
                    removed = True
                except (FileNotFoundError, IsADirectoryError):
                    pass
        if removed and self.fsync:
            self.store.sync_dir(self.path)

    # -- reading --------------------------------------------------------------------------

    def _offset(self, nchunk: int) -> int:
        if not 0 <= nchunk < self._n:
            raise IndexError(f"chunk {nchunk} out of range for {self._n} chunks")
        return int(self._offs[nchunk])

    def _special(self, off: int) -> bytes:
        code = _chunk.special_of_offset(off, self._index_path, None)
        # Uninitialised chunks decode as zeros: c-blosc2 would leave the output untouched.
        code = _chunk.ZERO if code == _chunk.UNINIT else code
        return _chunk.special_chunk(code, self._chunk_nbytes, self._typesize,
                                    self._block_nbytes)

    def _file(self) -> Handle:
        """The open frame file (contiguous frames hold one until closed)."""
        if self._fd is None:
            raise ValueError(f"{self.path}: the frame file is closed")
        return self._fd

    def _extent(self, nchunk: int, off: int) -> tuple[int, int]:
        """(file position, stored size) of a stored chunk of a contiguous frame."""
        start = self._header_len + off
        size = int(self._cb[nchunk])
        if size < 0:
            # A committed chunk must end inside the data region; one written since
            # then, before the end of the file.
            limit = (self._data_end if start < self._data_end else self._end) - start
            head = self._file().pread(BLOSC1_HEADER, start)
            size = self._check_head(head, self.path, start, nchunk, limit)
            with self._lock:
                if int(self._offs[nchunk]) == off:
                    self._cb[nchunk] = size
        return start, size

    def _check_head(self, head: ChunkBytes, name: str, start: int, nchunk: int,
                    size: int) -> int:
        """A stored chunk's cbytes, once its header fits ``size`` bytes and the frame."""
        h = read_header(head, name, start, size=size)
        if h.nbytes != self._chunk_nbytes:
            raise FormatError(f"chunk {nchunk} holds {h.nbytes} bytes decoded; the frame's "
                              f"chunks hold {self._chunk_nbytes}", name, start)
        return h.cbytes

    def _chunk_file(self, number: int) -> str:
        return self.store.join(self.path, chunk_file_name(number))

    def _missing(self, nchunk: int, number: int) -> FormatError:
        return FormatError(f"chunk file {chunk_file_name(number)} of chunk {nchunk} is "
                           "missing", self.path)

    def _open_chunk_file(self, nchunk: int, number: int) -> Handle:
        try:
            return self.store.open(self._chunk_file(number))
        except FileNotFoundError:
            raise self._missing(nchunk, number) from None

    def special_chunk(self, nchunk: int) -> bytes | None:
        """The 32-byte chunk a negative (zeros, NaN, uninitialised) offset stands for."""
        off = self._offset(nchunk)
        return self._special(off) if off < 0 else None

    def read_chunk(self, nchunk: int) -> bytes | memoryview:
        """The stored chunk ``nchunk`` (a synthesised 32-byte chunk when not stored)."""
        return self.read_chunk_into(nchunk, lambda n: np.empty(n, np.uint8))

    def read_chunk_into(self, nchunk: int,
                        scratch: Callable[[int], np.ndarray]) -> bytes | memoryview:
        """Chunk ``nchunk`` read into ``scratch(nbytes)`` (no allocation per read)."""
        off = self._offset(nchunk)
        if off < 0:
            return self._special(off)
        if self.contiguous:
            start, size = self._extent(nchunk, off)
            view = scratch(size).data.cast("B")[:size]
            got, name = self._file().pread_into(view, start), self.path
        else:
            start, name = 0, self._chunk_file(off)
            with self._open_chunk_file(nchunk, off) as h:
                size = h.size
                view = scratch(size).data.cast("B")[:size]
                got = h.pread_into(view, 0)
            self._check_head(view[:got], name, 0, nchunk, got)
        if got != size:
            raise FormatError(f"chunk {nchunk} truncated: {got} of {size} bytes", name, start)
        if self._plugins:  # python-blosc2 may have used a plugin only the frame decodes
            return frame_decoded(self.store, self.path, nchunk, view, self._typesize,
                                 self._block_nbytes)
        return view

    def chunk_reader(self, nchunk: int) -> tuple[Callable[[int, int], bytes], int]:
        """``(read_at(offset, length), size)``: reads only the bytes asked for."""
        off = self._offset(nchunk)
        if off < 0 or self._plugins:  # a plugin chunk is read whole, decoded in its frame
            data = self._special(off) if off < 0 else self.read_chunk(nchunk)
            return ChunkReader(len(data), lambda o, n: bytes(data[o:o + n])), len(data)
        if not self.contiguous:
            try:
                reader = _ChunkFile(self.store, self._chunk_file(off))
            except FileNotFoundError:
                raise self._missing(nchunk, off) from None
            return ChunkReader(reader.size, reader, reader.read_into), reader.size
        start, size = self._extent(nchunk, off)
        fd = self._file()  # compaction retires, never closes, a handle in use

        def read_at(offset: int, length: int) -> bytes:
            offset = max(0, min(offset, size))
            return fd.pread(max(0, min(length, size - offset)), start + offset)

        def read_into(offset: int, out: Any) -> int:
            view = memoryview(out).cast("B")[:max(0, size - offset)]
            return fd.pread_into(view, start + offset)

        return ChunkReader(size, read_at, read_into), size

    # -- writing --------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.readonly:
            raise ReadOnlyError(f"{self.store.url(self.path)}: opened read-only")

    def _ensure(self, n: int) -> None:
        if n > len(self._offs):
            cap = max(n, 2 * len(self._offs), 16)
            offs, cb = np.empty(cap, np.int64), np.full(cap, -1, np.int64)
            offs[:self._n], cb[:self._n] = self._offs[:self._n], self._cb[:self._n]
            self._offs, self._cb = offs, cb

    def _size_of(self, nchunk: int) -> int:
        """Stored bytes of chunk ``nchunk`` (0 when not stored)."""
        off = int(self._offs[nchunk])
        if off < 0:
            return 0
        if self.contiguous:
            return self._extent(nchunk, off)[1]
        size = int(self._cb[nchunk])
        if size < 0:
            try:
                size = self.store.size(self._chunk_file(off))
            except FileNotFoundError:
                raise self._missing(nchunk, off) from None
            self._cb[nchunk] = size
        return size

    def _release(self, nchunk: int) -> int:
        """Forget chunk ``nchunk``'s bytes, reclaiming them when nothing committed uses
        them; returns their size."""
        if nchunk >= self._n:
            return 0
        size = self._size_of(nchunk)
        off = int(self._offs[nchunk])
        if off < 0:
            return 0
        if self.contiguous:
            start = self._header_len + off
            if start >= self._frame_len and start + size == self._end:
                self._end = start  # the last thing appended, never committed: reuse it
        elif off not in self._committed_files:
            self._pending.discard(off)
            try:
                self.store.delete(self._chunk_file(off))
            except FileNotFoundError:
                pass
        return size

    def write_chunk(self, nchunk: int, data: ChunkBytes, digest: bytes | None = None) -> int:
        """Store chunk ``nchunk`` (append when ``nchunk`` is the count, else replace).

        ``data`` must be a Blosc2 chunk of exactly the frame's chunk size decoded.
        Zero, NaN and uninitialised special chunks are recorded in the offsets
        only, as c-blosc2 does.  Returns the change in stored bytes.
        """
        self._check_writable()
        if not 0 <= nchunk <= self._n:
            raise IndexError(f"chunk {nchunk} written before chunk {self._n}")
        data = bytes(data)  # the raw bytes of any buffer
        h = read_header(data, self.path)
        if len(data) < BLOSC2_HEADER or h.version < 3 or (h.flags & 0x05) != 0x05:
            raise ValueError("a Blosc2 frame stores Blosc2 chunks (32-byte header); got a "
                             f"version {h.version} chunk")
        if h.nbytes != self._chunk_nbytes:
            raise ValueError(f"chunk holds {h.nbytes} bytes decoded; every chunk of this frame "
                             f"holds {self._chunk_nbytes} (edge chunks padded)")
        data = data[:h.cbytes]
        old = self._release(nchunk)
        code = special_code_of(data)
        if code in _NOT_STORED and h.cbytes == BLOSC2_HEADER:
            off, size = _chunk.special_offset(code), 0
        elif self.contiguous:
            off, size = self._end - self._header_len, len(data)
            self._file().pwrite(data, self._end)
            self._end += size
        else:
            off, size = self._next_file, len(data)
            self._next_file += 1
            self.store.put(self._chunk_file(off), data, fsync=False)
            self._pending.add(off)
        self._ensure(nchunk + 1)
        with self._lock:
            self._offs[nchunk], self._cb[nchunk] = off, size
        self._n = max(self._n, nchunk + 1)
        self._serial += 1
        self._stamps[nchunk] = (off, self._serial)
        return size - old

    def drop_chunks(self, first: int) -> int:
        """Forget chunks ``first`` and above; returns the (negative) change in stored bytes."""
        self._check_writable()
        first = max(int(first), 0)
        removed = 0
        for n in range(self._n - 1, first - 1, -1):  # last first, so the tail is reclaimed
            removed += self._release(n)
            self._stamps.pop(n, None)
        if first < self._n:
            self._cb[first:self._n] = -1
            self._n = first
        return -removed

    # -- committing -----------------------------------------------------------------------

    def commit(self, meta: ArrayMeta, cbytes: int, message: str | None = None) -> None:
        """Make every chunk written so far durable, then record ``meta.shape``.

        Chunks past the new shape's chunk count are dropped; missing ones
        become zero chunks (b2nd's own growth).  ``meta`` must keep the dtype,
        chunk and block shapes and the number of dimensions.
        """
        self._check_writable()
        shape = tuple(int(s) for s in meta.shape)
        if (len(shape) != len(self._shape) or tuple(meta.chunks) != self._chunks
                or tuple(meta.blocks or meta.chunks) != self._blocks
                or np.dtype(meta.dtype).itemsize != self._dtype.itemsize):
            raise ValueError(f"{self.path}: a frame of {len(self._shape)} dimensions with chunks "
                             f"{self._chunks}, blocks {self._blocks} and {self._dtype.itemsize}"
                             f"-byte items cannot record {meta}")
        n = self._grid(shape).nchunks
        # Until the new state is written, a failure must leave the old one in memory too.
        saved = (self._n, self._offs.copy(), self._cb.copy(), dict(self._stamps),
                 getattr(self, "_end", None))  # sparse frames have no end to append at
        try:
            offsets = self._record(shape, n, meta, cbytes)
        except BaseException:
            self._n, self._offs, self._cb, self._stamps, end = saved
            if end is not None:
                self._end = end
            raise
        # Committed: tidying up may fail (a full disk) without undoing that.
        with contextlib.suppress(OSError):
            if self.contiguous:
                self._maybe_compact()
            else:
                self._delete_unreferenced(offsets)

    def _record(self, shape: tuple[int, ...], n: int, meta: ArrayMeta,
                cbytes: int) -> np.ndarray:
        """Write the new chunk count, header and offsets (see :meth:`commit`); returns the
        offsets recorded."""
        if self._n > n:
            self.drop_chunks(n)
        if self._n < n:
            self._ensure(n)
            with self._lock:
                self._offs[self._n:n], self._cb[self._n:n] = _ZERO, 0
            self._n = n
        header = bytearray(self._header)
        dtype = self._dtype if self._kind == "b2nd" else None
        chunks, blocks = self._recorded_shapes(shape)
        header[self._nd_at:self._nd_at + self._nd_len] = self._fixed(
            build_nd_meta(shape, chunks, blocks, dtype), self._nd_len, self._kind)
        if self._carray_at is not None:
            raw = carray_meta(self._dtype, meta.dflt, meta.expectedlen, cbytes,
                              with_dtype=self._kind == "caterva")
            header[self._carray_at:self._carray_at + self._carray_len] = self._fixed(
                raw, self._carray_len, CARRAY_META)
        offsets = self._offs[:n].copy()
        self._write_state(header, offsets, self._vlmeta,
                          None if self.contiguous else self._live(n))
        self._shape = shape
        return offsets

    def _fixed(self, raw: bytes, length: int, name: str) -> bytes:
        if len(raw) != length:
            raise FormatError(f"{name} metalayer would change size ({length} -> {len(raw)} "
                              "bytes); it cannot be rewritten in place", self._index_path)
        return raw

    def _live(self, n: int) -> int:
        """Stored bytes the first ``n`` working chunks reference."""
        return sum(self._size_of(i) for i in np.flatnonzero(self._offs[:n] >= 0).tolist())

    def _write_state(self, header: bytearray, offsets: np.ndarray, vlmeta: dict[str, bytes],
                     live: int | None) -> None:
        """Write ``offsets`` and ``vlmeta`` as the new committed state (see module doc).

        ``live`` is the sparse header's cbytes (None keeps the committed one).
        """
        nbytes = len(offsets) * self._chunk_nbytes
        index = offsets_chunk(offsets, self._cparams) if len(offsets) else b""
        trailer = build_trailer(list(vlmeta.items()))
        sizes: dict[str, Any] = dict(nbytes=nbytes, has_vlmeta=bool(vlmeta),
                                     chunksize=self._chunk_nbytes, blocksize=self._block_nbytes)
        if not self.contiguous:
            if self.fsync:
                for number in sorted(self._pending):
                    self.store.sync_file(self._chunk_file(number))
                if self._pending:
                    self.store.sync_dir(self.path)
            if live is None:
                live = struct.unpack_from(">q", header, 39)[0]
            patch_header(header, frame_len=len(header) + len(index) + len(trailer), cbytes=live,
                         **sizes)
            self.store.put(self._index_path, (header, index, trailer), fsync=self.fsync)
            if self.fsync:
                self.store.sync_dir(self.path)
            self._pending.clear()
        elif self._header_len > _PAGE or not len(offsets):
            # A header too big for one page-sized write, or an empty frame (c-blosc2
            # expects its trailer right after the header): replace the whole file.
            self._rewrite(header, offsets, vlmeta)
            return
        else:
            pos = self._end
            self._file().pwrite(index + trailer, pos)
            self._sync()  # chunks, offsets and trailer stored before the header says so
            frame_len = pos + len(index) + len(trailer)
            patch_header(header, frame_len=frame_len, cbytes=pos - self._header_len, **sizes)
            self._file().pwrite(header, 0)  # the commit point
            self._sync()
            self._data_end, self._end, self._frame_len = pos, frame_len, frame_len
            self._tail = len(index) + len(trailer)
        self._header = header
        self._committed = offsets

    def _sync(self) -> None:
        """fsync the frame file; on object stores, put it back (always: it is the write)."""
        if self.fsync or self.store.remote:
            self._file().sync()

    def _delete_unreferenced(self, offsets: np.ndarray) -> None:
        """After a sparse commit: remove chunk files the old commit alone referred to."""
        keep = {int(o) for o in offsets[offsets >= 0]}
        stale = self._committed_files - keep
        for number in sorted(stale):
            try:
                self.store.delete(self._chunk_file(number))
            except FileNotFoundError:
                pass
        if stale and self.fsync:
            self.store.sync_dir(self.path)
        self._committed_files = keep

    def _maybe_compact(self) -> None:
        n = len(self._committed)
        dead = self._end - (self._header_len + self._live(n) + self._tail)
        if dead > COMPACT_MIN and 2 * dead > self._end:
            self._rewrite(bytearray(self._header), self._committed.copy(), self._vlmeta)

    def _rewrite(self, header: bytearray, offsets: np.ndarray,
                 vlmeta: dict[str, bytes]) -> None:
        """Write ``offsets`` as the committed state into a new, packed file renamed over
        the frame; chunks written since (working, not in ``offsets``) follow its end.

        ``offsets`` point into the current file, as the working offsets do.
        """
        packed = offsets.copy()
        moves: list[tuple[int, int, int]] = []  # (old start, size, new start), file order
        where: dict[int, int] = {}  # old offset -> new offset

        def place(i: int, off: int, pos: int) -> int:
            if off not in where:
                size = self._size_of(i)
                where[off] = pos - self._header_len
                moves.append((self._header_len + off, size, pos))
                pos += size
            return pos

        pos = self._header_len
        for i in np.flatnonzero(offsets >= 0).tolist():
            pos = place(i, int(offsets[i]), pos)
            packed[i] = where[int(offsets[i])]
        data_end = pos
        index = offsets_chunk(packed, self._cparams) if len(packed) else b""
        trailer = build_trailer(list(vlmeta.items()))
        frame_len = pos = data_end + len(index) + len(trailer)
        for i in np.flatnonzero(self._offs[:self._n] >= 0).tolist():
            pos = place(i, int(self._offs[i]), pos)
        patch_header(header, frame_len=frame_len, nbytes=len(offsets) * self._chunk_nbytes,
                     cbytes=data_end - self._header_len, has_vlmeta=bool(vlmeta),
                     chunksize=self._chunk_nbytes, blocksize=self._block_nbytes)
        old_fd = self._file()

        def parts() -> Iterator[bytes]:
            yield bytes(header)
            for start, size, new in moves:  # one chunk in memory at a time
                if new == frame_len:
                    yield index + trailer
                data = old_fd.pread(size, start)
                if len(data) != size:
                    raise FormatError(f"chunk at offset {start} truncated", self.path, start)
                yield data
            if pos == frame_len:  # nothing after the trailer
                yield index + trailer

        if self.store.remote:
            old_fd.sync()  # else closing the retired handle would put its old bytes back
        self.store.put(self.path, parts(), fsync=self.fsync)
        if self.fsync:
            self.store.sync_dir(self.store.dirname(self.path))
        with self._lock:
            self._fd = self.store.open(self.path, "r+")
            self._retired.append(old_fd)  # readers handed out earlier still use it
            live = self._offs[:self._n] >= 0
            self._offs[:self._n][live] = [where[int(o)] for o in self._offs[:self._n][live]]
        self._header, self._committed = header, packed
        self._data_end, self._frame_len = data_end, frame_len
        self._end = pos
        self._tail = len(index) + len(trailer)

    # -- metadata -------------------------------------------------------------------------

    def load_attrs(self) -> dict[str, Any]:
        """The frame's vlmeta, decoded as python-blosc2 does (msgpack values), carray's
        own typed values included (:mod:`carray.attrpack`)."""
        return {name: decode_vlmeta(raw, f"{self._index_path} (vlmeta {name!r})")
                for name, raw in self._vlmeta.items()}

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        """Replace the vlmeta with ``attrs`` and commit it (with the committed chunks).

        Raises
        ------
        UnstorableAttributeError
            A key that is not a string, or a value carray does not store.
        ValueError
            More than 16 entries, or a key longer than 31 bytes (c-blosc2's limits).
        """
        self._check_writable()
        vlmeta = {}
        for key, value in attrs.items():
            vlmeta[attrvalues.check_name(key)] = encode_vlmeta(value, self._cparams)
        build_trailer(list(vlmeta.items()))  # the limits, checked before anything is written
        self._write_state(bytearray(self._header), self._committed.copy(), vlmeta, None)
        self._vlmeta = vlmeta

    def chunk_path(self, nchunk: int) -> str:
        """The file holding chunk ``nchunk`` (the index file for chunks not stored)."""
        if self.contiguous or not 0 <= nchunk < self._n or self._offs[nchunk] < 0:
            return self._index_path
        return self._chunk_file(int(self._offs[nchunk]))

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        """``(offset or file number, write serial)``: changes whenever the chunk is rewritten.

        Chunks untouched since opening have serial -1; every write gets a new one,
        so even a rewrite at a reclaimed offset or a reused file number differs.
        """
        if not 0 <= nchunk < self._n:
            return (-1, -1)
        return self._stamps.get(nchunk) or (int(self._offs[nchunk]), -1)

    def close(self) -> None:
        """Release file handles.  Anything not committed is lost, by design."""
        with self._lock:
            handles = ([self._fd] if self._fd is not None else []) + self._retired
            self._fd, self._retired = None, []
        for h in handles:
            h.close()
        self.release_lock()

    def describe(self) -> str:
        kind = "file" if self.contiguous else "sparse directory"
        return f"{self._kind} frame {kind} {self.store.url(self.path)!r}"
