"""Layouts: how an array's chunks and metadata map to storage.

A layout knows nothing of selections; an array never parses a header.  New
datasets on disk use the superchunk layout unless ``format="bcolz"`` or
``format="b2nd"`` (python-blosc2 frames; the default for paths ending in
``.b2nd``) is asked for; existing ones are told apart by what is on disk.

A writable open or create takes the writer's lock (:mod:`carray.stores.lock`),
waiting ``storage={"lock_timeout": seconds}`` for another process's writer to close,
unless ``storage={"lock": False}`` says a coordinating writer already holds it
(parallel writers of whole files, see :mod:`carray.engine.units`); one for
``mode='w'`` takes the dataset over from this process's older handles.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from carray.core.problems import Finding
from carray.errors import ContainerExistsError, FormatError, VersionsUnsupportedError
from carray.layouts.b2nd import verify as _b2frame_verify
from carray.layouts.b2nd.layout import B2ndLayout, is_b2nd_frame
from carray.layouts.base import ArrayMeta, Layout
from carray.layouts.bcolz import verify as _bcolz_verify
from carray.layouts.bcolz.layout import BcolzLayout, is_bcolz_carray
from carray.layouts.memory import MemoryLayout
from carray.layouts.superchunk import opening as superchunk_open
from carray.layouts.superchunk import verify as _superchunk_verify
from carray.layouts.superchunk.layout import SuperchunkLayout, is_superchunk_dataset
from carray.layouts.superchunk.meta import read_member_note
from carray.stores import LOCAL, Store
from carray.stores.lock import WriteLock, timeout_of

FORMATS = ("superchunk", "bcolz", "b2nd", "caterva")
#: Extension of a path that makes a new array a Blosc2 frame (python-blosc2's own).
B2ND_EXTENSION = ".b2nd"


@dataclass(frozen=True)
class LayoutKind:
    """One on-disk array layout: its name, class, how to recognise it and verify it."""

    name: str
    cls: type[Layout]
    sniff: Callable[[str, Store], bool]
    verify: Callable[[Store, str], Iterator[Finding]]


#: In the order they are tried: a superchunk directory also has bcolz's meta/storage.
LAYOUTS: tuple[LayoutKind, ...] = (
    LayoutKind("b2nd", B2ndLayout, is_b2nd_frame, _b2frame_verify.verify),
    LayoutKind("superchunk", SuperchunkLayout, is_superchunk_dataset, _superchunk_verify.verify),
    LayoutKind("bcolz", BcolzLayout, is_bcolz_carray, _bcolz_verify.verify),
)


def sniff_layout(path: str, store: Store = LOCAL) -> LayoutKind | None:
    """The layout of the array stored at ``path``, told by what is there (None: not one)."""
    for kind in LAYOUTS:
        if kind.sniff(path, store):
            return kind
    return None


def default_format(rootdir: str | os.PathLike[str] | None, preferred: str | None = None) -> str:
    """The layout a new array at ``rootdir`` gets when no ``format`` is asked for: a Blosc2
    frame for a ``.b2nd`` path, else ``preferred`` (``carray.defaults.format``) or
    'superchunk'."""
    if rootdir is not None and os.fspath(rootdir).endswith(B2ND_EXTENSION):
        return "b2nd"
    return preferred or "superchunk"


def create_layout(rootdir: str | os.PathLike[str] | None, meta: ArrayMeta, *,
                  format: str | None = None, mode: str = "a",  # noqa: A002
                  fsync: bool = True, storage: dict[str, Any] | None = None,
                  store: Store = LOCAL) -> Layout:
    """A new, empty layout for ``meta``: in memory when ``rootdir`` is None.

    ``rootdir`` is a path inside ``store`` (see :func:`carray.stores.resolve`).
    """
    if rootdir is None:
        return MemoryLayout()
    rootdir = os.fspath(rootdir)
    fmt = format or default_format(rootdir)
    storage = dict(storage or {})
    timeout = timeout_of(storage)
    storage.pop("lock_timeout", None)
    # A member of a dataset of several arrays (a table's column) is locked with it.
    locking = storage.pop("lock", True) and storage.get("member") is None
    if locking:
        refuse_member(store, rootdir)
    # A dataset being replaced (mode 'w') must not be open for writing elsewhere; this
    # process's own older handles are closed (taken over).
    old_lock = WriteLock.acquire(store, rootdir, take_over=mode == "w", timeout=timeout) \
        if locking else None
    try:
        layout: Layout
        if fmt in ("b2nd", "caterva"):  # caterva: the same frame, caterva 0.7's metalayer
            layout = B2ndLayout.create(rootdir, meta, mode=mode, fsync=fsync, store=store,
                                       kind=fmt, **storage)
        elif fmt == "superchunk":
            layout = superchunk_open.create(rootdir, meta, mode=mode, fsync=fsync,
                                             store=store, **storage)
        else:
            layout = BcolzLayout.create(rootdir, meta, mode=mode, fsync=fsync, store=store,
                                        verify=storage.get("verify", True))
    finally:
        if old_lock is not None:
            old_lock.release()
    if locking:
        _lock(layout, store, rootdir)
    return layout


def refuse_member(store: Store, rootdir: str) -> None:
    """A table's column is replaced through its table, never on its own: LockError while
    the table is open for writing, ContainerExistsError otherwise."""
    note = read_member_note(store, rootdir) if store.isdir(rootdir) else None
    if note is None:
        return
    dataset, name = note
    lock = WriteLock.acquire(store, dataset, timeout=0)
    if lock is not None:
        lock.release()
    raise ContainerExistsError(f"{store.url(rootdir)} is {name!r} of the table at "
                               f"{store.url(dataset)}: change it through the table")


def _lock(layout: Layout, store: Store, rootdir: str) -> None:
    """Give ``layout`` the writer's lock on ``rootdir`` (closing it if that fails)."""
    try:
        layout.hold_lock(WriteLock.acquire(store, rootdir))
    except BaseException:
        layout.close()
        raise


