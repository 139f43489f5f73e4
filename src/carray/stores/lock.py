"""One writer at a time: an exclusive lock held by each handle open for writing.

A writable open takes its own :class:`WriteLock` on the dataset; a second writable
open of the same dataset by another process waits for it up to ``lock_timeout``
seconds (the storage option ``storage={"lock_timeout": seconds}``, default
:data:`DEFAULT_TIMEOUT`) and then gets :class:`carray.errors.LockError`, naming the
process that holds it (its id and host, where the system tells: Linux lists every
``flock`` in ``/proc/locks``, so nothing is written for it and nothing goes stale when
the holder is killed).  Readers never take it.  Writers that a holder coordinates
(e.g. the parallel tasks of :mod:`carray.integrations.dask`, whose driver holds the
lock) open with ``storage={"lock": False}`` and take none.

Within one process, a ``mode='w'`` open replaces the dataset, so it *takes it
over* from this process's older handles (a notebook cell run again): each holder
registered with :meth:`WriteLock.on_takeover` is closed without flushing, and the
open goes on.  A dataset inside another one that a handle of this process holds
(a table's column) is not taken over on its own: the table's lock covers it.  A
``mode='a'`` open keeps what is there, so it never drops another handle's
changes: it gets ``LockError`` at once while an older writable handle of this
process exists (waiting for it would wait for ourselves).

bcolz directories (arrays and tables in bcolz's format) keep bcolz's habit of several
handles of one process on one directory, writing one at a time: a writable open
*hands writing over*.  The older handle (registered with
:meth:`WriteLock.on_handover`) is flushed, so the new one starts from everything it
wrote, and goes on as a reader (mode 'r', seeing what its successor flushes); its
lock passes to the new handle without being let go, so no other process can take it
in between.  A write through the older handle then raises
:class:`carray.errors.ReadOnlyError` saying so.  carray's own layout keeps one
writable handle per process: two would allocate space in the same files without
knowing of each other.

The lock is ``flock`` on the dataset directory itself (no extra file), or, for a
single-file dataset, on ``<file>.lock`` beside it, removed again on release.
Each lock opens its own file description, so two handles of one process exclude
each other as two processes do.  A lock is released by :meth:`WriteLock.release`
(the handle's ``close()``) or when the handle is garbage collected; a handle of
this process that is unreachable but not yet collected (held in a reference
cycle) is collected before a second writer is refused.  Locks are advisory and
local: on object stores and on systems without ``fcntl`` nothing is locked.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import socket
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from carray.errors import LockError
from carray.stores.base import Store, storage_error
from carray.stores.local import LocalStore

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks here
    fcntl = None  # type: ignore[assignment]

LOCK_SUFFIX = ".lock"
#: Seconds a writer waits for another process's writer to close (``lock_timeout``).
DEFAULT_TIMEOUT = 10.0
# The longest sleep between two tries while waiting.
_MAX_POLL = 0.002


def timeout_of(storage: Mapping[str, Any] | None) -> float:
    """The ``lock_timeout`` of a ``storage`` option dict (:data:`DEFAULT_TIMEOUT` when
    it gives none), checked: a number of seconds, 0 or more (``math.inf``: forever)."""
    value = (storage or {}).get("lock_timeout")
    if value is None:
        return DEFAULT_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            math.isnan(value) or value < 0:
        raise ValueError(f"lock_timeout must be a number of seconds >= 0, got {value!r}")
    return float(value)


class WriteLock:
    """One handle's lock on the dataset at ``path`` (see the module doc).

    Use :meth:`acquire`; :meth:`release` (or garbage collection) lets it go.
    """

    def __init__(self, path: str, fd: int, file: str | None, key: tuple[int, int]) -> None:
        self.path = path
        self._fd: int | None = fd
        self._file = file  # the lock file of a single-file dataset (None: the directory)
        self._key = key
        # Held weakly: the lock must not keep its handle alive (the handle holds the lock).
        self._closer: weakref.WeakMethod[Callable[[str], None]] | None = None
        self._yielder: weakref.WeakMethod[Callable[[str], None]] | None = None

    @classmethod
    def acquire(cls, store: Store, path: str, *, take_over: bool = False,
                hand_over: bool = False,
                on_takeover: Callable[[str], None] | None = None,
                timeout: float | None = None) -> WriteLock | None:
        """A new lock on ``path`` in ``store``, or None where nothing can be locked.

        Parameters
        ----------
        take_over : bool
            For a ``mode='w'`` open: close this process's handles holding the lock
            (those registered with :meth:`on_takeover`) and take it.
        hand_over : bool
            For a writable open of a bcolz directory: the handle of this process holding
            the lock, if it registered with :meth:`on_handover`, is flushed and left
            reading, and its lock passes to the caller (see the module doc).
        on_takeover : callable, optional
            Registered with :meth:`on_takeover` on the new lock.
        timeout : float, optional
            Seconds to wait while another process holds it (default
            :data:`DEFAULT_TIMEOUT`).

        Raises
        ------
        LockError
            Another handle of this process holds it (and, with ``take_over``, is not
            one this process can close), or another process held it for ``timeout``
            seconds (the message names that process where the system tells).
        """
        if fcntl is None or not isinstance(store, LocalStore) or not os.path.lexists(path):
            return None
        wait = DEFAULT_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + wait
        pause = 0.001
        while True:
            lock = _take(path)
            if lock is None and take_over and _close_holders(path):
                lock = _take(path)
            if lock is None and hand_over:
                lock = _hand_over(path)
            if lock is None and _held_here(path):
                # The holder may be a handle of ours that only a cycle keeps alive.
                gc.collect()
                lock = _take(path)
                if lock is None:
                    raise LockError(f"{path}: already open for writing by another handle "
                                    "in this process; close that handle first, or open with "
                                    "mode='r' (mode='w' replaces the dataset and takes it "
                                    "over from this process's older handles)")
            if lock is not None:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockError(f"{path}: already open for writing by {holder_of(path)}; "
                                f"waited {wait:g} s for it to close (storage option "
                                "lock_timeout); close that writer, or open with mode='r'")
            time.sleep(min(pause, left))
            pause = min(pause * 2, _MAX_POLL)
        if on_takeover is not None:
            lock.on_takeover(on_takeover)
        return lock

    def moved_to(self, path: str) -> None:
        """Say that the locked directory now has the name ``path`` (it was renamed: the
        lock is on the directory itself, so it moved with it)."""
        self.path = path

    def on_takeover(self, close: Callable[[str], None]) -> None:
        """Have ``close(reason)`` (a bound method of the handle holding this lock) called
        when a later ``mode='w'`` open of this process takes the dataset over; it must
        close the handle without flushing and release this lock."""
        self._closer = weakref.WeakMethod(close)

    def on_handover(self, yield_writing: Callable[[str], None]) -> None:
        """Have ``yield_writing(reason)`` (a bound method of the handle holding this lock)
        called when a later writable open of this process asks for the dataset with
        ``hand_over``: it must flush the handle and leave it reading, without releasing
        this lock (which is no longer the handle's by then: see :meth:`_pass_on`)."""
        self._yielder = weakref.WeakMethod(yield_writing)

    def _pass_on(self) -> WriteLock | None:
        """This lock, passed to a new owner after the handle holding it yielded writing
        (None: no live handle registered with :meth:`on_handover`).  The flock stays held
        throughout; this object is left empty, so its handle's release does nothing."""
        yield_writing = self._yielder() if self._yielder is not None and self.held else None
        if yield_writing is None or self._fd is None:
            return None
        successor = WriteLock(self.path, self._fd, self._file, self._key)
        self._swap(successor)
        try:
            yield_writing(f"{self.path}: a later open of this process took writing over (this "
                          "handle flushed first and now only reads); write through the "
                          "newer handle, or open the dataset again")
        except BaseException:
            successor._swap(self)  # not yielded (a failed flush): the holder keeps writing
            raise
        return successor

    def _swap(self, successor: WriteLock) -> None:
        """Move the held flock from this object to ``successor``."""
        with _registry_lock:
            successor._fd, self._fd = self._fd, None
            holders = _holders.setdefault(self._key, weakref.WeakSet())
            holders.discard(self)
            holders.add(successor)

    def _take_over(self) -> bool:
        """Close the handle holding this lock (True), if one registered and is alive."""
        close = self._closer() if self._closer is not None and self.held else None
        if close is None:
            return False
        close(f"{self.path}: this handle was closed because a later mode='w' open in "
              "this process took the dataset over (its unflushed changes were dropped); "
              "open the dataset again to use it")
        return True

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Let the lock go (nothing happens when it is not held)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with _registry_lock:
            _keys[self._key] -= 1
            if not _keys[self._key]:
                del _keys[self._key]
                _holders.pop(self._key, None)
            else:
                _holders[self._key].discard(self)
        if self._file is not None:
            # Removed while still held, so no other writer can be holding it.
            with contextlib.suppress(OSError):
                os.unlink(self._file)
        os.close(fd)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


# (st_dev, st_ino) of a locked directory or lock file -> how many locks this process
# holds on it (at most one, unless a lock file was replaced under a holder).
_keys: Counter[tuple[int, int]] = Counter()
# The same keys -> those locks, for a takeover to close their handles.
_holders: dict[tuple[int, int], weakref.WeakSet[WriteLock]] = {}
# Reentrant: a finalizer releasing a lock may run while this thread holds it.
_registry_lock = threading.RLock()


def _target(path: str) -> tuple[str, str | None]:
    """What is flocked for ``path``, and the lock file to remove on release (if any)."""
    if os.path.isdir(path):
        return path, None
    return path + LOCK_SUFFIX, path + LOCK_SUFFIX


def _key_of(path: str) -> tuple[int, int] | None:
    """The registry key of ``path``'s lock target (None: there is none)."""
    try:
        st = os.stat(_target(path)[0])
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _held_here(path: str) -> bool:
    """True when a lock of this process is on ``path``'s lock target."""
    key = _key_of(path)
    with _registry_lock:
        return key in _keys


def _close_holders(path: str) -> bool:
    """Close this process's handles holding ``path``'s lock (see :meth:`WriteLock.on_takeover`);
    True when one was.  Nothing is closed when ``path`` lies inside a directory a lock of
    this process holds (a column of a table open for writing): its holder decides."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent != os.path.dirname(parent):
        if _held_here(parent):
            return False
        parent = os.path.dirname(parent)
    key = _key_of(path)
    with _registry_lock:
        holders = list(_holders.get(key, ())) if key is not None else []
    closed = False
    for lock in holders:
        closed = lock._take_over() or closed
    return closed


def _hand_over(path: str) -> WriteLock | None:
    """The lock on ``path`` that a handle of this process held, passed on after that
    handle yielded writing (see :meth:`WriteLock.on_handover`); None when none would."""
    key = _key_of(path)
    with _registry_lock:
        holders = list(_holders.get(key, ())) if key is not None else []
    for lock in holders:
        passed = lock._pass_on()
        if passed is not None:
            return passed
    return None


def _take(path: str) -> WriteLock | None:
    """A new lock on ``path``, or None when another holder has it."""
    target, file = _target(path)
    try:
        fd = os.open(target, os.O_RDONLY) if file is None else \
            os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
        st = os.fstat(fd)
    except OSError as exc:
        raise storage_error(exc, target) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:
        os.close(fd)
        raise storage_error(exc, target) from None
    if file is not None and not _same_file(fd, file):
        # The holder removed it between our open and our flock: it was free then,
        # but a third writer may have made a new one meanwhile.  Try once more.
        os.close(fd)
        return _take(path)
    key = (st.st_dev, st.st_ino)
    lock = WriteLock(path, fd, file, key)
    with _registry_lock:
        _keys[key] += 1
        _holders.setdefault(key, weakref.WeakSet()).add(lock)
    return lock


def _same_file(fd: int, path: str) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def holder_of(path: str) -> str:
    """Who holds the lock on ``path``, as the message of a refused writer says it: "process
    <pid> on <host>" where ``/proc/locks`` lists it, else "another process"."""
    try:
        st = os.stat(_target(path)[0])
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return "another process"
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    exact: set[str] = set()
    by_inode: set[str] = set()
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2572534 0 EOF"; waiters have a "->".
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue
        dev, _, ino = fields[5].rpartition(":")
        if ino != str(st.st_ino):
            continue
        (exact if dev == device else by_inode).add(fields[4])
    # Some file systems (btrfs subvolumes, overlays) list another device than stat says.
    pids = exact or (by_inode if len(by_inode) == 1 else set())
    if len(pids) != 1:
        return "another process"
    return f"process {pids.pop()} on {socket.gethostname()}"
