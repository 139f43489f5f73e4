"""dask collections over carrays and ctables: reading.

:func:`to_dask` builds a dask array whose tasks each read one region of the
array.  The array is one graph key: a task opens a read-only handle (or, in
memory, holds the array), and that handle reaches other workers pickled, as
where to reopen it (never the data), so each worker opens the array once per
computation and reads only the chunks of its own regions.
:func:`table_to_dask` does the same for a table, one partition per file's worth
of rows of its first fixed-width column.

This module knows containers only by their public API, so the containers'
``to_dask`` methods can use it without an import cycle.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import numpy as np

from carray.errors import AlignmentError

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
    def of(cls, obj: Any, mode: str) -> _Source:
        """``obj`` as tasks should see it: stored containers reopen in ``mode``."""
        if obj.rootdir is None:
            return cls(container=obj)
        obj.flush()
        return cls(recipe=(type(obj), {**obj.reopen_args(), "mode": mode}))

    def open(self) -> Any:
        if self.recipe is None:
            return self.container
        kind, kwargs = self.recipe
        return kind(**kwargs)


def _open(source: _Source) -> Any:
    return source.open()


def _held(obj: Any) -> Any:
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


def _file_blocks(a: Any) -> tuple[int, ...]:
    """Blocks of one stored file each: whole superchunks where a superchunk is whole
    runs of chunk rows, else ``a``'s chunks.

    A task per file reads it in one go (one request on an object store) and does
    enough work to outweigh the scheduler's cost per task.
    """
    unit = a.engine.unit_chunks
    per_row = math.prod(-(-n // c) for n, c in zip(a.shape[1:], a.chunks[1:], strict=True))
    if unit <= 1 or unit % per_row:
        return a.chunks
    return (a.chunks[0] * (unit // per_row), *(max(n, 1) for n in a.shape[1:]))


def _block_shape(a: Any, chunks: Any) -> tuple[int, ...]:
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


def _read_block(a: Any, sizes: tuple[int, ...], shape: tuple[int, ...],
                block_id: tuple[int, ...] = ()) -> np.ndarray:
    """Block ``block_id`` of blocks of ``sizes`` (the last ones clipped to ``shape``)."""
    return a[tuple(slice(i * b, min((i + 1) * b, n))
                   for i, b, n in zip(block_id, sizes, shape, strict=True))]


def to_dask(a: Any, chunks: Any = None) -> Any:
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


def _frame(t: Any, names: list[str], lo: int, hi: int) -> Any:
    import pandas as pd

    data = t.pandas_columns(names, lo, hi)  # categories, zones and missing values kept
    return pd.DataFrame(data, columns=names, index=pd.RangeIndex(lo, hi))


def _read_frame(t: Any, names: list[str], lo: int, hi: int) -> Any:
    return _frame(t, names, lo, hi)


def table_to_dask(t: Any, columns: Any = None, partition_rows: int | None = None) -> Any:
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

    names = [n for n in t.column_names(columns) if n != "nrow__"]
    n = len(t)
    step = int(partition_rows or t.file_rows())
    if step <= 0:
        raise ValueError(f"partition_rows must be positive, got {partition_rows}")
    starts = list(range(0, n, step)) or [0]
    rows = [(lo, min(lo + step, n)) for lo in starts]
    meta = _frame(t, names, 0, 0)
    divisions = (*starts, n - 1) if n else None
    held, read = _held(t), dask.delayed(_read_frame, pure=False)
    return dd.from_delayed([read(held, names, lo, hi) for lo, hi in rows], meta=meta,
                           divisions=divisions, verify_meta=False)


