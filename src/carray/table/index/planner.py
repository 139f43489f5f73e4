"""The query planner: whether a table query reads an index or scans, and the indexed
path itself.

The expression's top-level conjuncts (``a & b & ...``) that compare an indexed column
with a constant (``col == v``, ``col in [...]``, ``<``, ``<=``, ``>``, ``>=``, either
side) make one :class:`~carray.table.index.kinds.Condition` per column.  The index with the
fewest candidate rows wins when reading them costs less than a scan: a candidate row
read at random costs about as much as :data:`RANDOM_ROW_COST` rows read in order.  The
candidates (the index's, the chunks written since it was built and the tail past it) are
then checked against the whole expression, so the answer is the scan's: the same rows,
ascending, with ``skip`` and ``limit`` applied after.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.compute import kleene
from carray.compute.ops import SWAPPED, coerce
from carray.compute.parse import Expression, literal
from carray.errors import ExpressionError
from carray.table.columns.kinds import read_any, read_valid
from carray.table.index.kinds import Condition, Found, is_missing, union

#: What reading one row at random costs, in rows read in order (a Blosc block decoded
#: for one value).
RANDOM_ROW_COST = 64
#: Candidate rows checked, and result rows read, per step.
_STEP = 1 << 16
#: Result rows read one by one rather than gathered.
_FEW = 32
# An index answers every comparison but ``!=``.
_FLIPPED = {op: swapped for op, swapped in SWAPPED.items() if op is not ast.NotEq}


@dataclass
class Plan:
    """A query's plan: an index on ``column`` (None: a scan), what it asks of it, the
    rows it expects to read and why."""

    column: str | None
    kind: str | None
    condition: Condition | None
    estimate: int
    reason: str
    found: Found | None = None
    exact: bool = False  # the condition is the whole query: the index's rows need no check
    looked: tuple[dict[str, Any], Any] | None = None  # the index's state and reader


@functools.lru_cache(maxsize=256)
def parsed(text: str) -> Expression:
    """``Expression.parse(text)``, remembered: queries repeat, and parsing costs as much
    as an indexed lookup (an expression is immutable)."""
    return Expression.parse(text)


def conjuncts(node: ast.AST) -> Iterator[ast.AST]:
    """The parts of ``a & b & ...`` (the node itself when it is no conjunction)."""
    if isinstance(node, ast.Expression):
        node = node.body
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        yield from conjuncts(node.left)
        yield from conjuncts(node.right)
    else:
        yield node


def _constant(node: ast.AST, scalars: Mapping[str, Any], dtype: np.dtype) -> Any:
    """The value of a constant operand, converted as the evaluator converts it; raises
    LookupError when ``node`` is not a constant."""
    ok, value = literal(node)
    if not ok:
        if not isinstance(node, ast.Name) or node.id not in scalars:
            raise LookupError(node)
        value = scalars[node.id]
        if isinstance(value, np.generic):
            value = value.item() if value.dtype.kind not in "mMSU" else value
        if not isinstance(value, (int, float, str, bytes, np.generic)) or \
                isinstance(value, bool) and dtype.kind != "b":
            raise LookupError(node)
    if isinstance(value, complex):
        raise LookupError(node)
    if isinstance(value, (str, bytes)):
        value = coerce(value, dtype, "")
    return value


def _bound(cond: Condition, op: type, value: Any) -> None:
    """Narrow ``cond`` by ``col <op> value``."""
    if is_missing(value):
        cond.empty = True  # every comparison with NaN is false
    elif op in (ast.Gt, ast.GtE):
        strict = op is ast.Gt
        if cond.lo is None or value > cond.lo or (value == cond.lo and strict):
            cond.lo, cond.lo_strict = value, strict
    elif cond.hi is None or value < cond.hi or (value == cond.hi and op is ast.Lt):
        cond.hi, cond.hi_strict = value, op is ast.Lt


def conditions(tree: ast.AST, columns: Mapping[str, Any], scalars: Mapping[str, Any]
               ) -> tuple[dict[str, Condition], int]:
    """Per column, what the top-level conjuncts of ``tree`` ask of it; and how many
    conjuncts there are (a condition standing for all of them is the whole query)."""
    out: dict[str, Condition] = {}
    total = 0
    for node in conjuncts(tree):
        total += 1
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        op, left, right = type(node.ops[0]), node.left, node.comparators[0]
        if not isinstance(left, ast.Name) or left.id not in columns:
            if op not in _FLIPPED or not isinstance(right, ast.Name) or right.id not in columns:
                continue
            left, right, op = right, left, _FLIPPED[op]
        name = left.id
        dtype = np.dtype(columns[name].dtype)
        try:
            if op is ast.In and isinstance(right, (ast.List, ast.Tuple)):
                values = [_constant(e, scalars, dtype) for e in right.elts]
            elif op in _FLIPPED:
                value = _constant(right, scalars, dtype)
            else:
                continue
        except (LookupError, ExpressionError):
            continue
        cond = out.setdefault(name, Condition())
        cond.parts += 1
        if op is ast.In or op is ast.Eq:
            members = values if op is ast.In else [value]
            cond.members = members if cond.members is None else \
                [m for m in cond.members if any(m == v for v in members)]
        else:
            _bound(cond, op, value)
    return out, total


def _cost(found_random: int, in_order: int) -> int:
    return found_random * RANDOM_ROW_COST + in_order


def _dirty(state: dict[str, Any], covered: int) -> list[tuple[int, int]]:
    """The row ranges written since the build, within the indexed rows."""
    return [(int(lo), min(int(hi), covered)) for lo, hi in state["dirty"] if lo < covered]


def _outside(rows: np.ndarray, ranges: list[tuple[int, int]]) -> np.ndarray:
    """Which of ``rows`` lie in none of the disjoint ascending ``ranges``."""
    if not ranges:
        return np.ones(len(rows), bool)
    edges = np.array(ranges, np.int64).ravel()  # lo0, hi0, lo1, hi1, ...
    return np.searchsorted(edges, rows, side="right") % 2 == 0


def plan(t: Any, ev: Any) -> Plan:
    """How to answer evaluator ``ev`` over table ``t`` (see the module doc)."""
    n, cols = ev.length or 0, t.cols
    indexed = {name: col for name, col in ev.columns.items()
               if name in cols and cols[name] is col}
    best: Plan | None = None
    scan_reason = "no condition on an indexed column"
    conds, total = conditions(ev.expr.tree, indexed, ev.scalars)
    for name, cond in conds.items():
        looked = t.lookup_index(name)
        if looked is None:
            continue
        state, index = looked
        covered = min(int(state["covered"]), n)
        dirty = sum(hi - lo for lo, hi in _dirty(state, covered))
        tail = n - covered
        try:
            if index.kind == "sorted":
                count, found = index.count(cond), None
                cost = _cost(count, dirty + tail)
            else:
                found = index.find(cond)
                if found is None:
                    continue
                found.ranges = [(lo, min(hi, covered)) for lo, hi in found.ranges if lo < covered]
                count = found.size
                cost = _cost(0, count + dirty + tail)
        except (TypeError, ValueError, OverflowError):  # values it cannot compare: scan
            continue
        estimate = count + dirty + tail
        why = (f"{index.kind} index on {name!r}: {cond.describe(name)} gives "
               f"{'' if index.kind == 'sorted' else '~'}{count} candidate rows "
               f"(+{dirty} rows written since the build, +{tail} past it: checked), cost "
               f"~{cost} row reads against {n} for a scan")
        if cost >= n:
            scan_reason = why + ": the scan is cheaper"
            continue
        if best is None or estimate < best.estimate:
            exact = index.kind == "sorted" and cond.parts == total
            best = Plan(name, index.kind, cond, estimate, why, found, exact, looked)
    if best is not None:
        return best
    return Plan(None, None, None, n, scan_reason)


def planned(t: Any, ev: Any) -> Plan | None:
    """The index plan of ``ev`` over ``t``, or None to scan."""
    if not ev.columns or not ev.length or not getattr(t, "has_indexes", lambda: False)():
        return None
    p = plan(t, ev)
    return p if p.column is not None else None


def _read(col: Any, rows: Any) -> np.ndarray:
    """Rows of a column (a range or row numbers); a few rows one by one, which decodes
    only their blocks (faster than a gather)."""
    if isinstance(col, np.ndarray):
        return col[rows]
    if isinstance(rows, np.ndarray) and 0 < len(rows) <= _FEW and hasattr(col, "read_rows"):
        parts = [read_any(col, range(r, r + 1)) for r in rows.tolist()]
        # Records read with their fields' missing values are masked: keep the masks.
        join = np.ma.concatenate if any(np.ma.isMaskedArray(p) for p in parts) else \
            np.concatenate
        return join(parts)
    return read_any(col, rows)


def _check(t: Any, ev: Any, column: str, rows: Any) -> tuple[np.ndarray, dict]:
    """Which of ``rows`` (a range or row numbers) satisfy the expression, and the
    operands read there."""
    env = dict(ev.scalars)
    for name, col in ev.columns.items():
        env[name] = _read(col, rows)
    operands = {**env, **{name: kleene.Maybe(env[name], read_valid(ev.columns[name], rows))
                          for name in ev.nullable}}
    result = np.asarray(ev.evaluate(operands))  # three-valued where columns have nulls
    if result.dtype != np.bool_:
        raise TypeError(f"{ev.expr.text!r} is not a boolean expression")
    mask = np.broadcast_to(result, (len(rows),))
    valid = read_valid(ev.columns[column], rows)  # a missing value matches no comparison
    return (mask & valid if valid is not None else mask), env


def _pieces(t: Any, ev: Any, p: Plan) -> Iterator[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """Matching rows in pieces, each with the values of the columns known there: the
    index's rows it vouches for (an exact plan), and the rows checked."""
    assert p.column is not None and p.condition is not None and p.looked is not None
    state, index = p.looked
    n = ev.length or 0
    covered = min(int(state["covered"]), n)
    dirty = _dirty(state, covered)
    found = p.found if p.found is not None else index.find(p.condition)
    keep = (found.rows < covered) & _outside(found.rows, dirty)
    rows = found.rows[keep]
    if p.exact and found.values is not None:  # the index's values are the column's
        yield rows, {p.column: found.values[keep]}
        rows = np.empty(0, np.int64)
    ranges = [(lo, min(hi, covered)) for lo, hi in found.ranges if lo < covered]
    ranges = union(ranges + dirty + ([(covered, n)] if covered < n else []))
    for lo, hi in ranges:
        for a in range(lo, hi, _STEP):
            mask, env = _check(t, ev, p.column, range(a, min(a + _STEP, hi)))
            yield np.flatnonzero(mask) + a, {k: env[k][mask] for k in ev.columns}
    rows = rows[_outside(rows, ranges)] if ranges else rows
    for a in range(0, len(rows), _STEP):
        part = rows[a:a + _STEP]
        mask, env = _check(t, ev, p.column, part)
        yield part[mask], {k: env[k][mask] for k in ev.columns}


