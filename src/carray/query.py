"""Expressions over columns, evaluated block by block, skipping what cannot match.

An expression is numexpr syntax (``(x < 0.1) & (y > 0.5)``, arithmetic,
``where``/``sin``/...; ``and``/``or``/``not`` are accepted as ``&``/``|``/``~``).
It is parsed once with :mod:`ast` - which also tells which columns it reads -
then evaluated over consecutive blocks of rows: only the named columns are
decoded, one block at a time into reused buffers, never whole.  Table queries
(:meth:`BlockEvaluator.select`) also pick their output rows block by block, all on
worker threads.

Before decoding a block, the comparisons of a column with a constant are
checked against the column's per-chunk min/max (:mod:`carray.zonemap`); a
block where the whole expression cannot be true is skipped.  The check is
three-valued: for every sub-expression we know whether it *may be true* and
whether it *may be false* somewhere in the block, which is what ``~`` needs.

A small numpy evaluator walks the same tree; on blocks that fit in the CPU
caches it is faster than numexpr for comparisons and arithmetic (numexpr's
per-call cost dominates), so numexpr is used by default only when the
expression calls functions (``sin``, ``exp``...), where its threads pay off.
"""

from __future__ import annotations

import ast
import math
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray import _parallel
from carray.array import carray
from carray.compute.kernel import same_chunks, select_chunk
from carray.errors import ExpressionError

try:
    import numexpr
except ImportError:  # the numpy evaluator covers everything, slower
    numexpr = None

_FUNCTIONS: dict[str, Any] = {
    "where": np.where, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "expm1": np.expm1,
    "log": np.log, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
    "arctan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "arcsinh": np.arcsinh, "arccosh": np.arccosh, "arctanh": np.arctanh, "real": np.real,
    "imag": np.imag, "conj": np.conj, "floor": np.floor, "ceil": np.ceil,
    "contains": lambda s, sub: np.strings.find(s, sub) >= 0,
}
_BINOPS: dict[type, Any] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
    ast.FloorDiv: np.floor_divide, ast.Mod: np.mod, ast.Pow: np.power,
    ast.BitAnd: np.logical_and, ast.BitOr: np.logical_or, ast.BitXor: np.logical_xor,
    ast.LShift: np.left_shift, ast.RShift: np.right_shift,
}
_CMPOPS: dict[type, Any] = {
    ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
    ast.Eq: np.equal, ast.NotEq: np.not_equal,
}
_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE,
         ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
# Rows per block when no column says otherwise (numpy arrays only).
_DEFAULT_BLEN = 1 << 16
# Bytes of columns a worker thread decodes per hand-over in queries.
_GROUP_BYTES = 4 << 20
# Most blocks a worker selects from per hand-over.
_SELECT_GROUP = 4
# Zone maps learnt while a query decodes are updated one thread at a time.
_zone_lock = threading.Lock()


class _Normalise(ast.NodeTransformer):
    """``and``/``or``/``not`` to ``&``/``|``/``~``, and chained comparisons split."""

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        op = ast.BitAnd() if isinstance(node.op, ast.And) else ast.BitOr()
        out = node.values[0]
        for value in node.values[1:]:
            out = ast.BinOp(left=out, op=op, right=value)
        return out

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.UnaryOp(op=ast.Invert(), operand=node.operand)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if type(op) not in _CMPOPS:
                raise ExpressionError(f"unsupported comparison {type(op).__name__}")
            parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
            left = right
        out: ast.expr = parts[0]
        for part in parts[1:]:
            out = ast.BinOp(left=out, op=ast.BitAnd(), right=part)
        return out


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Name, ast.Constant,
            ast.Call, ast.Load, ast.operator, ast.unaryop, ast.cmpop)


@dataclass(frozen=True)
class Expression:
    """A parsed expression: its tree, its numexpr text and the variable names it uses."""

    text: str
    tree: ast.Expression
    names: tuple[str, ...]
    numexpr_text: str
    calls_functions: bool

    @classmethod
    def parse(cls, text: str) -> Expression:
        if not isinstance(text, str) or not text.strip():
            raise ExpressionError(f"expected an expression string, got {text!r}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"cannot parse {text!r}: {exc.msg}") from None
        tree = ast.fix_missing_locations(_Normalise().visit(tree))
        names: list[str] = []
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise ExpressionError(f"{type(node).__name__} is not allowed in {text!r}")
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS \
                        or node.keywords:
                    raise ExpressionError(f"unknown function in {text!r}")
            elif isinstance(node, ast.Name) and node.id not in names:
                names.append(node.id)
        calls = {n.func.id for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        names = [n for n in names if n not in calls or _is_used_as_value(tree, n)]
        return cls(text, tree, tuple(names), ast.unparse(tree), bool(calls))


def _is_used_as_value(tree: ast.AST, name: str) -> bool:
    funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Name) and n.id == name and id(n) not in funcs
               for n in ast.walk(tree))


