"""Committing a b2nd frame: offsets, trailer and header, the digests carray records, and
compaction.

:class:`FrameCommitter` owns the frame as it is on disk: the frame file's handle
(contiguous), where new chunks go (the end of the file, or the next chunk file number),
the digests of the chunks written, and the committed header, offsets and vlmeta.
:class:`carray.layouts.b2nd.layout.B2ndLayout` holds one and owns the working chunk
offsets; it tells the committer what it fixed at opening through a :class:`FrameSpec`,
and the stored sizes of its chunks through a ``size_of(nchunk)`` callable.  The layout's
module docstring describes the commit protocol, :mod:`carray.layouts.b2nd.digests` the
record of digests every commit writes.
"""

from __future__ import annotations

import contextlib
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.codecs.checksums import get_checksum
from carray.codecs.pages import PAGE_SIZE, ChunkDigests
from carray.core.params import CParams
from carray.errors import FormatError
from carray.layouts.b2nd.chunk import ZERO, special_offset
from carray.layouts.b2nd.digests import (
    NO_DIGESTS,
    NOT_STORED,
    Entry,
    build_record,
    seal,
    sealed_size,
    set_mark,
)
from carray.layouts.b2nd.frame import Frame
from carray.layouts.b2nd.header import (
    build_nd_meta,
    build_trailer,
    patch_header,
)
from carray.layouts.b2nd.meta import CARRAY_META, carray_meta, chunk_file_name
from carray.layouts.b2nd.write import offsets_chunk
from carray.layouts.base import ArrayMeta
from carray.stores import Handle, Store
from carray.stores.tempnames import is_temporary

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
_CHUNK_FILE = re.compile(r"([0-9A-F]{8})\.chunk")
#: ``lookup(nchunk, offset)``: the digests of a stored chunk, if known.
Lookup = Callable[[int, int], ChunkDigests | None]
#: ``size_of(nchunk)``: the stored bytes of the layout's working chunk ``nchunk``.
SizeOf = Callable[[int], int]
#: Where a rewrite moved chunks: old offset -> new offset (contiguous frames).
Moves = dict[int, int]


@dataclass(frozen=True)
class FrameSpec:
    """What a committer knows of its frame, fixed while the frame is open."""

    store: Store
    #: The frame file (contiguous) or sparse directory.
    path: str
    #: The file holding the header, offsets and trailer.
    index_path: str
    fsync: bool
    contiguous: bool
    readonly: bool
    #: The N-d metalayer: ``'b2nd'`` or ``'caterva'``.
    kind: str
    dtype: np.dtype
    cparams: CParams
    chunk_nbytes: int
    block_nbytes: int
    header_len: int
    #: Where the N-d metalayer's bytes start in the header, and their length.
    nd_at: int
    nd_len: int
    #: The same for the ``carray`` metalayer (None: the frame has none).
    carray_at: int | None
    carray_len: int

    def chunk_file(self, number: int) -> str:
        """The path of a sparse frame's chunk file ``number``."""
        return self.store.join(self.path, chunk_file_name(number))


