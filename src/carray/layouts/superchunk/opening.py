"""Making and opening superchunk directories (see :mod:`.superchunk`): a new dataset, the
version a reader asks for, a member of a dataset of several arrays (a table's column),
such a member opened on its own, and directories written before versions."""

from __future__ import annotations

import contextlib
import errno
import os
from functools import partial
from typing import Any

from carray.codecs import blosc
from carray.codecs.checksums import get_checksum
from carray.errors import ContainerNotFoundError, FormatError, VersionError
from carray.layouts.base import ArrayMeta, clear_for_create
from carray.layouts.superchunk.layout import DEFAULT_SPARE, SuperchunkLayout, default_superchunksize
from carray.layouts.superchunk.meta import (
    DATA_DIR,
    DEFAULT_PAGE_SIZE,
    META_DIR,
    SIZES_FILE,
    STORAGE_FILE,
    StorageInfo,
    read_info,
    read_member_note,
    write_member_note,
)
from carray.stores import LOCAL, Store
from carray.stores.lock import WriteLock
from carray.versions import Repository
from carray.versions.dataset import Membership, VersionedDataset, open_dataset, retention_of
from carray.versions.repo import DEFAULT_GRACE


def create(rootdir: str | os.PathLike[str], meta: ArrayMeta, mode: str = "a",
           fsync: bool = True, superchunksize: int | None = None,
           checksum: str | int | None = "adler32", spare: float | None = None,
           blosc1: bool = False, verify: bool | str = True, store: Store = LOCAL,
           versions: Any = None, grace: float = DEFAULT_GRACE,
           member: Membership | None = None) -> SuperchunkLayout:
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
    info = _new_info(meta, superchunksize, checksum, spare, blosc1, store)
    keep = retention_of(versions)
    clear_for_create(store, rootdir, mode)
    store.makedirs(store.join(rootdir, DATA_DIR))
    store.makedirs(store.join(rootdir, META_DIR))
    # A new array of its own is made durable on a background thread, which its first
    # commit (or its close) waits for: what a caller writes meanwhile overlaps the syncs.
    later = fsync and member is None and not store.remote
    store.put(store.join(rootdir, META_DIR, STORAGE_FILE), info.encode(),
              fsync=fsync and not later)
    if member is None:
        dataset = VersionedDataset(Repository(store, rootdir, fsync, grace), False, None,
                                   keep=keep)
        name = ""
    else:
        dataset, name = member.dataset, member.name
        write_member_note(store, rootdir, dataset.repo.root, name, fsync)
    layout = SuperchunkLayout(rootdir, info, readonly=False, fsync=fsync, verify=verify,
                              store=store, dataset=dataset, member=name, member_path=name)
    layout.start_new()
    if meta.shape:  # a 0-d array is one chunk: its first version comes with its item
        dataset.repo.fsync = fsync and not later
        try:
            layout.commit(meta.replace(shape=(0, *meta.shape[1:])), 0)
        finally:
            dataset.repo.fsync = fsync
    if later:
        layout.files.defer(partial(_sync_created, store, rootdir, dataset))
    return layout


def _sync_created(store: Store, rootdir: str, dataset: VersionedDataset) -> None:
    """Make a new dataset durable: its storage file, its first version (if any) and the
    directories naming them, up to the dataset's own entry in its parent."""
    store.sync_file(store.join(rootdir, META_DIR, STORAGE_FILE))
    head = dataset.head
    if head is not None:
        try:
            dataset.repo.sync_published(head.seq)
        except OSError as exc:
            # A later commit (synced by itself) may have dropped the first version
            # while this ran: then there is nothing of it left to make durable.
            if exc.errno != errno.ENOENT or dataset.head is head:
                raise
    for d in (META_DIR, DATA_DIR):
        store.sync_dir(store.join(rootdir, d))
    store.sync_dir(rootdir)
    with contextlib.suppress(PermissionError):  # a parent one may not read: as before
        store.sync_dir(store.dirname(rootdir))


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


def open_dir(rootdir: str | os.PathLike[str], readonly: bool = False, fsync: bool = True,
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
        return open_member(member.dataset, rootdir, info, member.name, member.name, readonly,
                           fsync, verify)
    note = read_member_note(store, rootdir)
    if note is not None:  # a column of a table, opened on its own
        return _open_alone(rootdir, info, note, readonly, fsync, verify, store,
                           dict(version=version, tag=tag, as_of=as_of), grace)
    repo = Repository(store, rootdir, fsync, grace)
    if Repository.exists_at(store, rootdir):
        dataset = open_dataset(repo, readonly, version, tag, as_of, keep=versions)
        return open_member(dataset, rootdir, info, "", "", readonly, fsync, verify)
    if version is not None or tag is not None or as_of is not None:
        raise VersionError(f"{store.url(rootdir)}: written before versions, it has none")
    dataset = VersionedDataset(repo, readonly, None, keep=retention_of(versions))
    layout = SuperchunkLayout(rootdir, info, readonly, fsync, verify, store, dataset)
    meta, cbytes = layout.open_legacy()
    return layout, meta, cbytes


def _open_alone(rootdir: str, info: StorageInfo, note: tuple[str, str], readonly: bool,
                fsync: bool, verify: bool | str, store: Store, at: dict[str, Any],
                grace: float) -> tuple[SuperchunkLayout, ArrayMeta, int]:
    """A member (a table's column) opened on its own: a reader of its dataset's version,
    or a writer holding its dataset's lock whose commits keep the length (the table's)."""
    root, name = note
    lock = None if readonly else WriteLock.acquire(store, root)
    try:
        dataset = open_dataset(Repository(store, root, fsync, grace), readonly, **at)
        layout, meta, cbytes = open_member(dataset, rootdir, info, name, name, readonly,
                                           fsync, verify)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    layout.hold_alone(lock)
    return layout, meta, cbytes


def open_member(dataset: VersionedDataset, rootdir: str, info: StorageInfo, name: str,
                path: str, readonly: bool, fsync: bool, verify: bool | str
                ) -> tuple[SuperchunkLayout, ArrayMeta, int]:
    """Member ``name`` (stored under ``rootdir``, at ``path`` in the dataset) of a
    versioned dataset; an array written
    before versions (a column of an older table) joins it, to be published by the
    dataset's next commit."""
    store = dataset.repo.store
    state = dataset.state(name)
    if state is None and not readonly and dataset.head is None and \
            store.isfile(store.join(rootdir, META_DIR, SIZES_FILE)):
        layout = SuperchunkLayout(rootdir, info, False, fsync, verify, store, dataset, name,
                                  path)
        meta, cbytes = layout.open_legacy()
        return layout, meta, cbytes
    if state is None:
        raise FormatError(f"the version held has no member {name!r}",
                          dataset.repo.url(dataset.head.seq if dataset.head else 0))
    layout = SuperchunkLayout(rootdir, info, readonly, fsync, verify, store, dataset, name,
                              path)
    return layout, layout.start_at(state), state.cbytes
