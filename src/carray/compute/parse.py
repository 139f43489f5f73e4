"""Expression strings, parsed once: the one parser behind table queries and ``carray.eval``.

The syntax is numexpr's (Python's expression grammar, a subset of it): names,
numbers, strings and byte strings, arithmetic, comparisons, the functions of
:data:`carray.compute.ops.FUNCTIONS`, and membership in a literal list
(``carrier in ['UA', 'AA']``, ``x not in (1, 2)``, or pandas' spelling
``isin(carrier, ['UA', 'AA'])``).  The tree is normalised so
that every consumer (the numpy evaluator, the lazy expressions, numexpr's text
and zone-map pruning) sees one small set of nodes:

* ``and``/``or``/``not`` become ``&``/``|``/``~`` -- the same on booleans, and
  numexpr knows only the latter;
* a chained comparison ``a < b < c`` becomes ``(a < b) & (b < c)``;
* ``isin(x, [...])`` becomes ``x in [...]``;
* a function called through numpy's or dask.array's usual module names
  (``np.sin(x)``, ``numpy.log(x)``, ``da.exp(x)``, as bcolz's evaluators took them)
  becomes the function of that name;
* chains of ``and``, ``or``, ``&``, ``|`` and ``^`` become balanced trees (as deep
  as the log of their length), so thousands of alternatives evaluate; an expression
  that still nests more than :data:`MAX_DEPTH` levels is an :class:`ExpressionError`;
* anything else (attributes, subscripts, comprehensions, lambdas, calls of
  unknown names or with keywords) is rejected with an :class:`ExpressionError`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Any

from carray.compute.ops import CMPOPS, FUNCTIONS, MEMBERSHIP
from carray.errors import ExpressionError

_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Constant,
            ast.Call, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.List, ast.Tuple)
_LITERALS = (int, float, complex, str, bytes, bool)
# Module names whose functions are the expression functions of the same names.
_FUNCTION_MODULES = frozenset({"np", "numpy", "da"})


class Normalise(ast.NodeTransformer):
    """``and``/``or``/``not`` to ``&``/``|``/``~``, chained comparisons split,
    ``isin(x, [...])`` as ``x in [...]`` and ``np.sin(x)`` as ``sin(x)``."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in _FUNCTION_MODULES and func.attr in FUNCTIONS:
            node.func = ast.copy_location(ast.Name(id=func.attr, ctx=ast.Load()), func)
        if isinstance(node.func, ast.Name) and node.func.id == "isin":
            if len(node.args) != 2 or node.keywords:
                raise ExpressionError("isin takes two arguments, as in "
                                      "\"isin(x, [1, 2])\"")
            # One spelling of membership for every consumer (evaluation, numexpr, pruning).
            return ast.Compare(left=node.args[0], ops=[ast.In()], comparators=[node.args[1]])
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        op = ast.BitAnd if isinstance(node.op, ast.And) else ast.BitOr
        return _balanced(node.values, op)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.UnaryOp(op=ast.Invert(), operand=node.operand)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if type(op) not in CMPOPS and type(op) not in MEMBERSHIP:
                raise ExpressionError(f"unsupported comparison {type(op).__name__}")
            parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
            left = right
        out: ast.expr = parts[0]
        for part in parts[1:]:
            out = ast.BinOp(left=out, op=ast.BitAnd(), right=part)
        return out


#: How deeply a normalised expression may nest (chains of ``and``, ``or``, ``&``, ``|``
#: and ``^`` count as balanced trees, about log2 of their length).
MAX_DEPTH = 200
# Operators whose chains may be regrouped: the same result in any grouping.
_ASSOCIATIVE = (ast.BitOr, ast.BitAnd, ast.BitXor)


def _balanced(operands: list[ast.expr], op: type) -> ast.expr:
    """``operands`` joined by ``op`` as a balanced tree (its depth about log2 of their
    number, where a chain would be as deep as it is long)."""
    if len(operands) == 1:
        return operands[0]
    half = len(operands) // 2
    return ast.BinOp(left=_balanced(operands[:half], op), op=op(),
                     right=_balanced(operands[half:], op))


def _chain(node: ast.BinOp) -> list[ast.expr]:
    """The operands of the chain of ``node``'s operator that ``node`` heads, in order
    (without recursion: a chain is as deep as it is long)."""
    out: list[ast.expr] = []
    stack: list[ast.expr] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.BinOp) and type(item.op) is type(node.op):
            stack += [item.right, item.left]
        else:
            out.append(item)
    return out


def _regroup(tree: ast.AST) -> None:
    """Every chain of an associative operator (``a | b | c ...``: Python's parser nests
    it as deep as it is long) rebuilt as a balanced tree, without recursion."""
    def fix(node: ast.AST) -> ast.AST:
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ASSOCIATIVE):
            return _balanced(_chain(node), type(node.op))
        return node

    stack = [tree]
    while stack:
        node = stack.pop()
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                value = fix(value)
                setattr(node, field, value)
                stack.append(value)
            elif isinstance(value, list):
                value[:] = [fix(v) if isinstance(v, ast.AST) else v for v in value]
                stack += [v for v in value if isinstance(v, ast.AST)]


