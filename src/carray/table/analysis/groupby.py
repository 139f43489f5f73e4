"""Group-by over a table, streamed block by block.

Each block of rows (a whole number of the columns' chunks) is read on a worker
thread, its key columns factorized into group ids (integer keys of a small range by
offsets, categorical keys by their codes, strings and floats by Arrow's hash
encoding), and every aggregation's per-group state computed with vectorised numpy.
The caller merges the blocks' states as they arrive; what it holds is bounded by the
number of groups.  Missing values and categories are read only through
:mod:`carray.table.columns.kinds`' contract (``read_valid``, ``read_codes``,
``categories_of``); a float NaN (or NaT) is missing too, as in pandas.

Results are ordered by key, ascending: numbers and strings by value (strings by code
point), a categorical key in its dictionary's order (pandas' order for
``observed=True``); with ``dropna=False`` the group of missing keys comes last.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.codecs import parallel as _parallel
from carray.table.analysis import groupby_kernels as kern
from carray.table.analysis.groupby_kernels import GroupByError
from carray.table.columns import timezones
from carray.table.columns.category_values import CategoricalValues, decode
from carray.table.columns.kinds import (
    categories_of,
    read_any,
    read_codes,
    read_valid,
    select_rows,
)
from carray.table.columns.missing_values import filler
from carray.table.columns.strings import StringColumn

# Rows per block, at least (rounded up to whole chunks): enough work per task to keep
# the per-block Python overhead small, little enough that blocks stay in cache.
_BLOCK_ROWS = 1 << 18
# Block states are merged once they hold this many groups (or twice the merged ones).
_MERGE_AT = 1 << 16


@dataclass
class _Partial:
    """The groups of some rows: each key's values (and which are missing), and the state
    of every aggregation, one entry per group."""

    keys: list[tuple[np.ndarray, np.ndarray]]
    ngroups: int
    states: list[tuple[np.ndarray, ...]]


@dataclass
class _Spec:
    out: str
    column: str | None  # None: the rows themselves (size)
    func: str


def _key_values(col: Any, rows: range) -> tuple[Any, np.ndarray | None]:
    """A key column's values for ``rows`` (codes of a categorical, an Arrow array of a
    string column) and the mask of its missing rows."""
    codes = read_codes(col, rows)
    valid = read_valid(col, rows)
    if codes is not None:
        return np.asarray(codes), None if valid is None else ~valid
    if isinstance(col, StringColumn) and kern.pyarrow_or_none() is not None:
        return col.arrow_rows(rows.start, rows.stop), None if valid is None else ~valid
    values = read_any(col, rows)
    return values, kern.missing_of(values, valid)


class _Plan:
    """What a group-by reads and computes, and its block-by-block run."""

    def __init__(self, table: Any, keys: list[str], specs: list[_Spec], dropna: bool) -> None:
        self.table, self.keys, self.specs, self.dropna = table, keys, specs, dropna
        self.cols = {n: table.cols[n] for n in {*keys, *(s.column for s in specs
                                                        if s.column is not None)}}
        # What each aggregation reads: a column's values, or a categorical column's codes
        # for min and max (its dictionary's order, as pandas' ordered categories).
        self.values = sorted({self._operand(s) for s in specs if s.func != "size" and s.column})

    def _operand(self, spec: _Spec) -> tuple[str, bool]:
        """``(column, by codes)`` of what ``spec`` aggregates."""
        assert spec.column is not None
        coded = spec.func in ("min", "max") and categories_of(self.cols[spec.column]) is not None
        return spec.column, coded

    def blocks(self, blen: int | None = None) -> list[range]:
        n = len(self.table)
        if blen is None:
            chunk = max((getattr(c, "chunklen", 1) or 1 for c in self.cols.values()), default=1)
            blen = chunk * max(1, math.ceil(_BLOCK_ROWS / chunk))
        return [range(lo, min(lo + blen, n)) for lo in range(0, n, blen)] or [range(0, 0)]

    def block(self, rows: range) -> _Partial:
        """The groups and states of one block of rows."""
        codes, sizes, uniques = [], [], []
        keep: np.ndarray | None = None
        for k in self.keys:
            values, missing = _key_values(self.cols[k], rows)
            c, u = kern.factorize(values, missing)
            missed = missing is not None and bool(missing.any())
            codes.append(c)
            sizes.append(len(u) + missed)
            uniques.append(u)
            if self.dropna and missed:
                assert missing is not None
                keep = ~missing if keep is None else keep & ~missing
        if keep is not None:
            codes = [select_rows(c, keep) for c in codes]
            sizes = [len(u) for u in uniques]
        if len(codes) == 1:  # one key's codes are already dense and in order
            states = self._states(rows, codes[0], sizes[0], keep)
            u, kc = uniques[0], np.arange(sizes[0])
            vals = u if len(u) == sizes[0] else np.concatenate([u, _fillers(u, 1)])
            return _Partial([(vals, kc == len(u))], sizes[0], states)
        ids, ngroups = kern.combine(codes, [n + 1 for n in sizes])
        rep = kern.representatives(ids, ngroups)
        keyparts = []
        for c, u in zip(codes, uniques, strict=True):
            kc = c[rep]
            miss = kc == len(u)
            vals = u[np.minimum(kc, len(u) - 1)] if len(u) else _fillers(u, len(kc))
            keyparts.append((vals, miss))
        states = self._states(rows, ids, ngroups, keep)
        return _Partial(keyparts, ngroups, states)

    def _states(self, rows: range, ids: np.ndarray, ngroups: int,
                keep: np.ndarray | None) -> list[tuple[np.ndarray, ...]]:
        read: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray | None]] = {}
        for name, coded in self.values:
            col = self.cols[name]
            codes = read_codes(col, rows) if coded else None
            values = read_any(col, rows) if codes is None else np.asarray(codes)
            missing = kern.missing_of(values, read_valid(col, rows))
            if keep is not None:
                values = select_rows(values, keep)
                missing = None if missing is None else select_rows(missing, keep)
            read[name, coded] = (values, None if missing is None or not missing.any() else
                                 ~missing)
        numbers = None
        if any(s.func in ("first", "last") for s in self.specs):
            numbers = np.arange(rows.start, rows.stop, dtype=np.int64)
            numbers = numbers if keep is None else select_rows(numbers, keep)
        states = []
        for s in self.specs:
            if s.func == "size" or s.column is None:
                states.append(kern.block_state("size", ids, ngroups, None, None))
                continue
            values, present = read[self._operand(s)]
            fast = None if present is None else \
                kern.masked_state(s.func, ids, ngroups, values, present)
            if fast is not None:
                states.append(fast)
            elif present is not None:
                states.append(kern.block_state(
                    s.func, select_rows(ids, present), ngroups, select_rows(values, present),
                    None if numbers is None else select_rows(numbers, present)))
            else:
                states.append(kern.block_state(s.func, ids, ngroups, values, numbers))
        return states

    def merge(self, parts: Sequence[_Partial]) -> _Partial:
        """One partial from several (any rows), in key order."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [p.ngroups for p in parts[:-1]])
        codes, sizes, keyvals = [], [], []
        for k in range(len(self.keys)):
            values = np.concatenate([p.keys[k][0] for p in parts])
            missing = np.concatenate([p.keys[k][1] for p in parts])
            c, u = kern.factorize(values, missing)
            codes.append(c)
            sizes.append(len(u) + 1)
            keyvals.append((values, missing))
        ids, ngroups = kern.combine(codes, sizes)
        rep = kern.representatives(ids, ngroups)
        keys = [(v[rep], m[rep]) for v, m in keyvals]
        states = [kern.merge_states(s.func, ids, ngroups, [p.states[j] for p in parts], offsets)
                  for j, s in enumerate(self.specs)]
        return _Partial(keys, ngroups, states)

    def run(self, blen: int | None = None) -> _Partial:
        """Every block's groups, merged as they come (memory: a few times the groups)."""
        merged: _Partial | None = None
        pending: list[_Partial] = []
        held = 0
        for part in _parallel.pipeline(self.block, self.blocks(blen)):
            pending.append(part)
            held += part.ngroups
            if held > max(_MERGE_AT, 2 * (merged.ngroups if merged else 0)):
                merged = self.merge(([merged] if merged else []) + pending)
                pending, held = [], 0
        return self.merge(([merged] if merged else []) + pending)

    def columns(self, result: _Partial) -> dict[str, Any]:
        """The result's columns: the keys (decoded; the group of missing keys masked, a
        zoned timestamp key with its zone), then the outputs."""
        out: dict[str, Any] = {}
        for name, (values, missing) in zip(self.keys, result.keys, strict=True):
            col = self.cols[name]
            cats = categories_of(col)
            if cats is not None:  # categorical, with the same dictionary
                codes = np.where(missing, -1, values).astype(np.int64)
                out[name] = CategoricalValues(codes, cats, getattr(col, "ordered", False))
            else:
                out[name] = key_values(col, values, missing)
        for s, state in zip(self.specs, result.states, strict=True):
            values = kern.final_value(s.func, state, result.ngroups)
            if s.column is not None and self._operand(s)[1]:  # codes: their values
                values = _decoded(self.cols[s.column], values)
            elif s.func in ("min", "max", "first", "last") and s.column is not None:
                values = key_values(self.cols[s.column], values, None)  # a zone kept
            out[s.out] = values
        return out


