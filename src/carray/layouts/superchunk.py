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
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from carray import attrvalues
from carray.codecs import blosc
from carray.codecs.checksums import Checksum, crc32, get_checksum
from carray.codecs.fill import special_item
from carray.codecs.pages import PagedReader, checked_head, npages, page_digests
from carray.dtypes import checked_shape
from carray.errors import (
    ChecksumError,
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    VersionError,
)
from carray.layouts import _sc_compact
from carray.layouts import _superchunk_v2 as legacy
from carray.layouts._sc_files import DataFiles, Key
from carray.layouts._sc_space import SpaceKeeper
from carray.layouts._superchunk_absent import absent_chunk
from carray.layouts._superchunk_meta import (
    ATTRS_FILE,
    DATA_DIR,
    DEFAULT_PAGE_SIZE,
    FORMAT_NAME,
    JOURNAL_FILE,
    META_DIR,
    SIZES_FILE,
    STORAGE_FILE,
    StorageInfo,
    dumps,
)
from carray.layouts.base import ArrayMeta, ChunkReader, Layout, Sidecars, clear_for_create
from carray.layouts.bcolz import read_json
from carray.safejson import load_json
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
    Repository,
    WorkingIndex,
)
from carray.versions.dataset import (
    Membership,
    Staged,
    VersionedDataset,
    open_dataset,
    retention_of,
)
from carray.versions.repo import DEFAULT_GRACE

# Default superchunk: this many uncompressed bytes of chunks (a few MB compressed).
DEFAULT_SUPERCHUNK_NBYTES = 16 * 2**20
MAX_DEFAULT_SUPERCHUNKSIZE = 8192
DEFAULT_SPARE = 0.1
# Bytes a ranged read fetches first: the chunk's header and block table.
_HEAD_READ = blosc.HEAD_READ
# A record this small is read (and checked) whole by the first ranged read.
_SMALL_RECORD = 2 * _HEAD_READ
_CACHED_HEADS = 1024


def superchunk_name(k: int) -> str:
    return f"sc_{k:06d}.blp"


def is_superchunk_dataset(path: str, store: Store = LOCAL) -> bool:
    """True when ``path/meta/storage`` names this layout."""
    try:
        with store.open(store.join(path, META_DIR, STORAGE_FILE)) as h:
            head = h.pread(4096, 0)
    except OSError:
        return False
    return f'"format": "{FORMAT_NAME}"'.encode() in head


