"""Lazy elementwise expressions over carrays, numpy arrays and scalars.

``a * b + 1``, ``np.sin(a)``, ``(a > 0) & (b < 0)`` or ``np.where(c, x, y)``
with a carray (or another expression) among the operands build a
:class:`LazyExpr`: a tree of numpy ufuncs whose leaves are carrays, numpy
arrays and scalars.  Nothing is read until a value is asked for: ``expr[key]``
evaluates only the items the key selects (decoding only the chunks, and the
blocks inside them, that hold them), reductions stream over the chunks
(:mod:`carray.compute.reduce`), and :meth:`LazyExpr.compute` writes a new carray
chunk by chunk.

Operands broadcast as in numpy; the result dtype is the one numpy would give
(found by applying the same ufuncs to empty arrays of the operands' dtypes,
with Python scalars kept as Python scalars so NEP 50's rules apply unchanged).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from carray.chunks.keys import orthogonal_key
from carray.codecs import parallel as _parallel
from carray.compute._types import is_carray
from carray.compute.ops import numexpr_text
from carray.errors import BroadcastError, UnsupportedDTypeError

try:
    import numexpr
except ImportError:  # numpy evaluates everything, with more temporaries
    numexpr = None

#: Below this many items a block is evaluated with numpy: numexpr's per-call cost wins.
NUMEXPR_MIN_ITEMS = 1 << 15

# The ufuncs of a lazy expression as the operators and functions of an expression's
# text: numexpr evaluates a tree when compute.ops.numexpr_text (the one rule) says its
# answer is numpy's.
_AS_BINOP = {np.add: ast.Add, np.subtract: ast.Sub, np.multiply: ast.Mult,
             np.true_divide: ast.Div, np.power: ast.Pow, np.bitwise_and: ast.BitAnd,
             np.bitwise_or: ast.BitOr, np.bitwise_xor: ast.BitXor}
_AS_LOGICAL = {np.logical_and: ast.BitAnd, np.logical_or: ast.BitOr}  # bool operands only
_AS_COMPARE = {np.less: ast.Lt, np.less_equal: ast.LtE, np.greater: ast.Gt,
               np.greater_equal: ast.GtE, np.equal: ast.Eq, np.not_equal: ast.NotEq}
_AS_CALL = {np.sin: "sin", np.cos: "cos", np.tan: "tan", np.arcsin: "arcsin",
            np.arccos: "arccos", np.arctan: "arctan", np.sinh: "sinh", np.cosh: "cosh",
            np.tanh: "tanh", np.arcsinh: "arcsinh", np.arccosh: "arccosh",
            np.arctanh: "arctanh", np.exp: "exp", np.expm1: "expm1", np.log: "log",
            np.log10: "log10", np.log1p: "log1p", np.sqrt: "sqrt", np.absolute: "abs",
            np.arctan2: "arctan2", np.floor: "floor", np.ceil: "ceil", np.where: "where"}


def is_scalar(value: Any) -> bool:
    """Python and numpy scalars (operands that are the same everywhere)."""
    return isinstance(value, (bool, int, float, complex, np.generic))


def as_operand(value: Any) -> Any:
    """``value`` as an expression operand: expressions, carrays, numpy arrays and scalars
    are kept; anything else array-like becomes a numpy array."""
    if isinstance(value, Expr) or is_carray(value) or isinstance(value, np.ndarray) \
            or is_scalar(value):
        return value
    arr = np.asarray(value)
    if arr.dtype == object:
        raise UnsupportedDTypeError(f"cannot use {type(value).__name__} as an operand of a "
                                    "lazy expression: it is not numeric array-like")
    return arr


def _probe(value: Any) -> Any:
    """A stand-in with the operand's dtype and no items, for dtype inference."""
    return value if is_scalar(value) else np.empty(0, dtype=value.dtype)


