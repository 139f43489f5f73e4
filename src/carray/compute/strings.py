"""String expressions (``"a * b + 1"``) as lazy expressions.

The string is parsed and normalised by :mod:`carray.query` (which sits above
the ``carray`` class); this module turns the resulting :mod:`ast` tree into a
:class:`LazyExpr` whose operands are looked up in a mapping of names.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from carray.compute.protocols import ComputeMixin, LazyExpr
from carray.errors import ExpressionError

_BINOPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
           ast.Div: np.true_divide, ast.FloorDiv: np.floor_divide, ast.Mod: np.remainder,
           ast.Pow: np.power, ast.LShift: np.left_shift, ast.RShift: np.right_shift}
# numexpr's & | ^ are logical on booleans and bitwise on integers, as numpy's bitwise ufuncs.
_BITOPS = {ast.BitAnd: np.bitwise_and, ast.BitOr: np.bitwise_or, ast.BitXor: np.bitwise_xor}
#: The functions string expressions may call (numexpr's names).
FUNCTIONS: dict[str, Any] = {
    "where": np.where, "abs": np.absolute, "sqrt": np.sqrt, "exp": np.exp, "expm1": np.expm1,
    "log": np.log, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
    "arctan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh, "real": np.real,
    "imag": np.imag, "conj": np.conjugate, "floor": np.floor, "ceil": np.ceil,
}
_CMPOPS = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater,
           ast.GtE: np.greater_equal, ast.Eq: np.equal, ast.NotEq: np.not_equal}


def wants_lazy(names: Sequence[str], scope: Mapping[str, Any]) -> bool:
    """Whether an expression over ``names`` is for the lazy machinery: some operand is an
    N-d carray or a lazy expression (1-d carrays keep bcolz's block evaluator)."""
    return any(isinstance(scope.get(n), ComputeMixin) and
               (isinstance(scope[n], LazyExpr) or scope[n].ndim > 1) for n in names)


def expression(tree: ast.AST, names: Mapping[str, Any],
               functions: Mapping[str, Callable[..., Any]] = FUNCTIONS) -> Any:
    """A lazy expression (or a plain value, when no operand is an array) from a normalised
    expression tree, its variables ``names`` and the callable of each function name.

    Raises
    ------
    ExpressionError
        The tree names a variable missing from ``names``.
    """
    if isinstance(tree, ast.Expression):
        return expression(tree.body, names, functions)
    if isinstance(tree, ast.Constant):
        return tree.value
    if isinstance(tree, ast.Name):
        if tree.id not in names:
            raise ExpressionError(f"{tree.id!r} is not a known variable")
        return names[tree.id]
    if isinstance(tree, ast.BinOp):
        op: Any = _BINOPS.get(type(tree.op)) or _BITOPS.get(type(tree.op))
        if op is None:
            raise ExpressionError(f"unsupported operator {type(tree.op).__name__}")
        return _apply(op, expression(tree.left, names, functions),
                      expression(tree.right, names, functions))
    if isinstance(tree, ast.UnaryOp):
        value = expression(tree.operand, names, functions)
        if isinstance(tree.op, ast.UAdd):
            return value
        op = np.negative if isinstance(tree.op, ast.USub) else np.invert
        if isinstance(tree.op, ast.Not):
            op = np.logical_not
        return _apply(op, value)
    if isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _CMPOPS:
        return _apply(_CMPOPS[type(tree.ops[0])], expression(tree.left, names, functions),
                      expression(tree.comparators[0], names, functions))
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and \
            tree.func.id in functions:
        args = [expression(a, names, functions) for a in tree.args]
        return _apply(functions[tree.func.id], *args)
    raise ExpressionError(f"{ast.unparse(tree)!r} is not allowed in an array expression")


def _apply(func: Any, *args: Any) -> Any:
    """``func`` on the operands: lazy when one is an array or expression."""
    if not any(hasattr(a, "shape") or isinstance(a, (list, tuple)) for a in args):
        return func(*args)
    return LazyExpr(func, args)
