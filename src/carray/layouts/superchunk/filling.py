"""A new superchunk file being filled, sent to storage while its records still come.

A new file's records arrive in order (chunks appended past the end of the
array).  Where the store writes files part by part (:meth:`Store.stream`: local
disks) and the data is synced, every couple of MiB of records goes to the
background ``files`` threads, which append them to the file's temporary name and
have the OS start writing them to the device; once the file is whole (or a commit
needs it) a thread syncs what is left and renames it into place.  The final sync
of a commit then finds little left to write.  Unsynced files go in one piece once
whole; object stores get the file in one put at the end.

Every record stays in memory until the file has its name, so a write that failed
(a full disk) is tried again, whole, by the next call that needs the file: the
error reaches that caller, and nothing handed over is lost while the process lives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from carray.codecs import parallel as _parallel
from carray.stores import Store

#: Bytes of records gathered before they are sent to the file being written.
SPILL_BYTES = 2 * 2**20


class Filling:
    """The records of one new file and the writing of it (see the module doc).

    Its parts go to the background threads in order; each task waits for the one
    before it (handed over earlier, so already running or done), so a file is written
    in order even when another thread takes the next task.

    Parameters
    ----------
    store : Store
        Where the file goes.
    path : str
        Its name in ``store``.
    data_start : int
        Where its first record goes (after the prefix).
    prefix : callable
        ``prefix() -> list of bytes``: what comes before the records.
    fsync : bool
        Whether the file is made durable before it gets its name.
    """

    def __init__(self, store: Store, path: str, data_start: int,
                 prefix: Callable[[], list[bytes]], fsync: bool) -> None:
        self.records: list[Any] = []
        self.count = 0  # records added
        self.end = data_start  # where the next record goes
        self.finishing = False  # handed over whole: no more records
        self._store, self._path, self._prefix, self._fsync = store, path, prefix, fsync
        self._sent = 0  # parts of ``records`` handed to the background thread
        self._unsent = 0  # their bytes not handed over yet
        self._stream: Any = None
        self._head = 0  # parts of the prefix at the start of ``records``
        self._task: Future[None] | None = None

    def add(self, parts: Sequence[Any], size: int) -> None:
        """Append a record: ``parts`` and, up to ``size`` bytes, zeros (spare room)."""
        self.records.extend(parts)
        used = sum(memoryview(p).nbytes for p in parts)
        if size > used:
            self.records.append(bytes(size - used))
        self.end += size
        self.count += 1
        self._unsent += size
        # Without syncs there is no write-back to start early: the file goes in one piece.
        if self._fsync and self._unsent >= SPILL_BYTES:
            self._send(finish=False)

    def land(self) -> None:
        """Hand the rest over: the background thread writes it and names the file."""
        self.finishing = True
        self._send(finish=True)

    def _send(self, finish: bool) -> None:
        parts = self._take(finish)
        if parts is not None:
            self._task = _parallel.submit(_parallel.background("files"), self._run,
                                          self._task, parts, finish)

    def _take(self, finish: bool) -> list[Any] | None:
        """The parts to hand over now (None: nothing yet, for a store of whole objects)."""
        if self._stream is None:
            self._stream = self._store.stream(self._path, fsync=self._fsync)
            if self._stream is not None:
                head = self._prefix()  # written first, kept for a retry
                self.records[:0] = head
                self._sent, self._head = 0, len(head)
        if self._stream is None:
            if not finish:
                return None  # a store of whole objects: one put at the end
            parts = [*self._prefix(), *self.records]
        else:
            parts = self.records[self._sent:]
            self._sent = len(self.records)
        self._unsent = 0
        return parts

    def _run(self, before: Future[None] | None, parts: list[Any], finish: bool) -> None:
        """On the background thread: append ``parts`` (after the parts handed over
        ``before``, which failed if this raises their error) and, with ``finish``, name
        the file."""
        if before is not None:
            before.result()
        if self._stream is None:
            if not self._store.rewrites:
                self._store.put(self._path, parts, fsync=self._fsync)
                return
            # Object stores: a file of this commit's own, created only if absent (its name
            # is a random generation: another writer's file of that name is refused).
            if not self._store.put_if_absent(self._path, parts, fsync=self._fsync):
                mine = b"".join(memoryview(p).cast("B") for p in parts)
                if self._store.get(self._path) != mine:  # not ours, written before
                    raise FileExistsError(f"{self._store.url(self._path)}: another writer's "
                                          "file took this name; commit again")
            return
        self._stream.write(parts)
        if finish:
            self._stream.commit()

    def join(self) -> bool:
        """Wait until the background threads are done with this file; whether it has its
        name (a failure stays, for :meth:`wait` to raise)."""
        if not self.finishing or self._task is None:
            return False
        return self._task.exception() is None

    def wait(self) -> None:
        """Write the file whole (the rest here, on this thread) and wait until it has its
        name.  A failure is raised, and the next call starts the file again."""
        try:
            if self.finishing:
                assert self._task is not None
                self._task.result()
            else:  # the rest is written here: waiting is all this thread would do
                self.finishing = True
                parts = self._take(finish=True)
                assert parts is not None
                self._run(self._task, parts, True)
        except BaseException:
            self._restart()
            raise

    def _restart(self) -> None:
        if self._stream is not None:
            self._stream.abort()
            self._stream = None
            del self.records[:self._head]
        self._task, self._sent, self._head, self.finishing = None, 0, 0, False
        self._unsent = sum(memoryview(p).nbytes for p in self.records)

    def discard(self) -> None:
        """Drop the file: wait for the background thread to leave it, remove what it
        wrote (never raises)."""
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(BaseException):
                task.result()
        if self._stream is not None:
            self._stream.abort()
            self._stream = None
