"""Chunk-by-chunk evaluation: which chunks to visit, running them on worker threads, and
writing an expression's values out (to numpy, or to a new carray).

Chunks are visited in C order over a chunk grid: they are read and evaluated
on worker threads (:mod:`carray.codecs.parallel`; decoding and numpy release the
GIL) a few chunks ahead of the caller and handed back in order, so what is
built from them is the same whatever the thread count, and only those few
chunks are decoded at once.  Written to disk (:func:`compute`), chunks are also
compressed on the workers, so only compressed chunks wait for the caller to
write them, a file (unit) at a time.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

from carray.chunks import geometry as geo
from carray.codecs import parallel as _parallel
from carray.compute._types import array_type, is_carray
from carray.compute.expr import Expr
from carray.compute.stored import stored_plan
from carray.engine.chunkstats import KINDS as STATS_KINDS
from carray.engine.chunkstats import ChunkStats, of_values
from carray.engine.units import UnitWriter

# Chunks in flight per worker: enough to keep every worker busy while the caller takes
# its time to consume a result; results a chunk large (compute()) keep one, for memory.
_AHEAD = 2
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


def waves(items: Iterable[Any], fn: Callable[[Any], Any], threaded: bool = True,
          needed: Callable[[Any], bool] | None = None, ahead: int = _AHEAD
          ) -> Iterator[tuple[Any, Any]]:
    """``(item, fn(item))`` in the order of ``items``; items ``needed`` rejects give None.

    Threaded, ``fn`` runs on the worker threads, a window of a few items ahead of the
    caller, which consumes each result (merges it, writes it) while later ones are
    computed (:func:`carray.codecs.parallel.pipeline`), at most ``ahead`` items per worker:
    no thread waits for a whole wave of items to finish.
    """
    if not threaded or _parallel.workers() <= 1 or _parallel.in_worker():
        for item in items:
            yield item, fn(item) if needed is None or needed(item) else None
        return
    # Items not needed ride along with the next one needed, so none is dispatched.
    for skipped, item, result in _parallel.pipeline(partial(_task, fn),
                                                    _groups(items, needed),
                                                    window=ahead * _parallel.workers()):
        for other in skipped:
            yield other, None
        if item is not _END:
            yield item, result


_END = object()


def _groups(items: Iterable[Any], needed: Callable[[Any], bool] | None
            ) -> Iterator[tuple[list[Any], Any]]:
    """``(items not needed, next item needed)``; the last group ends with ``_END``."""
    skipped: list[Any] = []
    for item in items:
        if needed is None or needed(item):
            yield skipped, item
            skipped = []
        else:
            skipped.append(item)
    yield skipped, _END


def _task(fn: Callable[[Any], Any], group: tuple[list[Any], Any]) -> tuple[list[Any], Any, Any]:
    skipped, item = group
    return skipped, item, None if item is _END else fn(item)


def threaded_for(chunks: tuple[int, ...], src: Any) -> bool:
    """Whether the chunks of ``src`` (of this shape) are worth sending to worker threads.

    Not when they are small (handing them over costs more), nor when a carray operand
    lives in an object store: its reads already fetch many chunks at once on their own
    threads, which a read running on a worker would do one by one.
    """
    return math.prod(chunks) >= _THREADED_ITEMS and \
        not any(leaf.engine.remote for leaf in carray_leaves(src))


def values_at(src: Any, region: Region) -> np.ndarray:
    """The values of a carray or an expression in a box of slices."""
    if isinstance(src, Expr):
        return src.evaluate(region)
    return np.asarray(src[region])


def to_numpy(expr: Expr) -> np.ndarray:
    """All of an expression's values in a new numpy array, filled chunk by chunk."""
    out = np.empty(expr.shape, dtype=expr.dtype)
    if out.size == 0 or out.ndim == 0:
        return np.asarray(expr.evaluate(())) if out.ndim == 0 else out
    chunks = plan_chunks(expr)
    plan = stored_plan(expr)
    if plan is not None and (not plan.program.steps or plan.grid.chunks != chunks):
        plan = None  # a lone carray reads faster whole

    def fill(item: tuple[tuple[int, ...], Region]) -> None:
        coords, region = item
        if plan is None:
            out[region] = expr.evaluate(region)
            return
        # Piece by piece (carray.compute.kernel), each straight to its box of ``out``.
        for bcoords, piece in plan.pieces(coords):
            box = tuple(slice(r.start + c * b, r.start + c * b + n) for r, c, b, n in
                        zip(region, bcoords, piece.blocks, piece.valid, strict=True))
            out[box] = piece.flat.reshape(piece.blocks)[tuple(slice(0, n)
                                                              for n in piece.valid)]

    for _ in waves(regions(expr.shape, chunks), fill, threaded_for(chunks, expr)):
        pass
    return out


