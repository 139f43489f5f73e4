"""numpy's NaN-ignoring reductions (``nansum``, ``nanmean``, ``nanmin``, ``nanargmax``...)
streamed over the chunks, on top of :func:`carray.compute.reduce.reduce`.

As numpy does, NaN is replaced lazily by a value that cannot change the result
(0 for a sum, 1 for a product, +inf for a minimum) or masked out with
``where=``; the reductions of integers and booleans are the plain ones.  Cells
where every item is NaN get numpy's answer and warning (NaN and a
RuntimeWarning; ``nanargmin``/``nanargmax`` raise ValueError): they are found by
a second, counting pass, run only when the first result holds a value such a
cell could produce.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from carray.compute.protocols import LazyExpr
from carray.compute.reduce import NO_VALUE, reduce
from carray.errors import AllNaNError


def _lazy(func: Any, *args: Any) -> LazyExpr:
    return LazyExpr(func, args)


def _floats(a: Any) -> bool:
    return bool(np.dtype(a.dtype).kind in "fc")


def _valid(a: Any, where: Any) -> Any:
    """Lazily: not NaN, and ``where``."""
    mask = _lazy(np.logical_not, _lazy(np.isnan, a))
    return mask if where is True else _lazy(np.logical_and, mask, where)


def _replaced(a: Any, fill: Any) -> Any:
    return _lazy(np.where, _lazy(np.isnan, a), fill, a)


def _counts(a: Any, axis: Any, keepdims: bool, where: Any) -> np.ndarray:
    """Items per cell that are not NaN (and ``where``)."""
    if where is True:
        return np.asarray(reduce("count_nonzero", _valid(a, where), axis, keepdims=keepdims))
    return np.asarray(reduce("sum", _valid(a, where), axis, keepdims=keepdims, dtype=np.intp))


def _out(result: Any, out: np.ndarray | None) -> Any:
    if out is not None:
        out[...] = result
        return out
    return result


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
           keepdims: bool = False, initial: Any = NO_VALUE, where: Any = True) -> Any:
    """Sum treating NaN as zero, as ``numpy.nansum``."""
    src = _replaced(a, 0) if _floats(a) else a
    return reduce("sum", src, axis, out, dtype=dtype, keepdims=keepdims, initial=initial,
                  where=where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
            keepdims: bool = False, initial: Any = NO_VALUE, where: Any = True) -> Any:
    """Product treating NaN as one, as ``numpy.nanprod``."""
    src = _replaced(a, 1) if _floats(a) else a
    return reduce("prod", src, axis, out, dtype=dtype, keepdims=keepdims, initial=initial,
                  where=where)


def _fix_empty(result: Any, a: Any, axis: Any, keepdims: bool, where: Any, ddof: float,
               message: str) -> Any:
    """NaN (and one RuntimeWarning) where a cell has no more than ``ddof`` items that are
    not NaN; checked only when the result holds a value such a cell could give."""
    arr = np.asarray(result)
    if arr.dtype.kind not in "fc" or bool(np.isfinite(arr).all()):
        return result
    bad = _counts(a, axis, keepdims, where) - ddof <= 0
    if not bad.any():
        return result
    warnings.warn(message, RuntimeWarning, stacklevel=4)
    arr = np.array(arr)
    arr[bad] = np.nan
    return arr[()] if arr.ndim == 0 else arr


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
            keepdims: bool = False, *, where: Any = True) -> Any:
    """Mean of the items that are not NaN, as ``numpy.nanmean``."""
    if not _floats(a):
        return reduce("mean", a, axis, out, dtype=dtype, keepdims=keepdims, where=where)
    result = reduce("mean", a, axis, dtype=dtype, keepdims=keepdims, where=_valid(a, where))
    return _out(_fix_empty(result, a, axis, keepdims, where, 0, "Mean of empty slice"), out)


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
           ddof: float = 0, keepdims: bool = False, *, where: Any = True,
           mean: Any = NO_VALUE, correction: Any = NO_VALUE) -> Any:
    """Variance of the items that are not NaN, as ``numpy.nanvar``."""
    return _nan_spread("var", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
           ddof: float = 0, keepdims: bool = False, *, where: Any = True,
           mean: Any = NO_VALUE, correction: Any = NO_VALUE) -> Any:
    """Standard deviation of the items that are not NaN, as ``numpy.nanstd``."""
    return _nan_spread("std", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


def _nan_spread(op: str, a: Any, axis: Any, dtype: Any, out: np.ndarray | None,
                ddof: float, keepdims: bool, where: Any, mean: Any, correction: Any) -> Any:
    if mean is not NO_VALUE:
        raise TypeError(f"nan{op}(mean=...) is not supported on carrays")
    if correction is not NO_VALUE:
        if ddof != 0:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    if not _floats(a):
        return reduce(op, a, axis, out, dtype=dtype, ddof=ddof, keepdims=keepdims,
                      where=where)
    result = reduce(op, a, axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                    where=_valid(a, where))
    return _out(_fix_empty(result, a, axis, keepdims, where, ddof,
                           "Degrees of freedom <= 0 for slice."), out)


def nanmin(a: Any, axis: Any = None, out: np.ndarray | None = None, keepdims: bool = False,
           initial: Any = NO_VALUE, where: Any = True) -> Any:
    """Minimum ignoring NaN, as ``numpy.nanmin``."""
    return _nan_extreme("min", a, axis, out, keepdims, initial, where)


def nanmax(a: Any, axis: Any = None, out: np.ndarray | None = None, keepdims: bool = False,
           initial: Any = NO_VALUE, where: Any = True) -> Any:
    """Maximum ignoring NaN, as ``numpy.nanmax``."""
    return _nan_extreme("max", a, axis, out, keepdims, initial, where)


def _nan_extreme(op: str, a: Any, axis: Any, out: np.ndarray | None, keepdims: bool,
                 initial: Any, where: Any) -> Any:
    if np.dtype(a.dtype).kind != "f":
        return reduce(op, a, axis, out, keepdims=keepdims, initial=initial, where=where)
    fill = np.inf if op == "min" else -np.inf
    result = reduce(op, _replaced(a, fill), axis, keepdims=keepdims, initial=initial,
                    where=where)
    if initial is NO_VALUE:
        result = _fix_empty(result, a, axis, keepdims, where, 0, "All-NaN slice encountered")
    return _out(result, out)


def nanargmin(a: Any, axis: int | None = None, out: np.ndarray | None = None, *,
              keepdims: bool = False) -> Any:
    """Position of the minimum ignoring NaN, as ``numpy.nanargmin``.

    Raises
    ------
    AllNaNError
        A ValueError: some slice holds only NaN.
    """
    return _nan_arg("argmin", a, axis, out, keepdims)


def nanargmax(a: Any, axis: int | None = None, out: np.ndarray | None = None, *,
              keepdims: bool = False) -> Any:
    """Position of the maximum ignoring NaN, as ``numpy.nanargmax`` (see
    :func:`nanargmin`)."""
    return _nan_arg("argmax", a, axis, out, keepdims)


def _nan_arg(op: str, a: Any, axis: Any, out: np.ndarray | None, keepdims: bool) -> Any:
    if np.dtype(a.dtype).kind != "f":
        return reduce(op, a, axis, out, keepdims=keepdims)
    if a.size and bool(np.any(reduce("all", _lazy(np.isnan, a), axis))):
        raise AllNaNError("All-NaN slice encountered")
    fill = np.inf if op == "argmin" else -np.inf
    return reduce(op, _replaced(a, fill), axis, out, keepdims=keepdims)


def nan_filled(a: Any, fill: Any) -> Any:
    """``a`` with NaN replaced by ``fill``, lazily (``a`` itself when it holds no floats)."""
    return _replaced(a, fill) if _floats(a) else a
