"""The chunk grid: chunks along every axis, each chunk split again into blocks.

This is the one piece of indexing math.  Every read and write of a carray --
``a[3]``, ``a[::7]``, ``a[mask]``, ``a[:, 5, 2:9]``, append, resize -- is a key
(normalised by :mod:`carray.chunks.keys`) mapped onto this grid, laid out the
Caterva / b2nd way (docs/formats/b2frame.md, "N-d layout"; the
shape arithmetic is :mod:`carray.chunks.geometry`'s):

* the array is tiled by chunks of ``chunks`` items per axis, numbered in C
  order over the chunk grid ``ceil(shape / chunks)``;
* a stored chunk spans ``chunks`` rounded **up** to a multiple of ``blocks``
  per axis (its *extended* shape); edge chunks are padded to that same size;
* inside a chunk the blocks are stored one after the other in C order, and
  each block is itself C-ordered.  One block is one Blosc block, so a read
  only has to decode the blocks its selection touches.

A bcolz-style array chunked by rows is the case where chunks span every axis
but the first and ``blocks == chunks``: the chunk is then plain C order and
Blosc's own byte blocks serve partial reads.

Nothing here does I/O or compression.  Default chunk and block shapes are :mod:`carray.chunks.shapes`'.  A reader walks the :class:`Piece`
objects :func:`plan` yields for an :class:`~carray.chunks.keys.OrthoKey`, decodes each
piece's chunk (or just ``piece.blocks`` of it) and :func:`gather`\\ s into the
output; a writer does the reverse with :func:`scatter` and :func:`reblock`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import product
from typing import Any

import numpy as np

from carray.chunks import geometry as geo
from carray.chunks.keys import AxisIndex, OrthoKey, _as_shape
from carray.chunks.shapes import MAX_DIM, check_nbytes
from carray.errors import ShapeError

__all__ = ["NDGrid", "Piece", "plan", "gather", "scatter", "deblock", "reblock",
           "gather_blocked", "scatter_blocked", "split_index", "outer_index",
           "c_run", "c_bounds", "MAX_DIM"]


# --------------------------------------------------------------------------- grid


@dataclass(frozen=True)
class NDGrid:
    """Shape, chunk shape and block shape of an N-d array, validated.

    Parameters
    ----------
    shape : tuple of int
        Array shape; zero-length axes are allowed (the grid then has no chunks).
    chunks : tuple of int
        Chunk shape, positive; may exceed ``shape`` (the chunk is then padded).
    blocks : tuple of int
        Block shape, positive and at most ``chunks`` per axis.
    itemsize : int
        Bytes per item.

    Raises
    ------
    ValueError
        Mismatched lengths, more than 64 axes, non-positive chunk/block sizes,
        negative shape, blocks larger than chunks, or a chunk over Blosc2's
        2 GiB limit.
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    blocks: tuple[int, ...]
    itemsize: int

    def __post_init__(self) -> None:
        # Normalise numpy ints and lists so equality and hashing behave.
        for name in ("shape", "chunks", "blocks"):
            object.__setattr__(self, name, _as_shape(name, getattr(self, name)))
        object.__setattr__(self, "itemsize", operator.index(self.itemsize))
        shape, chunks, blocks = self.shape, self.chunks, self.blocks
        if not len(shape) == len(chunks) == len(blocks):
            raise ValueError(f"shape {shape}, chunks {chunks} and blocks {blocks} must have "
                             "the same number of dimensions")
        if len(shape) > MAX_DIM:
            raise ValueError(f"{len(shape)} dimensions: arrays have at most {MAX_DIM}")
        if self.itemsize <= 0:
            raise ValueError(f"itemsize must be positive, got {self.itemsize}")
        for ax, (s, c, b) in enumerate(zip(shape, chunks, blocks, strict=True)):
            if s < 0:
                raise ValueError(f"shape {shape}: axis {ax} has negative length {s}")
            # b2nd tolerates 0-sized chunks on empty axes; we never write them,
            # and refusing them keeps every division below safe.
            if c <= 0 or b <= 0:
                raise ValueError(f"chunks {chunks}, blocks {blocks}: axis {ax} has chunk size "
                                 f"{c} and block size {b}, both must be > 0")
            if b > c:
                raise ValueError(f"blocks {blocks} larger than chunks {chunks} on axis {ax}")
        if math.prod(self.ext_chunks) * self.itemsize > geo.MAX_CHUNK_NBYTES:
            raise ShapeError(f"chunks of {self.ext_chunks} items of {self.itemsize} bytes "
                             f"exceed the Blosc limit of {geo.MAX_CHUNK_NBYTES} bytes")
        check_nbytes(shape, self.itemsize)

    def with_shape(self, shape: tuple[int, ...]) -> NDGrid:
        """This grid for an array of ``shape`` (as many axes): its chunks and blocks are
        valid already, so only the shape is checked (an array that grows makes one per
        append)."""
        shape = _as_shape("shape", shape)
        if len(shape) != len(self.chunks) or any(s < 0 for s in shape):
            raise ValueError(f"shape {shape} for a grid of chunks {self.chunks}")
        check_nbytes(shape, self.itemsize)
        grid = object.__new__(NDGrid)
        for name, value in (("shape", shape), ("chunks", self.chunks),
                            ("blocks", self.blocks), ("itemsize", self.itemsize)):
            object.__setattr__(grid, name, value)
        return grid

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @cached_property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return geo.chunks_in_array(self.shape, self.chunks)

    @cached_property
    def nchunks(self) -> int:
        """Number of stored chunks (0 when any axis is empty)."""
        return geo.nchunks_of(self.shape, self.chunks)

    @cached_property
    def ext_chunks(self) -> tuple[int, ...]:
        """Shape of a stored chunk: ``chunks`` rounded up to whole blocks."""
        return geo.ext_chunkshape(self.chunks, self.blocks)

    @cached_property
    def blocks_per_chunk(self) -> tuple[int, ...]:
        """Shape of the block grid inside one chunk."""
        return geo.blocks_in_chunk(self.chunks, self.blocks)

    @cached_property
    def nblocks(self) -> int:
        """Blocks in one chunk."""
        return math.prod(self.blocks_per_chunk)

    @cached_property
    def chunk_items(self) -> int:
        return math.prod(self.ext_chunks)

    @cached_property
    def chunk_nbytes(self) -> int:
        """Decoded bytes of one stored chunk, padding included."""
        return self.chunk_items * self.itemsize

    @cached_property
    def block_nbytes(self) -> int:
        """Decoded bytes of one block: the Blosc ``blocksize``."""
        return math.prod(self.blocks) * self.itemsize

    def chunk_coords(self, nchunk: int) -> tuple[int, ...]:
        return geo.chunk_coords(nchunk, self.grid_shape)

    def chunk_index(self, coords: Sequence[int]) -> int:
        return geo.chunk_index(coords, self.grid_shape)

    def chunk_slices(self, coords: Sequence[int]) -> tuple[slice, ...]:
        """The part of the array chunk ``coords`` holds (padding excluded)."""
        return tuple(slice(a, b) for a, b in geo.chunk_box(coords, self.shape, self.chunks))

    def valid_shape(self, coords: Sequence[int]) -> tuple[int, ...]:
        """Shape of the non-padding corner of chunk ``coords`` (its origin is 0)."""
        return tuple(b - a for a, b in geo.chunk_box(coords, self.shape, self.chunks))

    def block_slices(self, nblock: int) -> tuple[slice, ...]:
        """Where block ``nblock`` sits inside the extended chunk.

        Lets a reader decode one block straight into a C-ordered chunk buffer.
        """
        coords = geo.chunk_coords(nblock, self.blocks_per_chunk)
        return tuple(slice(c * b, (c + 1) * b) for c, b in zip(coords, self.blocks, strict=True))

    def resized(self, new_shape: Sequence[int]) -> NDGrid:
        """The same chunking over a new shape (same number of axes)."""
        new_shape = _as_shape("new_shape", new_shape)
        if len(new_shape) != self.ndim:
            raise ValueError(f"cannot resize a {self.ndim}-d grid to shape {new_shape}")
        return NDGrid(new_shape, self.chunks, self.blocks, self.itemsize)


