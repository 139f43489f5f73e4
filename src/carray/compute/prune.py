"""Three-valued zone-map pruning: may a boolean expression be true, or false, in a block?

For every block (a run of table rows, or a chunk region of an N-d
expression) the zone maps give each operand's min, max and whether it holds a
NaN.  :func:`tri` answers, per block, two questions of a boolean expression:
*may it be true somewhere?* and *may it be false somewhere?*  Knowing both is
what negation needs (``~(x < 3)`` is certainly false where ``x < 3`` is
certainly true), and a block where the first answer is no holds no match.

The logic is written once, over a small vocabulary of :class:`Fact` s (and,
or, not, a comparison of an operand with a constant, membership, ``isnan``,
a boolean operand, a constant); each caller says what its nodes are with a
``describe`` function and where an operand's bounds are with ``bounds_of``:
:func:`may_match` does so for parsed trees over table columns, and
:mod:`carray.compute.zones` for lazy expressions.  Anything not described is
unknown: it may be true and may be false, so it never prunes wrongly.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.compute.ops import CMPOPS, MEMBERSHIP, SWAPPED, SYMBOLS, coerce
from carray.compute.parse import literal

#: (may be true somewhere, may be false somewhere), one entry per block.
Tri = tuple[np.ndarray, np.ndarray]


@dataclass
class Bounds:
    """Per-block facts about one operand: min, max, any NaN, and whether they are known."""

    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray
    known: np.ndarray


@dataclass(frozen=True)
class Fact:
    """What a node of an expression is, as far as pruning cares.

    ``kind`` is one of ``and``/``or`` (``args``: two nodes), ``not`` (one node),
    ``compare`` (operand ``key`` ``op`` constant ``value``, with ``op`` one of
    ``< <= > >= == !=``), ``isin`` (``value``: the members; ``invert`` for ``not in``),
    ``isnan`` (of ``key``), ``column`` (boolean operand ``key``) or ``constant``.
    """

    kind: str
    args: tuple[Any, ...] = ()
    key: Any = None
    op: str = ""
    value: Any = None
    invert: bool = False


Describe = Callable[[Any], "Fact | None"]
BoundsOf = Callable[[Any], "Bounds | None"]

_SYMBOL = SYMBOLS
#: The comparison with its operands swapped, by symbol (``3 < x`` is ``x > 3``).
FLIP = {SYMBOLS[op]: SYMBOLS[swapped] for op, swapped in SWAPPED.items()}


def tri(node: Any, describe: Describe, bounds_of: BoundsOf, n: int) -> Tri:
    """(may be true, may be false) of boolean ``node`` in each of ``n`` blocks."""
    fact = describe(node)
    unknown = (np.ones(n, bool), np.ones(n, bool))
    if fact is None:
        return unknown
    if fact.kind in ("and", "or"):
        lt, lf = tri(fact.args[0], describe, bounds_of, n)
        rt, rf = tri(fact.args[1], describe, bounds_of, n)
        return (lt & rt, lf | rf) if fact.kind == "and" else (lt | rt, lf & rf)
    if fact.kind == "not":
        t, f = tri(fact.args[0], describe, bounds_of, n)
        return f, t
    if fact.kind == "constant":
        return np.full(n, bool(fact.value)), np.full(n, not bool(fact.value))
    b = bounds_of(fact.key)
    if b is None:
        return unknown
    try:
        with np.errstate(all="ignore"):
            t, f = _leaf(fact, b, n)
    except (TypeError, ValueError):  # a constant the bounds cannot be compared with
        return unknown
    return t | ~b.known, f | ~b.known


def _leaf(fact: Fact, b: Bounds, n: int) -> Tri:
    if fact.kind == "column":
        return b.hi.astype(bool), ~b.lo.astype(bool)
    if fact.kind == "isnan":
        return b.nan.copy(), ~(_nanlike(b.lo) & _nanlike(b.hi))
    name = fact.key if isinstance(fact.key, str) else "the operand"
    if fact.kind == "isin":
        members = fact.value if isinstance(fact.value, np.ndarray) else \
            np.array([coerce(v, b.lo.dtype, name) for v in fact.value])
        t, f = _isin_bounds(b, members)
        return (f, t) if fact.invert else (t, f)
    if fact.kind != "compare":
        return np.ones(n, bool), np.ones(n, bool)
    c = coerce(fact.value, b.lo.dtype, name)
    if isinstance(c, complex) or np.iscomplexobj(c):
        raise TypeError("complex constants are not ordered")
    if _nanlike(np.asarray(c)):  # NaN (NaT) compares false, except !=
        return (np.ones(n, bool), np.zeros(n, bool)) if fact.op == "!=" else \
            (np.zeros(n, bool), np.ones(n, bool))
    return compare_bounds(fact.op, b, c)


def compare_bounds(op: str, b: Bounds, c: Any) -> Tri:
    """(may be true, may be false) of ``operand op c`` given the operand's bounds."""
    lo, hi, nan = b.lo, b.hi, b.nan
    if op == "<":
        return lo < c, (hi >= c) | nan
    if op == "<=":
        return lo <= c, (hi > c) | nan
    if op == ">":
        return hi > c, (lo <= c) | nan
    if op == ">=":
        return hi >= c, (lo < c) | nan
    inside = (lo <= c) & (c <= hi)
    single = (lo == c) & (hi == c)
    if op == "==":
        return inside, ~single | nan
    return ~single | nan, inside  # !=


