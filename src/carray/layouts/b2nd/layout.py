"""The b2nd layout: an array kept as a python-blosc2 ``.b2nd`` frame, read and modified in place.

Format facts relied on are in docs/formats/b2frame.md (frames, metalayers, special
offsets, vlmeta) and docs/formats/blosc2-chunk.md; parsing and validation are
:class:`carray.layouts.b2nd.frame.Frame`'s, byte building :mod:`carray.layouts.b2nd.header`'s.
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
it exceeds a quarter of what the commit refers to the file is rewritten packed
under a temporary name and renamed over the old one, as is any commit of an
empty frame (c-blosc2 wants its trailer right after the header then) or of a
header larger than a page.  Readers in other processes therefore never see bytes
they were given change: what a commit they opened refers to stays where it is
until a rename replaces the whole file (their handle keeps the old one).

Sparse: every new chunk version goes to a new file number (temporary name, then
rename); a commit fsyncs them and the directory, replaces ``chunks.b2frame``
atomically, fsyncs the directory, and only then deletes the files no commit has
referred to for ``GRACE`` seconds, or sooner once they pass both a quarter of the
space the commit uses and ``GRACE_BYTES`` (readers of an older commit still read
them; the rest go when the writer closes).  A writer killed at any point leaves the frame at
its last commit; the next writer drops what it left behind (bytes past the frame and
its record, orphan chunk files).

Checks.  Every commit records the digest of each chunk carray wrote, of each 4 KiB
page of it, and of the frame's header, offsets and trailer, in a record after the
frame's end (where c-blosc2 never reads), and marks the header as carray's (:mod:`carray.layouts.b2nd.digests`).  Whole-chunk
reads check the chunk's digest, ranged reads the pages they fetch; frames another
program wrote or changed since (their header lacks the mark) read unchecked.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from carray.attrs import values as attrvalues
from carray.chunks import geometry as geo
from carray.chunks.grid import NDGrid
from carray.codecs.blosc import BLOSC1_HEADER, BLOSC2_HEADER, ChunkBytes, read_header
from carray.codecs.pages import ChunkDigests
from carray.errors import (
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    UnsupportedDTypeError,
)
from carray.layouts.b2nd import chunk as _chunk
from carray.layouts.b2nd.commit import DEAD_SHARE, FrameCommitter, FrameSpec, Moves
from carray.layouts.b2nd.frame import Frame, decode_vlmeta
from carray.layouts.b2nd.header import SPARSE_INDEX, build_trailer
from carray.layouts.b2nd.meta import (
    CARRAY_META,
    _ChunkFile,
    chunk_file_name,
    cparams_of,
    is_b2nd_frame,
    new_frame_parts,
    parse_carray_meta,
    recorded_dtype,
)
from carray.layouts.b2nd.plugins import frame_decoded
from carray.layouts.b2nd.write import encode_vlmeta, special_code_of
from carray.layouts.base import ArrayMeta, ChunkReader, Layout, clear_for_create
from carray.stores import LOCAL, Handle, Store
from carray.stores.staging import remove_quietly
from carray.stores.tempnames import temporary_name

__all__ = ["DEAD_SHARE", "B2ndLayout", "chunk_file_name", "is_b2nd_frame"]

_NOT_STORED = (_chunk.ZERO, _chunk.NAN, _chunk.UNINIT)
_READERS = 256  # chunk readers kept (see B2ndLayout.chunk_reader)
_ZERO = _chunk.special_offset(_chunk.ZERO)


class B2ndLayout(Layout):
    """A python-blosc2 ``b2nd`` frame: one file (contiguous) or a sparse directory.

    Use :meth:`create` or :meth:`open`; see the module docstring for the format
    and the commit protocol.  Frames written by python-blosc2 and caterva open
    too (caterva frames store no dtype: their items read as unsigned ints of the
    item size, or raw bytes).

    The layout owns the working state (the chunk offsets and sizes written since the
    last commit, the readers kept); its :class:`~carray.layouts.b2nd.commit.FrameCommitter`
    owns the frame on disk (the file, where new chunks go, digests, the committed
    header, offsets and vlmeta).
    """

    in_memory = False
    blosc1 = False
    concurrent_reads = True  # preads on shared descriptors; caches behind a lock
    pads_edges = True

    def __init__(self, path: str, frame: Frame, readonly: bool, fsync: bool,
                 store: Store = LOCAL, verify: bool | str = True) -> None:
        super().__init__(readonly)
        self.store = store
        self.path = path
        self.fsync = fsync
        #: True: check the digests of what is read; "full": ranged reads fetch and check
        #: the whole chunk first; False: no checks.
        self.verify = verify
        # Readers of the chunks read last: nchunk -> (offset, reader), under _lock.
        self._readers: OrderedDict[int, tuple[int, ChunkReader]] = OrderedDict()
        self.contiguous = frame.contiguous
        self._index_path = path if frame.contiguous else store.join(path, SPARSE_INDEX)
        self._lock = threading.Lock()
        self._serial = 0
        self._stamps: dict[int, tuple[int, int]] = {}
        self._load(frame)

    # -- creation and opening -------------------------------------------------------------

    @classmethod
    def create(cls, path: str, meta: ArrayMeta, mode: str = "a",
               fsync: bool = True, contiguous: bool = True,
               store: Store = LOCAL, kind: str = "b2nd",
               verify: bool | str = True) -> B2ndLayout:
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
        verify : bool or 'full'
            What reads check (see :attr:`verify`).

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
            tmp = temporary_name(path)
            store.makedirs(tmp)
            try:
                store.put(store.join(tmp, SPARSE_INDEX), (header, index, trailer), fsync=fsync)
                store.rename(tmp, path)
            except BaseException:
                remove_quietly(store, tmp)
                raise
        if fsync:
            store.sync_dir(parent)
        return cls.open(path, readonly=False, fsync=fsync, store=store, verify=verify)[0]

    @classmethod
    def open(cls, path: str, readonly: bool = False, fsync: bool = True,
             store: Store = LOCAL, verify: bool | str = True
             ) -> tuple[B2ndLayout, ArrayMeta, int]:
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
            frame = Frame((store, path), verify=bool(verify))
        except FileNotFoundError:
            raise FormatError(f"directory without {SPARSE_INDEX}: not a sparse Blosc2 frame",
                              store.url(path)) from None
        try:
            layout = cls(path, frame, readonly, fsync, store, verify)
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
        nd_at = hdr.meta_offsets[self._kind] + 5  # past C6 and the uint32 length
        self._cparams = cparams_of(hdr.compcode, hdr.clevel, hdr.filters, hdr.filters_meta)
        self._plugins = hdr.compcode == 6 or any(f >= 32 and f != 35 for f in hdr.filters)
        carray_at: int | None = None
        dflt, expectedlen, cbytes = np.zeros((), self._dtype), None, hdr.cbytes
        if CARRAY_META in frame.meta_raw:
            carray_at = hdr.meta_offsets[CARRAY_META] + 5
            raw = frame.meta_raw[CARRAY_META]
            self._dtype = recorded_dtype(raw, self._dtype, path, carray_at)
            dflt, expectedlen, cbytes = parse_carray_meta(raw, self._dtype, path, carray_at)
        offsets = frame.offsets_array()
        self._check_offsets(offsets, hdr.cbytes)
        self._offs = offsets.copy()
        self._cb = np.full(len(offsets), -1, np.int64)  # stored size per chunk, -1 unknown
        self._n = len(offsets)
        spec = FrameSpec(
            store=self.store, path=self.path, index_path=self._index_path, fsync=self.fsync,
            contiguous=self.contiguous, readonly=self.readonly, kind=self._kind,
            dtype=self._dtype, cparams=self._cparams, chunk_nbytes=self._chunk_nbytes,
            block_nbytes=self._block_nbytes, header_len=self._header_len, nd_at=nd_at,
            nd_len=len(frame.meta_raw[self._kind]), carray_at=carray_at,
            carray_len=len(frame.meta_raw.get(CARRAY_META, b"")))
        self._frames = FrameCommitter(spec, frame, offsets)
        self._opened_meta = ArrayMeta(
            dtype=self._dtype, shape=self._shape, chunks=self._chunks, blocks=self._blocks,
            cparams=self._cparams, dflt=dflt,
            expectedlen=expectedlen if expectedlen is not None else
            (self._shape[0] if self._shape else 0))
        self._opened_cbytes = cbytes

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

    def _grid_nchunks(self, shape: tuple[int, ...]) -> int:
        return self._grid(shape).nchunks

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

    def _checks(self, nchunk: int, off: int) -> ChunkDigests | None:
        """The digests reads of chunk ``nchunk``, stored at ``off``, check (None: none are
        known, or reads are not checked)."""
        return self._frames.digests_of(nchunk, off) if self.verify else None

    def _extent(self, nchunk: int, off: int,
                digests: ChunkDigests | None = None) -> tuple[int, int]:
        """(file position, stored size) of a stored chunk of a contiguous frame (its size
        as ``digests`` record it, when given)."""
        start = self._header_len + off
        size = int(self._cb[nchunk])
        if size < 0:
            limit = self._frames.room(start)
            if digests is None:
                head = self._frames.file().pread(BLOSC1_HEADER, start)
                size = self._check_head(head, self.path, start, nchunk, limit)
            elif digests.size > limit:
                raise FormatError(f"chunk {nchunk} of {digests.size} bytes runs past the "
                                  f"chunk data ({limit} bytes left)", self.path, start)
            else:
                size = digests.size
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
        return self._frames.spec.chunk_file(number)

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

    def stored_digests(self, nchunk: int) -> ChunkDigests | None:
        """The digests reads of chunk ``nchunk`` check (None: not stored, or none known),
        for verifiers, which check every page digest as well as the chunk's."""
        off = self._offset(nchunk)
        return self._checks(nchunk, off) if off >= 0 else None

    def read_chunk(self, nchunk: int) -> bytes | memoryview:
        """The stored chunk ``nchunk`` (a synthesised 32-byte chunk when not stored)."""
        return self.read_chunk_into(nchunk, lambda n: np.empty(n, np.uint8))

    def read_chunk_into(self, nchunk: int,
                        scratch: Callable[[int], np.ndarray]) -> bytes | memoryview:
        """Chunk ``nchunk`` read into ``scratch(nbytes)`` (no allocation per read)."""
        off = self._offset(nchunk)
        if off < 0:
            return self._special(off)
        digests = self._checks(nchunk, off)
        if self.contiguous:
            start, size = self._extent(nchunk, off, digests)
            view = scratch(size).data.cast("B")[:size]
            got, name = self._frames.file().pread_into(view, start), self.path
        else:
            start, name = 0, self._chunk_file(off)
            with self._open_chunk_file(nchunk, off) as h:
                size = h.size if digests is None else digests.size
                view = scratch(size).data.cast("B")[:size]
                got = h.pread_into(view, 0)
                if h.size != size:
                    raise FormatError(f"chunk file of {h.size} bytes, {size} recorded", name)
            if digests is None:
                self._check_head(view[:got], name, 0, nchunk, got)
        if got != size:
            raise FormatError(f"chunk {nchunk} truncated: {got} of {size} bytes", name, start)
        if digests is not None:
            digests.check(view, name, start)
        if self._plugins:  # python-blosc2 may have used a plugin only the frame decodes
            return frame_decoded(self.store, self.path, nchunk, view, self._typesize,
                                 self._block_nbytes)
        return view

    def chunk_reader(self, nchunk: int) -> tuple[Callable[[int, int], bytes], int]:
        """``(read_at(offset, length), size)``: reads only the bytes asked for.

        Readers are kept for the chunks read last (with what decoders parsed from them,
        their header and block table), so reading a few items of one chunk after
        another costs one read of the blocks holding them.
        """
        off = self._offset(nchunk)
        # A plugin chunk is read whole, decoded in its frame; with verify="full" every
        # chunk is, so its digest is checked first.
        if off < 0 or self._plugins or self.verify == "full":
            data = self._special(off) if off < 0 else bytes(self.read_chunk(nchunk))
            return ChunkReader(len(data), lambda o, n: bytes(data[o:o + n])), len(data)
        with self._lock:
            cached = self._readers.get(nchunk)
            if cached is not None and cached[0] == off:
                self._readers.move_to_end(nchunk)
                return cached[1], cached[1].size
        reader = self._new_reader(nchunk, off)
        with self._lock:
            self._readers[nchunk] = (off, reader)
            if len(self._readers) > _READERS:
                self._readers.popitem(last=False)
        return reader, reader.size

    def _new_reader(self, nchunk: int, off: int) -> ChunkReader:
        """Ranged reads of stored chunk ``nchunk`` at ``off``, checked page by page against
        its digests when it has them."""
        digests = self._checks(nchunk, off)
        if not self.contiguous:
            name = self._chunk_file(off)
            try:
                reader = _ChunkFile(self.store, name)
            except FileNotFoundError:
                raise self._missing(nchunk, off) from None
            if digests is None:
                return ChunkReader(reader.size, reader, reader.read_into, {})
            if reader.size != digests.size:
                raise FormatError(f"chunk file of {reader.size} bytes, {digests.size} "
                                  "recorded", name)
            paged = digests.reader(reader, name, 0, reader.read_into)
            return ChunkReader(paged.size, paged.read, paged.read_into, {})
        start, size = self._extent(nchunk, off, digests)
        fd = self._frames.file()  # compaction retires, never closes, a handle in use

        def read_at(offset: int, length: int) -> bytes:
            offset = max(0, min(offset, size))
            return fd.pread(max(0, min(length, size - offset)), start + offset)

        def read_into(offset: int, out: Any) -> int:
            view = memoryview(out).cast("B")[:max(0, size - offset)]
            return fd.pread_into(view, start + offset)

        if digests is None:
            return ChunkReader(size, read_at, read_into, {})
        # Every byte handed out is checked against the digest of its page.
        paged = digests.reader(read_at, self.path, start, read_into)
        return ChunkReader(size, paged.read, paged.read_into, {})

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
            return self._extent(nchunk, off, self._frames.digests_of(nchunk, off))[1]
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
        self._frames.discard(off, size)
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
        self._forget_reader(nchunk)
        old = self._release(nchunk)
        code = special_code_of(data)
        if code in _NOT_STORED and h.cbytes == BLOSC2_HEADER:
            off, size = _chunk.special_offset(code), 0
        else:
            off, size = self._frames.store_chunk(data, digest), len(data)
        self._ensure(nchunk + 1)
        with self._lock:
            self._offs[nchunk], self._cb[nchunk] = off, size
        self._n = max(self._n, nchunk + 1)
        self._serial += 1
        self._stamps[nchunk] = (off, self._serial)
        return size - old

    def _forget_reader(self, nchunk: int) -> None:
        """Drop the kept reader of chunk ``nchunk`` (its bytes are being replaced: a new
        version may reuse the offset of one never committed)."""
        with self._lock:
            self._readers.pop(nchunk, None)

    def chunk_digest(self, data: bytes) -> bytes:
        """The chunk's digest and page digests (recorded at the next commit)."""
        return self._frames.chunk_digest(data)

    def drop_chunks(self, first: int) -> int:
        """Forget chunks ``first`` and above; returns the (negative) change in stored bytes."""
        self._check_writable()
        first = max(int(first), 0)
        removed = 0
        for n in range(self._n - 1, first - 1, -1):  # last first, so the tail is reclaimed
            self._forget_reader(n)
            removed += self._release(n)
            self._stamps.pop(n, None)
        if first < self._n:
            self._cb[first:self._n] = -1
            self._n = first
        return -removed

    def commit(self, meta: ArrayMeta, cbytes: int, message: str | None = None) -> None:
        """Make every chunk written so far durable, then record ``meta.shape`` (frames
        keep no versions: ``message`` is not recorded).

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
        n = self._grid_nchunks(shape)
        # Until the new state is written, a failure must leave the old one in memory too.
        saved = (self._n, self._offs.copy(), self._cb.copy(), dict(self._stamps))
        point = self._frames.savepoint()
        try:
            if self._n > n:
                self.drop_chunks(n)
            if self._n < n:
                self._ensure(n)
                with self._lock:
                    self._offs[self._n:n], self._cb[self._n:n] = _ZERO, 0
                self._n = n
            moves = self._frames.commit(meta, self._recorded_shapes(shape), cbytes,
                                        self._offs[:n].copy(), self._size_of)
        except BaseException:
            self._n, self._offs, self._cb, self._stamps = saved
            self._frames.roll_back(point)
            raise
        self._shape = shape
        self._follow(moves)
        # Committed: tidying up may fail (a full disk) without undoing that.
        with contextlib.suppress(OSError):
            self._follow(self._frames.tidy(self._size_of))

    def _follow(self, moves: Moves | None) -> None:
        """Move the working offsets where a rewrite of the frame file put their chunks."""
        if moves is None:
            return
        with self._lock:
            self._readers.clear()
            live = self._offs[:self._n] >= 0
            self._offs[:self._n][live] = [moves[int(o)] for o in self._offs[:self._n][live]]

    # -- metadata -------------------------------------------------------------------------

    def load_attrs(self) -> dict[str, Any]:
        """The frame's vlmeta, decoded as python-blosc2 does (msgpack values), carray's
        own typed values included (:mod:`carray.attrs.pack`)."""
        return {name: decode_vlmeta(raw, f"{self._index_path} (vlmeta {name!r})")
                for name, raw in self._frames.vlmeta.items()}

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
        self._follow(self._frames.save_vlmeta(vlmeta, self._offs[:self._n].copy(),
                                              self._size_of))

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
        self._frames.close(self._size_of)
        with self._lock:
            self._readers.clear()
        self.release_lock()

    def describe(self) -> str:
        kind = "file" if self.contiguous else "sparse directory"
        return f"{self._kind} frame {kind} {self.store.url(self.path)!r}"
