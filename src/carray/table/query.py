"""Queries over a table: which blocks of rows match an expression, and their values.

The table methods ``where``, ``whereblocks``, ``fetchwhere`` and ``eval`` use these;
they know a table only by its public API (``cols``, ``len``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from carray.array.container import TableBase
from carray.array.expression import BlockEvaluator, caller_scope
from carray.table.columns import category_query
from carray.table.columns.category import CategoryColumn
from carray.table.columns.kinds import field_dtype, read_any, read_valid, select_rows
from carray.table.columns.strings import StringColumn
from carray.table.index import planner as index_planner

# The name a boolean array of rows takes when it is the query (bcolz's where(boolarr)).
_MASK_NAME = "where_mask__"


def evaluator(t: Any, expression: str, user_dict: Mapping | None, vm: str | None,
              depth: int, blen: int | None = None, prune: bool = True) -> BlockEvaluator:
    """The block evaluator of ``expression`` over ``t``'s columns (and the variables of
    the caller ``depth`` frames up)."""
    if not isinstance(expression, str):  # bcolz: a boolean carray (or array) of rows
        user_dict = {**(user_dict or {}), _MASK_NAME: expression}
        expression = _MASK_NAME
    expr, cols = category_query.rewrite(index_planner.parsed(expression), t.cols)
    scope = {}
    if any(n not in cols for n in expr.names):
        scope = caller_scope(depth + 1)
        scope.update(user_dict or {})
    ev = BlockEvaluator(expr, cols, scope, vm=vm, blen=blen, prune=prune)
    if ev.length is not None and ev.length != len(t):
        raise ValueError(f"operands of {expression!r} have {ev.length} rows, the table "
                         f"{len(t)}")
    ev.length = len(t)
    return ev

def matches(t: Any, ev: BlockEvaluator, names: list[str], skip: int,
            limit: int | None) -> Iterator[dict[str, np.ndarray]]:
    """Blocks of matching rows: column name -> values (copies)."""
    if (indexed := index_planner.planned(t, ev)) is not None:  # an index is cheaper
        return (yield from index_planner.matches(t, ev, indexed, names, skip, limit))
    outputs = {n: None if n == "nrow__" else category_query.scanned(t.cols[n]) for n in names}
    if not skip and limit is None and ev.length and ev.columns and ev.can_select(outputs):
        yield from category_query.decoded(ev.select(outputs), t.cols)  # all on worker threads
        return
    taken = 0
    buffers: dict[str, np.ndarray] = {}
    # Output columns with missing values give masked arrays (None in rows).
    nullable = [n for n in names if n != "nrow__" and read_valid(t.cols[n], range(0)) is not None]
    for lo, hi, result, env in ev.blocks():
        if result.dtype != np.bool_:
            raise TypeError(f"{ev.expr.text!r} is not a boolean expression")
        count = int(np.count_nonzero(result))
        if count == 0:
            continue
        # A boolean mask selects fastest; positions are needed to skip, limit or number.
        sel: np.ndarray = result
        if skip or limit is not None or "nrow__" in names or count * 64 < hi - lo:
            sel = np.flatnonzero(result)
            if skip:
                if skip >= len(sel):
                    skip -= len(sel)
                    continue
                sel, skip = sel[skip:], 0
            if limit is not None:
                sel = sel[:limit - taken]
            count = len(sel)
            if count == 0:
                continue
        block = {}
        for n in names:
            if n == "nrow__":
                block[n] = sel + lo
            elif n in env and isinstance(env[n], np.ndarray) and n in ev.columns:
                block[n] = select_rows(env[n], sel)
            else:
                block[n] = take(t, n, sel, count, lo, hi, buffers)
        for n in nullable:
            valid = read_valid(t.cols[n], range(lo, hi))
            assert valid is not None  # the column can hold missing values
            block[n] = np.ma.MaskedArray(block[n], mask=~select_rows(valid, sel))
        yield block
        taken += count
        if limit is not None and taken >= limit:
            return

def take(t: Any, name: str, sel: np.ndarray, count: int, lo: int, hi: int,
         buffers: dict[str, np.ndarray]) -> np.ndarray:
    """Rows ``sel`` (mask or positions) of block ``[lo, hi)`` of a column.

    Few rows are fetched one by one (only their Blosc blocks are decoded); many
    by decoding the whole block into a reused buffer.
    """
    col = t.cols[name]
    if isinstance(col, (StringColumn, CategoryColumn, TableBase)) or count * 64 < hi - lo:
        idx = np.flatnonzero(sel) if sel.dtype == np.bool_ else sel
        return read_any(col, idx + lo)
    buf = buffers.get(name)
    if buf is None or len(buf) < hi - lo:
        buf = buffers[name] = np.empty((hi - lo, *col.shape[1:]), dtype=col.dtype)
    return select_rows(col.read_rows(range(lo, hi), out=buf[:hi - lo]), sel)

def result_dtype(t: Any, names: list[str]) -> np.dtype:
    """The dtype of result rows of columns ``names`` (``nrow__``: the row number)."""
    return np.dtype([(n, np.int64) if n == "nrow__" else (n, field_dtype(t.cols[n]))
                     for n in names])


def match_blocks(t: Any, ev: BlockEvaluator, names: list[str], blen: int, skip: int,
                 limit: int | None) -> Iterator[np.ndarray]:
    """Structured arrays of ``blen`` matching rows of table ``t`` (the last one shorter),
    columns ``names``."""
    dtype = result_dtype(t, names)
    pending: list[np.ndarray] = []
    npending = 0
    for block in matches(t, ev, names, skip, limit):
        n = len(next(iter(block.values())))
        arr = np.empty(n, dtype=dtype)
        for name in names:
            arr[name] = block[name]
        arr = _masked(arr, block)
        pending.append(arr)
        npending += n
        while npending >= blen:
            merged = _concatenate(pending)
            yield merged[:blen]
            pending, npending = [merged[blen:]], npending - blen
    if npending:
        yield _concatenate(pending)


def _masked(rows: np.ndarray, block: dict[str, np.ndarray]) -> np.ndarray:
    """Structured ``rows`` masked where ``block``'s masked columns are (else as they are)."""
    masked = {n: v for n, v in block.items() if np.ma.isMaskedArray(v)}
    if not masked:
        return rows
    mask: Any = np.zeros(len(rows), dtype=np.ma.make_mask_descr(rows.dtype))
    for n, v in masked.items():  # records: a mask per field; N-d rows: one per item
        mask[n] = np.ma.getmaskarray(v)
    return np.ma.MaskedArray(rows, mask=mask)


def _concatenate(parts: list[np.ndarray]) -> np.ndarray:
    if any(np.ma.isMaskedArray(p) for p in parts):
        return np.ma.concatenate(parts)
    return np.concatenate(parts)


def fetch(t: Any, ev: BlockEvaluator, names: list[str], skip: int,
          limit: int | None) -> np.ndarray:
    """Every matching row of table ``t`` at once, columns ``names``, as a structured
    array."""
    parts: dict[str, list] = {n: [] for n in names}
    for block in matches(t, ev, names, skip, limit):
        for n in names:
            parts[n].append(block[n])
    out = np.empty(sum(len(p) for p in parts[names[0]]) if names else 0,
                   dtype=result_dtype(t, names))
    for n in names:
        if parts[n]:  # straight into the result: one copy, not two
            np.concatenate([np.ma.getdata(p) for p in parts[n]], out=out[n])
    return _masked(out, {n: np.ma.concatenate(p) for n, p in parts.items()
                         if any(np.ma.isMaskedArray(v) for v in p)})
