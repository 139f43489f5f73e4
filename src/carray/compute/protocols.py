"""numpy's protocols and operators for carrays and lazy expressions.

:class:`ComputeMixin` gives its subclasses (``carray`` and :class:`LazyExpr`)

* Python's arithmetic, comparison and bitwise operators, building lazy
  expressions;
* ``__array_ufunc__``: numpy's elementwise ufuncs build lazy expressions too,
  and ``ufunc.reduce`` of add, multiply, minimum, maximum, logical_or and
  logical_and streams like the reductions below;
* ``__array_function__``: ``np.sum``, ``np.mean``, ``np.std``, ``np.max``,
  ``np.argmax``, ``np.count_nonzero``... stream chunk by chunk
  (:mod:`carray.compute.reduce`), and ``np.where(c, x, y)`` is lazy.  Any
  other numpy function is applied to ``np.asarray`` of the operands when they
  hold at most :data:`FALLBACK_BYTES` together, and raises TypeError beyond
  that, rather than decompress a large array into memory unasked;
* the same reductions as methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from carray.compute import evaluate, reduce
from carray.compute.expr import Expr
from carray.compute.reduce import NO_VALUE

#: numpy functions the compute layer does not implement run on ``np.asarray`` of carray
#: operands up to this many bytes (all of them together); beyond it they raise TypeError.
FALLBACK_BYTES = 64 * 2**20

_UFUNC_REDUCTIONS = {np.add: "sum", np.multiply: "prod", np.minimum: "min",
                     np.maximum: "max", np.logical_or: "any", np.logical_and: "all"}


def is_ours(value: Any) -> bool:
    """Whether ``value`` is a carray or a lazy expression (computed here)."""
    return isinstance(value, ComputeMixin)


def _is_dtype_like(value: Any) -> bool:
    return isinstance(value, (str, type, np.dtype)) and not isinstance(value, bool)


class ComputeMixin:
    """Operators, numpy protocols and reductions over ``shape``, ``dtype`` and reading by
    key; see the module docstring."""

    __hash__ = object.__hash__  # defining __eq__ would otherwise remove hashing

    # -- operators -------------------------------------------------------------------------

    def __add__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.add, (self, other))

    def __radd__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.add, (other, self))

    def __sub__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.subtract, (self, other))

    def __rsub__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.subtract, (other, self))

    def __mul__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.multiply, (self, other))

    def __rmul__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.multiply, (other, self))

    def __truediv__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.true_divide, (self, other))

    def __rtruediv__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.true_divide, (other, self))

    def __floordiv__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.floor_divide, (self, other))

    def __rfloordiv__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.floor_divide, (other, self))

    def __mod__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.remainder, (self, other))

    def __rmod__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.remainder, (other, self))

    def __pow__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.power, (self, other))

    def __rpow__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.power, (other, self))

    def __and__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.bitwise_and, (self, other))

    def __rand__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.bitwise_and, (other, self))

    def __or__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.bitwise_or, (self, other))

    def __ror__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.bitwise_or, (other, self))

    def __xor__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.bitwise_xor, (self, other))

    def __rxor__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.bitwise_xor, (other, self))

    def __lshift__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.left_shift, (self, other))

    def __rshift__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.right_shift, (self, other))

    def __lt__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.less, (self, other))

    def __le__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.less_equal, (self, other))

    def __gt__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.greater, (self, other))

    def __ge__(self, other: Any) -> LazyExpr:
        return LazyExpr(np.greater_equal, (self, other))

    def __eq__(self, other: Any) -> LazyExpr:  # type: ignore[override]
        return LazyExpr(np.equal, (self, other))

    def __ne__(self, other: Any) -> LazyExpr:  # type: ignore[override]
        return LazyExpr(np.not_equal, (self, other))

    def __neg__(self) -> LazyExpr:
        return LazyExpr(np.negative, (self,))

    def __pos__(self) -> LazyExpr:
        return LazyExpr(np.positive, (self,))

    def __abs__(self) -> LazyExpr:
        return LazyExpr(np.absolute, (self,))

    def __invert__(self) -> LazyExpr:
        return LazyExpr(np.invert, (self,))

    # -- numpy protocols -----------------------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        for x in inputs:
            if not (is_ours(x) or isinstance(x, np.ndarray)) and \
                    getattr(type(x), "__array_ufunc__", None) is not None:
                return NotImplemented  # another library's array: let it decide
        if method == "reduce" and ufunc in _UFUNC_REDUCTIONS and len(inputs) == 1:
            kwargs.setdefault("axis", 0)
            return reduce.reduce(_UFUNC_REDUCTIONS[ufunc], inputs[0], **kwargs)
        if method != "__call__" or ufunc.nout != 1 or ufunc.signature is not None:
            return NotImplemented
        out = kwargs.pop("out", None)
        if kwargs:
            return NotImplemented
        expr = LazyExpr(ufunc, inputs)
        if out is None:
            return expr
        out[0][...] = np.asarray(expr)
        return out[0]

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        name = _FUNCTIONS.get(func)
        if name == "where" and len(args) + len(kwargs) == 3:
            return LazyExpr(np.where, (*args, *kwargs.values()))
        if name in ("shape", "ndim", "size") and len(args) == 1 and not kwargs:
            return getattr(args[0], name)
        if name in reduce.SIGNATURES and args and is_ours(args[0]):
            return getattr(args[0], name)(*args[1:], **kwargs)
        handler = _HANDLERS.get(func)
        if handler is not None:  # carray.compute.functions
            return handler(func, args, kwargs)
        return fallback(func, args, kwargs)

    # -- reductions ------------------------------------------------------------------------------

    def sum(self, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
            keepdims: bool = False, initial: Any = NO_VALUE, where: Any = True) -> Any:
        """Sum over ``axis`` (an int, a tuple, or None for all), as ``numpy.sum``; streamed
        chunk by chunk.  ``a.sum(dtype)`` (bcolz's form) also works."""
        if _is_dtype_like(axis) and dtype is None:
            axis, dtype = None, axis
        return reduce.reduce("sum", self, axis, out, dtype=dtype, keepdims=keepdims,
                             initial=initial, where=where)

    def prod(self, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
             keepdims: bool = False, initial: Any = NO_VALUE, where: Any = True) -> Any:
        """Product over ``axis``, as ``numpy.prod``."""
        return reduce.reduce("prod", self, axis, out, dtype=dtype, keepdims=keepdims,
                             initial=initial, where=where)

    def mean(self, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
             keepdims: bool = False, *, where: Any = True) -> Any:
        """Mean over ``axis``, as ``numpy.mean`` (an integer ``dtype`` is applied to the
        result: the sums run in float64, where numpy would truncate them)."""
        return reduce.reduce("mean", self, axis, out, dtype=dtype, keepdims=keepdims,
                             where=where)

    def var(self, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
            ddof: float = 0, keepdims: bool = False, *, where: Any = True) -> Any:
        """Variance over ``axis``, as ``numpy.var`` (chunks merged with Chan's formulas)."""
        return reduce.reduce("var", self, axis, out, dtype=dtype, ddof=ddof,
                             keepdims=keepdims, where=where)

    def std(self, axis: Any = None, dtype: Any = None, out: np.ndarray | None = None,
            ddof: float = 0, keepdims: bool = False, *, where: Any = True) -> Any:
        """Standard deviation over ``axis``, as ``numpy.std``."""
        return reduce.reduce("std", self, axis, out, dtype=dtype, ddof=ddof,
                             keepdims=keepdims, where=where)

    def min(self, axis: Any = None, out: np.ndarray | None = None, keepdims: bool = False,
            initial: Any = NO_VALUE, where: Any = True) -> Any:
        """Minimum over ``axis``, as ``numpy.min``; chunk summaries spare reads of 1-d
        arrays."""
        return reduce.reduce("min", self, axis, out, keepdims=keepdims, initial=initial,
                             where=where)

    def max(self, axis: Any = None, out: np.ndarray | None = None, keepdims: bool = False,
            initial: Any = NO_VALUE, where: Any = True) -> Any:
        """Maximum over ``axis``, as ``numpy.max``; chunk summaries spare reads of 1-d
        arrays."""
        return reduce.reduce("max", self, axis, out, keepdims=keepdims, initial=initial,
                             where=where)

    def any(self, axis: Any = None, out: np.ndarray | None = None, keepdims: bool = False,
            *, where: Any = True) -> Any:
        """Whether any item is true, as ``numpy.any``."""
        return reduce.reduce("any", self, axis, out, keepdims=keepdims, where=where)

    def all(self, axis: Any = None, out: np.ndarray | None = None, keepdims: bool = False,
            *, where: Any = True) -> Any:
        """Whether every item is true, as ``numpy.all``."""
        return reduce.reduce("all", self, axis, out, keepdims=keepdims, where=where)

    def argmin(self, axis: int | None = None, out: np.ndarray | None = None, *,
               keepdims: bool = False) -> Any:
        """Index of the (first) minimum, as ``numpy.argmin``."""
        return reduce.reduce("argmin", self, axis, out, keepdims=keepdims)

    def argmax(self, axis: int | None = None, out: np.ndarray | None = None, *,
               keepdims: bool = False) -> Any:
        """Index of the (first) maximum, as ``numpy.argmax``."""
        return reduce.reduce("argmax", self, axis, out, keepdims=keepdims)

    def count_nonzero(self, axis: Any = None, *, keepdims: bool = False) -> Any:
        """Number of non-zero items, as ``numpy.count_nonzero``."""
        return reduce.reduce("count_nonzero", self, axis, None, keepdims=keepdims)

    # -- arrays of the same items (carray.compute.transpose, carray.compute.scans) ----------

    def cumsum(self, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
        """Running sums as a new carray, as ``numpy.cumsum`` (no axis: in C order, 1-d)."""
        return _METHODS["cumsum"](self, axis, dtype, out)

    def cumprod(self, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
        """Running products as a new carray, as ``numpy.cumprod``."""
        return _METHODS["cumprod"](self, axis, dtype, out)

    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe",
               subok: bool = True, copy: bool = True) -> Any:
        """The items converted to ``dtype``, lazily (a LazyExpr), as ``numpy.ndarray.astype``;
        ``copy=False`` with the same dtype gives the array itself."""
        return _METHODS["astype"](self, dtype, order, casting, subok, copy)

    def transpose(self, *axes: Any) -> Any:
        """The axes permuted, lazily, as ``numpy.ndarray.transpose`` (reversed by default)."""
        order = axes[0] if len(axes) == 1 and (axes[0] is None or isinstance(
            axes[0], (tuple, list))) else axes
        return _METHODS["transpose"](self, tuple(order) if order else None)

    @property
    def T(self) -> Any:  # noqa: N802 - numpy's name
        """The axes reversed, lazily."""
        return self.transpose()

    def isin(self, values: Any, invert: bool = False) -> np.ndarray:
        """Booleans, True where the item is one of ``values``, as pandas' ``isin``.

        Parameters
        ----------
        values : list-like
            The members (a list, set, array, carray, string column or Series).
        invert : bool
            True where the item is *not* one of them.

        Returns
        -------
        numpy.ndarray of bool
            Of this array's shape, computed a block at a time
            (:mod:`carray.table.columns.membership`).
        """
        return _METHODS["isin"](self, values, invert)


class LazyExpr(ComputeMixin, Expr):
    """A lazy elementwise expression over carrays, numpy arrays and scalars.

    Built by operators and numpy ufuncs on carrays (see :mod:`carray.compute.expr`);
    ``expr[key]`` evaluates a selection, ``np.asarray(expr)`` everything, the
    reductions stream over chunks, and :meth:`compute` writes a new carray.
    """

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = evaluate.to_numpy(self)
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key: Any) -> Any:
        if _METHODS["is_mask_key"](self, key):
            return _METHODS["select"](self, key)
        return super().__getitem__(key)

    def compute(self, **kwargs: Any) -> Any:
        """Write the values into a new carray, chunk by chunk (chunks evaluated on worker
        threads, never the whole result in memory).

        Keyword arguments are as for :class:`carray.carray` (``rootdir=`` for disk,
        ``cparams``, ``chunks``...).  By default the new array has the chunk and
        block shape of the first carray operand shaped like the expression.
        """
        return evaluate.compute(self, **kwargs)


_FUNCTIONS: dict[Any, str] = {
    np.sum: "sum", np.prod: "prod", np.mean: "mean", np.std: "std", np.var: "var",
    np.min: "min", np.max: "max", np.amin: "min", np.amax: "max", np.any: "any",
    np.all: "all", np.argmin: "argmin", np.argmax: "argmax",
    np.count_nonzero: "count_nonzero", np.where: "where", np.shape: "shape",
    np.ndim: "ndim", np.size: "size",
}


# More numpy functions, registered by carray.compute.functions (which builds on this module).
_HANDLERS: dict[Any, Any] = {}
# Methods whose work lives in modules built on this one (scans, transpose, masks), which
# register it when imported (carray.compute imports them all).
_METHODS: dict[str, Callable[..., Any]] = {}


def register_methods(methods: dict[str, Callable[..., Any]]) -> None:
    """Add the implementations of methods named in ``methods`` (see ``_METHODS``)."""
    _METHODS.update(methods)


def registered_method(name: str) -> Callable[..., Any]:
    """The implementation registered for method ``name`` (for containers that share it
    without being carrays: string columns' ``isin``)."""
    return _METHODS[name]


def register_functions(handlers: dict[Any, Any]) -> None:
    """Add numpy functions ``__array_function__`` hands to ``handlers[func](func, args,
    kwargs)``."""
    _HANDLERS.update(handlers)


def fallback(func: Any, args: tuple, kwargs: dict) -> Any:
    """numpy's ``func`` on ``np.asarray`` of every carray or expression among the
    arguments, when they are small enough (see :data:`FALLBACK_BYTES`)."""
    found: list[Any] = []

    def walk(value: Any) -> None:
        if is_ours(value):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk((args, kwargs))
    total = sum(int(x.nbytes) for x in found)
    if total > FALLBACK_BYTES:
        raise TypeError(f"numpy.{func.__name__} is not implemented on carrays and would need "
                        f"{total} bytes decompressed (more than carray.compute.FALLBACK_BYTES "
                        f"= {FALLBACK_BYTES}); pass np.asarray(a) explicitly, or a slice")

    def plain(value: Any) -> Any:
        if is_ours(value):
            return np.asarray(value)
        if isinstance(value, list):
            return [plain(v) for v in value]
        if isinstance(value, tuple):
            return tuple(plain(v) for v in value)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return func(*plain(args), **plain(kwargs))
