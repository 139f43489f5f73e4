"""numpy's functions and ufuncs on table columns that can hold missing values.

A nullable column (:class:`carray.table.columns.nullable.NullableColumn`) and a categorical
column (:class:`carray.table.columns.category.CategoryColumn`) mix in
:class:`MissingAwareArray`, so every numpy function or ufunc given one answers as
pandas' nullable dtypes do where pandas has an answer, else as numpy does on a masked
array, never counting a missing row's filler as a value:

* reductions skip missing rows: ``np.sum``, ``np.mean``, ``np.std``, ``np.median``,
  ``np.quantile``, the ``nan`` variants, ``np.histogram``, ``np.bincount``,
  ``np.corrcoef``... run on the rows present in every column operand (and in
  ``weights``), as pandas drops them pairwise.  With no value left, numpy's answer
  for no values (``sum`` 0, ``mean`` NaN), or ``np.ma.masked`` where numpy has none
  (``min``, ``quantile``);
* ``np.argmin``/``np.argmax`` (and ``nan`` variants) give the row of the extreme value
  present;
* ``np.sort``, ``np.argsort`` and ``np.unique`` put missing values last (``unique``
  as one masked entry, as ``np.ma.unique``), whatever the values' kind;
* ``np.isin`` is the column's ``isin`` (a missing row is a member only of values
  holding a missing marker, as pandas);
* every other function, and every ufunc, runs on the column as a
  ``numpy.ma.MaskedArray`` (masked where missing), so its result is masked there.

Reductions over an axis other than the rows (N-d columns) give a masked result for
each missing row.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from carray.compute.protocols import registered_method

# Functions whose answer skips missing rows.
_SKIPPING = {
    np.sum, np.prod, np.mean, np.std, np.var, np.min, np.max, np.amin, np.amax, np.ptp,
    np.median, np.average, np.quantile, np.percentile, np.nansum, np.nanprod, np.nanmean,
    np.nanstd, np.nanvar, np.nanmin, np.nanmax, np.nanmedian, np.nanquantile,
    np.nanpercentile, np.histogram, np.histogram_bin_edges, np.histogram2d, np.histogramdd,
    np.bincount, np.count_nonzero, np.any, np.all, np.corrcoef, np.cov,
}
# Reductions that answer with a position.
_POSITIONS = {np.argmin, np.argmax, np.nanargmin, np.nanargmax}
# The parameters of those functions that hold values aligned with the rows.
_DATA_PARAMS = ("a", "x", "y", "m", "weights", "sample")
# Reductions that keep booleans as they are, and extremes of any ordered values.
_EXTREMES = {np.min, np.max, np.amin, np.amax, np.nanmin, np.nanmax}
_LOGICAL = _EXTREMES | {np.any, np.all, np.count_nonzero, np.sum, np.nansum, np.mean,
                        np.nanmean}
# Reductions with an answer for no values at all (the others: np.ma.masked).
_IDENTITIES = {np.sum: 0, np.nansum: 0, np.prod: 1, np.nanprod: 1,
               np.count_nonzero: 0, np.any: False, np.all: True}


class MissingAwareArray:
    """numpy's protocols for a column that can hold missing values (see the module
    docstring); the column gives :meth:`masked_values`."""

    def masked_values(self) -> np.ma.MaskedArray:
        """Every row as a masked array, masked where a value is missing."""
        raise NotImplementedError

    def isin(self, values: Any, invert: bool = False) -> np.ndarray:
        """Booleans, True where the row holds one of ``values``, as pandas' ``isin``
        (a missing row is a member only when ``values`` holds None, NaN or NaT).

        Parameters
        ----------
        values : list-like
            The members.
        invert : bool
            True where the row is *not* one of them.

        Returns
        -------
        numpy.ndarray of bool
        """
        return registered_method("isin")(self, values, invert)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        return array_function(func, args, kwargs)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any,
                        **kwargs: Any) -> Any:
        return array_ufunc(ufunc, method, inputs, kwargs)


def _is_column(value: Any) -> bool:
    return isinstance(value, MissingAwareArray)


def _plain(value: Any) -> Any:
    """``value`` with every column in it (lists, tuples, dicts too) as a masked array."""
    if _is_column(value):
        return value.masked_values()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _row_mask(masked: np.ma.MaskedArray) -> np.ndarray:
    """True for each row with a missing value."""
    mask = np.asarray(np.ma.getmaskarray(masked))
    return np.asarray(mask.reshape(len(mask), -1).any(axis=1)) if mask.ndim > 1 else mask


def array_function(func: Any, args: tuple, kwargs: dict) -> Any:
    """numpy's ``func`` on ``args`` holding columns with missing values."""
    if func in _SKIPPING or func in _POSITIONS:
        bound = _bind(func, args, kwargs)
        if bound is not None:
            if func in _POSITIONS:
                return _position(func, bound)
            return _skipping(func, bound)
    special = _SPECIAL.get(func)
    if special is not None and args and _is_column(args[0]):
        return special(args[0].masked_values(), *args[1:], **kwargs)
    if func is np.isin:
        bound = _bind(func, args, kwargs)
        if bound is not None:
            return _isin(bound)
    return func(*_plain(args), **_plain(kwargs))


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``ufunc``'s ``method`` with columns as masked arrays; a reduction skips missing
    rows."""
    if method == "reduce" and len(inputs) == 1 and kwargs.get("axis", 0) in (0, None):
        values = inputs[0].masked_values()
        present = np.ma.getdata(values)[~_row_mask(values)]
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        return _quietly(lambda: ufunc.reduce(present, **kwargs), None)
    return getattr(ufunc, method)(*_plain(inputs), **_plain(kwargs))


def _isin(bound: inspect.BoundArguments) -> Any:
    """``np.isin``: a column's ``isin`` (pandas' answer for missing rows); a column as
    the members gives the values it holds."""
    element, members = bound.arguments["element"], bound.arguments["test_elements"]
    if _is_column(members):
        values = members.masked_values()
        bound.arguments["test_elements"] = np.ma.getdata(values)[~_row_mask(values)]
    if _is_column(element):
        return element.isin(bound.arguments["test_elements"],
                            invert=bool(bound.arguments.get("invert", False)))
    return np.isin(*_plain(bound.args), **_plain(bound.kwargs))


def _bind(func: Any, args: tuple, kwargs: dict) -> inspect.BoundArguments | None:
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except (TypeError, ValueError):  # a call numpy itself refuses: let it say why
        return None
    return bound


def _axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(int(a) % ndim for a in axes)


def _skipping(func: Any, bound: inspect.BoundArguments) -> Any:
    """A reduction over the rows present in every column operand."""
    names = [n for n in _DATA_PARAMS if n in bound.arguments]
    columns = {n: bound.arguments[n].masked_values() for n in names
               if _is_column(bound.arguments[n])}
    lengths = {len(v) for v in columns.values()}
    first = next(iter(columns.values()), None)
    if first is None or len(lengths) != 1:
        return func(*_plain(bound.args), **_plain(bound.kwargs))
    axes = _axes(bound.arguments.get("axis"), first.ndim)
    if first.ndim > 1 and axes is not None and 0 not in axes:
        return _per_row(func, bound, columns)
    missing = np.zeros(lengths.pop(), dtype=bool)
    for values in columns.values():
        missing |= _row_mask(values)
    for n in names:
        value = bound.arguments[n]
        if n in columns:
            bound.arguments[n] = _as_pandas_would(func, np.ma.getdata(columns[n])[~missing])
        elif np.ndim(value) and len(value) == len(missing):  # weights beside the rows
            bound.arguments[n] = np.asarray(value)[~missing]
    empty = not np.count_nonzero(~missing)
    return _quietly(lambda: func(*bound.args, **bound.kwargs),
                    _IDENTITIES.get(func, np.ma.masked) if empty else None)


def _as_pandas_would(func: Any, values: np.ndarray) -> np.ndarray:
    """Values present, of a type numpy's ``func`` takes where pandas has an answer:
    booleans counted as 0 and 1 by arithmetic (the median of booleans), text compared as
    Python strings (the minimum of fixed-width strings)."""
    if values.dtype.kind == "b" and func not in _LOGICAL:
        return values.astype(np.int64)
    if values.dtype.kind in "SU" and func in _EXTREMES:
        return values.astype(object)
    return values


def _per_row(func: Any, bound: inspect.BoundArguments,
             columns: dict[str, np.ma.MaskedArray]) -> Any:
    """A reduction within each row (an N-d column, over axes other than the rows): a
    missing row's answer is masked."""
    missing = np.zeros(len(next(iter(columns.values()))), dtype=bool)
    for n, values in columns.items():
        missing |= _row_mask(values)
        bound.arguments[n] = np.ma.getdata(values)
    out = np.asarray(func(*bound.args, **bound.kwargs))
    mask = np.broadcast_to(missing.reshape(-1, *[1] * (out.ndim - 1)), out.shape)
    return np.ma.MaskedArray(out, mask=mask)