def _new_array_args(expr: Expr, kwargs: dict[str, Any]) -> dict[str, Any]:
    args = dict(kwargs)
    if not ({"chunks", "chunklen"} & args.keys()) and args.get("format") != "bcolz":
        args["chunks"] = plan_chunks(expr)
        for leaf in carray_leaves(expr):
            if tuple(leaf.chunks) == args["chunks"] and leaf.blocks is not None:
                args.setdefault("blocks", leaf.blocks)
                break
    args.setdefault("expectedlen", max(expr.shape[0], 1))
    return args


def compute(expr: Expr, **kwargs: Any) -> Any:
    """Write an expression's values into a new carray (see :meth:`LazyExpr.compute`).

    On disk, in a layout of files written whole (superchunk, bcolz), chunks are
    produced, compressed and written unit by unit (:func:`_write_units`) and the
    shape is recorded once all are written, so memory stays at a few chunks per
    worker thread and a failure leaves the new array empty.  Elsewhere (memory,
    ``.b2nd`` frames, Fortran order) the values go
    through the array's own writes (:func:`_write_rows`).
    """
    if expr.ndim == 0:
        raise ValueError("a 0-d expression has no carray form; use np.asarray(expr)")
    cls = array_type()
    out = cls(np.empty((0, *expr.shape[1:]), dtype=expr.dtype), **_new_array_args(expr, kwargs))
    if _streams(expr, out):
        return _write_units(expr, out)
    _write_rows(expr, out)
    out.flush()
    return out


def _streams(expr: Expr, out: Any) -> bool:
    """Whether ``out`` (new, empty) can take ``expr``'s values unit by unit."""
    engine = out.engine
    return out.rootdir is not None and not engine.remote and engine.unit_chunks > 0 and \
        out.dtype == expr.dtype and not out.dtype.hasobject and 0 not in expr.shape


def _write_units(expr: Expr, out: Any) -> Any:
    """Write every unit of ``out`` (see :func:`compute`), record the shape and return
    the array reopened; on failure the array is left as created (empty)."""
    engine = out.engine
    reopen = {**out.reopen_args(), "mode": "a"}
    try:
        writer = engine.unit_writer(expr.shape)
        grid = writer.grid
        size, nchunks = writer.unit_chunks, grid.nchunks
        encoded = partial(_encoded_chunk, ChunkValues(expr, writer), writer)
        items = regions(expr.shape, grid.chunks)
        if threaded_for(grid.chunks, expr):
            # One chunk queued beyond one per worker: every worker stays busy while this
            # thread writes, and only the compressed chunks wait here.
            results = _parallel.pipeline(encoded, items, window=_parallel.workers() + 1)
        else:
            results = map(encoded, items)
        cbytes, unit, held = 0, 0, []
        stats: dict[int, ChunkStats] = {}
        for nchunk, (data, chunk_stats) in enumerate(results):
            if chunk_stats is not None:
                stats[nchunk] = chunk_stats
            held.append(data)
            if len(held) == size or unit * size + len(held) == nchunks:
                cbytes += writer.write_encoded(unit, held)
                unit, held = unit + 1, []
        engine.adopt(expr.shape, cbytes)
    except BaseException:
        with contextlib.suppress(Exception):  # nothing recorded: the array stays empty
            engine.release()
        raise
    result = type(out)(**reopen)
    if stats:
        result.keep_chunk_stats(stats)
        result.flush()
    return result


def _encoded_chunk(values: ChunkValues, writer: UnitWriter,
                   item: tuple[tuple[int, ...], Region]) -> tuple[bytes, ChunkStats | None]:
    """A chunk's values produced and compressed, and their statistics (on a worker
    thread; see :mod:`carray.engine.chunkstats`)."""
    flat = values(*item)
    return writer.encode(flat), _stats_of(writer, flat, item[0])