class FrameCommitter:
    """Making a frame's writes durable (see the layout's module doc).

    Parameters
    ----------
    spec : FrameSpec
        The frame's fixed facts.
    frame : Frame
        The frame as parsed at opening (its handle is taken by read-only contiguous
        committers: a writer may rename a rewritten file over the path since).
    offsets : ndarray
        The committed chunk offsets, checked by the layout.
    """

    def __init__(self, spec: FrameSpec, frame: Frame, offsets: np.ndarray) -> None:
        self.spec = spec
        self._ck, self._page = get_checksum("adler32"), PAGE_SIZE
        self._lock = threading.Lock()  # the frame file's handle is replaced under it
        self._fd: Handle | None = None
        self._retired: list[Handle] = []  # handles on files compaction replaced
        self._header = bytearray(frame.header_bytes)
        self._vlmeta = dict(frame.vlmeta_raw)
        self._committed = offsets
        self._opened = offsets  # the offsets the opening digests (``_table``) are for
        self._table = frame.digests  # None: unchecked (another program's, or verify off)
        # Digests of the chunk versions written since opening, by offset (or file number).
        self._written: dict[int, ChunkDigests] = {}
        self._frame_len = frame.header.frame_len
        # Contiguous: where the offsets chunk starts, where new chunks go, and the bytes
        # of offsets chunk, trailer and record.
        self._data_end = self._end = self._tail = 0
        # Sparse: the chunk files the commit uses, those it stopped using (file ->
        # (when, size)), those written since, and the next file number.
        self._committed_files: set[int] = set()
        self._unreferenced: dict[int, tuple[float, int]] = {}
        self._pending: set[int] = set()
        self._next_file = 0
        if spec.contiguous:
            self._fd = frame.take_handle() if spec.readonly else \
                spec.store.open(spec.path, "r+")
            end = frame.header.frame_len + frame.record_len  # the frame, then the record
            if not spec.readonly and self._fd.size > end:
                # Left by a writer killed before its commit: nothing committed is there.
                self._fd.truncate(end)
            self._data_end = spec.header_len + frame.header.cbytes
            self._end = end
            self._tail = end - self._data_end
        else:
            self._committed_files = {int(o) for o in offsets[offsets >= 0]}
            self._next_file = max(self._committed_files, default=-1) + 1
            if not spec.readonly:
                self._remove_orphans()

    # -- what the layout asks -----------------------------------------------------------------

    def file(self) -> Handle:
        """The open frame file (contiguous frames hold one until closed)."""
        fd = self._fd
        if fd is None:
            raise ValueError(f"{self.spec.path}: the frame file is closed")
        return fd

    @property
    def vlmeta(self) -> Mapping[str, bytes]:
        """The committed vlmeta, raw."""
        return self._vlmeta

    def committed_offsets(self) -> np.ndarray:
        """The offsets (contiguous) or chunk file numbers (sparse) of the last commit."""
        return self._committed.copy()

    def room(self, start: int) -> int:
        """Bytes a contiguous frame's chunk starting at file position ``start`` may span: a
        committed chunk ends inside the data region, one written since before the end."""
        return (self._data_end if start < self._data_end else self._end) - start

    def savepoint(self) -> int:
        """What :meth:`roll_back` restores: where new chunks go."""
        return self._end

    def roll_back(self, point: int) -> None:
        """Forget the space reclaimed since :meth:`savepoint` (a failed commit's chunks
        are the layout's again)."""
        self._end = point

    def digests_of(self, nchunk: int, off: int) -> ChunkDigests | None:
        """The digests of the chunk stored at ``off`` (offset or file number), chunk
        ``nchunk`` when it was there at opening (None: none are known)."""
        found = self._written.get(off)
        if found is not None:
            return found
        if self._table is not None and nchunk < len(self._opened) \
                and int(self._opened[nchunk]) == off:
            return self._table.get(nchunk)
        return None

    def chunk_digest(self, data: bytes) -> bytes:
        """The chunk's digest and page digests, packed."""
        return ChunkDigests.of(data, self._ck, self._page).packed

    # -- chunks written -------------------------------------------------------------------

    def store_chunk(self, data: bytes, packed: bytes | None) -> int:
        """Store a new chunk version where no commit looks; returns its offset (contiguous)
        or file number (sparse).  ``packed``: :meth:`chunk_digest` of ``data``, if known."""
        spec = self.spec
        if spec.contiguous:
            off = self._end - spec.header_len
            self.file().pwrite(data, self._end)
            self._end += len(data)
        else:
            off = self._next_file
            self._next_file += 1
            spec.store.put(spec.chunk_file(off), data, fsync=False)
            self._pending.add(off)
        self._written[off] = self._digests(data, packed)
        return off

    def _digests(self, data: bytes, packed: bytes | None) -> ChunkDigests:
        """The digests of the stored chunk ``data`` (``packed``: :meth:`chunk_digest` of
        it, worked out on the thread that compressed it)."""
        if packed is not None:
            try:
                return ChunkDigests.unpack(packed, len(data), self._ck, self._page)
            except ValueError:  # made for more bytes than the chunk holds
                pass
        return ChunkDigests.of(data, self._ck, self._page)

    def discard(self, off: int, size: int) -> None:
        """The layout no longer uses the chunk version at ``off`` (``size`` bytes): reclaim
        its space when no commit refers to it."""
        spec = self.spec
        if spec.contiguous:
            start = spec.header_len + off
            if start >= self._frame_len and start + size == self._end:
                self._end = start  # the last thing appended, never committed: reuse it
        elif off not in self._committed_files:
            self._pending.discard(off)
            try:
                spec.store.delete(spec.chunk_file(off))
            except FileNotFoundError:
                pass

    # -- committing -----------------------------------------------------------------------

    def commit(self, meta: ArrayMeta, recorded: tuple[tuple[int, ...], tuple[int, ...]],
               cbytes: int, offsets: np.ndarray, size_of: SizeOf) -> Moves | None:
        """Record ``offsets`` (the layout's working offsets, all of them) and ``meta.shape``
        as the committed state; the N-d metalayer records the ``recorded`` chunk and block
        shapes.  Returns where chunks moved, if the file was rewritten: the layout's
        offsets follow before anything else is asked (see :meth:`tidy`)."""
        spec = self.spec
        header = bytearray(self._header)
        dtype = spec.dtype if spec.kind == "b2nd" else None
        chunks, blocks = recorded
        header[spec.nd_at:spec.nd_at + spec.nd_len] = self._fixed(
            build_nd_meta(tuple(meta.shape), chunks, blocks, dtype), spec.nd_len, spec.kind)
        if spec.carray_at is not None:
            raw = carray_meta(spec.dtype, meta.dflt, meta.expectedlen, cbytes,
                              with_dtype=spec.kind == "caterva")
            header[spec.carray_at:spec.carray_at + spec.carray_len] = self._fixed(
                raw, spec.carray_len, CARRAY_META)
        live = None if spec.contiguous else _live(offsets, size_of)
        moves = self._write_state(header, offsets, self._vlmeta, live, offsets, size_of)
        self._forget_unreferenced()
        return moves

    def tidy(self, size_of: SizeOf) -> Moves | None:
        """After a commit (that may not be undone): compact a contiguous frame with too
        much dead space, or delete the sparse chunk files due.  Returns where chunks
        moved, if the file was rewritten."""
        if not self.spec.contiguous:
            self._delete_unreferenced(self._committed, size_of)
            return None
        n = len(self._committed)
        live = self.spec.header_len + _live(self._committed, size_of) + self._tail
        if self._end - live > DEAD_SHARE * live:
            return self._rewrite(bytearray(self._header), self._committed.copy(),
                                 self._vlmeta, self._committed[:n], size_of)
        return None

    def save_vlmeta(self, vlmeta: dict[str, bytes], working: np.ndarray,
                    size_of: SizeOf) -> Moves | None:
        """Commit ``vlmeta`` with the committed chunks (``working``: the layout's working
        offsets, which a rewrite moves too).  Returns where chunks moved, if anywhere."""
        moves = self._write_state(bytearray(self._header), self._committed.copy(), vlmeta,
                                  None, working, size_of)
        self._vlmeta = vlmeta
        return moves

    def close(self, size_of: SizeOf) -> None:
        """Delete the sparse chunk files no commit uses (a writer's), close the handles."""
        if not self.spec.contiguous and not self.spec.readonly and self._unreferenced:
            with contextlib.suppress(OSError):  # else the next writer's open removes them
                self._delete_unreferenced(self._committed, size_of, grace=0.0)
            # Closed, the lock released: a second close (the finalizer's) must not delete
            # files that are the next writer's business.
            self._unreferenced.clear()
        with self._lock:
            handles = ([self._fd] if self._fd is not None else []) + self._retired
            self._fd, self._retired = None, []
        for h in handles:
            h.close()

    def _fixed(self, raw: bytes, length: int, name: str) -> bytes:
        if len(raw) != length:
            raise FormatError(f"{name} metalayer would change size ({length} -> {len(raw)} "
                              "bytes); it cannot be rewritten in place", self.spec.index_path)
        return raw

    # -- digests ----------------------------------------------------------------------------

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
        :meth:`digests_of`)."""
        index = offsets_chunk(offsets, self.spec.cparams) if len(offsets) else b""
        record = self._record_of(offsets, lookup or self.digests_of)
        return index, build_trailer(list(vlmeta.items())), record

    def _sealed(self, header: bytearray, index: bytes, trailer: bytes, record: bytes) -> bytes:
        """Mark ``header`` as carray's and fill in the frame digest, once the header's
        sizes are final; returns the trailer and the record after it."""
        set_mark(header, True)
        return trailer + seal(header, index + trailer, record, self._ck)

    def _forget_unreferenced(self) -> None:
        """Drop the digests of chunk versions the committed offsets (just written: the
        working ones too) do not refer to."""
        keep = set(self._committed.tolist())
        self._written = {o: d for o, d in self._written.items() if o in keep}

    # -- writing the state ------------------------------------------------------------------

    def _write_state(self, header: bytearray, offsets: np.ndarray, vlmeta: dict[str, bytes],
                     live: int | None, working: np.ndarray, size_of: SizeOf) -> Moves | None:
        """Write ``offsets`` and ``vlmeta`` as the new committed state (see module doc).

        ``live`` is the sparse header's cbytes (None keeps the committed one);
        ``working`` the layout's working offsets, moved too if the file is rewritten.
        """
        spec = self.spec
        nbytes = len(offsets) * spec.chunk_nbytes
        if spec.contiguous and (spec.header_len > _PAGE or not len(offsets)):
            # A header too big for one page-sized write, or an empty frame (c-blosc2
            # expects its trailer right after the header): replace the whole file.
            return self._rewrite(header, offsets, vlmeta, working, size_of)
        index, trailer, record = self._index_and_trailer(offsets, vlmeta)
        sizes: dict[str, Any] = dict(nbytes=nbytes, has_vlmeta=bool(vlmeta),
                                     chunksize=spec.chunk_nbytes, blocksize=spec.block_nbytes)
        if not spec.contiguous:
            if spec.fsync:
                for number in sorted(self._pending):
                    spec.store.sync_file(spec.chunk_file(number))
                if self._pending:
                    spec.store.sync_dir(spec.path)
            if live is None:
                live = struct.unpack_from(">q", header, 39)[0]
            patch_header(header, frame_len=len(header) + len(index) + len(trailer), cbytes=live,
                         **sizes)
            end = self._sealed(header, index, trailer, record)
            spec.store.put(spec.index_path, (header, index, end), fsync=spec.fsync)
            if spec.fsync:
                spec.store.sync_dir(spec.path)
            self._pending.clear()
        else:
            pos = self._end
            frame_len = pos + len(index) + len(trailer)
            patch_header(header, frame_len=frame_len, cbytes=pos - spec.header_len, **sizes)
            end = self._sealed(header, index, trailer, record)
            self.file().pwrite(index + end, pos)
            self._sync()  # chunks, offsets, trailer and record stored before the header
            self.file().pwrite(header, 0)  # the commit point
            self._sync()
            self._data_end, self._frame_len = pos, frame_len
            self._end = pos + len(index) + len(end)  # new chunks go after the record
            self._tail = len(index) + len(end)
        self._header = header
        self._committed = offsets
        return None

    def _sync(self) -> None:
        """fsync the frame file; on object stores, put it back (always: it is the write)."""
        if self.spec.fsync or self.spec.store.remote:
            self.file().sync()

    def _delete_unreferenced(self, offsets: np.ndarray, size_of: SizeOf,
                             grace: float = GRACE) -> None:
        """After a sparse commit: remove chunk files the old commits alone referred to,
        once no commit has referred to them for ``grace`` seconds, or sooner (oldest
        first) when they take more than ``DEAD_SHARE`` of the space the commit uses and
        more than ``GRACE_BYTES``.

        A reader in another process reads the chunk files of the commit it opened:
        deleting them at once would fail reads that began just before this commit
        (they would open the frame again and retry, and fail again under a writer
        committing faster than they read).
        """
        spec = self.spec
        keep = {int(o) for o in offsets[offsets >= 0]}
        now = time.monotonic()
        for number in sorted(self._committed_files - keep):
            if number not in self._unreferenced:
                try:
                    size = spec.store.size(spec.chunk_file(number))
                except FileNotFoundError:
                    continue
                self._unreferenced[number] = (now, size)
        self._committed_files = keep
        # With no grace every file is due: the space the commit uses does not matter.
        budget = max(DEAD_SHARE * _live(offsets, size_of), GRACE_BYTES) if grace else 0.0
        dead = sum(size for _, size in self._unreferenced.values())
        due = []
        for number, (since, size) in sorted(self._unreferenced.items(), key=lambda i: i[1]):
            if now - since >= grace or dead > budget:
                due.append(number)
                dead -= size
        for number in due:
            try:
                spec.store.delete(spec.chunk_file(number))
            except FileNotFoundError:
                pass
            del self._unreferenced[number]
        if due and spec.fsync:
            spec.store.sync_dir(spec.path)

    def _remove_orphans(self) -> None:
        """Delete chunk and temporary files no commit refers to (an interrupted writer's)."""
        spec = self.spec
        removed = False
        for name in spec.store.listdir(spec.path):
            m = _CHUNK_FILE.fullmatch(name)
            orphan = m is not None and int(m.group(1), 16) not in self._committed_files
            if orphan or is_temporary(name):
                try:
                    spec.store.delete(spec.store.join(spec.path, name))
                    removed = True
                except (FileNotFoundError, IsADirectoryError):
                    pass
        if removed and spec.fsync:
            spec.store.sync_dir(spec.path)

    def _rewrite(self, header: bytearray, offsets: np.ndarray, vlmeta: dict[str, bytes],
                 working: np.ndarray, size_of: SizeOf) -> Moves:
        """Write ``offsets`` as the committed state into a new, packed file renamed over
        the frame; chunks written since (in ``working``, not in ``offsets``) follow its
        end.  Returns where every chunk of ``working`` moved.

        ``offsets`` point into the current file, as the working offsets do.
        """
        spec, hlen = self.spec, self.spec.header_len
        packed = offsets.copy()
        moves: list[tuple[int, int, int]] = []  # (old start, size, new start), file order
        where: Moves = {}  # old offset -> new offset

        def place(i: int, off: int, pos: int) -> int:
            if off not in where:
                size = size_of(i)
                where[off] = pos - hlen
                moves.append((hlen + off, size, pos))
                pos += size
            return pos

        pos = hlen
        for i in np.flatnonzero(offsets >= 0).tolist():
            pos = place(i, int(offsets[i]), pos)
            packed[i] = where[int(offsets[i])]
        data_end = pos
        # Digests follow their chunks to where they are about to be.
        known = self._known_digests(offsets) | self._known_digests(working)
        back = {new: old for old, new in where.items()}
        index, trailer, record = self._index_and_trailer(
            packed, vlmeta, lambda i, off: known.get(back.get(off, -1)))
        frame_len = data_end + len(index) + len(trailer)
        after = pos = frame_len + sealed_size(record)  # the record, then chunks written since
        for i in np.flatnonzero(working >= 0).tolist():
            pos = place(i, int(working[i]), pos)
        patch_header(header, frame_len=frame_len, nbytes=len(offsets) * spec.chunk_nbytes,
                     cbytes=data_end - hlen, has_vlmeta=bool(vlmeta),
                     chunksize=spec.chunk_nbytes, blocksize=spec.block_nbytes)
        end = self._sealed(header, index, trailer, record)
        old_fd = self.file()

        def parts() -> Iterator[bytes]:
            yield bytes(header)
            for start, size, new in moves:  # one chunk in memory at a time
                if new == after:
                    yield index + end
                data = old_fd.pread(size, start)
                if len(data) != size:
                    raise FormatError(f"chunk at offset {start} truncated", spec.path, start)
                yield data
            if pos == after:  # nothing after the record
                yield index + end

        if spec.store.remote:
            old_fd.sync()  # else closing the retired handle would put its old bytes back
        spec.store.put(spec.path, parts(), fsync=spec.fsync)
        if spec.fsync:
            spec.store.sync_dir(spec.store.dirname(spec.path))
        with self._lock:
            self._fd = spec.store.open(spec.path, "r+")
            self._retired.append(old_fd)  # readers handed out earlier still use it
        self._written = {where[o]: d for o, d in known.items() if o in where}
        self._table = None
        self._header, self._committed = header, packed
        self._data_end, self._frame_len = data_end, frame_len
        self._end = pos
        self._tail = len(index) + len(end)
        return where

    def _known_digests(self, offsets: np.ndarray) -> dict[int, ChunkDigests]:
        """The known digests of the chunks at ``offsets``, by offset."""
        out: dict[int, ChunkDigests] = {}
        for i, off in enumerate(offsets.tolist()):
            found = self.digests_of(i, off) if off >= 0 else None
            if found is not None:
                out[off] = found
        return out


def _live(offsets: np.ndarray, size_of: SizeOf) -> int:
    """Stored bytes of the chunks ``offsets`` (the layout's working ones) reference."""
    return sum(size_of(i) for i in np.flatnonzero(offsets >= 0).tolist())