def _decoded(col: Any, codes: np.ndarray) -> np.ndarray:
    """The values of a categorical column's ``codes`` (masked where a group has none)."""
    mask = np.ma.getmaskarray(codes) if np.ma.isMaskedArray(codes) else None
    cats = categories_of(col)
    assert cats is not None
    values = decode(np.where(mask, -1, np.ma.getdata(codes)) if mask is not None else codes,
                    cats)
    return values if mask is None or not mask.any() else np.ma.MaskedArray(values, mask=mask)


def _fillers(like: np.ndarray, n: int) -> np.ndarray:
    """``n`` values standing for a missing key, of ``like``'s dtype (never a number among
    strings)."""
    return np.full(n, filler(like.dtype), dtype=like.dtype)


def key_values(col: Any, values: np.ndarray, missing: np.ndarray | None) -> Any:
    """Values of column ``col`` (keys, or an aggregation's, masked where a group has
    none) as a result table takes them: masked where ``missing`` too, with the zone of a
    zoned timestamp column."""
    mask = np.ma.getmaskarray(values) if np.ma.isMaskedArray(values) else None
    if missing is not None and missing.any():
        mask = missing if mask is None else mask | missing
    zone = timezones.zone_of(col)
    data = np.ma.getdata(values)
    if zone is not None:
        data = timezones.ZonedTimes(data, zone)
    return data if mask is None else np.ma.MaskedArray(data, mask=mask)