def _depth(tree: ast.AST) -> int:
    """How deeply ``tree`` nests (without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack += [(child, depth + 1) for child in ast.iter_child_nodes(node)]
    return deepest


def literal(node: ast.AST) -> tuple[bool, object]:
    """``(True, value)`` when ``node`` is a literal constant (a negated number too)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, _LITERALS):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        ok, value = literal(node.operand)
        if ok and isinstance(value, (int, float, complex)) and not isinstance(value, bool):
            return True, -value if isinstance(node.op, ast.USub) else value
    return False, None


def _check_lists(tree: ast.AST, text: str) -> None:
    """Lists and tuples only as the right side of ``in``, and only of literals."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            right = node.comparators[0]
            if type(node.ops[0]) in MEMBERSHIP:
                if not isinstance(right, (ast.List, ast.Tuple)):
                    raise ExpressionError(f"'in' needs a literal list, as in "
                                          f"\"x in [1, 2]\", in {text!r}")
                if not all(literal(e)[0] for e in right.elts):
                    raise ExpressionError(f"the list of 'in' must hold only literals in "
                                          f"{text!r}")
                allowed.add(id(right))
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and id(node) not in allowed:
            raise ExpressionError(f"a list is allowed only after 'in', in {text!r}")


@dataclass(frozen=True)
class Expression:
    """A parsed, normalised expression.

    Attributes
    ----------
    text : str
        As the user wrote it.
    tree : ast.Expression
        The normalised tree.
    names : tuple of str
        The variables it reads, in order of appearance (function names excluded).
    numexpr_text : str
        The normalised tree as text (numexpr's syntax when it uses no lists).
    calls_functions : bool
        Whether it calls any function.
    """

    text: str
    tree: ast.Expression
    names: tuple[str, ...]
    numexpr_text: str
    calls_functions: bool

    @classmethod
    def parse(cls, text: str) -> Expression:
        """Parse and normalise ``text``.

        Raises
        ------
        ExpressionError
            ``text`` is not an expression, or uses what expressions do not allow.
        """
        if not isinstance(text, str) or not text.strip():
            raise ExpressionError(f"expected an expression string, got {text!r}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"cannot parse {_short(text)!r}: {exc.msg}") from None
        except RecursionError:  # Python's own parser: a chain of some 2,500 operators
            raise ExpressionError(f"{_short(text)!r} nests too deeply for Python's parser; "
                                  "join many alternatives with 'or', or use 'x in [...]'"
                                  ) from None
        _regroup(tree)
        if _depth(tree) > MAX_DEPTH:
            raise ExpressionError(f"{_short(text)!r} nests more than {MAX_DEPTH} levels deep")
        tree = ast.fix_missing_locations(Normalise().visit(tree))
        names: list[str] = []
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise ExpressionError(f"{type(node).__name__} is not allowed in {text!r}")
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS \
                        or node.keywords:
                    raise ExpressionError(f"unknown function in {text!r}")
            elif isinstance(node, ast.Name) and node.id not in names:
                names.append(node.id)
        _check_lists(tree, text)
        calls = {n.func.id for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        names = [n for n in names if n not in calls or _is_used_as_value(tree, n)]
        return cls(text, tree, tuple(names), ast.unparse(tree), bool(calls))


def _short(text: str, limit: int = 200) -> str:
    """``text`` cut for an error message."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _is_used_as_value(tree: ast.AST, name: str) -> bool:
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Name) and n.id == name and id(n) not in funcs
               for n in ast.walk(tree))


#: Reductions an expression may end with, as numexpr allows them (``sum(x * y, axis=1)``).
REDUCTIONS = ("sum", "prod")


@dataclass(frozen=True)
class Reduction:
    """An expression whose last operation is a reduction: ``op(inner, axis=axis)``."""

    op: str
    inner: Expression
    axis: int | None

    @classmethod
    def parse(cls, text: str) -> Reduction | None:
        """``text`` as a reduction of an expression, or None when it does not end with one.

        Raises
        ------
        ExpressionError
            The reduction is called with other arguments than an expression and an
            integer ``axis``.
        """
        try:
            call = ast.parse(text.strip(), mode="eval").body if isinstance(text, str) else None
        except SyntaxError:
            return None  # Expression.parse says what is wrong
        if not isinstance(call, ast.Call):
            return None
        func = call.func
        name = func.id if isinstance(func, ast.Name) else func.attr if \
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id in _FUNCTION_MODULES else None
        if name not in REDUCTIONS:
            return None
        axes = list(call.args[1:]) + [k.value for k in call.keywords if k.arg == "axis"]
        others = [k.arg for k in call.keywords if k.arg != "axis"]
        if len(call.args) < 1 or len(axes) > 1 or others:
            raise ExpressionError(f"{name} takes an expression and an axis, as in "
                                  f"\"{name}(x, axis=0)\", in {text!r}")
        axis: int | None = None
        if axes:
            ok, value = literal(axes[0])
            if not ok or not isinstance(value, int) or isinstance(value, bool):
                raise ExpressionError(f"the axis of {name} must be an integer, in {text!r}")
            axis = value
        return cls(name, Expression.parse(ast.unparse(call.args[0])), axis)


def caller_scope(depth: int) -> dict[str, Any]:
    """Variables visible where the user called us (locals over globals), as bcolz does:
    ``depth`` frames above the caller of this function."""
    frame = sys._getframe(depth + 1)
    scope = dict(frame.f_globals)
    scope.update(frame.f_locals)
    return scope


__all__ = ["MAX_DEPTH", "REDUCTIONS", "Expression", "Normalise", "Reduction", "caller_scope", "literal"]
