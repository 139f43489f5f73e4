"""Pointwise selections on the chunk grid: coordinates grouped by chunk, and the least
decoding that reaches a chunk's items."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from carray.chunks.grid import NDGrid
from carray.chunks.io import ChunkIO
from carray.chunks.keys import CoordKey


def point_groups(grid: NDGrid, ckey: CoordKey) -> Iterator[
        tuple[int, np.ndarray, list[np.ndarray], tuple[int, ...]]]:
    """``(nchunk, output positions, chunk-local coordinates, chunk coordinates)`` per chunk."""
    flat = [c.reshape(-1) for c in ckey.coords]
    cc = [x // c for x, c in zip(flat, grid.chunks, strict=True)]
    nchunk = np.ravel_multi_index(tuple(cc), grid.grid_shape)
    order = np.argsort(nchunk, kind="stable")
    srt = nchunk[order]
    cuts = np.flatnonzero(np.diff(srt)) + 1
    for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(srt)].tolist(), strict=True):
        pos = order[lo:hi]
        coords = tuple(int(c[pos[0]]) for c in cc)
        local = [x[pos] - k * c for x, k, c in zip(flat, coords, grid.chunks, strict=True)]
        yield int(srt[lo]), pos, local, coords


def decode_for(io: ChunkIO, grid: NDGrid, nchunk: int, offsets: np.ndarray,
               buf: np.ndarray) -> None:
    """Decode into ``buf`` at least the items of chunk ``nchunk`` at stored ``offsets``."""
    if io.blocked(grid):
        blocks = np.sort(offsets // math.prod(grid.blocks))
        blocks = blocks[np.r_[True, blocks[1:] != blocks[:-1]]]
        if len(blocks) > grid.nblocks // 2:
            io.decode_whole(nchunk, buf)
        else:
            io.decode_blocks(nchunk, blocks, buf, grid)
        return
    lo, hi = int(offsets.min()), int(offsets.max()) + 1
    if hi - lo > grid.chunk_items // 2:
        io.decode_whole(nchunk, buf)
    else:
        io.decode_range(nchunk, lo, buf[lo:hi], False)
