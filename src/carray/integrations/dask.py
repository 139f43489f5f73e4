"""dask: carrays and ctables as dask collections, and parallel writes from dask.

Reading (:func:`to_dask`, :func:`table_to_dask`) lives in :mod:`.dask_read`.

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
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.chunks.grid import NDGrid
from carray.errors import AlignmentError
from carray.integrations.dask_read import _Source, table_to_dask, to_dask
from carray.table.table import ctable

# A chunk length picked so a table's partitions cover whole chunks is accepted
# down to this fraction of the default; below it, appending is the better deal.
_MIN_CHUNKLEN_SHARE = 4

__all__ = ["AlignmentError", "ctable_from_dask", "from_dask", "store", "table_to_dask",
           "to_dask"]


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
    unit = target.engine.unit_chunks
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


def _write_block(block: Any, source: _Source, shape: tuple[int, ...],
                 origin: tuple[int, ...], units: list[int]) -> int:
    """Encode and write the whole units held by one block; returns their stored bytes."""
    target = source.open()
    try:
        block = np.asarray(block, dtype=target.dtype)
        return target.engine.unit_writer(shape).write(block, origin, units)
    finally:
        # Never target.close(): that would commit this handle's stale shape; the
        # driver records the final one.
        target.engine.release()


def _unit_writers(obj: Any) -> _Source:
    """Where tasks reopen ``obj`` to write whole files of it: without the writer's lock,
    which the driver holds for them (they touch disjoint files; it records the result)."""
    source = _Source.of(obj, "a")
    assert source.recipe is not None
    kwargs = source.recipe[1]
    kwargs["storage"] = {**(kwargs.get("storage") or {}), "lock": False}
    return source


def _write_units(darr: Any, target: carray, source: _Source, grid: NDGrid) -> int:
    """Write every unit of ``target`` (of ``grid``) from the block holding it, in parallel."""
    import dask

    source = _unit_writers(target)

    unit = target.engine.unit_chunks
    unit_blocks = _chunk_blocks(darr, grid)[::unit]
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
            tasks.append(write(blk, source, grid.shape, origin, units))
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
    options: dict[str, Any] = {} if storage_options is None else \
        {"storage_options": storage_options}
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
    unit = target.engine.unit_chunks
    if not unit:
        _append_blocks(target, darr)
        return target
    darr = _on_chunks(darr, target.chunks, rechunk)
    grid = target.grid.resized(darr.shape)
    storage = dict(kwargs.get("storage") or {})
    ids = _chunk_blocks(darr, grid)
    if target.layout == "Superchunk" and "superchunksize" not in storage \
            and not _fits(ids, unit):
        edges = _boundaries(ids)
        size = _largest_divisor(math.gcd(*edges.tolist()), unit)
        target.engine.release()
        kwargs["storage"] = {**storage, "superchunksize": size}
        target = _new_target(darr, rootdir, storage_options, "w", kwargs)
    darr = _on_units(darr, target, grid, rechunk)
    return _write_and_adopt(darr, target, grid)


def _write_and_adopt(darr: Any, target: carray, grid: NDGrid) -> carray:
    """Write every unit in parallel, record the shape and return a fresh 'a' handle."""
    source = _Source.of(target, "a")  # flushes what the driver had pending
    cbytes = _write_units(darr, target, source, grid)
    target.engine.adopt(grid.shape, cbytes)
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
    target.engine.check_writable()
    if darr.shape != target.shape:
        raise ValueError(f"cannot store a dask array of shape {darr.shape} into a carray of "
                         f"shape {target.shape}")
    if darr.dtype != target.dtype:
        if not np.can_cast(darr.dtype, target.dtype, "same_kind"):
            raise ValueError(f"cannot store {darr.dtype} into a carray of {target.dtype}")
        darr = darr.astype(target.dtype)
    if not target.engine.unit_chunks:
        for i in range(darr.numblocks[0]):
            lo = sum(darr.chunks[0][:i])
            target[lo:lo + darr.chunks[0][i]] = darr.blocks[i].compute()
        target.flush()
        return
    darr = _on_chunks(darr, target.chunks, rechunk)
    grid = target.grid
    darr = _on_units(darr, target, grid, rechunk)
    _write_and_adopt(darr, target, grid).engine.release()
    # The caller's handle reads the new state (sizes, tail) from storage.
    target.reopen()


# -- tables ---------------------------------------------------------------------------------


def _fixed_width(meta: Any) -> bool:
    return all(isinstance(dt, np.dtype) and dt.kind not in "OSUV" for dt in meta.dtypes)


def _empty_frame(ddf: Any) -> Any:
    """An empty pandas DataFrame with ``ddf``'s columns and dtypes."""
    import pandas as pd

    return pd.DataFrame({name: pd.Series(dtype=dt) for name, dt in ddf.dtypes.items()},
                        columns=ddf.columns)


def _write_partition(df: Any, specs: list[tuple], start: int) -> list[int]:
    """Write the whole units of every column held by one partition starting at row ``start``."""
    from carray.table.interop import normalise_columns

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
    empty = _empty_frame(ddf)
    if storage_options is not None:
        ctable_kwargs["storage_options"] = storage_options
    if rootdir is None or not _fixed_width(empty):
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
        return [c.chunklen * c.engine.unit_chunks for c in tab.cols.values()]

    if any(e % u for e in edges for u in unit_rows(t)) and "chunklen" not in ctable_kwargs:
        default = min(c.chunklen for c in t.cols.values()) if t.names else 1
        chunklen = _largest_divisor(math.gcd(*edges), default) if edges else default
        if chunklen * _MIN_CHUNKLEN_SHARE >= default:
            t.close()  # one writer at a time: the table is made again
            t = ctable(empty, rootdir=rootdir, mode="w", **{**kwargs, "chunklen": chunklen})
    if not t.names or any(e % u for e in edges for u in unit_rows(t)):
        _append_partitions(t, parts)
        again = _Source.of(t, "a")  # a table made again above has mode 'w'
        t.close()  # one writer at a time: the reopened handle is the writer now
        return again.open()

    return _write_in_parallel(t, parts, starts, lengths, total)


def _write_in_parallel(t: ctable, parts: list, starts: np.ndarray, lengths: list[int],
                       total: int) -> ctable:
    """Write every partition's whole units of chunks on dask workers, record the
    columns' lengths, and reopen ``t`` (closed here) for writing."""
    import dask

    specs = []
    for col in t.cols.values():
        shape = (total, *col.shape[1:])
        specs.append((col, _unit_writers(col), shape, col.chunklen * col.engine.unit_chunks))
    reopen = _Source.of(t, "a")
    write = dask.delayed(_write_partition, pure=False)
    tasks = []
    for part, start, n in zip(parts, starts, lengths, strict=True):
        if n:
            work = [(name, source, meta, list(range(start // rows, -(-(start + n) // rows))))
                    for name, (_, source, meta, rows) in zip(t.names, specs, strict=True)]
            tasks.append(write(part, work, int(start)))
    written: Any = np.sum(dask.compute(*tasks), axis=0, dtype=np.int64) if tasks else \
        np.zeros(len(specs), dtype=np.int64)
    for (col, _, meta, _), cbytes in zip(specs, written, strict=True):
        col.engine.adopt(meta, int(cbytes))
    t.close()  # the columns are released; this lets the table's lock go for the reopen
    return reopen.open()
