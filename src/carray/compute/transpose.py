"""Lazy transposes and elementwise casts: ``a.T``, ``a.transpose(*axes)``,
``np.transpose(a, axes)``, ``a.astype(dtype)``, ``np.clip`` and ``np.round``.

A transpose is an expression node that permutes axes: evaluating a box of it
evaluates the permuted box of its operand and transposes the values, so only the
chunks of the operand that hold that box are read.  Casts, clipping and rounding
are ordinary elementwise nodes whose function is not a ufunc (numexpr and the
stored-order path leave them to numpy).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from carray.compute.expr import Expr, read_leaf
from carray.compute.protocols import LazyExpr, register_methods
from carray.errors import UnsupportedDTypeError, UnsupportedOptionError


def _permute(value: Any) -> Any:
    """numpy.transpose; the function a transpose node reports as its own."""
    return np.transpose(value)


class TransposedExpr(LazyExpr):
    """A lazy transpose of a carray or expression (see :func:`transpose`)."""

    def __init__(self, src: Any, axes: tuple[int, ...]) -> None:
        self._func = _permute
        self._args = (src,)
        self._axes = axes
        self._shape = tuple(int(src.shape[ax]) for ax in axes)
        self._dtype = np.dtype(src.dtype)
        self._numexpr = None

    @property
    def axes(self) -> tuple[int, ...]:
        """The operand's axis behind each axis of the result."""
        return self._axes

    def _source_selection(self, sel: tuple[Any, ...]) -> tuple[Any, ...]:
        back = [slice(None)] * len(self._axes)
        for out_ax, src_ax in enumerate(self._axes):
            back[src_ax] = sel[out_ax]
        return tuple(back)

    def evaluate_numpy(self, sel: tuple[Any, ...], read: dict[int, Any]) -> Any:
        src = self._args[0]
        inner = self._source_selection(sel)
        # A fresh cache: the operand is read at the permuted box, which the caller's cache
        # (keyed by operand alone) would mistake for its own.
        if isinstance(src, Expr):
            value = src.evaluate_numpy(inner, {})
        else:
            value = read_leaf(src, inner)
        sizes = tuple(len(range(n)[s]) if isinstance(s, slice) else len(s)
                      for s, n in zip(inner, src.shape, strict=True))
        return np.transpose(np.broadcast_to(value, sizes), self._axes)

    def evaluate(self, sel: tuple[Any, ...]) -> np.ndarray:
        return np.asarray(self.evaluate_numpy(sel, {}))

    def numexpr_text(self, leaves: list[Any]) -> str | None:
        return None

    def describe(self) -> str:
        src = self._args[0]
        inner = src.describe() if isinstance(src, Expr) else \
            f"<{type(src).__name__} {tuple(src.shape)} {src.dtype}>"
        return f"transpose({inner}, {self._axes})"

    def leaves(self) -> Iterator[Any]:
        src = self._args[0]
        if isinstance(src, Expr):
            yield from src.leaves()
        else:
            yield src


def transpose(a: Any, axes: Any = None) -> Any:
    """``a`` with its axes permuted, lazily (numpy's ``transpose``: reversed by default).

    Parameters
    ----------
    a : carray or LazyExpr
    axes : sequence of int, optional
        A permutation of the axes (negative allowed).

    Returns
    -------
    LazyExpr
        ``a`` itself when the permutation changes nothing.
    """
    ndim = len(a.shape)
    order = tuple(range(ndim))[::-1] if axes is None else \
        normalize_axis_tuple(tuple(axes), ndim)
    if len(order) != ndim:
        raise UnsupportedOptionError("axes don't match array")
    if order == tuple(range(ndim)):
        return a
    return TransposedExpr(a, order)


class _Cast:
    """``astype`` as an elementwise function."""

    def __init__(self, dtype: np.dtype, casting: str) -> None:
        self.dtype, self.casting = dtype, casting
        self.__name__ = f"astype[{dtype}]"

    def __call__(self, value: Any) -> np.ndarray:
        return np.asarray(value).astype(self.dtype, casting=self.casting)  # type: ignore[call-overload]


def astype(a: Any, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
           copy: bool = True) -> Any:
    """``a`` converted to ``dtype``, lazily, as ``numpy.ndarray.astype``.

    Raises
    ------
    UnsupportedDTypeError
        A TypeError: ``casting`` does not allow the conversion (numpy's rule).
    """
    target = np.dtype(dtype)
    if not np.can_cast(a.dtype, target, casting=casting):  # type: ignore[arg-type]
        raise UnsupportedDTypeError(f"Cannot cast array data from {a.dtype!r} to "
                                    f"{target!r} according to the rule {casting!r}")
    if target == a.dtype and not copy:
        return a
    return LazyExpr(_Cast(target, casting), (a,))


def clip(a: Any, a_min: Any = np._NoValue, a_max: Any = np._NoValue, out: Any = None, *,
         min: Any = np._NoValue, max: Any = np._NoValue, **kwargs: Any) -> Any:  # noqa: A002
    """``numpy.clip`` as a lazy expression (``out`` is filled when given)."""
    lo = a_min if a_min is not np._NoValue else (None if min is np._NoValue else min)
    hi = a_max if a_max is not np._NoValue else (None if max is np._NoValue else max)
    if lo is None and hi is None:
        raise UnsupportedOptionError("One of max or min must be given")
    if kwargs:
        raise TypeError(f"clip() keyword arguments {sorted(kwargs)} are not supported on "
                        "carrays")
    if lo is None:
        expr = LazyExpr(np.minimum, (a, hi))
    elif hi is None:
        expr = LazyExpr(np.maximum, (a, lo))
    else:
        expr = LazyExpr(np.clip, (a, lo, hi))
    return _fill(expr, out)


def _round(value: Any, decimals: Any) -> Any:
    return np.round(value, int(decimals))


def around(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """``numpy.round`` as a lazy expression (``out`` is filled when given)."""
    return _fill(LazyExpr(_round, (a, int(decimals))), out)


def _fill(expr: Any, out: Any) -> Any:
    if out is None:
        return expr
    out[...] = np.asarray(expr)
    return out


register_methods({"astype": astype, "transpose": transpose})

__all__ = ["TransposedExpr", "astype", "around", "clip", "transpose"]
