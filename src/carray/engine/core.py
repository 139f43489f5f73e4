"""The array engine: the one owner of an array's storage state.

An engine holds an array's layout, chunk grid, chunk codec (:class:`ChunkIO`),
the decoded chunks of its last, partial run of rows along the first axis (the
*tail*, kept so appends are cheap), a one-chunk decode cache, its sizes and the
listeners told about every chunk it writes.  Containers (``carray``, table
columns, string columns) are facades over it; nothing else touches a layout.

Every operation that changes the array is all-or-nothing on the engine: when it
raises, the engine's state is what it was before the call, and chunks it had
already rewritten in the layout are put back (best effort: a layout that fails
again cannot be helped, but nothing is committed until the next flush, so the
files keep their last flushed state).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np

from carray import _parallel
from carray.chunkio import ChunkIO
from carray.engine.boxes import BoxReader, is_box
from carray.engine.closed import Closed
from carray.engine.description import ArrayDescription
from carray.engine.handoff import Handing, Handoff
from carray.engine.history import History
from carray.engine.points import decode_for, point_groups
from carray.engine.resizing import Resizing
from carray.engine.txn import ChunkListener, atomic
from carray.engine.units import UnitWriter
from carray.errors import HandleClosedError, ReadOnlyError, UnsupportedDTypeError
from carray.grid import NDGrid, gather, gather_blocked, plan, scatter
from carray.keys import CoordKey, OrthoKey
from carray.layouts import create_layout, open_layout
from carray.layouts.base import ArrayMeta, Layout
from carray.stores import Store

# A tail bigger than this is not kept decoded between writes: it is written out
# and decoded again when needed.
_TAIL_BUDGET = 64 * 2**20
# Reads decoding at least this much per chunk spread the chunks over threads.
_THREADED_BYTES = 512 * 2**10
# At most this many items in one chunk are decoded one by one.
_FEW_POINTS = 8

# Engines of stored arrays with unwritten changes, flushed at interpreter exit.
_unflushed: weakref.WeakSet[ArrayEngine] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    for engine in list(_unflushed):
        with contextlib.suppress(Exception):  # nothing can be reported at exit
            engine.flush()


class ArrayEngine(ArrayDescription, Resizing, Handing):
    """Storage state and operations of one N-d array (see the module docstring).

    Parameters
    ----------
    layout : Layout
        Where the chunks and metadata live.
    meta : ArrayMeta
        The array's dtype, shape, chunk and block shapes, codec parameters.
    cbytes : int
        Compressed bytes already stored.
    mode : {'r', 'a', 'w'}
        'r' never writes.
    """

    def __init__(self, layout: Layout, meta: ArrayMeta, cbytes: int, mode: str,
                 objects: np.ndarray | None = None) -> None:
        super().__init__(layout, meta, mode)
        self._shape = tuple(meta.shape)
        self._io = ChunkIO(layout, meta.dtype, self._blocks, meta.cparams, fill=self._dflt)
        self._grid_memo: NDGrid | None = None
        # A 0-d array is one chunk of one item, always whole: no rows, no tail.
        self._nfull = self._shape[0] // self._chunks[0] if self._shape else 1
        self._tail: np.ndarray | None = None
        self._tail_dirty = False
        self._cache: tuple[int, np.ndarray] | None = None
        self._boxes: BoxReader | None = None  # made on the first read of a box
        self._cbytes = cbytes
        self._objects = objects
        self._objects_from: int | None = None  # object items to store again from here
        self._listeners: list[ChunkListener] = []
        self._undo: dict[int, bytes | None] | None = None
        self._saved: tuple[Any, ...] | None = None
        self._savepoint: Any = None  # the layout's, for layouts that undo their own writes
        self._closed = False
        self._closed_by: str | None = None  # why a takeover closed it (see abandon)
        self._handoff = Handoff(2 * _parallel.workers())
        self._spare: np.ndarray | None = None  # a tail buffer to use again
        if objects is None and self._nleft and self.per_row == 1:
            self._ensure_tail()  # an array opened with a partial last chunk

    @classmethod
    def create(cls, path: str | None, meta: ArrayMeta, *, store: Store, format: str | None,  # noqa: A002
               mode: str, fsync: bool, storage: dict[str, Any]) -> ArrayEngine:
        """A new, empty array: in memory when ``path`` is None."""
        layout = create_layout(path, meta, format=format, mode=mode, fsync=fsync,
                               storage=storage, store=store)
        # An object array (its creator opted in to pickles) holds its items decoded.
        objects = np.empty(0, dtype=object) if meta.dtype == np.dtype(object) else None
        return cls(layout, meta, 0, mode, objects)

    @classmethod
    def open(cls, path: str, *, store: Store, mode: str, fsync: bool, allow_pickle: bool,
             storage: dict[str, Any], at: dict[str, Any] | None = None) -> ArrayEngine:
        """The array stored at ``path`` (any layout); ``at``: the ``version``, ``tag`` or
        ``as_of`` of an earlier version to read."""
        layout, meta, cbytes = open_layout(path, readonly=(mode == "r"), fsync=fsync,
                                           allow_pickle=allow_pickle, storage=storage,
                                           store=store, take_over=(mode == "w"),
                                           **(at or {}))
        objects = layout.read_objects(meta.length) if meta.dtype == np.dtype(object) else None
        return cls(layout, meta, cbytes, mode, objects)

    # -- description ----------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def declared_chunks(self) -> tuple[int, ...]:
        """The chunk shape to report: the stored file's own where it records 0 along an
        axis that is still empty (python-blosc2 does), else :attr:`chunks`."""
        declared = self._layout.declared_chunks()
        if declared is None:
            return self._chunks
        return tuple(d if d == 0 and n == 0 else c
                     for d, c, n in zip(declared, self._chunks, self._shape, strict=True))

    @property
    def grid(self) -> NDGrid:
        g = self._grid_memo
        if g is None or g.shape != self._shape:
            g = self._grid_memo = NDGrid(self._shape, self._chunks, self._blocks or self._chunks,
                                         max(self._dtype.itemsize, 1))
        return g

    @property
    def per_row(self) -> int:
        """Chunks in one run of chunk rows (1 when chunks span every axis but the first)."""
        return math.prod(-(-n // c) for n, c in zip(self._shape[1:], self._chunks[1:],
                                                    strict=True))

    @property
    def nfull(self) -> int:
        """Complete runs of chunk rows along the first axis."""
        return self._nfull

    @property
    def _nleft(self) -> int:
        if not self._shape:
            return 0
        return self._shape[0] - self._nfull * self._chunks[0]

    @property
    def leftover(self) -> int:
        """Rows in the last, partial run of chunk rows."""
        return self._nleft

    @property
    def cbytes(self) -> int:
        """Bytes the array takes: stored chunks, plus tail rows not stored yet."""
        self.settle()
        pending = self._tail is not None and (self._tail_dirty or (
            self._layout.in_memory and self.per_row == 1))
        if not pending:
            return self._cbytes
        return self._cbytes + self._nleft * math.prod(self._shape[1:]) * self._dtype.itemsize

    @property
    def holds_tail(self) -> bool:
        """Whether the last partial run of rows is kept decoded in memory."""
        return self._tail is not None

    @property
    def objects(self) -> np.ndarray | None:
        """The items of a bcolz ``object`` array (read-only), else None."""
        return self._objects

    @property
    def unit_chunks(self) -> int:
        """Chunks per file a parallel writer can write alone (0: not in parallel)."""
        if self._layout.in_memory or (self._order == "F" and len(self._shape) > 1):
            return 0  # writers place blocks in the user's axis order, not the stored one
        return self._layout.unit_chunks

    @property
    def dirty(self) -> bool:
        """Whether there are changes not flushed yet."""
        return self._tail_dirty or bool(self._handoff) or self in _unflushed

    def meta(self) -> ArrayMeta:
        """What the layout records about the array now."""
        return ArrayMeta(dtype=self._dtype, shape=self._shape, chunks=self._chunks,
                         blocks=self._blocks, cparams=self._cparams, dflt=self._dflt,
                         expectedlen=self._expectedlen, order=self._order)

    def chunk_fill(self, nchunk: int) -> np.ndarray | None:
        """The one value chunk ``nchunk`` holds, when its layout records it as a fill
        (special) chunk, known without decoding (summaries: min = max = it); else None."""
        self.settle()
        if self._cached(nchunk) is not None or (
                self._tail is not None and self._in_tail_run(self.grid.chunk_coords(nchunk))):
            return None
        return self._io.fill_of(nchunk)

    # -- listeners ------------------------------------------------------------------------

    def add_listener(self, listener: ChunkListener) -> None:
        self._listeners.append(listener)

    def mark_pending(self) -> None:
        """Something kept beside the array (a listener's state) waits for the next flush."""
        if self._mode != "r" and not self._layout.in_memory:
            _unflushed.add(self)

    # -- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything done inside happens whole or not at all: on an error the engine's
        state is put back, and so are the chunks it had rewritten."""
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

    def _committed(self) -> None:
        """A commit inside a transaction: a later failure goes back to here, not to the
        start (the files already record this state)."""
        if self._undo is not None:
            self._saved, self._undo = self._state(), {}
            self._savepoint = self._layout.savepoint()

    def _state(self) -> tuple[Any, ...]:
        return (self._shape, self._nfull, self._tail, self._tail_dirty, self._cache,
                self._cbytes, self._grid_memo, self._handoff.snapshot())

    def _rollback(self, saved: tuple[Any, ...]) -> None:
        (self._shape, self._nfull, self._tail, self._tail_dirty, self._cache, self._cbytes,
         self._grid_memo, handed) = saved
        self._handoff.restore(handed)
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
        if self._tail is not None and self._nleft and any(n in tail_run for n in new):
            self._tail_dirty = True  # the tail's stored chunks were among those dropped

    def _own_tail(self, first_row: int) -> None:
        """Rows from ``first_row`` of the tail are about to be overwritten: inside a
        transaction whose saved state holds this very buffer with those rows in it, work
        on a copy, so a rollback finds the rows as they were."""
        saved = self._saved
        if saved is None or saved[2] is not self._tail or self._tail is None:
            return
        shape, nfull = saved[0], saved[1]
        kept = shape[0] - nfull * self._chunks[0] if shape else 0
        if first_row < kept:
            self._tail = self._tail.copy()

    def _remember(self, nchunk: int) -> None:
        """Keep what chunk ``nchunk`` holds now, to put it back if the operation fails."""
        undo = self._undo
        if undo is None or nchunk in undo or self._layout.savepoints:
            return
        stored_runs = self._nfull + (1 if self._nleft else 0)
        old: bytes | None = None
        if nchunk < stored_runs * self.per_row:
            with contextlib.suppress(LookupError, OSError, ValueError):
                old = bytes(self._layout.read_chunk(nchunk))
        undo[nchunk] = old

    def check_writable(self) -> None:
        if self._closed_by is not None:
            raise HandleClosedError(self._closed_by)
        if self._mode == "r":
            pinned = self._layout.pinned_version
            raise ReadOnlyError(f"{self.describe()}: opened in mode 'r'" if pinned is None
                                else f"{self.describe()}: version {pinned} is read-only (open "
                                "the newest with mode='a' to change the array)")
        if self._objects is not None and not (self._layout.in_memory
                                              or self._layout.rows_only):
            raise UnsupportedDTypeError(f"{self.describe()}: object arrays are stored only "
                                        "in bcolz directories")

    # -- reading --------------------------------------------------------------------------

    def _tail_view(self, coords: tuple[int, ...]) -> np.ndarray:
        """The tail's items of chunk ``coords`` (in the last run of rows), origin at 0."""
        assert self._tail is not None
        box = tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords[1:], self._chunks[1:],
                                                                strict=True))
        return self._tail[(slice(None), *box)]

    def _in_tail_run(self, coords: tuple[int, ...]) -> bool:
        return self._nleft > 0 and coords[0] == self._nfull

    def _cached(self, nchunk: int) -> np.ndarray | None:
        cache = self._cache
        return cache[1] if cache is not None and cache[0] == nchunk else None

    def read(self, okey: OrthoKey, out: np.ndarray | None = None) -> np.ndarray:
        """The items an orthogonal key selects, in its output shape (into ``out``)."""
        self.settle()
        if out is None:
            out = np.empty(okey.sel_shape, dtype=self._dtype)
        if okey.size == 0:
            return okey.finish(out)
        if len(self._shape) == 1 and self._read_run(okey.axes[0], out):
            return okey.finish(out)
        if self._read_box(okey, out):
            return okey.finish(out)
        grid, io = self.grid, self._io
        tail_row = self._nfull if self._tail is not None and self._nleft else -1
        pieces = []
        for piece in plan(grid, okey):
            cached = self._cached(piece.nchunk)
            if tail_row >= 0 and piece.coords[0] == tail_row:
                gather(piece, self._tail_view(piece.coords), out)
            elif cached is not None:
                if io.blocked(grid):
                    gather_blocked(piece, cached, grid, out)
                else:
                    gather(piece, cached.reshape(grid.ext_chunks), out)
            else:
                pieces.append(piece)
        # Threads pay off only when each has real decoding to do: below that, handing
        # pieces over and contending for the GIL costs more than it saves.
        if pieces and self._layout.remote:
            # Fetches from an object store wait on the network: few, and many at once.
            with self._layout.prefetched([p.nchunk for p in pieces]):
                _parallel.run([partial(io.read_piece, grid, p, out) for p in pieces],
                              width=_parallel.IO_THREADS)
        elif len(pieces) > 1 and sum(io.decode_cost(grid, p) for p in pieces) >= \
                _THREADED_BYTES * len(pieces):
            _parallel.run([partial(io.read_piece, grid, p, out) for p in pieces])
        else:
            for piece in pieces:
                io.read_piece(grid, piece, out)
        return okey.finish(out)

    def _read_box(self, okey: OrthoKey, out: np.ndarray) -> bool:
        """The short path of planes and boxes of chunks stored block by block (see
        :mod:`.boxes`); False: not such a read, nothing done."""
        grid = self.grid
        if self._objects is not None or self._layout.remote or not self._io.blocked(grid) \
                or not is_box(okey):
            return False
        if self._tail is not None and self._nleft and \
                okey.axes[0][-1] >= self._nfull * self._chunks[0]:
            return False  # reaches into the decoded tail
        reader = self._boxes
        if reader is None or reader.grid is not grid:
            reader = self._boxes = BoxReader(self._io, grid)
        reader.read(okey, out, self._cache, _THREADED_BYTES)
        return True

    def _read_run(self, rows: Any, out: np.ndarray) -> bool:
        """The short path of ``a[i:j]`` on a 1-d array: a run of items inside one stored
        chunk decoded straight into ``out``, without planning pieces (False: not such
        a read, nothing done)."""
        if not isinstance(rows, range) or rows.step != 1 or not out.flags.c_contiguous:
            return False
        c0 = self._chunks[0]
        nchunk, start = divmod(rows.start, c0)
        if (rows.stop - 1) // c0 != nchunk or nchunk >= self._nfull or \
                self._cached(nchunk) is not None or self._objects is not None:
            return False
        self._io.decode_range(nchunk, start, out, len(rows) == c0)
        return True

    def read_item(self, index: tuple[int, ...]) -> Any:
        """One item, by non-negative in-bounds coordinates (the fast path of ``a[i]``)."""
        self.settle()
        if self._objects is not None:
            return self._objects[index]
        row = index[0] - self._nfull * self._chunks[0] if index else -1
        if self._tail is not None and row >= 0:
            return self._tail[(row, *index[1:])].copy()
        grid = self.grid
        # Plain integer arithmetic: this path is a few microseconds, numpy calls add up.
        if len(index) == 1:
            nchunk, offset = divmod(index[0], self._chunks[0])
        else:
            coords = tuple(i // c for i, c in zip(index, self._chunks, strict=True))
            local = [i - x * c for i, x, c in zip(index, coords, self._chunks, strict=True)]
            nchunk = grid.chunk_index(coords)
            offset = self._io.item_offset(grid, local)
        cached = self._cached(nchunk)
        if cached is not None:
            return cached[offset].copy()
        return self._io.item(nchunk, offset)

    def tail_buffer(self) -> np.ndarray:
        """The decoded last partial run of chunk rows (``chunks[0]`` rows; those past
        :attr:`leftover` are not items), read-only: a snapshot once the array changes."""
        if not self._shape:
            raise ValueError("a 0-d array has no rows")
        self._ensure_tail()
        assert self._tail is not None
        view = self._tail.view()
        view.flags.writeable = False
        return view

    def rows_key(self, rows: range) -> OrthoKey:
        """The selection of whole rows ``rows`` (positive step)."""
        axes = (rows, *(range(n) for n in self._shape[1:]))
        return OrthoKey(self._shape, axes, (), (), (len(rows), *self._shape[1:]))

    def read_rows(self, rows: range, out: np.ndarray | None = None) -> np.ndarray:
        """Whole rows ``rows`` (any step) as an array."""
        if rows.step < 0:
            return self.read_rows(rows[::-1])[::-1]
        if self._objects is not None:
            return self._objects[rows.start:rows.stop:rows.step]
        return self.read(self.rows_key(rows), out)

    def read_coords(self, ckey: CoordKey) -> np.ndarray:
        """Items at the coordinates of a :class:`CoordKey`, in its output shape."""
        self.settle()
        out = np.empty(ckey.size, dtype=self._dtype)
        if ckey.size == 0:
            return out.reshape(ckey.out_shape)
        grid, io = self.grid, self._io
        for nchunk, pos, local, coords in point_groups(grid, ckey):
            if self._tail is not None and self._in_tail_run(coords):
                out[pos] = self._tail_view(coords)[tuple(local)]
                continue
            offsets = io.item_offsets(grid, local)
            cached = self._cached(nchunk)
            if cached is not None:
                out[pos] = cached[offsets]
            elif len(pos) <= _FEW_POINTS:
                for p, off in zip(pos.tolist(), offsets.tolist(), strict=True):
                    io.decode_range(nchunk, off, out[p:p + 1], False)
            else:
                buf = np.zeros(grid.chunk_items, dtype=self._dtype)
                decode_for(io, grid, nchunk, offsets, buf)
                out[pos] = buf[offsets]
        return out.reshape(ckey.out_shape)

    def iter_chunks(self) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        """``(region, items)`` for every chunk in C order over the grid; ``items`` is a
        fresh array of the chunk's valid shape (the tail's chunks included)."""
        grid = self.grid
        for nchunk in range(grid.nchunks):
            box = grid.chunk_slices(grid.chunk_coords(nchunk))
            axes = tuple(range(s.start, s.stop) for s in box)
            okey = OrthoKey(self._shape, axes, (), (), tuple(len(a) for a in axes))
            yield box, self.read(okey)

    def read_stored(self, nchunk: int) -> bytes:
        """Stored chunk ``nchunk`` as the layout holds it (compressed)."""
        self.settle()
        return bytes(self._layout.read_chunk(nchunk))

    def decode_stored(self, nchunk: int, out: np.ndarray) -> tuple[int, ...] | None:
        """Decode chunk ``nchunk`` whole into ``out`` (flat, ``grid.chunk_items`` items)
        in stored order, padding included, for computations that need no C order.

        Returns the shape of the blocks the items are laid out in, one after another,
        each in C order (the extended chunk shape when chunks are stored in C order);
        None, with ``out`` undefined, when the chunk is not stored whole (held in the
        decoded tail, truncated) or the array holds objects.
        """
        self.settle()
        grid = self.grid
        if self._objects is not None or (self._tail is not None and self._nleft and
                                         nchunk >= self._nfull * self.per_row):
            return None
        cached = self._cached(nchunk)
        if cached is not None:
            out[...] = cached.reshape(-1)
        elif self._io.decode_whole(nchunk, out) != out.size:
            return None
        return self._blocks if self._io.blocked(grid) else grid.ext_chunks

    # -- writing --------------------------------------------------------------------------

    def _mark_dirty(self) -> None:
        self._tail_dirty = True
        if not self._layout.in_memory:
            _unflushed.add(self)

    def _store_chunk(self, nchunk: int, raw: np.ndarray, grid: NDGrid,
                     data: bytes | None = None, values: np.ndarray | None = None,
                     digest: bytes | None = None) -> None:
        """Store a chunk given in stored order (``data``: already compressed, ``digest``
        its layout digest; ``values``: what listeners get, see :meth:`_listened`)."""
        self._remember(nchunk)
        if data is None:
            data = self._io.encode(raw, grid)
        self._cbytes += self._layout.write_chunk(nchunk, data, digest)
        if self._cached(nchunk) is not None:
            self._cache = None
        if nchunk < self._nfull * self.per_row and self._listeners:
            stamp = self._layout.chunk_stamp(nchunk)
            if values is None:
                values = self._listened(raw)
            for listener in self._listeners:
                listener.chunk_written(nchunk, values, stamp)

    def _ensure_tail(self) -> None:
        """Decode the last partial run of chunk rows into the tail buffer."""
        if self._tail is not None:
            return
        shape = (self._chunks[0], *self._shape[1:])
        tail, self._spare = self._spare, None
        if tail is None or tail.shape != shape:
            tail = np.zeros(shape, dtype=self._dtype)
        nleft = self._nleft
        if nleft:
            start = self._nfull * self._chunks[0]
            self.read(self.rows_key(range(start, start + nleft)), tail[:nleft])
        self._tail = tail

    def _flush_tail(self) -> None:
        """Write the tail's chunks (only its rows where the layout allows)."""
        if self._tail_dirty and self._nleft and self._tail is not None:
            nleft = self._nleft
            self._store_row(self._nfull, self._tail[:nleft], rows=nleft)
        self._tail_dirty = False

    def _release_big_tail(self) -> None:
        if self._tail is not None and self._tail.nbytes > _TAIL_BUDGET and self.per_row > 1:
            self._flush_tail()
            self._tail = None

    def append(self, arr: np.ndarray) -> None:
        """Append rows (already of the array's dtype and row shape) along the first axis.

        Only complete runs of chunk rows are compressed and stored; the rest
        waits in the tail until it fills or the array is flushed.  A run the tail
        completes is compressed on a worker thread while the caller goes on, and
        stored by the next call (see :mod:`.handoff`).
        """
        self.check_writable()
        n = len(arr)
        if n == 0:
            return
        # What earlier appends handed over is stored first, in order: all of it when
        # this append stores whole runs itself.
        self.settle(wait=n >= self._chunks[0])
        # A step of a larger operation stores its chunks now, before the operation's own.
        handing = self._undo is None
        if handing and self._spare is None:
            self._spare = self._handoff.spare()
        with self._guarded():
            self._append(arr, handing)

    def _append(self, arr: np.ndarray, handing: bool) -> None:
        n = len(arr)
        c0 = self._chunks[0]
        nleft = self._nleft
        if self._tail is not None and nleft + n < c0:  # the common case: fill the tail
            self._own_tail(nleft)
            self._tail[nleft:nleft + n] = arr
            self._shape = (self._shape[0] + n, *self._shape[1:])
            self._mark_dirty()
            return
        pos = 0
        if nleft:
            self._ensure_tail()
            assert self._tail is not None
            take = min(c0 - nleft, n)
            self._own_tail(nleft)
            self._tail[nleft:nleft + take] = arr[:take]
            pos = take
            self._shape = (self._shape[0] + take, *self._shape[1:])
            if nleft + take == c0:  # the tail just filled
                self._nfull += 1
                if not handing or n - take >= c0:  # runs follow, stored here: this first
                    self._store_row(self._nfull - 1, self._tail)
                else:
                    self._hand_off(self._nfull - 1, self._tail)
                # A new buffer for the next tail: the old one is what a rollback restores.
                self._tail, self._tail_dirty = None, False
            else:
                self._mark_dirty()
        runs = (n - pos) // c0
        if runs:
            self._shape = (self._shape[0] + runs * c0, *self._shape[1:])
            self._nfull += runs
            self._store_rows(self._nfull - runs, [arr[pos + r * c0:pos + (r + 1) * c0]
                                                  for r in range(runs)])
            pos += runs * c0
        if pos < n and not self._nleft and self.per_row > 1 and self._tail is None and \
                not self._handoff and self._io.is_fill(arr[pos:]) and \
                self._grow_lazily(self._shape[0] + n - pos):
            return  # a partial run of the fill value: special chunks, no decoded tail
        if pos < n:
            self._ensure_tail()
            assert self._tail is not None
            rest = n - pos
            self._own_tail(0)
            self._tail[:rest] = arr[pos:]
            self._shape = (self._shape[0] + rest, *self._shape[1:])
            self._mark_dirty()
        self._release_big_tail()

    def _chunk_for_update(self, nchunk: int, grid: NDGrid) -> np.ndarray:
        """A private copy of stored chunk ``nchunk`` in stored order, to modify."""
        cached = self._cached(nchunk)
        return cached.copy() if cached is not None else self._io.decoded(nchunk, grid)

    @atomic
    def write(self, okey: OrthoKey, values: np.ndarray) -> None:
        """Assign ``values`` (of the dtype, broadcastable to the key) to a selection."""
        self.check_writable()
        values = okey.expand_values(values)
        if okey.size == 0:
            return
        grid = self.grid
        in_tail = []
        # Whole chunks set to the fill value (a scalar, broadcast) become special chunks.
        fill = self._io.fill_chunk(grid) if not any(values.strides) and \
            self._io.is_fill(values) else None
        for piece in plan(grid, okey):
            if self._in_tail_run(piece.coords):
                in_tail.append(piece)  # applied last: writing the tail cannot fail
                continue
            if piece.full and fill is not None:
                self._store_chunk(piece.nchunk, self._dflt.reshape(1), grid, fill)
                continue
            raw = np.zeros(grid.chunk_items, dtype=self._dtype) if piece.full else \
                self._chunk_for_update(piece.nchunk, grid)
            self._io.scatter_piece(grid, piece, values, raw)
            self._store_chunk(piece.nchunk, raw, grid)
            self._cache = (piece.nchunk, raw)
        if in_tail:
            self._ensure_tail()
            self._own_tail(0)
            for piece in in_tail:
                scatter(piece, values, self._tail_view(piece.coords))
            self._mark_dirty()
        self._release_big_tail()

    @atomic
    def write_coords(self, ckey: CoordKey, values: np.ndarray) -> None:
        """Assign ``values`` (of the dtype, broadcast to the key's shape) at its coordinates."""
        self.check_writable()
        flat = np.broadcast_to(values, ckey.out_shape).reshape(-1)
        if ckey.size == 0:
            return
        grid = self.grid
        in_tail = []
        for nchunk, pos, local, coords in point_groups(grid, ckey):
            if self._in_tail_run(coords):
                in_tail.append((pos, local, coords))
                continue
            raw = self._chunk_for_update(nchunk, grid)
            raw[self._io.item_offsets(grid, local)] = flat[pos]
            self._store_chunk(nchunk, raw, grid)
            self._cache = (nchunk, raw)
        if in_tail:
            self._ensure_tail()
            self._own_tail(0)
            for pos, local, coords in in_tail:
                self._tail_view(coords)[tuple(local)] = flat[pos]
            self._mark_dirty()
        self._release_big_tail()

    # -- persistence ----------------------------------------------------------------------

    def flush(self, message: str | None = None) -> None:
        """Write the partial last run of chunks and record the sizes (as a version with
        ``message`` where the layout keeps versions); nothing in mode 'r'.

        In memory a partial chunk of rows stays decoded; the several chunks of a
        partial run of N-d chunks are compressed, so the decoded tail lives only
        between appends and the next flush.
        """
        if self._closed_by is not None:
            raise HandleClosedError(self._closed_by)
        if self._mode == "r" or self._closed:
            return
        self.settle()
        if self._objects is not None:
            self._flush_objects()
            return
        if self.per_row > 1:
            self._flush_tail()
            self._tail = None
        if self._layout.in_memory:
            return
        self._flush_tail()
        for listener in self._listeners:
            listener.committing(self)
        before = self._layout.version_id
        try:
            published = self._layout.commit(self.meta(), self._cbytes, message)
        except BaseException:
            if self._layout.version_id != before:  # published, then a later step failed
                self._committed()
            raise
        if published is not False:
            self._committed()  # published: a later failure cannot go back past it
        _unflushed.discard(self)

    def store_tail(self) -> None:
        """Store the partial last run of rows too (it stays decoded): what a version of an
        array in memory takes."""
        self.settle()
        self._flush_tail()

    @property
    def version_id(self) -> str | None:
        """The id of the version the committed state is (None: no versions)."""
        return self._layout.version_id

    @property
    def history(self) -> History:
        """Commits, tags, restores and reader refreshes of this array's versions."""
        return History(self, self._layout)

    def reload(self, meta: ArrayMeta, cbytes: int) -> None:
        """Take the layout's state as this engine's (the layout moved to another version):
        the shape and sizes of ``meta``, nothing kept decoded."""
        self._shape = tuple(meta.shape)
        self._nfull = self._shape[0] // self._chunks[0] if self._shape else 1
        self._tail, self._tail_dirty, self._cache = None, False, None
        self._cbytes, self._grid_memo, self._boxes = cbytes, None, None
        for listener in self._listeners:
            listener.chunks_dropped(0)
        if self._objects is None and self._nleft and self.per_row == 1:
            self._ensure_tail()

    def replace_objects(self, objects: np.ndarray, first: int) -> None:
        """Make ``objects`` (1-d, dtype object) the items of this object array; items from
        ``first`` on changed and are stored again (one pickle each) on flush."""
        self.check_writable()
        if self._objects is None:
            raise UnsupportedDTypeError(f"{self.describe()}: not an object array")
        self._objects = objects
        self._shape = (len(objects),)
        self._objects_from = first if self._objects_from is None else \
            min(self._objects_from, first)
        self._mark_dirty()

    def _flush_objects(self) -> None:
        first = self._objects_from
        if first is None or self._layout.in_memory:
            self._tail_dirty = False
            return
        assert self._objects is not None
        self._cbytes += self._layout.write_objects(self._objects, first, self._cparams)
        self._cbytes += self._layout.drop_chunks(len(self._objects))
        self._layout.commit(self.meta().replace(chunks=(1,)), self._cbytes)
        self._objects_from = None
        self._tail_dirty = False
        _unflushed.discard(self)

    def close(self) -> None:
        """Flush and release file handles."""
        if self._closed:
            return
        self.flush()
        self._layout.close()
        self._closed = True

    def release(self) -> None:
        """Release file handles without recording anything (parallel writers' handles)."""
        _unflushed.discard(self)
        self._tail_dirty = False
        self._layout.close()
        self._closed = True

    def on_takeover(self, close: Callable[[str], None]) -> None:
        """Have ``close(reason)`` called when a later ``mode='w'`` open of this process
        takes the dataset over (see :mod:`carray.stores.lock`); nothing without a lock."""
        if self._layout.write_lock is not None:
            self._layout.write_lock.on_takeover(close)

    def abandon(self, reason: str) -> None:
        """Close without recording anything, for a later ``mode='w'`` open of this process
        that takes the dataset over: unflushed changes are dropped, every later read or
        write raises :class:`HandleClosedError` saying ``reason``, and :meth:`close` does
        nothing more."""
        _unflushed.discard(self)
        self._handoff.restore(())
        self._tail = self._cache = self._boxes = self._objects = None
        self._tail_dirty, self._closed, self._closed_by = False, True, reason
        layout, self._layout, self._io = self._layout, Closed(reason), Closed(reason)  # type: ignore[assignment]
        with contextlib.suppress(Exception):  # what it would store is being replaced anyway
            layout.close()
        layout.release_lock()

    def drop_cache(self) -> None:
        self._cache = None

    def __del__(self) -> None:
        try:
            if not (self._tail_dirty or self._handoff) or self._closed:
                return
            if self._layout.remote and threading.current_thread() is not \
                    threading.main_thread():
                # A request from a finalizer on another thread can wait forever (on the
                # very thread that would answer it): say so rather than hang.
                warnings.warn(f"{self.describe()}: garbage-collected with unflushed writes "
                              "off the main thread; they are lost (flush() or use 'with')",
                              ResourceWarning, stacklevel=1)
                return
            self.flush()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    # -- parallel writers ---------------------------------------------------------------

    def unit_writer(self, shape: tuple[int, ...]) -> UnitWriter:
        """A writer of whole files (units) of chunks of this array at its final ``shape``,
        for parallel writers that each own some units (see :mod:`.units`)."""
        self.settle()
        return UnitWriter(self._layout, self._io, self.grid.resized(shape))

    def adopt(self, shape: tuple[int, ...], cbytes: int) -> None:
        """Record ``shape`` as committed once :class:`UnitWriter` calls have written every
        chunk it holds, then release this handle (reopen to use the array)."""
        self.settle()
        self._layout.adopt(self.meta().replace(shape=shape), cbytes)
        self.release()
