"""Chunks in stored order: reductions and elementwise expressions without putting chunks
in C order.

A stored chunk holds its blocks one after another, each block in C order, and
edge chunks are padded to whole blocks (:mod:`carray.chunks.grid`).  Putting a decoded
chunk back in C order costs about half as much again as decoding it, yet an
elementwise expression does not care where its items sit as long as every
operand has them in the same place, and a reduction over every axis does not
care about the order at all.  So when every carray operand has the same shape,
chunks and blocks, a chunk is

* decoded whole, in stored order, into this thread's scratch buffers
  (:func:`carray.codecs.parallel.scratch`: no allocation, no page faults per chunk);
* evaluated elementwise there, node by node, each result written over a buffer
  no longer needed (one pass over the chunk per node, no new arrays);
* handed to the reduction as a :class:`StoredChunk`, whose padding the reducer
  overwrites with a value that cannot change its result (0 for a sum, +inf for
  a minimum...) and whose 2N-d block view reduces along array axes too (axis
  ``k`` is view axes ``k`` and ``ndim + k``); only the small reduced result is
  put in C order.

Anything else (broadcast operands, numpy array operands, Fortran-order arrays,
a chunk held decoded in an array's tail) goes the general way
(:func:`carray.compute.evaluate.values_at`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.chunks import geometry as geo
from carray.codecs import parallel as _parallel
from carray.compute._types import is_carray
from carray.compute.expr import Expr, is_scalar
from carray.compute.kernel import PIECE_BYTES, RUN_BYTES, Program

# Item kinds evaluated and reduced in stored order (numbers and booleans).
_KINDS = "biufc"


@dataclass(frozen=True)
class StoredChunk:
    """One chunk's values in stored order.

    Attributes
    ----------
    flat : numpy.ndarray
        The values, flat (padding included), in a scratch buffer the caller may
        overwrite.
    blocks : tuple of int
        The shape of the blocks the values are laid out in.
    ext : tuple of int
        The chunk's extended shape (whole blocks).
    valid : tuple of int
        The shape of the chunk's part inside the array (the rest is padding).
    """

    flat: np.ndarray
    blocks: tuple[int, ...]
    ext: tuple[int, ...]
    valid: tuple[int, ...]

    @property
    def ndim(self) -> int:
        return len(self.ext)

    @property
    def padded(self) -> bool:
        """Whether the chunk has padding."""
        return self.valid != self.ext

    def view(self, arr: np.ndarray | None = None) -> np.ndarray:
        """``arr`` (default: the values), flat in stored order, as the 2N-d array
        ``blocks per chunk + block shape``."""
        arr = self.flat if arr is None else arr
        per_chunk = tuple(e // b for e, b in zip(self.ext, self.blocks, strict=True))
        return arr.reshape(per_chunk + self.blocks)

    def view_axes(self, axes: tuple[int, ...]) -> tuple[int, ...]:
        """The axes of the 2N-d view that array ``axes`` span."""
        return tuple(axes) + tuple(self.ndim + ax for ax in axes)

    def count(self, axes: tuple[int, ...]) -> int:
        """Items inside the array that reducing ``axes`` folds into one output cell."""
        return math.prod(self.valid[ax] for ax in axes)

    def fill_padding(self, value: Any, arr: np.ndarray | None = None) -> None:
        """Overwrite the padding of ``arr`` (default: the values; flat, stored order)
        with ``value``."""
        if not self.padded:
            return
        view = self.view(arr)
        nd = self.ndim
        for ax, (v, b) in enumerate(zip(self.valid, self.blocks, strict=True)):
            q, r = divmod(v, b)
            if view.shape[ax] > q + (r > 0):  # whole blocks past the array's end
                view[(slice(None),) * ax + (slice(q + (r > 0), None),)] = value
            if r:  # the part of the last block past the array's end
                view[(slice(None),) * ax + (slice(q, q + 1),) +
                     (slice(None),) * (nd - 1) + (slice(r, None),)] = value

    def to_c(self, reduced: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """The result of reducing the 2N-d view over ``view_axes(axes)`` with ``keepdims``,
        in C order with the shape a reduction of the chunk's valid part would have."""
        nd = self.ndim
        if len(axes) == nd:
            return np.reshape(reduced, (1,) * nd)
        per, inner = reduced.shape[:nd], reduced.shape[nd:]
        c = reduced.transpose(geo.interleave(nd)).reshape(
            tuple(p * i for p, i in zip(per, inner, strict=True)))
        return c[tuple(slice(None) if ax in axes else slice(0, v)
                       for ax, v in enumerate(self.valid))]