# -- the numpy evaluator ------------------------------------------------------------------


def evaluate_numpy(tree: ast.AST, env: Mapping[str, Any]) -> Any:
    """Evaluate a normalised expression tree with numpy operations."""
    if isinstance(tree, ast.Expression):
        return evaluate_numpy(tree.body, env)
    if isinstance(tree, ast.Constant):
        return tree.value
    if isinstance(tree, ast.Name):
        return env[tree.id]
    if isinstance(tree, ast.BinOp):
        left, right = evaluate_numpy(tree.left, env), evaluate_numpy(tree.right, env)
        op = _BINOPS.get(type(tree.op))
        if op is None:
            raise ExpressionError(f"unsupported operator {type(tree.op).__name__}")
        if isinstance(tree.op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and not (
                _is_bool(left) and _is_bool(right)):
            op = {ast.BitAnd: np.bitwise_and, ast.BitOr: np.bitwise_or,
                  ast.BitXor: np.bitwise_xor}[type(tree.op)]
        return op(left, right)
    if isinstance(tree, ast.UnaryOp):
        value = evaluate_numpy(tree.operand, env)
        if isinstance(tree.op, ast.USub):
            return np.negative(value)
        if isinstance(tree.op, ast.UAdd):
            return value
        return np.logical_not(value) if _is_bool(value) else np.invert(value)
    if isinstance(tree, ast.Compare):
        return _CMPOPS[type(tree.ops[0])](evaluate_numpy(tree.left, env),
                                          evaluate_numpy(tree.comparators[0], env))
    if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name):
        return _FUNCTIONS[tree.func.id](*(evaluate_numpy(a, env) for a in tree.args))
    raise ExpressionError(f"{type(tree).__name__} is not allowed")  # pragma: no cover


def _is_bool(value: Any) -> bool:
    return np.asarray(value).dtype == np.bool_


# -- zone-map pruning -----------------------------------------------------------------------


@dataclass
class Bounds:
    """Per-block facts about one column: min, max, any NaN, and whether they are known."""

    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray
    known: np.ndarray


