"""The superchunk layout: carray's own directory format, versioned and checksummed.

The format is described in docs/formats/superchunk.md: ``meta/storage`` (written
once), ``data/sc_KKKKKK[_G].blp`` (superchunk ``k`` holds chunks ``[k*S, (k+1)*S)``;
each record is a Blosc chunk, its digest, the digests of its 4 KiB pages and spare
room) and ``versions/`` (manifests and index pages: :mod:`carray.versions`).

Writes never touch a byte that a kept version refers to: a chunk written goes to
free space or the end of its file, and the working index (:class:`WorkingIndex`)
records where.  A commit makes the new records durable, writes the index pages it
changed, then publishes a manifest in one atomic step; afterwards the records only
dropped versions referred to become free (:class:`SpaceKeeper`).  A reader holds the
version it opened, so a writer never changes what it reads; a crash leaves the last
published version, whatever it interrupted.

Every read checks what it decodes: a whole chunk against its digest, a ranged read
(a few blocks) against the digests of the pages it fetched.  Records written before
page digests existed are read whole when a ranged read needs them.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from carray.attrs import values as attrvalues
from carray.codecs import blosc
from carray.codecs.checksums import Checksum, crc32, get_checksum
from carray.codecs.fill import special_item
from carray.codecs.pages import npages, page_digests
from carray.core.dtypes import checked_shape
from carray.errors import (
    FormatError,
    ReadOnlyError,
    VersionError,
)
from carray.layouts.base import ArrayMeta, ChunkReader, Layout, Sidecars
from carray.layouts.superchunk import compact as _sc_compact
from carray.layouts.superchunk import usage as _sc_usage
from carray.layouts.superchunk import v2 as legacy
from carray.layouts.superchunk.absent import absent_chunk
from carray.layouts.superchunk.files import DataFiles, Key
from carray.layouts.superchunk.meta import (
    ATTRS_FILE,
    DEFAULT_PAGE_SIZE,
    FORMAT_NAME,
    FORMAT_VERSION,
    JOURNAL_FILE,
    META_DIR,
    SIZES_FILE,
    STORAGE_FILE,
    StorageInfo,
    dumps,
    write_member_note,
)
from carray.layouts.superchunk.read import RecordReader
from carray.layouts.superchunk.space import SpaceKeeper
from carray.stores import LOCAL, Store
from carray.stores.lock import WriteLock
from carray.versions import (
    FILL,
    FILL_ENTRY,
    HAS_PAGES,
    PAGE_ENTRIES,
    Entry,
    IndexView,
    MemberState,
    WorkingIndex,
)
from carray.versions.dataset import (
    Staged,
    VersionedDataset,
)
from carray.versions.rebase import EditLog

# Default superchunk: this many uncompressed bytes of chunks (a few MB compressed).
DEFAULT_SUPERCHUNK_NBYTES = 16 * 2**20
MAX_DEFAULT_SUPERCHUNKSIZE = 8192
DEFAULT_SPARE = 0.1


def superchunk_name(k: int) -> str:
    return f"sc_{k:06d}.blp"


def is_superchunk_dataset(path: str, store: Store = LOCAL) -> bool:
    """True when ``path/meta/storage`` names this layout."""
    try:
        with store.open(store.join(path, META_DIR, STORAGE_FILE)) as h:
            head = h.pread(4096, 0)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return False  # (a failing read raises: it tells nothing of the format)
    return f'"format": "{FORMAT_NAME}"'.encode() in head


def default_superchunksize(chunk_nbytes: int) -> int:
    """Chunks per superchunk so that a file holds about 16 MB of uncompressed chunks."""
    return max(1, min(MAX_DEFAULT_SUPERCHUNKSIZE, DEFAULT_SUPERCHUNK_NBYTES // max(chunk_nbytes, 1)))


class SuperchunkLayout(Layout):
    """Chunks in superchunk files, a version at a time (see the module docstring).

    Use :meth:`create` or :meth:`open`.  A layout is one *member* of a
    :class:`VersionedDataset`: the dataset itself for an array, one column of a table.
    """

    concurrent_reads = True
    in_memory = False
    savepoints = True

    def __init__(self, rootdir: str, info: StorageInfo, readonly: bool, fsync: bool,
                 verify: bool | str, store: Store, dataset: VersionedDataset,
                 member: str = "", member_path: str = "") -> None:
        super().__init__(readonly)
        self.store = store
        self.rootdir = rootdir
        self.info = info
        self.fsync = fsync
        self.verify = verify
        self.blosc1 = info.blosc1
        self.dataset = dataset
        self.member_name = member
        self.member_path = member_path
        self._S = info.superchunksize
        self._ck = get_checksum(info.checksum)
        self._dsize = self._ck.size
        self._page = info.page_size if self._dsize else 0
        self.files = DataFiles(store, rootdir, info, self._ck, readonly, fsync)
        self.sidecars = Sidecars(store, store.join(rootdir, META_DIR), readonly)
        self._fill_item, self._absent = absent_chunk(info)
        self.records = RecordReader(self.files, self._S, self._ck, self._page, verify,
                                    self._absent, info.chunk_nbytes)
        self._lock = threading.RLock()
        self._stamps: dict[int, tuple[int, int]] = {}
        self._index: Any = IndexView.empty()
        self._legacy: legacy.LegacyIndex | None = None
        self._keeper: SpaceKeeper | None = None
        self._opened_at: int | None = None  # the seq of the version a writer opened
        self._attrs: dict[str, Any] = {}
        self._stored_attrs: Any = {}
        self._pending: tuple[ArrayMeta, int] | None = None
        self._committed: tuple[tuple[int, ...], int, Any] | None = None
        self._touched: set[int] = set()  # superchunks a commit changed (compatible files)
        self._base_pages: MemberState | None = None  # a restored version's, until committed
        self._alone = False  # a table's column opened on its own (keeps the table's length)
        #: What was changed in place since the last commit (what a rebase replays).
        self.edits = EditLog()

    # -- opening --------------------------------------------------------------------------
    # (:mod:`.superchunk_open` makes and opens layouts with these)

    def start_new(self) -> None:
        """A new member, no chunks yet: attach it to its dataset to commit."""
        self._start_writing(IndexView.empty())
        self.dataset.attach(self)

    def start_at(self, state: MemberState) -> ArrayMeta:
        """Open at ``state``, this member's record in the version held; its metadata."""
        dataset = self.dataset
        view = IndexView(state.nchunks, state.pages, dataset.repo.pages, state.page_numbers)
        meta = self.meta_for(state.shape)
        if view.nchunks != meta.nchunks:
            raise FormatError(f"the version records {view.nchunks} chunks for shape "
                              f"{list(state.shape)}, which needs {meta.nchunks}",
                              dataset.repo.url(dataset.head.seq if dataset.head else 0))
        self._attrs = self._decode_attrs(state.attrs)
        self._stored_attrs = state.attrs
        self._committed = (tuple(state.shape), state.cbytes, state.attrs)
        if self.readonly:
            self._index = view
        else:
            self._start_writing(view)
            dataset.attach(self)
            if self.info.version < 3:  # an upgrade published, its last steps interrupted
                self._finish_upgrade()
        return meta

    def hold_alone(self, lock: WriteLock | None) -> None:
        """A table's column opened on its own: it holds the table's lock, and its commits
        keep the table's length."""
        self.hold_lock(lock)
        self._alone = True

    def meta_for(self, shape: Sequence[int]) -> ArrayMeta:
        """The metadata of this array at ``shape``."""
        info = self.info
        if len(shape) != len(info.chunkshape):
            raise FormatError(f"shape {list(shape)} and meta/storage chunkshape "
                              f"{list(info.chunkshape)} differ in length", self._url())
        meta = ArrayMeta(dtype=info.dtype, shape=tuple(shape), chunks=info.chunkshape,
                         blocks=info.blockshape, cparams=info.cparams, dflt=info.dflt,
                         expectedlen=info.expectedlen or (shape[0] if shape else 1),
                         order=info.order)
        try:
            _ = meta.nchunks
        except ValueError as exc:
            raise FormatError(f"meta/storage: {exc}", self._url()) from None
        return meta

    def open_legacy(self) -> tuple[ArrayMeta, int]:
        """Open a directory written before versions (see :mod:`._superchunk_v2`): its
        metadata and cbytes; a writer attaches it to its dataset, whose next commit
        publishes it as the first version."""
        store, root = self.store, self.rootdir
        sizes, patches = legacy.recover(store, root, self.readonly, self.fsync)
        meta = self.meta_for(sizes.shape)
        sizes_path = store.url(store.join(root, META_DIR, SIZES_FILE))
        checked_shape(meta.shape, itemsize=self.info.dtype.itemsize, source=sizes_path)
        nchunks = meta.nchunks
        fill = min(sizes.fill_chunks, nchunks) if self._absent else 0
        last = (nchunks - 1) // self._S
        if nchunks > fill and not self.files.exists((last, 0)):
            raise FormatError(f"meta/sizes claims {nchunks} chunks, but superchunk file "
                              f"{superchunk_name(last)} is missing", sizes_path)
        index = legacy.LegacyIndex(self.files, nchunks, fill, self._dsize, patches)
        self._legacy = index
        self.records.patches = patches
        self._attrs = legacy.attrs(self.store, self.rootdir)
        self._stored_attrs = None  # the first version records them
        self._committed = (tuple(meta.shape), sizes.cbytes, None)
        if self.readonly:
            self._index = index
        else:
            self._start_writing(index)
            self.dataset.attach(self)
        return meta, sizes.cbytes

    def _start_writing(self, base: Any) -> None:
        self._index = WorkingIndex(base)
        head = self.dataset.head
        self._opened_at = head.seq if head is not None else None
        # Keeping every version frees nothing a version refers to: no free space to learn.
        reuse = not self.files.compat and self.dataset.keep is not None
        self._keeper = SpaceKeeper(self.files, self._S, reuse=reuse, used=self._used_extents,
                                   private=self.store.rewrites)

    def _url(self) -> str:
        return self.store.url(self.rootdir)

    # -- reading --------------------------------------------------------------------------

    @property
    def nchunks(self) -> int:
        return int(self._index.nchunks)

    def stored_chunks(self) -> Iterator[int]:
        """Numbers of the chunks a reader's version stores (not the fill value), without
        looking at pages of fill entries alone; every chunk number for a writer."""
        index = self._index
        if isinstance(index, IndexView):
            yield from index.stored_chunks()
        else:
            yield from range(index.nchunks)

    def _entry(self, nchunk: int) -> Entry:
        e: Entry = self._index.entry(nchunk)
        if e.off < FILL:
            raise FormatError(f"chunk {nchunk} has no offset", self.chunk_path(nchunk))
        if e.off == FILL and self._absent is None:
            raise FormatError(f"chunk {nchunk} is recorded as absent, which this dataset "
                              "cannot hold", self.chunk_path(nchunk))
        return e

    def special_chunk(self, nchunk: int) -> bytes | None:
        if self.records.kept(nchunk):
            return None  # read by ranges before: stored (the reader goes when it changes)
        with self._lock:
            if not 0 <= nchunk < self._index.nchunks:
                return None
            return self._absent if self._entry(nchunk).off == FILL else None

    def read_chunk(self, nchunk: int) -> memoryview:
        with self._lock:
            e = self._entry(nchunk)
        return self.records.chunk(nchunk, e)

    def read_chunk_into(self, nchunk: int, scratch: Callable[[int], np.ndarray]) -> memoryview:
        with self._lock:
            e = self._entry(nchunk)
        return self.records.chunk_into(nchunk, e, scratch)

    def chunk_reader(self, nchunk: int) -> tuple[ChunkReader, int]:
        got = self.records.cached(nchunk)
        if got is not None:
            return got
        with self._lock:
            e = self._entry(nchunk)
        return self.records.reader(nchunk, e)

    @contextlib.contextmanager
    def prefetched(self, nchunks: Sequence[int]) -> Iterator[None]:
        """On object stores, a read about to decode most of the chunks of a file fetches
        the file whole (see :meth:`RecordReader.prefetched`)."""
        if not self.store.remote:
            yield
            return
        with self._lock:
            index = self._index
            entries = [(n, index.entry(n)) for n in nchunks if 0 <= n < index.nchunks]
        with self.records.prefetched(entries, index.nchunks, index.entry):
            yield

    # -- writing --------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.readonly:
            self.dataset.check_writable()
            raise ReadOnlyError(f"{self._url()}: opened read-only")

    # What the rewriting helpers (:mod:`._sc_compact`) use.

    @property
    def working_index(self) -> WorkingIndex:
        assert isinstance(self._index, WorkingIndex)
        return self._index

    @property
    def space(self) -> SpaceKeeper:
        assert self._keeper is not None
        return self._keeper

    @property
    def page_size(self) -> int:
        return self._page

    @property
    def digest_size(self) -> int:
        return self._dsize

    @property
    def checksum(self) -> Checksum:
        return self._ck

    def replace_entry(self, nchunk: int, entry: Entry, old: Entry | None) -> None:
        """Make ``entry`` chunk ``nchunk``'s (a record written already); ``old`` (stored)
        becomes the space keeper's to free."""
        with self._lock:
            self.records.forget_chunk(nchunk)
            self._stamps.pop(nchunk, None)
            self._set(nchunk, entry, old)

    def chunk_digest(self, data: bytes) -> bytes:
        """The chunk's digest, then the digests of its pages (what follows it in its
        record); safe from any thread."""
        digest = self._ck.digest(data)
        return digest + page_digests(data, self._ck, self._page) if self._page else digest

    def write_chunk(self, nchunk: int, data: bytes, digest: bytes | None = None) -> int:
        self._check_writable()
        assert self._keeper is not None
        with self._lock:
            count = self._index.nchunks
            if not 0 <= nchunk <= count:
                raise IndexError(f"chunk {nchunk} written before chunk {count}")
            self.records.forget_chunk(nchunk)
            self._stamps.pop(nchunk, None)
            old = self._index.entry(nchunk) if nchunk < count else None
            old_cbytes = old.cbytes if old is not None and old.stored else 0
            if self._absent and special_item(data, self.info.dtype) == self._fill_item:
                self._set(nchunk, FILL_ENTRY, old)
                return -old_cbytes
            data = bytes(data)
            tail = self.chunk_digest(data) if digest is None else digest
            need = len(data) + len(tail)
            want = need + math.ceil(len(data) * self.info.spare)
            gen, off, room = self._keeper.allocate(nchunk, need, want,
                                                   rewrite=old is not None and old.stored)
            key = (nchunk // self._S, gen)
            self.files.write(key, off, (data, tail), room, appended=nchunk == count)
            flags = HAS_PAGES if self._page else 0
            self._set(nchunk, Entry(off, room, len(data), gen, flags), old)
            # Known now, so asking for it does not read (or write out) a file being filled.
            self._stamps[nchunk] = _stamp(gen, off, data, tail[:self._dsize] if self._dsize
                                          else data[-min(16, len(data)):])
            return len(data) - old_cbytes

    def grow_absent(self, first: int, count: int, fill: bytes) -> bool:
        self._check_writable()
        with self._lock:
            if not self._absent or first != self._index.nchunks or \
                    special_item(fill, self.info.dtype) != self._fill_item:
                return False
            self._index.resize(first + count)  # chunks past the end hold the fill value
            return True

    def _set(self, nchunk: int, entry: Entry, old: Entry | None) -> None:
        assert self._keeper is not None
        self._index.set(nchunk, entry)
        if old is not None and old.stored:
            self._keeper.replaced(nchunk, old)

    def drop_chunks(self, first: int) -> int:
        self._check_writable()
        assert self._keeper is not None
        first = max(first, 0)
        removed = 0
        with self._lock:
            for n in range(first, self._index.nchunks):
                old = self._index.entry(n)
                if old.stored:
                    removed += old.cbytes
                    self._keeper.replaced(n, old)
            self._index.resize(min(first, self._index.nchunks))
            self.records.forget(first)
            for n in [n for n in self._stamps if n >= first]:
                del self._stamps[n]
        return -removed

    def savepoint(self) -> Any:
        if self.readonly or self._keeper is None:
            return None
        return (self._index.savepoint(), self._keeper.savepoint())

    def rollback(self, token: Any) -> None:
        if token is None or self._keeper is None:
            return
        with self._lock:
            self._index.rollback(token[0])
            self._keeper.rollback(token[1])
            self.records.forget()
            self._stamps.clear()

    def release_savepoint(self) -> None:
        if self._keeper is not None:
            self._index.release()
            self._keeper.release()

    # -- committing -----------------------------------------------------------------------

    def commit(self, meta: ArrayMeta, cbytes: int, message: str | None = None) -> bool:
        """Make every chunk written so far durable and publish a version recording
        ``meta``; False when it was only staged (inside a transaction of the dataset, or a
        table's column: the table's commit publishes it)."""
        self._check_writable()
        if self._alone and self._committed is not None and \
                tuple(meta.shape[:1]) != self._committed[0][:1]:
            raise ValueError(f"{self._url()}: a column of a table keeps the table's length "
                             f"({self._committed[0][0]} rows); append to or resize the table")
        if self._index.nchunks > meta.nchunks:
            # Chunks past the length (left by a shrink) are no chunks of this version.
            cbytes += self.drop_chunks(meta.nchunks)
        self._pending = (meta, int(cbytes))
        return self.dataset.commit(self, message=message) is not None

    # -- versions -------------------------------------------------------------------------

    versioned = True

    @property
    def pinned_version(self) -> str | None:
        head = self.dataset.head
        return head.id if self.dataset.pinned and head is not None else None

    def versions(self) -> list[Any]:
        return self.dataset.versions()

    def versioned_dataset(self) -> VersionedDataset:
        return self.dataset

    def tag(self, name: str, version_id: str, move: bool = False) -> None:
        self._check_writable()
        self.dataset.tag(name, version_id, move=move)

    def reset(self) -> tuple[ArrayMeta, int]:
        self._check_writable()
        assert self._keeper is not None
        state = self.dataset.state(self.member_name)
        if state is None:
            raise VersionError(f"{self._url()}: no version to go back to")
        with self._lock:
            for key in self._keeper.discard():  # this commit's own files: nothing else's
                self.files.delete(key)
            self._index = WorkingIndex(self._view_of(state))
            self.records.forget()
            self._stamps.clear()
            self._attrs = self._decode_attrs(state.attrs)
            self._stored_attrs = state.attrs
            self._committed = (tuple(state.shape), state.cbytes, state.attrs)
            self._pending, self._base_pages = None, None
            self._touched = set()
            self.edits.clear()
        return self.meta_for(state.shape), state.cbytes

    # -- rebasing (see carray.engine.rebase) ------------------------------------------------

    @property
    def stored_attrs(self) -> Any:
        """The attributes as the next commit records them (typed JSON)."""
        return self._stored_attrs

    def take_attrs(self, stored: Any) -> None:
        """Make ``stored`` (typed JSON) the attributes the next commit records."""
        self._attrs = self._decode_attrs(stored)
        self._stored_attrs = stored

    def chunks_between(self, old: MemberState, new: MemberState) -> set[int]:
        """The chunks whose records differ between two states of this member (chunks
        only one of them has included)."""
        va, vb = self._view_of(old), self._view_of(new)
        common = min(old.nchunks, new.nchunks)
        changed = set(range(common, max(old.nchunks, new.nchunks)))
        refs_a, refs_b = dict(va.stored()), dict(vb.stored())
        for p in sorted(set(refs_a) | set(refs_b)):  # a page neither stores is all fill
            if p * PAGE_ENTRIES >= common:
                break
            a, b = refs_a.get(p), refs_b.get(p)
            if a is not None and b is not None and \
                    (int(a["seq"]), int(a["off"])) == (int(b["seq"]), int(b["off"])):
                continue  # one stored page both versions share
            n = min(PAGE_ENTRIES, common - p * PAGE_ENTRIES)
            ea, eb = va.page(p)[:n], vb.page(p)[:n]
            diff = (ea["off"] != eb["off"]) | (ea["gen"] != eb["gen"]) | \
                (ea["cbytes"] != eb["cbytes"])
            changed.update(int(i) + p * PAGE_ENTRIES for i in np.flatnonzero(diff))
        return changed

    def _view_of(self, state: MemberState) -> IndexView:
        return IndexView(state.nchunks, state.pages, self.dataset.repo.pages,
                         state.page_numbers)

    def rebase_index(self, newer: MemberState) -> None:
        """Take ``newer`` (a state whose chunks are this one's committed ones: another
        writer changed no chunk) as what the working index changes apply to."""
        view = self._view_of(newer)
        with self._lock:
            self.working_index.rebase(view)
            self._base_pages = None
            self._committed = (tuple(newer.shape), newer.cbytes, newer.attrs)

    def untag(self, name: str) -> None:
        self._check_writable()
        self.dataset.untag(name)

    def prune(self, keep_last: int | None = None, older_than: float | None = None) -> int:
        self._check_writable()
        return self.dataset.reclaim(keep_last, older_than)

    def restore(self, version: str) -> tuple[ArrayMeta, int]:
        """Make ``version`` the newest again, as a new commit (the layout's chunks written
        since the last commit must have been committed first)."""
        self._check_writable()
        old = self.dataset.repo.find(version).member(self.member_name)
        self.switch(old)
        meta = self.meta_for(old.shape)
        self._pending = (meta, old.cbytes)
        self.dataset.commit(self, message=f"restore {version}", kind="restore")
        return meta, old.cbytes

    def refresh(self) -> tuple[ArrayMeta, int] | None:
        """A reader moves to the newest version (and holds it instead)."""
        if not self.readonly or self._legacy is not None:
            return None
        if not self.dataset.refresh():
            return None
        state = self.dataset.state(self.member_name)
        if state is None:
            raise FormatError(f"the newest version has no member {self.member_name!r}",
                              self._url())
        self.switch(state)
        return self.meta_for(state.shape), state.cbytes

    def switch(self, state: MemberState) -> None:
        """Take ``state`` (a member of another version) as this layout's committed state;
        a writer's records the current one holds and ``state`` does not become free."""
        view = self._view_of(state)
        with self._lock:
            if self._keeper is not None:
                current = self.working_index
                for n in range(current.nchunks):
                    e = current.entry(n)
                    if e.stored and (n >= view.nchunks or
                                     (view.entry(n).gen, view.entry(n).off) != (e.gen, e.off)):
                        self._keeper.replaced(n, e)
                self._index = WorkingIndex(view)
                self._base_pages = state
            else:
                self._index = view
            self.records.forget()
            self._stamps.clear()
            self._attrs = self._decode_attrs(state.attrs)
            self._stored_attrs = state.attrs
            self._committed = None if self._keeper is not None else \
                (tuple(state.shape), state.cbytes, state.attrs)

    @property
    def version_id(self) -> str | None:
        """The id of the version this layout's committed state belongs to."""
        head = self.dataset.head
        return None if head is None else head.id

    def stage(self) -> Staged | None:
        """Make the records written since the last commit durable and hand over what to
        publish (see :class:`carray.versions.dataset.Member`); None when nothing changed."""
        assert self._keeper is not None
        if self._pending is None:
            return None
        meta, cbytes = self._pending
        shape = tuple(meta.shape)
        if self._legacy is None and not self._index.changed and not self._keeper.changed \
                and self._committed == (shape, cbytes, self._stored_attrs):
            return None  # a compaction waits for a commit that changes something
        if self.files.compat and not self._keeper.private:
            # Bloscpack reads chunks in order, back to back: repack what lost that order.
            self._touched = _sc_compact.touched(self._index.changed_pages(), self._S)
            self._keeper.compact |= {k for k in self._touched
                                     if _sc_compact.out_of_order(self, k)}
        if self._keeper.reuse and self._keeper.superseding:
            # What this commit replaces is free once it is published: a file that would
            # be left with much free space is compacted now, not by a next commit that
            # may never come.
            outliving = _sc_usage.outliving(self.dataset, self.member_name)
            if outliving is not None:
                self._keeper.compact |= self._keeper.crowded(outliving)
        if self._keeper.compact:
            _sc_compact.compact(self, sorted(self._keeper.compact))
        # The data syncs while the version's index pages are written (Staged.durable).
        durable = self.files.sync_later()
        attrs = self._stored_attrs
        base = self._base_pages if self._base_pages is not None else \
            self.dataset.state(self.member_name) if self._legacy is None else None
        if self._legacy is not None:
            attrs = self._encode_attrs(self._attrs)
        return Staged(self.member_name, self.member_path, shape,
                      math.prod(shape) * meta.dtype.itemsize, cbytes, self._index.nchunks,
                      self._index.changed_pages(),
                      base.pages if base is not None else np.zeros(0, dtype="u1"), attrs,
                      durable, base.page_numbers if base is not None else None,
                      self._index.filled_pages())

    def published(self, state: MemberState, seq: int) -> None:
        assert self._keeper is not None
        with self._lock:
            self._index.committed(self._view_of(state))
            self._keeper.published(seq)
            self.records.forget()
            self._stored_attrs = state.attrs
            self._committed = (tuple(state.shape), state.cbytes, state.attrs)
            self._pending = None
            self._base_pages = None
            self.edits.clear()
        if self._legacy is not None:
            self._finish_upgrade()
        if self.files.compat and self._touched and not self._keeper.private:
            _sc_compact.mirror(self, sorted(self._touched))
        self._touched = set()

    def reclaim(self, remaining: Sequence[tuple[int, MemberState]],
                dropped: Sequence[int] = ()) -> None:
        if self._keeper is None:
            return
        refers = _sc_usage.referrer(self.dataset, remaining)
        with self._lock:
            if self._opened_at is not None and any(s < self._opened_at for s in dropped):
                # A version older than the one opened went (a reader held it when it was
                # replaced, maybe by another session): what it alone referred to was
                # never noted as replaced here.
                self._keeper.relearn()
            self._keeper.reclaim([seq for seq, _ in remaining], refers)

    def _used_extents(self) -> dict[Key, list[tuple[int, int]]]:
        """Extents of records that the kept versions or the working index refer to."""
        more = [] if self._legacy is None else list(enumerate(self._legacy.entries()))
        more += list(self._index.changed_pages().items())
        return _sc_usage.used_extents(self.dataset, self.member_name, self._S,
                                      [(p * PAGE_ENTRIES, e) for p, e in more])

    def _finish_upgrade(self) -> None:
        """The first version is published: record the new format, remove the old files."""
        store, meta_dir = self.store, self.store.join(self.rootdir, META_DIR)
        info = self.info.replace(version=FORMAT_VERSION, page_size=self.info.page_size or
                                 (0 if self.files.compat or not self._dsize else
                                  DEFAULT_PAGE_SIZE))
        store.put(store.join(meta_dir, STORAGE_FILE), info.encode(), fsync=self.fsync)
        for name in (SIZES_FILE, ATTRS_FILE, JOURNAL_FILE):
            try:
                store.delete(store.join(meta_dir, name))
            except FileNotFoundError:
                pass
        if self.member_name:
            write_member_note(store, self.rootdir, self.dataset.repo.root, self.member_name,
                              self.fsync)
        self.info = info
        self._page = info.page_size if self._dsize else 0
        self._legacy = None
        self.records = RecordReader(self.files, self._S, self._ck, self._page, self.verify,
                                    self._absent, info.chunk_nbytes)

    # -- attributes -------------------------------------------------------------------------

    def _decode_attrs(self, stored: Any) -> dict[str, Any]:
        where = self.dataset.repo.store.url(self.dataset.repo.root)
        if not isinstance(stored, dict):
            raise FormatError("the version's attributes are not a JSON object", where)
        return attrvalues.load_typed(stored, where)

    @staticmethod
    def _encode_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
        return {attrvalues.check_name(k): attrvalues.encode_typed(v) for k, v in attrs.items()}

    def load_attrs(self) -> dict[str, Any]:
        return dict(self._attrs)

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        """Record new attributes: part of the next version, as any other change."""
        self._check_writable()
        encoded = self._encode_attrs(attrs)
        if self._legacy is not None:
            self.store.put(self.store.join(self.rootdir, META_DIR, ATTRS_FILE), dumps(encoded),
                           fsync=self.fsync)
            self._attrs = dict(attrs)
            return
        self._attrs = dict(attrs)
        self._stored_attrs = encoded

    # -- metadata and tools -----------------------------------------------------------------

    def chunk_path(self, nchunk: int) -> str:
        """The file holding chunk ``nchunk`` (for messages)."""
        gen = 0
        try:
            e = self._index.entry(nchunk)
            gen = e.gen if e.off >= 0 else 0
        except (IndexError, FormatError, OSError):
            pass
        return self.files.url((nchunk // self._S, gen))

    def chunk_location(self, nchunk: int) -> tuple[str, int, int, int]:
        """Where chunk ``nchunk``'s record is: ``(file, offset, cbytes, room)`` (offset
        -1: absent).  For tools and tests that look at files."""
        with self._lock:
            e = self._entry(nchunk)
        return self.files.url((nchunk // self._S, e.gen)), e.off, e.cbytes, e.room

    def index_entry(self, nchunk: int) -> Entry:
        """Chunk ``nchunk``'s index entry (for tools and tests)."""
        with self._lock:
            return self._entry(nchunk)

    def chunk_flags(self, nchunk: int) -> int:
        """The index flags of chunk ``nchunk``'s record (:data:`HAS_PAGES`)."""
        with self._lock:
            return self._entry(nchunk).flags

    def stored_page_digests(self, nchunk: int) -> bytes:
        """The page digests stored in chunk ``nchunk``'s record (for verification)."""
        with self._lock:
            e = self._entry(nchunk)
        n = npages(e.cbytes, self._page) * self._dsize
        return self.records.read((nchunk // self._S, e.gen), n, e.off + e.cbytes + self._dsize)

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        """What changes whenever chunk ``nchunk`` is rewritten: its size, and a CRC of where
        it lies, its first bytes and its digest."""
        stamp = self._stamps.get(nchunk)
        if stamp is not None:
            return stamp
        try:
            with self._lock:
                if nchunk >= self._index.nchunks:
                    return (-1, -1)
                e = self._entry(nchunk)
            if e.off == FILL:
                return (0, 0)
            key = (nchunk // self._S, e.gen)
            head = self.records.read(key, blosc.BLOSC1_HEADER, e.off)
            tail_len = self._dsize or min(16, e.cbytes)
            tail = self.records.read(key, tail_len, e.off + e.cbytes + self._dsize - tail_len)
        except FormatError:
            return (-1, -1)
        stamp = _stamp(e.gen, e.off, head, tail, e.cbytes)
        self._stamps[nchunk] = stamp
        return stamp

    def remove_leftovers(self) -> None:
        head = self.dataset.head
        # Locally the writer holds the lock every writer takes: a transaction left
        # unfinished has no owner at work any more.
        self.dataset.repo.remove_leftovers(head.seq if head is not None else None,
                                           owner_gone=not self.store.remote)

    # -- parallel writers -----------------------------------------------------------------

    @property
    def unit_chunks(self) -> int:  # type: ignore[override]
        return self._S

    def write_unit(self, unit: int, chunks: Sequence[Any], digests: Any = None) -> int:
        """Write superchunk ``unit``'s file whole (generation 0, with an offsets table
        :meth:`adopt` reads back)."""
        self._check_writable()
        if not 1 <= len(chunks) <= self._S:
            raise ValueError(f"a superchunk holds 1 to {self._S} chunks, got {len(chunks)}")
        return _sc_compact.write_unit(self, unit, [bytes(c) for c in chunks], digests)

    def adopt(self, meta: ArrayMeta, cbytes: int) -> None:
        """Commit ``meta`` after :meth:`write_unit` calls wrote every chunk it holds."""
        self._check_writable()
        _sc_compact.adopt_units(self, meta.nchunks)
        self.commit(meta, cbytes)

    _finalizing = False  # closed by the garbage collector: no I/O beyond releasing

    def close(self) -> None:
        if not self.readonly and (not self.member_name or self._alone) \
                and not self._finalizing:
            self.dataset.tidy()
        try:
            self.files.close()
        finally:
            self._let_go()

    def discard(self) -> None:
        self.files.close(sync=False)
        self._let_go()

    def _let_go(self) -> None:
        """Leave the dataset: its readers' hold, a table's member slot, the lock."""
        if self.readonly:
            if not self.member_name or self._alone:  # a table's column: its table holds it
                self.dataset.release()
        elif self.member_name:
            self.dataset.detach(self.member_name, self)
        self.release_lock()

    def __del__(self) -> None:
        # A finalizer may run on any thread, an object store's server thread among them.
        self._finalizing = True
        super().__del__()

    def describe(self) -> str:
        return f"superchunk directory {self._url()!r}"


def _stamp(gen: int, off: int, head: bytes, tail: bytes, cbytes: int | None = None
           ) -> tuple[int, int]:
    """A chunk's stamp from where it lies, its first 16 bytes and its digest (or last
    bytes): what changes whenever the chunk is rewritten."""
    size = len(head) if cbytes is None else cbytes
    key = gen.to_bytes(4, "little") + off.to_bytes(8, "little")
    return (size, crc32(key + bytes(head[:blosc.BLOSC1_HEADER]) + bytes(tail)) & 0x7FFFFFFF)


__all__ = ["DEFAULT_SPARE", "SuperchunkLayout", "default_superchunksize",
           "is_superchunk_dataset", "superchunk_name"]
