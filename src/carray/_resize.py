"""Resizing a carray: its length (chunks added or dropped at the end) and its other
axes (chunks moved on a new grid).

The chunk shape stays; the chunk grid gains or loses chunks along the resized
axes, so chunks get new numbers (C order over the grid).  A chunk whose
contents do not change is moved as compressed bytes; one that gains items
(an edge chunk of a grown axis) is decoded, given ``dflt`` there and
re-encoded; new chunks hold ``dflt`` only.

Moving happens in place, in an order that never overwrites a chunk still to be
read: shrinking renumbers chunks downwards (visit new numbers ascending),
growing upwards (visit them descending), so a resize that shrinks some axes
and grows others does the two one after the other.  Layouts that commit
atomically (the superchunk layout, Blosc2 frames) make the whole change
appear at the next commit.
"""

from __future__ import annotations

import numpy as np

from carray.grid import NDGrid, deblock, reblock


def resize_trailing(a, new_trailing: tuple[int, ...]) -> None:
    """Give carray ``a`` the trailing shape ``new_trailing`` (its length unchanged)."""
    if a._layout.rows_only:
        raise ValueError(f"{a._rootdir}: the bcolz layout stores whole rows, so it can only "
                         "resize along the first axis; copy the array to another format "
                         "to change other axes")
    a._flush_tail()
    a._tail, a._cache = None, None
    old = a._shape
    middle = (old[0], *(min(o, n) for o, n in zip(old[1:], new_trailing, strict=True)))
    if middle != old:
        _regrid(a, old, middle, grow=False)
    new = (old[0], *new_trailing)
    if new != middle:
        _regrid(a, middle, new, grow=True)
    a._grid_memo = None


def _regrid(a, old_shape: tuple[int, ...], new_shape: tuple[int, ...], grow: bool) -> None:
    blocks = a._blocks or a._chunks
    itemsize = max(a._dtype.itemsize, 1)
    og = NDGrid(old_shape, a._chunks, blocks, itemsize)
    ng = NDGrid(new_shape, a._chunks, blocks, itemsize)
    layout, io = a._layout, a._io
    filler = None

    def dflt_chunk() -> bytes:
        nonlocal filler
        if filler is None:
            filler = io.encode(np.full(ng.chunk_items, a._dflt, dtype=a._dtype), ng)
        return filler

    old_n, new_n = og.nchunks, ng.nchunks
    if grow:
        # Layouts take chunk numbers in order: claim the new ones first.
        for k in range(old_n, new_n):
            a._cbytes += layout.write_chunk(k, dflt_chunk())
    order = range(new_n - 1, -1, -1) if grow else range(new_n)
    for k in order:
        coords = ng.chunk_coords(k)
        if any(c >= g for c, g in zip(coords, og.grid_shape, strict=True)):
            if k < old_n:
                a._cbytes += layout.write_chunk(k, dflt_chunk())
            continue
        ko = og.chunk_index(coords)
        old_valid, new_valid = og.valid_shape(coords), ng.valid_shape(coords)
        if all(n <= o for n, o in zip(new_valid, old_valid, strict=True)):
            if ko != k:
                a._cbytes += layout.write_chunk(k, bytes(layout.read_chunk(ko)))
            continue
        a._cbytes += layout.write_chunk(k, io.encode(_filled(a, og, ko, old_valid), og))
    if not grow and new_n < old_n:
        a._cbytes += layout.drop_chunks(new_n)
    a._shape = new_shape


def _filled(a, grid: NDGrid, nchunk: int, valid: tuple[int, ...]) -> np.ndarray:
    """Chunk ``nchunk`` decoded, with ``dflt`` wherever it holds no array item yet."""
    raw = a._io.decoded(nchunk, grid)
    blocked = a._io.blocked(grid)
    chunk = deblock(raw, grid).copy() if blocked else raw.reshape(grid.ext_chunks)
    outside = np.ones(grid.ext_chunks, dtype=bool)
    outside[tuple(slice(0, v) for v in valid)] = False
    chunk[outside] = a._dflt
    return reblock(chunk, grid) if blocked else chunk.reshape(-1)


def grow_rows(a, nitems: int) -> None:
    """Append ``dflt`` rows up to ``nitems``: whole runs of chunks as one chunk stored many times."""
    c0 = a._chunks[0]
    nleft = a._nleft
    if nleft:
        fill = min(c0 - nleft, nitems - a._shape[0])
        a.append(np.broadcast_to(a._dflt, (fill, *a._shape[1:])))
    rows = (nitems - a._shape[0]) // c0
    if rows:
        grid = a._grid()
        full = np.full(grid.chunk_items, a._dflt, dtype=a._dtype)
        chunk = a._io.encode(full, grid)  # one compressed chunk, written many times
        for _ in range(rows):
            a._set_length(a._shape[0] + c0)
            a._nfull += 1
            first = (a._nfull - 1) * a._per_row
            for nchunk in range(first, first + a._per_row):
                a._cbytes += a._layout.write_chunk(nchunk, chunk)
                if a._zones is not None:
                    a._zones.update(nchunk, full[:1], a._layout.chunk_stamp(nchunk))
    if nitems > a._shape[0]:
        a.append(np.broadcast_to(a._dflt, (nitems - a._shape[0],
                                                 *a._shape[1:])))

def shrink_rows(a, nitems: int) -> None:
    """Cut the first axis to ``nitems``, recording the shorter length before deleting chunks."""
    c0 = a._chunks[0]
    new_full, new_left = divmod(nitems, c0)
    if new_full < a._nfull:
        per_row = a._per_row
        if new_left and (per_row == 1 or a._layout.in_memory):
            start = new_full * c0
            tail = np.zeros((c0, *a._shape[1:]), dtype=a._dtype)
            a._read_ortho(a._row_key(range(start, nitems)), tail[:new_left])
            a._tail, a._tail_dirty = tail, True
        else:
            # A large tail is decoded again when next needed; its chunks stay.
            a._tail, a._tail_dirty = None, False
        a._cache = None
        # The chunks holding the new tail stay until a flush rewrites them.
        keep = 1 if new_left else 0
        a._nfull = new_full
        a._set_length(nitems)
        # Record the shorter length before deleting files, so a crash in between
        # leaves a readable array (readers ignore chunks past the length).
        a.flush()
        a._cbytes += a._layout.drop_chunks((new_full + keep) * per_row)
        if a._zones is not None:
            a._zones.truncate(new_full)
    else:
        a._set_length(nitems)
        if a._tail is not None:
            a._mark_dirty()
