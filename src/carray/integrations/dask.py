"""dask: carrays and ctables as dask collections, and parallel writes from dask.

Reading.  :func:`to_dask` builds a dask array whose tasks each read one region
of the array.  The array is one graph key: a task opens a read-only handle (or,
in memory, holds the array), and that handle reaches other workers pickled, as
where to reopen it (never the data), so each worker opens the array once per
computation and reads only the chunks of its own regions.
:func:`table_to_dask` does the same for a table, one partition per run of
chunks of its first column.

Writing.  A layout whose files can be written independently says how many
chunks one file holds (``layout.unit_chunks``: a *unit*).  :func:`from_dask`
and :func:`store` let every dask block encode and write the whole units it
holds, with no locks and no shared state; the driver then records the final
shape once (``layout.adopt``).  That needs every unit's chunks to come from one
block: block edges must fall on chunk edges, and on unit edges in chunk
numbering (C order over the chunk grid).  Where they do not, an
:class:`AlignmentError` says so, or ``rechunk=True`` rechunks the dask array
so that they do.  Layouts that cannot be written in parallel (a ``.b2nd``
frame, memory) are filled block row by block row on the driver instead.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import numpy as np

from carray.array import carray
from carray.errors import AlignmentError
from carray.grid import NDGrid
from carray.layouts.base import ArrayMeta
from carray.layouts.superchunk import SuperchunkLayout
from carray.table import _read, ctable

# A chunk length picked so a table's partitions cover whole chunks is accepted
# down to this fraction of the default; below it, appending is the better deal.
_MIN_CHUNKLEN_SHARE = 4

__all__ = ["AlignmentError", "ctable_from_dask", "from_dask", "store", "table_to_dask",
           "to_dask"]


# -- sources --------------------------------------------------------------------------------


class _Source:
    """What tasks use: an in-memory container itself, or how to reopen a stored one.

    A plain class, not a dataclass or tuple, so that dask passes it through untouched.
    """

    __slots__ = ("container", "recipe", "token")

    def __init__(self, container: Any = None, recipe: tuple | None = None) -> None:
        self.container, self.recipe = container, recipe
        # Stored data can change under the same name: a graph never reuses another's reads.
        self.token = uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:
        return self.token

    @classmethod
    def of(cls, obj: carray | ctable, mode: str) -> _Source:
        """``obj`` as tasks should see it: stored containers reopen in ``mode``."""
        stored = not obj._layout.in_memory if isinstance(obj, carray) else \
            obj.rootdir is not None
        if not stored:
            return cls(container=obj)
        fn, (kwargs, *rest) = obj.__reduce__()  # flushes pending writes
        return cls(recipe=(fn, ({**kwargs, "mode": mode}, *rest)))

    def open(self) -> Any:
        if self.recipe is None:
            return self.container
        fn, args = self.recipe
        return fn(*args)


def _open(source: _Source) -> Any:
    return source.open()


def _held(obj: carray | ctable) -> Any:
    """One graph key holding ``obj`` as tasks read it: a read-only handle or the data.

    Opened by a task, it lives in the worker that ran it while the computation
    needs it, and reaches other workers pickled: as where to reopen it, for a
    stored container, so each worker opens it once and reads its own bytes.
    """
    import dask

    source = _Source.of(obj, "r")
    return dask.delayed(_open, pure=False)(source, dask_key_name=f"carray-open-{source.token}")


# -- reading --------------------------------------------------------------------------------


def _split(n: int, b: int) -> tuple[int, ...]:
    """Lengths of the blocks of ``b`` items covering an axis of ``n``."""
    if n == 0:
        return (0,)
    return (b,) * (n // b) + ((n % b,) if n % b else ())


def _file_blocks(a: carray) -> tuple[int, ...]:
    """Blocks of one stored file each: whole superchunks where a superchunk is whole
    runs of chunk rows, else ``a``'s chunks.

    A task per file reads it in one go (one request on an object store) and does
    enough work to outweigh the scheduler's cost per task.
    """
    unit = 0 if a._layout.in_memory else a._layout.unit_chunks
    per_row = math.prod(-(-n // c) for n, c in zip(a.shape[1:], a.chunks[1:], strict=True))
    if unit <= 1 or unit % per_row:
        return a.chunks
    return (a.chunks[0] * (unit // per_row), *(max(n, 1) for n in a.shape[1:]))


def _block_shape(a: carray, chunks: Any) -> tuple[int, ...]:
    """Dask block sizes per axis: whole superchunks by default, else whole multiples of
    ``a``'s chunks ("chunks": exactly them)."""
    if chunks is None:
        return _file_blocks(a)
    if isinstance(chunks, str) and chunks == "chunks":
        return a.chunks
    wanted = (chunks,) * a.ndim if isinstance(chunks, (int, np.integer)) else tuple(chunks)
    if len(wanted) != a.ndim:
        raise ValueError(f"chunks {chunks!r} has {len(wanted)} entries for a {a.ndim}-d array")
    out = []
    for ax, (b, c, n) in enumerate(zip(wanted, a.chunks, a.shape, strict=True)):
        b = max(n, 1) if b is None or b == -1 else int(b)
        if b <= 0 or (b % c and b < n):
            raise AlignmentError(
                f"dask chunks {tuple(wanted)} must be whole multiples of the array's chunks "
                f"{a.chunks} (or span the axis); axis {ax} has {b}")
        out.append(b)
    return tuple(out)