# ------------------------------------------------------------------------- plan

class Piece:
    """What one chunk contributes to (or receives from) a selection.

    ``local`` and ``out`` hold per axis, in matching order, positions inside
    the extended chunk and positions in the selection (``OrthoKey.sel_shape``);
    each is a ``range`` or an intp array. ``blocks`` is the sorted linear
    indices (C order over ``NDGrid.blocks_per_chunk``) of the blocks holding at
    least one selected item, computed when first asked for (readers of C-ordered
    chunks never need it). ``full`` says the selection covers every non-padding
    item of the chunk, so a writer need not decode it first.
    """

    __slots__ = ("nchunk", "coords", "local", "out", "full", "_axis_blocks", "_per_chunk",
                 "_blocks")

    def __init__(self, nchunk: int, coords: tuple[int, ...], local: tuple[AxisIndex, ...],
                 out: tuple[AxisIndex, ...], full: bool, axis_blocks: tuple[np.ndarray, ...],
                 per_chunk: tuple[int, ...]) -> None:
        self.nchunk, self.coords, self.local, self.out, self.full = nchunk, coords, local, out, full
        self._axis_blocks, self._per_chunk = axis_blocks, per_chunk
        self._blocks: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(x) for x in self.local)

    @property
    def nblocks(self) -> int:
        """How many blocks the piece touches."""
        return math.prod(len(b) for b in self._axis_blocks)

    @property
    def blocks(self) -> np.ndarray:
        if self._blocks is None:
            # An outer "sum" of per-axis block coordinates, raveled in C order;
            # ascending per axis makes the flattened result ascending too.
            if self.nblocks <= 256:  # few: Python ints beat numpy's per-call cost
                few = [0]
                for b, nb in zip(self._axis_blocks, self._per_chunk, strict=True):
                    coords = b.tolist()
                    few = [x * nb + y for x in few for y in coords]
                self._blocks = np.array(few, dtype=np.intp)
            else:
                lin = np.zeros(1, dtype=np.intp)
                for b, nb in zip(self._axis_blocks, self._per_chunk, strict=True):
                    lin = (lin[:, None] * nb + b[None, :]).ravel()
                self._blocks = lin
        return self._blocks


