"""The data files of a superchunk dataset: ``data/sc_KKKKKK[_G].blp``.

Superchunk ``k`` holds chunks ``[k*S, (k+1)*S)``; its records live in the file of
some *generation* ``G`` (0 for the first file, which has no ``_G`` in its name; a
compaction writes the next one whole).  Each file starts with a Bloscpack header
and a metadata section naming the superchunk and generation
(docs/formats/superchunk.md, "Superchunk files"); in the Bloscpack-compatible mode
(Blosc1 chunks, no spare room) an offsets table follows, kept in step with the
newest version so that bloscpack reads the file; then chunk records.

This module owns the files: handles (a bounded number open), sizes, which ones
have unsynced writes, and new files being filled (a new superchunk's records are
appended in order: :mod:`._sc_filling` sends them to the file on a background
thread as they come, and names the file once it holds ``S`` of them or when
something needs it).
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.codecs import parallel as _parallel
from carray.codecs.checksums import Checksum
from carray.errors import FormatError
from carray.formats.bloscpack.frame import (
    HEADER_SIZE,
    METADATA_HEADER_SIZE,
    BlpHeader,
    MetadataHeader,
    decode_metadata,
    dumps_metadata,
    encode_metadata_bytes,
)
from carray.layouts.superchunk.filling import Filling
from carray.layouts.superchunk.meta import DATA_DIR, FORMAT_NAME, StorageInfo
from carray.stores import Handle, Store
from carray.stores.base import BytesHandle

_NAME = re.compile(r"sc_(\d{6,})(?:_(\d+))?\.blp")
_OPEN_FILES = 64
# Bytes read with a file's header: its metadata is a few hundred.
_PREFIX_GUESS = 1024
Key = tuple[int, int]  # (superchunk, generation)


def _done() -> None:
    """Nothing to wait for."""


def file_name(k: int, gen: int) -> str:
    return f"sc_{k:06d}.blp" if gen == 0 else f"sc_{k:06d}_{gen}.blp"


def parse_name(name: str) -> Key | None:
    m = _NAME.fullmatch(name)
    return None if m is None else (int(m.group(1)), int(m.group(2) or 0))


@dataclass
class FileInfo:
    """A data file as opened: its size (where appended records go), where records
    start, and the offsets table of a Bloscpack-compatible file (else None)."""

    size: int
    data_start: int
    offsets_pos: int
    dirty: bool = False
    created: bool = False


class DataFiles:
    """The superchunk files of one dataset directory (see the module doc)."""

    def __init__(self, store: Store, rootdir: str, info: StorageInfo, ck: Checksum,
                 readonly: bool, fsync: bool) -> None:
        self.store = store
        self.info = info
        self.ck = ck
        self.readonly = readonly
        self.fsync = fsync
        self.dir = store.join(rootdir, DATA_DIR)
        self.compat = info.blosc1 and info.spare == 0
        self._S = info.superchunksize
        self._files: dict[Key, FileInfo] = {}
        self._handles: OrderedDict[Key, Handle] = OrderedDict()
        self._busy: dict[Key, int] = {}  # handles being read outside the lock, by key
        self._filling: dict[Key, Filling] = {}
        self._lock = threading.RLock()
        self._created = False  # a file was created since the last sync
        # Syncs running on a background thread that the next sync waits for (see defer).
        self._deferred: tuple[Callable[[], None], Future[None] | None] | None = None

    # -- names ------------------------------------------------------------------------------

    def path(self, key: Key) -> str:
        return self.store.join(self.dir, file_name(*key))

    def url(self, key: Key) -> str:
        return self.store.url(self.path(key))

    def known(self) -> list[Key]:
        """The data files this object has opened or is writing (no listing)."""
        with self._lock:
            return sorted(set(self._filling) | set(self._files))

    def existing(self) -> list[Key]:
        """Every data file present (and those kept in memory)."""
        found = {k for n in self.store.listdir(self.dir) if (k := parse_name(n)) is not None}
        return sorted(found | set(self._filling) | set(self._files))

    # -- file prefixes --------------------------------------------------------------------

    def _metadata(self, key: Key) -> bytes:
        k, gen = key
        meta = {"format": FORMAT_NAME, "superchunk": k, "first_chunk": k * self._S,
                "superchunksize": self._S}
        if gen:
            meta["generation"] = gen
        section, _ = encode_metadata_bytes(dumps_metadata(meta), checksum=self.ck.id,
                                           codec=None, max_meta_size=None)
        return section

    def chunk_size_field(self) -> int:
        n = self.info.chunk_nbytes
        return n if n <= 2**31 - 1 else -1

    def prefix(self, key: Key, offsets: np.ndarray | None = None, last: int = 0
               ) -> list[bytes]:
        """A new file's bytes before its records: header, metadata section and, for a
        Bloscpack-compatible file, the offsets table (``offsets``, else all unused) and
        the decoded size of its last chunk (``last``) in the header."""
        section = self._metadata(key)
        if not self.compat:
            header = BlpHeader(False, True, self.ck.id, self.info.typesize,
                               self.chunk_size_field(), -1, -1, 0)
            return [header.pack(), section]
        table = np.full(self._S, -1, dtype="<i8") if offsets is None else offsets
        used = int(np.argmin(table >= 0)) if not (table >= 0).all() else self._S
        size = self.chunk_size_field()
        header = BlpHeader(True, True, self.ck.id, self.info.typesize, size,
                           min(last, max(size, 0)) if used else 0, used, self._S - used)
        return [header.pack(), section, table.astype("<i8").tobytes()]

    def data_start(self, key: Key) -> int:
        return sum(len(p) for p in self.prefix(key))

    def _check_prefix(self, key: Key, h: Handle) -> FileInfo:
        path = self.url(key)
        head = h.pread(HEADER_SIZE + METADATA_HEADER_SIZE + _PREFIX_GUESS, 0)
        header = BlpHeader.unpack(head[:HEADER_SIZE], path)
        # Files written before versions have an offsets table whatever the mode.
        if not header.metadata or (self.compat and not header.offsets):
            raise FormatError("superchunk file header: wrong sections for this dataset "
                              f"(offsets table {header.offsets}, metadata "
                              f"{header.metadata})", path, 5)
        if header.checksum != self.ck.id:
            raise FormatError(f"checksum id {header.checksum} differs from meta/storage's "
                              f"{self.ck.name}", path, 6)
        if header.offsets and header.total_slots != self._S:
            raise FormatError(f"{header.total_slots} offset slots, meta/storage says "
                              f"superchunksize {self._S}", path, 16)
        mh = MetadataHeader.unpack(head[HEADER_SIZE:], path)
        end = HEADER_SIZE + mh.section_size
        if end > h.size:
            raise FormatError(f"metadata section of {mh.section_size} bytes does not fit a "
                              f"file of {h.size}", path, HEADER_SIZE)
        section = head[HEADER_SIZE:end] if end <= len(head) else h.pread(mh.section_size,
                                                                         HEADER_SIZE)
        obj, _ = decode_metadata(section, path, HEADER_SIZE)
        k, gen = key
        if not isinstance(obj, dict) or obj.get("superchunk") != k or \
                obj.get("generation", 0) != gen or obj.get("superchunksize") != self._S:
            raise FormatError(f"metadata does not name superchunk {k} generation {gen}: "
                              f"{obj!r}", path, HEADER_SIZE)
        start = end + (8 * self._S if header.offsets else 0)
        if start > h.size:
            raise FormatError(f"offsets table runs past the end of the file ({h.size} bytes)",
                              path, end)
        return FileInfo(h.size, start, end)

    # -- handles --------------------------------------------------------------------------

    def _handle(self, key: Key) -> Handle:
        """The open handle of ``key`` (its file written first if kept in memory)."""
        h = self._handles.get(key)
        if h is not None:
            self._handles.move_to_end(key)
            return h
        if key in self._filling:
            self._write_filled(key)
        try:
            h = self.store.open(self.path(key), "r" if self.readonly else "r+")
        except FileNotFoundError:
            raise FormatError(f"superchunk file {file_name(*key)} is missing, but the "
                              "index says it holds chunks", self.url(key)) from None
        if key not in self._files:
            try:
                self._files[key] = self._check_prefix(key, h)
            except BaseException:
                h.close()
                raise
        self._handles[key] = h
        idle = [k for k in self._handles if k not in self._busy and k != key]
        if len(self._handles) > _OPEN_FILES and idle:
            old_key = idle[0]  # the least recently used that no thread is reading
            old = self._handles.pop(old_key)
            info = self._files.get(old_key)
            if info is not None and info.dirty and (self.fsync or self.store.remote):
                old.sync()  # on object stores, the only copy of what was written
                info.dirty = False
            old.close()
        return h

    def file(self, key: Key) -> FileInfo:
        """What is known of file ``key`` (opened and checked the first time)."""
        with self._lock:
            filling = self._filling.get(key)
            if filling is not None:
                return FileInfo(filling.end, self.data_start(key), 0)
            info = self._files.get(key)
            if info is None:
                self._handle(key)
                info = self._files[key]
            return info

    def exists(self, key: Key) -> bool:
        return key in self._files or key in self._filling or \
            self.store.isfile(self.path(key))

    # -- reading --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self, key: Key) -> Iterator[Handle]:
        """The handle of ``key``, kept open (never the one a new open closes) while the
        caller reads it outside the lock: threads decoding chunks of the same file read
        at once."""
        with self._lock:
            h = self._handle(key)
            self._busy[key] = self._busy.get(key, 0) + 1
        try:
            yield h
        finally:
            with self._lock:
                left = self._busy.pop(key) - 1
                if left:
                    self._busy[key] = left

    def pread(self, key: Key, n: int, offset: int) -> bytes:
        with self._reading(key) as h:
            return h.pread(n, offset)

    def pread_into(self, key: Key, buf: Any, offset: int) -> int:
        with self._reading(key) as h:
            return h.pread_into(buf, offset)

    def preadv_into(self, key: Key, bufs: Sequence[Any], offset: int) -> int:
        """Fill ``bufs`` one after another from ``offset`` of file ``key``."""
        with self._reading(key) as h:
            return h.preadv_into(bufs, offset)

    # -- writing --------------------------------------------------------------------------

    def end(self, key: Key) -> int:
        """Where a record appended to file ``key`` goes (a new file: after its prefix)."""
        with self._lock:
            filling = self._filling.get(key)
            if filling is not None:
                return filling.end
            # (object stores: a commit writes files of its own, new by their name)
            if key in self._files or (not self.store.rewrites and
                                      self.store.isfile(self.path(key))):
                return self.file(key).size
            self._filling[key] = filling = Filling(self.store, self.path(key),
                                                   self.data_start(key),
                                                   functools.partial(self.prefix, key),
                                                   self.fsync)
            return filling.end

    def write(self, key: Key, offset: int, parts: Sequence[Any], size: int,
              appended: bool = True) -> None:
        """Write a record's ``parts`` (``size`` bytes of room) at ``offset`` of ``key``.

        A new file keeps the records of chunks ``appended`` in order (so at most a file of
        compressed chunks waits in memory); any other write writes it out first."""
        with self._lock:
            filling = self._filling.get(key)
            if filling is not None and offset == filling.end and not filling.finishing \
                    and appended:
                filling.add(parts, size)
                if filling.count >= self._S:
                    self._land(key)
                return
            h = self._handle(key)
            info = self._files[key]
            pos = offset
            for part in parts:
                h.pwrite(part, pos)
                pos += memoryview(part).nbytes
            if offset + size > info.size:
                if h.size < offset + size:  # the room past the record: zeros, never read
                    h.truncate(offset + size)
                info.size = offset + size
            info.dirty = True

    def truncate(self, key: Key, size: int) -> None:
        """Cut file ``key`` to ``size`` bytes (free space at its end)."""
        with self._lock:
            info = self.file(key)
            if size >= info.size or key in self._filling:
                return
            self._handle(key).truncate(size)
            info.size = size
            info.dirty = True

    def _land(self, key: Key) -> None:
        """Have a full new file written whole on the background threads.  At most two
        full files are being written at once (their records wait in memory until
        then): a third waits for the oldest.  A failure there is kept for the next
        call that needs the file (a flush) to raise."""
        for other in [j for j, f in self._filling.items() if f.finishing][:-1]:
            if self._filling[other].join():
                del self._filling[other]
                self._created = True
        self._filling[key].land()

    def _write_filled(self, key: Key) -> None:
        """Wait until new file ``key`` is written and named; a failure is raised and the
        file is tried again, whole, by the next call."""
        filling = self._filling.get(key)
        if filling is None:
            return
        filling.wait()
        del self._filling[key]
        self._created = True

    def _drop_filling(self, key: Key) -> None:
        filling = self._filling.pop(key, None)
        if filling is not None:
            filling.discard()

    def new_file(self, key: Key, records: Sequence[Any], offsets: np.ndarray | None = None,
                 last: int = 0) -> None:
        """Write file ``key`` whole: its prefix (with ``offsets`` and ``last`` in the
        compatible mode), then ``records``."""
        with self._lock:
            self._drop_filling(key)
            self.forget(key)
            self.store.put(self.path(key), (*self.prefix(key, offsets, last), *records),
                           fsync=self.fsync)
            self._created = True

    def rewrite_prefix(self, key: Key, offsets: np.ndarray, last: int) -> None:
        """Make the header and offsets table of a Bloscpack-compatible file say ``offsets``
        (and ``last``, the decoded size of its last chunk): what bloscpack reads; carray
        reads the index."""
        with self._lock:
            if key in self._filling:
                self._write_filled(key)
            h = self._handle(key)
            parts = self.prefix(key, offsets, last)
            h.pwrite(parts[0], 0)
            h.pwrite(parts[2], self._files[key].offsets_pos)
            self._files[key].dirty = True

    def sync(self) -> None:
        """Make every write so far durable: new files written, dirty ones synced, and
        the directory entries of files created."""
        with self._lock:
            self._wait_deferred()
            for key in list(self._filling):
                self._write_filled(key)
            for key, h in self._handles.items():
                info = self._files.get(key)
                if info is not None and info.dirty and (self.fsync or self.store.remote):
                    h.sync()
                    info.dirty = False
            if self._created and self.fsync:
                self.store.sync_dir(self.dir)
            self._created = False

    def defer(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` (the syncs of what was written without them) on a background
        thread; the next :meth:`sync` or :meth:`close` waits for it first, and a failure
        is raised there once (the next one runs ``fn`` again, on its own thread)."""
        self._deferred = (fn, _parallel.submit(_parallel.background("sync"), fn))

    def _wait_deferred(self) -> None:
        deferred = self._deferred
        if deferred is None:
            return
        fn, future = deferred
        if future is not None:
            self._deferred = (fn, None)
            future.result()
        else:
            fn()
        self._deferred = None

    def _waits(self) -> bool:
        """Whether :meth:`sync` has files to write or syncs to wait for."""
        with self._lock:
            return bool(self._filling) or self._deferred is not None or (self.fsync and (
                self._created or any(i.dirty for i in self._files.values())))

    def sync_later(self) -> Callable[[], None]:
        """:meth:`sync` started on a background thread (local stores with fsync and
        something to wait for; elsewhere done now); returns what waits for it.  A
        failure is raised by the first wait; a later wait syncs again, here."""
        if self.store.remote or not self.fsync or not self._waits():
            self.sync()  # little to wait for: not worth a thread
            return _done
        pending: list[Future[None]] = [_parallel.submit(_parallel.background("sync"),
                                                        self.sync)]

        def wait() -> None:
            if pending:
                pending.pop().result()
                return
            self.sync()

        return wait

    def delete(self, key: Key) -> None:
        with self._lock:
            self._drop_filling(key)
            self.forget(key)
            try:
                self.store.delete(self.path(key))
            except FileNotFoundError:
                pass

    def forget(self, key: Key) -> None:
        """Close ``key``'s handle and forget what is known of it."""
        with self._lock:
            self._files.pop(key, None)
            h = self._handles.pop(key, None)
            if h is not None:
                h.close()

    def held(self, key: Key) -> bool:
        """Whether file ``key`` is open here or still being filled (its bytes are read
        through this object, not fetched)."""
        with self._lock:
            return key in self._handles or key in self._filling

    def adopt_bytes(self, key: Key, data: bytes) -> bool:
        """Serve reads of file ``key`` from ``data`` (its whole content, fetched in one
        request) until :meth:`forget`; False when the file is open already."""
        with self._lock:
            if key in self._handles or key in self._filling:
                return False
            h = BytesHandle(self.path(key), data)
            self._files[key] = self._check_prefix(key, h)
            self._handles[key] = h
            return True

    def forget_all(self) -> None:
        """Forget every open file (others wrote them meanwhile)."""
        with self._lock:
            for key in list(self._files) + list(self._handles):
                self.forget(key)
            self.store.invalidate(self.dir)

    def close(self, sync: bool = True) -> None:
        """Close every handle; with ``sync``, write what is filling and sync it first (a
        failure still closes them all, then raises)."""
        with self._lock:
            try:
                if sync and not self.readonly:
                    self._wait_deferred()
                    for key in list(self._filling):
                        self._write_filled(key)
                for key, h in self._handles.items():
                    info = self._files.get(key)
                    # Unpublished bytes are referenced by nothing: sync them locally (cheap,
                    # and what a later commit would do), but never upload from here, which
                    # may run in a finalizer.
                    if sync and info is not None and info.dirty and self.fsync \
                            and not self.store.remote:
                        h.sync()
            finally:
                for h in self._handles.values():
                    h.close()
                self._handles.clear()
                self._files.clear()
                for key in list(self._filling):
                    self._drop_filling(key)