def _isin_bounds(b: Bounds, members: np.ndarray) -> Tri:
    if not len(members):
        return np.zeros(len(b.lo), bool), np.ones(len(b.lo), bool)
    m = members[None, :]
    inside = ((b.lo[:, None] <= m) & (m <= b.hi[:, None])).any(axis=1)
    single = (b.lo == b.hi) & (b.lo[:, None] == m).any(axis=1)
    return np.asarray(inside), np.asarray(~single | b.nan)


def _nanlike(values: np.ndarray) -> np.ndarray:
    """NaN (floats) or NaT (datetimes), elementwise; False for other kinds."""
    kind = values.dtype.kind
    if kind in "fc":
        return np.isnan(values)
    if kind in "mM":
        return np.isnat(values)
    return np.zeros(values.shape, bool)


# -- parsed trees over table columns ----------------------------------------------------------


def may_match(tree: ast.AST, bounds: Mapping[str, Bounds], scalars: Mapping[str, Any],
              nblocks: int) -> np.ndarray:
    """For each block, False when the expression is certainly false on all its rows.

    Parameters
    ----------
    tree : ast.AST
        A normalised tree (:class:`carray.compute.parse.Expression`).
    bounds : mapping
        Column name -> per-block :class:`Bounds` (columns without are unknown).
    scalars : mapping
        The values of names that are constants.
    nblocks : int
    """
    def describe(node: ast.AST) -> Fact | None:
        return _describe_ast(node, bounds, scalars)

    return tri(tree, describe, bounds.get, nblocks)[0]


def _scalar(node: ast.AST, scalars: Mapping[str, Any]) -> tuple[bool, Any]:
    """``(True, value)`` when ``node`` is a constant: a literal or a scalar variable."""
    ok, value = literal(node)
    if ok:
        return True, value
    if isinstance(node, ast.Name) and node.id in scalars:
        value = scalars[node.id]
        if isinstance(value, (int, float, str, bytes, np.generic)):
            return True, value
    return False, None


def _describe_ast(node: ast.AST, bounds: Mapping[str, Bounds], scalars: Mapping[str, Any]
                  ) -> Fact | None:
    if isinstance(node, ast.Expression):
        return _describe_ast(node.body, bounds, scalars)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        # A boolean result of & or | has boolean operands (with an integer one it is not).
        return Fact("and" if isinstance(node.op, ast.BitAnd) else "or",
                    (node.left, node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return Fact("not", (node.operand,))
    if isinstance(node, ast.Name):
        if node.id in bounds and bounds[node.id].lo.dtype == np.bool_:
            return Fact("column", key=node.id)
        ok, value = _scalar(node, scalars)
        return Fact("constant", value=value) if ok and isinstance(value, (bool, np.bool_)) \
            else None
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return Fact("constant", value=node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "isnan" and len(node.args) == 1 and \
            isinstance(node.args[0], ast.Name) and node.args[0].id in bounds:
        return Fact("isnan", key=node.args[0].id)
    if not isinstance(node, ast.Compare):
        return None
    op, left, right = type(node.ops[0]), node.left, node.comparators[0]
    if op in MEMBERSHIP:
        if isinstance(left, ast.Name) and left.id in bounds and \
                isinstance(right, (ast.List, ast.Tuple)):
            values = [literal(e)[1] for e in right.elts]
            return Fact("isin", key=left.id, value=values, invert=MEMBERSHIP[op])
        return None
    if op not in CMPOPS:
        return None
    symbol = _SYMBOL[op]
    if isinstance(right, ast.Name) and right.id in bounds:
        left, right, symbol = right, left, FLIP[symbol]
    if not (isinstance(left, ast.Name) and left.id in bounds):
        return None
    ok, value = _scalar(right, scalars)
    if not ok:
        return None
    if isinstance(value, float) and math.isnan(value):
        value = np.float64("nan")
    return Fact("compare", key=left.id, op=symbol, value=value)


__all__ = ["FLIP", "Bounds", "Fact", "Tri", "compare_bounds", "may_match", "tri"]
