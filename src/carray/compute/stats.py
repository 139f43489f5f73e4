"""Whole-array reductions answered from chunk statistics, without decoding a chunk.

Every numeric carray keeps, per chunk, the statistics of its items
(:mod:`carray.engine.chunkstats`: count, min, max, NaN count, non-zero count,
sum, float sum and the sum of squared deviations), worked out when the chunk
is written and kept in its zone map (:mod:`carray.compute.zonemap`).  When every
chunk in whole runs of chunk rows has trusted statistics, :func:`whole` merges
them with those of the last, partial run (worked out from the decoded tail
the array keeps in memory) and :func:`answer` gives ``sum``, ``mean``,
``var``, ``std``, ``min``, ``max``, ``count_nonzero``, ``any`` and ``all`` over
every axis from the merged numbers.

Chunks are merged in chunk order, pairwise, level by level (chunk 0 with 1, 2
with 3, ..., then those results pairwise; an odd one out goes up a level
as it is): a fixed binary tree, so results never depend on the thread count,
and float sums keep pairwise accuracy.  Means and variances merge with Chan's
formulas (count, mean and sum of squared deviations per node).

For the NaN-aware reductions (``np.nansum``, ``np.nanmean``, ``np.nanmax``...)
:func:`whole` hands out the merged :class:`~carray.engine.chunkstats.ChunkStats`
itself: ``total``/``fsum``/``m2``/``lo``/``hi`` are over the values that are not
NaN, ``count - nnan`` of them (``lo``/``hi`` are NaN when every value is).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from carray.compute import zones
from carray.compute._types import is_carray
from carray.engine.chunkstats import KINDS, ChunkStats, of_values

#: Switch the statistics off (to measure what they save, or to rule them out).
USE_STATS = True

#: The reductions :func:`answer` knows.
OPS = frozenset({"sum", "mean", "var", "std", "min", "max", "count_nonzero", "any", "all"})

_FIELDS = ("count", "nnan", "nonzero", "lo", "hi", "total", "fsum", "m2")


#: Chunks without trusted statistics that :func:`whole` decodes (and summarises for the
#: next time) rather than give up: at most this fraction of the chunks, or 4.
DECODE_FRACTION = 1 / 8


def whole(arr: Any) -> ChunkStats | None:
    """The statistics of every item of carray ``arr``, merged in chunk order (see the
    module doc), or None when ``arr`` is not a numeric, non-empty carray of at least one
    dimension, or too many chunks in whole runs of rows have no trusted entry (written by
    another program, put back by a failed operation): a few such chunks are decoded
    (see :data:`DECODE_FRACTION`) and summarised for the next time."""
    if not USE_STATS or not is_carray(arr) or not arr.shape or 0 in arr.shape or \
            arr.dtype.kind not in KINDS:
        return None
    zm = arr.chunk_stats()
    if zm is None:
        return None
    engine = arr.engine
    stored = engine.nfull * engine.per_row
    if not zm.has_stats(0, stored) and not _learn(arr, zm, stored):
        return None
    table = {f: getattr(zm, f)[:stored] for f in _FIELDS}
    tail = _tail_stats(arr, engine)
    if tail:
        table = {f: np.concatenate([table[f], np.array([getattr(s, f) for s in tail],
                                                       dtype=table[f].dtype)])
                 for f in _FIELDS}
    return _merge_all(table)


def _learn(arr: Any, zm: Any, stored: int) -> bool:
    """Decode and summarise the chunks of ``[0, stored)`` without statistics, when they
    are few; whether all have statistics now."""
    missing = np.flatnonzero(~zm.full[:stored]) if len(zm) >= stored else None
    if missing is None or len(missing) > max(4, stored * DECODE_FRACTION):
        return False
    grid = arr.engine.grid
    for nchunk in missing.tolist():
        box = grid.chunk_slices(grid.chunk_coords(nchunk))
        arr.learn_zone(nchunk, _stored_values(arr, box))
    return zm.has_stats(0, stored)


def _tail_stats(arr: Any, engine: Any) -> list[ChunkStats]:
    """The statistics of the chunks of the last, partial run of rows, in chunk order
    (from the tail the array keeps decoded; read when it keeps none)."""
    shape, chunks = engine.shape, engine.chunks
    start = engine.nfull * chunks[0]
    if start >= shape[0]:
        return []
    out = []
    for trailing in np.ndindex(*(-(-n // c) for n, c in zip(shape[1:], chunks[1:],
                                                            strict=True))):
        box = tuple(slice(t * c, (t + 1) * c) for t, c in zip(trailing, chunks[1:],
                                                              strict=True))
        out.append(of_values(_stored_values(arr, (slice(start, shape[0]), *box))))
    return out


def _stored_values(arr: Any, box: tuple[slice, ...]) -> np.ndarray:
    """The items of ``arr`` in ``box`` of the stored array (a Fortran-order carray stores
    the transpose of what its users see), in any order."""
    return np.asarray(arr[box[::-1]] if arr.order == "F" else arr[box])


def _merge_all(table: dict[str, np.ndarray]) -> ChunkStats:
    """Merge the rows of ``table`` (one per chunk, in chunk order) pairwise, level by
    level, into one."""
    while len(table["count"]) > 1:
        n = len(table["count"])
        even = {f: v[0:n - 1:2] for f, v in table.items()}
        odd = {f: v[1:n:2] for f, v in table.items()}
        merged = _merge(even, odd)
        if n % 2:  # the odd one out goes up as it is
            merged = {f: np.concatenate([v, table[f][-1:]]) for f, v in merged.items()}
        table = merged
    row = {f: v[0] for f, v in table.items()}
    return ChunkStats(int(row["count"]), int(row["nnan"]), int(row["nonzero"]), row["lo"],
                      row["hi"], row["total"], float(row["fsum"]), float(row["m2"]))


def _merge(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Rows of ``a`` merged with the rows of ``b`` beside them (``a`` first)."""
    na, nb = a["count"] - a["nnan"], b["count"] - b["nnan"]
    n = na + nb
    float_items = a["lo"].dtype.kind == "f"
    with np.errstate(all="ignore"):
        delta = b["fsum"] / nb - a["fsum"] / na
        cross = delta * delta * (na * nb / np.maximum(n, 1))
        m2 = np.where(na == 0, b["m2"], np.where(nb == 0, a["m2"], a["m2"] + b["m2"] + cross))
        out = {
            "count": a["count"] + b["count"], "nnan": a["nnan"] + b["nnan"],
            "nonzero": a["nonzero"] + b["nonzero"],
            # Wrapping, as numpy's integer sums do; float sums pairwise.
            "total": a["total"] + b["total"], "fsum": a["fsum"] + b["fsum"], "m2": m2,
            "lo": np.fmin(a["lo"], b["lo"]) if float_items else np.minimum(a["lo"], b["lo"]),
            "hi": np.fmax(a["hi"], b["hi"]) if float_items else np.maximum(a["hi"], b["hi"]),
        }
    return out


