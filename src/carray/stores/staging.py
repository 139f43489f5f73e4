"""New datasets and files made whole or not at all: built under a temporary name
beside the target (:mod:`carray.stores.tempnames`), then moved into place in one step.

:func:`staged` is what every operation that makes a new dataset or file uses (copies,
conversions, exports, rechunks...):

1. it removes what writers killed earlier left beside the target (:func:`sweep`);
2. when the target exists and may be replaced, it takes the target's writer's lock
   first (waiting for another process's writer as a writable open does, see
   :mod:`carray.stores.lock`), so nothing replaces a dataset another writer holds;
3. the caller builds the new dataset or file under the temporary name;
4. it is moved into place: on local disks by swapping the two names in one step
   where the system can (Linux ``renameat2``), else by a rename; then the old one is
   removed.  On object stores, which cannot rename, the old one is removed and the new
   one's objects are copied: a failure meanwhile leaves neither.

Whatever fails (a full disk, an I/O error, an exception of the caller, Ctrl-C), the
temporary is removed and the target is as it was; failures of the storage raise
:class:`carray.errors.StorageError` naming the target.  A process killed meanwhile
leaves only the temporary, which the next writer of the target removes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from carray.errors import CArrayError, ContainerExistsError, StorageError
from carray.stores.base import Store
from carray.stores.files import exchange, fsync_path, rename_noreplace
from carray.stores.lock import LOCK_SUFFIX, WriteLock
from carray.stores.tempnames import owner_gone, parse, temporary_name

#: Failures that say something about the caller's input, raised as they are.
_KEPT = (CArrayError, FileNotFoundError, FileExistsError, IsADirectoryError,
         NotADirectoryError, PermissionError)


def sweep(store: Store, path: str) -> None:
    """Remove the temporaries of ``path``'s name beside it whose writer is gone (see
    :func:`carray.stores.tempnames.owner_gone`); never raises."""
    sweep_directory(store, store.dirname(path), store.basename(path))


def sweep_directory(store: Store, parent: str, target: str | None = None) -> None:
    """Remove the temporaries in the directory ``parent`` (of the name ``target``, or of
    any) whose writer is gone; never raises."""
    try:
        names = store.listdir(parent or ".")
    except OSError:
        return
    for entry in names:
        if not entry.startswith(".") or (target is not None and target not in entry):
            continue
        found = parse(entry)
        if found is None or (target is not None and _final_target(found.target) != target):
            continue
        full = store.join(parent, entry) if parent else entry
        modified = None
        if not store.remote:
            try:
                modified = os.lstat(full).st_mtime
            except OSError:
                continue
        if owner_gone(entry, modified):
            with contextlib.suppress(OSError):
                store.rmtree(full)


def _final_target(name: str) -> str:
    """What a temporary name is finally for: a file written under a temporary name of
    its own while its target is itself one counts as the outer target's."""
    found = parse(name)
    while found is not None:
        name, found = found.target, parse(found.target)
    return name


@dataclass
class Staging:
    """Where a new dataset or file is being built: ``tmp`` beside ``path`` in ``store``.

    ``location`` is what to hand a writer (a URL on object stores, else the path).
    """

    store: Store
    path: str
    tmp: str

    @property
    def location(self) -> str:
        return self.store.url(self.tmp) if self.store.remote else self.tmp


@contextlib.contextmanager
def staged(store: Store, path: str, *, overwrite: bool = False, fsync: bool = True,
           lock_timeout: float | None = None) -> Iterator[Staging]:
    """Build a new dataset or file for ``path`` under a temporary name, and put it in place
    when the block ends without an exception (see the module doc).

    Parameters
    ----------
    store, path : Store, str
        The target.
    overwrite : bool
        Replace what is at ``path`` (else :class:`ContainerExistsError` when something
        is there, before anything is written).
    fsync : bool
        Make the new name durable (the caller makes its contents durable).
    lock_timeout : float, optional
        Seconds to wait for another process's writer of the target to close.

    Raises
    ------
    ContainerExistsError
        ``path`` exists and ``overwrite`` is false (checked first, and again when the new
        one is put in place: nothing made meanwhile is replaced).
    LockError
        The target is open for writing elsewhere.
    StorageError
        The storage failed (a full disk, an I/O error): nothing is left of the new one.
    """
    sweep(store, path)
    store.invalidate(path)
    exists = store.exists(path)
    if exists and not overwrite:
        raise ContainerExistsError(f"{store.url(path)}: already exists "
                                   "(pass overwrite=True / mode='w' to replace it)")
    # The old one's writer must be gone before it is replaced: its lock is held until
    # the new one is in place.
    lock = lock_old(store, path, lock_timeout) if exists else None
    staging = Staging(store, path, temporary_name(path))
    try:
        yield staging
        store.invalidate(staging.tmp)
        if not store.exists(staging.tmp):
            raise FileNotFoundError(f"{store.url(path)}: nothing was written")
        put_in_place(store, staging.tmp, path, replace=overwrite, fsync=fsync)
    except BaseException as exc:
        typed = storage_failure(exc, store, staging.tmp)
        remove_quietly(store, staging.tmp, free=True)
        if typed is not None:
            raise failed_write(typed, store.url(path)) from exc
        raise
    finally:
        if lock is not None:
            lock.release()


def lock_old(store: Store, path: str, timeout: float | None) -> WriteLock | None:
    """The writer's lock of the dataset at ``path`` that is about to be replaced (this
    process's older handles of it are closed, see :mod:`carray.stores.lock`): of a
    directory, or of a file whose lock file is there (a writer holds it, or one was
    killed); None for other files, which no writer locks."""
    if not store.isdir(path) and not store.exists(path + LOCK_SUFFIX):
        return None
    return WriteLock.acquire(store, path, take_over=True, timeout=timeout)


