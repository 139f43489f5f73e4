"""String expressions (``"a * b + 1"``) as lazy expressions.

The string is parsed and normalised by :mod:`carray.compute.parse`, and its
nodes mean what :mod:`carray.compute.ops` says (the table queries use the same
two modules); this module only evaluates the tree with :func:`ops.walk` so that
an operation on an array operand builds a :class:`LazyExpr` instead of
computing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from carray.compute.ops import FUNCTIONS, walk
from carray.compute.protocols import ComputeMixin, LazyExpr
from carray.errors import UnknownNameError

__all__ = ["FUNCTIONS", "expression", "wants_lazy"]


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
        The tree names a variable missing from ``names``, or uses what expressions do
        not allow.
    """
    def lookup(name: str) -> Any:
        if name not in names:
            raise UnknownNameError(f"{name!r} is not a known variable")
        return names[name]

    return walk(tree, lookup, _apply, functions)


def _apply(func: Any, *args: Any) -> Any:
    """``func`` on the operands: lazy when one is an array or expression."""
    if not any(hasattr(a, "shape") or isinstance(a, (list, tuple)) for a in args):
        return func(*args)
    return LazyExpr(func, args)