def _read_block(a: carray, sizes: tuple[int, ...], shape: tuple[int, ...],
                block_id: tuple[int, ...] = ()) -> np.ndarray:
    """Block ``block_id`` of blocks of ``sizes`` (the last ones clipped to ``shape``)."""
    return a[tuple(slice(i * b, min((i + 1) * b, n))
                   for i, b, n in zip(block_id, sizes, shape, strict=True))]


def to_dask(a: carray, chunks: Any = None) -> Any:
    """A dask array over ``a`` whose tasks each read one region of it.

    Parameters
    ----------
    a : carray
        In memory or stored.  A stored array is flushed, and each task reopens
        it read-only and reads only its own region; the graph holds where it is,
        never its data.
    chunks : int, tuple or "chunks", optional
        Dask block sizes per axis, whole multiples of ``a.chunks`` (-1 or None:
        the whole axis); "chunks" for exactly ``a.chunks``.  Default: one block
        per stored file -- whole superchunks when a superchunk holds whole runs
        of chunk rows, else ``a.chunks``.

    Returns
    -------
    dask.array.Array

    Raises
    ------
    AlignmentError
        ``chunks`` would split the array's chunks.
    """
    import dask.array as da

    sizes = _block_shape(a, chunks)
    dchunks = tuple(_split(n, b) for n, b in zip(a.shape, sizes, strict=True))
    # A blockwise layer: each read fuses with what follows it into one task.
    return da.map_blocks(_read_block, _held(a), sizes, a.shape, chunks=dchunks, dtype=a.dtype,
                         meta=np.empty((0,) * a.ndim, dtype=a.dtype),
                         name=f"carray-{uuid.uuid4().hex}")


# -- the geometry of parallel writes ----------------------------------------------------------


def _chunk_blocks(darr: Any, grid: NDGrid) -> np.ndarray:
    """The dask block (flat, C order) each chunk of ``grid`` falls in, by chunk number."""
    per_axis = []
    for bc, c, g in zip(darr.chunks, grid.chunks, grid.grid_shape, strict=True):
        starts = np.cumsum((0, *bc[:-1]))
        per_axis.append(np.searchsorted(starts, np.arange(g) * c, side="right") - 1)
    if not per_axis or not all(len(p) for p in per_axis):
        return np.zeros(0, dtype=np.int64)
    mesh = np.meshgrid(*per_axis, indexing="ij")
    return np.ravel_multi_index(tuple(mesh), darr.numblocks).reshape(-1)


def _boundaries(ids: np.ndarray) -> np.ndarray:
    """Chunk numbers where the next block starts."""
    return np.flatnonzero(ids[1:] != ids[:-1]) + 1


def _fits(ids: np.ndarray, unit: int) -> bool:
    return not np.any(_boundaries(ids) % unit)


def _largest_divisor(n: int, limit: int) -> int:
    return next(d for d in range(min(n, limit), 0, -1) if n % d == 0)


def _misaligned_axes(darr: Any, chunks: tuple[int, ...]) -> list[int]:
    return [ax for ax, (bc, c) in enumerate(zip(darr.chunks, chunks, strict=True))
            if np.any(np.cumsum(bc)[:-1] % c)]


