"""Expressions over columns, evaluated block by block, skipping what cannot match.

An expression is numexpr syntax (``(x < 0.1) & (y > 0.5)``, arithmetic,
``where``/``sin``/..., ``carrier in ['UA', 'AA']``, ``day >= '2013-06-01'``); it
is parsed once (:mod:`carray.compute.parse`, which also tells which columns it
reads) and its operators and functions mean what :mod:`carray.compute.ops` says,
as for N-d expressions.  It is evaluated over consecutive blocks of rows: only the
named columns are decoded, one block at a time into reused buffers, never whole.
Table queries (:meth:`BlockEvaluator.select`) also pick their output rows block by
block, all on worker threads.

Before decoding a block, the expression is checked three-valued against the
columns' per-chunk min/max (:mod:`carray.compute.zonemap`, :mod:`carray.compute.prune`);
a block where it cannot be true is skipped.

The numpy evaluator is faster than numexpr on blocks that fit in the CPU caches
for comparisons and arithmetic (numexpr's per-call cost dominates), so numexpr is
used by default only when the expression calls functions (``sin``, ``exp``...),
where its threads pay off, and only where it gives numpy's answer.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.codecs import parallel as _parallel
from carray.compute import kleene
from carray.compute.kernel import same_chunks, select_chunk
from carray.compute.ops import evaluate_numpy, numexpr_text, walk
from carray.compute.parse import Expression, caller_scope
from carray.compute.prune import Bounds, may_match
from carray.errors import ExpressionError, UnknownNameError

try:
    import numexpr
except ImportError:  # the numpy evaluator covers everything, slower
    numexpr = None

# Rows per block when no column says otherwise (numpy arrays only).
_DEFAULT_BLEN = 1 << 16
# Bytes of columns a worker thread decodes per hand-over in queries.
_GROUP_BYTES = 4 << 20
# Most blocks a worker selects from per hand-over.
_SELECT_GROUP = 4
# Zone maps learnt while a query decodes are updated one thread at a time.
_zone_lock = threading.Lock()
# The numexpr text of an evaluator before its first block is seen.
_UNPLANNED = object()


# -- evaluation over blocks -------------------------------------------------------------------


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
                        else kleene.operand(value)
            else:
                raise UnknownNameError(f"{name!r} in {self.expr.text!r} is neither a column "
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
        self._numexpr_text: Any = _UNPLANNED
        chunklens = [c.chunklen for c in self.columns.values() if hasattr(c, "chunklen")]
        self.blen = int(blen) if blen else (min(chunklens) if chunklens else _DEFAULT_BLEN)
        if self.blen < 1:
            raise ValueError("blen must be positive")
        self.prune = prune
        # Columns that can hold missing values are read with their validity and the
        # expression evaluated three-valued (compute.kleene); the others cost nothing more.
        self.nullable = {n for n, c in self.columns.items()
                         if hasattr(c, "valid") and not isinstance(c, np.ndarray)}
        self.skipped = 0  # blocks skipped by the last run, for tests and benchmarks

    # -- pieces ---------------------------------------------------------------------------

    def _block_mask(self) -> np.ndarray:
        n = self.length or 0
        nblocks = -(-n // self.blen)
        if not self.prune or nblocks == 0:
            return np.ones(nblocks, bool)
        bounds = {}
        for name, col in self.columns.items():
            # A column with missing values: its stored values' zones (fillers too) bound
            # the values present, and a missing row never makes a comparison true.
            zones = col.zone_map() if isinstance(col, carray) else \
                col.filled_zone_map() if hasattr(col, "filled_zone_map") else None
            if zones is not None:
                bounds[name] = _block_bounds(zones, col.chunklen, self.blen, n)
        if not bounds:
            return np.ones(nblocks, bool)
        return may_match(self.expr.tree, bounds, self.scalars, nblocks)

    def block_mask(self) -> np.ndarray:
        """Per block of ``blen`` rows, whether the zone maps leave it possibly matching."""
        return self._block_mask()

    def evaluate(self, env: dict[str, Any]) -> np.ndarray:
        """The expression on operands ``env`` (a nullable column's as ``kleene.Maybe``):
        booleans are True only where the result is known true."""
        return self._evaluate(env)

    def _evaluate(self, env: dict[str, Any]) -> np.ndarray:
        if self.nullable:
            return kleene.settle(walk(self.expr.tree, env.__getitem__, kleene.apply))
        if self.vm == "numexpr":
            # Only where numexpr gives numpy's answer for these dtypes (ops.numexpr_text);
            # planned on the first block, as every block has the same dtypes.
            text = self._numexpr_text
            if text is _UNPLANNED:
                text = self._numexpr_text = numexpr_text(
                    self.expr.tree, {k: getattr(v, "dtype", type(v)) for k, v in env.items()})
            if text is not None:
                try:
                    return numexpr.evaluate(text, local_dict=env, global_dict={})
                except (TypeError, ValueError, NotImplementedError, KeyError, SyntaxError):
                    pass
            self.vm = "python"  # e.g. unicode, uint64 or date columns, lists: numpy can
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
                       for c in self.columns.values()
                       if isinstance(c, carray) or getattr(c, "parallel_reads", False))
        size = max(1, min(_GROUP_BYTES // max(rowbytes * self.blen, 1), len(todo)))
        groups = _runs(todo, size)
        window = 2 * _parallel.workers()
        slots: list[dict[str, np.ndarray]] = [{} for _ in range(min(window + 2, len(groups)))]
        threaded = len(groups) > 1 and all(isinstance(c, (carray, np.ndarray)) or
                                           getattr(c, "parallel_reads", False)
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
                yield lo, hi, result if np.shape(result)[:1] == (hi - lo,) else \
                    np.broadcast_to(result, (hi - lo, *np.shape(result)[1:])), env

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
        if name in self.nullable:
            rows = range(lo, hi)
            return kleene.Maybe(col.read_rows(rows), col.valid(rows))  # type: ignore[return-value]
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


__all__ = ["BlockEvaluator", "Bounds", "Expression", "ExpressionError", "caller_scope",
           "evaluate_numpy", "may_match"]


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
            parts.append(np.ma.array(result) if np.ma.isMaskedArray(result) else np.array(result))
            continue
        if out is None:
            kwargs.setdefault("expectedlen", ev.length)
            out = carray(np.empty((0, *result.shape[1:]), dtype=result.dtype), **kwargs)
        out.append(result)
    if out_flavor == "numpy":
        if any(np.ma.isMaskedArray(p) for p in parts):  # unknown where operands are missing
            return np.ma.concatenate(parts)
        return np.concatenate(parts) if parts else np.empty(0)
    if out is None:
        out = carray(np.empty(0), **kwargs)
    out.flush()
    return out
