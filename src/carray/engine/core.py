"""The array engine: the one owner of an array's storage.

An engine holds an array's layout, its description (:mod:`.description`), its chunk
codec (:class:`ChunkIO`) and its :class:`~carray.engine.writer.Writer`, which owns the
state that changes (sizes, the decoded tail, the decode cache, chunks being
compressed, what an operation under way would put back).  The engine reads through
that state, checks that a change is allowed before handing it to the writer, and
flushes, closes and releases.  Containers (``carray``, table columns, string
columns) are facades over it; nothing else touches a layout.
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

from carray.chunks.grid import NDGrid, gather, gather_blocked, plan
from carray.chunks.io import ChunkIO, OpenChunk
from carray.chunks.keys import CoordKey, OrthoKey
from carray.chunks.shapes import result_array
from carray.codecs import parallel as _parallel
from carray.core.params import CParams
from carray.engine import replay
from carray.engine.boxes import BoxReader, is_box
from carray.engine.closed import Closed
from carray.engine.description import ArrayDescription
from carray.engine.history import array_history
from carray.engine.moves import ChunkSink, StoredChunks
from carray.engine.points import decode_for, point_groups
from carray.engine.txn import ChunkListener, atomic
from carray.engine.units import UnitWriter
from carray.engine.writer import Writer
from carray.errors import (
    ConflictError,
    HandleClosedError,
    IndexingError,
    NewerVersionError,
    ReadOnlyError,
    UnsupportedDTypeError,
)
from carray.layouts import create_layout, open_layout
from carray.layouts.base import ArrayMeta, Layout
from carray.stores import Store
from carray.versions import rebase as rebasing
from carray.versions.history import History

# Reads decoding at least this much per chunk spread the chunks over threads.
_THREADED_BYTES = 512 * 2**10
# At most this many items in one chunk are decoded one by one.
_FEW_POINTS = 8
# Times a commit is put on top of another writer's newer version before giving up.
_MAX_REBASES = 50

# Engines of stored arrays with unwritten changes, flushed at interpreter exit.
_unflushed: weakref.WeakSet[ArrayEngine] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    for engine in list(_unflushed):
        with contextlib.suppress(Exception):  # nothing can be reported at exit
            engine.flush()


class ArrayEngine:
    """Storage and operations of one N-d array (see the module docstring).

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
    objects : numpy.ndarray, optional
        The items of an object array (bcolz directories only).
    """

    def __init__(self, layout: Layout, meta: ArrayMeta, cbytes: int, mode: str,
                 objects: np.ndarray | None = None) -> None:
        self._layout = layout
        self._mode = mode
        self._d = ArrayDescription.of(meta)
        self._io = ChunkIO(layout, meta.dtype, self._d.blocks, meta.cparams, fill=self._d.dflt)
        self._w = Writer(layout, self._io, self._d, tuple(meta.shape), cbytes, objects)
        self._boxes: BoxReader | None = None  # made on the first read of a box
        #: Make every change a version at once (as ``flush`` does), not at the next flush.
        self.auto_flush = False
        self._replay: replay.Replay | None = None  # a rebase not applied whole yet
        self._closed = False
        self._closed_by: str | None = None  # why a takeover closed it (see abandon)
        self._readonly_reason: str | None = None  # why a reader refuses writes, if not its mode

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

    # -- what the array is ----------------------------------------------------------------

    @property
    def description(self) -> ArrayDescription:
        return self._d

    @property
    def dtype(self) -> np.dtype:
        return self._d.dtype

    @property
    def chunks(self) -> tuple[int, ...]:
        return self._d.chunks

    @property
    def blocks(self) -> tuple[int, ...] | None:
        return self._d.blocks

    @property
    def cparams(self) -> CParams:
        return self._d.cparams

    @property
    def dflt(self) -> np.ndarray:
        """The fill value, as a 0-d array of the dtype."""
        return self._d.dflt

    @property
    def expectedlen(self) -> int:
        return self._d.expectedlen

    @property
    def order(self) -> str:
        """'F' when the stored array is the transpose of the one users see, else 'C'."""
        return self._d.order

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def shape(self) -> tuple[int, ...]:
        return self._w.shape

    @property
    def declared_chunks(self) -> tuple[int, ...]:
        """The chunk shape to report: the stored file's own where it records 0 along an
        axis that is still empty (python-blosc2 does), else :attr:`chunks`."""
        declared = self._layout.declared_chunks()
        if declared is None:
            return self._d.chunks
        return tuple(d if d == 0 and n == 0 else c
                     for d, c, n in zip(declared, self._d.chunks, self.shape, strict=True))

    @property
    def grid(self) -> NDGrid:
        return self._w.grid

    @property
    def per_row(self) -> int:
        """Chunks in one run of chunk rows (1 when chunks span every axis but the first)."""
        return self._w.per_row

    @property
    def nfull(self) -> int:
        """Complete runs of chunk rows along the first axis."""
        return self._w.nfull

    @property
    def leftover(self) -> int:
        """Rows in the last, partial run of chunk rows."""
        return self._w.nleft

    @property
    def cbytes(self) -> int:
        """Bytes the array takes: stored chunks, plus tail rows not stored yet."""
        w = self._w
        w.settle()
        if not w.tail_unstored:
            return w.cbytes
        return w.cbytes + w.nleft * math.prod(w.shape[1:]) * self._d.dtype.itemsize

    @property
    def holds_tail(self) -> bool:
        """Whether the last partial run of rows is kept decoded in memory."""
        return self._w.tail is not None

    @property
    def objects(self) -> np.ndarray | None:
        """The items of a bcolz ``object`` array (read-only), else None."""
        return self._w.objects

    @property
    def unit_chunks(self) -> int:
        """Chunks per file a parallel writer can write alone (0: not in parallel)."""
        if self._layout.in_memory or (self._d.order == "F" and len(self.shape) > 1):
            return 0  # writers place blocks in the user's axis order, not the stored one
        return self._layout.unit_chunks

    @property
    def dirty(self) -> bool:
        """Whether there are changes not flushed yet."""
        return self._w.dirty

    def meta(self) -> ArrayMeta:
        """What the layout records about the array now."""
        return self._d.meta(self.shape)

    # -- its layout -------------------------------------------------------------------------

    @property
    def in_memory(self) -> bool:
        return self._layout.in_memory

    @property
    def remote(self) -> bool:
        return self._layout.remote

    @property
    def rows_only(self) -> bool:
        """Whether only the first axis can be resized (bcolz directories)."""
        return self._layout.rows_only

    @property
    def fsync(self) -> bool:
        return bool(getattr(self._layout, "fsync", True))

    def describe(self) -> str:
        """The layout, for messages."""
        return self._layout.describe()

    def layout_name(self) -> str:
        """The layout's class name without 'Layout' (``Superchunk``, ``Bcolz``, ...)."""
        return type(self._layout).__name__.removesuffix("Layout")

    def chunk_stamp(self, nchunk: int) -> tuple[int, int] | None:
        """Something that changes whenever chunk ``nchunk`` is rewritten (None in memory)."""
        return self._layout.chunk_stamp(nchunk)

    def chunk_path(self, nchunk: int) -> str | None:
        return self._layout.chunk_path(nchunk)

    def load_attrs(self) -> dict[str, Any]:
        return self._layout.load_attrs()

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        """New attributes: where the layout keeps versions, part of the next one."""
        self._layout.save_attrs(attrs)
        if self._layout.versioned and not self._layout.in_memory:
            self.mark_pending()
            if self.auto_flush:
                self.flush()

    def sidecar_names(self) -> list[str]:
        """Names of the small files kept beside the metadata (summaries, caches)."""
        return self._layout.sidecar_names()

    def load_sidecar(self, name: str) -> bytes | None:
        return self._layout.load_sidecar(name)

    def save_sidecar(self, name: str, data: bytes | None) -> None:
        """Write (or with None delete) a sidecar; caches only, never fsynced."""
        self._layout.save_sidecar(name, data)

    def chunk_fill(self, nchunk: int) -> np.ndarray | None:
        """The one value chunk ``nchunk`` holds, when its layout records it as a fill
        (special) chunk, known without decoding (summaries: min = max = it); else None."""
        w = self._w
        w.settle()
        if w.cached(nchunk) is not None or (
                w.tail is not None and w.in_tail_run(self.grid.chunk_coords(nchunk))):
            return None
        return self._io.fill_of(nchunk)

    # -- listeners and transactions -----------------------------------------------------------

    def add_listener(self, listener: ChunkListener) -> None:
        self._w.add_listener(listener)

    def mark_pending(self) -> None:
        """Something kept beside the array (a listener's state) waits for the next flush."""
        if self._mode != "r":
            self._w.mark_pending()
            self._note()

    def _note(self) -> None:
        """Have the changes flushed at exit if nothing flushes them before."""
        if self._w.dirty and not self._layout.in_memory:
            _unflushed.add(self)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything done inside happens whole or not at all: on an error the array's
        state is put back, and so are the chunks it had rewritten."""
        try:
            with self._w.transaction():
                yield
        finally:
            self._note()

    def check_writable(self) -> None:
        if self._closed_by is not None:
            raise HandleClosedError(self._closed_by)
        if self._mode == "r":
            if self._readonly_reason is not None:
                raise ReadOnlyError(self._readonly_reason)
            pinned = self._layout.pinned_version
            raise ReadOnlyError(f"{self.describe()}: opened in mode 'r'" if pinned is None
                                else f"{self.describe()}: version {pinned} is read-only (open "
                                "the newest with mode='a' to change the array)")
        if self._w.objects is not None and not (self._layout.in_memory
                                                or self._layout.rows_only):
            raise UnsupportedDTypeError(f"{self.describe()}: object arrays are stored only "
                                        "in bcolz directories")

    # -- reading --------------------------------------------------------------------------

    def read(self, okey: OrthoKey, out: np.ndarray | None = None) -> np.ndarray:
        """The items an orthogonal key selects, in its output shape (into ``out``)."""
        w = self._w
        w.settle()
        if out is None:
            out = result_array(okey.sel_shape, self._d.dtype)
        if okey.size == 0:
            return okey.finish(out)
        if len(w.shape) == 1 and self._read_run(okey.axes[0], out):
            return okey.finish(out)
        if self._read_box(okey, out):
            return okey.finish(out)
        grid, io = self.grid, self._io
        tail_row = w.nfull if w.tail is not None and w.nleft else -1
        pieces = []
        for piece in plan(grid, okey):
            cached = w.cached(piece.nchunk)
            if tail_row >= 0 and piece.coords[0] == tail_row:
                gather(piece, w.tail_view(piece.coords), out)
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
        w, grid = self._w, self.grid
        if w.objects is not None or self._layout.remote or not self._io.blocked(grid) \
                or not is_box(okey):
            return False
        if w.tail is not None and w.nleft and \
                okey.axes[0][-1] >= w.nfull * self._d.chunks[0]:
            return False  # reaches into the decoded tail
        reader = self._boxes
        if reader is None or reader.grid is not grid:
            reader = self._boxes = BoxReader(self._io, grid)
        reader.read(okey, out, w.cache, _THREADED_BYTES)
        return True

    def _read_run(self, rows: Any, out: np.ndarray) -> bool:
        """The short path of ``a[i:j]`` on a 1-d array: a run of items inside one stored
        chunk decoded straight into ``out``, without planning pieces (False: not such
        a read, nothing done)."""
        w = self._w
        if not isinstance(rows, range) or rows.step != 1 or not out.flags.c_contiguous:
            return False
        c0 = self._d.chunks[0]
        nchunk, start = divmod(rows.start, c0)
        if (rows.stop - 1) // c0 != nchunk or nchunk >= w.nfull or \
                w.cached(nchunk) is not None or w.objects is not None:
            return False
        self._io.decode_range(nchunk, start, out, len(rows) == c0)
        return True

    @property
    def ndim(self) -> int:
        return len(self._d.chunks)

    def read_index(self, key: tuple[Any, ...]) -> Any:
        """The item at integer coordinates ``key`` (one per axis, as users see them;
        negative counts from the end): ``a[i]``, ``a[i, j]``, the reads called most
        often, so without the general path's steps."""
        shape = self._w.shape
        if len(key) == 1:
            n, k = shape[0], key[0]
            if not -n <= k < n:
                raise IndexingError(f"index {int(k)} is out of bounds for axis 0 with size {n}")
            return self.read_item((int(k) % n,))
        flip = self._d.order == "F"
        index = []
        for ax, (k, n) in enumerate(zip(key, shape[::-1] if flip else shape, strict=True)):
            if not -n <= k < n:
                raise IndexingError(f"index {int(k)} is out of bounds for axis {ax} with "
                                    f"size {n}")
            index.append(int(k) % n)
        return self.read_item(tuple(index[::-1]) if flip else tuple(index))

    def read_item(self, index: tuple[int, ...]) -> Any:
        """One item, by non-negative in-bounds coordinates (the fast path of ``a[i]``)."""
        w = self._w
        w.settle()
        if w.objects is not None:
            return w.objects[index]
        c0 = self._d.chunks[0]
        row = index[0] - w.nfull * c0 if index else -1
        if w.tail is not None and row >= 0:
            return w.tail[(row, *index[1:])].copy()
        # Plain integer arithmetic: this path is a few microseconds, numpy calls add up.
        if len(index) == 1:
            nchunk, offset = divmod(index[0], c0)
        else:
            grid = self.grid
            coords = tuple(i // c for i, c in zip(index, self._d.chunks, strict=True))
            local = [i - x * c for i, x, c in zip(index, coords, self._d.chunks, strict=True)]
            nchunk = grid.chunk_index(coords)
            offset = self._io.item_offset(grid, local)
        cached = w.cached(nchunk)
        if cached is not None:
            return cached[offset].copy()
        return self._io.item(nchunk, offset)

    def read_rows(self, rows: range, out: np.ndarray | None = None) -> np.ndarray:
        """Whole rows ``rows`` (any step) as an array."""
        w = self._w
        if rows.step < 0:
            return self.read_rows(rows[::-1])[::-1]
        if w.objects is not None:
            return w.objects[rows.start:rows.stop:rows.step]
        return self.read(w.rows_key(rows), out)

    def read_coords(self, ckey: CoordKey) -> np.ndarray:
        """Items at the coordinates of a :class:`CoordKey`, in its output shape."""
        w = self._w
        w.settle()
        out = result_array((ckey.size,), self._d.dtype)
        if ckey.size == 0:
            return out.reshape(ckey.out_shape)
        grid, io = self.grid, self._io
        for nchunk, pos, local, coords in point_groups(grid, ckey):
            if w.tail is not None and w.in_tail_run(coords):
                out[pos] = w.tail_view(coords)[tuple(local)]
                continue
            offsets = io.item_offsets(grid, local)
            cached = w.cached(nchunk)
            if cached is not None:
                out[pos] = cached[offsets]
            elif len(pos) <= _FEW_POINTS:
                for p, off in zip(pos.tolist(), offsets.tolist(), strict=True):
                    io.decode_range(nchunk, off, out[p:p + 1], False)
            else:
                buf = np.zeros(grid.chunk_items, dtype=self._d.dtype)
                decode_for(io, grid, nchunk, offsets, buf)
                out[pos] = buf[offsets]
        return out.reshape(ckey.out_shape)

    def read_stored(self, nchunk: int) -> bytes:
        """Stored chunk ``nchunk`` as the layout holds it (compressed)."""
        self._w.settle()
        return bytes(self._layout.read_chunk(nchunk))

    def decode_stored(self, nchunk: int, out: np.ndarray) -> tuple[int, ...] | None:
        """Decode chunk ``nchunk`` whole into ``out`` (flat, ``grid.chunk_items`` items)
        in stored order, padding included, for computations that need no C order.

        Returns the shape of the blocks the items are laid out in, one after another,
        each in C order (the extended chunk shape when chunks are stored in C order);
        None, with ``out`` undefined, when the chunk is not stored whole (held in the
        decoded tail, truncated) or the array holds objects.
        """
        w = self._w
        w.settle()
        grid = self.grid
        if w.objects is not None or (w.tail is not None and w.nleft and
                                         nchunk >= w.nfull * self.per_row):
            return None
        cached = w.cached(nchunk)
        if cached is not None:
            out[...] = cached.reshape(-1)
        elif self._io.decode_whole(nchunk, out) != out.size:
            return None
        return self._d.blocks if self._io.blocked(grid) else grid.ext_chunks

    def open_chunk(self, nchunk: int, slot: str) -> OpenChunk:
        """Chunk ``nchunk`` held open for reading its items (stored order, padding
        included) a piece at a time on this thread, its stored bytes fetched and checked
        once into scratch buffer ``slot`` (see :mod:`carray.engine.opened`)."""
        w = self._w
        w.settle()
        grid = self.grid
        items, itemsize = grid.chunk_items, self._d.dtype.itemsize
        if w.objects is not None:
            raise UnsupportedDTypeError(f"{self.describe()}: object items have no chunks")
        if w.tail is not None and w.nleft and nchunk >= w.nfull * self.per_row:
            view = w.tail_view(grid.chunk_coords(nchunk))
            if self._io.blocked(grid):
                return OpenChunk(items, itemsize, values=self._io.stored_from_region(view, grid))
            ext = np.zeros(grid.ext_chunks, dtype=self._d.dtype)
            ext[tuple(slice(0, n) for n in view.shape)] = view
            return OpenChunk(items, itemsize, values=ext.reshape(-1))
        cached = w.cached(nchunk)
        if cached is not None:
            return OpenChunk(items, itemsize, values=cached.reshape(-1))
        return self._io.open(nchunk, items, slot)

    def tail_buffer(self) -> np.ndarray:
        """The decoded last partial run of chunk rows (``chunks[0]`` rows; those past
        :attr:`leftover` are not items), read-only: a snapshot once the array changes."""
        if not self.shape:
            raise ValueError("a 0-d array has no rows")
        self._w.ensure_tail()
        tail = self._w.tail
        assert tail is not None
        view = tail.view()
        view.flags.writeable = False
        return view

    def rows_key(self, rows: range) -> OrthoKey:
        """The selection of whole rows ``rows`` (positive step)."""
        return self._w.rows_key(rows)

    # -- writing --------------------------------------------------------------------------

    def append(self, arr: np.ndarray) -> None:
        """Append rows (already of the array's dtype and row shape) along the first axis
        (see :meth:`Writer.append`)."""
        self.check_writable()
        try:
            self._w.append(arr)
        finally:
            self._note()

    @atomic
    def write(self, okey: OrthoKey, values: np.ndarray) -> None:
        """Assign ``values`` (of the dtype, broadcastable to the key) to a selection."""
        self.check_writable()
        values = okey.expand_values(values)
        if okey.size:
            self._note_edit(okey)
            self._w.write(okey, values)

    @atomic
    def write_coords(self, ckey: CoordKey, values: np.ndarray) -> None:
        """Assign ``values`` (of the dtype, broadcast to the key's shape) at its coordinates."""
        self.check_writable()
        if ckey.size:
            self._note_edit(ckey)
            self._w.write_coords(ckey, np.broadcast_to(values, ckey.out_shape).reshape(-1))

    def _note_edit(self, key: OrthoKey | CoordKey) -> None:
        """Remember what a write changes in place (what a rebase replays)."""
        edits = self._layout.edits
        if edits is not None:
            edits.note_key(key)

    @atomic
    def resize(self, new: tuple[int, ...]) -> None:
        """Grow (with ``dflt``) or shrink to shape ``new`` (as many axes), then flush."""
        self.check_writable()
        w = self._w
        edits = self._layout.edits
        if edits is not None and (new[1:] != w.shape[1:] or new[0] < w.shape[0]):
            edits.reshaped = True
        if new[1:] != w.shape[1:]:
            if self._layout.rows_only:
                raise ValueError(f"{self.describe()}: the bcolz layout stores whole rows, so "
                                 "it can only resize along the first axis; copy the array to "
                                 "another format to change other axes")
            w.resize_trailing(new[1:])
        if new[0] > w.shape[0]:
            w.grow_rows(new[0])
        elif new[0] < w.shape[0]:
            w.shrink_rows(new[0], self.flush)
        if not self._layout.versioned or self.auto_flush:
            self.flush()  # formats without versions record sizes as they change

    def clip(self, nitems: int) -> None:
        """Hide rows past ``nitems`` without writing anything (read-only table views)."""
        self._w.clip(nitems)

    def settle(self, wait: bool = True) -> None:
        """Store the chunks appends handed to the compressing threads (see
        :meth:`Writer.settle`)."""
        self._w.settle(wait)

    def replace_objects(self, objects: np.ndarray, first: int) -> None:
        """Make ``objects`` (1-d, dtype object) the items of this object array; items from
        ``first`` on changed and are stored again (one pickle each) on flush."""
        self.check_writable()
        if self._w.objects is None:
            raise UnsupportedDTypeError(f"{self.describe()}: not an object array")
        self._w.replace_objects(objects, first)
        self._note()

    # -- persistence ----------------------------------------------------------------------

    def flush(self, message: str | None = None, *, final: bool = False) -> None:
        """Write the partial last run of chunks and record the sizes (as a version with
        ``message`` where the layout keeps versions); nothing in mode 'r'.  ``final``:
        the engine closes next.

        In memory a partial chunk of rows stays decoded; the several chunks of a
        partial run of N-d chunks are compressed, so the decoded tail lives only
        between appends and the next flush.
        """
        if self._closed_by is not None:
            raise HandleClosedError(self._closed_by)
        if self._mode == "r" or self._closed:
            return
        self._replay_pending()
        w = self._w
        w.prepare_flush()
        if w.objects is not None:
            w.flush_objects(self.meta().replace(chunks=(1,)))
        elif not self._layout.in_memory:
            w.flush_tail()
            for listener in w.listeners:
                listener.committing(self, final)
            self._commit(message)
        if not w.dirty:
            _unflushed.discard(self)

    def _commit(self, message: str | None) -> None:
        """Record the state; when another writer published meanwhile (object stores),
        put this writer's changes on top of its version and try again."""
        for _ in range(_MAX_REBASES):
            try:
                self._w.commit(self.meta(), message)
                return
            except NewerVersionError as newer:
                self.rebase(newer.newer)
                self._w.prepare_flush()
                self._w.flush_tail()
        raise ConflictError(f"{self.describe()}: other writers kept committing first "
                            f"({_MAX_REBASES} times); try again")

    # -- what a table's rebase asks of its columns' engines --------------------------------

    @property
    def member_name(self) -> str:
        """The array's name in its versioned dataset ("" for an array of its own)."""
        return str(getattr(self._layout, "member_name", ""))

    @property
    def pending_edits(self) -> rebasing.EditLog | None:
        """What was changed in place since the last commit (None: no versions)."""
        edits = self._layout.edits
        return edits if isinstance(edits, rebasing.EditLog) else None

    def chunks_between(self, old: Any, new: Any) -> set[int]:
        """The chunks whose records differ between two member states of this array."""
        return set(self._layout.chunks_between(old, new))

    def reset_to_newest(self) -> None:
        """Drop every change not committed and show the newest version."""
        self.check_writable()
        self._replay = None
        self._layout.versioned_dataset().reset_head()
        self.reset()

    def rebase(self, newer: Any) -> None:
        """Put the changes since the last commit on top of version ``newer`` (a manifest
        another writer published; see :mod:`.replay`), ready to commit."""
        self._replay = replay.capture(self, self._layout, newer)
        self._replay_pending()

    def _replay_pending(self) -> None:
        """Apply a rebase's replay (again: a failure part way keeps it for the next
        flush, which starts here)."""
        if self._replay is not None:
            self._replay.apply(self, self._layout)
            self._replay = None

    def store_tail(self) -> None:
        """Store the partial last run of rows too (it stays decoded): what a version of an
        array in memory takes."""
        self._w.settle()
        self._w.flush_tail()

    @property
    def version_id(self) -> str | None:
        """The id of the version the committed state is (None: no versions)."""
        return self._layout.version_id

    @property
    def history(self) -> History:
        """Commits, tags, restores and refreshes of this array's versions."""
        return array_history(self, self._layout)

    def reload(self, meta: ArrayMeta, cbytes: int) -> None:
        """Take the layout's state as this engine's (the layout moved to another version):
        the shape and sizes of ``meta``, nothing kept decoded."""
        self._boxes = None
        self._w.reload(tuple(meta.shape), cbytes)

    def reset(self) -> None:
        """Drop every change not committed: the engine shows its last version again (a
        failed transaction over several datasets, and a rebase, start here)."""
        self.check_writable()
        self._w.forget()  # chunks being compressed are dropped with the rest
        self.reload(*self._layout.reset())
        _unflushed.discard(self)

    def close(self) -> None:
        """Flush and release file handles."""
        if self._closed:
            return
        self.flush(final=True)
        self._layout.close()
        self._closed = True

    def release(self) -> None:
        """Release file handles without recording anything (parallel writers' handles)."""
        _unflushed.discard(self)
        self._w.forget()
        self._closed = True
        self._layout.discard()

    def on_takeover(self, close: Callable[[str], None]) -> None:
        """Have ``close(reason)`` called when a later ``mode='w'`` open of this process
        takes the dataset over (see :mod:`carray.stores.lock`); nothing without a lock."""
        if self._layout.write_lock is not None:
            self._layout.write_lock.on_takeover(close)

    def on_handover(self, yield_writing: Callable[[str], None]) -> None:
        """Have ``yield_writing(reason)`` called when a later writable open of this process
        takes writing over (bcolz directories only: see :mod:`carray.stores.lock`)."""
        if self._layout.write_lock is not None and self._layout.hands_over:
            self._layout.write_lock.on_handover(yield_writing)

    def refuse_writes(self, reason: str) -> None:
        """Make every later write raise :class:`ReadOnlyError` saying ``reason`` (a reader
        that was a writer until another handle took writing over)."""
        self._readonly_reason = reason

    def abandon(self, reason: str) -> None:
        """Close without recording anything, for a later ``mode='w'`` open of this process
        that takes the dataset over: unflushed changes are dropped, every later read or
        write raises :class:`HandleClosedError` saying ``reason``, and :meth:`close` does
        nothing more."""
        _unflushed.discard(self)
        self._w.forget(Closed(reason))
        self._boxes = None
        self._closed, self._closed_by = True, reason
        layout, self._layout, self._io = self._layout, Closed(reason), Closed(reason)  # type: ignore[assignment]
        with contextlib.suppress(Exception):  # what it would store is being replaced anyway
            layout.close()
        layout.release_lock()

    def drop_cache(self) -> None:
        self._w.drop_cache()

    def __del__(self) -> None:
        try:
            if self._closed or not self._w.dirty:
                return
            if self._layout.remote and threading.current_thread() is not \
                    threading.main_thread():
                # A request from a finalizer on another thread can wait forever (on the
                # very thread that would answer it): say so rather than hang.
                warnings.warn(f"{self.describe()}: garbage-collected with unflushed writes "
                              "off the main thread; they are lost (flush() or use 'with')",
                              ResourceWarning, stacklevel=1)
                return
            with _parallel.inline():  # a finalizer may run inside a pool's submit()
                self.flush()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    # -- moving chunks as bytes ---------------------------------------------------------

    def chunk_source(self) -> StoredChunks:
        """This array's chunks to copy elsewhere, as bytes or items (see :mod:`.moves`)."""
        if self._w.objects is not None:
            raise UnsupportedDTypeError(f"{self.describe()}: object items have no chunks")
        return StoredChunks(self._layout, self._io, self._w, self._d)

    def chunk_sink(self) -> ChunkSink:
        """Whole chunks appended after the stored rows (see :mod:`.moves`)."""
        self.check_writable()
        if self._w.objects is not None:
            raise UnsupportedDTypeError(f"{self.describe()}: object items have no chunks")
        return ChunkSink(self._layout, self._io, self._w, self._d, self._note)

    # -- parallel writers ---------------------------------------------------------------

    def unit_writer(self, shape: tuple[int, ...]) -> UnitWriter:
        """A writer of whole files (units) of chunks of this array at its final ``shape``,
        for parallel writers that each own some units (see :mod:`.units`)."""
        self._w.settle()
        return UnitWriter(self._layout, self._io, self.grid.resized(shape))

    def adopt(self, shape: tuple[int, ...], cbytes: int) -> None:
        """Record ``shape`` as committed once :class:`UnitWriter` calls have written every
        chunk it holds, then release this handle (reopen to use the array)."""
        self._w.settle()
        self._layout.adopt(self.meta().replace(shape=shape), cbytes)
        self.release()