def _on_chunks(darr: Any, chunks: tuple[int, ...], rechunk: bool) -> Any:
    """``darr`` with block edges on chunk edges (rechunked to whole chunks if allowed)."""
    bad = _misaligned_axes(darr, chunks)
    if not bad:
        return darr
    if not rechunk:
        raise AlignmentError(
            f"dask blocks of {darr.chunksize} split the target's chunks {chunks} along "
            f"axis {bad[0]}; rechunk to whole chunks, or pass rechunk=True")
    return darr.rechunk(tuple(max(1, round(b / c)) * c
                              for b, c in zip(darr.chunksize, chunks, strict=True)))


def _on_units(darr: Any, target: carray, grid: NDGrid, rechunk: bool) -> Any:
    """``darr`` (blocks on chunk edges) with every unit of the target inside one block.

    Rechunking makes blocks of whole runs of chunk rows, as many as whole units need.
    """
    unit = target._layout.unit_chunks
    ids = _chunk_blocks(darr, grid)
    if _fits(ids, unit):
        return darr
    first = int(_boundaries(ids)[_boundaries(ids) % unit != 0][0])
    if not rechunk:
        raise AlignmentError(
            f"dask blocks of {darr.chunksize} do not cover whole files of the target: each "
            f"holds {unit} chunks of {target.chunks} (numbered in C order over the chunk "
            f"grid {grid.grid_shape}), and chunk {first} starts a new block inside one; "
            "pass rechunk=True")
    per_row = math.prod(grid.grid_shape[1:])
    rows = unit // math.gcd(unit, per_row) * grid.chunks[0]
    row_nbytes = math.prod(darr.shape[1:]) * darr.dtype.itemsize
    want = max(1, round(math.prod(darr.chunksize) * darr.dtype.itemsize /
                        max(rows * row_nbytes, 1)))
    return darr.rechunk((want * rows, *darr.shape[1:]))


# -- writing units --------------------------------------------------------------------------


def _stored_chunk(target: carray, grid: NDGrid, block: np.ndarray, origin: tuple[int, ...],
                  nchunk: int) -> np.ndarray:
    """Chunk ``nchunk`` in stored order, from the block starting at ``origin``.

    As appends store it: a chunk of the last, partial run of chunk rows passes its
    row count, so layouts that do not pad store only those rows.
    """
    coords = np.unravel_index(nchunk, grid.grid_shape)
    box = tuple(slice(c * s - o, min((c + 1) * s, n) - o)
                for c, s, o, n in zip(coords, grid.chunks, origin, grid.shape, strict=True))
    region = block[box]
    rows = region.shape[0] if region.shape[0] < grid.chunks[0] else None
    return target._io.stored_from_region(region, grid, rows)


def _write_block(block: Any, source: _Source, meta: ArrayMeta, origin: tuple[int, ...],
                 units: list[int]) -> int:
    """Encode and write the whole units held by one block; returns their stored bytes."""
    target = source.open()
    try:
        layout, grid = target._layout, meta.grid
        block = np.asarray(block, dtype=meta.dtype)
        size = layout.unit_chunks
        written = 0
        for u in units:
            chunks = [target._io.encode(_stored_chunk(target, grid, block, origin, n), grid)
                      for n in range(u * size, min((u + 1) * size, grid.nchunks))]
            written += layout.write_unit(u, chunks)
        return written
    finally:
        # Never target.close(): that would commit this handle's stale shape; the
        # driver records the final one.
        target._layout.close()


def _write_units(darr: Any, target: carray, source: _Source, meta: ArrayMeta) -> int:
    """Write every unit of ``target`` from the block holding it, in parallel."""
    import dask

    unit = target._layout.unit_chunks
    unit_blocks = _chunk_blocks(darr, meta.grid)[::unit]
    starts = [np.cumsum((0, *c[:-1])) for c in darr.chunks]
    blocks = darr.to_delayed().reshape(-1)
    owners = np.argsort(unit_blocks, kind="stable")
    edges = np.searchsorted(unit_blocks[owners], np.arange(len(blocks) + 1))
    write = dask.delayed(_write_block, pure=False)
    tasks = []
    for b, blk in enumerate(blocks):
        units = owners[edges[b]:edges[b + 1]].tolist()
        if units:
            idx = np.unravel_index(b, darr.numblocks)
            origin = tuple(int(s[i]) for s, i in zip(starts, idx, strict=True))
            tasks.append(write(blk, source, meta, origin, units))
    return int(sum(dask.compute(*tasks)))


