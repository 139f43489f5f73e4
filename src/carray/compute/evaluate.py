"""Chunk-by-chunk evaluation: which chunks to visit, running them on worker threads, and
writing an expression's values out (to numpy, or to a new carray).

Chunks are visited in C order over a chunk grid, a *wave* of a few chunks at a
time: the chunks of a wave are read and evaluated on worker threads
(:mod:`carray._parallel`; decoding and numpy release the GIL), then handed back
in order, so what is built from them is the same whatever the thread count, and
at most a wave of chunks is decoded at once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

from carray import _parallel
from carray.compute._types import array_type, is_carray
from carray.compute.expr import LazyExpr

# Chunks per worker in one wave: enough to even out their costs, few enough to bound memory.
_WAVE_PER_WORKER = 2
# Chunks smaller than this are evaluated on the caller's thread: handing them over costs more.
_THREADED_ITEMS = 1 << 15
# Target items per chunk when no carray operand tells the chunk shape.
_DEFAULT_CHUNK_ITEMS = 1 << 20

Region = tuple[slice, ...]


def carray_leaves(src: Any) -> list[Any]:
    """The carrays an expression (or a carray) reads."""
    if is_carray(src):
        return [src]
    return [leaf for leaf in src.leaves() if is_carray(leaf)]


def plan_chunks(src: Any) -> tuple[int, ...]:
    """The chunk shape to visit ``src`` by: its own, or the first carray operand's of the
    same shape; otherwise built axis by axis from the operands' chunks."""
    if is_carray(src):
        return tuple(src.chunks)
    shape = src.shape
    leaves = carray_leaves(src)
    for leaf in leaves:
        if tuple(leaf.shape) == shape:
            return tuple(leaf.chunks)
    chunks = list(shape)
    free = []
    for ax, n in enumerate(shape):
        sizes = [leaf.chunks[ax - len(shape) + leaf.ndim] for leaf in leaves
                 if ax - len(shape) + leaf.ndim >= 0 and
                 leaf.shape[ax - len(shape) + leaf.ndim] == n]
        if sizes:
            chunks[ax] = min(sizes)
        else:
            free.append(ax)
    for ax in free:  # axes no carray chunks: halve them, outermost first, to a modest size
        while math.prod(max(c, 1) for c in chunks) > _DEFAULT_CHUNK_ITEMS and chunks[ax] > 1:
            chunks[ax] = -(-chunks[ax] // 2)
    return tuple(max(c, 1) for c in chunks)


def grid_shape(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Chunks along every axis."""
    return tuple(-(-n // c) for n, c in zip(shape, chunks, strict=True))


def regions(shape: tuple[int, ...], chunks: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...],
                                                                               Region]]:
    """``(chunk coordinates, slices)`` of every chunk of the grid, in C order."""
    for coords in itertools.product(*(range(g) for g in grid_shape(shape, chunks))):
        yield coords, tuple(slice(c * s, min((c + 1) * s, n))
                            for c, s, n in zip(coords, chunks, shape, strict=True))


def waves(items: Iterable[Any], fn: Callable[[Any], Any], threaded: bool = True
          ) -> Iterator[tuple[Any, Any]]:
    """``(item, fn(item))`` in the order of ``items``, ``fn`` run on worker threads a wave
    of items at a time."""
    size = _WAVE_PER_WORKER * _parallel.workers() if threaded else 1
    it = iter(items)
    while True:
        batch = list(itertools.islice(it, size))
        if not batch:
            return
        results: list[Any] = [None] * len(batch)

        def task(i: int) -> None:
            results[i] = fn(batch[i])

        _parallel.run([partial(task, i) for i in range(len(batch))],
                      threads=threaded and len(batch) > 1)
        yield from zip(batch, results, strict=True)


def threaded_for(chunks: tuple[int, ...]) -> bool:
    """Whether chunks of this shape are worth sending to worker threads."""
    return math.prod(chunks) >= _THREADED_ITEMS


def values_at(src: Any, region: Region) -> np.ndarray:
    """The values of a carray or an expression in a box of slices."""
    if isinstance(src, LazyExpr):
        return src.evaluate(region)
    return np.asarray(src[region])


def to_numpy(expr: LazyExpr) -> np.ndarray:
    """All of an expression's values in a new numpy array, filled chunk by chunk."""
    out = np.empty(expr.shape, dtype=expr.dtype)
    if out.size == 0 or out.ndim == 0:
        return np.asarray(expr.evaluate(())) if out.ndim == 0 else out
    chunks = plan_chunks(expr)

    def fill(item: tuple[tuple[int, ...], Region]) -> None:
        out[item[1]] = expr.evaluate(item[1])

    for _ in waves(regions(expr.shape, chunks), fill, threaded_for(chunks)):
        pass
    return out


def _new_array_args(expr: LazyExpr, kwargs: dict[str, Any]) -> dict[str, Any]:
    args = dict(kwargs)
    if not ({"chunks", "chunklen"} & args.keys()) and args.get("format") != "bcolz":
        args["chunks"] = plan_chunks(expr)
        for leaf in carray_leaves(expr):
            if tuple(leaf.chunks) == args["chunks"] and leaf.blocks is not None:
                args.setdefault("blocks", leaf.blocks)
                break
    args.setdefault("expectedlen", max(expr.shape[0], 1))
    return args


def compute(expr: LazyExpr, **kwargs: Any) -> Any:
    """Write an expression's values into a new carray (see :meth:`LazyExpr.compute`)."""
    if expr.ndim == 0:
        raise ValueError("a 0-d expression has no carray form; use np.asarray(expr)")
    cls = array_type()
    out = cls(np.empty((0, *expr.shape[1:]), dtype=expr.dtype), **_new_array_args(expr, kwargs))
    shape, chunks = expr.shape, tuple(out.chunks)
    threaded = threaded_for(chunks)
    evaluate = partial(_evaluate_region, expr)
    if out.engine.per_row == 1:
        # Chunks span whole rows: append them in order, each compressed once.
        for _, block in waves(regions(shape, chunks), evaluate, threaded):
            out.append(block)
    else:
        # Build one run of chunk rows at a time, its chunks evaluated in parallel.
        for row in range(grid_shape(shape, chunks)[0]):
            rows = slice(row * chunks[0], min((row + 1) * chunks[0], shape[0]))
            slab = np.empty((rows.stop - rows.start, *shape[1:]), dtype=expr.dtype)
            todo = ((c, (rows, *r[1:])) for c, r in regions((rows.stop - rows.start,
                                                             *shape[1:]), chunks))
            for (_, region), block in waves(todo, evaluate, threaded):
                slab[(slice(None), *region[1:])] = block
            out.append(slab)
    out.flush()
    return out


def _evaluate_region(expr: LazyExpr, item: tuple[tuple[int, ...], Region]) -> np.ndarray:
    return np.ascontiguousarray(expr.evaluate(item[1]))