# -- the user-facing object -------------------------------------------------------------


def _specs(table: Any, keys: list[str], spec: Any, named: Mapping[str, Any]) -> list[_Spec]:
    """Every accepted way of naming aggregations, as ``(output, column, func)``."""
    items: list[tuple[str, Any]] = list((spec or {}).items()) + list(named.items())
    if spec is not None and not isinstance(spec, Mapping):
        raise GroupByError("agg() takes a dict such as {'out': ('col', 'mean')}, got "
                           f"{type(spec).__name__}")
    specs = []
    for out, what in items:
        if isinstance(what, str):  # {'col': 'sum'}: the column's own name
            pairs = [(out, out, what)]
        elif isinstance(what, tuple) and len(what) == 2:
            pairs = [(out, what[0], what[1])]
        elif isinstance(what, list):  # {'col': ['min', 'max']}: col_min, col_max
            pairs = [(f"{out}_{f}", out, f) for f in what]
        else:
            raise GroupByError(f"aggregation {out!r}: give 'func', ('column', 'func') or "
                               f"a list of funcs, not {what!r}")
        for name, column, func in pairs:
            specs.append(_check_spec(table, keys, name, column, func))
    names = list(keys) + [s.out for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GroupByError(f"the result would have several columns named {dupes}")
    return specs


def _check_spec(table: Any, keys: list[str], out: str, column: Any, func: Any) -> _Spec:
    _check_order(table, column, func)
    return _checked_spec(table, keys, out, column, func)


def _check_order(table: Any, column: Any, func: Any) -> None:
    """Refuse ``min``/``max`` of unordered categories (as pandas: they have no order)."""
    col = table.cols[column] if column in table.cols else None
    if func in ("min", "max") and categories_of(col) is not None and \
            not getattr(col, "ordered", False):
        raise GroupByError(f"column {column!r} holds unordered categories, which have no "
                           f"{func}; make them ordered (categorical(..., ordered=True))")


def _checked_spec(table: Any, keys: list[str], out: str, column: Any, func: Any) -> _Spec:
    if func == "size" and column is None:
        return _Spec(out, None, "size")
    if column not in table.cols:
        raise GroupByError(f"aggregation {out!r}: the table has no column {column!r} (it has "
                           f"{list(table.cols)})")
    col = table.cols[column]
    dtype = np.dtype(object) if isinstance(col, StringColumn) else col.dtype
    if getattr(col, "ndim", 1) > 1 or dtype.names:
        raise GroupByError(f"column {column!r} holds arrays or records: only columns of "
                           "scalars can be aggregated")
    kern.check_aggregation(func, column, dtype)
    return _Spec(out, column, func)


class GroupBy:
    """The groups of a table by one or several key columns (``t.groupby(keys)``).

    Aggregations skip missing values (NaN included), as pandas does: ``count`` is the
    number of present values, ``size`` the number of rows; ``std``/``var`` use
    ``ddof=1``; ``first``/``last`` are the first/last present value in row order;
    ``nunique`` counts distinct present values.  A group with no value for ``min``,
    ``max``, ``mean``, ``first`` or ``last`` (fewer than two for ``std``, ``var``) gets
    a missing value, in a result column of the values' own type (as pandas' nullable
    dtypes give NA); ``min``/``max``/``first``/``last`` of zoned timestamps keep the
    zone.  With ``dropna=False`` the group of missing keys has a missing key.

    Every result is a ctable of the key columns, then the outputs, one row per group
    in ascending key order (see :mod:`carray.table.analysis.groupby`), in memory or at
    ``rootdir``.
    """

    def __init__(self, table: Any, keys: str | Sequence[str], dropna: bool = True,
                 make: Callable[..., Any] | None = None) -> None:
        self._table = table
        self.keys = kern.key_columns(table, keys, "group")
        self.dropna = dropna
        self._make = make

    def agg(self, spec: Mapping[str, Any] | None = None, /, *, rootdir: Any = None,
            mode: str = "w", blen: int | None = None, **named: Any) -> Any:
        """Aggregate every group.

        Parameters
        ----------
        spec : dict, optional
            ``{'out': ('column', 'func')}``; also ``{'column': 'func'}`` (the output
            named as the column) and ``{'column': ['f1', 'f2']}`` (outputs
            ``column_f1``, ``column_f2``).  ``func`` is one of count, size, sum, mean,
            min, max, std, var, first, last, nunique.
        rootdir, mode : optional
            Where to store the result (default: in memory), as for :class:`ctable`.
        blen : int, optional
            Rows per block (default: whole chunks, about 256 Ki rows).
        **named
            The same as ``spec``'s entries: ``out=('column', 'func')`` or
            ``column='func'``.

        Returns
        -------
        ctable
            The keys, then the outputs in the order given.
        """
        plan = _Plan(self._table, self.keys, _specs(self._table, self.keys, spec, named),
                     self.dropna)
        return self._result(plan.columns(plan.run(blen)), rootdir, mode)

    def size(self, *, rootdir: Any = None, mode: str = "w") -> Any:
        """The number of rows of every group (column ``size``)."""
        plan = _Plan(self._table, self.keys, [_Spec("size", None, "size")], self.dropna)
        return self._result(plan.columns(plan.run()), rootdir, mode)

    def count(self, *, rootdir: Any = None, mode: str = "w") -> Any:
        """The number of present values of every other column in every group."""
        return self.agg({n: (n, "count") for n in self._table.cols if n not in self.keys},
                        rootdir=rootdir, mode=mode)

    def _result(self, columns: dict[str, np.ndarray], rootdir: Any, mode: str) -> Any:
        if self._make is None:
            return columns
        return self._make(columns, rootdir=rootdir, mode=mode)


def distinct(table: Any, column: str, dropna: bool = True,
             counts: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """The distinct values of ``column`` in ascending order (missing ones left out
    unless ``dropna=False``), and with ``counts`` how many rows hold each."""
    if column not in table.cols:
        raise GroupByError(f"no column {column!r} in the table (it has {list(table.cols)})")
    specs = [_Spec("count", None, "size")] if counts else []
    plan = _Plan(table, [column], specs, dropna)
    cols = plan.columns(plan.run())
    return cols[column], cols.get("count")