def default_superchunksize(chunk_nbytes: int) -> int:
    """Chunks per superchunk so that a file holds about 16 MB of uncompressed chunks."""
    return max(1, min(MAX_DEFAULT_SUPERCHUNKSIZE, DEFAULT_SUPERCHUNK_NBYTES // max(chunk_nbytes, 1)))


class _Head(NamedTuple):
    """What ranged reads keep of a chunk: where it is, its checked first bytes, its page
    digests and the decoder's memo (parsed header and block table)."""

    key: Key
    off: int
    cbytes: int
    head: bytes
    digests: bytes | None
    memo: dict[str, Any]


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
        self._sidecars = Sidecars(store, store.join(rootdir, META_DIR), readonly)
        self._fill_item, self._absent = absent_chunk(info)
        self._lock = threading.RLock()
        self._heads: OrderedDict[int, _Head] = OrderedDict()
        self._stamps: dict[int, tuple[int, int]] = {}
        self._index: Any = IndexView.empty()
        self._legacy: legacy.LegacyIndex | None = None
        self._keeper: SpaceKeeper | None = None
        self._attrs: dict[str, Any] = {}
        self._stored_attrs: Any = {}
        self._pending: tuple[ArrayMeta, int] | None = None
        self._committed: tuple[tuple[int, ...], int, Any] | None = None
        self._staged_attrs_only = False
        self._touched: set[int] = set()  # superchunks a commit changed (compatible files)
        self._base_pages: np.ndarray | None = None  # a restored version's, until committed
        self._alone = False  # a table's column opened on its own (keeps the table's length)

    # -- creation and opening ---------------------------------------------------------------

    @classmethod
    def create(cls, rootdir: str, meta: ArrayMeta, mode: str = "a",
               fsync: bool = True, superchunksize: int | None = None,
               checksum: str | int | None = "adler32", spare: float | None = None,
               blosc1: bool = False, verify: bool | str = True,
               store: Store = LOCAL, versions: Any = None,
               grace: float = DEFAULT_GRACE, member: Membership | None = None
               ) -> SuperchunkLayout:
        """Make a new, empty dataset directory holding ``meta`` (its first version).

        Parameters
        ----------
        rootdir : path
            The dataset directory; must not exist unless ``mode='w'``.
        meta : ArrayMeta
            dtype, row shape, chunk length, compression parameters, default value.
        superchunksize : int, optional
            Chunks per superchunk file (default: about 16 MB of uncompressed chunks).
        checksum : str or int
            Digest stored after every chunk: None, adler32, crc32, md5, sha1, sha224,
            sha256, sha384 or sha512.
        spare : float, optional
            Room left after each chunk, as a fraction of its compressed size
            (default 0.1; 0 on object stores, where every write replaces whole objects).
        blosc1 : bool
            Store Blosc1 chunks (with ``spare=0`` every superchunk file is then a
            Bloscpack file that bloscpack 0.16 reads).
        versions : int or 'all', optional
            Commits kept besides the newest, tagged and held ones (default 1: the newest).
        grace : float
            Seconds a replaced version stays readable on object stores.
        member : Membership, optional
            The array is a member of a dataset of several (a table's column): its
            versions are that dataset's.
        """
        rootdir = os.fspath(rootdir)
        info = cls._new_info(meta, superchunksize, checksum, spare, blosc1, store)
        keep = retention_of(versions)
        clear_for_create(store, rootdir, mode)
        store.makedirs(store.join(rootdir, DATA_DIR))
        store.makedirs(store.join(rootdir, META_DIR))
        store.put(store.join(rootdir, META_DIR, STORAGE_FILE), dumps(info.to_json()),
                  fsync=fsync)
        if member is None:
            dataset = VersionedDataset(Repository(store, rootdir, fsync, grace), False, None,
                                       keep=keep)
            name = ""
        else:
            dataset, name = member.dataset, member.name
            write_member_note(store, rootdir, dataset.repo.root, name, fsync)
        layout = cls(rootdir, info, readonly=False, fsync=fsync, verify=verify, store=store,
                     dataset=dataset, member=name, member_path=name)
        layout._start_writing(IndexView.empty())
        dataset.attach(layout)
        if meta.shape:  # a 0-d array is one chunk: its first version comes with its item
            layout.commit(meta.replace(shape=(0, *meta.shape[1:])), 0)
        return layout

    @staticmethod
    def _new_info(meta: ArrayMeta, superchunksize: int | None, checksum: str | int | None,
                  spare: float | None, blosc1: bool, store: Store) -> StorageInfo:
        if spare is None:
            spare = 0.0 if store.remote else DEFAULT_SPARE
        if not isinstance(spare, (int, float)) or not 0 <= spare <= 10:
            raise ValueError(f"spare must be a fraction in [0, 10], got {spare!r}")
        ck = get_checksum(checksum)  # ValueError for unknown names
        if superchunksize is None:
            superchunksize = default_superchunksize(meta.chunk_nbytes)
        if not isinstance(superchunksize, int) or not 1 <= superchunksize <= 2**24:
            raise ValueError(f"superchunksize must be an int in 1..2**24, got {superchunksize!r}")
        compatible = bool(blosc1) and spare == 0
        return StorageInfo(
            dtype=meta.dtype, chunkshape=tuple(meta.chunks), blockshape=meta.blocks,
            superchunksize=superchunksize, checksum=ck.name, spare=float(spare),
            blosc1=bool(blosc1), cparams=meta.cparams, dflt=meta.dflt,
            expectedlen=meta.expectedlen, typesize=blosc.blosc_typesize(meta.dtype),
            order=meta.order, page_size=0 if compatible or not ck.size else DEFAULT_PAGE_SIZE)

    @classmethod
    def open(cls, rootdir: str, readonly: bool = False, fsync: bool = True,
             verify: bool | str = True, store: Store = LOCAL, version: str | None = None,
             tag: str | None = None, as_of: Any = None, versions: Any = None,
             grace: float = DEFAULT_GRACE, member: Membership | None = None
             ) -> tuple[SuperchunkLayout, ArrayMeta, int]:
        """Open a dataset; returns the layout, its metadata and its cbytes.

        A reader holds the version it opens (the newest, or the one asked for by
        ``version`` id, ``tag`` or ``as_of`` time); a writer works on the newest.
        Directories written before versions are read as they are; a writer's first
        commit turns them into the first version.
        """
        rootdir = os.fspath(rootdir)
        if not store.isdir(rootdir):
            raise ContainerNotFoundError(f"{store.url(rootdir)}: no such carray directory")
        info = read_info(store, rootdir)
        if member is not None:
            return cls.open_member(member.dataset, rootdir, info, member.name, member.name,
                                   readonly, fsync, verify)
        note = read_member_note(store, rootdir)
        if note is not None:  # a column of a table, opened on its own
            return cls._open_alone(rootdir, info, note, readonly, fsync, verify, store,
                                   version, tag, as_of, grace)
        repo = Repository(store, rootdir, fsync, grace)
        if Repository.exists_at(store, rootdir):
            dataset = open_dataset(repo, readonly, version, tag, as_of, keep=versions)
            return cls.open_member(dataset, rootdir, info, "", "", readonly, fsync, verify)
        if version is not None or tag is not None or as_of is not None:
            raise VersionError(f"{store.url(rootdir)}: written before versions, it has none")
        keep = retention_of(versions)
        dataset = VersionedDataset(repo, readonly, None, keep=keep)
        layout = cls(rootdir, info, readonly, fsync, verify, store, dataset)
        meta, cbytes = layout._open_legacy()
        if not readonly:
            dataset.attach(layout)
        return layout, meta, cbytes

    @classmethod
    def _open_alone(cls, rootdir: str, info: StorageInfo, note: tuple[str, str],
                    readonly: bool, fsync: bool, verify: bool | str, store: Store,
                    version: str | None, tag: str | None, as_of: Any, grace: float
                    ) -> tuple[SuperchunkLayout, ArrayMeta, int]:
        """A member (a table's column) opened on its own: a reader of its dataset's
        version, or a writer holding its dataset's lock whose commits keep the length
        (the table's)."""
        root, name = note
        lock = None if readonly else WriteLock.acquire(store, root)
        try:
            dataset = open_dataset(Repository(store, root, fsync, grace), readonly, version,
                                   tag, as_of)
            layout, meta, cbytes = cls.open_member(dataset, rootdir, info, name, name,
                                                   readonly, fsync, verify)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        layout.hold_lock(lock)
        layout._alone = True
        return layout, meta, cbytes

    @classmethod
    def open_member(cls, dataset: VersionedDataset, rootdir: str, info: StorageInfo,
                    name: str, path: str, readonly: bool, fsync: bool, verify: bool | str
                    ) -> tuple[SuperchunkLayout, ArrayMeta, int]:
        """Member ``name`` (stored under ``rootdir``) of a versioned dataset; an array
        written before versions (a column of an older table) joins it, to be published by
        the dataset's next commit."""
        state = dataset.state(name)
        if state is None and not readonly and dataset.head is None and \
                dataset.repo.store.isfile(dataset.repo.store.join(rootdir, META_DIR, SIZES_FILE)):
            layout = cls(rootdir, info, False, fsync, verify, dataset.repo.store, dataset,
                         name, path)
            meta, cbytes = layout._open_legacy()
            dataset.attach(layout)
            return layout, meta, cbytes
        if state is None:
            raise FormatError(f"the version held has no member {name!r}",
                              dataset.repo.url(dataset.head.seq if dataset.head else 0))
        layout = cls(rootdir, info, readonly, fsync, verify, dataset.repo.store, dataset,
                     name, path)
        view = IndexView(state.nchunks, state.pages, dataset.repo.pages)
        meta = layout._meta_for(state.shape)
        if view.nchunks != meta.nchunks:
            raise FormatError(f"the version records {view.nchunks} chunks for shape "
                              f"{list(state.shape)}, which needs {meta.nchunks}",
                              dataset.repo.url(dataset.head.seq if dataset.head else 0))
        layout._attrs = layout._decode_attrs(state.attrs)
        layout._stored_attrs = state.attrs
        layout._committed = (tuple(state.shape), state.cbytes, state.attrs)
        if readonly:
            layout._index = view
        else:
            layout._start_writing(view)
            dataset.attach(layout)
            if info.version < 3:  # an upgrade published, its last steps interrupted
                layout._finish_upgrade()
        return layout, meta, state.cbytes

    def _meta_for(self, shape: Sequence[int]) -> ArrayMeta:
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

    def _open_legacy(self) -> tuple[ArrayMeta, int]:
        """Open a directory written before versions (see :mod:`._superchunk_v2`)."""
        store, root = self.store, self.rootdir
        sizes, patches = legacy.recover(store, root, self.readonly, self.fsync)
        meta = self._meta_for(sizes.shape)
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
        self._attrs = self._legacy_attrs()
        self._stored_attrs = None  # the first version records them
        self._committed = (tuple(meta.shape), sizes.cbytes, None)
        if self.readonly:
            self._index = index
        else:
            self._start_writing(index)
        return meta, sizes.cbytes

    def _start_writing(self, base: Any) -> None:
        self._index = WorkingIndex(base)
        self._keeper = SpaceKeeper(self.files, self._S, reuse=not self.files.compat,
                                   used=self._used_extents)

    def _url(self) -> str:
        return self.store.url(self.rootdir)

    # -- reading --------------------------------------------------------------------------

    @property
    def nchunks(self) -> int:
        return int(self._index.nchunks)

    def _entry(self, nchunk: int) -> Entry:
        e: Entry = self._index.entry(nchunk)
        if e.off < FILL:
            raise FormatError(f"chunk {nchunk} has no offset", self.chunk_path(nchunk))
        if e.off == FILL and self._absent is None:
            raise FormatError(f"chunk {nchunk} is recorded as absent, which this dataset "
                              "cannot hold", self.chunk_path(nchunk))
        return e

    def _read(self, key: Key, n: int, offset: int) -> bytes:
        data = self.files.pread(key, n, offset)
        if self._legacy is not None and key[1] == 0 and self._legacy.patches.get(key[0]):
            data = legacy.patched(data, offset, self._legacy.patches[key[0]])
        return data

    def special_chunk(self, nchunk: int) -> bytes | None:
        with self._lock:
            if not 0 <= nchunk < self._index.nchunks:
                return None
            return self._absent if self._entry(nchunk).off == FILL else None

    def read_chunk(self, nchunk: int) -> memoryview:
        with self._lock:
            e = self._entry(nchunk)
        if e.off == FILL:
            return memoryview(self._absent or b"")
        key = (nchunk // self._S, e.gen)
        return self._checked(nchunk, key, e, self._read(key, e.cbytes + self._dsize, e.off))

    def read_chunk_into(self, nchunk: int, scratch: Callable[[int], np.ndarray]) -> memoryview:
        with self._lock:
            e = self._entry(nchunk)
        if e.off == FILL:
            return memoryview(self._absent or b"")
        key = (nchunk // self._S, e.gen)
        n = e.cbytes + self._dsize
        if self._legacy is not None:
            return self._checked(nchunk, key, e, self._read(key, n, e.off))
        buf = scratch(n)[:n]
        got = self.files.pread_into(key, buf, e.off)
        return self._checked(nchunk, key, e, buf.data[:got])

    def _checked(self, nchunk: int, key: Key, e: Entry, buf: Any) -> memoryview:
        """Chunk bytes from a record read whole (chunk, then digest), once checked."""
        n, cb = e.cbytes + self._dsize, e.cbytes
        view = memoryview(buf).cast("B")
        if len(view) != n:
            raise FormatError(f"chunk {nchunk} truncated: {len(view)} of {n} bytes",
                              self.files.url(key), e.off)
        if self.verify and self._dsize and self._ck.digest(view[:cb]) != view[cb:]:
            raise ChecksumError(f"chunk {nchunk}: {self._ck.name} checksum mismatch",
                                self.files.url(key), e.off + cb)
        h = blosc.read_header(view[:blosc.BLOSC1_HEADER], self.files.url(key), e.off, size=cb)
        if h.cbytes != cb:
            raise FormatError(f"chunk {nchunk}: its header says {h.cbytes} bytes, the index "
                              f"{cb}", self.files.url(key), e.off)
        return view[:cb]

    @contextlib.contextmanager
    def prefetched(self, nchunks: Sequence[int]) -> Iterator[None]:
        """On object stores, a read about to decode most (three quarters) of the chunks of
        a file it has not opened fetches the file whole, in one request, instead of a
        request per chunk; the bytes serve this read only (each record checked as usual)."""
        if not self.store.remote:
            yield
            return
        wanted: dict[Key, int] = {}
        with self._lock:
            for n in nchunks:
                if 0 <= n < self._index.nchunks:
                    e = self._index.entry(n)
                    if e.stored:
                        key = (n // self._S, e.gen)
                        wanted[key] = wanted.get(key, 0) + 1
            total: dict[Key, int] = {}
            for key in wanted:
                k = key[0]
                total[key] = sum(1 for n in range(k * self._S, min((k + 1) * self._S,
                                                                    self._index.nchunks))
                                 if self._index.entry(n).gen == key[1])
        keys = [key for key, got in wanted.items() if 4 * got >= 3 * total[key]]
        adopted: list[Key] = []
        try:
            if keys:
                datas = self.store.get_many([self.files.path(key) for key in keys])
                adopted = [key for key, data in zip(keys, datas, strict=True)
                           if self.files.adopt_bytes(key, data)]
            yield
        finally:
            for key in adopted:
                self.files.forget(key)

    def chunk_reader(self, nchunk: int) -> tuple[ChunkReader, int]:
        if self.verify == "full" or self._needs_whole(nchunk):
            whole = bytes(self.read_chunk(nchunk))
            return ChunkReader(len(whole), lambda o, n: whole[o:o + n]), len(whole)
        with self._lock:
            cached = self._heads.get(nchunk)
            if cached is None:
                cached = self._head(nchunk)
                if cached is None:
                    absent = self._absent or b""
                    return ChunkReader(len(absent), lambda o, n: absent[o:o + n]), len(absent)
                self._heads[nchunk] = cached
                if len(self._heads) > _CACHED_HEADS:
                    self._heads.popitem(last=False)
            else:
                self._heads.move_to_end(nchunk)
        return self._ranged(cached), cached.cbytes

    def _needs_whole(self, nchunk: int) -> bool:
        """Whether a ranged read of ``nchunk`` must read it whole to check it (its record
        has no page digests)."""
        if not self.verify or not self._dsize or nchunk in self._heads:
            return False
        with self._lock:
            e = self._entry(nchunk)
        return e.off != FILL and not e.flags & HAS_PAGES

    def _head(self, nchunk: int) -> _Head | None:
        """The first bytes (checked) and page digests of chunk ``nchunk`` (None: absent)."""
        e = self._entry(nchunk)
        if e.off == FILL:
            return None
        key, cb, url = (nchunk // self._S, e.gen), e.cbytes, self.files.url((nchunk // self._S, e.gen))
        if not self.verify or not self._dsize:
            head = self._read(key, min(cb, _HEAD_READ), e.off)
            return _Head(key, e.off, cb, head, None, {})
        ndig = npages(cb, self._page) * self._dsize
        if cb + self._dsize + ndig <= _SMALL_RECORD:
            rec = self._read(key, cb + self._dsize + ndig, e.off)
            whole = bytes(self._checked(nchunk, key, e, rec[:cb + self._dsize]))
            return _Head(key, e.off, cb, whole, None, {})
        digests = self._read(key, ndig, e.off + cb + self._dsize)
        if len(digests) != ndig:
            raise FormatError(f"chunk {nchunk}: page digests truncated", url, e.off + cb)
        head = checked_head(self._read(key, min(cb, _HEAD_READ), e.off), cb, digests, self._ck,
                            self._page, url, e.off)
        return _Head(key, e.off, cb, head, digests, {})

    def _ranged(self, c: _Head) -> ChunkReader:
        head, size = c.head, c.cbytes

        def raw(o: int, n: int) -> bytes:
            return self._read(c.key, n, c.off + o)

        paged = None if c.digests is None else \
            PagedReader(size, raw, c.digests, self._ck, self._page, self.files.url(c.key), c.off)

        def read_at(offset: int, length: int) -> bytes:
            length = max(0, min(length, size - offset))
            if offset + length <= len(head):
                return bytes(head[offset:offset + length])
            return paged.read(offset, length) if paged is not None else raw(offset, length)

        def read_into(offset: int, out: Any) -> int:
            if paged is not None:
                return paged.read_into(offset, out)
            view = memoryview(out).cast("B")[:max(0, size - offset)]
            data = read_at(offset, len(view))
            view[:len(data)] = data
            return len(data)

        return ChunkReader(size, read_at, read_into, c.memo)

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
            self._heads.pop(nchunk, None)
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
            self._heads.pop(nchunk, None)
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
            for n in [n for n in self._heads if n >= first]:
                del self._heads[n]
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
            self._heads.clear()
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

    def tag(self, name: str, version_id: str) -> None:
        self._check_writable()
        self.dataset.tag(name, version_id)

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
        meta = self._meta_for(old.shape)
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
        return self._meta_for(state.shape), state.cbytes

    def switch(self, state: MemberState) -> None:
        """Take ``state`` (a member of another version) as this layout's committed state;
        a writer's records the current one holds and ``state`` does not become free."""
        view = IndexView(state.nchunks, state.pages, self.dataset.repo.pages)
        with self._lock:
            if self._keeper is not None:
                current = self.working_index
                for n in range(current.nchunks):
                    e = current.entry(n)
                    if e.stored and (n >= view.nchunks or
                                     (view.entry(n).gen, view.entry(n).off) != (e.gen, e.off)):
                        self._keeper.replaced(n, e)
                self._index = WorkingIndex(view)
                self._base_pages = state.pages
            else:
                self._index = view
            self._heads.clear()
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
        if self.files.compat:
            # Bloscpack reads chunks in order, back to back: repack what lost that order.
            self._touched = _sc_compact.touched(self._index.changed_pages(), self._S)
            self._keeper.compact |= {k for k in self._touched
                                     if _sc_compact.out_of_order(self, k)}
        if self._keeper.compact:
            _sc_compact.compact(self, sorted(self._keeper.compact))
        self.files.sync()
        attrs = self._stored_attrs
        base = self.dataset.state(self.member_name)
        base_pages = self._base_pages if self._base_pages is not None else \
            base.pages if base is not None and self._legacy is None else \
            np.zeros(0, dtype="u1")
        if self._legacy is not None:
            attrs = self._encode_attrs(self._attrs)
        self._staged_attrs_only = False
        return Staged(self.member_name, self.member_path, shape,
                      math.prod(shape) * meta.dtype.itemsize, cbytes, self._index.nchunks,
                      self._index.changed_pages(), base_pages, attrs)

    def published(self, state: MemberState, seq: int) -> None:
        assert self._keeper is not None
        with self._lock:
            if not self._staged_attrs_only:
                self._index.committed(IndexView(state.nchunks, state.pages,
                                                self.dataset.repo.pages))
                self._keeper.published(seq)
                self._heads.clear()
            self._stored_attrs = state.attrs
            self._committed = (tuple(state.shape), state.cbytes, state.attrs)
            self._pending = None
            self._base_pages = None
        if self._legacy is not None:
            self._finish_upgrade()
        if self.files.compat and self._touched:
            _sc_compact.mirror(self, sorted(self._touched))
            self._touched = set()

    def reclaim(self, remaining: Sequence[tuple[int, MemberState]]) -> None:
        if self._keeper is None:
            return
        pages = self.dataset.repo.pages

        def refers(n: int, old: Entry) -> bool:
            p, i = divmod(n, PAGE_ENTRIES)
            for _, st in remaining:
                if n < st.nchunks:
                    entry = pages.page(st.pages[p], min(PAGE_ENTRIES,
                                                         st.nchunks - p * PAGE_ENTRIES))[i]
                    if int(entry["gen"]) == old.gen and int(entry["off"]) == old.off:
                        return True
            return False

        with self._lock:
            self._keeper.reclaim([seq for seq, _ in remaining], refers)

    def _used_extents(self) -> dict[Key, list[tuple[int, int]]]:
        """Extents of records that the kept versions or the working index refer to."""
        used: dict[Key, list[tuple[int, int]]] = {}
        seen: set[tuple[int, int]] = set()

        def note(first: int, entries: np.ndarray) -> None:
            for i in np.flatnonzero(entries["off"] >= 0).tolist():
                e = entries[i]
                key = ((first + i) // self._S, int(e["gen"]))
                used.setdefault(key, []).append((int(e["off"]), int(e["room"])))

        pages = self.dataset.repo.pages
        for m in self.dataset.manifests():
            try:
                st = m.member(self.member_name)
            except KeyError:
                continue
            for p, ref in enumerate(st.pages):
                ident = (int(ref["seq"]), int(ref["off"]))
                if ident not in seen:
                    seen.add(ident)
                    n = min(PAGE_ENTRIES, st.nchunks - p * PAGE_ENTRIES)
                    note(p * PAGE_ENTRIES, pages.page(ref, n))
        if self._legacy is not None:
            for p, entries in enumerate(self._legacy.entries()):
                note(p * PAGE_ENTRIES, entries)
        for p, entries in self._index.changed_pages().items():
            note(p * PAGE_ENTRIES, entries)
        return used

    def _finish_upgrade(self) -> None:
        """The first version is published: record the new format, remove the old files."""
        store, meta_dir = self.store, self.store.join(self.rootdir, META_DIR)
        info = self.info.replace(version=3, page_size=self.info.page_size or
                                 (0 if self.files.compat or not self._dsize else
                                  DEFAULT_PAGE_SIZE))
        store.put(store.join(meta_dir, STORAGE_FILE), dumps(info.to_json()), fsync=self.fsync)
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

    # -- attributes -------------------------------------------------------------------------

    def _decode_attrs(self, stored: Any) -> dict[str, Any]:
        where = self.dataset.repo.store.url(self.dataset.repo.root)
        if not isinstance(stored, dict):
            raise FormatError("the version's attributes are not a JSON object", where)
        return attrvalues.load_typed(stored, where)

    @staticmethod
    def _encode_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
        return {attrvalues.check_name(k): attrvalues.encode_typed(v) for k, v in attrs.items()}

    def _legacy_attrs(self) -> dict[str, Any]:
        key = self.store.join(self.rootdir, META_DIR, ATTRS_FILE)
        path = self.store.url(key)
        try:
            obj = load_json(self.store.get(key), path, what="meta/attrs")
        except FileNotFoundError:
            return {}
        if not isinstance(obj, dict):
            raise FormatError("meta/attrs must hold a JSON object", path)
        return attrvalues.load_typed(obj, path)

    def load_attrs(self) -> dict[str, Any]:
        return dict(self._attrs)

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        """Record new attributes: a version of their own (the chunks committed last,
        the new attributes), or part of the open transaction's version."""
        self._check_writable()
        encoded = self._encode_attrs(attrs)
        if self._legacy is not None:
            self.store.put(self.store.join(self.rootdir, META_DIR, ATTRS_FILE), dumps(encoded),
                           fsync=self.fsync)
            self._attrs = dict(attrs)
            return
        self._attrs = dict(attrs)
        self._stored_attrs = encoded
        state = self.dataset.state(self.member_name)
        if state is None or self._committed is None:
            return
        staged = Staged(self.member_name, self.member_path, state.shape, state.nbytes,
                        state.cbytes, state.nchunks, {}, state.pages, encoded)
        if self._pending is not None and self.dataset.in_transaction:
            return  # the member's commit in this transaction records them
        self._staged_attrs_only = True
        self.dataset.publish_staged(staged)

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
        return self._read((nchunk // self._S, e.gen), n, e.off + e.cbytes + self._dsize)

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
            head = self._read(key, blosc.BLOSC1_HEADER, e.off)
            tail_len = self._dsize or min(16, e.cbytes)
            tail = self._read(key, tail_len, e.off + e.cbytes + self._dsize - tail_len)
        except FormatError:
            return (-1, -1)
        stamp = _stamp(e.gen, e.off, head, tail, e.cbytes)
        self._stamps[nchunk] = stamp
        return stamp

    def sidecar_names(self) -> list[str]:
        return self._sidecars.names()

    def load_sidecar(self, name: str) -> bytes | None:
        return self._sidecars.load(name)

    def save_sidecar(self, name: str, data: bytes | None) -> None:
        self._sidecars.save(name, data)

    def remove_leftovers(self) -> None:
        head = self.dataset.head
        self.dataset.repo.remove_leftovers(head.seq if head is not None else None)

    # -- parallel writers -----------------------------------------------------------------

    @property
    def unit_chunks(self) -> int:  # type: ignore[override]
        return self._S

    def write_unit(self, unit: int, chunks: Sequence[Any]) -> int:
        """Write superchunk ``unit``'s file whole (generation 0, with an offsets table
        :meth:`adopt` reads back)."""
        self._check_writable()
        if not 1 <= len(chunks) <= self._S:
            raise ValueError(f"a superchunk holds 1 to {self._S} chunks, got {len(chunks)}")
        return _sc_compact.write_unit(self, unit, [bytes(c) for c in chunks])

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
        self.files.close()
        if self.readonly:
            if not self.member_name or self._alone:  # a table's column: its table holds it
                self.dataset.release()
        elif self.member_name:
            self.dataset.detach(self.member_name)
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


MEMBER_FILE = "member"


def write_member_note(store: Store, rootdir: str, dataset_root: str, name: str,
                      fsync: bool) -> None:
    """Record in a member's ``meta/member`` where its dataset is (relative) and its name,
    so that opening the member's directory alone finds them."""
    rel = os.path.relpath(dataset_root, rootdir) if not store.remote else \
        "/".join([".."] * (name.count("/") + 1))
    store.put(store.join(rootdir, META_DIR, MEMBER_FILE),
              dumps({"dataset": rel.replace(os.sep, "/"), "name": name}), fsync=fsync)


def read_member_note(store: Store, rootdir: str) -> tuple[str, str] | None:
    """``(dataset root, member name)`` from a member's ``meta/member`` (None: not one)."""
    key = store.join(rootdir, META_DIR, MEMBER_FILE)
    try:
        obj = load_json(store.get(key), store.url(key), what="meta/member")
    except FileNotFoundError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("dataset"), str) or \
            not isinstance(obj.get("name"), str):
        raise FormatError("meta/member must name the dataset and the member", store.url(key))
    root = rootdir
    for part in obj["dataset"].split("/"):
        root = store.dirname(root) if part == ".." else store.join(root, part)
    return root, obj["name"]


def read_info(store: Store, rootdir: str) -> StorageInfo:
    key = store.join(rootdir, META_DIR, STORAGE_FILE)
    return StorageInfo.from_json(read_json(key, "meta/storage", store), store.url(key))


__all__ = ["DEFAULT_SPARE", "SuperchunkLayout", "default_superchunksize",
           "is_superchunk_dataset", "read_info", "superchunk_name"]
