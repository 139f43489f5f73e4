"""Moving an array's chunks onto a new grid when an axis other than the first changes.

The chunk shape stays; the chunk grid gains or loses chunks along the resized
axes, so chunks get new numbers (C order over the grid).  A chunk whose
contents do not change is moved as compressed bytes; one that gains items
(an edge chunk of a grown axis) is decoded, given ``dflt`` there and
re-encoded; new chunks hold ``dflt`` only.

Moving happens in place, in an order that never overwrites a chunk still to be
read: shrinking renumbers chunks downwards (visit new numbers ascending),
growing upwards (visit them descending).  Layouts that commit atomically (the
superchunk layout, Blosc2 frames) make the whole change appear at the next
commit.
"""

from __future__ import annotations

import numpy as np

from carray.chunks.grid import NDGrid, deblock, reblock
from carray.chunks.io import ChunkIO
from carray.chunks.shapes import MAX_FILLED_CHUNKS
from carray.errors import ShapeError
from carray.layouts.base import Layout


def regrid(layout: Layout, io: ChunkIO, old: NDGrid, new: NDGrid, dflt: np.ndarray,
           grow: bool) -> int:
    """Renumber and rewrite the chunks of grid ``old`` as grid ``new`` (same chunk shape).

    Every axis of ``new`` is either all at least (``grow``) or all at most the
    size of ``old``'s.  Returns the change in stored bytes.
    """
    count = max(old.nchunks, new.nchunks)
    if count > MAX_FILLED_CHUNKS:  # refused before anything is written
        raise ShapeError(f"{layout.describe()}: resizing an axis other than the first "
                         f"rewrites every chunk, and {count} chunks are more than "
                         f"{MAX_FILLED_CHUNKS}; use larger chunks")
    filler: bytes | None = None

    def dflt_chunk() -> bytes:
        nonlocal filler
        if filler is None:
            filler = io.encode(np.full(new.chunk_items, dflt, dtype=io.dtype), new)
        return filler

    delta = 0
    old_n, new_n = old.nchunks, new.nchunks
    if grow:
        # Layouts take chunk numbers in order: claim the new ones first.
        for k in range(old_n, new_n):
            delta += layout.write_chunk(k, dflt_chunk())
    order = range(new_n - 1, -1, -1) if grow else range(new_n)
    for k in order:
        coords = new.chunk_coords(k)
        if any(c >= g for c, g in zip(coords, old.grid_shape, strict=True)):
            if k < old_n:
                delta += layout.write_chunk(k, dflt_chunk())
            continue
        ko = old.chunk_index(coords)
        old_valid, new_valid = old.valid_shape(coords), new.valid_shape(coords)
        if all(n <= o for n, o in zip(new_valid, old_valid, strict=True)):
            if ko != k:
                delta += layout.write_chunk(k, bytes(layout.read_chunk(ko)))
            continue
        delta += layout.write_chunk(k, io.encode(filled(io, old, ko, old_valid, dflt), old))
    if not grow and new_n < old_n:
        delta += layout.drop_chunks(new_n)
    return delta


def filled(io: ChunkIO, grid: NDGrid, nchunk: int, valid: tuple[int, ...],
           dflt: np.ndarray) -> np.ndarray:
    """Chunk ``nchunk`` decoded, with ``dflt`` wherever it holds no array item yet."""
    raw = io.decoded(nchunk, grid)
    blocked = io.blocked(grid)
    chunk = deblock(raw, grid).copy() if blocked else raw.reshape(grid.ext_chunks)
    outside = np.ones(grid.ext_chunks, dtype=bool)
    outside[tuple(slice(0, v) for v in valid)] = False
    chunk[outside] = dflt
    return reblock(chunk, grid) if blocked else chunk.reshape(-1)