def leaf_selection(sel: tuple[Any, ...], out_shape: tuple[int, ...],
                   shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The part of an operand of ``shape`` that selection ``sel`` of ``out_shape`` needs:
    axes are aligned on the right, and an operand's length-1 axes (broadcast) are taken
    whole."""
    skip = len(out_shape) - len(shape)
    return tuple(slice(None) if n == 1 and m != 1 else s
                 for s, n, m in zip(sel[skip:], shape, out_shape[skip:], strict=True))


def read_leaf(leaf: Any, sel: tuple[Any, ...]) -> Any:
    """The selected items of one operand (orthogonal: one entry per axis)."""
    if is_scalar(leaf):
        return leaf
    if isinstance(leaf, np.ndarray):
        if leaf.ndim == 0:
            return leaf
        out = leaf
        arrays = [i for i, s in enumerate(sel) if not isinstance(s, slice)]
        if len(arrays) <= 1:
            return leaf[sel]
        for i, s in enumerate(sel):  # several index arrays: one axis at a time
            out = out[(slice(None),) * i + (s,)]
        return out
    out = leaf[sel]
    return np.asarray(out)


class Expr:
    """An elementwise expression, evaluated only when its values are asked for (the
    core of :class:`carray.compute.LazyExpr`, which adds numpy's protocols).

    Parameters
    ----------
    func : numpy ufunc or numpy.where
        The operation of the root node.
    args : sequence
        Its operands: expressions, carrays, numpy arrays or scalars.

    Raises
    ------
    BroadcastError
        The operands' shapes do not broadcast together.
    UnsupportedDTypeError
        numpy has no loop of ``func`` for the operands' dtypes.
    """

    def __init__(self, func: Any, args: tuple[Any, ...] | list[Any]) -> None:
        self._func = func
        self._args = tuple(as_operand(a) for a in args)
        shapes = [np.shape(a) if is_scalar(a) else tuple(a.shape) for a in self._args]
        try:
            self._shape = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise BroadcastError(f"operands of {self._name()} with shapes "
                                 f"{', '.join(map(str, shapes))} do not broadcast "
                                 "together") from None
        try:
            probe = func(*(_probe(a) for a in self._args))
        except TypeError as exc:
            dtypes = ", ".join(str(np.result_type(a)) if is_scalar(a) else str(a.dtype)
                               for a in self._args)
            raise UnsupportedDTypeError(f"{self._name()} is not defined for operands of "
                                        f"dtypes {dtypes}: {exc}") from None
        self._dtype = np.asarray(probe).dtype
        self._numexpr: tuple[str, list[Any]] | None | bool = False  # not planned yet

    def _name(self) -> str:
        return getattr(self._func, "__name__", str(self._func))

    # -- description ---------------------------------------------------------------------

    @property
    def func(self) -> Any:
        """The root node's operation (a numpy ufunc or ``numpy.where``)."""
        return self._func

    @property
    def args(self) -> tuple[Any, ...]:
        """The root node's operands."""
        return self._args

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the result, were it computed whole."""
        return self.size * self._dtype.itemsize

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d expression")
        return self._shape[0]

    def leaves(self) -> Iterator[Any]:
        """Every operand that is not an expression (carrays, arrays, scalars), depth first."""
        for a in self._args:
            if isinstance(a, Expr):
                yield from a.leaves()
            else:
                yield a

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()}, shape={self._shape}, dtype={self._dtype})"

    def describe(self) -> str:
        """The expression as nested calls, e.g. ``add(multiply(<carray ...>, 2), 1)``."""
        parts = []
        for a in self._args:
            if isinstance(a, Expr):
                parts.append(a.describe())
            elif is_scalar(a):
                parts.append(repr(a))
            else:
                parts.append(f"<{type(a).__name__} {tuple(a.shape)} {a.dtype}>")
        return f"{self._name()}({', '.join(parts)})"

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("the truth value of an expression with more than one element "
                             "is ambiguous; use .any() or .all()")
        return bool(self[(0,) * self.ndim])

    # -- evaluation ----------------------------------------------------------------------

    def evaluate(self, sel: tuple[Any, ...]) -> np.ndarray:
        """The values at orthogonal selection ``sel`` (one slice or 1-d int array per axis),
        broadcast to the selection's shape."""
        sizes = tuple(len(range(n)[s]) if isinstance(s, slice) else len(s)
                      for s, n in zip(sel, self._shape, strict=True))
        # numexpr serialises concurrent calls on its own lock, so on worker threads (each
        # evaluating its own chunk) numpy is faster; numexpr pays off on one big selection.
        plan = self.numexpr_plan() if math.prod(sizes) >= NUMEXPR_MIN_ITEMS and \
            not _parallel.in_worker() else None
        if plan is not None:
            text, leaves = plan
            env = {f"v{i}": read_leaf(leaf, leaf_selection(sel, self._shape, leaf.shape))
                   for i, leaf in enumerate(leaves)}
            value = numexpr.evaluate(text, local_dict=env, global_dict={})
        else:
            value = self.evaluate_numpy(sel, {})
        value = np.asarray(value)
        if value.dtype != self._dtype:
            value = value.astype(self._dtype)
        return np.broadcast_to(value, sizes) if value.shape != sizes else value

    def evaluate_numpy(self, sel: tuple[Any, ...], read: dict[int, Any]) -> Any:
        """The values at ``sel`` evaluated node by node with numpy; ``read`` holds the
        operands already read (by ``id``), so ``a * a`` decodes ``a`` once."""
        values = []
        scratch = None  # an intermediate result this node may overwrite
        for a in self._args:
            if isinstance(a, Expr):
                value = a.evaluate_numpy(leaf_selection(sel, self._shape, a.shape), read)
                if isinstance(value, np.ndarray) and value.dtype == self._dtype and \
                        value.flags.writeable and value.base is None:
                    scratch = value
                values.append(value)
            elif is_scalar(a):
                values.append(a)
            else:
                if id(a) not in read:
                    read[id(a)] = read_leaf(a, leaf_selection(sel, self._shape, a.shape))
                values.append(read[id(a)])
        if scratch is not None and isinstance(self._func, np.ufunc) and \
                self._func.nout == 1 and \
                np.broadcast_shapes(*(np.shape(v) for v in values)) == scratch.shape:
            # Reusing a child's result saves allocating (and page-faulting) a new chunk.
            return self._func(*values, out=scratch)
        return self._func(*values)

    def numexpr_plan(self) -> tuple[str, list[Any]] | None:
        """The numexpr text of this tree and its array operands (named ``v0``, ``v1``...),
        or None when numexpr would not give numpy's result (other dtypes, functions)."""
        if self._numexpr is False:
            leaves: list[Any] = []
            text = self.numexpr_text(leaves) if numexpr is not None else None
            self._numexpr = (text, leaves) if text is not None else None
        return self._numexpr  # type: ignore[return-value]

    def numexpr_text(self, leaves: list[Any]) -> str | None:
        """This tree in numexpr's syntax, appending its array operands to ``leaves``
        (named ``v0``, ``v1``...); None when numexpr would not give numpy's result."""
        dtypes: dict[str, Any] = {}
        tree = self.syntax_tree(leaves, dtypes)
        return numexpr_text(tree, dtypes) if tree is not None else None

    def syntax_tree(self, leaves: list[Any], dtypes: dict[str, Any]) -> ast.expr | None:
        """This tree as an expression's syntax tree (None: a node text has no form for)."""
        args: list[ast.expr] = []
        for a in self._args:
            if isinstance(a, Expr):
                node = a.syntax_tree(leaves, dtypes)
            elif is_scalar(a):
                node = ast.Constant(a) if isinstance(a, (bool, int, float)) and \
                    math.isfinite(a) and abs(a) < 2**31 else None
            elif getattr(a, "ndim", 0) > 0:
                seen = [i for i, leaf in enumerate(leaves) if leaf is a]
                if not seen:
                    leaves.append(a)
                name = f"v{seen[0] if seen else len(leaves) - 1}"
                dtypes[name] = a.dtype
                node = ast.Name(name)
            else:
                node = None
            if node is None:
                return None
            args.append(node)
        return _node_of(self._func, args, [_kind_of(a) for a in self._args])

    def selection(self, key: Any) -> tuple[tuple[Any, ...], Any]:
        """``key`` normalised: per-axis slices or index arrays, and what finishes the result
        (the :class:`carray.chunks.keys.OrthoKey`)."""
        okey = orthogonal_key(key, self._shape)
        sel = tuple(_as_slice(a) if isinstance(a, range) else a for a in okey.axes)
        return sel, okey

    def __getitem__(self, key: Any) -> Any:
        """The values ``key`` selects (carray's orthogonal rule: each axis on its own).

        Only the chunks of carray operands that hold selected items are read.
        """
        sel, okey = self.selection(key)
        out = okey.finish(np.ascontiguousarray(self.evaluate(sel)))
        return out[()] if out.ndim == 0 else out


def _kind_of(operand: Any) -> str:
    return np.result_type(operand).kind if is_scalar(operand) else operand.dtype.kind


def _node_of(func: Any, args: list[ast.expr], kinds: list[str]) -> ast.expr | None:
    """The syntax node of ``func`` applied to ``args`` (None: none that means it)."""
    if func in _AS_LOGICAL and not all(k == "b" for k in kinds):
        return None  # logical and/or of numbers: no operator says it
    binop = _AS_BINOP.get(func) or _AS_LOGICAL.get(func)
    if binop is not None and len(args) == 2:
        return ast.BinOp(args[0], binop(), args[1])
    if func in _AS_COMPARE and len(args) == 2:
        return ast.Compare(args[0], [_AS_COMPARE[func]()], [args[1]])
    if func is np.negative and len(args) == 1:
        return ast.UnaryOp(ast.USub(), args[0])
    if (func is np.invert or (func is np.logical_not and kinds == ["b"])) and len(args) == 1:
        return ast.UnaryOp(ast.Invert(), args[0])
    if func in _AS_CALL:
        return ast.Call(ast.Name(_AS_CALL[func]), args, [])
    return None


def _as_slice(r: range) -> slice:
    """A range of positions as the slice that selects it (negative steps included)."""
    if len(r) == 0:
        return slice(0, 0, 1)
    stop = r.start + len(r) * r.step
    return slice(r.start, stop if stop >= 0 else None, r.step)