def _stats_of(writer: UnitWriter, flat: np.ndarray, coords: tuple[int, ...]
              ) -> ChunkStats | None:
    """The statistics of a chunk's items inside the array, from the chunk as stored."""
    if flat.dtype.kind not in STATS_KINDS or not flat.dtype.isnative:
        return None
    grid = writer.grid
    ext, valid = grid.ext_chunks, grid.valid_shape(coords)
    if valid == ext:
        return of_values(flat)  # every item counts, in any order
    blocks = writer.stored_blocks
    if blocks == ext:
        items = flat.reshape((-1, *ext[1:]))
    else:  # put in C order in this thread's buffers (kept: no new memory per chunk)
        items = _scratch_like(ext, flat.dtype, "stats.ext")
        np.copyto(items.reshape(geo.split_shape(ext, blocks)),
                  geo.blocked_view(flat, ext, blocks))
    inside = items[tuple(slice(0, n) for n in valid)]
    packed = _scratch_like(inside.shape, flat.dtype, "stats.valid")
    np.copyto(packed, inside)
    return of_values(packed)


class ChunkValues:
    """Produces the values of an expression's chunks as a new array stores them: in
    stored order, padding included (unless the layout truncates the chunk).

    Where every carray operand is stored as the new array is (same chunks and blocks:
    :func:`carray.compute.stored.stored_plan`), a chunk is evaluated in stored order
    in the worker thread's scratch buffers, with no reordering before compression;
    otherwise its box of values is evaluated in C order and put in stored order.

    Parameters
    ----------
    expr : Expr
        The expression, of the new array's shape and dtype.
    writer : UnitWriter
        The new array's writer (its grid, layout of chunks and padding).
    """

    def __init__(self, expr: Expr, writer: UnitWriter) -> None:
        self.expr, self.writer = expr, writer
        grid = writer.grid
        plan = stored_plan(expr)
        if plan is not None and (plan.grid.chunks != grid.chunks or
                                 plan.grid.ext_chunks != grid.ext_chunks):
            plan = None
        self.plan = plan

    def __call__(self, coords: tuple[int, ...], region: Region) -> np.ndarray:
        """The values of the chunk at ``coords`` (its items: ``region``), valid until
        this thread's next call."""
        writer = self.writer
        plan = self.plan
        if plan is not None and plan.program.steps and \
                plan.stored_blocks == writer.stored_blocks:
            # An expression: evaluated piece by piece, the operands never decoded whole.
            nbytes = writer.grid.chunk_items * self.expr.dtype.itemsize
            out = _parallel.scratch(nbytes, "kernel.chunk")[:nbytes].view(self.expr.dtype)
            whole = plan.chunk_in_pieces(coords, out)
            whole.fill_padding(writer.padding)
            return writer.trimmed(whole.flat, writer.grid.chunk_index(coords))
        if plan is not None:
            chunk = plan.chunk(coords)
            if chunk is not None and chunk.blocks == writer.stored_blocks:
                chunk.fill_padding(writer.padding)  # as other writes store padding
                return writer.trimmed(chunk.flat, writer.grid.chunk_index(coords))
        return writer.stored(_evaluate_region(self.expr, (coords, region)))


def _scratch_like(shape: tuple[int, ...], dtype: np.dtype, slot: str) -> np.ndarray:
    """This thread's reusable buffer ``slot`` as an array of ``shape`` and ``dtype``."""
    nbytes = math.prod(shape) * dtype.itemsize
    return _parallel.scratch(nbytes, slot)[:nbytes].view(dtype).reshape(shape)


def _write_rows(expr: Expr, out: Any) -> None:
    """Write ``expr``'s values into ``out`` (new, empty) through its appends and writes."""
    shape, chunks = expr.shape, tuple(out.chunks)
    threaded = threaded_for(chunks, expr)
    evaluate = partial(_evaluate_region, expr)
    if out.engine.per_row == 1:
        # Chunks span whole rows: append them in order, each compressed once.
        for _, block in waves(regions(shape, chunks), evaluate, threaded, ahead=1):
            out.append(block)
        return
    # Several chunks per run of rows: size the array to its whole runs, then write
    # chunk by chunk, so only a wave of chunks is in memory.  A partial last run is
    # built whole and appended (writes into it would each decode all of it again).
    whole = shape[0] - shape[0] % chunks[0]
    out.resize((whole, *shape[1:]))
    last = None
    for (_, region), block in waves(regions(shape, chunks), evaluate, threaded, ahead=1):
        if region[0].start < whole:
            out[region] = block
            continue
        if last is None:
            last = np.empty((shape[0] - whole, *shape[1:]), dtype=expr.dtype)
        last[(slice(region[0].start - whole, region[0].stop - whole), *region[1:])] = block
    if last is not None:
        out.append(last)


def _evaluate_region(expr: Expr, item: tuple[tuple[int, ...], Region]) -> np.ndarray:
    return np.ascontiguousarray(expr.evaluate(item[1]))