# How the HDF5-based libraries (h5py, netCDF4, PyTables) report a failed write: a
# RuntimeError, with the errno in HDF5's message where it gives one.
_HDF5_ERRNO = re.compile(r"errno = (\d+)")
_HDF5_WRITE_FAILED = ("file write failed", "NetCDF: HDF error", "can't write data",
                      "unable to flush", "write failed")


def storage_failure(exc: BaseException, store: Store, tmp: str) -> OSError | None:
    """``exc``, raised while writing ``tmp``, as the ``OSError`` of the storage failure it
    reports (None: it reports something else).

    An ``OSError`` of the storage is one; so is the ``RuntimeError`` an HDF5-based
    library raises for a failed write: its errno is the one HDF5's message gives, else
    ENOSPC where the file system has no space left, else EIO.
    """
    if isinstance(exc, OSError):
        return None if isinstance(exc, _KEPT) and not isinstance(exc, StorageError) else exc
    if not isinstance(exc, RuntimeError):
        return None
    text = str(exc)
    found = _HDF5_ERRNO.search(text)
    if found is not None:
        code = int(found.group(1))
    elif any(marker.lower() in text.lower() for marker in _HDF5_WRITE_FAILED):
        code = errno.ENOSPC if no_space_left(store, tmp) else errno.EIO
    else:
        return None
    return OSError(code, f"{os.strerror(code)} ({text.splitlines()[0][:200]})")


def no_space_left(store: Store, path: str) -> bool:
    """Whether the local file system holding ``path`` has no space left for this process
    (False where that cannot be told)."""
    if store.remote:
        return False
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
        free = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    except (OSError, AttributeError):  # (no statvfs on Windows)
        return False
    return free * st.f_frsize < 64 * 1024


def failed_write(exc: OSError, target: str) -> StorageError:
    """``exc``, met while writing ``target`` under a temporary name, as the
    :class:`StorageError` a caller sees: naming the target, saying nothing was left."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, StorageError) and exc.filename == target:
        reason = reason.removesuffix("; nothing was written")
    out = StorageError(exc.errno, f"{reason}; nothing was written", target)
    out.__cause__ = exc
    return out


def put_in_place(store: Store, tmp: str, path: str, *, replace: bool, fsync: bool) -> None:
    """Move what was built at ``tmp`` to ``path`` (see the module doc); what was at
    ``path`` is removed when ``replace``, else :class:`ContainerExistsError`."""
    if store.remote:
        store.invalidate(path)
        if store.exists(path):
            if not replace:
                raise ContainerExistsError(f"{store.url(path)}: already exists")
            store.rmtree(path)
        try:
            store.rename(tmp, path)  # a copy of each object: not one step
        except BaseException:
            remove_quietly(store, path)  # a part is never left
            raise
        return
    old = _swap_in(tmp, path, replace)
    try:
        if fsync:  # the new name lasts, or the old one is put back
            fsync_path(os.path.dirname(os.path.abspath(path)))
    except BaseException:
        _swap_out(tmp, path, old)
        raise
    if old is not None:
        remove_quietly(store, old)


def _swap_in(tmp: str, path: str, replace: bool) -> str | None:
    """Give the new file or directory at ``tmp`` the name ``path`` (see
    :func:`put_in_place`); returns where the old one is now (None: there was none)."""
    if rename_noreplace(tmp, path):
        return None
    if not os.path.lexists(path):
        os.rename(tmp, path)
        return None
    if not replace:
        raise ContainerExistsError(f"{path}: made by another writer meanwhile")
    if exchange(tmp, path):
        return tmp  # the old one, now under the temporary name
    old = temporary_name(path)
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        raise
    return old


def _swap_out(tmp: str, path: str, old: str | None) -> None:
    """Undo :func:`_swap_in`: the new one back at ``tmp``, the old one (if any) at
    ``path``."""
    if old == tmp:
        exchange(tmp, path)
    else:
        os.rename(path, tmp)
        if old is not None:
            os.rename(old, path)


def remove_quietly(store: Store, path: str, *, free: bool = False) -> None:
    """Remove a file or directory tree if it is there (never raises).

    ``free``: a local file is emptied first, so its space comes back even while a
    library that failed to close it still holds it open (netCDF4 cannot close a file
    whose last flush failed); only for a file nobody reads.
    """
    with contextlib.suppress(OSError):
        store.invalidate(path)
        if free and not store.remote and os.path.isfile(path) and not os.path.islink(path):
            os.truncate(path, 0)
        if store.exists(path):
            store.rmtree(path)


def new_directory(store: Store, path: str, *, fsync: bool = True) -> WriteLock | None:
    """Make the empty directory ``path`` already locked for writing: it is made and locked
    under a temporary name, then renamed (the lock, on the directory itself, moves with
    it), so no other writer can take it between its making and its locking.

    Raises
    ------
    ContainerExistsError
        Something is at ``path``.
    """
    if store.remote:
        store.makedirs(path)
        return None
    tmp = temporary_name(path)
    store.makedirs(tmp)
    try:
        lock = WriteLock.acquire(store, tmp, timeout=0)
    except BaseException:
        remove_quietly(store, tmp)
        raise
    try:
        put_in_place(store, tmp, path, replace=False, fsync=fsync)
    except BaseException:
        if lock is not None:
            lock.release()
        remove_quietly(store, tmp)
        raise
    if lock is not None:
        lock.moved_to(path)
    return lock
