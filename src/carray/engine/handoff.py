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

import math
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from carray import _parallel

if TYPE_CHECKING:
    from carray.chunkio import ChunkIO
    from carray.engine.txn import ChunkListener
    from carray.grid import NDGrid
    from carray.layouts.base import Layout

# What a compressing thread returns: the compressed chunk, its digest for the layout
# and the summary of its values for listeners (None: worked out when stored).
Encoded = tuple[bytes, bytes | None, np.ndarray | None]


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


class Handing:
    """The part of :class:`~carray.engine.ArrayEngine` that stores runs of chunk rows:
    now, several compressed at once, or handed to the compressing threads and stored
    later (see the module doc); it works on the engine's own state (it is the same
    object)."""

    if TYPE_CHECKING:  # the engine's state and operations this part uses
        _handoff: Handoff
        _layout: Layout
        _io: ChunkIO
        _dtype: np.dtype
        _chunks: tuple[int, ...]
        _listeners: list[ChunkListener]

        @property
        def grid(self) -> NDGrid: ...

        def mark_pending(self) -> None: ...
        @property
        def per_row(self) -> int: ...

        def _guarded(self) -> Any: ...
        def _store_chunk(self, nchunk: int, raw: np.ndarray, grid: NDGrid,
                         data: bytes | None = None, values: np.ndarray | None = None,
                         digest: bytes | None = None) -> None: ...

    def settle(self, wait: bool = True) -> None:
        """Store the chunks appends handed to the compressing threads, in order (with
        ``wait=False``, those already compressed).  A storage error is raised here and
        the chunk stays handed over, to be stored by the next call."""
        if self._handoff:
            self._handoff.settle(self._store_handed, wait)

    def _hand_off(self, row: int, slab: np.ndarray) -> None:
        """Store run ``row`` of chunk rows from ``slab`` (a filled tail nobody changes
        any more): on the compressing threads when there are some, else now."""
        if _parallel.workers() <= 1:
            self._store_row(row, slab)
            return
        grid = self.grid
        summarise = bool(self._listeners) and self._dtype.kind in "biuf" and \
            self._dtype.isnative
        for nchunk, raw in self._row_chunks(row, slab, None):
            self._handoff.submit(nchunk, raw, partial(self._encode_handed, raw, grid,
                                                      summarise), slab)
        self.mark_pending()

    def _encode_handed(self, raw: np.ndarray, grid: NDGrid, summarise: bool) -> Encoded:
        data = self._io.encode_on_worker(raw, grid)
        return (data, self._layout.chunk_digest(data),
                self._value_range(raw) if summarise else None)

    def _store_handed(self, nchunk: int, raw: np.ndarray, encoded: Encoded) -> None:
        data, digest, summary = encoded
        with self._guarded():
            self._store_chunk(nchunk, raw, self.grid, data, summary, digest)

    def _row_chunks(self, row: int, slab: np.ndarray, rows: int | None
                    ) -> Iterator[tuple[int, np.ndarray]]:
        """``(nchunk, chunk in stored order)`` for the chunks of run ``row`` (see
        :meth:`_store_rows`)."""
        grid = self.grid
        per_row = self.per_row
        for t, trailing in enumerate(np.ndindex(*grid.grid_shape[1:])):
            box = tuple(slice(c * s, (c + 1) * s) for c, s in zip(trailing, self._chunks[1:],
                                                                    strict=True))
            yield row * per_row + t, self._io.stored_from_region(slab[(slice(None), *box)],
                                                                 grid, rows)

    def _store_row(self, row: int, slab: np.ndarray, rows: int | None = None) -> None:
        """Store the chunks of run ``row`` of chunk rows, from its items ``slab``.

        ``rows`` (the tail's) stores only that many rows where the layout allows.
        """
        self._store_rows(row, [slab], rows)

    def _store_rows(self, first: int, slabs: list[np.ndarray], rows: int | None = None) -> None:
        """Store runs ``first, first + 1, ...`` of chunk rows from ``slabs``, in order (as
        listeners and the layout expect), several compressed at once on worker threads
        while this one writes (see :meth:`ChunkIO.encode_all`); all stored on return."""
        grid = self.grid
        chunks = (c for r, slab in enumerate(slabs) for c in self._row_chunks(first + r, slab,
                                                                               rows))
        # Listeners need only the range of a chunk's values: found on the workers too.
        summarise = self._value_range if self._listeners and rows is None and \
            self._dtype.kind in "biuf" and self._dtype.isnative else None
        for nchunk, raw, data, values, digest in self._io.encode_all(
                chunks, grid, len(slabs) * self.per_row > 1, summarise,
                self._layout.chunk_digest):
            self._store_chunk(nchunk, raw, grid, data, values, digest)

    def _listened(self, raw: np.ndarray) -> np.ndarray:
        """The values of a stored-order chunk that listeners are told about."""
        return raw.reshape(-1)[:math.prod(self._chunks[:1])]

    def _value_range(self, raw: np.ndarray) -> np.ndarray:
        """A few values with the same minimum, maximum and NaN-ness as the chunk's
        listened values (all a listener learns from them; see ChunkListener)."""
        values = self._listened(raw)
        if not values.size:
            return values
        if values.dtype.kind != "f":
            return np.array([values.min(), values.max()], dtype=values.dtype)
        lo, hi = np.fmin.reduce(values), np.fmax.reduce(values)
        nan = np.isnan(lo) or np.isnan(hi) or np.isnan(values.sum())
        return np.array([lo, hi, np.nan] if nan else [lo, hi], dtype=values.dtype)
