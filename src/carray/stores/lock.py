"""One writer at a time: an exclusive lock held while a dataset is open for writing.

A writable open takes :class:`WriteLock` on the dataset; a writer in another
process then gets :class:`carray.errors.LockError` at once instead of waiting.
Handles of one process share its lock.  Readers never take it.

The lock is ``flock`` on the dataset directory itself (no extra file), or, for a
single-file dataset, on ``<file>.lock`` beside it, removed again on release.
Locks are advisory and local: on object stores and on systems without
``fcntl`` nothing is locked.
"""

from __future__ import annotations

import contextlib
import os
import threading

from carray.errors import LockError
from carray.stores.base import Store, storage_error
from carray.stores.local import LocalStore

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks here
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".lock"


class WriteLock:
    """The writer's lock on the dataset at ``path`` (see the module doc).

    Use :meth:`acquire`; :meth:`release` (or garbage collection) lets it go.
    Handles in one process share the lock (the process is the one writer), so
    a handle kept open, or reopened by a parallel task of the same process,
    does not lock its own process out.
    """

    def __init__(self, path: str, key: tuple[int, int]) -> None:
        self.path = path
        self._key: tuple[int, int] | None = key

    @classmethod
    def acquire(cls, store: Store, path: str) -> WriteLock | None:
        """The lock on ``path`` in ``store``, or None where nothing can be locked.

        Raises
        ------
        LockError
            Another process holds it.
        """
        if fcntl is None or not isinstance(store, LocalStore) or not os.path.lexists(path):
            return None
        with _registry_lock:
            return cls(path, _take(path))

    @property
    def held(self) -> bool:
        return self._key is not None

    def release(self) -> None:
        """Let the lock go (nothing happens when it is not held)."""
        key, self._key = self._key, None
        if key is None:
            return
        with _registry_lock:
            entry = _held[key]
            entry.count -= 1
            if entry.count:
                return
            del _held[key]
            if entry.file is not None:
                # Removed while still held, so no other writer can be holding it.
                with contextlib.suppress(OSError):
                    os.unlink(entry.file)
            os.close(entry.fd)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


class _Entry:
    """One lock this process holds: its descriptor and how many handles share it."""

    def __init__(self, fd: int, file: str | None) -> None:
        self.fd, self.file, self.count = fd, file, 1


# (st_dev, st_ino) of the locked directory or lock file -> the lock this process holds.
_held: dict[tuple[int, int], _Entry] = {}
_registry_lock = threading.Lock()


def _take(path: str) -> tuple[int, int]:
    """Lock ``path`` for this process (or count one more user); returns its key."""
    file = None if os.path.isdir(path) else path + LOCK_SUFFIX
    target = path if file is None else file
    try:
        fd = os.open(target, os.O_RDONLY) if file is None else \
            os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
        st = os.fstat(fd)
    except OSError as exc:
        raise storage_error(exc, target) from None
    key = (st.st_dev, st.st_ino)
    entry = _held.get(key)
    if entry is not None:
        os.close(fd)
        entry.count += 1
        return key
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LockError(f"{path}: already open for writing by another process; close it "
                        "there first, or open with mode='r'") from None
    except OSError as exc:
        os.close(fd)
        raise storage_error(exc, target) from None
    if file is not None and not _same_file(fd, file):
        # The holder removed it between our open and our flock: it was free then,
        # but a third writer may have made a new one meanwhile.  Try once more.
        os.close(fd)
        return _take(path)
    _held[key] = _Entry(fd, file)
    return key


def _same_file(fd: int, path: str) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)
