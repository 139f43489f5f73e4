"""The query planner: whether a table query reads an index or scans, and the indexed
path itself.

The expression's top-level conjuncts (``a & b & ...``) that compare an indexed column
with a constant (``col == v``, ``col in [...]``, ``<``, ``<=``, ``>``, ``>=``, either
side) make one :class:`~carray._index_kinds.Condition` per column.  The index with the
fewest candidate rows wins when reading them costs less than a scan: a candidate row
read at random costs about as much as :data:`RANDOM_ROW_COST` rows read in order.  The
candidates (the index's, the rows edited since it was built and the tail past it) are
then checked against the whole expression, so the answer is the scan's: the same rows,
ascending, with ``skip`` and ``limit`` applied after.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray._index_kinds import Condition, Found
from carray.compute.ops import coerce, evaluate_numpy
from carray.compute.parse import literal
from carray.errors import ExpressionError
from carray.table_columns import read_any, read_valid

#: What reading one row at random costs, in rows read in order (a Blosc block decoded
#: for one value).
RANDOM_ROW_COST = 64
#: Candidate rows checked, and result rows read, per step.
_STEP = 1 << 16
_FLIPPED = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}


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


def conditions(tree: ast.AST, columns: Mapping[str, Any], scalars: Mapping[str, Any]
               ) -> dict[str, Condition]:
    """Per column, what the top-level conjuncts of ``tree`` ask of it."""
    out: dict[str, Condition] = {}
    for node in conjuncts(tree):
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
        if op is ast.In or op is ast.Eq:
            members = values if op is ast.In else [value]
            cond.members = members if cond.members is None else \
                [m for m in cond.members if any(m == v for v in members)]
        elif op in (ast.Gt, ast.GtE):
            cond.lo = value if cond.lo is None or value > cond.lo else cond.lo
        else:
            cond.hi = value if cond.hi is None or value < cond.hi else cond.hi
    return out


def _cost(found_random: int, in_order: int) -> int:
    return found_random * RANDOM_ROW_COST + in_order


def plan(t: Any, ev: Any) -> Plan:
    """How to answer evaluator ``ev`` over table ``t`` (see the module doc)."""
    n = ev.length or 0
    indexed = {name: col for name, col in ev.columns.items()
               if name in t.cols and t.cols[name] is col}
    best: Plan | None = None
    scan_reason = "no condition on an indexed column"
    for name, cond in conditions(ev.expr.tree, indexed, ev.scalars).items():
        looked = t.lookup_index(name)
        if looked is None:
            continue
        state, index = looked
        covered = min(int(state["covered"]), n)
        edited = np.asarray(state["edited"], np.int64)
        edited = edited[edited < covered]
        tail = n - covered
        try:
            if index.kind == "sorted":
                count = index.count(cond)
                cost, found = _cost(count + len(edited), tail), None
            else:
                found = index.find(cond)
                if found is None:
                    continue
                found.ranges = [(lo, min(hi, covered)) for lo, hi in found.ranges if lo < covered]
                count = found.size
                cost = _cost(len(edited), count + tail)
        except (TypeError, ValueError):  # values the index cannot compare: scan
            continue
        estimate = count + len(edited) + tail
        why = (f"{index.kind} index on {name!r}: {cond.describe(name)} gives ~{count} "
               f"candidate rows (+{len(edited)} edited, +{tail} past the index), cost "
               f"~{cost} row reads against {n} for a scan")
        if cost >= n:
            scan_reason = why + ": the scan is cheaper"
            continue
        if best is None or estimate < best.estimate:
            best = Plan(name, index.kind, cond, estimate, why, found)
    if best is not None:
        return best
    return Plan(None, None, None, n, scan_reason)


def planned(t: Any, ev: Any) -> Plan | None:
    """The index plan of ``ev`` over ``t``, or None to scan."""
    if not ev.columns or not ev.length or not hasattr(t, "lookup_index") or not t.indexes:
        return None
    p = plan(t, ev)
    return p if p.column is not None else None


def candidates(t: Any, ev: Any, p: Plan) -> Found:
    """Every row that may match: the index's, the edited rows and the tail."""
    assert p.column is not None and p.condition is not None
    looked = t.lookup_index(p.column)
    assert looked is not None
    state, index = looked
    n = ev.length or 0
    covered = min(int(state["covered"]), n)
    found = p.found if p.found is not None else index.find(p.condition)
    rows = found.rows[found.rows < covered]
    edited = np.asarray(state["edited"], np.int64)
    if len(edited):
        rows = np.union1d(rows, edited[edited < covered])
    ranges = [(lo, min(hi, covered)) for lo, hi in found.ranges if lo < covered]
    if covered < n:
        ranges.append((covered, n))
    return Found(rows, ranges)


