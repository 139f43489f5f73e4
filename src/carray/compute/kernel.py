"""The block kernel: decode a cache-sized piece of each operand, compute there.

A chunk decoded whole (half a megabyte of a table column, megabytes of an N-d
array) has left the CPU's fast caches by the time the next operation reads it
back, so a computation over whole chunks runs at the speed of main memory twice
over.  The kernel instead opens each operand's chunk once on a worker thread
(fetching its compressed bytes and checking their digest, see
:meth:`ArrayEngine.open_chunk <carray.engine.ArrayEngine.open_chunk>`), then
walks it a *piece* at a time: it decodes that piece of every operand into small
buffers of its own (the thread's decoding context releases the GIL), evaluates
the expression there and reduces or selects at once, so the values are used
while they are still in the core's L2 cache.

* :func:`select_chunk` runs a table query over one chunk of rows: pieces of the
  filter columns are decoded and evaluated; output columns are decoded only for
  pieces with matches, and only for the Blosc blocks holding them when there are
  few.
* :class:`PieceEval` evaluates an elementwise expression tree over one piece of
  N-d chunks in stored order, for reductions (:mod:`carray.compute.reduce`).

A piece is a whole number of Blosc blocks where the chunk has them, sized so
that the buffers of all operands together stay around :data:`PIECE_BYTES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from carray.codecs import parallel as _parallel

#: Bytes of operand values decoded at once per thread: well inside a core's L2 cache
#: (1 MiB here), large enough that the Python work per piece is a small share.
PIECE_BYTES = 384 * 2**10
#: Bytes per operand of the runs of pieces consumers that do not care where items sit
#: take at once (:meth:`StoredPlan.runs <carray.compute.stored.StoredPlan.runs>`): the
#: Python work per run holds the GIL, which the other workers then wait for.
RUN_BYTES = 1 << 20
# Fewer matches than one in this many rows of a piece: decode only their Blosc blocks.
_SPARSE_OUTPUT = 64

Evaluate = Callable[[dict[str, Any]], Any]


def piece_rows(itemsizes: list[int], rows: int, quantum: int = 1024,
               budget: int = PIECE_BYTES) -> int:
    """Rows per piece for operands of these item sizes: a multiple of ``quantum`` whose
    operands take about ``budget`` bytes, at most ``rows``."""
    per_row = max(sum(itemsizes), 1)
    n = max(quantum, budget // per_row // quantum * quantum)
    return min(n, rows)


def select_chunk(nchunk: int, chunklen: int, length: int, columns: Mapping[str, Any],
                 scalars: Mapping[str, Any], outputs: Mapping[str, Any],
                 evaluate: Evaluate, text: str = "") -> dict[str, np.ndarray]:
    """The rows of chunk ``nchunk`` (of ``chunklen`` rows) where an expression holds.

    Parameters
    ----------
    columns : mapping of str to carray
        The expression's column operands: 1-d carrays of ``chunklen``-row chunks.
    scalars : mapping
        The expression's constant operands.
    outputs : mapping of str to carray or None
        The columns to return (1-d carrays with the same chunks), None for the row
        numbers.
    evaluate : callable
        The expression's values from a dict of operands (piece-sized arrays).
    text : str
        The expression, for messages.

    Returns
    -------
    dict
        Per output, its values on the matching rows (an empty dict when none match).
    """
    lo = nchunk * chunklen
    rows = min(chunklen, length - lo)
    opened = {name: col.engine.open_chunk(nchunk, f"kernel.in{i}")
              for i, (name, col) in enumerate(columns.items())}
    # Rows of a table column chunk are few enough to stay in L2 whole: one piece per chunk
    # there, smaller pieces only for wide rows (the Python work per piece is the cost).
    step = piece_rows([c.dtype.itemsize for c in columns.values()], rows, budget=2**20)
    buffers = {name: _buffer(f"kernel.in{i}.piece", step, col.dtype)
               for i, (name, col) in enumerate(columns.items())}
    parts: dict[str, list[np.ndarray]] = {name: [] for name in outputs}
    out_chunks: dict[str, Any] = {}
    for start in range(0, rows, step):
        k = min(step, rows - start)
        env = dict(scalars)
        for name, chunk in opened.items():
            env[name] = chunk.read(start, buffers[name][:k])
        mask = np.asarray(evaluate(env))
        if mask.dtype != np.bool_:
            raise TypeError(f"{text!r} is not a boolean expression")
        if mask.shape != (k,):
            mask = np.broadcast_to(mask, (k,))
        count = int(np.count_nonzero(mask))
        if count == 0:
            continue
        positions = np.flatnonzero(mask)
        for j, (name, col) in enumerate(outputs.items()):
            if col is None:
                parts[name].append(positions + (lo + start))
            elif columns.get(name) is col:
                parts[name].append(env[name].take(positions))
            else:
                chunk = out_chunks.get(name)
                if chunk is None:
                    chunk = out_chunks[name] = col.engine.open_chunk(nchunk, f"kernel.out{j}")
                buf = _buffer(f"kernel.out{j}.piece", step, col.dtype)[:k]
                parts[name].append(_read_at(chunk, start, buf, positions, count))
    if not any(parts.values()):
        return {}
    return {name: p[0] if len(p) == 1 else np.concatenate(p) for name, p in parts.items()}


class Program:
    """An elementwise expression over carrays, compiled once into steps on numbered
    piece buffers, then run piece after piece on any thread.

    Every carray operand (leaf) is decoded into a buffer of its own at the start of a
    piece; each node writes its result over a buffer no longer needed (a child's
    result, a leaf past its last use) when the dtype matches, else into a new one,
    so a tree of a few nodes needs about as many buffers as it has leaves.
    """

    def __init__(self, src: Any, is_leaf: Callable[[Any], bool]) -> None:
        self.leaves: list[Any] = []
        self.dtypes: list[np.dtype] = []  # of every buffer
        self.steps: list[tuple[Any, tuple[Any, ...], int]] = []
        self._free: list[int] = []
        self._is_leaf = is_leaf
        self._left: dict[int, int] = {}  # reads of each leaf not compiled yet
        self._slot_of: dict[int, int] = {}
        for leaf in _walk_leaves(src, is_leaf):
            if id(leaf) not in self._slot_of:
                self.leaves.append(leaf)
                self._slot_of[id(leaf)] = self._new(leaf.dtype)
            self._left[id(leaf)] = self._left.get(id(leaf), 0) + 1
        self.result = self._node(src) if not is_leaf(src) else self._slot_of[id(src)]

    def _new(self, dtype: np.dtype) -> int:
        for i, slot in enumerate(self._free):
            if self.dtypes[slot] == dtype:
                return self._free.pop(i)
        self.dtypes.append(np.dtype(dtype))
        return len(self.dtypes) - 1

    def _node(self, node: Any) -> int:
        # Children first, while this node's own reads of leaves still count as pending:
        # a child may then overwrite only leaves no one reads after it.
        args: list[Any] = [self._node(a) if _is_node(a, self._is_leaf) else None
                           for a in node.args]
        freed = [slot for slot, a in zip(args, node.args, strict=True) if slot is not None]
        for i, a in enumerate(node.args):
            if self._is_leaf(a):
                args[i] = slot = self._slot_of[id(a)]
                self._left[id(a)] -= 1
                if self._left[id(a)] == 0:
                    freed.append(slot)
            elif args[i] is None:
                args[i] = _Const(a)
        dtype = np.dtype(node.dtype)
        # where() copies y first: of its operands only y's buffer may take the result.
        allowed = {args[2]} if node.func is np.where else set(freed)
        out = next((f for f in freed if f in allowed and self.dtypes[f] == dtype), None)
        if out is None:
            out = self._new(dtype)
        self._free.extend(f for f in dict.fromkeys(freed) if f != out)
        self.steps.append((node.func, tuple(args), out))
        return out

    def buffers(self, items: int, prefix: str) -> list[np.ndarray]:
        """This thread's buffers for pieces of ``items`` items."""
        return [_buffer(f"{prefix}{i}", items, dtype) for i, dtype in enumerate(self.dtypes)]

    def run(self, buffers: list[np.ndarray], chunks: list[Any], start: int) -> np.ndarray:
        """One piece: items ``start...`` of the open chunk of every leaf (``chunks``, in
        :attr:`leaves` order) decoded into its buffer, then the steps; returns the
        result's buffer (``buffers`` must all have the piece's length)."""
        slot_of = self._slot_of
        for leaf, chunk in zip(self.leaves, chunks, strict=True):
            chunk.read(start, buffers[slot_of[id(leaf)]])
        for func, args, out in self.steps:
            values = [buffers[a] if type(a) is int else a.value for a in args]
            if func is np.where:
                target = buffers[out]
                np.copyto(target, values[2], casting="unsafe")
                np.copyto(target, values[1], casting="unsafe", where=values[0])
            else:
                func(*values, out=buffers[out])
        return buffers[self.result]


