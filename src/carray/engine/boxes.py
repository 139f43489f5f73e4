"""Reads of boxes from chunks stored block by block: the short path of planes and boxes.

A *box* is a selection that picks one ascending run of positions on every axis
(ints and unit-step slices): ``a[i]``, ``a[:, j, :]``, ``a[2:12, 5:15, :10]``.
Inside a chunk stored block after block (see :mod:`carray.chunks.grid`) a box touches
a box of blocks, which in the chunk's block order is a few runs of
consecutive blocks.  Per chunk this module

* decodes just those blocks, one after another, into a compact buffer: one
  Blosc ``getitem`` call per run, and for files one ``pread`` spanning them
  (many runs -- a plane along a trailing axis -- take the general masked
  decode of :meth:`ChunkIO.decode_blocks` instead);
* copies them to the output with one strided numpy copy per straight stretch
  of every axis (a plane across a chunk is a single copy).

Each axis is split at chunk boundaries once per read, and what depends only
on the kind of chunk -- its runs of blocks and its stretches -- is a plan kept
between reads (a plane's chunks are of one or two kinds), so a chunk costs a
few Python steps around the two C calls.
"""

from __future__ import annotations

import math
from functools import partial
from itertools import product
from typing import NamedTuple, cast

import numpy as np

from carray.chunks import geometry as geo
from carray.chunks.grid import NDGrid
from carray.chunks.io import ChunkIO
from carray.chunks.keys import OrthoKey
from carray.codecs import parallel as _parallel

# One straight stretch of an axis: (blocks of the box, positions inside a block,
# positions in the output, (blocks, items per block)).
_Stretch = tuple[slice, slice, slice, tuple[int, int]]
# More runs of blocks than this per chunk decode with a block mask instead.
_MASK_RUNS = 24
# Past this many straight copies per chunk, the box is put in C order first.
_MAX_COPIES = 8
# Plans kept per reader (one per kind of chunk a box met).
_PLANS_KEPT = 512


class _Part(NamedTuple):
    """What one axis' run of positions picks inside one chunk along that axis."""

    offset: int  # the chunk's coordinate along the axis times the grid's stride there
    out: slice  # positions in the output
    sig: tuple[int, int, int, bool]  # (first block, positions in the box of blocks, whole)


def _stretches(lo: int, hi: int, block: int) -> list[_Stretch]:
    """Positions ``[lo, hi)`` of a box of blocks of ``block`` items as a partial first
    block, whole blocks and a partial last block (output positions from 0)."""
    found, o = [], 0
    while lo < hi:
        q, r = divmod(lo, block)
        if r or hi - lo < block:
            end = min(hi, (q + 1) * block)
            found.append((slice(q, q + 1), slice(r, r + end - lo), slice(o, o + end - lo),
                          (1, end - lo)))
        else:
            m = (hi - lo) // block
            end = lo + m * block
            found.append((slice(q, q + m), slice(None), slice(o, o + m * block), (m, block)))
        o += end - lo
        lo = end
    return found


def _parts(sel: range, chunk: int, block: int, per_chunk: int, stride: int) -> list[_Part]:
    """The run ``sel`` (ascending, unit step) split at chunk boundaries."""
    found = []
    pos, stop = sel.start, sel.start + len(sel)
    while pos < stop:
        coord = pos // chunk
        base = coord * chunk
        lo, hi = pos - base, min(base + chunk, stop) - base
        first, last = lo // block, (hi - 1) // block
        done, skip = pos - sel.start, first * block
        whole = first == 0 and last == per_chunk - 1
        found.append(_Part(coord * stride, slice(done, done + hi - lo),
                           (first, lo - skip, hi - skip, whole)))
        pos = base + hi
    return found


def is_box(okey: OrthoKey) -> bool:
    """Whether every axis of the key picks one ascending run of positions."""
    return bool(okey.axes) and all(
        isinstance(a, range) and (a.step == 1 or len(a) == 1) for a in okey.axes)


