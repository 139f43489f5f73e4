"""Committing a b2nd frame: offsets, trailer and header, the digests carray records, and
compaction.

Mixed into :class:`carray.layouts.b2nd.layout.B2ndLayout`; the module docstring there
describes the commit protocol, :mod:`carray.layouts.b2nd.digests` the record of
digests every commit writes.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from carray.codecs.checksums import Checksum
from carray.codecs.pages import ChunkDigests
from carray.core.params import CParams
from carray.errors import FormatError
from carray.layouts.b2nd.chunk import ZERO, special_offset
from carray.layouts.b2nd.digests import (
    NO_DIGESTS,
    NOT_STORED,
    Entry,
    FrameDigests,
    build_record,
    seal,
    sealed_size,
    set_mark,
)
from carray.layouts.b2nd.header import (
    build_nd_meta,
    build_trailer,
    patch_header,
)
from carray.layouts.b2nd.meta import CARRAY_META, carray_meta
from carray.layouts.b2nd.write import offsets_chunk
from carray.layouts.base import ArrayMeta, ChunkReader
from carray.stores import Handle, Store

#: Seconds a sparse frame's chunk file no commit refers to any more is kept for readers
#: still reading an older commit, as long as such files take at most ``DEAD_SHARE`` of
#: the space the commit uses, or ``GRACE_BYTES`` (all go when the writer closes).
GRACE, GRACE_BYTES = 5.0, 2**20
#: After a commit the frame file is rewritten packed once what no commit refers to any
#: more (replaced chunks, old offsets and trailers) passes this share of what it does:
#: a frame never takes more than 1.25 times the space of the same data written at once.
DEAD_SHARE = 0.25
# The header must fit one page for its rewrite to be a single-sector-ish atomic write.
_PAGE = 4096
_ZERO = special_offset(ZERO)
#: ``lookup(nchunk, offset)``: the digests of a stored chunk, if known.
Lookup = Callable[[int, int], ChunkDigests | None]


class FrameParts:
    """The layout state the commit half reads and writes (declarations only)."""

    store: Store
    path: str
    fsync: bool
    contiguous: bool
    _index_path: str
    _lock: threading.Lock
    _fd: Handle | None
    _retired: list[Handle]
    _n: int
    _offs: np.ndarray
    _cb: np.ndarray
    _stamps: dict[int, tuple[int, int]]
    _shape: tuple[int, ...]
    _chunks: tuple[int, ...]
    _blocks: tuple[int, ...]
    _dtype: np.dtype
    _kind: str
    _cparams: CParams
    _chunk_nbytes: int
    _block_nbytes: int
    _header: bytearray
    _header_len: int
    _nd_at: int
    _nd_len: int
    _carray_at: int | None
    _carray_len: int
    _vlmeta: dict[str, bytes]
    _committed: np.ndarray
    _committed_files: set[int]
    # Sparse: chunk file -> (when commits stopped using it, its size).
    _unreferenced: dict[int, tuple[float, int]]
    _pending: set[int]
    _data_end: int
    _end: int
    _tail: int
    _frame_len: int
    _ck: Checksum
    _page: int
    _table: FrameDigests | None
    _opened: np.ndarray
    _written: dict[int, ChunkDigests]
    _readers: OrderedDict[int, tuple[int, ChunkReader]]

    if TYPE_CHECKING:
        def _check_writable(self) -> None: ...
        def _file(self) -> Handle: ...
        def _size_of(self, nchunk: int) -> int: ...
        def _ensure(self, n: int) -> None: ...
        def _grid_nchunks(self, shape: tuple[int, ...]) -> int: ...
        def _recorded_shapes(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...],
                                                                     tuple[int, ...]]: ...
        def _chunk_file(self, number: int) -> str: ...
        def drop_chunks(self, first: int) -> int: ...


class FrameCommits(FrameParts):
    """Making a frame's writes durable (see the layout's module doc)."""

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
        saved = (self._n, self._offs.copy(), self._cb.copy(), dict(self._stamps),
                 getattr(self, "_end", None))  # sparse frames have no end to append at
        try:
            offsets = self._record(shape, n, meta, cbytes)
        except BaseException:
            self._n, self._offs, self._cb, self._stamps, end = saved
            if end is not None:
                self._end = end
            raise
        self._forget_unreferenced()
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

    # -- digests ----------------------------------------------------------------------------

    def _digests_of(self, nchunk: int, off: int) -> ChunkDigests | None:
        """The digests of the chunk stored at ``off`` (offset or file number), chunk
        ``nchunk`` when it was there at opening (None: none are known)."""
        found = self._written.get(off)
        if found is not None:
            return found
        if self._table is not None and nchunk < len(self._opened) \
                and int(self._opened[nchunk]) == off:
            return self._table.get(nchunk)
        return None

    def _record_of(self, offsets: np.ndarray, lookup: Lookup) -> bytes:
        """The record of the digests of the chunks at ``offsets``, found by
        ``lookup(nchunk, offset)``, frame digest zero."""
        entries: list[Entry] = []
        for i, off in enumerate(offsets.tolist()):
            found = lookup(i, off) if off >= 0 else None
            entries.append(NOT_STORED if off < 0 else found or NO_DIGESTS)
        return build_record(entries, self._ck, self._page)

    def _index_and_trailer(self, offsets: np.ndarray, vlmeta: dict[str, bytes],
                           lookup: Lookup | None = None) -> tuple[bytes, bytes, bytes]:
        """The offsets chunk, trailer and record (frame digest zero) of a commit of
        ``offsets``; see :meth:`_sealed`.  ``lookup`` finds chunk digests (default:
        :meth:`_digests_of`)."""
        index = offsets_chunk(offsets, self._cparams) if len(offsets) else b""
        record = self._record_of(offsets, lookup or self._digests_of)
        return index, build_trailer(list(vlmeta.items())), record

    def _sealed(self, header: bytearray, index: bytes, trailer: bytes, record: bytes) -> bytes:
        """Mark ``header`` as carray's and fill in the frame digest, once the header's
        sizes are final; returns the trailer and the record after it."""
        set_mark(header, True)
        return trailer + seal(header, index + trailer, record, self._ck)

    def _forget_unreferenced(self) -> None:
        """Drop the digests of chunk versions neither the working nor the committed
        offsets refer to any more."""
        keep = set(self._offs[:self._n].tolist()) | set(self._committed.tolist())
        self._written = {o: d for o, d in self._written.items() if o in keep}

    # -- writing the state ------------------------------------------------------------------

    def _write_state(self, header: bytearray, offsets: np.ndarray, vlmeta: dict[str, bytes],
                     live: int | None) -> None:
        """Write ``offsets`` and ``vlmeta`` as the new committed state (see module doc).

        ``live`` is the sparse header's cbytes (None keeps the committed one).
        """
        nbytes = len(offsets) * self._chunk_nbytes
        if self.contiguous and (self._header_len > _PAGE or not len(offsets)):
            # A header too big for one page-sized write, or an empty frame (c-blosc2
            # expects its trailer right after the header): replace the whole file.
            self._rewrite(header, offsets, vlmeta)
            return
        index, trailer, record = self._index_and_trailer(offsets, vlmeta)
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
            end = self._sealed(header, index, trailer, record)
            self.store.put(self._index_path, (header, index, end), fsync=self.fsync)
            if self.fsync:
                self.store.sync_dir(self.path)
            self._pending.clear()
        else:
            pos = self._end
            frame_len = pos + len(index) + len(trailer)
            patch_header(header, frame_len=frame_len, cbytes=pos - self._header_len, **sizes)
            end = self._sealed(header, index, trailer, record)
            self._file().pwrite(index + end, pos)
            self._sync()  # chunks, offsets, trailer and record stored before the header
            self._file().pwrite(header, 0)  # the commit point
            self._sync()
            self._data_end, self._frame_len = pos, frame_len
            self._end = pos + len(index) + len(end)  # new chunks go after the record
            self._tail = len(index) + len(end)
        self._header = header
        self._committed = offsets

    def _sync(self) -> None:
        """fsync the frame file; on object stores, put it back (always: it is the write)."""
        if self.fsync or self.store.remote:
            self._file().sync()

    def _delete_unreferenced(self, offsets: np.ndarray, grace: float = GRACE) -> None:
        """After a sparse commit: remove chunk files the old commits alone referred to,
        once no commit has referred to them for ``grace`` seconds, or sooner (oldest
        first) when they take more than ``DEAD_SHARE`` of the space the commit uses and
        more than ``GRACE_BYTES``.

        A reader in another process reads the chunk files of the commit it opened:
        deleting them at once would fail reads that began just before this commit
        (they would open the frame again and retry, and fail again under a writer
        committing faster than they read).
        """
        keep = {int(o) for o in offsets[offsets >= 0]}
        now = time.monotonic()
        for number in sorted(self._committed_files - keep):
            if number not in self._unreferenced:
                try:
                    size = self.store.size(self._chunk_file(number))
                except FileNotFoundError:
                    continue
                self._unreferenced[number] = (now, size)
        self._committed_files = keep
        budget = max(DEAD_SHARE * self._live(len(offsets)), GRACE_BYTES)
        dead = sum(size for _, size in self._unreferenced.values())
        due = []
        for number, (since, size) in sorted(self._unreferenced.items(), key=lambda i: i[1]):
            if now - since >= grace or dead > budget:
                due.append(number)
                dead -= size
        for number in due:
            try:
                self.store.delete(self._chunk_file(number))
            except FileNotFoundError:
                pass
            del self._unreferenced[number]
        if due and self.fsync:
            self.store.sync_dir(self.path)

    def _maybe_compact(self) -> None:
        n = len(self._committed)
        live = self._header_len + self._live(n) + self._tail
        if self._end - live > DEAD_SHARE * live:
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
        # Digests follow their chunks to where they are about to be.
        known = self._known_digests(offsets) | self._known_digests(self._offs[:self._n])
        back = {new: old for old, new in where.items()}
        index, trailer, record = self._index_and_trailer(
            packed, vlmeta, lambda i, off: known.get(back.get(off, -1)))
        frame_len = data_end + len(index) + len(trailer)
        after = pos = frame_len + sealed_size(record)  # the record, then chunks written since
        for i in np.flatnonzero(self._offs[:self._n] >= 0).tolist():
            pos = place(i, int(self._offs[i]), pos)
        patch_header(header, frame_len=frame_len, nbytes=len(offsets) * self._chunk_nbytes,
                     cbytes=data_end - self._header_len, has_vlmeta=bool(vlmeta),
                     chunksize=self._chunk_nbytes, blocksize=self._block_nbytes)
        end = self._sealed(header, index, trailer, record)
        old_fd = self._file()

        def parts() -> Iterator[bytes]:
            yield bytes(header)
            for start, size, new in moves:  # one chunk in memory at a time
                if new == after:
                    yield index + end
                data = old_fd.pread(size, start)
                if len(data) != size:
                    raise FormatError(f"chunk at offset {start} truncated", self.path, start)
                yield data
            if pos == after:  # nothing after the record
                yield index + end

        if self.store.remote:
            old_fd.sync()  # else closing the retired handle would put its old bytes back
        self.store.put(self.path, parts(), fsync=self.fsync)
        if self.fsync:
            self.store.sync_dir(self.store.dirname(self.path))
        with self._lock:
            self._fd = self.store.open(self.path, "r+")
            self._retired.append(old_fd)  # readers handed out earlier still use it
            self._readers.clear()
            live = self._offs[:self._n] >= 0
            self._offs[:self._n][live] = [where[int(o)] for o in self._offs[:self._n][live]]
            self._written = {where[o]: d for o, d in known.items() if o in where}
            self._table = None
        self._header, self._committed = header, packed
        self._data_end, self._frame_len = data_end, frame_len
        self._end = pos
        self._tail = len(index) + len(end)

    def _known_digests(self, offsets: np.ndarray) -> dict[int, ChunkDigests]:
        """The known digests of the chunks at ``offsets``, by offset."""
        out: dict[int, ChunkDigests] = {}
        for i, off in enumerate(offsets.tolist()):
            found = self._digests_of(i, off) if off >= 0 else None
            if found is not None:
                out[off] = found
        return out