def _check(t: Any, ev: Any, column: str, rows: Any) -> np.ndarray:
    """Which of ``rows`` (a range or row numbers) satisfy the expression."""
    env = dict(ev.scalars)
    for name, col in ev.columns.items():
        env[name] = col[rows] if isinstance(col, np.ndarray) else read_any(col, rows)
    size = len(rows)
    result = np.asarray(evaluate_numpy(ev.expr.tree, env))
    if result.dtype != np.bool_:
        raise TypeError(f"{ev.expr.text!r} is not a boolean expression")
    mask = np.broadcast_to(result, (size,))
    valid = read_valid(t.cols[column], rows)  # a missing value matches no comparison
    return mask & valid if valid is not None else mask


def matching_rows(t: Any, ev: Any, p: Plan) -> np.ndarray:
    """The rows where the expression holds, ascending."""
    assert p.column is not None
    found = candidates(t, ev, p)
    parts = []
    for lo, hi in found.ranges:
        for a in range(lo, hi, _STEP):
            b = min(a + _STEP, hi)
            parts.append(np.flatnonzero(_check(t, ev, p.column, range(a, b))) + a)
    for a in range(0, len(found.rows), _STEP):
        rows = found.rows[a:a + _STEP]
        parts.append(rows[_check(t, ev, p.column, rows)])
    if not parts:
        return np.empty(0, np.int64)
    out = np.concatenate(parts).astype(np.int64, copy=False)
    return np.unique(out) if len(parts) > 1 else out


def matches(t: Any, ev: Any, p: Plan, names: list[str], skip: int,
            limit: int | None) -> Iterator[dict[str, np.ndarray]]:
    """Blocks of matching rows (column name -> values), as ``table_query.matches``."""
    rows = matching_rows(t, ev, p)
    rows = rows[skip:] if limit is None else rows[skip:skip + max(limit, 0)]
    for a in range(0, len(rows), _STEP):
        part = rows[a:a + _STEP]
        yield {n: part.copy() if n == "nrow__" else read_any(t.cols[n], part) for n in names}


def explain(t: Any, ev: Any) -> str:
    """A readable plan of ``ev`` over ``t`` (see ``ctable.explain``)."""
    n = ev.length or 0
    lines = [f"query: {ev.expr.text}", f"rows: {n}"]
    p = plan(t, ev) if ev.columns and n and hasattr(t, "lookup_index") else \
        Plan(None, None, None, n, "no column to read")
    if p.column is not None:
        lines.append(f"plan: {p.kind} index on {p.column!r}, then the whole expression "
                     f"checked on ~{p.estimate} candidate rows "
                     f"({100.0 * p.estimate / max(n, 1):.3g}% of the table)")
        lines.append(f"why: {p.reason}")
        return "\n".join(lines)
    may = ev.block_mask()
    zoned = any(getattr(c, "zone_map", lambda: None)() is not None for c in ev.columns.values())
    how = "zone maps" if ev.prune and zoned else "no zone maps"
    lines.append(f"plan: full scan with {how}: {int(may.sum())} of {len(may)} blocks of "
                 f"{ev.blen} rows may match, ~{int(may.sum()) * ev.blen} rows read")
    lines.append(f"why: {p.reason}")
    return "\n".join(lines)