def _position(func: Any, bound: inspect.BoundArguments) -> Any:
    """The row of the extreme value present (1-d), else numpy's masked answer."""
    values = bound.arguments["a"].masked_values()
    if values.ndim > 1 or bound.arguments.get("axis") not in (None, 0):
        masked_func = np.ma.argmin if func in (np.argmin, np.nanargmin) else np.ma.argmax
        return masked_func(values, axis=bound.arguments.get("axis"))
    rows = np.flatnonzero(~_row_mask(values))
    if not len(rows):
        return np.ma.masked
    bound.arguments["a"] = np.ma.getdata(values)[rows]
    return rows[func(*bound.args, **bound.kwargs)]


def _quietly(compute: Callable[[], Any], empty: Any) -> Any:
    """``compute()``; when there are no values (``empty`` not None) numpy's warnings
    for empty input are silenced, and its refusal (min of nothing) gives ``empty``."""
    if empty is None:
        return compute()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return compute()
        except (ValueError, IndexError):  # numpy has no answer for no values
            return empty


# -- orders: missing values last, whatever the values' kind ----------------------------------


def _sort(values: np.ma.MaskedArray, axis: Any = -1, kind: Any = None, order: Any = None,
          *, stable: Any = None) -> np.ma.MaskedArray:
    if values.ndim > 1 or axis is None or order is not None:
        return np.ma.sort(values, axis=axis, kind=kind, order=order)
    positions = _argsort(values, axis, kind, order, stable=stable)
    return values[positions]


