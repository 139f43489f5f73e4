"""Queries over categorical columns compare codes, not values.

Before a table query runs, :func:`rewrite` turns every comparison of a categorical
column with literals into a comparison of its codes: the literals are looked up in
the dictionary once per query, and the scan then reads only the ``int32`` codes
carray, whose zone maps prune blocks as for any other column.

* ``carrier == 'UA'`` -> ``codes == k`` (a value not in the dictionary matches
  nothing);
* ``carrier != 'UA'`` -> ``(codes != k) & (codes >= 0)``;
* ``carrier in ['UA', 'AA']`` -> ``codes in [k1, k2]``; ``not in`` as ``!=``;
* ``<``, ``<=``, ``>``, ``>=``: only on ordered categories (by the categories' order,
  the literal must be one of them); unordered ones refuse, as pandas does.

A missing value (code -1) matches no comparison, ``!=`` and ``not in`` included (as
in SQL and polars; pandas' ``!=`` says True there), negated or not: a ``~`` above
comparisons of categorical columns is pushed down to them first (De Morgan's laws,
``~(carrier == 'UA')`` becomes ``carrier != 'UA'``), which gives SQL's three-valued
answer where the plain negation of the codes' comparison would hold on missing rows.
A categorical column used any other way (arithmetic, compared with another column)
is refused with an :class:`~carray.errors.ExpressionError`.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from carray.compute.ops import SWAPPED
from carray.compute.parse import Expression, literal
from carray.errors import ExpressionError
from carray.table.columns.category import CategoryColumn
from carray.table.columns.category_values import decode

_FLIPPED = SWAPPED
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_NEGATED = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
            ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE}
_NULL_TESTS = {"isnull": True, "isna": True, "notnull": False, "notna": False}  # -> missing?
_NEVER = -2  # no code is -2: ``codes == -2`` is false everywhere, and zone maps know it


def rewrite(expr: Expression, cols: Mapping[str, Any]) -> tuple[Expression, Mapping[str, Any]]:
    """``expr`` with its comparisons of categorical columns made over their codes, and
    the columns it then reads (``cols`` plus the codes arrays, under new names).

    Raises
    ------
    ExpressionError
        A categorical column is used other than compared with literals, or an ordering
        comparison is made on unordered categories or with a value not among them.
    """
    cats = {n: cols[n] for n in expr.names if isinstance(cols.get(n), CategoryColumn)}
    if not cats:
        return expr, cols
    aliases = {n: _free_name(f"{n}__codes", cols, expr.names) for n in cats}
    tree = _Rewriter(cats, aliases, expr.text).visit(copy.deepcopy(expr.tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in cats:
            raise ExpressionError(
                f"categorical column {node.id!r} can only be compared with literal values "
                f"(==, !=, in, not in; <, > when ordered), in {expr.text!r}")
    parsed = Expression.parse(ast.unparse(ast.fix_missing_locations(tree)))
    columns = dict(cols)
    columns.update((aliases[n], col.codes_array()) for n, col in cats.items())
    return dataclasses.replace(parsed, text=expr.text), columns


def _free_name(base: str, cols: Mapping[str, Any], names: tuple[str, ...]) -> str:
    name, k = base, 0
    while name in cols or name in names:
        k += 1
        name = f"{base}{k}"
    return name


def _name(alias: str) -> ast.Name:
    return ast.Name(id=alias, ctx=ast.Load())


def _compare(alias: str, op: ast.cmpop, right: Any) -> ast.Compare:
    rnode: ast.expr = ast.List(elts=[ast.Constant(v) for v in right], ctx=ast.Load()) \
        if isinstance(right, list) else ast.Constant(right)
    return ast.Compare(left=_name(alias), ops=[op], comparators=[rnode])


def _present(alias: str) -> ast.Compare:
    return _compare(alias, ast.GtE(), 0)


def _both(a: ast.expr, b: ast.expr) -> ast.BinOp:
    return ast.BinOp(left=a, op=ast.BitAnd(), right=b)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, cats: dict[str, CategoryColumn], aliases: dict[str, str],
                 text: str) -> None:
        self.cats, self.aliases, self.text = cats, aliases, text

    def _names_category(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.cats for n in ast.walk(node))

    def _negated(self, node: ast.expr) -> ast.expr:
        """``~node`` with the negation pushed down to the comparisons of categorical
        columns (the other operands keep a ``~`` of their own)."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
            op = ast.BitOr() if isinstance(node.op, ast.BitAnd) else ast.BitAnd()
            return ast.BinOp(left=self._negated(node.left), op=op,
                             right=self._negated(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return node.operand
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _NEGATED and \
                self._names_category(node):
            return ast.Compare(left=node.left, ops=[_NEGATED[type(node.ops[0])]()],
                               comparators=node.comparators)
        return ast.UnaryOp(op=ast.Invert(), operand=node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.op, ast.Invert) and self._names_category(node.operand):
            pushed = self._negated(node.operand)
            if not (isinstance(pushed, ast.UnaryOp) and pushed.operand is node.operand):
                return self.visit(pushed)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        """``isnull(c)``/``notnull(c)`` (``isna``/``notna``) of a categorical column: its
        code is -1, or not."""
        func = node.func.id if isinstance(node.func, ast.Name) else None
        arg = node.args[0] if len(node.args) == 1 else None
        if func in _NULL_TESTS and isinstance(arg, ast.Name) and arg.id in self.cats:
            alias = self.aliases[arg.id]
            return _compare(alias, ast.Lt(), 0) if _NULL_TESTS[func] else _present(alias)
        return self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        op, left, right = node.ops[0], node.left, node.comparators[0]
        if isinstance(right, ast.Name) and right.id in self.cats and \
                type(op) in _FLIPPED and literal(left)[0]:
            left, right, op = right, left, _FLIPPED[type(op)]()
        if not (isinstance(left, ast.Name) and left.id in self.cats):
            return self.generic_visit(node)
        col, alias = self.cats[left.id], self.aliases[left.id]
        if isinstance(op, (ast.In, ast.NotIn)):
            assert isinstance(right, (ast.List, ast.Tuple))  # the parser checked
            found = [c for c in (col.code_of(literal(e)[1]) for e in right.elts)
                     if c is not None]
            if isinstance(op, ast.In):
                return _compare(alias, ast.In(), found) if found else \
                    _compare(alias, ast.Eq(), _NEVER)
            return _both(_compare(alias, ast.NotIn(), found), _present(alias)) if found \
                else _present(alias)
        ok, value = literal(right)
        if not ok:
            return node  # left as it is: refused by rewrite()
        code = col.code_of(value)
        if isinstance(op, ast.Eq):
            return _compare(alias, ast.Eq(), _NEVER if code is None else code)
        if isinstance(op, ast.NotEq):
            return _present(alias) if code is None else \
                _both(_compare(alias, ast.NotEq(), code), _present(alias))
        if isinstance(op, _ORDERING):
            if not col.ordered:
                raise ExpressionError(
                    f"{left.id!r} holds unordered categories: only ==, !=, in and not in "
                    f"compare them (in {self.text!r})")
            if code is None:
                raise ExpressionError(f"{value!r} is not a category of {left.id!r}, so it "
                                      f"has no place in their order (in {self.text!r})")
            return _both(_compare(alias, op, code), _present(alias))
        return node


def scanned(col: Any) -> Any:
    """What a query reads of an output column: a categorical column's codes carray (the
    blocks :func:`decoded` gives back are decoded), any other column itself."""
    return col.codes_array() if isinstance(col, CategoryColumn) else col


def decoded(blocks: Iterator[dict[str, np.ndarray]], cols: Mapping[str, Any]
            ) -> Iterator[dict[str, np.ndarray]]:
    """``blocks`` of output rows (name -> values) with the codes of categorical columns
    (read through :func:`scanned`) decoded; each dictionary is read once per query."""
    dictionaries: dict[str, np.ndarray] = {}
    for block in blocks:
        for name, values in block.items():
            col = cols.get(name)
            if isinstance(col, CategoryColumn):
                if name not in dictionaries:
                    dictionaries[name] = col.categories
                block[name] = decode(values, dictionaries[name])
        yield block