class _Const:
    """A constant operand of a compiled step."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _is_node(value: Any, is_leaf: Callable[[Any], bool]) -> bool:
    return not is_leaf(value) and hasattr(value, "args") and hasattr(value, "func")


def _walk_leaves(node: Any, is_leaf: Callable[[Any], bool]) -> list[Any]:
    if is_leaf(node):
        return [node]
    out: list[Any] = []
    for a in getattr(node, "args", ()):
        if is_leaf(a) or hasattr(a, "args"):
            out.extend(_walk_leaves(a, is_leaf))
    return out


def _read_at(chunk: Any, start: int, buf: np.ndarray, positions: np.ndarray,
             count: int) -> np.ndarray:
    """The items at ``positions`` of the piece at ``start`` of an open chunk: the whole
    piece decoded, or only the Blosc blocks holding them when they are few."""
    per_block = chunk.block_items
    if count * _SPARSE_OUTPUT >= len(buf) or per_block is None:
        return chunk.read(start, buf).take(positions)
    blocks = np.unique((positions + start) // per_block)
    for b in blocks.tolist():
        first = max(b * per_block, start)
        stop = min((b + 1) * per_block, start + len(buf))
        chunk.read(first, buf[first - start:stop - start])
    return buf.take(positions)


def _buffer(slot: str, items: int, dtype: np.dtype) -> np.ndarray:
    """This thread's reusable buffer ``slot`` of ``items`` items of ``dtype``."""
    nbytes = items * dtype.itemsize
    return _parallel.scratch(nbytes, slot)[:nbytes].view(dtype)


def same_chunks(arrays: list[Any]) -> int | None:
    """The chunk length 1-d carrays share (None when they differ or one is not a plain
    numeric carray)."""
    lengths = set()
    for a in arrays:
        if a.ndim != 1 or a.dtype.hasobject or a.dtype.itemsize == 0:
            return None
        lengths.add(int(a.chunklen))
    return lengths.pop() if len(lengths) == 1 else None
