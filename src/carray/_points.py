"""Pointwise (numpy advanced) indexing of a carray: ``a.vindex[...]``, N-d masks, and
the named indexers ``a.vindex`` and ``a.oindex``.

The key is resolved to one coordinate array per axis (:func:`carray.keys.
coordinate_key`); the items are grouped by chunk, and each chunk decodes only
the blocks (or byte range) holding its items, or the items one by one when
there are few.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from carray.grid import NDGrid
from carray.keys import CoordKey, coordinate_key, orthogonal_key

if TYPE_CHECKING:
    from carray.array import carray

# At most this many items in one chunk are decoded one by one.
_FEW_POINTS = 8


def read_points(a: carray, ckey: CoordKey) -> np.ndarray:
    """Items at the coordinates of a :class:`CoordKey`, in its output shape."""
    out = np.empty(ckey.size, dtype=a._dtype)
    if ckey.size == 0:
        return out.reshape(ckey.out_shape)
    grid = a._grid()
    for nchunk, pos, local, coords in _point_groups(a, grid, ckey):
        if a._in_tail(coords):
            out[pos] = a._tail_view(coords)[tuple(local)]
            continue
        offsets = a._io.item_offsets(grid, local)
        if a._cache is not None and a._cache[0] == nchunk:
            out[pos] = a._cache[1][offsets]
        elif len(pos) <= _FEW_POINTS:
            for p, off in zip(pos.tolist(), offsets.tolist(), strict=True):
                a._io.decode_range(nchunk, off, out[p:p + 1], False)
        else:
            buf = np.zeros(grid.chunk_items, dtype=a._dtype)
            _decode_for(a, grid, nchunk, offsets, buf)
            out[pos] = buf[offsets]
    return out.reshape(ckey.out_shape)

def _decode_for(a: carray, grid: NDGrid, nchunk: int, offsets: np.ndarray,
                buf: np.ndarray) -> None:
    """Decode into ``buf`` at least the items of chunk ``nchunk`` at ``offsets``."""
    if a._io.blocked(grid):
        blocks = np.sort(offsets // math.prod(grid.blocks))
        blocks = blocks[np.r_[True, blocks[1:] != blocks[:-1]]]
        if len(blocks) > grid.nblocks // 2:
            a._io.decode_whole(nchunk, buf)
        else:
            a._io.decode_blocks(nchunk, blocks, buf, grid)
        return
    lo, hi = int(offsets.min()), int(offsets.max()) + 1
    if hi - lo > grid.chunk_items // 2:
        a._io.decode_whole(nchunk, buf)
    else:
        a._io.decode_range(nchunk, lo, buf[lo:hi], False)

def _point_groups(a: carray, grid: NDGrid, ckey: CoordKey):
    """``(nchunk, output positions, local coordinates, chunk coordinates)`` per chunk."""
    flat = [c.reshape(-1) for c in ckey.coords]
    cc = [x // c for x, c in zip(flat, a._chunks, strict=True)]
    nchunk = np.ravel_multi_index(tuple(cc), grid.grid_shape)
    order = np.argsort(nchunk, kind="stable")
    srt = nchunk[order]
    cuts = np.flatnonzero(np.diff(srt)) + 1
    for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(srt)].tolist(), strict=True):
        pos = order[lo:hi]
        coords = tuple(int(c[pos[0]]) for c in cc)
        local = [x[pos] - k * c for x, k, c in zip(flat, coords, a._chunks, strict=True)]
        yield int(srt[lo]), pos, local, coords


def write_points(a: carray, ckey: CoordKey, value: Any) -> None:
    """Assign ``value`` (broadcast to the key's output shape) at the key's coordinates."""
    values = np.broadcast_to(np.asarray(a._plain_key(value), dtype=a._dtype),
                             ckey.out_shape).reshape(-1)
    if ckey.size == 0:
        return
    grid = a._grid()
    for nchunk, pos, local, coords in _point_groups(a, grid, ckey):
        if coords[0] == a._nfull and a._nleft:
            a._ensure_tail()
            a._tail_view(coords)[tuple(local)] = values[pos]
            a._mark_dirty()
            continue
        raw = a._cache[1].copy() if a._cache is not None and \
            a._cache[0] == nchunk else a._io.decoded(nchunk, grid)
        raw[a._io.item_offsets(grid, local)] = values[pos]
        a._store_chunk(nchunk, raw, grid)
        a._cache = (nchunk, raw)
    a._release_big_tail()


class Indexer:
    """``a.oindex[...]`` / ``a.vindex[...]``: one indexing rule, named explicitly."""

    def __init__(self, array: Any, kind: str) -> None:
        self._array, self._kind = array, kind

    def __getitem__(self, key: Any) -> np.ndarray:
        a = self._array
        if self._kind == "v":
            out = read_points(a, coordinate_key(a._plain_key(key), a.shape))
        else:
            out = a._read_ortho(orthogonal_key(a._plain_key(key), a.shape))
        return out[()] if out.ndim == 0 else out

    def __setitem__(self, key: Any, value: Any) -> None:
        a = self._array
        a._writable()
        if self._kind == "v":
            write_points(a, coordinate_key(a._plain_key(key), a.shape), value)
        else:
            a._write_ortho(orthogonal_key(a._plain_key(key), a.shape), value)