def _append_blocks(target: carray, darr: Any) -> None:
    """Fill ``target`` on the driver, one row of blocks in memory at a time."""
    for i in range(darr.numblocks[0]):
        target.append(darr.blocks[i].compute())
    target.flush()


def _as_dask_array(darr: Any) -> Any:
    import dask.array as da

    if not isinstance(darr, da.Array):
        raise TypeError(f"expected a dask array, got {type(darr).__name__}")
    if darr.ndim == 0:
        raise ValueError("a carray needs at least one dimension; got a 0-d dask array")
    return darr


def _regular(chunks: tuple[int, ...]) -> bool:
    return all(c == chunks[0] for c in chunks[:-1]) and chunks[-1] <= chunks[0]


def _new_target(darr: Any, rootdir: Any, storage_options: dict | None, mode: str,
                kwargs: dict) -> carray:
    options = {} if storage_options is None else {"storage_options": storage_options}
    return carray(np.empty((0, *darr.shape[1:]), dtype=darr.dtype), rootdir=rootdir,
                  mode=mode, **options, **kwargs)


def from_dask(darr: Any, rootdir: Any = None, *, storage_options: dict | None = None,
              mode: str = "a", rechunk: bool = False, **carray_kwargs: Any) -> carray:
    """A new carray holding a dask array, each block writing its own files.

    Parameters
    ----------
    darr : dask.array.Array
        What to store (computed once, block by block).
    rootdir : str or path, optional
        Where (a directory, ``.b2nd`` file or URL); None builds it in memory,
        computing the blocks one row of blocks at a time and appending them.
    storage_options : dict, optional
        For a URL ``rootdir``.
    mode : {'a', 'w'}
        'a' refuses an existing ``rootdir``; 'w' replaces it.
    rechunk : bool
        Rechunk ``darr`` when its blocks would split the target's chunks or files,
        instead of raising :class:`AlignmentError`.
    **carray_kwargs
        As for :class:`carray` (``chunks``, ``cparams``, ``format``, ``storage``...).
        Default chunks: ``darr``'s chunk shape when its chunks are regular, so each
        block is one chunk.  A new superchunk directory without an explicit
        ``storage['superchunksize']`` gets the largest one (up to the default) whose
        files each fall inside one block.

    Returns
    -------
    carray
        The stored array, opened in mode 'a'.

    Notes
    -----
    Stored targets whose layout has independent files (superchunk, bcolz) are
    written in parallel by the dask scheduler in use, each task writing whole
    files; a ``.b2nd`` frame is one file, so its blocks are appended on the
    driver, one row of blocks at a time.
    """
    darr = _as_dask_array(darr)
    kwargs = dict(carray_kwargs)
    if kwargs.get("dtype") is not None:
        darr = darr.astype(kwargs.pop("dtype"))
    kwargs.setdefault("expectedlen", max(darr.shape[0], 1))
    if kwargs.get("chunks") is None and kwargs.get("chunklen") is None \
            and all(_regular(c) for c in darr.chunks):
        sizes = tuple(max(c[0], 1) for c in darr.chunks)
        if kwargs.get("format") == "bcolz":  # rows only: the trailing axes are whole
            kwargs["chunklen"] = sizes[0]
        else:
            kwargs["chunks"] = sizes
    if rootdir is None:
        if storage_options:
            raise ValueError("storage_options apply to a rootdir; got none")
        target = carray(np.empty((0, *darr.shape[1:]), dtype=darr.dtype), **kwargs)
        _append_blocks(target, darr)
        return target
    target = _new_target(darr, rootdir, storage_options, mode, kwargs)
    if not target._layout.unit_chunks:
        _append_blocks(target, darr)
        return target
    darr = _on_chunks(darr, target.chunks, rechunk)
    meta = target._meta().replace(shape=darr.shape)
    storage = dict(kwargs.get("storage") or {})
    ids = _chunk_blocks(darr, meta.grid)
    if isinstance(target._layout, SuperchunkLayout) and "superchunksize" not in storage \
            and not _fits(ids, target._layout.unit_chunks):
        edges = _boundaries(ids)
        size = _largest_divisor(math.gcd(*edges.tolist()), target._layout.unit_chunks)
        target._layout.close()
        kwargs["storage"] = {**storage, "superchunksize": size}
        target = _new_target(darr, rootdir, storage_options, "w", kwargs)
    darr = _on_units(darr, target, meta.grid, rechunk)
    return _write_and_adopt(darr, target, meta)


