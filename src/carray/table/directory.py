"""A table directory's storage, made or opened: versioned (carray's own) or bcolz's (see
:mod:`carray.table.store` and :mod:`carray.table.bcolz.table`).  A writable table holds the
directory's writer's lock, which a later ``mode='w'`` open of this process takes over."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from carray.errors import FormatError, VersionsUnsupportedError
from carray.layouts.base import clear_for_create
from carray.stores import Store, staging
from carray.stores.lock import WriteLock
from carray.table.bcolz.table import BcolzTable
from carray.table.store import (
    ROOTDIRS,
    TABLE_FILE,
    TableStorage,
    VersionedTable,
    is_bcolz_table,
    is_versioned_table,
)


def create_storage(store: Store, root: str, mode: str, fsync: bool, bcolz: bool,
                   versions: Any, owner: Any, nested: Callable[..., Any],
                   storage_options: dict | None,
                   on_takeover: Callable[[str], None],
                   timeout: float | None = None) -> TableStorage:
    """The storage of a new table at ``root``, replacing what is there (mode 'w': not while
    another process writes it; this process's older handles are taken over).

    ``owner`` is the table (a bcolz table's storage calls back into it), ``nested`` the
    class of nested columns, ``on_takeover(reason)`` closes the table when a later
    ``mode='w'`` open takes the directory over, ``timeout`` is how long to wait for another
    process's writer (see :mod:`carray.stores.lock`).
    """
    old = WriteLock.acquire(store, root, take_over=mode == "w", timeout=timeout)
    try:
        clear_for_create(store, root, "w")
        lock = staging.new_directory(store, root)  # locked before it has its name
    finally:
        if old is not None:
            old.release()  # it locked the directory removed
    if lock is not None:
        lock.on_takeover(on_takeover)
    try:
        if bcolz:
            return BcolzTable(store, root, "a", fsync, owner, nested, lock, storage_options)
        return VersionedTable.create(store, root, fsync, lock, versions)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def open_storage(store: Store, root: str, mode: str, fsync: bool, at: dict[str, Any],
                 versions: Any, owner: Any, nested: Callable[..., Any],
                 storage_options: dict | None, on_takeover: Callable[[str], None],
                 timeout: float | None = None) -> tuple[TableStorage, WriteLock | None]:
    """The storage of the table at ``root`` (``at``: the version a reader asks for), and
    the writer's lock it holds (see :func:`create_storage` for the other arguments)."""
    if not (is_versioned_table(root, store) or is_bcolz_table(root, store)):
        raise FormatError(f"not a table directory (no {TABLE_FILE} or {ROOTDIRS})",
                          store.url(root))
    readonly = mode == "r"
    # bcolz tables keep bcolz's habit: a second writable handle takes writing over.
    bcolz = is_bcolz_table(root, store) and not is_versioned_table(root, store)
    lock = None if readonly else WriteLock.acquire(store, root, on_takeover=on_takeover,
                                                   hand_over=bcolz, timeout=timeout)
    try:
        if is_versioned_table(root, store):
            table = VersionedTable.open(store, root, readonly, fsync, lock, at, versions)
            if timeout is not None:  # another writer's unfinished commit waited for so long
                table.dataset.decide_after = timeout
            return table, lock
        if at:
            raise VersionsUnsupportedError(f"{store.url(root)}: a bcolz table keeps no "
                                           "versions")
        return BcolzTable(store, root, mode, fsync, owner, nested, lock, storage_options), lock
    except BaseException:
        if lock is not None:
            lock.release()
        raise