class _Plan(NamedTuple):
    """How to read one kind of chunk of a box (the same for every chunk whose parts
    have the same :attr:`_Part.sig`)."""

    starts: list[int]  # the runs of blocks touched: ``length`` blocks from each
    length: int
    shape: tuple[int, ...]  # the box of blocks, decoded: blocks per axis, then a block
    inbox: tuple[slice, ...]  # the box of blocks in the chunk's 2N-d block view
    # Straight copies (where in the chunk's share of the output, as what shape, from
    # where in the box); None: too many, the box is put in C order first.
    copies: list[tuple[tuple[slice, ...], tuple[int, ...], tuple[slice, ...]]] | None
    cshape: tuple[int, ...]  # the box in C order
    cindex: tuple[slice, ...]  # the selection in it

    @property
    def nblocks(self) -> int:
        return len(self.starts) * self.length

    def blocks(self) -> np.ndarray:
        """Every block, ascending (what :meth:`ChunkIO.decode_blocks` takes)."""
        return (np.asarray(self.starts, dtype=np.intp)[:, None] +
                np.arange(self.length, dtype=np.intp)).reshape(-1)


class BoxReader:
    """Reads boxes of one array whose chunks are stored block by block.

    Parameters
    ----------
    io : ChunkIO
        The array's chunk codec (blocked chunks: ``io.blocked(grid)``).
    grid : NDGrid
        The array's grid.
    """

    def __init__(self, io: ChunkIO, grid: NDGrid) -> None:
        self.io, self.grid = io, grid
        nd = grid.ndim
        # Blocks in the chunk's block order one step along each axis stands for.
        bpc = grid.blocks_per_chunk
        self._inner = tuple(math.prod(bpc[a + 1:]) for a in range(nd))
        self._gstride = tuple(math.prod(grid.grid_shape[a + 1:]) for a in range(nd))
        self._order = geo.interleave(nd)
        self._full_view = bpc + grid.blocks
        self._expect = (grid.chunk_nbytes, grid.block_nbytes)  # what our chunks hold
        self._plans: dict[tuple[tuple[int, int, int, bool], ...], _Plan] = {}

    def read(self, okey: OrthoKey, out: np.ndarray, cached: tuple[int, np.ndarray] | None,
             threaded_bytes: int) -> None:
        """Read box ``okey`` (see :func:`is_box`) into ``out`` (of its ``sel_shape``).

        ``cached`` is the engine's one decoded chunk (number, items in block order),
        used instead of its stored bytes; chunks are spread over threads when each
        decodes ``threaded_bytes`` or more.
        """
        grid = self.grid
        per_axis = [_parts(cast(range, sel), c, b, n, s) for sel, c, b, n, s in zip(
            okey.axes, grid.chunks, grid.blocks, grid.blocks_per_chunk, self._gstride,
            strict=True)]
        # Products of plain tuples: the chunks' numbers, output regions and kinds.
        offsets = product(*[[p.offset for p in ps] for ps in per_axis])
        regions = product(*[[p.out for p in ps] for ps in per_axis])
        sigs = product(*[[p.sig for p in ps] for ps in per_axis])
        plans = self._plans
        todo = []
        for offs, region, sig in zip(offsets, regions, sigs, strict=True):
            plan = plans.get(sig)
            if plan is None:
                if len(plans) >= _PLANS_KEPT:
                    plans.clear()
                plan = plans[sig] = self._plan(sig)
            todo.append((sum(offs), region, plan))
        cost = sum(min(t[2].nblocks * grid.block_nbytes, grid.chunk_nbytes) for t in todo)
        if len(todo) > 1 and cost >= threaded_bytes * len(todo):
            _parallel.run([partial(self._read_chunk, *t, out, cached) for t in todo])
        else:
            for nchunk, region, plan in todo:
                self._read_chunk(nchunk, region, plan, out, cached)

    def _plan(self, sig: tuple[tuple[int, int, int, bool], ...]) -> _Plan:
        """The plan of a chunk whose parts have signatures ``sig``.

        The runs of blocks: every axis after the last one not taken whole is, so each
        run spans that axis' blocks and all after it.
        """
        blocks, inner = self.grid.blocks, self._inner
        counts = tuple(-(-hi // b) for (_, _, hi, _), b in zip(sig, blocks, strict=True))
        k = len(sig) - 1
        while k > 0 and sig[k][3]:
            k -= 1
        starts = [sum(p[0] * inner[a] for a, p in enumerate(sig[:k + 1]))]
        for a in range(k):
            if counts[a] > 1:
                starts = [s + j * inner[a] for s in starts for j in range(counts[a])]
        stretches = [_stretches(lo, hi, b) for (_, lo, hi, _), b in zip(sig, blocks,
                                                                        strict=True)]
        copies = None
        if math.prod(len(st) for st in stretches) <= _MAX_COPIES:
            copies = [(tuple(s[2] for s in pieces), tuple(x for s in pieces for x in s[3]),
                       tuple(s[0] for s in pieces) + tuple(s[1] for s in pieces))
                      for pieces in product(*stretches)]
        return _Plan(starts, counts[k] * inner[k], counts + blocks,
                     tuple(slice(p[0], p[0] + m) for p, m in zip(sig, counts, strict=True)),
                     copies, tuple(m * b for m, b in zip(counts, blocks, strict=True)),
                     tuple(slice(lo, hi) for _, lo, hi, _ in sig))

    def _read_chunk(self, nchunk: int, region: tuple[slice, ...], plan: _Plan,
                    out: np.ndarray, cached: tuple[int, np.ndarray] | None) -> None:
        """Decode one chunk's share of the box and copy it into ``out[region]``."""
        box = self._decoded(nchunk, plan, cached)
        if box is None:  # nothing stored: the fill value
            value = self.io.fill_of(nchunk)
            assert value is not None
            out[region] = value
            return
        order, dest = self._order, out[region]
        if plan.copies is None:
            dest[...] = box.transpose(order).reshape(plan.cshape)[plan.cindex]
            return
        for where, shape, src in plan.copies:
            # Splitting the output's axes in (blocks, items) pairs is a view: no copy.
            dest[where].reshape(shape)[...] = box[src].transpose(order)

    def _decoded(self, nchunk: int, plan: _Plan,
                 cached: tuple[int, np.ndarray] | None) -> np.ndarray | None:
        """The box of blocks a chunk's share touches, decoded: an array of shape
        ``plan.shape`` (a view of a scratch buffer or of ``cached``); None when the
        chunk holds only the fill value."""
        grid, io = self.grid, self.io
        if cached is not None and cached[0] == nchunk:
            return cached[1].reshape(self._full_view)[plan.inbox]
        layout = io.layout
        if len(plan.starts) < _MASK_RUNS:
            got = None
            if layout.in_memory:
                got = _parallel.decoder().decode_runs(
                    layout.read_chunk(nchunk), plan.starts, plan.length, self._expect,
                    io.path(nchunk))
            elif layout.concurrent_reads:  # (the engine reads object stores its own way)
                reader, size = layout.chunk_reader(nchunk)
                got = _parallel.decoder().fetch_runs(reader, size, plan.starts, plan.length,
                                                     self._expect, io.path(nchunk))
            if got is not None:
                return got.view(io.dtype).reshape(plan.shape)
        if io.fill_of(nchunk) is not None:
            return None
        full = _parallel.scratch(grid.chunk_nbytes, "decoded")[:grid.chunk_nbytes]
        items = full.view(io.dtype)
        io.decode_blocks(nchunk, plan.blocks(), items, grid)
        return items.reshape(self._full_view)[plan.inbox]