def _write_and_adopt(darr: Any, target: carray, meta: ArrayMeta) -> carray:
    """Write every unit in parallel, record ``meta`` and return a fresh 'a' handle."""
    source = _Source.of(target, "a")  # flushes what the driver had pending
    cbytes = _write_units(darr, target, source, meta)
    target._layout.adopt(meta, cbytes)
    target._layout.close()
    return source.open()


def store(darr: Any, target: carray, rechunk: bool = False) -> None:
    """Replace the contents of ``target`` with ``darr``, each block writing its own files.

    Parameters
    ----------
    darr : dask.array.Array
        Of the target's shape; its dtype is cast to the target's (same kind).
    target : carray
        An array opened for writing.  Stored in a layout with independent files,
        its files are rewritten whole and in parallel and ``target`` then sees
        the new contents; otherwise (memory, ``.b2nd``) blocks are written on the
        driver, one row of blocks at a time.
    rechunk : bool
        Rechunk ``darr`` when its blocks would split the target's chunks or files,
        instead of raising :class:`AlignmentError`.
    """
    darr = _as_dask_array(darr)
    target._writable()
    if darr.shape != target.shape:
        raise ValueError(f"cannot store a dask array of shape {darr.shape} into a carray of "
                         f"shape {target.shape}")
    if darr.dtype != target.dtype:
        if not np.can_cast(darr.dtype, target.dtype, "same_kind"):
            raise ValueError(f"cannot store {darr.dtype} into a carray of {target.dtype}")
        darr = darr.astype(target.dtype)
    if target._layout.in_memory or not target._layout.unit_chunks:
        for i in range(darr.numblocks[0]):
            lo = sum(darr.chunks[0][:i])
            target[lo:lo + darr.chunks[0][i]] = darr.blocks[i].compute()
        target.flush()
        return
    darr = _on_chunks(darr, target.chunks, rechunk)
    meta = target._meta()
    darr = _on_units(darr, target, meta.grid, rechunk)
    fresh = _write_and_adopt(darr, target, meta)
    # The caller's handle takes over the reopened state (caches, tail, sizes).
    vars(target).update(vars(fresh))


# -- tables ---------------------------------------------------------------------------------


def _frame(t: ctable, names: list[str], lo: int, hi: int) -> Any:
    import pandas as pd

    data = {}
    for n in names:
        values = _read(t.cols[n], range(lo, hi))
        data[n] = list(values) if values.ndim > 1 else values
    return pd.DataFrame(data, columns=names, index=pd.RangeIndex(lo, hi))


def _read_frame(t: ctable, names: list[str], lo: int, hi: int) -> Any:
    return _frame(t, names, lo, hi)


