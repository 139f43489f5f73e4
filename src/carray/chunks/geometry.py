"""Chunk and block geometry of an N-d array stored the Caterva / b2nd way, as pure functions.

This is the core's geometry: :mod:`carray.chunks.grid` plans selections with it and
the Blosc2 frame reader and writer lay chunks out with it.  The facts it
relies on are in ``docs/formats/b2frame.md`` ("N-d layout"):

* per dimension a stored chunk spans ``chunkshape`` rounded **up to a multiple
  of the block shape** (its extended shape); edge chunks are padded to that size;
* chunks are numbered in C order over the grid ``ceil(shape / chunkshape)``;
* inside a chunk the blocks follow one another in C order over the block grid,
  each block itself C-ordered.  A decoded chunk is thus an array of shape
  ``blocks_in_chunk + blockshape`` (2N axes), and interleaving those axes as
  (b0, s0, b1, s1, ...) gives the chunk in plain C order;
* ``ndim == 0`` is one chunk of one item; any ``shape[i] == 0`` means no chunks;
* b2nd frames have at most 16 dimensions, caterva 0.7 frames at most 8.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

B2ND_MAX_DIM = 16
CATERVA_MAX_DIM = 8
#: The most dimensions any frame this package reads or writes may have.
MAX_DIM = B2ND_MAX_DIM
INT32_MAX = 2**31 - 1
#: A Blosc2 chunk holds at most this many bytes (int32 sizes, 32-byte header).
MAX_CHUNK_NBYTES = INT32_MAX - 32


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for ints, 0 when ``b`` is 0."""
    return -(-a // b) if b else 0


def ext_chunkshape(chunkshape: Sequence[int], blockshape: Sequence[int]) -> tuple[int, ...]:
    """Items a stored chunk spans per dimension: chunkshape rounded up to whole blocks."""
    return tuple(ceil_div(c, b) * b for c, b in zip(chunkshape, blockshape, strict=True))


def chunks_in_array(shape: Sequence[int], chunkshape: Sequence[int]) -> tuple[int, ...]:
    """Size of the chunk grid per dimension."""
    return tuple(ceil_div(s, c) for s, c in zip(shape, chunkshape, strict=True))


def blocks_in_chunk(chunkshape: Sequence[int], blockshape: Sequence[int]) -> tuple[int, ...]:
    """Size of the block grid inside one chunk, per dimension."""
    return tuple(ceil_div(c, b) for c, b in zip(chunkshape, blockshape, strict=True))


def check_geometry(shape: Sequence[int], chunkshape: Sequence[int],
                   blockshape: Sequence[int], itemsize: int,
                   max_dim: int = B2ND_MAX_DIM) -> str | None:
    """Why these shapes cannot describe a stored array, or None when they can.

    Kept free of exceptions so both the reader (which wraps the reason in a
    ``FormatError`` naming the file) and the writer (``ValueError``) share it.
    ``max_dim`` is 16 for b2nd and 8 for caterva frames.
    """
    ndim = len(shape)
    if not len(chunkshape) == len(blockshape) == ndim:
        return (f"shape {tuple(shape)}, chunks {tuple(chunkshape)} and blocks "
                f"{tuple(blockshape)} differ in length")
    if ndim > max_dim:
        return f"{ndim} dimensions, Blosc2 arrays have at most {max_dim}"
    if itemsize <= 0:
        return f"item size {itemsize} is not positive"
    for i, (s, c, b) in enumerate(zip(shape, chunkshape, blockshape, strict=True)):
        if s < 0 or c < 0 or b < 0:
            return f"negative size in dimension {i}: shape {s}, chunk {c}, block {b}"
        if s > 0 and (c == 0 or b == 0):
            return f"dimension {i} has {s} items but chunk {c} and block {b}"
        if c == 0 and b != 0:
            return f"dimension {i}: chunk size 0 with block size {b}"
        if b > c:
            return f"dimension {i}: block {b} larger than chunk {c}"
    ext = ext_chunkshape(chunkshape, blockshape)
    if math.prod(ext) * itemsize > MAX_CHUNK_NBYTES:
        return (f"chunks of {ext} items of {itemsize} bytes exceed the Blosc2 limit of "
                f"{MAX_CHUNK_NBYTES} bytes")
    return None


def nchunks_of(shape: Sequence[int], chunkshape: Sequence[int]) -> int:
    """Number of stored chunks (0 when the array is empty)."""
    if any(s == 0 for s in shape):
        return 0
    return math.prod(chunks_in_array(shape, chunkshape))


def chunk_coords(nchunk: int, grid: Sequence[int]) -> tuple[int, ...]:
    """N-d coordinate of linear chunk ``nchunk`` in the C-ordered grid."""
    return tuple(int(x) for x in np.unravel_index(nchunk, tuple(grid))) if grid else ()


def chunk_index(coords: Sequence[int], grid: Sequence[int]) -> int:
    """Linear (C-order) index of the chunk at ``coords``."""
    n = 0
    for c, g in zip(coords, grid, strict=True):
        n = n * g + c
    return n


def chunk_box(coords: Sequence[int], shape: Sequence[int],
              chunkshape: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """``(start, stop)`` per dimension of the array items a chunk holds (padding excluded)."""
    return tuple((c * cs, min((c + 1) * cs, s))
                 for c, s, cs in zip(coords, shape, chunkshape, strict=True))


def interleave(ndim: int) -> tuple[int, ...]:
    """Axis order taking ``(b0..bN-1, s0..sN-1)`` to ``(b0, s0, b1, s1, ...)``.

    Transposing a chunk viewed as ``blocks_in_chunk + blockshape`` by this
    order puts each block index next to the position inside the block.
    """
    return tuple(ax for i in range(ndim) for ax in (i, ndim + i))


def deinterleave(ndim: int) -> tuple[int, ...]:
    """The inverse of :func:`interleave`: ``(b0, s0, b1, s1, ...)`` to ``(b0.., s0..)``."""
    return tuple(range(0, 2 * ndim, 2)) + tuple(range(1, 2 * ndim, 2))


def split_shape(ext: Sequence[int], blockshape: Sequence[int]) -> tuple[int, ...]:
    """``ext`` split into (block index, position in block) pairs: (b0, s0, b1, s1, ...)."""
    return tuple(x for e, b in zip(ext, blockshape, strict=True) for x in (e // b, b))


def blocked_is_c_order(ext: Sequence[int], blockshape: Sequence[int]) -> bool:
    """True when a chunk's block layout is byte-for-byte the chunk in C order.

    That is the case when the only axes longer than one keep their relative
    order after interleaving, e.g. blocks that span the full trailing dimensions.
    """
    ndim = len(ext)
    sizes = list(blocks_in_chunk(ext, blockshape)) + list(blockshape)
    stored = [ax for ax in range(2 * ndim) if sizes[ax] > 1]
    wanted = [ax for ax in interleave(ndim) if sizes[ax] > 1]
    return stored == wanted


def blocked_view(buf: np.ndarray, ext: Sequence[int], blockshape: Sequence[int]) -> np.ndarray:
    """View a decoded chunk (flat, C-contiguous) as a (b0, s0, b1, s1, ...) array.

    Reshaping the result to ``ext`` (which copies) gives the chunk in C order;
    assigning it into a split view of the destination avoids that copy.
    """
    ndim = len(ext)
    bic = tuple(e // b for e, b in zip(ext, blockshape, strict=True))
    return buf.reshape(bic + tuple(blockshape)).transpose(interleave(ndim))


def to_blocked(chunk: np.ndarray, blockshape: Sequence[int]) -> np.ndarray:
    """Reorder a C-order chunk of the extended chunk shape into its stored block order.

    Returns a C-contiguous array (a copy unless the layout is already C order).
    """
    ndim = chunk.ndim
    split = chunk.reshape(split_shape(chunk.shape, blockshape))
    return np.ascontiguousarray(split.transpose(deinterleave(ndim)))


@dataclass(frozen=True)
class Geometry:
    """Shapes of a stored N-d array and the derived chunk/block grids."""

    shape: tuple[int, ...]
    chunkshape: tuple[int, ...]
    blockshape: tuple[int, ...]
    itemsize: int

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def extchunk(self) -> tuple[int, ...]:
        return ext_chunkshape(self.chunkshape, self.blockshape)

    @property
    def grid(self) -> tuple[int, ...]:
        return chunks_in_array(self.shape, self.chunkshape)

    @property
    def nchunks(self) -> int:
        return nchunks_of(self.shape, self.chunkshape)

    @property
    def chunk_nbytes(self) -> int:
        return math.prod(self.extchunk) * self.itemsize

    @property
    def block_nbytes(self) -> int:
        return math.prod(self.blockshape) * self.itemsize
