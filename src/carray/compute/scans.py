"""``cumsum`` and ``cumprod`` (and their NaN-ignoring forms) of carrays and expressions:
a new carray, written box by box with the running total carried between boxes.

Along an axis, boxes are the chunks, visited so that the boxes before one along
the axis come first; each box is accumulated by numpy with the carry from the
previous one put in front of it (so the additions happen in numpy's order and the
floats come out as numpy's).  With no axis the items are taken in C order: slabs
of whole chunk rows (:func:`carray.compute.slabs.row_slabs`) flattened, carried
one to the next.  Only a box (or slab) and its result are in memory at once.
"""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from carray.compute import protocols
from carray.compute._types import array_type
from carray.compute.evaluate import grid_shape, plan_chunks, values_at
from carray.compute.slabs import row_slabs

_UFUNCS = {"cumsum": np.add, "cumprod": np.multiply}


def _accumulate(op: str, block: np.ndarray, axis: int, dtype: np.dtype,
                carry: np.ndarray | None) -> np.ndarray:
    """numpy's scan of ``block`` along ``axis``, continuing from ``carry``."""
    func = getattr(np, op)
    if carry is None:
        return np.asarray(func(block, axis=axis, dtype=dtype))
    joined = np.concatenate([np.expand_dims(carry, axis), block.astype(dtype, copy=False)],
                            axis=axis)
    out = func(joined, axis=axis, dtype=dtype)
    return np.asarray(out[(slice(None),) * axis + (slice(1, None),)])


def _new(shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...],
         kwargs: dict[str, Any]) -> Any:
    args = dict(kwargs)
    args.setdefault("chunks", chunks)
    out = array_type()(np.empty((0, *shape[1:]), dtype=dtype), **args)
    out.resize(shape)
    return out


def scan_op(op: str, a: Any, axis: int | None = None, dtype: Any = None,
            out: Any = None, **kwargs: Any) -> Any:
    """``numpy.cumsum``/``numpy.cumprod`` (``op``) of ``a`` as a new carray.

    Parameters
    ----------
    op : {'cumsum', 'cumprod'}
    a : carray or LazyExpr
    axis : int, optional
        Default: over the items in C order (the result is 1-d).
    dtype : dtype, optional
        Of the result and the accumulation (default numpy's).
    out : numpy.ndarray or carray, optional
        Receives the result.
    **kwargs
        For the new carray (``rootdir=``, ``cparams``...).
    """
    result_dtype = np.asarray(getattr(np, op)(np.zeros(1, dtype=a.dtype), dtype=dtype)).dtype
    shape = tuple(a.shape)
    if axis is None:
        result = _flat(op, a, result_dtype, kwargs)
    else:
        ax = normalize_axis_index(axis, len(shape))
        result = _along(op, a, ax, result_dtype, kwargs)
    if out is not None:
        out[...] = result[...]
        return out
    return result


def _flat(op: str, a: Any, dtype: np.dtype, kwargs: dict[str, Any]) -> Any:
    shape = tuple(a.shape)
    size = int(np.prod(shape, dtype=np.int64))
    if not shape or size == 0:
        values = getattr(np, op)(np.asarray(a), dtype=dtype)
        return array_type()(values, **kwargs)
    chunks = plan_chunks(a)
    per_row = size // shape[0]
    result = _new((size,), dtype, (max(chunks[0] * per_row, 1),), kwargs)
    carry = None
    for region in row_slabs(shape, chunks):
        block = np.asarray(values_at(a, region)).reshape(-1)
        scanned = _accumulate(op, block, 0, dtype, carry)
        start = region[0].start * per_row
        result[start:start + scanned.size] = scanned
        carry = scanned[-1]
    result.flush()
    return result


def _along(op: str, a: Any, axis: int, dtype: np.dtype, kwargs: dict[str, Any]) -> Any:
    shape = tuple(a.shape)
    chunks = plan_chunks(a)
    result = _new(shape, dtype, chunks, kwargs)
    if 0 in shape:
        return result
    grid = grid_shape(shape, chunks)
    others = [range(g) if ax != axis else range(1) for ax, g in enumerate(grid)]
    for coords in itertools.product(*others):
        carry = None
        for k in range(grid[axis]):
            box = tuple(slice((k if ax == axis else c) * s,
                              min(((k if ax == axis else c) + 1) * s, n))
                        for ax, (c, s, n) in enumerate(zip(coords, chunks, shape, strict=True)))
            scanned = _accumulate(op, np.asarray(values_at(a, box)), axis, dtype, carry)
            result[box] = scanned
            carry = np.take(scanned, -1, axis=axis)
    result.flush()
    return result


protocols.register_methods({"cumsum": partial(scan_op, "cumsum"),
                            "cumprod": partial(scan_op, "cumprod")})
