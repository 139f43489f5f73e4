"""The superchunk layout: carray's own directory format, crash-safe and checksummed.

The format is described in docs/formats/superchunk.md: ``meta/`` (storage, sizes,
attrs, journal) and ``data/sc_NNNNNN.blp``, superchunk ``k`` a Bloscpack file holding
chunks ``[k*S, (k+1)*S)``, each followed by its digest and some room for rewrites;
absent chunks (offset -1, or no file) below ``fill_chunks`` hold the fill value.

Crash safety (the journal's bytes: docs/formats/superchunk.md).  The committed state is
``meta/sizes`` plus the superchunk files' offsets tables and headers; between commits
chunk bytes only go where it does not look (the end of a file, a new file under a
temporary name, or what was written since), and rewrites of committed room wait in
memory.  A commit fsyncs the new bytes, writes ``meta/journal`` (every write it is about
to make to committed bytes, the new sizes, a generation and a CRC) atomically, applies
it, replaces ``meta/sizes`` and deletes the journal; a writable open replays a complete
journal of the next generation: interrupted anywhere, it reopens at its last commit.

Checksums are verified on every read that decodes a whole chunk (``verify=True``).  A ranged read
(a few items or blocks of a chunk) fetches only the Blosc header, block table
and blocks it needs, so it checks those structures, not the digest; with
``verify="full"`` it fetches and checks the whole chunk first.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from carray import attrvalues
from carray.codecs import blosc
from carray.codecs.blosc import ChunkBytes
from carray.codecs.fill import special_item
from carray.dtypes import checked_shape
from carray.errors import (
    ChecksumError,
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
)
from carray.formats._blp_frame import (
    HEADER_SIZE,
    METADATA_HEADER_SIZE,
    BlpHeader,
    MetadataHeader,
    decode_metadata,
    dumps_metadata,
    encode_metadata_bytes,
    get_checksum,
)
from carray.layouts._superchunk_absent import AbsentChunks, absent_chunk
from carray.layouts._superchunk_commit import Committing, _patch
from carray.layouts._superchunk_fetch import Prefetching
from carray.layouts._superchunk_fill import Filling
from carray.layouts._superchunk_meta import (
    ATTRS_FILE,
    DATA_DIR,
    FORMAT_NAME,
    JOURNAL_FILE,
    META_DIR,
    SIZES_FILE,
    STORAGE_FILE,
    Journal,
    Sizes,
    StorageInfo,
    dumps,
)
from carray.layouts._superchunk_state import (
    CachedHead,
    ChunkSpan,
    Prefetched,
    Superchunk,
    chunk_stamp_of,
    crc_stamp,
)
from carray.layouts.base import ArrayMeta, ChunkReader, Layout, SidecarFiles, clear_for_create
from carray.layouts.bcolz import read_json
from carray.safejson import load_json
from carray.stores import LOCAL, Handle, Store

# Default superchunk: this many uncompressed bytes of chunks (a few MB compressed).
DEFAULT_SUPERCHUNK_NBYTES = 16 * 2**20
MAX_DEFAULT_SUPERCHUNKSIZE = 8192
DEFAULT_SPARE = 0.1
# In-place rewrites waiting for the next commit are held in memory up to this much.
INPLACE_LIMIT = 64 * 2**20
_OPEN_FILES = 64
_HEAD_READ = 4096
# Metadata bytes read with a superchunk file's header (more are read when there are).
_META_GUESS = 1024
# Chunk headers (with their block tables) kept for partial reads.
_CACHED_HEADS = 1024
_BLOSC_HEAD = blosc.BLOSC1_HEADER


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


class SuperchunkLayout(Committing, Prefetching, Filling, AbsentChunks, SidecarFiles, Layout):
    """Chunks grouped into Bloscpack-framed superchunk files with offsets and checksums.
    Use :meth:`create` or :meth:`open`; see the module docstring for the format."""

    concurrent_reads = True
    in_memory = False

    def __init__(self, rootdir: str, info: StorageInfo, readonly: bool, fsync: bool,
                 verify: bool | str, store: Store = LOCAL) -> None:
        super().__init__(readonly)
        self.store = store
        self.rootdir = rootdir
        self.info = info
        self.fsync = fsync
        self.verify = verify
        self.blosc1 = info.blosc1
        self._S = info.superchunksize
        self._ck = get_checksum(info.checksum)
        self._dsize = self._ck.size
        self._datadir = store.join(rootdir, DATA_DIR)
        self._metadir = store.join(rootdir, META_DIR)
        self._sidecar_dir = self._metadir
        self._scs: dict[int, Superchunk] = {}
        self._fds: OrderedDict[int, Handle] = OrderedDict()
        self._read_lock = threading.RLock()
        self._inplace: dict[int, bytes] = {}  # chunk -> chunk + digest, applied at commit
        self._inplace_bytes = 0
        self._overlay: dict[int, list[tuple[int, bytes]]] = {}  # mode 'r' journal replay
        self._stamps: dict[int, tuple[int, int]] = {}
        # nchunk -> (superchunk, offset, cbytes, first bytes, decoder memo), for
        # partial reads.
        self._heads: OrderedDict[int, CachedHead] = OrderedDict()
        self._count = 0
        self._generation = 0
        self._dropped = False
        self._touched: set[int] = set()  # superchunks changed since the last commit
        # nchunk -> (superchunk, offset, cbytes, chunk + digest) fetched for the read
        # under way (see Prefetching).
        self._prefetched: dict[int, Prefetched] = {}
        # Chunks below this bound may be absent (meta/sizes ``fill_chunks``): they hold
        # only the fill value, which reads get from ``_absent`` (a special chunk).
        self._fill_bound = 0
        self._no_file: set[int] = set()  # superchunks known to have no file
        self._filling = {}  # new superchunk files kept until written whole (see Filling)
        self._fill_item, self._absent = absent_chunk(info)

    # -- creation and opening ---------------------------------------------------------------

    @classmethod
    def create(cls, rootdir: str, meta: ArrayMeta, mode: str = "a",
               fsync: bool = True, superchunksize: int | None = None,
               checksum: str | int | None = "adler32", spare: float | None = None,
               blosc1: bool = False, verify: bool | str = True,
               store: Store = LOCAL) -> SuperchunkLayout:
        """Make a new, empty dataset directory holding ``meta``.

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
            (default 0.1; 0 on object stores, where every write replaces whole
            objects and the room would only be fetched and stored for nothing).
        blosc1 : bool
            Store Blosc1 chunks (with ``spare=0`` every superchunk file is then a
            Bloscpack file that bloscpack 0.16 reads).
        """
        rootdir = os.fspath(rootdir)
        if spare is None:
            spare = 0.0 if store.remote else DEFAULT_SPARE
        if not isinstance(spare, (int, float)) or not 0 <= spare <= 10:
            raise ValueError(f"spare must be a fraction in [0, 10], got {spare!r}")
        ck = get_checksum(checksum)  # ValueError for unknown names
        chunk_nbytes = meta.chunk_nbytes
        if superchunksize is None:
            superchunksize = default_superchunksize(chunk_nbytes)
        if not isinstance(superchunksize, int) or not 1 <= superchunksize <= 2**24:
            raise ValueError(f"superchunksize must be an int in 1..2**24, got {superchunksize!r}")
        info = StorageInfo(
            dtype=meta.dtype, chunkshape=tuple(meta.chunks), blockshape=meta.blocks,
            superchunksize=superchunksize, checksum=ck.name, spare=float(spare),
            blosc1=bool(blosc1), cparams=meta.cparams, dflt=meta.dflt,
            expectedlen=meta.expectedlen, typesize=blosc.blosc_typesize(meta.dtype),
            order=meta.order)
        clear_for_create(store, rootdir, mode)
        store.makedirs(store.join(rootdir, DATA_DIR))
        store.makedirs(store.join(rootdir, META_DIR))
        store.put(store.join(rootdir, META_DIR, STORAGE_FILE), dumps(info.to_json()),
                  fsync=fsync)
        layout = cls(rootdir, info, readonly=False, fsync=fsync, verify=verify, store=store)
        layout.save_attrs({})
        layout._generation = -1  # the first commit writes generation 0
        layout.commit(meta.replace(shape=(0, *meta.shape[1:])), 0)
        return layout

    @classmethod
    def open(cls, rootdir: str, readonly: bool = False, fsync: bool = True,
             verify: bool | str = True, store: Store = LOCAL
             ) -> tuple[SuperchunkLayout, ArrayMeta, int]:
        """Open a dataset; returns the layout, its metadata and its cbytes.

        In mode 'a' a complete journal left by an interrupted commit is replayed
        first; with ``readonly`` it is applied in memory only.
        """
        rootdir = os.fspath(rootdir)
        if not store.isdir(rootdir):
            raise ContainerNotFoundError(f"{store.url(rootdir)}: no such carray directory")
        storage_key = store.join(rootdir, META_DIR, STORAGE_FILE)
        storage_path = store.url(storage_key)
        info = StorageInfo.from_json(read_json(storage_key, "meta/storage", store), storage_path)
        layout = cls(rootdir, info, readonly=readonly, fsync=fsync, verify=verify, store=store)
        sizes = layout._recover()
        layout._generation = sizes.generation
        if len(sizes.shape) != len(info.chunkshape):
            raise FormatError(f"meta/sizes shape {list(sizes.shape)} and meta/storage "
                              f"chunkshape {list(info.chunkshape)} differ in length",
                              store.url(store.join(rootdir, META_DIR, SIZES_FILE)))
        meta = ArrayMeta(dtype=info.dtype, shape=sizes.shape, chunks=info.chunkshape,
                         blocks=info.blockshape, cparams=info.cparams, dflt=info.dflt,
                         expectedlen=info.expectedlen or sizes.length, order=info.order)
        try:
            layout._count = meta.nchunks
        except ValueError as exc:
            raise FormatError(f"meta/storage: {exc}", storage_path) from None
        sizes_path = store.url(store.join(rootdir, META_DIR, SIZES_FILE))
        checked_shape(meta.shape, itemsize=info.dtype.itemsize, source=sizes_path)
        # The shape is only a claim until the file of the last chunk is seen, or the
        # run of absent (fill) chunks recorded beside it covers it.
        layout._fill_bound = min(sizes.fill_chunks, layout._count) if layout._absent else 0
        last = (layout._count - 1) // info.superchunksize
        if layout._count > layout._fill_bound and not store.isfile(layout._sc_path(last)):
            raise FormatError(f"meta/sizes claims {layout._count} chunks, but superchunk file "
                              f"{superchunk_name(last)} is missing", sizes_path)
        return layout, meta, sizes.cbytes

    def _read_sizes(self) -> Sizes:
        path = self.store.join(self._metadir, SIZES_FILE)
        return Sizes.from_json(read_json(path, "meta/sizes", self.store), self.store.url(path))

    def _recover(self) -> Sizes:
        """The committed sizes, after replaying (or discarding) a leftover journal."""
        store = self.store
        sizes = self._read_sizes()
        jkey = store.join(self._metadir, JOURNAL_FILE)
        jpath = store.url(jkey)
        try:
            buf = store.get(jkey)
        except FileNotFoundError:
            return sizes
        journal = Journal.decode(buf)
        if journal is None or journal.generation != sizes.generation + 1:
            if not self.readonly:  # incomplete, damaged or already applied
                store.delete(jkey)
            return sizes
        try:
            new_sizes = Sizes.from_json(load_json(journal.sizes, jpath, what="journal sizes"),
                                        jpath)
        except (UnicodeDecodeError, ValueError) as exc:
            raise FormatError(f"journal holds bad sizes: {exc}", jpath) from None
        for k, offset, data in journal.writes:
            try:
                size = store.size(self._sc_path(k))
            except FileNotFoundError:
                raise FormatError(f"journal writes to missing {superchunk_name(k)}",
                                  jpath) from None
            if offset + len(data) > size:
                raise FormatError(f"journal write [{offset}, {offset + len(data)}) past the "
                                  f"end of {superchunk_name(k)} ({size} bytes)", jpath)
        if self.readonly:
            for k, offset, data in journal.writes:
                self._overlay.setdefault(k, []).append((offset, data))
            return new_sizes
        self._apply(journal.writes)
        store.put(store.join(self._metadir, SIZES_FILE), journal.sizes, fsync=self.fsync)
        if self.fsync:
            store.sync_dir(self._metadir)
        store.delete(jkey)
        return new_sizes

    # -- superchunk files -------------------------------------------------------------------

    def _sc_path(self, k: int) -> str:
        return self.store.join(self._datadir, superchunk_name(k))

    def chunk_path(self, nchunk: int) -> str:
        """The file holding chunk ``nchunk`` (for messages)."""
        return self.store.url(self._sc_path(nchunk // self._S))

    def _fd(self, sc: Superchunk) -> Handle:
        h = self._fds.get(sc.k)
        if h is not None:
            self._fds.move_to_end(sc.k)
            return h
        try:
            h = self.store.open(sc.path, "r" if self.readonly else "r+")
        except FileNotFoundError:
            raise FormatError(f"superchunk file {superchunk_name(sc.k)} is missing",
                              sc.url or self.store.url(sc.path)) from None
        self._fds[sc.k] = h
        if len(self._fds) > _OPEN_FILES:
            old_k, old_h = self._fds.popitem(last=False)
            old = self._scs.get(old_k)
            if old is not None and old.dirty and (self.fsync or self.store.remote):
                old_h.sync()  # on object stores, the only copy of what was written
                old.dirty = False
            old_h.close()
        return h

    def _pread(self, sc: Superchunk, n: int, offset: int) -> bytes:
        data = self._fd(sc).pread(n, offset)
        patches = self._overlay.get(sc.k)
        if patches:
            data = _patch(data, offset, patches)
        return data

    def _pwrite(self, sc: Superchunk, offset: int, parts: tuple[bytes, ...]) -> None:
        h = self._fd(sc)
        for part in parts:
            h.pwrite(part, offset)
            offset += memoryview(part).nbytes
        sc.dirty = True

    def _new_file(self, k: int, chunks: Sequence[bytes] = ()) -> int:
        """Write superchunk file ``k`` holding ``chunks`` (its first slots) under its name;
        returns their compressed bytes."""
        self._no_file.discard(k)
        raw = dumps_metadata({"format": FORMAT_NAME, "superchunk": k, "first_chunk": k * self._S,
                              "superchunksize": self._S})
        section, _ = encode_metadata_bytes(raw, checksum=self._ck.id, codec=None,
                                           max_meta_size=len(raw))
        nused = len(chunks)
        last = min(blosc.read_header(chunks[-1]).nbytes, max(self._chunk_size_field(), 0)) \
            if nused else 0
        header = BlpHeader(True, True, self._ck.id, self.info.typesize,
                           self._chunk_size_field(), last, nused, self._S - nused)
        table = np.full(self._S, -1, dtype="<i8")
        records, pos = [], HEADER_SIZE + len(section) + table.nbytes
        for slot, chunk in enumerate(chunks):
            spare = bytes(math.ceil(len(chunk) * self.info.spare))
            records += [chunk, self._ck.digest(chunk), spare]
            table[slot] = pos
            pos += len(chunk) + self._dsize + len(spare)
        self.store.put(self._sc_path(k), (header.pack(), section, table, *records),
                       fsync=self.fsync)
        return sum(len(c) for c in chunks)

    @property
    def unit_chunks(self) -> int:  # type: ignore[override]
        return self._S

    def write_unit(self, unit: int, chunks: Sequence[ChunkBytes]) -> int:
        if self.readonly:
            raise ReadOnlyError(f"{self.store.url(self.rootdir)}: opened read-only")
        if not 1 <= len(chunks) <= self._S:
            raise ValueError(f"a superchunk holds 1 to {self._S} chunks, got {len(chunks)}")
        return self._new_file(unit, [bytes(c) for c in chunks])

    def adopt(self, meta: ArrayMeta, cbytes: int) -> None:
        self._write_all_filled()
        for k in list(self._fds):
            self._forget(k)
        self._scs.clear()
        self._heads.clear()
        self._stamps.clear()
        self._inplace.clear()
        self._inplace_bytes = 0
        self._no_file.clear()
        self.store.invalidate(self.rootdir)
        self._count = meta.nchunks
        self._dropped = True  # files past the new end (from an earlier, longer state) go
        self.commit(meta, cbytes)

    def _chunk_size_field(self) -> int:
        n = self.info.chunk_nbytes
        return n if n <= 2**31 - 1 else -1

    def _get(self, k: int, create: bool = False) -> Superchunk:
        sc = self._scs.get(k)
        if sc is not None:
            return sc
        if k in self._filling:
            self._write_filled(k)
            return self._scs[k]
        path = self._sc_path(k)
        created = False
        if k not in self._fds:
            try:  # opening tells whether it exists: no separate request to ask
                self._fds[k] = self.store.open(path, "r" if self.readonly else "r+")
            except FileNotFoundError:
                if not create:
                    raise FormatError(f"superchunk file {superchunk_name(k)} is missing",
                                      self.store.url(path)) from None
                self._new_file(k)
                created = True
        sc = self._load(k, path)
        sc.created = created
        if not self.readonly:
            # Slots past the committed length are stale (from a shrink): free them.
            first = max(0, self._count - k * self._S)
            if first < self._S:
                sc.offsets[first:] = -1
        self._scs[k] = sc
        return sc

    def _load(self, k: int, key: str) -> Superchunk:
        path = self.store.url(key)
        sc = Superchunk(k, key, 0, 0, 0, None, None, None, 0, url=path)  # type: ignore[arg-type]
        self._scs[k] = sc  # so _fd/_pread can use it
        try:
            size = self._fd(sc).size
            # One read for header, metadata and offsets when the metadata is the usual
            # few hundred bytes: on object stores each read is a round trip.
            head = self._pread(sc, HEADER_SIZE + METADATA_HEADER_SIZE + _META_GUESS
                               + 8 * self._S, 0)
            header = BlpHeader.unpack(head[:HEADER_SIZE], path)
            if not (header.offsets and header.metadata):
                raise FormatError("superchunk file lacks its offsets table or metadata", path, 5)
            if header.checksum != self._ck.id:
                raise FormatError(f"checksum id {header.checksum} differs from meta/storage's "
                                  f"{self._ck.name}", path, 6)
            if header.total_slots != self._S:
                raise FormatError(f"{header.total_slots} offset slots, meta/storage says "
                                  f"superchunksize {self._S}", path, 16)
            mh = MetadataHeader.unpack(head[HEADER_SIZE:], path)
            if HEADER_SIZE + mh.section_size > size:
                raise FormatError(f"metadata section of {mh.section_size} bytes does not fit "
                                  f"a file of {size}", path, HEADER_SIZE)
            section = self._slice(sc, head, HEADER_SIZE, mh.section_size)
            obj, _ = decode_metadata(section, path, HEADER_SIZE, verify=bool(self.verify))
            if not isinstance(obj, dict) or obj.get("superchunk") != k:
                raise FormatError(f"metadata does not name superchunk {k}: {obj!r}", path,
                                  HEADER_SIZE)
            offsets_pos = HEADER_SIZE + mh.section_size
            data_start = offsets_pos + 8 * self._S
            if data_start > size:
                raise FormatError(f"offsets table ({self._S} slots) runs past the end of the "
                                  f"file ({size} bytes)", path, offsets_pos)
            table = np.frombuffer(self._slice(sc, head, offsets_pos, 8 * self._S),
                                  "<i8").copy()
            bad = np.flatnonzero((table < -1) | ((table >= 0) & ((table < data_start)
                                                                 | (table >= size))))
            if bad.size:
                i = int(bad[0])
                raise FormatError(f"offset of slot {i} is {int(table[i])}, outside the chunk "
                                  f"area [{data_start}, {size})", path, offsets_pos + 8 * i)
        except BaseException:
            self._scs.pop(k, None)
            h = self._fds.pop(k, None)
            if h is not None:
                h.close()
            raise
        sc.size, sc.offsets_pos, sc.data_start, sc.header = size, offsets_pos, data_start, header
        sc.offsets, sc.committed, sc.committed_end = table, table.copy(), size
        return sc

    def _slice(self, sc: Superchunk, head: bytes, offset: int, n: int) -> bytes:
        """``n`` bytes at ``offset``: from ``head`` (read at 0) when it holds them."""
        if offset + n <= len(head):
            return head[offset:offset + n]
        return self._pread(sc, n, offset)

    # -- chunks ---------------------------------------------------------------------------

    def _locate(self, nchunk: int) -> tuple[Superchunk, int]:
        if not 0 <= nchunk < self._count:
            raise IndexError(f"chunk {nchunk} out of range (the dataset has {self._count})")
        k, slot = divmod(nchunk, self._S)
        sc = self._get(k)
        off = int(sc.offsets[slot])
        if off < 0:
            raise FormatError(f"chunk {nchunk} has no offset (slot {slot} is -1)", sc.url,
                              sc.offsets_pos + 8 * slot)
        return sc, off

    def chunk_span(self, nchunk: int) -> ChunkSpan:
        """Where chunk ``nchunk`` is stored: its file, offset, size and room (for tools
        and tests that inspect files)."""
        with self._read_lock:
            sc, off = self._locate(nchunk)
            return ChunkSpan(sc.url, off, self._head(sc, off, nchunk).cbytes,
                             self._capacity(sc, off), sc.offsets_pos, sc.data_start)

    def _head(self, sc: Superchunk, off: int, nchunk: int, head: bytes = b"") -> blosc.ChunkHeader:
        head = head or self._pread(sc, _BLOSC_HEAD, off)
        h = blosc.read_header(head, sc.url, off, size=sc.size - off)
        if off + h.cbytes + self._dsize > sc.size:
            raise FormatError(f"chunk {nchunk}: its checksum runs past the end of the file",
                              sc.url, off + h.cbytes)
        return h

    def read_chunk(self, nchunk: int) -> memoryview:
        # Safe from several threads: file handles and caches change under the lock;
        # the digest, the slow part, is computed outside it.
        fetched = self._prefetched.pop(nchunk, None)
        if fetched is not None:
            return self._verified(nchunk, *fetched)
        with self._read_lock:
            rec = self._inplace.get(nchunk)
            if rec is not None:
                return memoryview(rec)[:len(rec) - self._dsize]
            found = self._lookup(nchunk)
            if found is None:
                return memoryview(self._absent or b"")  # (None only for Blosc1 datasets)
            sc, off = found
            cbytes, buf = sc.sizes.get(nchunk % self._S), None
            if self._remote_reads(sc):
                # One request for the chunk's whole room (chunk, digest, spare), made
                # outside the lock so that other threads fetch at the same time.
                h, span = self._fd(sc), self._capacity(sc, off)
            else:
                if cbytes is None:
                    cbytes = self._head(sc, off, nchunk).cbytes
                buf = self._pread(sc, cbytes + self._dsize, off)
        if cbytes is None or buf is None:
            buf = h.pread(span if cbytes is None else cbytes + self._dsize, off)
            if cbytes is None:
                cbytes = blosc.read_header(buf, sc.url, off, size=len(buf)).cbytes
                buf = buf[:cbytes + self._dsize]
        return self._verified(nchunk, sc, off, cbytes, buf)

    def _verified(self, nchunk: int, sc: Superchunk, off: int, cbytes: int,
                  buf: bytes | memoryview) -> memoryview:
        """Chunk bytes from a record read whole (chunk, then digest), once checked."""
        n = cbytes + self._dsize
        if len(buf) != n:
            raise FormatError(f"chunk {nchunk} truncated: {len(buf)} of {n} bytes", sc.url, off)
        view = memoryview(buf)
        if self.verify and self._dsize and \
                self._ck.digest(view[:cbytes]) != view[cbytes:]:
            raise ChecksumError(f"chunk {nchunk}: {self._ck.name} checksum mismatch", sc.url,
                                off + cbytes)
        return view[:cbytes]

    def chunk_reader(self, nchunk: int) -> tuple[Callable[[int, int], bytes], int]:
        fetched = self._prefetched.get(nchunk)
        rec = self._inplace.get(nchunk) if fetched is None else fetched[3]
        if rec is None and self.verify == "full":
            # Ranged reads fetch the whole chunk too, so its digest is checked first.
            rec = bytes(self.read_chunk(nchunk)) + bytes(self._dsize)
        if rec is not None:
            size = len(rec) - self._dsize
            return ChunkReader(size, lambda o, n: rec[o:min(o + n, size)]), size
        # File handles and caches change under the lock (see read_chunk).  The first
        # read takes a few KiB, so the header and block table cost one syscall, and
        # is kept for the next partial read of the same chunk.
        with self._read_lock:
            cached = self._heads.get(nchunk)
            if cached is None:
                found = self._lookup(nchunk)
                if found is None:
                    absent = self._absent or b""  # (None only for Blosc1 datasets)
                    return ChunkReader(len(absent), lambda o, n: absent[o:o + n]), len(absent)
                sc, off = found
                head = self._pread(sc, min(_HEAD_READ, sc.size - off), off)
                h = blosc.read_header(head, sc.url, off, size=sc.size - off)
                cached = self._heads[nchunk] = (sc, off, h.cbytes, head[:h.cbytes], {})
                if len(self._heads) > _CACHED_HEADS:
                    self._heads.popitem(last=False)
            else:
                self._heads.move_to_end(nchunk)
        sc, off, size, head, memo = cached

        def read_at(offset: int, length: int) -> bytes:
            length = max(0, min(length, size - offset))
            if offset + length <= len(head):
                return bytes(head[offset:offset + length])
            with self._read_lock:
                if not self._remote_reads(sc):
                    return self._pread(sc, length, off + offset)
                h = self._fd(sc)
            return h.pread(length, off + offset)

        def read_into(offset: int, out: Any) -> int:
            view = memoryview(out).cast("B")[:max(0, size - offset)]
            if offset + len(view) <= len(head) or self._overlay.get(sc.k):
                data = read_at(offset, len(view))
                view[:len(data)] = data
                return len(data)
            with self._read_lock:  # a local handle may be evicted by another thread
                h = self._fd(sc)
                if not self._remote_reads(sc):
                    return h.pread_into(view, off + offset)
            return h.pread_into(view, off + offset)

        return ChunkReader(size, read_at, read_into, memo), size

    def _remote_reads(self, sc: Superchunk) -> bool:
        """Whether reads of ``sc`` may run outside the lock: on object stores a handle
        evicted meanwhile still reads (by ranges), and waiting on the network under
        the lock would make concurrent fetches take turns."""
        return self.store.remote and not self._overlay.get(sc.k)

    def _cbytes_of(self, sc: Superchunk, slot: int, off: int) -> int:
        known = sc.sizes.get(slot)
        if known is not None:
            return known
        rec = self._inplace.get(sc.k * self._S + slot)
        if rec is not None:
            return len(rec) - self._dsize
        try:
            cbytes = self._head(sc, off, sc.k * self._S + slot).cbytes
        except FormatError:
            return 0
        sc.sizes[slot] = cbytes
        return cbytes

    def _capacity(self, sc: Superchunk, off: int) -> int:
        offs = sc.offsets
        higher = offs[offs > off]
        return (int(higher.min()) if higher.size else sc.size) - off

    def chunk_digest(self, data: bytes) -> bytes:
        return self._ck.digest(data)

    def write_chunk(self, nchunk: int, data: bytes, digest: bytes | None = None) -> int:
        if self.readonly:
            raise ReadOnlyError(f"{self.store.url(self.rootdir)}: opened read-only")
        self._heads.pop(nchunk, None)
        if not 0 <= nchunk <= self._count:
            raise IndexError(f"chunk {nchunk} written before chunk {self._count}")
        if self._absent and special_item(data, self.info.dtype) == self._fill_item:
            return self._write_absent(nchunk)
        data = bytes(data)
        digest = self._ck.digest(data) if digest is None else digest
        filled = self._fill(nchunk, data, digest)
        if filled is not None:  # the next chunk of a new file, written whole later
            self._stamps[nchunk] = chunk_stamp_of(filled, data, digest)
            return len(data)
        k, slot = divmod(nchunk, self._S)
        sc = self._get(k, create=True)
        self._touched.add(k)
        need = len(data) + self._dsize
        old = int(sc.offsets[slot])
        old_cbytes = self._cbytes_of(sc, slot, old) if old >= 0 and nchunk < self._count else 0
        prev = self._inplace.pop(nchunk, None)
        if prev is not None:
            self._inplace_bytes -= len(prev)
        self._count = max(self._count, nchunk + 1)
        sc.sizes[slot] = len(data)
        if old >= 0:
            room = self._capacity(sc, old)
            if need <= room:
                if old >= sc.committed_end:
                    # Written since the last commit: nothing committed refers to it.
                    self._pwrite(sc, old, (data, digest))
                    self._stamps[nchunk] = chunk_stamp_of(old, data, digest)
                    return len(data) - old_cbytes
                if self._inplace_bytes + need <= INPLACE_LIMIT:
                    self._inplace[nchunk] = data + digest
                    self._inplace_bytes += need
                    self._stamps[nchunk] = chunk_stamp_of(old, data, digest)
                    return len(data) - old_cbytes
            if old < sc.committed_end:
                sc.garbage += room
        off = sc.size
        spare = math.ceil(len(data) * self.info.spare)
        self._pwrite(sc, off, (data, digest, bytes(spare)))
        sc.size += need + spare
        sc.offsets[slot] = off
        self._stamps[nchunk] = chunk_stamp_of(off, data, digest)
        return len(data) - old_cbytes

    def drop_chunks(self, first: int) -> int:
        if self.readonly:
            raise ReadOnlyError(f"{self.store.url(self.rootdir)}: opened read-only")
        self._write_all_filled()
        self._heads.clear()
        first = max(first, 0)
        removed = 0
        for n in range(first, self._count):
            found = self._lookup(n)
            if found is not None:
                removed += self._cbytes_of(found[0], n % self._S, found[1])
        for n in [n for n in self._inplace if n >= first]:
            self._inplace_bytes -= len(self._inplace.pop(n))
        for n in [n for n in self._stamps if n >= first]:
            del self._stamps[n]
        for k in self._existing_superchunks():
            if (k + 1) * self._S <= first:
                continue
            try:
                sc = self._get(k)
            except FormatError:
                continue  # a damaged file past the end is deleted at the next commit
            lo = max(0, first - k * self._S)
            sc.offsets[lo:] = -1
            self._touched.add(k)
            for slot in [s for s in sc.sizes if s >= lo]:
                del sc.sizes[slot]
        self._count = min(self._count, first)
        self._fill_bound = min(self._fill_bound, first)
        self._dropped = True
        return -removed

    def _existing_superchunks(self) -> list[int]:
        self._write_all_filled()
        found = set(self._scs)
        for name in self.store.listdir(self._datadir):
            if name.startswith("sc_") and name.endswith(".blp") and name[3:-4].isdigit():
                found.add(int(name[3:-4]))
        return sorted(found)

    # -- metadata -------------------------------------------------------------------------

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        stamp = self._stamps.get(nchunk)
        if stamp is not None:
            return stamp
        if nchunk >= self._count:
            return (-1, -1)
        try:
            if (found := self._lookup(nchunk)) is None:
                return (0, 0)  # absent: always the fill value
            sc, off = found
            head = self._pread(sc, _BLOSC_HEAD, off)
            cbytes = self._head(sc, off, nchunk, head).cbytes
            if self.readonly:  # the chunk read that usually follows needs no head read
                sc.sizes[nchunk % self._S] = cbytes
            tail, rec_end = self._dsize or min(16, cbytes), cbytes + self._dsize
            end = self._pread(sc, tail, off + rec_end - tail)
        except FormatError:
            return (-1, -1)
        return (cbytes, crc_stamp(off, head, end))

    def load_attrs(self) -> dict[str, Any]:
        key = self.store.join(self._metadir, ATTRS_FILE)
        path = self.store.url(key)
        try:
            obj = load_json(self.store.get(key), path, what="meta/attrs")
        except FileNotFoundError:
            return {}
        if not isinstance(obj, dict):
            raise FormatError("meta/attrs must hold a JSON object", path)
        return attrvalues.load_typed(obj, path)

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        if self.readonly:
            raise ReadOnlyError(f"{self.store.url(self.rootdir)}: opened read-only")
        encoded = {attrvalues.check_name(k): attrvalues.encode_typed(v)
                   for k, v in attrs.items()}
        self.store.put(self.store.join(self._metadir, ATTRS_FILE), dumps(encoded),
                       fsync=self.fsync)

    def commit(self, meta: ArrayMeta, cbytes: int) -> None:
        self._write_all_filled()
        super().commit(meta, cbytes)

    def close(self) -> None:
        if not self.readonly:
            self._write_all_filled()
        for k in list(self._fds):
            sc = self._scs.get(k)
            h = self._fds.pop(k)
            # Uncommitted bytes are not referenced by anything: fsync them locally (cheap,
            # and what a later commit would do), but never upload them from here, which
            # may run in a finalizer.
            if sc is not None and sc.dirty and self.fsync and not self.store.remote:
                h.sync()
                sc.dirty = False
            h.close()
        self.release_lock()

    def describe(self) -> str:
        return f"superchunk directory {self.store.url(self.rootdir)!r}"


# -- helpers ------------------------------------------------------------------------------