@dataclass(frozen=True)
class _AxisGroup:
    # The part of one axis' selection that falls in chunk ``coord`` of that axis.
    coord: int
    local: AxisIndex
    out: AxisIndex
    blocks: np.ndarray  # sorted unique block coordinates touched along this axis
    full: bool


def _range_groups(sel: range, chunk: int, block: int, length: int) -> list[_AxisGroup]:
    if len(sel) == 0:
        return []
    n = len(sel)
    # Work on the ascending version; a descending range maps its output back.
    asc = sel if sel.step > 0 else sel[::-1]
    step, last = asc.step, asc[-1]
    groups = []
    pos, done = asc.start, 0
    while pos <= last:  # one turn per touched chunk
        coord = pos // chunk
        base = coord * chunk
        end = min(base + chunk, last + 1)
        count = (end - pos - 1) // step + 1
        lo = pos - base
        local = range(lo, lo + (count - 1) * step + 1, step)
        if sel.step > 0:
            out = range(done, done + count)
        else:
            # Ascending item j of ``asc`` is output n-1-j: read this chunk's part
            # backwards so the output side stays an ascending range.
            local = local[::-1]
            out = range(n - done - count, n - done)
        if step == 1:
            blocks = np.arange(lo // block, (lo + count - 1) // block + 1, dtype=np.intp)
        else:
            hit = np.arange(lo, lo + (count - 1) * step + 1, step, dtype=np.intp) // block
            blocks = hit[np.r_[True, hit[1:] != hit[:-1]]]  # ascending already
        valid = min(chunk, length - base)
        full = lo == 0 and count == valid and (step == 1 or count == 1)
        groups.append(_AxisGroup(coord, local, out, blocks, full))
        pos += count * step
        done += count
    return groups


def _array_groups(sel: np.ndarray, chunk: int, block: int, length: int) -> list[_AxisGroup]:
    if sel.size == 0:
        return []
    # Stable, so repeated indices keep their order (last write wins, as in numpy).
    order = np.argsort(sel, kind="stable").astype(np.intp, copy=False)
    srt = sel[order]
    coords = srt // chunk
    cuts = np.flatnonzero(np.diff(coords)) + 1
    los, his = np.r_[0, cuts], np.r_[cuts, srt.size]
    groups = []
    for lo, hi in zip(los.tolist(), his.tolist(), strict=True):
        coord = int(coords[lo])
        base = coord * chunk
        local = srt[lo:hi] - base  # sorted, so uniques are where the value changes
        bl = local // block
        blocks = bl[np.r_[True, bl[1:] != bl[:-1]]]
        distinct = 1 + int(np.count_nonzero(local[1:] != local[:-1]))
        full = distinct == min(chunk, length - base)
        groups.append(_AxisGroup(coord, local, order[lo:hi], blocks, full))
    return groups


def plan(grid: NDGrid, okey: OrthoKey) -> Iterator[Piece]:
    """Yield one :class:`Piece` per chunk the selection touches, in chunk (C) order.

    The per-axis split is computed once; the pieces are the cartesian product
    of those splits, so the cost is one Python step per touched chunk.
    """
    if okey.shape != grid.shape:
        raise ValueError(f"key made for shape {okey.shape}, grid has shape {grid.shape}")
    per_axis = []
    for sel, c, b, n in zip(okey.axes, grid.chunks, grid.blocks, grid.shape, strict=True):
        if isinstance(sel, range):
            groups = _range_groups(sel, c, b, n)
        else:
            groups = _array_groups(np.asarray(sel, dtype=np.intp), c, b, n)
        if not groups:
            return  # empty selection on one axis: nothing anywhere
        per_axis.append(groups)
    gshape, bpc = grid.grid_shape, grid.blocks_per_chunk
    for combo in product(*per_axis):
        coords = tuple(g.coord for g in combo)
        nchunk = 0
        for c, g in zip(coords, gshape, strict=True):
            nchunk = nchunk * g + c
        yield Piece(nchunk, coords, tuple(g.local for g in combo), tuple(g.out for g in combo),
                    all(g.full for g in combo), tuple(g.blocks for g in combo), bpc)


# ---------------------------------------------------------------- data movement

def _as_slice(r: range) -> slice:
    # range(5, -1, -1) must become slice(5, None, -1): a stop of -1 would wrap.
    return slice(r.start, r.stop if r.stop >= 0 else None, r.step)


def outer_index(parts: Sequence[AxisIndex]) -> tuple[Any, ...]:
    """An index tuple picking the outer product of ``parts`` (``np.ix_`` semantics).

    Ranges become slices (views, no index arrays). With one array numpy's own
    rules already are orthogonal; with several, every part becomes an array
    shaped to broadcast along its own axis, as ``np.ix_`` does.
    """
    arrays = sum(1 for p in parts if not isinstance(p, range))
    if arrays <= 1:
        return tuple(_as_slice(p) if isinstance(p, range) else p for p in parts)
    nd = len(parts)
    out = []
    for ax, p in enumerate(parts):
        a = np.arange(p.start, p.stop, p.step, dtype=np.intp) if isinstance(p, range) else p
        out.append(a.reshape((1,) * ax + (-1,) + (1,) * (nd - ax - 1)))
    return tuple(out)


def gather(piece: Piece, decoded_chunk_ext: np.ndarray, out: np.ndarray) -> None:
    """Copy a piece's items from a decoded chunk (C order, extended shape) into ``out``.

    ``out`` has the selection's ``sel_shape``.
    """
    out[outer_index(piece.out)] = decoded_chunk_ext[outer_index(piece.local)]


def scatter(piece: Piece, values: np.ndarray, chunk_ext: np.ndarray) -> None:
    """Copy a piece's items from ``values`` (of ``sel_shape``) into a chunk in place."""
    chunk_ext[outer_index(piece.local)] = values[outer_index(piece.out)]


def deblock(raw: np.ndarray, grid: NDGrid) -> np.ndarray:
    """A decoded chunk in Blosc's block order, as the chunk in C order (extended shape).

    ``raw`` is flat: either ``prod(ext_chunks)`` items of any dtype, or that
    many times ``itemsize`` bytes (a uint8 buffer), which is then viewed as
    ``V{itemsize}`` items for the caller to ``.view`` as its dtype. Returns a
    view when the block layout already is C order, else a copy.
    """
    raw = np.asarray(raw).reshape(-1)
    n = grid.chunk_items
    if raw.size != n:
        if raw.dtype.itemsize == 1 and raw.size == n * grid.itemsize and grid.itemsize > 1:
            raw = raw.view(np.dtype(f"V{grid.itemsize}"))
        else:
            raise ValueError(f"a chunk of {grid.ext_chunks} holds {n} items, got {raw.size}")
    ext = grid.ext_chunks
    if geo.blocked_is_c_order(ext, grid.blocks):
        return raw.reshape(ext)
    return geo.blocked_view(raw, ext, grid.blocks).reshape(ext)


def reblock(chunk_ext: np.ndarray, grid: NDGrid) -> np.ndarray:
    """A chunk in C order (extended shape) as a flat array in Blosc's block order."""
    if chunk_ext.shape != grid.ext_chunks:
        raise ValueError(f"chunk of shape {chunk_ext.shape}, expected {grid.ext_chunks}")
    return geo.to_blocked(chunk_ext, grid.blocks).reshape(-1)


def _as_array(part: AxisIndex) -> np.ndarray:
    if isinstance(part, range):
        return np.arange(part.start, part.stop, part.step, dtype=np.intp)
    return part


def split_index(parts: Sequence[AxisIndex], grid: NDGrid) -> tuple[np.ndarray, ...]:
    """An index into a block-ordered chunk viewed as ``blocks_per_chunk + blocks``.

    Blocks are stored one after another in C order, each C-ordered, so that 2N-d
    view needs no copy; position ``i`` on axis ``ax`` is block ``i // b``, offset
    ``i % b`` there.  The index picks the outer product of ``parts``.
    """
    nd = grid.ndim
    outer, inner = [], []
    for ax, (part, b) in enumerate(zip(parts, grid.blocks, strict=True)):
        q, r = np.divmod(_as_array(part), b)
        shape = (1,) * ax + (-1,) + (1,) * (nd - ax - 1)
        outer.append(q.reshape(shape))
        inner.append(r.reshape(shape))
    return tuple(outer) + tuple(inner)


def _block_box(parts: Sequence[AxisIndex],
               grid: NDGrid) -> tuple[tuple[slice, ...], list[int], int]:
    """The blocks a selection spans, as a box: ``(slices into the 2N-d view, offsets)``,
    plus the box's item count."""
    lows, view_key, items = [], [], 1
    for part, b in zip(parts, grid.blocks, strict=True):
        if isinstance(part, range):
            lo, hi = (part.start, part[-1]) if part.step > 0 else (part[-1], part.start)
        else:
            lo, hi = int(part.min()), int(part.max())
        qlo, qhi = lo // b, hi // b
        view_key.append(slice(qlo, qhi + 1))
        lows.append(qlo * b)
        items *= (qhi - qlo + 1) * b
    return tuple(view_key), lows, items


# One straight run along an axis: (block slice, offset slice, output slice, (blocks, width)).
_Run = tuple[slice, slice, slice, tuple[int, int]]
# Past this many straight copies per piece, copying the spanned blocks at once is cheaper.
_MAX_RUN_COPIES = 8


def _block_runs(piece: Piece, grid: NDGrid) -> list[list[_Run]] | None:
    """Per axis, the piece as straight runs of the 2N-d block view, or None.

    Possible when every axis selects an ascending unit-step range.  Such a
    range is a partial first block, whole blocks, and a partial last block;
    each is ``(block slice, offset slice, output slice, (blocks, width))``, a
    basic index of the view, so the piece copies with no index arrays and no
    intermediate box (one copy per combination of runs across the axes).
    """
    runs, copies = [], 1
    for part, out, b in zip(piece.local, piece.out, grid.blocks, strict=True):
        if not isinstance(part, range) or (len(part) > 1 and part.step != 1) or \
                not isinstance(out, range) or (len(out) > 1 and out.step != 1):
            return None
        start, stop, o = part.start, part.start + len(part), out.start
        segs = []
        while start < stop:
            q, r = divmod(start, b)
            if r or stop - start < b:  # a partial block
                end = min(stop, (q + 1) * b)
                segs.append((slice(q, q + 1), slice(r, r + end - start),
                             slice(o, o + end - start), (1, end - start)))
            else:  # whole blocks
                m = (stop - start) // b
                end = start + m * b
                segs.append((slice(q, q + m), slice(None), slice(o, o + m * b), (m, b)))
            o += end - start
            start = end
        runs.append(segs)
        copies *= len(segs)
        if copies > _MAX_RUN_COPIES:
            return None
    return runs


def _shifted(part: AxisIndex, offset: int) -> AxisIndex:
    if isinstance(part, range):
        return range(part.start - offset, part.stop - offset, part.step)
    return part - offset


def _dense(piece: Piece, box_items: int) -> bool:
    # Copying the spanned blocks into C order first pays off unless the
    # selection is sparse in them (then index the blocks directly).
    return box_items <= 4 * math.prod(piece.shape) + 4096


def gather_blocked(piece: Piece, raw: np.ndarray, grid: NDGrid, out: np.ndarray) -> None:
    """Like :func:`gather`, reading from a flat chunk still in block order.

    Only the blocks the piece touches need to hold decoded data.  A dense piece
    copies the box of blocks it spans into C order and slices that; a sparse
    one indexes the 2N-d block view directly.
    """
    nd = grid.ndim
    view = raw.reshape(grid.blocks_per_chunk + grid.blocks)
    runs = _block_runs(piece, grid)
    if runs is not None:
        order = geo.interleave(nd)
        for combo in product(*runs):
            dest = out[tuple(seg[2] for seg in combo)].reshape(
                tuple(x for seg in combo for x in seg[3]))
            dest[...] = view[tuple(seg[0] for seg in combo) +
                             tuple(seg[1] for seg in combo)].transpose(order)
        return
    box_key, lows, items = _block_box(piece.local, grid)
    if not _dense(piece, items):
        out[outer_index(piece.out)] = view[split_index(piece.local, grid)]
        return
    sub = view[box_key + (slice(None),) * nd]
    box = sub.transpose(geo.interleave(nd)).reshape(
        tuple(m * b for m, b in zip(sub.shape[:nd], grid.blocks, strict=True)))
    local = tuple(_shifted(p, lo) for p, lo in zip(piece.local, lows, strict=True))
    out[outer_index(piece.out)] = box[outer_index(local)]


def scatter_blocked(piece: Piece, values: np.ndarray, raw: np.ndarray, grid: NDGrid) -> None:
    """Like :func:`scatter`, writing into a flat chunk in block order."""
    nd = grid.ndim
    view = raw.reshape(grid.blocks_per_chunk + grid.blocks)
    box_key, lows, items = _block_box(piece.local, grid)
    if not _dense(piece, items):
        view[split_index(piece.local, grid)] = values[outer_index(piece.out)]
        return
    sub = view[box_key + (slice(None),) * nd]
    shape = tuple(m * b for m, b in zip(sub.shape[:nd], grid.blocks, strict=True))
    box = sub.transpose(geo.interleave(nd)).reshape(shape)
    local = tuple(_shifted(p, lo) for p, lo in zip(piece.local, lows, strict=True))
    box[outer_index(local)] = values[outer_index(piece.out)]
    split = tuple(x for m, b in zip(sub.shape[:nd], grid.blocks, strict=True) for x in (m, b))
    sub[...] = box.reshape(split).transpose(geo.deinterleave(nd))


def c_bounds(parts: Sequence[AxisIndex], shape: Sequence[int]) -> tuple[int, int]:
    """``[first, last + 1)``: the items of a C-ordered array of ``shape`` a selection spans.

    The selection is a cartesian product, so its first item in C order has the
    smallest position on every axis and its last the largest.
    """
    first = last = 0
    for part, n in zip(parts, shape, strict=True):
        if isinstance(part, range):
            lo, hi = (part.start, part[-1]) if part.step > 0 else (part[-1], part.start)
        else:
            lo, hi = int(part.min()), int(part.max())
        first, last = first * n + lo, last * n + hi
    return first, last + 1


def c_run(parts: Sequence[AxisIndex], shape: Sequence[int]) -> int | None:
    """Where a selection starts when it is one contiguous run of a C-ordered array.

    That is when every axis before the first one selecting several positions
    selects one, that axis steps by one, and every axis after it is selected
    whole.  Returns the first item's offset, or None.
    """
    start, free = 0, False
    for part, n in zip(parts, shape, strict=True):
        if not isinstance(part, range) or not len(part):
            return None
        if len(part) > 1 and part.step != 1:
            return None
        if free and not (part.start == 0 and len(part) == n):
            return None
        free = free or len(part) > 1
        start = start * n + part.start
    return start