def _argsort(values: np.ma.MaskedArray, axis: Any = -1, kind: Any = None, order: Any = None,
             *, stable: Any = None) -> np.ndarray:
    if values.ndim > 1 or axis is None or order is not None:
        return np.ma.argsort(values, axis=axis, kind=kind, order=order)
    missing = np.ma.getmaskarray(values)
    present = np.flatnonzero(~missing)
    inner = np.argsort(np.ma.getdata(values)[present], kind="stable" if stable else kind)
    return np.concatenate([present[inner], np.flatnonzero(missing)])


def _unique(values: np.ma.MaskedArray, return_index: bool = False,
            return_inverse: bool = False, return_counts: bool = False, axis: Any = None,
            **kwargs: Any) -> Any:
    """numpy's ``unique`` of the values present, then one masked entry when any is
    missing (its first row, its rows, its count)."""
    if values.ndim > 1 or axis is not None:
        unique: Any = np.unique  # numpy's overloads name each flag's literal
        return unique(values, return_index, return_inverse, return_counts, axis, **kwargs)
    missing = np.ma.getmaskarray(values)
    rows = np.flatnonzero(~missing)
    found = np.unique(np.ma.getdata(values)[rows], return_index=True, return_inverse=True,
                      return_counts=True, **kwargs)
    uniq, index, inverse, counts = found
    index, full_inverse = rows[index], np.full(len(values), len(uniq), np.intp)
    full_inverse[rows] = np.ravel(inverse)
    out_mask = np.zeros(len(uniq), dtype=bool)
    if missing.any():
        uniq = np.append(uniq, uniq[:1] if len(uniq) else np.ma.getdata(values)[:1])
        out_mask = np.append(out_mask, True)
        index = np.append(index, np.flatnonzero(missing)[0])
        counts = np.append(counts, np.count_nonzero(missing))
    parts: list[Any] = [np.ma.MaskedArray(uniq, mask=out_mask)]
    parts += [index] if return_index else []
    parts += [full_inverse] if return_inverse else []
    parts += [counts] if return_counts else []
    return parts[0] if len(parts) == 1 else tuple(parts)


_SPECIAL: dict[Any, Callable[..., Any]] = {np.sort: _sort, np.argsort: _argsort,
                                            np.unique: _unique}

__all__ = ["MissingAwareArray", "array_function", "array_ufunc"]