def _constant(node: ast.AST, scalars: Mapping[str, Any]) -> Any:
    """The value of a constant operand, or None when it is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _constant(node.operand, scalars)
        return -inner if inner is not None and not isinstance(inner, bool) else None
    if isinstance(node, ast.Name) and node.id in scalars:
        value = scalars[node.id]
        if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
            return value
    return None


def may_match(tree: ast.AST, bounds: Mapping[str, Bounds], scalars: Mapping[str, Any],
              nblocks: int) -> np.ndarray:
    """For each block, False when the expression is certainly false on all its rows."""
    may_true, _ = _tri(tree.body if isinstance(tree, ast.Expression) else tree, bounds,
                       scalars, nblocks)
    return may_true


def _tri(node: ast.AST, bounds, scalars, n) -> tuple[np.ndarray, np.ndarray]:
    unknown = (np.ones(n, bool), np.ones(n, bool))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        lt, lf = _tri(node.left, bounds, scalars, n)
        rt, rf = _tri(node.right, bounds, scalars, n)
        if isinstance(node.op, ast.BitAnd):
            return lt & rt, lf | rf
        return lt | rt, lf & rf
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        t, f = _tri(node.operand, bounds, scalars, n)
        return f, t
    if isinstance(node, ast.Name) and node.id in bounds and \
            bounds[node.id].lo.dtype == np.bool_:
        b = bounds[node.id]
        return ~b.known | b.hi, ~b.known | ~b.lo
    if isinstance(node, ast.Compare):
        op, left, right = type(node.ops[0]), node.left, node.comparators[0]
        if isinstance(right, ast.Name) and right.id in bounds:
            left, right, op = right, left, _FLIP[op]
        if not (isinstance(left, ast.Name) and left.id in bounds):
            return unknown
        c = _constant(right, scalars)
        if c is None or (isinstance(c, float) and math.isnan(c) and op is not ast.NotEq):
            return unknown if c is None else (np.zeros(n, bool), np.ones(n, bool))
        b = bounds[left.id]
        with np.errstate(invalid="ignore"):
            t, f = _compare_bounds(op, b.lo, b.hi, b.nan, c)
        return t | ~b.known, f | ~b.known
    return unknown


def _compare_bounds(op, lo, hi, nan, c) -> tuple[np.ndarray, np.ndarray]:
    if op is ast.Lt:
        return lo < c, (hi >= c) | nan
    if op is ast.LtE:
        return lo <= c, (hi > c) | nan
    if op is ast.Gt:
        return hi > c, (lo <= c) | nan
    if op is ast.GtE:
        return hi >= c, (lo < c) | nan
    inside = (lo <= c) & (c <= hi)
    single = (lo == c) & (hi == c)
    if op is ast.Eq:
        return inside, ~single | nan
    return ~single | nan, inside  # NotEq


# -- evaluation over blocks -------------------------------------------------------------------


def caller_scope(depth: int) -> dict[str, Any]:
    """Variables visible where the user called us (locals over globals), as bcolz does."""
    frame = sys._getframe(depth + 1)
    scope = dict(frame.f_globals)
    scope.update(frame.f_locals)
    return scope


class BlockEvaluator:
    """Evaluate one expression over equal-length columns (carrays, string columns, arrays).

    Parameters
    ----------
    expression : str or Expression
    columns : mapping
        Every name the expression may use that is a column.
    scalars : mapping
        Other names: constants (scalars) or more equal-length arrays.
    vm : {None, 'numexpr', 'python'}
        The evaluator; ``None`` uses numexpr when it can.
    prune : bool
        Skip blocks that the zone maps rule out.
    """

    def __init__(self, expression: str | Expression, columns: Mapping[str, Any],
                 scalars: Mapping[str, Any] | None = None, vm: str | None = None,
                 blen: int | None = None, prune: bool = True) -> None:
        self.expr = expression if isinstance(expression, Expression) else \
            Expression.parse(expression)
        scalars = dict(scalars or {})
        self.columns: dict[str, Any] = {}
        self.scalars: dict[str, Any] = {}
        for name in self.expr.names:
            if name in columns:
                self.columns[name] = columns[name]
            elif name in scalars:
                value = scalars[name]
                if np.ndim(value) == 0 and not hasattr(value, "chunklen"):
                    self.scalars[name] = value
                else:
                    self.columns[name] = value if hasattr(value, "read_rows") \
                        else np.asarray(value)
            else:
                raise ExpressionError(f"{name!r} in {self.expr.text!r} is neither a column "
                                      "nor a variable")
        lengths = {len(c) for c in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"operands of {self.expr.text!r} have different lengths "
                             f"{sorted(lengths)}")
        self.length = lengths.pop() if lengths else None
        if vm == "dask":
            # bcolz's dask machine evaluated blocks with numpy's operators: so does 'python'.
            vm = "python"
        if vm not in (None, "numexpr", "python"):
            raise ValueError(f"vm must be 'numexpr', 'python' or 'dask', got {vm!r}")
        if vm == "numexpr" and numexpr is None:
            raise ImportError("vm='numexpr' needs the numexpr package (pip install numexpr)")
        if vm is None:
            # On blocks that fit in cache numpy beats numexpr's per-call overhead for
            # comparisons and arithmetic; numexpr's threads pay off on functions.
            vm = "numexpr" if numexpr is not None and self.expr.calls_functions else "python"
        self.vm = vm
        chunklens = [c.chunklen for c in self.columns.values() if hasattr(c, "chunklen")]
        self.blen = int(blen) if blen else (min(chunklens) if chunklens else _DEFAULT_BLEN)
        if self.blen < 1:
            raise ValueError("blen must be positive")
        self.prune = prune
        self.skipped = 0  # blocks skipped by the last run, for tests and benchmarks

    # -- pieces ---------------------------------------------------------------------------

    def _block_mask(self) -> np.ndarray:
        n = self.length or 0
        nblocks = -(-n // self.blen)
        if not self.prune or nblocks == 0:
            return np.ones(nblocks, bool)
        bounds = {}
        for name, col in self.columns.items():
            zones = col.zone_map() if isinstance(col, carray) else None
            if zones is not None:
                bounds[name] = _block_bounds(zones, col.chunklen, self.blen, n)
        if not bounds:
            return np.ones(nblocks, bool)
        return may_match(self.expr.tree, bounds, self.scalars, nblocks)

    def _evaluate(self, env: dict[str, Any]) -> np.ndarray:
        if self.vm == "numexpr":
            try:
                return numexpr.evaluate(self.expr.numexpr_text, local_dict=env,
                                        global_dict={})
            except (TypeError, ValueError, NotImplementedError, KeyError, SyntaxError):
                self.vm = "python"  # e.g. unicode or uint64 columns: numpy can
        return np.asarray(evaluate_numpy(self.expr.tree, env))

    def constant(self) -> Any:
        """The value of an expression with no array operands."""
        return self._evaluate(dict(self.scalars))

    def blocks(self, start: int = 0) -> Iterator[tuple[int, int, np.ndarray, dict]]:
        """``(start, stop, result, arrays)`` per block that may match.

        ``arrays`` holds the decoded operands of the block; they live in buffers
        reused by later blocks, so copy what must outlive the next step.  The
        columns of the next blocks are decoded on worker threads while this one is
        evaluated and consumed.
        """
        n = self.length or 0
        may = self._block_mask()
        self.skipped = int((~may).sum())
        todo = [b for b in range(start // self.blen, len(may)) if may[b]]
        # Worker threads decode groups of consecutive blocks (a few MB: handing over
        # one block costs about what decoding it does); buffer sets rotate, reused only
        # once the pipeline's window and the group the caller holds are past them.
        rowbytes = sum(c.dtype.itemsize * math.prod(c.shape[1:])
                       for c in self.columns.values() if isinstance(c, carray))
        size = max(1, min(_GROUP_BYTES // max(rowbytes * self.blen, 1), len(todo)))
        groups = _runs(todo, size)
        window = 2 * _parallel.workers()
        slots: list[dict[str, np.ndarray]] = [{} for _ in range(min(window + 2, len(groups)))]
        threaded = len(groups) > 1 and all(isinstance(c, (carray, np.ndarray))
                                           for c in self.columns.values())

        def bounds(b: int) -> tuple[int, int]:
            return max(b * self.blen, start), min((b + 1) * self.blen, n)

        def env_of(arrays: dict[str, np.ndarray], glo: int, lo: int, hi: int) -> dict:
            env = dict(self.scalars)
            env.update((name, arrays[name][lo - glo:hi - glo]) for name in self.columns)
            return env

        def load(item: tuple[list[int], int]) -> tuple[list[int], int, dict, list | None]:
            group, slot = item
            glo, ghi = bounds(group[0])[0], bounds(group[-1])[1]
            arrays = {name: self._read(col, glo, ghi, slots[slot], name, size)
                      for name, col in self.columns.items()}
            # Evaluated here too, so that on a worker both cores evaluate as well.
            results = [self._evaluate(env_of(arrays, glo, *bounds(b))) for b in group] \
                if threaded else None
            return group, glo, arrays, results

        items = ((g, i % len(slots)) for i, g in enumerate(groups))
        loaded = _parallel.pipeline(load, items, window) if threaded else map(load, items)
        for group, glo, arrays, results in loaded:
            for i, b in enumerate(group):
                lo, hi = bounds(b)
                env = env_of(arrays, glo, lo, hi)
                for name, col in self.columns.items():
                    cl = col.chunklen if isinstance(col, carray) else 0
                    if cl and lo % cl == 0 and hi - lo == cl:
                        col.learn_zone(lo // cl, env[name])
                result = results[i] if results is not None else self._evaluate(env)
                yield lo, hi, np.broadcast_to(result, (hi - lo, *np.shape(result)[1:])), env

    def can_select(self, outputs: Mapping[str, Any]) -> bool:
        """Whether :meth:`select` handles these operands and ``outputs``."""
        return all((isinstance(c, np.ndarray) or (isinstance(c, carray)
                                                  and not c.dtype.hasobject)) and c.ndim == 1
                   for c in (*self.columns.values(), *outputs.values()) if c is not None)

    def select(self, outputs: Mapping[str, Any]) -> Iterator[dict[str, np.ndarray]]:
        """The rows where the expression is true, of every column in ``outputs`` (name ->
        carray or array; None for the row numbers): one dict per group of blocks, in order.

        All the work happens on worker threads, group by group and block by block so
        that a block's operands stay in the CPU cache: decode the operands, evaluate,
        count the matches and, only when there are some, decode the output columns the
        expression did not (whole blocks when many rows match, single rows when few) and
        select.  The caller only joins the groups.  Needs :meth:`can_select`.
        """
        n = self.length or 0
        may = self._block_mask()
        self.skipped = int((~may).sum())
        todo = [b for b in range(len(may)) if may[b]]
        # A block's buffers are reused by the next, so groups only amortise the hand-over
        # to a worker: few per worker, enough of them to keep every worker busy.
        size = max(1, min(_SELECT_GROUP, len(todo) // (4 * _parallel.workers())))
        fused = self._kernel_chunks(outputs)

        def run(group: list[int]) -> dict[str, np.ndarray]:
            parts: dict[str, list[np.ndarray]] = {name: [] for name in outputs}
            for b in group:
                lo, hi = b * self.blen, min((b + 1) * self.blen, n)
                picked = select_chunk(b, self.blen, n, self.columns, self.scalars, outputs,
                                      self._evaluate, self.expr.text) if b in fused else \
                    self._select_block(lo, hi, outputs)
                for name, values in picked.items():
                    parts[name].append(values)
            return {name: p[0] if len(p) == 1 else np.concatenate(p) if p else
                    _empty(outputs[name]) for name, p in parts.items()}

        yield from _parallel.pipeline(run, _runs(todo, size), 2 * _parallel.workers())

    def _kernel_chunks(self, outputs: Mapping[str, Any]) -> set[int] | range:
        """The blocks :meth:`select` runs through the block kernel: all of them when every
        operand and output is a carray chunked as the blocks are, but those whose
        zone map entry is still to learn (they are decoded whole, once)."""
        arrays = [c for c in (*self.columns.values(), *outputs.values()) if c is not None]
        if not arrays or not all(isinstance(c, carray) for c in arrays) or \
                same_chunks(arrays) != self.blen or not self.columns:
            return set()
        nblocks = -(-(self.length or 0) // self.blen)
        learn: set[int] = set()
        for col in self.columns.values():
            zones = col.zone_map()
            if zones is not None:
                learn.update(b for b in range(len(zones)) if not zones.is_known(b))
        return range(nblocks) if not learn else set(range(nblocks)) - learn

    def _select_block(self, lo: int, hi: int, outputs: Mapping[str, Any]
                      ) -> dict[str, np.ndarray]:
        """:meth:`select` on rows ``[lo, hi)``; an empty dict when none match."""
        env = dict(self.scalars)
        for i, (name, col) in enumerate(self.columns.items()):
            env[name] = values = _block_of(col, lo, hi, f"query{i}")
            cl = col.chunklen if isinstance(col, carray) else 0
            if cl and lo % cl == 0 and hi - lo == cl:
                with _zone_lock:  # zone maps are not thread-safe; cheap once known
                    col.learn_zone(lo // cl, values)
        result = np.asarray(self._evaluate(env))
        if result.dtype != np.bool_:
            raise TypeError(f"{self.expr.text!r} is not a boolean expression")
        mask = result if result.shape == (hi - lo,) else np.broadcast_to(result, (hi - lo,))
        count = int(np.count_nonzero(mask))
        if count == 0:
            return {}
        # Positions select faster than a mask when few rows match (and allow row reads).
        sparse = count * 4 < hi - lo
        sel = np.flatnonzero(mask) if sparse else mask
        out = {}
        for j, (name, col) in enumerate(outputs.items()):
            if col is None:
                out[name] = (sel if sparse else np.flatnonzero(mask)) + lo
            elif self.columns.get(name) is col:
                out[name] = _pick(env[name], sel)
            elif isinstance(col, carray) and count * 64 < hi - lo:
                out[name] = col.take(sel + lo)  # few rows: only their Blosc blocks
            else:
                out[name] = _pick(_block_of(col, lo, hi, f"out{j}"), sel)
        return out

    def _read(self, col: Any, lo: int, hi: int, buffers: dict, name: str,
              blocks: int = 1) -> np.ndarray:
        if isinstance(col, np.ndarray):
            return col[lo:hi]
        if not isinstance(col, carray):  # string columns
            return col.read_rows(range(lo, hi))
        buf = buffers.get(name)
        if buf is None:
            buf = buffers[name] = np.empty((blocks * self.blen, *col.shape[1:]),
                                           dtype=col.dtype)
        return col.read_rows(range(lo, hi), out=buf[:hi - lo])


def _block_of(col: Any, lo: int, hi: int, slot: str) -> np.ndarray:
    """Rows ``[lo, hi)`` of a carray (decoded into this thread's buffer ``slot``, valid
    until its next use) or of an array (a view)."""
    if isinstance(col, np.ndarray):
        return col[lo:hi]
    shape = (hi - lo, *col.shape[1:])
    nbytes = math.prod(shape) * col.dtype.itemsize
    buf = _parallel.scratch(nbytes, slot)[:nbytes].view(col.dtype).reshape(shape)
    return col.read_rows(range(lo, hi), out=buf)


def _pick(values: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``values[sel]`` (a mask or positions) as a new array."""
    if sel.dtype == np.bool_:
        return np.compress(sel, values, axis=0)
    return values.take(sel, axis=0)