def answer(spec: Any) -> Any:
    """The result of reduction ``spec`` (``carray.compute.reduce``'s: ``op``, ``src``,
    ``shape``, ``axes``, ``where``, ``kw``, ``result_dtype``) over every axis of a plain
    carray, from its chunk statistics, as a scalar of ``spec.result_dtype``; None when
    the statistics cannot answer it (an expression, ``where=``, ``initial=``, some axes
    only, a ``dtype=`` they do not give exactly, a chunk without statistics)."""
    if spec.op not in OPS or not zones.USE_SUMMARIES or spec.where is not None or \
            not is_carray(spec.src) or len(spec.axes) != len(spec.shape) or \
            spec.kw.get("initial", np._NoValue) is not np._NoValue:
        return None
    dtype = spec.kw.get("dtype")
    kind = spec.src.dtype.kind
    if dtype is not None:
        dtype = np.dtype(dtype)
        exact_ints = spec.op == "sum" and dtype.kind in "iu" and kind in "biu"
        if dtype.kind != "f" and not exact_ints:
            return None
    if spec.src.dtype.kind not in KINDS:
        return None
    stats = whole(spec.src)
    if stats is None:
        return None
    value = _value(spec.op, stats, kind, dtype, spec.kw.get("ddof", 0))
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(spec.result_dtype)[()]


def _value(op: str, s: ChunkStats, kind: str, dtype: np.dtype | None, ddof: Any) -> Any:
    """Reduction ``op`` of the items ``s`` describes (``kind``: theirs; ``dtype``: the
    ``dtype=`` argument), before the cast to the result's dtype."""
    nan = float("nan")
    if op == "count_nonzero":
        return s.nonzero
    if op == "any":
        return s.nonzero > 0
    if op == "all":
        return s.nonzero == s.count
    if op in ("min", "max"):
        return nan if s.nnan else (s.lo if op == "min" else s.hi)
    if op == "sum":
        if dtype is not None and dtype.kind == "f":
            return nan if s.nnan else s.fsum
        return nan if s.nnan else s.total
    if op in ("var", "std") and s.count - ddof <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning,
                      stacklevel=4)  # numpy's words
    if s.nnan:
        return nan
    with np.errstate(all="ignore"):
        if op == "mean":
            return np.float64(s.fsum) / s.count
        var = np.float64(s.m2) / max(s.count - ddof, 0)
        return np.sqrt(var) if op == "std" else var