def _partition_rows(t: ctable) -> int:
    """Rows of one unit of the first column (a run of chunks), for a partition."""
    for col in t.cols.values():
        if isinstance(col, carray):
            unit = getattr(col._layout, "unit_chunks", 0) or 1
            return col.chunklen * max(1, unit // col._per_row)
    return 2**16


def table_to_dask(t: ctable, columns: Any = None, partition_rows: int | None = None) -> Any:
    """A dask DataFrame over a table, one partition per run of chunks.

    Parameters
    ----------
    t : ctable
        In memory or stored; a stored table is flushed and each task reopens it
        read-only and reads only its own rows.
    columns : list of str, optional
        Which columns (default all).
    partition_rows : int, optional
        Rows per partition (default: one file's worth of the first numeric
        column: its chunk length, times the chunks in one file).

    Returns
    -------
    dask.dataframe.DataFrame
        Indexed by row number, with known divisions.
    """
    import dask
    import dask.dataframe as dd

    names = [n for n in t._outcols(columns) if n != "nrow__"]
    n = len(t)
    step = int(partition_rows or _partition_rows(t))
    if step <= 0:
        raise ValueError(f"partition_rows must be positive, got {partition_rows}")
    starts = list(range(0, n, step)) or [0]
    rows = [(lo, min(lo + step, n)) for lo in starts]
    meta = _frame(t, names, 0, 0)
    divisions = (*starts, n - 1) if n else None
    held, read = _held(t), dask.delayed(_read_frame, pure=False)
    return dd.from_delayed([read(held, names, lo, hi) for lo, hi in rows], meta=meta,
                           divisions=divisions, verify_meta=False)


def _fixed_width(meta: Any) -> bool:
    return all(isinstance(dt, np.dtype) and dt.kind not in "OSUV" for dt in meta.dtypes)


def _write_partition(df: Any, specs: list[tuple], start: int) -> list[int]:
    """Write the whole units of every column held by one partition starting at row ``start``."""
    from carray.tables_interop import normalise_columns

    values = dict(normalise_columns(df, None))
    return [_write_block(values[name], source, meta, (start,), units)
            for name, source, meta, units in specs]


def _append_partitions(t: ctable, parts: list) -> ctable:
    for part in parts:
        t.append(part.compute())
    t.flush()
    return t


def ctable_from_dask(ddf: Any, rootdir: Any = None, *, storage_options: dict | None = None,
                     mode: str = "a", **ctable_kwargs: Any) -> ctable:
    """A new ctable holding a dask DataFrame's columns (its index is not kept).

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        What to store.
    rootdir : str or path, optional
        The table directory or URL; None builds the table in memory.
    storage_options : dict, optional
        For a URL ``rootdir``.
    mode : {'a', 'w'}
        'a' refuses an existing ``rootdir``; 'w' replaces it.
    **ctable_kwargs
        As for :class:`ctable` (``cparams``, ``chunklen``, ``expectedlen``...).

    Returns
    -------
    ctable

    Notes
    -----
    A stored table whose columns are all fixed-width numbers is written in
    parallel when its partitions cover whole chunks of every column: the
    partition lengths are computed first (one pass over ``ddf``), and without an
    explicit ``chunklen`` the columns get the largest chunk length (down to a
    quarter of the default) that divides every partition boundary.  Otherwise
    (strings, extension dtypes, memory, partitions that do not line up) the
    partitions are computed one at a time, in order, and appended on the driver,
    so no more than one partition is ever held in memory.
    """
    import dask

    parts = list(ddf.to_delayed())
    empty = ddf._meta.iloc[:0]
    if storage_options is not None:
        ctable_kwargs["storage_options"] = storage_options
    if rootdir is None or not _fixed_width(ddf._meta):
        return _append_partitions(ctable(empty, rootdir=rootdir, mode=mode, **ctable_kwargs),
                                  parts)
    lengths = [int(x) for x in dask.compute(*[dask.delayed(len)(p) for p in parts])]
    total = sum(lengths)
    kwargs = {"expectedlen": max(total, 1), **ctable_kwargs}
    t = ctable(empty, rootdir=rootdir, mode=mode, **kwargs)
    starts = np.cumsum([0, *lengths[:-1]])
    edges = sorted({int(s) for s, n in zip(starts, lengths, strict=True) if 0 < s < total
                    and n})

    def unit_rows(tab: ctable) -> list[int]:
        return [c.chunklen * c._layout.unit_chunks for c in tab.cols.values()]

    if any(e % u for e in edges for u in unit_rows(t)) and "chunklen" not in ctable_kwargs:
        default = min(c.chunklen for c in t.cols.values()) if t.names else 1
        chunklen = _largest_divisor(math.gcd(*edges), default) if edges else default
        if chunklen * _MIN_CHUNKLEN_SHARE >= default:
            t = ctable(empty, rootdir=rootdir, mode="w", **{**kwargs, "chunklen": chunklen})
    if not t.names or any(e % u for e in edges for u in unit_rows(t)):
        return _append_partitions(t, parts)
    specs, metas = [], []
    for col in t.cols.values():
        meta = col._meta().replace(shape=(total, *col.shape[1:]))
        metas.append(meta)
        specs.append((col, _Source.of(col, "a"), meta, col.chunklen * col._layout.unit_chunks))
    reopen = _Source.of(t, "a")
    write = dask.delayed(_write_partition, pure=False)
    tasks = []
    for part, start, n in zip(parts, starts, lengths, strict=True):
        if n:
            work = [(name, source, meta, list(range(start // rows, -(-(start + n) // rows))))
                    for name, (_, source, meta, rows) in zip(t.names, specs, strict=True)]
            tasks.append(write(part, work, int(start)))
    written = np.sum(dask.compute(*tasks), axis=0, dtype=np.int64) if tasks else \
        np.zeros(len(specs), dtype=np.int64)
    for (col, _, meta, _), cbytes in zip(specs, written, strict=True):
        col._layout.adopt(meta, int(cbytes))
        col._layout.close()
    return reopen.open()