def _empty(col: Any) -> np.ndarray:
    """No rows of column ``col`` (None: row numbers)."""
    if col is None:
        return np.empty(0, np.intp)
    return np.empty((0, *col.shape[1:]), dtype=col.dtype)


def _runs(blocks: list[int], size: int) -> list[list[int]]:
    """``blocks`` cut into runs of consecutive numbers, at most ``size`` long."""
    runs: list[list[int]] = []
    for b in blocks:
        if runs and b == runs[-1][-1] + 1 and len(runs[-1]) < size:
            runs[-1].append(b)
        else:
            runs.append([b])
    return runs


def _block_bounds(zones, chunklen: int, blen: int, n: int) -> Bounds:
    """Per-block min/max over the chunks each block of ``blen`` rows overlaps."""
    starts = np.arange(0, n, blen)
    stops = np.minimum(starts + blen, n)
    c0, c1 = starts // chunklen, (stops - 1) // chunklen
    nz = len(zones.known)
    lo = np.zeros(len(starts), dtype=zones.lo.dtype)
    hi = np.zeros(len(starts), dtype=zones.hi.dtype)
    nan = np.zeros(len(starts), bool)
    known = np.zeros(len(starts), bool)
    if np.array_equal(c0, c1):
        inside = c0 < nz
        idx = c0[inside]
        lo[inside], hi[inside], nan[inside] = zones.lo[idx], zones.hi[idx], zones.nan[idx]
        known[inside] = zones.known[idx]
        return Bounds(lo, hi, nan, known)
    for i, (a, b) in enumerate(zip(c0, c1, strict=True)):
        if b < nz and zones.known[a:b + 1].all():
            # fmin/fmax skip the NaN bounds of all-NaN chunks.
            lo[i], hi[i] = np.fmin.reduce(zones.lo[a:b + 1]), np.fmax.reduce(zones.hi[a:b + 1])
            nan[i], known[i] = zones.nan[a:b + 1].any(), True
    return Bounds(lo, hi, nan, known)


__all__ = ["BlockEvaluator", "Expression", "ExpressionError", "caller_scope", "evaluate_numpy",
           "may_match"]


def collect_result(ev: Any, out_flavor: str, kwargs: dict) -> Any:
    """Gather the blocks of an evaluation into a carray or a numpy array."""
    if out_flavor not in ("carray", "bcolz", "numpy"):
        raise ValueError(f"out_flavor must be 'carray' or 'numpy', got {out_flavor!r}")
    if ev.length is None:
        value = ev.constant()
        return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value
    out: Any = None
    parts = []
    for _, _, result, _ in ev.blocks():
        if out_flavor == "numpy":
            parts.append(np.array(result))
            continue
        if out is None:
            kwargs.setdefault("expectedlen", ev.length)
            out = carray(np.empty((0, *result.shape[1:]), dtype=result.dtype), **kwargs)
        out.append(result)
    if out_flavor == "numpy":
        return np.concatenate(parts) if parts else np.empty(0)
    if out is None:
        out = carray(np.empty(0), **kwargs)
    out.flush()
    return out
