"""The state of an array that changes, and every change to it: one object per array.

A :class:`Writer` holds an array's sizes (shape, complete runs of chunk rows, stored
bytes), the decoded chunks of its last, partial run of rows along the first axis (the
*tail*, kept so appends are cheap), a one-chunk decode cache, the chunks an append
handed to the compressing threads (:mod:`.handoff`), the listeners told about every
chunk it stores, and what an operation under way would put back (see
:meth:`Writer.transaction`).  Its engine (:mod:`.core`) reads through the same state
and checks that a change is allowed before asking for it.

Every change is all-or-nothing: when it raises, the state is what it was before the
call and chunks already rewritten in the layout are put back (by the layout itself
where it keeps savepoints, else from the old bytes kept here; best effort: a layout
that fails again cannot be helped, but nothing is committed until the next flush, so
the files keep their last flushed state).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np

from carray.chunks.grid import NDGrid, deblock, plan, scatter
from carray.chunks.io import ChunkIO
from carray.chunks.keys import CoordKey, OrthoKey
from carray.chunks.shapes import check_fill_count, check_memory
from carray.codecs import parallel as _parallel
from carray.engine import chunkstats
from carray.engine.chunkstats import ChunkStats
from carray.engine.description import ArrayDescription
from carray.engine.handoff import Encoded, Handoff
from carray.engine.points import point_groups
from carray.engine.regrid import regrid
from carray.engine.txn import ChunkListener
from carray.layouts.base import Layout

#: Chunks of the fill value added at once whose statistics listeners (zone maps) are
#: told one by one; past it they hear of the run alone, which costs nothing per chunk.
TOLD_ABSENT = 2**16


def _tail_budget() -> int:
    """Bytes of a tail kept decoded between writes: a sixteenth of the machine's memory,
    within 64 MiB..1 GiB.  A bigger tail is written out and decoded again when needed,
    so appending a frame at a time to an array of large frames rewrites its last run of
    chunks every time: the budget decides up to which frame size that never happens."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        memory = 0
    return min(2**30, max(64 * 2**20, memory // 16))


TAIL_BUDGET = _tail_budget()
#: Bytes of a tail of several N-d chunks kept decoded after a flush stored it: appending
#: a frame at a time and committing each (a group's append along time) then never
#: decodes it again.  A bigger one is decoded again at the next append.
TAIL_KEPT = 32 * 2**20


class Writer:
    """The changing state of one array and the operations that change it (see the module
    doc).

    Parameters
    ----------
    layout : Layout
        Where the chunks and sizes are recorded.
    io : ChunkIO
        Encodes and decodes the array's chunks.
    description : ArrayDescription
        The array's fixed facts.
    shape : tuple of int
        The stored shape.
    cbytes : int
        Compressed bytes already stored.
    objects : numpy.ndarray, optional
        The items of an object array (bcolz stores them pickled, one by one).
    """

    def __init__(self, layout: Layout, io: ChunkIO, description: ArrayDescription,
                 shape: tuple[int, ...], cbytes: int,
                 objects: np.ndarray | None = None) -> None:
        self._layout, self._io, self._d = layout, io, description
        self._shape = shape
        # A 0-d array is one chunk of one item, always whole: no rows, no tail.
        self._nfull = shape[0] // description.chunks[0] if shape else 1
        self._cbytes = cbytes
        self._grid_memo: NDGrid | None = None
        self._tail: np.ndarray | None = None
        self._tail_dirty = False
        self._spare: np.ndarray | None = None  # a tail buffer to use again
        self._cache: tuple[int, np.ndarray] | None = None
        self._listeners: list[ChunkListener] = []
        self._handoff = Handoff(2 * _parallel.workers())
        self._objects = objects
        self._objects_from: int | None = None  # object items to store again from here
        # What the operation under way puts back on failure (see transaction).
        self._undo: dict[int, bytes | None] | None = None
        self._told: set[int] = set()  # chunks listeners heard of in the operation under way
        self._saved: tuple[Any, ...] | None = None
        self._savepoint: Any = None  # the layout's, for layouts that undo their own writes
        self.pending = False  # something waits for the next flush
        if objects is None and self.nleft and self.per_row == 1:
            self.ensure_tail()  # an array opened with a partial last chunk

    # -- what readers see -----------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def nfull(self) -> int:
        """Complete runs of chunk rows along the first axis."""
        return self._nfull

    @property
    def nleft(self) -> int:
        """Rows in the last, partial run of chunk rows."""
        return self._shape[0] - self._nfull * self._d.chunks[0] if self._shape else 0

    @property
    def cbytes(self) -> int:
        return self._cbytes

    @property
    def grid(self) -> NDGrid:
        g = self._grid_memo
        if g is None:
            d = self._d
            g = self._grid_memo = NDGrid(self._shape, d.chunks, d.blocks or d.chunks,
                                         max(d.dtype.itemsize, 1))
        elif g.shape != self._shape:
            g = self._grid_memo = g.with_shape(self._shape)
        return g

    @property
    def per_row(self) -> int:
        """Chunks in one run of chunk rows (1 when chunks span every axis but the first)."""
        return math.prod(-(-n // c) for n, c in zip(self._shape[1:], self._d.chunks[1:],
                                                    strict=True))

    @property
    def tail(self) -> np.ndarray | None:
        """The decoded last run of chunk rows (``chunks[0]`` rows, those past
        :attr:`nleft` not items), when kept."""
        return self._tail

    @property
    def tail_unstored(self) -> bool:
        """Whether the tail holds rows the layout does not have yet."""
        return self._tail is not None and (self._tail_dirty or (
            self._layout.in_memory and self.per_row == 1))

    @property
    def objects(self) -> np.ndarray | None:
        return self._objects

    @property
    def dirty(self) -> bool:
        """Whether there are changes not flushed yet."""
        return self._tail_dirty or bool(self._handoff) or self.pending

    def cached(self, nchunk: int) -> np.ndarray | None:
        """Chunk ``nchunk`` decoded in stored order, when it is the one kept."""
        cache = self._cache
        return cache[1] if cache is not None and cache[0] == nchunk else None

    @property
    def cache(self) -> tuple[int, np.ndarray] | None:
        return self._cache

    def in_tail_run(self, coords: tuple[int, ...]) -> bool:
        return self.nleft > 0 and coords[0] == self._nfull

    def tail_view(self, coords: tuple[int, ...]) -> np.ndarray:
        """The tail's items of chunk ``coords`` (in the last run of rows), origin at 0."""
        assert self._tail is not None
        box = tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords[1:], self._d.chunks[1:],
                                                                strict=True))
        return self._tail[(slice(None), *box)]

    def rows_key(self, rows: range) -> OrthoKey:
        """The selection of whole rows ``rows`` (positive step)."""
        axes = (rows, *(range(n) for n in self._shape[1:]))
        return OrthoKey(self._shape, axes, (), (), (len(rows), *self._shape[1:]))

    def drop_cache(self) -> None:
        """Drop decoded chunks: the cache, and a tail of several N-d chunks already
        stored."""
        self._cache = None
        if self.per_row > 1 and self._objects is None and not self._tail_dirty:
            self._tail = None

    @property
    def listeners(self) -> list[ChunkListener]:
        """Told about every chunk stored and dropped (read-only: see add_listener)."""
        return list(self._listeners)

    def add_listener(self, listener: ChunkListener) -> None:
        self._listeners.append(listener)

    def mark_pending(self) -> None:
        """Something kept beside the array (a listener's state) waits for the next flush."""
        if not self._layout.in_memory:
            self.pending = True

    # -- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything done inside happens whole or not at all: on an error the state is
        put back, and so are the chunks rewritten meanwhile."""
        if self._undo is None:
            self.settle()
        with self._guarded():
            yield

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        """:meth:`transaction` without storing the handed-over chunks first."""
        if self._undo is not None:  # an inner step of an operation already guarded
            yield
            return
        self._saved = self._state()
        self._undo = {}
        self._savepoint = self._layout.savepoint()
        try:
            yield
        except BaseException:
            self._rollback(self._saved)
            raise
        else:
            self._layout.release_savepoint()
        finally:
            self._undo = self._saved = self._savepoint = None
            self._told = set()

    def _committed(self) -> None:
        """A commit inside a transaction: a later failure goes back to here, not to the
        start (the files already record this state)."""
        if self._undo is not None:
            self._saved, self._undo = self._state(), {}
            self._savepoint = self._layout.savepoint()
            self._told = set()

    def _state(self) -> tuple[Any, ...]:
        return (self._shape, self._nfull, self._tail, self._tail_dirty, self._cache,
                self._cbytes, self._grid_memo, self._handoff.snapshot())

    def _rollback(self, saved: tuple[Any, ...]) -> None:
        (self._shape, self._nfull, self._tail, self._tail_dirty, self._cache, self._cbytes,
         self._grid_memo, handed) = saved
        self._handoff.restore(handed)
        if self._told:  # what listeners heard of these chunks no longer holds
            told, self._told = sorted(self._told), set()
            for listener in self._listeners:
                listener.chunks_restored(told)
        if self._layout.savepoints:  # the layout undoes its own writes
            with contextlib.suppress(Exception):
                self._layout.rollback(self._savepoint)
            return
        undo = self._undo or {}
        new = [n for n, old in undo.items() if old is None]
        with contextlib.suppress(Exception):  # best effort: the layout may keep failing
            for nchunk, old in sorted(undo.items(), reverse=True):
                if old is not None:
                    self._layout.write_chunk(nchunk, old)
            if new:
                self._layout.drop_chunks(min(new))
        tail_run = range(self._nfull * self.per_row, (self._nfull + 1) * self.per_row)
        if self._tail is not None and self.nleft and any(n in tail_run for n in new):
            self._tail_dirty = True  # the tail's stored chunks were among those dropped

    def _own_tail(self, first_row: int) -> None:
        """Rows from ``first_row`` of the tail are about to be overwritten: inside a
        transaction whose saved state holds this very buffer with those rows in it, work
        on a copy, so a rollback finds the rows as they were."""
        saved = self._saved
        if saved is None or saved[2] is not self._tail or self._tail is None:
            return
        shape, nfull = saved[0], saved[1]
        kept = shape[0] - nfull * self._d.chunks[0] if shape else 0
        if first_row < kept:
            self._tail = self._tail.copy()

    def _remember(self, nchunk: int) -> None:
        """Keep what chunk ``nchunk`` holds now, to put it back if the operation fails."""
        undo = self._undo
        if undo is None or nchunk in undo or self._layout.savepoints:
            return
        stored_runs = self._nfull + (1 if self.nleft else 0)
        old: bytes | None = None
        if nchunk < stored_runs * self.per_row:
            with contextlib.suppress(LookupError, OSError, ValueError):
                old = bytes(self._layout.read_chunk(nchunk))
        undo[nchunk] = old

    # -- the tail -------------------------------------------------------------------------

    def _mark_dirty(self) -> None:
        self._tail_dirty = True
        self.mark_pending()

    def ensure_tail(self) -> None:
        """Decode the last partial run of chunk rows into the tail buffer."""
        if self._tail is not None:
            return
        shape = (self._d.chunks[0], *self._shape[1:])
        tail, self._spare = self._spare, None
        if tail is None or tail.shape != shape:
            check_memory(shape, self._d.dtype, "the last run of chunk rows")
            tail = np.zeros(shape, dtype=self._d.dtype)
        nleft = self.nleft
        if nleft:
            start = self._nfull * self._d.chunks[0]
            self._read_stored(range(start, start + nleft), tail[:nleft])
        self._tail = tail

    def _read_stored(self, rows: range, out: np.ndarray) -> None:
        """Rows ``rows`` as stored (not from the tail) into ``out``."""
        grid, io = self.grid, self._io
        for piece in plan(grid, self.rows_key(rows)):
            io.read_piece(grid, piece, out)

    def flush_tail(self) -> None:
        """Write the tail's chunks (only its rows where the layout allows)."""
        if self._tail_dirty and self.nleft and self._tail is not None:
            nleft = self.nleft
            self._store_row(self._nfull, self._tail[:nleft], rows=nleft)
        self._tail_dirty = False

    def _release_big_tail(self) -> None:
        if self._tail is not None and self._tail.nbytes > TAIL_BUDGET and self.per_row > 1:
            self.flush_tail()
            self._tail = None

    def clip(self, nitems: int) -> None:
        """Hide rows past ``nitems`` without writing anything (read-only table views)."""
        if nitems >= self._shape[0]:
            return
        self._shape = (nitems, *self._shape[1:])
        self._nfull, self._cache, self._tail = nitems // self._d.chunks[0], None, None
        if self.nleft and self.per_row == 1:
            self.ensure_tail()

    # -- storing chunks -------------------------------------------------------------------

    def _store_chunk(self, nchunk: int, raw: np.ndarray, grid: NDGrid,
                     data: bytes | None = None, stats: ChunkStats | None = None,
                     digest: bytes | None = None) -> None:
        """Store a chunk given in stored order (``data``: already compressed, ``digest``
        its layout digest; ``stats``: what listeners get, see :meth:`_stats_of`)."""
        self._remember(nchunk)
        if data is None:
            data = self._io.encode(raw, grid)
        self._cbytes += self._layout.write_chunk(nchunk, data, digest)
        if self.cached(nchunk) is not None:
            self._cache = None
        if nchunk < self._nfull * self.per_row and self._listeners:
            if stats is None:
                stats = self._stats_of(nchunk, raw, grid)
            self._tell(nchunk, stats)

    def _tell(self, nchunk: int, stats: ChunkStats | None) -> None:
        """Tell the listeners that full chunk ``nchunk`` was stored."""
        stamp = self._layout.chunk_stamp(nchunk)
        if self._undo is not None:
            self._told.add(nchunk)
        for listener in self._listeners:
            listener.chunk_written(nchunk, stats, stamp)

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
        summarise = self._summarises()
        for nchunk, raw in self._row_chunks(row, slab, None):
            self._handoff.submit(nchunk, raw, partial(self._encode_handed, nchunk, raw, grid,
                                                      summarise), slab)
        self.mark_pending()

    def _encode_handed(self, nchunk: int, raw: np.ndarray, grid: NDGrid,
                       summarise: bool) -> Encoded:
        data = self._io.encode_on_worker(raw, grid)
        return (data, self._layout.chunk_digest(data),
                self._stats_of(nchunk, raw, grid) if summarise else None)

    def _store_handed(self, nchunk: int, raw: np.ndarray, encoded: Encoded) -> None:
        data, digest, stats = encoded
        with self._guarded():
            self._store_chunk(nchunk, raw, self.grid, data, stats, digest)

    def _row_chunks(self, row: int, slab: np.ndarray, rows: int | None
                    ) -> Iterator[tuple[int, np.ndarray]]:
        """``(nchunk, chunk in stored order)`` for the chunks of run ``row`` (see
        :meth:`_store_rows`)."""
        grid = self.grid
        per_row = self.per_row
        chunks = self._d.chunks
        for t, trailing in enumerate(np.ndindex(*grid.grid_shape[1:])):
            box = tuple(slice(c * s, (c + 1) * s) for c, s in zip(trailing, chunks[1:],
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
        # Listeners' statistics are worked out on the compressing threads too.
        summarise = partial(self._stats_of, grid=grid) if rows is None and \
            self._summarises() else None
        for nchunk, raw, data, stats, digest in self._io.encode_all(
                chunks, grid, len(slabs) * self.per_row > 1, summarise,
                self._layout.chunk_digest):
            self._store_chunk(nchunk, raw, grid, data, stats, digest)

    def _summarises(self) -> bool:
        """Whether stored chunks get statistics (someone listens, and the items are
        numbers of the machine's byte order)."""
        dtype = self._d.dtype
        return bool(self._listeners) and dtype.kind in chunkstats.KINDS and dtype.isnative

    def _stats_of(self, nchunk: int, raw: np.ndarray, grid: NDGrid) -> ChunkStats | None:
        """The statistics of chunk ``nchunk`` of ``grid`` from its items in stored order
        ``raw`` (only those inside the array count; None for items without statistics).
        Thread-safe: compressing threads call it."""
        dtype = self._d.dtype
        if dtype.kind not in chunkstats.KINDS or not dtype.isnative:
            return None
        valid = grid.valid_shape(grid.chunk_coords(nchunk))
        ext = grid.ext_chunks
        if raw.size == 1 or (raw.size and not any(raw.strides)):  # the fill value only
            return chunkstats.constant(raw.reshape(-1)[0], math.prod(valid))
        if tuple(valid) != tuple(ext):
            chunk = deblock(raw, grid) if self._io.blocked(grid) else raw.reshape(ext)
            raw = chunk[tuple(slice(0, v) for v in valid)]
        return chunkstats.of_values(raw)

    def _fill_stats(self, nchunk: int, grid: NDGrid) -> ChunkStats | None:
        """The statistics of chunk ``nchunk`` holding only the fill value."""
        return self._stats_of(nchunk, self._d.dflt.reshape(1), grid)

    def store_moved(self, nchunk: int, data: Any, digest: bytes | None) -> None:
        """Store compressed chunk ``nchunk`` past the stored rows (see
        :class:`carray.engine.moves.ChunkSink`), inside a transaction."""
        self._remember(nchunk)
        self._cbytes += self._layout.write_chunk(nchunk, data, digest)
        if self._listeners:
            self._tell(nchunk, None)  # statistics unknown until the chunk is read

    def extend_rows(self, rows: int) -> None:
        """Take ``rows`` more rows, whose chunks :meth:`store_moved` stored."""
        self._shape = (self._shape[0] + rows, *self._shape[1:])
        self._nfull, self._grid_memo = self._shape[0] // self._d.chunks[0], None
        self._tail, self._tail_dirty, self._cache = None, False, None
        self.mark_pending()
        if self.nleft and self.per_row == 1:
            self.ensure_tail()

    # -- appending ------------------------------------------------------------------------

    def append(self, arr: np.ndarray) -> None:
        """Append rows (already of the dtype and row shape) along the first axis.

        Only complete runs of chunk rows are compressed and stored; the rest
        waits in the tail until it fills or the array is flushed.  A run the tail
        completes is compressed on a worker thread while the caller goes on, and
        stored by the next call (see :mod:`.handoff`).
        """
        n = len(arr)
        if n == 0:
            return
        # What earlier appends handed over is stored first, in order: all of it when
        # this append stores whole runs itself.
        self.settle(wait=n >= self._d.chunks[0])
        # A step of a larger operation stores its chunks now, before the operation's own.
        handing = self._undo is None
        if handing and self._spare is None:
            self._spare = self._handoff.spare()
        with self._guarded():
            self._append(arr, handing)

    def _append(self, arr: np.ndarray, handing: bool) -> None:
        n = len(arr)
        c0 = self._d.chunks[0]
        nleft = self.nleft
        if self._tail is not None and nleft + n < c0:  # the common case: fill the tail
            self._own_tail(nleft)
            self._tail[nleft:nleft + n] = arr
            self._shape = (self._shape[0] + n, *self._shape[1:])
            self._mark_dirty()
            return
        pos = self._fill_tail(arr, handing) if nleft else 0
        runs = (n - pos) // c0
        if runs:
            self._shape = (self._shape[0] + runs * c0, *self._shape[1:])
            self._nfull += runs
            self._store_rows(self._nfull - runs, [arr[pos + r * c0:pos + (r + 1) * c0]
                                                  for r in range(runs)])
            pos += runs * c0
        if pos < n and not self.nleft and self.per_row > 1 and self._tail is None and \
                not self._handoff and self._io.is_fill(arr[pos:]) and \
                self._grow_lazily(self._shape[0] + n - pos):
            return  # a partial run of the fill value: special chunks, no decoded tail
        if pos < n:
            self.ensure_tail()
            assert self._tail is not None
            rest = n - pos
            self._own_tail(0)
            self._tail[:rest] = arr[pos:]
            self._shape = (self._shape[0] + rest, *self._shape[1:])
            self._mark_dirty()
        self._release_big_tail()

    def _fill_tail(self, arr: np.ndarray, handing: bool) -> int:
        """Append the first rows of ``arr`` to the partial tail; how many it took."""
        c0, nleft, n = self._d.chunks[0], self.nleft, len(arr)
        self.ensure_tail()
        assert self._tail is not None
        take = min(c0 - nleft, n)
        self._own_tail(nleft)
        self._tail[nleft:nleft + take] = arr[:take]
        self._shape = (self._shape[0] + take, *self._shape[1:])
        if nleft + take < c0:
            self._mark_dirty()
            return take
        self._nfull += 1  # the tail just filled
        if not handing or n - take >= c0:  # runs follow, stored here: this first
            self._store_row(self._nfull - 1, self._tail)
        else:
            self._hand_off(self._nfull - 1, self._tail)
        # A new buffer for the next tail: the old one is what a rollback restores.
        self._tail, self._tail_dirty = None, False
        return take

    # -- writing in place -----------------------------------------------------------------

    def _chunk_for_update(self, nchunk: int, grid: NDGrid) -> np.ndarray:
        """A private copy of stored chunk ``nchunk`` in stored order, to modify."""
        cached = self.cached(nchunk)
        return cached.copy() if cached is not None else self._io.decoded(nchunk, grid)

    def write(self, okey: OrthoKey, values: np.ndarray) -> None:
        """Assign ``values`` (of the dtype, expanded to the key) to a selection."""
        grid = self.grid
        in_tail = []
        # Whole chunks set to the fill value (a scalar, broadcast) become special chunks.
        fill = self._io.fill_chunk(grid) if not any(values.strides) and \
            self._io.is_fill(values) else None
        for piece in plan(grid, okey):
            if self.in_tail_run(piece.coords):
                in_tail.append(piece)  # applied last: writing the tail cannot fail
                continue
            if piece.full and fill is not None:
                self._store_chunk(piece.nchunk, self._d.dflt.reshape(1), grid, fill,
                                  self._fill_stats(piece.nchunk, grid))
                continue
            raw = np.zeros(grid.chunk_items, dtype=self._d.dtype) if piece.full else \
                self._chunk_for_update(piece.nchunk, grid)
            self._io.scatter_piece(grid, piece, values, raw)
            self._store_chunk(piece.nchunk, raw, grid)
            self._cache = (piece.nchunk, raw)
        if in_tail:
            self.ensure_tail()
            self._own_tail(0)
            for piece in in_tail:
                scatter(piece, values, self.tail_view(piece.coords))
            self._mark_dirty()
        self._release_big_tail()

    def write_coords(self, ckey: CoordKey, flat: np.ndarray) -> None:
        """Assign ``flat`` (one value per coordinate) at the coordinates of ``ckey``."""
        grid = self.grid
        in_tail = []
        for nchunk, pos, local, coords in point_groups(grid, ckey):
            if self.in_tail_run(coords):
                in_tail.append((pos, local, coords))
                continue
            raw = self._chunk_for_update(nchunk, grid)
            raw[self._io.item_offsets(grid, local)] = flat[pos]
            self._store_chunk(nchunk, raw, grid)
            self._cache = (nchunk, raw)
        if in_tail:
            self.ensure_tail()
            self._own_tail(0)
            for pos, local, coords in in_tail:
                self.tail_view(coords)[tuple(local)] = flat[pos]
            self._mark_dirty()
        self._release_big_tail()

    # -- resizing -------------------------------------------------------------------------

    def resize_trailing(self, new_trailing: tuple[int, ...]) -> None:
        """Change every axis but the first: chunks moved to a new grid."""
        self.flush_tail()
        self._tail, self._cache = None, None
        for listener in self._listeners:  # chunks are numbered anew
            listener.chunks_dropped(0)
        old = self._shape
        middle = (old[0], *(min(o, n) for o, n in zip(old[1:], new_trailing, strict=True)))
        new = (old[0], *new_trailing)
        grid = self.grid
        if middle != old:
            self._cbytes += regrid(self._layout, self._io, grid, grid.resized(middle),
                                   self._d.dflt, grow=False)
            self._shape = middle
        if new != middle:
            self._cbytes += regrid(self._layout, self._io, grid.resized(middle),
                                   grid.resized(new), self._d.dflt, grow=True)
            self._shape = new

    def grow_rows(self, nitems: int) -> None:
        """Append ``dflt`` rows up to ``nitems``: whole runs of chunks as one chunk stored
        many times (a special chunk, which layouts that can record without storing)."""
        c0, dflt = self._d.chunks[0], self._d.dflt
        if self.nleft:
            fill = min(c0 - self.nleft, nitems - self._shape[0])
            self.append(np.broadcast_to(dflt, (fill, *self._shape[1:])))
        rows = (nitems - self._shape[0]) // c0
        if rows and not self._grow_absent(rows):
            grid = self.grid
            per_row = self.per_row
            check_fill_count(rows * per_row, self._layout.describe())
            # One chunk written many times: a special chunk where the layout takes them.
            chunk = self._io.fill_chunk(grid) or self._io.encode(
                np.full(grid.chunk_items, dflt, dtype=self._d.dtype), grid)
            for _ in range(rows):
                self._shape = (self._shape[0] + c0, *self._shape[1:])
                self._nfull += 1
                first = (self._nfull - 1) * per_row
                for nchunk in range(first, first + per_row):
                    self._remember(nchunk)
                    self._cbytes += self._layout.write_chunk(nchunk, chunk)
                    if self._listeners:
                        self._tell(nchunk, self._fill_stats(nchunk, self.grid))
        if nitems > self._shape[0] and not self.nleft and self._grow_lazily(nitems):
            return
        if nitems > self._shape[0]:
            self.append(np.broadcast_to(dflt, (nitems - self._shape[0], *self._shape[1:])))

    def _grow_absent(self, rows: int) -> bool:
        """Add ``rows`` runs of chunk rows of the fill value that the layout records in
        constant time, storing nothing (carray's layout, memory); False when it cannot."""
        grid = self.grid
        chunk = self._io.fill_chunk(grid)
        per_row = self.per_row
        first, count = self._nfull * per_row, rows * per_row
        if chunk is None or not self._layout.grow_absent(first, count, chunk):
            return False
        self._remember(first)  # a failed operation drops them all
        self._shape = (self._shape[0] + rows * self._d.chunks[0], *self._shape[1:])
        self._nfull += rows
        if self._listeners and count <= TOLD_ABSENT:  # each gets its statistics, as stored
            grid = self.grid
            for nchunk in range(first, first + count):
                self._tell(nchunk, self._fill_stats(nchunk, grid))
        elif self._listeners:
            for listener in self._listeners:
                listener.chunks_absent(first, count)
        return True

    def _grow_lazily(self, nitems: int) -> bool:
        """Add the last, partial run of ``dflt`` rows up to ``nitems`` as special chunks,
        without a decoded tail; False when the array needs a tail (runs of one chunk
        keep theirs decoded) or its layout real chunks."""
        grid = self.grid
        chunk = self._io.fill_chunk(grid)
        if chunk is None or self.per_row == 1:
            return False
        first = self._nfull * self.per_row
        for nchunk in range(first, first + self.per_row):
            self._remember(nchunk)
            self._cbytes += self._layout.write_chunk(nchunk, chunk)
        self._shape = (nitems, *self._shape[1:])
        self._tail, self._tail_dirty = None, False
        self.mark_pending()  # the new length waits for the next flush
        return True

    def shrink_rows(self, nitems: int, flush: Callable[[], None]) -> None:
        """Cut the first axis to ``nitems``; a layout without savepoints records the
        shorter length (``flush()``) before chunks are deleted, so a crash in between
        leaves a readable array (readers ignore chunks past the length)."""
        c0 = self._d.chunks[0]
        new_full, new_left = divmod(nitems, c0)
        if new_full >= self._nfull:
            self._shape = (nitems, *self._shape[1:])
            if self._tail is not None:
                self._mark_dirty()
            if not new_left:  # a stored partial chunk past the new end goes (its bytes too)
                self._cbytes += self._layout.drop_chunks(self.grid.nchunks)
            return
        per_row = self.per_row
        if new_left and (per_row == 1 or self._layout.in_memory):
            start = new_full * c0
            tail = np.zeros((c0, *self._shape[1:]), dtype=self._d.dtype)
            self._read_stored(range(start, nitems), tail[:new_left])
            self._tail, self._tail_dirty = tail, True
        else:
            # A large tail is decoded again when next needed; its chunks stay.
            self._tail, self._tail_dirty = None, False
        self._cache = None
        # The chunks holding the new tail stay until a flush rewrites them.
        keep = 1 if new_left else 0
        self._nfull = new_full
        self._shape = (nitems, *self._shape[1:])
        if not self._layout.savepoints:
            flush()
        self._cbytes += self._layout.drop_chunks((new_full + keep) * per_row)
        for listener in self._listeners:
            listener.chunks_dropped(new_full * per_row)

    # -- flushing -------------------------------------------------------------------------

    def prepare_flush(self) -> None:
        """Store what appends handed over and, where it is not kept between flushes, the
        tail (a partial run of several N-d chunks is compressed; its decoded tail is kept
        after the flush only up to :data:`TAIL_KEPT` bytes)."""
        self.settle()
        if self._objects is None and self.per_row > 1:
            self.flush_tail()
            if self._tail is not None and self._tail.nbytes > TAIL_KEPT:
                self._tail = None

    def commit(self, meta: Any, message: str | None) -> None:
        """Store the tail's rows and record ``meta`` (as a version with ``message`` where
        the layout keeps versions)."""
        self.flush_tail()
        before = self._layout.version_id
        try:
            published = self._layout.commit(meta, self._cbytes, message)
        except BaseException:
            if self._layout.version_id != before:  # published, then a later step failed
                self._committed()
            raise
        if published is not False:
            self._committed()  # published: a later failure cannot go back past it
        self.pending = False

    def replace_objects(self, objects: np.ndarray, first: int) -> None:
        """Make ``objects`` (1-d, dtype object) the items of this object array; items from
        ``first`` on changed and are stored again (one pickle each) on flush."""
        self._objects = objects
        self._shape = (len(objects),)
        self._objects_from = first if self._objects_from is None else \
            min(self._objects_from, first)
        self._mark_dirty()

    def flush_objects(self, meta: Any) -> None:
        """Store the object items that changed and record ``meta``."""
        first = self._objects_from
        if first is None or self._layout.in_memory:
            self._tail_dirty = False
            return
        assert self._objects is not None
        self._cbytes += self._layout.write_objects(self._objects, first, self._d.cparams)
        self._cbytes += self._layout.drop_chunks(len(self._objects))
        self._layout.commit(meta, self._cbytes)
        self._objects_from = None
        self._tail_dirty = self.pending = False

    def reload(self, shape: tuple[int, ...], cbytes: int) -> None:
        """Take ``shape`` and ``cbytes`` as the state (the layout moved to another
        version): nothing kept decoded."""
        self._shape = shape
        self._nfull = shape[0] // self._d.chunks[0] if shape else 1
        self._tail, self._tail_dirty, self._cache = None, False, None
        self._cbytes, self._grid_memo = cbytes, None
        for listener in self._listeners:
            listener.chunks_dropped(0)
        if self._objects is None and self.nleft and self.per_row == 1:
            self.ensure_tail()

    def forget(self, closed: Any = None) -> None:
        """Drop every unflushed change (the handle is closed without flushing); ``closed``
        (see :class:`carray.engine.closed.Closed`) stands in for the storage from then on."""
        self._handoff.restore(())
        self._tail = self._cache = self._objects = None
        self._tail_dirty = self.pending = False
        if closed is not None:
            self._layout = self._io = closed
