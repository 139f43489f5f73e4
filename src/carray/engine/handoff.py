"""Chunks an append handed to the compressing threads, stored later in order.

An append that fills the array's last chunk row does not wait for its
compression: the chunk goes to a worker thread and the append returns.  The
engine stores finished chunks, in order, on its own thread at its next call
(:meth:`Handoff.settle`); a read, a change or a flush first stores them all.
A few chunks are in flight at most, so memory stays bounded.

An entry leaves the queue only once it is stored, so when storing fails (a full
disk) its items stay here, the error reaches the caller, and the next call
tries again: nothing handed over is lost while the process lives.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import NamedTuple

import numpy as np

from carray.codecs import parallel as _parallel
from carray.engine.chunkstats import ChunkStats

# What a compressing thread returns: the compressed chunk, its digest for the layout
# and the statistics of its values for listeners (None: none kept).
Encoded = tuple[bytes, bytes | None, ChunkStats | None]


class Entry(NamedTuple):
    nchunk: int
    raw: np.ndarray
    future: Future[Encoded]
    slab: np.ndarray  # the buffer ``raw`` came from, free again once stored


class Handoff:
    """The queue of chunks being compressed for one engine (see the module doc).

    Parameters
    ----------
    window : int
        Chunks in flight before :meth:`settle` waits for the oldest.
    """

    def __init__(self, window: int) -> None:
        self._window = window
        self._queue: deque[Entry] = deque()
        self._slabs: list[np.ndarray] = []

    def __bool__(self) -> bool:
        return bool(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def submit(self, nchunk: int, raw: np.ndarray, encode: Callable[[], Encoded],
               slab: np.ndarray) -> None:
        """Start ``encode()`` (``-> (compressed, digest, summary)``) of chunk ``nchunk`` on a worker
        thread (``raw``: its items in stored order, from ``slab``, a buffer nobody
        changes until it is stored)."""
        future = _parallel.submit(_parallel.compressing_pool(), encode)
        self._queue.append(Entry(nchunk, raw, future, slab))
        if not any(s is slab for s in self._slabs):
            self._slabs.append(slab)

    def spare(self) -> np.ndarray | None:
        """A buffer whose chunks are all stored, to use again (its pages are mapped
        already: a fresh one costs page faults), or None.  Call it only outside a
        transaction: a snapshot taken before a settle may still need the buffer."""
        busy = {id(e.slab) for e in self._queue}
        free = [s for s in self._slabs if id(s) not in busy]
        # Keep a couple for later calls: more would only hold memory.
        self._slabs = [s for s in self._slabs if id(s) in busy] + free[:-1][-2:]
        return free[-1] if free else None

    def settle(self, store: Callable[[int, np.ndarray, Encoded], None],
               wait: bool = True) -> None:
        """Store the queued chunks with ``store(nchunk, raw, encoded)``, in
        order: all of them when ``wait``, else those already compressed and as many
        more as keep at most the window in flight.  An error leaves the failed chunk
        (and those after it) queued."""
        queue = self._queue
        while queue:
            entry = queue[0]
            if not wait and not entry.future.done() and len(queue) <= self._window:
                return
            store(entry.nchunk, entry.raw, entry.future.result())
            queue.popleft()

    def snapshot(self) -> tuple[Entry, ...]:
        """The queue now, to :meth:`restore` if an operation fails."""
        return tuple(self._queue)

    def restore(self, entries: tuple[Entry, ...]) -> None:
        """Make the queue ``entries`` again (finished compressions keep their results)."""
        self._queue = deque(entries)