def padding_identity(op: str, dtype: np.dtype) -> Any:
    """A value that padding may hold without changing reduction ``op`` over ``dtype``."""
    if op in ("min", "max"):
        if dtype.kind == "b":
            return op == "min"
        if dtype.kind == "f":
            return np.inf if op == "min" else -np.inf
        info = np.iinfo(dtype)
        return info.max if op == "min" else info.min
    if op in ("prod", "all"):
        return 1
    # -0.0 is the float sum's true identity: x + -0.0 is x, -0.0 included.
    if dtype.kind == "c":
        return complex(-0.0, -0.0)
    return -0.0 if dtype.kind == "f" else 0


class StoredPlan:
    """How to produce the chunks of a carray or an expression in stored order: built by
    :func:`stored_plan` once per computation, then used from any thread."""

    def __init__(self, src: Any, leaves: list[Any]) -> None:
        self.src = src
        self.leaves = leaves
        self.grid = leaves[0].engine.grid
        engine, ext = leaves[0].engine, self.grid.ext_chunks
        self.blocked = stored_blocked(engine, self.grid)
        if self.blocked:
            self.piece_shape: tuple[int, ...] = tuple(engine.blocks)
        else:  # C order: runs of whole rows of the extended chunk, when they divide it
            row = math.prod(ext[1:]) * max(leaf.dtype.itemsize for leaf in leaves)
            rows = max(1, min(ext[0], PIECE_BYTES // max(row, 1)))
            self.piece_shape = (rows, *ext[1:]) if ext[0] % rows == 0 else ext
        self.program = Program(src, is_carray)
        # How often each carray is read in the tree: its buffer is free after the last.
        self.uses: dict[int, int] = {}
        for leaf in (src.leaves() if isinstance(src, Expr) else [src]):
            if is_carray(leaf):
                self.uses[id(leaf)] = self.uses.get(id(leaf), 0) + 1

    def chunk(self, coords: tuple[int, ...]) -> StoredChunk | None:
        """The values of the chunk at ``coords`` (of the chunk grid), or None when one of
        its operands' chunks is not stored whole (then read it the general way).

        The values live in this thread's scratch buffers until its next call.
        """
        grid = self.grid
        nchunk = grid.chunk_index(coords)
        buffers = _Buffers(grid.chunk_items)
        state = _Eval(nchunk, buffers, dict(self.uses))
        value = state.node(self.src)
        if value is None:
            return None
        flat, _ = value
        dtype = self.src.dtype
        if flat.dtype != dtype:
            flat = flat.astype(dtype)
        return StoredChunk(flat, state.blocks, grid.ext_chunks, grid.valid_shape(coords))


    def pieces(self, coords: tuple[int, ...]
               ) -> Iterator[tuple[tuple[int, ...], StoredChunk]]:
        """The chunk at ``coords`` a piece at a time (see :mod:`carray.compute.kernel`):
        its Blosc blocks (block after block), or runs of rows of a C-ordered chunk, each
        decoded from the chunk opened once into small buffers of this thread and evaluated
        there, as ``(piece coordinates in the chunk, values)``.  Pieces wholly in the
        padding are left out; a piece's padding is marked by its ``valid`` shape, as a
        chunk's is.  Each piece lives in this thread's buffers until the next is
        produced."""
        grid = self.grid
        nchunk = grid.chunk_index(coords)
        ext, valid = grid.ext_chunks, grid.valid_shape(coords)
        shape = self.piece_shape
        items = math.prod(shape)
        program = self.program
        chunks = [leaf.engine.open_chunk(nchunk, f"piece.read{i}")
                  for i, leaf in enumerate(program.leaves)]
        buffers = program.buffers(items, "piece")
        dtype = self.src.dtype
        per = tuple(e // b for e, b in zip(ext, shape, strict=True))
        whole = tuple(v // b for v, b in zip(valid, shape, strict=True))
        for k, bcoords in enumerate(np.ndindex(*per)):
            inside = shape if all(c < w for c, w in zip(bcoords, whole, strict=True)) \
                else _inside(bcoords, shape, valid)
            if min(inside) <= 0:
                continue
            flat = program.run(buffers, chunks, k * items)
            if flat.dtype != dtype:
                flat = flat.astype(dtype)
            yield bcoords, StoredChunk(flat, shape, shape, inside)


    def runs(self, coords: tuple[int, ...]) -> Iterator[tuple[int, StoredChunk]]:
        """The chunk at ``coords`` for consumers to whom the place of an item does not
        matter (reductions over every axis, copies in stored order): ``(offset of the
        first item, values)`` of runs of whole pieces, as many as keep every operand's
        buffer within :data:`RUN_BYTES` (fewer hand-overs of the GIL per chunk), each
        shaped as a box of its items; a chunk with padding goes piece by piece."""
        grid = self.grid
        ext, shape = grid.ext_chunks, self.piece_shape
        items = math.prod(shape)
        per = tuple(e // b for e, b in zip(ext, shape, strict=True))
        width = max(leaf.dtype.itemsize for leaf in self.program.leaves)
        run = max(1, RUN_BYTES // max(items * width, 1))
        if grid.valid_shape(coords) != ext or run == 1:
            for bcoords, piece in self.pieces(coords):
                yield int(np.ravel_multi_index(bcoords, per)) * items, piece
            return
        nchunk = grid.chunk_index(coords)
        program, dtype = self.program, self.src.dtype
        chunks = [leaf.engine.open_chunk(nchunk, f"piece.read{i}")
                  for i, leaf in enumerate(program.leaves)]
        full = program.buffers(run * items, "run")
        total = math.prod(per)
        for first in range(0, total, run):
            n = min(run, total - first)
            buffers = full if n == run else [b[:n * items] for b in full]
            flat = program.run(buffers, chunks, first * items)
            if flat.dtype != dtype:
                flat = flat.astype(dtype)
            box = (n * shape[0], *shape[1:])
            yield first * items, StoredChunk(flat, box, box, box)

    @property
    def stored_blocks(self) -> tuple[int, ...]:
        """The shape of the blocks chunks are stored in (the extended chunk shape when
        they are stored in C order)."""
        return self.piece_shape if self.blocked else self.grid.ext_chunks

    def chunk_in_pieces(self, coords: tuple[int, ...], out: np.ndarray) -> StoredChunk:
        """:meth:`chunk`, evaluated piece by piece (:meth:`pieces`) into ``out`` (flat,
        ``grid.chunk_items`` items of the result's dtype): the operands are never
        decoded whole.  Padding holds anything: :meth:`StoredChunk.fill_padding`."""
        ext = self.grid.ext_chunks
        for start, piece in self.runs(coords):
            out[start:start + piece.flat.size] = piece.flat
        return StoredChunk(out, self.stored_blocks, ext, self.grid.valid_shape(coords))


def _inside(bcoords: tuple[int, ...], shape: tuple[int, ...], valid: tuple[int, ...]
            ) -> tuple[int, ...]:
    """The shape of a piece's part inside the array (a size <= 0: none)."""
    return tuple(min(b, v - c * b) for c, b, v in zip(bcoords, shape, valid, strict=True))


def stored_blocked(engine: Any, grid: Any) -> bool:
    """Whether ``engine``'s chunks are stored block after block (not in C order)."""
    blocks = engine.blocks
    return blocks is not None and not geo.blocked_is_c_order(grid.ext_chunks, blocks)


def stored_plan(src: Any) -> StoredPlan | None:
    """A :class:`StoredPlan` for ``src`` (a carray or an expression), or None when its
    chunks cannot be computed in stored order (see the module docstring)."""
    if src.dtype.kind not in _KINDS or not src.shape or 0 in src.shape:
        return None
    leaves = []
    for leaf in (src.leaves() if isinstance(src, Expr) else [src]):
        if is_carray(leaf):
            leaves.append(leaf)
        elif not (is_scalar(leaf) or (isinstance(leaf, np.ndarray) and leaf.ndim == 0)):
            return None  # arrays would need putting in stored order first
    if not leaves:
        return None
    first = leaves[0].engine
    for leaf in leaves:
        engine = leaf.engine
        if tuple(leaf.shape) != tuple(src.shape) or engine.chunks != first.chunks or \
                engine.blocks != first.blocks or leaf.dtype.kind not in _KINDS or \
                (engine.order != "C" and leaf.ndim > 1) or engine.remote:
            return None
    if isinstance(src, Expr) and not _supported(src):
        return None
    return StoredPlan(src, leaves)


def _supported(expr: Expr) -> bool:
    """Whether every node is an elementwise numpy function of numbers or booleans."""
    if expr.dtype.kind not in _KINDS:
        return False
    if not (isinstance(expr.func, np.ufunc) and expr.func.nout == 1) and \
            expr.func is not np.where:
        return False
    return all(_supported(a) for a in expr.args if isinstance(a, Expr))


class _Buffers:
    """This thread's scratch buffers for one chunk (or piece), handed out by name and
    given back once their values are no longer needed."""

    def __init__(self, items: int, prefix: str = "stored") -> None:
        self.items = items
        self.prefix = prefix
        self.free: list[str] = []
        self.made = 0

    def take(self, dtype: np.dtype) -> tuple[np.ndarray, str]:
        name = self.free.pop() if self.free else f"{self.prefix}{self._new()}"
        nbytes = self.items * dtype.itemsize
        return _parallel.scratch(nbytes, name)[:nbytes].view(dtype), name

    def _new(self) -> int:
        self.made += 1
        return self.made - 1

    def give(self, name: str) -> None:
        self.free.append(name)


class _Eval:
    """One chunk of an expression evaluated node by node into scratch buffers.

    A node's value is ``(array, buffer name)``.  A node writes its result over an
    operand's buffer where it can: a child's result (no one else sees it), or a
    carray's values once no other node reads that carray (``uses`` counts the
    reads not done yet; a node's own reads count as done when it has computed).
    """

    def __init__(self, nchunk: int, buffers: _Buffers, uses: dict[int, int],
                 read: Callable[[Any, np.ndarray], tuple[int, ...] | None] | None = None
                 ) -> None:
        self.nchunk = nchunk
        self.buffers = buffers
        self.uses = uses
        # How a carray's values get into a buffer: its whole chunk, or a piece of it.
        self.read_leaf = read or (lambda leaf, arr: leaf.engine.decode_stored(nchunk, arr))
        self.read: dict[int, tuple[np.ndarray, str]] = {}
        self.blocks: tuple[int, ...] = ()

    def leaf(self, leaf: Any) -> tuple[np.ndarray, str] | None:
        """A carray's values in this chunk, decoded on first use."""
        key = id(leaf)
        if key not in self.read:
            arr, name = self.buffers.take(leaf.dtype)
            blocks = self.read_leaf(leaf, arr)
            if blocks is None or (self.blocks and tuple(blocks) != self.blocks):
                return None
            self.blocks = tuple(blocks)
            self.read[key] = (arr, name)
        return self.read[key]

    def node(self, node: Any) -> tuple[np.ndarray, str | None] | None:
        if is_carray(node):  # the whole expression is one carray
            return self.leaf(node)
        values: list[Any] = []
        owned: list[str | None] = []
        direct: dict[int, int] = {}  # the carrays this node reads itself, and how often
        for a in node.args:
            got: tuple[np.ndarray, str | None] | None = None
            if is_carray(a):
                got = self.leaf(a)
                direct[id(a)] = direct.get(id(a), 0) + 1
            elif isinstance(a, Expr):
                got = self.node(a)
            else:
                values.append(a)
                owned.append(None)
                continue
            if got is None:
                return None
            values.append(got[0])
            owned.append(got[1] if isinstance(a, Expr) else None)
        for i, a in enumerate(node.args):
            if is_carray(a) and self.uses[id(a)] == direct[id(a)]:
                owned[i] = self.read[id(a)][1]  # read by no other node
        dtype = node.dtype
        # where() copies y first, so of its operands only y's buffer may take the result.
        candidates = (2,) if node.func is np.where else range(len(values))
        reuse = next((i for i in candidates if owned[i] is not None and
                      values[i].dtype == dtype), None)
        if reuse is not None:
            # Elementwise: writing over an operand of the same dtype is safe.
            out, name = values[reuse], owned[reuse]
        else:
            out, name = self.buffers.take(dtype)
        if node.func is np.where:
            cond, x, y = values
            # Both operands cast to the result type, as numpy's where does.
            np.copyto(out, y, casting="unsafe")
            np.copyto(out, x, casting="unsafe", where=cond)
        else:
            node.func(*values, out=out)
        for key, count in direct.items():
            self.uses[key] -= count
        for other in set(owned):
            if other is not None and other != name:
                self.buffers.give(other)
        return out, name