def open_layout(rootdir: str | os.PathLike[str], *, readonly: bool, fsync: bool = True,
                allow_pickle: bool = False, storage: dict[str, Any] | None = None,
                store: Store = LOCAL, version: str | None = None, tag: str | None = None,
                as_of: Any = None, take_over: bool = False) -> tuple[Layout, ArrayMeta, int]:
    """Open an existing dataset (directory or Blosc2 frame file), whichever layout it is in.

    ``version``, ``tag`` or ``as_of`` open an earlier version read-only (carray's own
    layout only: the others keep none). ``take_over`` (a ``mode='w'`` open) closes this
    process's older writable handles of it (see :mod:`carray.stores.lock`).
    """
    rootdir = os.fspath(rootdir)
    pinned = version is not None or tag is not None or as_of is not None
    store.invalidate(rootdir)  # other processes may have written since we last looked
    kind = sniff_layout(rootdir, store)
    if kind is None:
        raise FormatError("not a carray directory (no meta/storage)", store.url(rootdir))
    storage = storage or {}
    if pinned and kind.cls is not SuperchunkLayout:
        raise VersionsUnsupportedError(
            f"{store.url(rootdir)}: a {kind.name} dataset keeps no versions (only carray's "
            "own superchunk layout does)")
    readonly = readonly or pinned
    # Taken before anything is read: opening for writing may recover an interrupted commit.
    # A member of a dataset of several arrays (a table's column) is locked with it.
    lock = WriteLock.acquire(store, rootdir, take_over=take_over,
                             hand_over=kind.cls.hands_over, timeout=timeout_of(storage)) \
        if not readonly and storage.get("lock", True) and storage.get("member") is None \
        else None
    opened: tuple[Layout, ArrayMeta, int]
    verify = storage.get("verify", True)
    try:
        if kind.cls is B2ndLayout:
            opened = B2ndLayout.open(rootdir, readonly=readonly, fsync=fsync, store=store,
                                     verify=verify)
        elif kind.cls is SuperchunkLayout:
            opened = superchunk_open.open_dir(
                rootdir, readonly=readonly, fsync=fsync, verify=verify,
                store=store, version=version, tag=tag, as_of=as_of,
                versions=storage.get("versions"), member=storage.get("member"),
                **({"grace": storage["grace"]} if "grace" in storage else {}))
            # Where nothing is locked, how long another writer's unfinished commit is
            # waited for before it is taken as abandoned (docs/spec/commit.md [C14]).
            opened[0].versioned_dataset().decide_after = timeout_of(storage)
        else:
            opened = BcolzLayout.open(rootdir, readonly=readonly, fsync=fsync,
                                      allow_pickle=allow_pickle, store=store, verify=verify)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    opened[0].hold_lock(lock)
    if lock is not None or (not readonly and store.remote):
        _tidy(opened[0])
    return opened


def _tidy(layout: Layout) -> None:
    try:
        layout.remove_leftovers()
    except BaseException:
        layout.close()
        raise


__all__ = ["B2ND_EXTENSION", "FORMATS", "LAYOUTS", "ArrayMeta", "B2ndLayout", "Layout",
           "LayoutKind", "MemoryLayout", "create_layout", "default_format", "open_layout",
           "sniff_layout"]