def matching_rows(t: Any, ev: Any, p: Plan) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The rows where the expression holds, ascending, and the values of the columns
    known at all of them."""
    pieces = [piece for piece in _pieces(t, ev, p) if len(piece[0])]
    if not pieces:
        return np.empty(0, np.int64), {}
    known = set.intersection(*(set(values) for _, values in pieces))
    if len(pieces) == 1:
        return pieces[0][0], {k: pieces[0][1][k] for k in known}
    rows = np.concatenate([r for r, _ in pieces])
    order = np.argsort(rows, kind="stable")
    return rows[order], {k: np.concatenate([v[k] for _, v in pieces])[order] for k in known}


def matches(t: Any, ev: Any, p: Plan, names: list[str], skip: int,
            limit: int | None) -> Iterator[dict[str, np.ndarray]]:
    """Blocks of matching rows (column name -> values), as ``table_query.matches``."""
    rows, known = matching_rows(t, ev, p)
    cols = t.cols
    stop = None if limit is None else skip + max(limit, 0)
    rows = rows[skip:stop]
    known = {k: v[skip:stop] for k, v in known.items()}
    for a in range(0, len(rows), _STEP):
        part = rows[a:a + _STEP]
        block = {n: part.copy() if n == "nrow__" else
                 known[n][a:a + _STEP].copy() if n in known and ev.columns[n] is cols[n]
                 else _read(cols[n], part) for n in names}
        for n in names:  # output columns with missing values give masked arrays
            valid = None if n == "nrow__" else read_valid(cols[n], part)
            if valid is not None:
                block[n] = np.ma.MaskedArray(block[n], mask=~valid)
        yield block


def explain(t: Any, ev: Any) -> str:
    """A readable plan of ``ev`` over ``t`` (see ``ctable.explain``)."""
    n = ev.length or 0
    lines = [f"query: {ev.expr.text}", f"rows: {n}"]
    p = plan(t, ev) if ev.columns and n and hasattr(t, "lookup_index") else \
        Plan(None, None, None, n, "no column to read")
    if p.column is not None:
        how = "its rows need no check (the condition is the whole query)" if p.exact else \
            "the whole expression is checked on them"
        lines.append(f"plan: {p.kind} index on {p.column!r}: ~{p.estimate} candidate rows "
                     f"({100.0 * p.estimate / max(n, 1):.3g}% of the table); {how}")
        lines.append(f"why: {p.reason}")
        return "\n".join(lines)
    may = ev.block_mask()
    zoned = any(getattr(c, "zone_map", lambda: None)() is not None for c in ev.columns.values())
    how = "zone maps" if ev.prune and zoned else "no zone maps"
    lines.append(f"plan: full scan with {how}: {int(may.sum())} of {len(may)} blocks of "
                 f"{ev.blen} rows may match, ~{int(may.sum()) * ev.blen} rows read")
    lines.append(f"why: {p.reason}")
    return "\n".join(lines)
