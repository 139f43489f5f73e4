"""Resizing an array: its length (chunks added or dropped at the end, fill runs kept
absent where the layout allows) and its other axes (chunks moved on a new grid).

:class:`Resizing` is the part of :class:`carray.engine.ArrayEngine` that does it, split
off along that seam; it works on the engine's own state (it is the same object).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from carray.engine.regrid import regrid
from carray.engine.txn import atomic

if TYPE_CHECKING:
    from carray.chunkio import ChunkIO
    from carray.engine.txn import ChunkListener
    from carray.grid import NDGrid
    from carray.keys import OrthoKey
    from carray.layouts.base import Layout


class Resizing:
    """``resize`` and ``clip`` of an :class:`~carray.engine.ArrayEngine`."""

    if TYPE_CHECKING:  # the engine's state and operations this part uses
        _layout: Layout
        _io: ChunkIO
        _shape: tuple[int, ...]
        _chunks: tuple[int, ...]
        _dtype: np.dtype
        _dflt: np.ndarray
        _nfull: int
        _tail: np.ndarray | None
        _tail_dirty: bool
        _cache: Any
        _cbytes: int
        _listeners: list[ChunkListener]
        @property
        def grid(self) -> NDGrid: ...

        @property
        def per_row(self) -> int: ...

        @property
        def _nleft(self) -> int: ...

        def describe(self) -> str: ...
        def mark_pending(self) -> None: ...

        def check_writable(self) -> None: ...
        def flush(self) -> None: ...
        def append(self, arr: np.ndarray) -> None: ...
        def read(self, okey: OrthoKey, out: np.ndarray | None = None) -> np.ndarray: ...
        def rows_key(self, rows: range) -> OrthoKey: ...
        def _remember(self, nchunk: int) -> None: ...
        def _mark_dirty(self) -> None: ...
        def _flush_tail(self) -> None: ...
        def _ensure_tail(self) -> None: ...
        def _in_tail_run(self, coords: tuple[int, ...]) -> bool: ...
        def transaction(self) -> Any: ...

    @atomic
    def resize(self, new: tuple[int, ...]) -> None:
        """Grow (with ``dflt``) or shrink to shape ``new`` (as many axes), then flush."""
        self.check_writable()
        if new[1:] != self._shape[1:]:
            self._resize_trailing(new[1:])
        if new[0] > self._shape[0]:
            self._grow_rows(new[0])
        elif new[0] < self._shape[0]:
            self._shrink_rows(new[0])
        self.flush()

    def _resize_trailing(self, new_trailing: tuple[int, ...]) -> None:
        if self._layout.rows_only:
            raise ValueError(f"{self.describe()}: the bcolz layout stores whole rows, so it "
                             "can only resize along the first axis; copy the array to another "
                             "format to change other axes")
        self._flush_tail()
        self._tail, self._cache = None, None
        old = self._shape
        middle = (old[0], *(min(o, n) for o, n in zip(old[1:], new_trailing, strict=True)))
        new = (old[0], *new_trailing)
        grid = self.grid
        if middle != old:
            self._cbytes += regrid(self._layout, self._io, grid, grid.resized(middle),
                                   self._dflt, grow=False)
            self._shape = middle
        if new != middle:
            self._cbytes += regrid(self._layout, self._io, grid.resized(middle),
                                   grid.resized(new), self._dflt, grow=True)
            self._shape = new

    def _grow_rows(self, nitems: int) -> None:
        """Append ``dflt`` rows up to ``nitems``: whole runs of chunks as one chunk stored
        many times (a special chunk, which layouts that can record without storing)."""
        c0 = self._chunks[0]
        if self._nleft:
            fill = min(c0 - self._nleft, nitems - self._shape[0])
            self.append(np.broadcast_to(self._dflt, (fill, *self._shape[1:])))
        rows = (nitems - self._shape[0]) // c0
        if rows:
            grid = self.grid
            # One chunk written many times: a special chunk where the layout takes them.
            chunk = self._io.fill_chunk(grid) or self._io.encode(
                np.full(grid.chunk_items, self._dflt, dtype=self._dtype), grid)
            full = np.full(1, self._dflt, dtype=self._dtype)  # listeners' range of values
            per_row = self.per_row
            for _ in range(rows):
                self._shape = (self._shape[0] + c0, *self._shape[1:])
                self._nfull += 1
                first = (self._nfull - 1) * per_row
                for nchunk in range(first, first + per_row):
                    self._remember(nchunk)
                    self._cbytes += self._layout.write_chunk(nchunk, chunk)
                    if self._listeners:
                        stamp = self._layout.chunk_stamp(nchunk)
                        for listener in self._listeners:
                            listener.chunk_written(nchunk, full, stamp)
        if nitems > self._shape[0] and not self._nleft and self._grow_lazily(nitems):
            return
        if nitems > self._shape[0]:
            self.append(np.broadcast_to(self._dflt, (nitems - self._shape[0],
                                                     *self._shape[1:])))

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

    def _shrink_rows(self, nitems: int) -> None:
        """Cut the first axis to ``nitems``, recording the shorter length before deleting
        chunks."""
        c0 = self._chunks[0]
        new_full, new_left = divmod(nitems, c0)
        if new_full >= self._nfull:
            self._shape = (nitems, *self._shape[1:])
            if self._tail is not None:
                self._mark_dirty()
            return
        per_row = self.per_row
        if new_left and (per_row == 1 or self._layout.in_memory):
            start = new_full * c0
            tail = np.zeros((c0, *self._shape[1:]), dtype=self._dtype)
            self.read(self.rows_key(range(start, nitems)), tail[:new_left])
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
            # Record the shorter length before deleting files, so a crash in between
            # leaves a readable array (readers ignore chunks past the length).  Layouts
            # that publish versions record both at once, at the flush that follows.
            self.flush()
        self._cbytes += self._layout.drop_chunks((new_full + keep) * per_row)
        for listener in self._listeners:
            listener.chunks_dropped(new_full * per_row)

    def clip(self, nitems: int) -> None:
        """Hide rows past ``nitems`` without writing anything (read-only table views)."""
        if nitems >= self._shape[0]:
            return
        self._shape = (nitems, *self._shape[1:])
        self._nfull, self._cache, self._tail = nitems // self._chunks[0], None, None
        if self._nleft and self.per_row == 1:
            self._ensure_tail()
