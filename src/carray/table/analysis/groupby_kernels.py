"""Vectorised building blocks of a group-by: group ids from key values, and the
per-group state of every aggregation, computed for one block of rows and merged
across blocks.

A block's state is one array per aggregation quantity, one entry per group of the
block; merging states is itself a group-by of those entries (by the groups' keys), so
memory follows the number of groups, never the number of rows.  ``nunique`` is the
exception: its state is the distinct ``(group, value)`` pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from carray.errors import GroupByError

# Integer keys whose range is at most this (or a few times the rows) are their own
# offsets: a lookup table replaces hashing.
_DIRECT_RANGE = 1 << 20

AGGREGATIONS = ("count", "size", "sum", "mean", "min", "max", "std", "var", "first",
                "last", "nunique")
# Aggregations that need numbers (strings have no sum, mean or spread).
_NUMERIC_ONLY = {"sum", "mean", "std", "var"}


def missing_of(values: np.ndarray, valid: np.ndarray | None) -> np.ndarray | None:
    """Booleans, True where a value is missing: not valid by the column's own record,
    or a float NaN / datetime NaT, which pandas counts as missing too."""
    miss = None if valid is None else ~valid
    if isinstance(values, np.ndarray) and values.dtype.kind in "fcmM":
        nan = np.isnan(values)
        miss = nan if miss is None else miss | nan
    return miss


def key_columns(table: Any, keys: Any, what: str) -> list[str]:
    """The names of the key columns ``keys`` (a name or several) of ``table``, checked:
    at least one, each a column of scalars; ``what`` names the operation in errors."""
    names = [keys] if isinstance(keys, str) else list(keys)
    if not names:
        raise GroupByError(f"{what} needs at least one key column")
    for k in names:
        if k not in table.cols:
            raise GroupByError(f"no key column {k!r}: there is no column {k!r} to {what} "
                               f"by (the table has {list(table.cols)})")
        col = table.cols[k]
        if getattr(col, "ndim", 1) > 1 or getattr(col.dtype, "names", None):
            raise GroupByError(f"key column {k!r} holds arrays or records: {what} keys "
                               "must be scalars")
    return names


def pyarrow_or_none() -> Any:
    """The pyarrow module, or None where it is not installed."""
    try:
        import pyarrow
    except ImportError:  # np.unique does the same by sorting, slower
        return None
    return pyarrow


def factorize(values: Any, missing: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)``: ``uniques`` the distinct present values in ascending order,
    ``codes`` (int64) the index of each row's value in it; a missing row's code is
    ``len(uniques)``, after every value.

    ``values`` is a numpy array or an Arrow array (a string column's rows, decoded
    without a Python object per row).
    """
    if isinstance(values, np.ndarray) and values.dtype.kind in "mM":
        codes, uniq = factorize(values.view(np.int64), missing)
        return codes, uniq.view(values.dtype)
    if isinstance(values, np.ndarray) and values.dtype.kind in "biu":
        direct = _direct(values, missing)
        if direct is not None:
            return direct
    pa = pyarrow_or_none()
    if pa is None or (isinstance(values, np.ndarray) and values.dtype.kind not in "biufO"):
        return _by_sorting(np.asarray(values), missing)
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        values = values + 0.0  # -0.0 and 0.0 are one key, as in pandas
    encoded = pa.array(values).dictionary_encode()
    dictionary = encoded.dictionary.to_numpy(zero_copy_only=False)
    order = np.argsort(dictionary, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    codes = rank[encoded.indices.to_numpy(zero_copy_only=False)]
    uniq = dictionary[order]
    if isinstance(values, np.ndarray) and values.dtype != uniq.dtype:
        uniq = uniq.astype(values.dtype)
    return _drop_missing(codes, uniq, missing)


def _drop_missing(codes: np.ndarray, uniq: np.ndarray, missing: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Codes and uniques with the values of missing rows (fillers, NaN) taken out."""
    if missing is None or not missing.any():
        return codes, uniq
    present = np.bincount(codes[~missing], minlength=len(uniq)) > 0
    lut = np.cumsum(present) - 1
    kept = int(present.sum())
    codes = np.where(missing, kept, lut[codes])
    return codes, uniq[present]


def _direct(values: np.ndarray, missing: np.ndarray | None
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """Factorization of integers by offsets from the minimum, or None when their range is
    too wide for a lookup table."""
    present_rows = values if missing is None else values[~missing]
    if len(present_rows) == 0:
        return np.zeros(len(values), np.int64), values[:0].copy()
    lo, hi = int(present_rows.min()), int(present_rows.max())
    if hi - lo > max(_DIRECT_RANGE, 4 * len(values)):
        return None
    offsets = values.astype(np.int64)
    if lo:
        offsets -= lo
    if missing is not None:
        offsets[missing] = 0
    seen = np.bincount(offsets if missing is None else offsets[~missing],
                       minlength=hi - lo + 1) > 0
    lut = np.cumsum(seen) - 1
    codes = lut[offsets]
    uniq = (np.flatnonzero(seen) + lo).astype(values.dtype)
    if missing is not None:
        codes[missing] = len(uniq)
    return codes, uniq


def _by_sorting(values: np.ndarray, missing: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray]:
    if missing is not None:
        present = values[~missing]
        uniq, inv = np.unique(present, return_inverse=True)
        codes = np.full(len(values), len(uniq), np.int64)
        codes[~missing] = inv
        return codes, uniq
    uniq, inv = np.unique(values, return_inverse=True)
    return inv.astype(np.int64).reshape(-1), uniq


def combine(codes: Sequence[np.ndarray], sizes: Sequence[int]) -> tuple[np.ndarray, int]:
    """Group ids (dense, in lexicographic order of the key codes) from each key's codes
    (``sizes``: how many codes each key has); ``(ids, number of groups)``."""
    ids, n = codes[0], sizes[0]
    for c, k in zip(codes[1:], sizes[1:], strict=True):
        if n * k >= 1 << 62:  # compact before the product overflows
            ids, n = _compact(ids)
        ids, n = ids * k + c, n * k
    return _compact(ids)


def _compact(ids: np.ndarray) -> tuple[np.ndarray, int]:
    codes, uniq = factorize(ids)
    return codes, len(uniq)


def representatives(ids: np.ndarray, ngroups: int) -> np.ndarray:
    """One row of every group (any: all of a group's rows have its key)."""
    rep = np.zeros(ngroups, np.intp)
    rep[ids] = np.arange(len(ids))
    return rep


# -- aggregation states --------------------------------------------------------------------


def check_aggregation(func: str, column: str, dtype: np.dtype) -> None:
    """Refuse an aggregation the column cannot take (named in the message)."""
    if func not in AGGREGATIONS:
        raise GroupByError(f"unknown aggregation {func!r} (of column {column!r}); use one "
                           f"of {', '.join(AGGREGATIONS)}")
    if func in _NUMERIC_ONLY and dtype.kind not in "biuf":
        raise GroupByError(f"column {column!r} of dtype {dtype} has no {func}")


def block_state(func: str, ids: np.ndarray, ngroups: int, values: np.ndarray | None,
                rows: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """The state of aggregation ``func`` for one block: ``ids`` the group of each present
    value, ``values`` those values, ``rows`` their row numbers in the table."""
    n = np.bincount(ids, minlength=ngroups)
    if func in ("count", "size"):
        return (n,)
    assert values is not None
    if func == "sum":
        return (_sum(ids, ngroups, values),)
    if func == "mean":
        return (np.bincount(ids, values, minlength=ngroups), n)
    if func in ("std", "var"):
        s = np.bincount(ids, values, minlength=ngroups)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = s / n
        dev = values - mean[ids]
        return (n, mean, np.bincount(ids, dev * dev, minlength=ngroups))
    if func in ("min", "max"):
        return (_extreme(ids, ngroups, values, func), n)
    if func in ("first", "last"):
        assert rows is not None
        return _positional(ids, ngroups, values, rows.astype(np.int64), n, func)
    return _distinct_pairs(ids, values)


def masked_state(func: str, ids: np.ndarray, ngroups: int, values: np.ndarray,
                 present: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """``count``, ``sum`` and ``mean`` of float values with some missing, weighted by the
    mask instead of selecting the present rows (one pass fewer); None for the others."""
    if values.dtype.kind != "f" or func not in ("count", "sum", "mean"):
        return None
    n = np.bincount(ids, present, minlength=ngroups).astype(np.int64)
    if func == "count":
        return (n,)
    s = np.bincount(ids, np.where(present, values, 0.0), minlength=ngroups)
    return (s,) if func == "sum" else (s, n)


def merge_states(func: str, ids: np.ndarray, ngroups: int,
                 states: Sequence[tuple[np.ndarray, ...]], offsets: np.ndarray
                 ) -> tuple[np.ndarray, ...]:
    """States of several blocks merged: ``ids`` maps every block group (blocks one after
    the other, block ``b``'s from ``offsets[b]``) to its merged group."""
    if func == "nunique":
        gids = np.concatenate([ids[off + s[0]] for s, off in zip(states, offsets,
                                                                   strict=True)])
        return _distinct_pairs(gids, np.concatenate([s[1] for s in states]))
    parts = [np.concatenate(p) for p in zip(*states, strict=True)]
    if func in ("count", "size"):
        return (_sum(ids, ngroups, parts[0]),)
    if func == "sum":
        return (_sum(ids, ngroups, parts[0]),)
    if func == "mean":
        return (np.bincount(ids, parts[0], minlength=ngroups), _sum(ids, ngroups, parts[1]))
    if func in ("std", "var"):
        n, mean, m2 = parts
        total = _sum(ids, ngroups, n)
        with np.errstate(invalid="ignore", divide="ignore"):
            merged_mean = np.bincount(ids, n * np.where(n > 0, mean, 0.0),
                                      minlength=ngroups) / total
        dev = np.where(n > 0, mean - merged_mean[ids], 0.0)
        # Chan et al.: the spread within blocks plus the spread of the block means.
        return (total, merged_mean, np.bincount(ids, m2 + n * dev * dev, minlength=ngroups))
    has = parts[-1] > 0
    if func in ("min", "max"):
        return (_extreme(ids[has], ngroups, parts[0][has], func), _sum(ids, ngroups, parts[1]))
    rows, values, n = parts
    return _positional(ids[has], ngroups, values[has], rows[has], _sum(ids, ngroups, n), func)


def final_value(func: str, state: tuple[np.ndarray, ...], ngroups: int) -> np.ndarray:
    """The result column of an aggregation from its merged state (pandas' conventions:
    ddof=1 for std and var; masked where a group has no value to give, as pandas'
    nullable dtypes say NA)."""
    if func in ("count", "size", "sum"):
        return state[0]
    if func == "nunique":
        return np.bincount(state[0], minlength=ngroups)
    with np.errstate(invalid="ignore", divide="ignore"):
        if func == "mean":
            return _with_gaps(state[0] / np.where(state[1] > 0, state[1], 1), state[1] > 0)
        if func in ("std", "var"):
            n, _, m2 = state
            var = m2 / np.where(n > 1, n - 1, 1)
            return _with_gaps(np.sqrt(var) if func == "std" else var, n > 1)
    values, n = state[-2] if func in ("first", "last") else state[0], state[-1]
    return _with_gaps(values, n > 0)


def _with_gaps(values: np.ndarray, has: np.ndarray) -> np.ndarray:
    """``values``, masked for the groups that have none (a result column then holds
    missing values, of the values' own type)."""
    if has.all():
        return values
    return np.ma.MaskedArray(values, mask=~has)


def _sum(ids: np.ndarray, ngroups: int, values: np.ndarray) -> np.ndarray:
    """Per-group sums: floats by ``bincount``; integers exactly, in int64 (or uint64)."""
    if values.dtype.kind == "f":
        return np.bincount(ids, values, minlength=ngroups)
    acc = np.zeros(ngroups, np.uint64 if values.dtype.kind == "u" else np.int64)
    np.add.at(acc, ids, values.astype(acc.dtype, copy=False))
    return acc


def _extreme(ids: np.ndarray, ngroups: int, values: np.ndarray, func: str) -> np.ndarray:
    """Per-group minimum or maximum (a group without values holds a filler)."""
    if values.dtype.kind in "biufmM":
        base = values.view(np.int64) if values.dtype.kind in "mM" else values
        if base.dtype.kind == "f":
            start = np.inf if func == "min" else -np.inf
        elif base.dtype.kind == "b":
            start = func == "min"
        else:
            info = np.iinfo(base.dtype)
            start = info.max if func == "min" else info.min
        acc = np.full(ngroups, start, dtype=base.dtype)
        (np.minimum if func == "min" else np.maximum).at(acc, ids, base)
        return acc.view(values.dtype)
    # Other types (strings): sort by value, then the first (or last) of each group.
    out = np.empty(ngroups, dtype=values.dtype)
    if values.dtype == object:
        out[:] = ""
    if len(ids) == 0:
        return out
    by_value = np.argsort(values, kind="stable")
    by_group = by_value[np.argsort(ids[by_value], kind="stable")]
    g = ids[by_group]
    edge = np.flatnonzero(np.diff(g)) + 1
    pick = np.concatenate([[0], edge]) if func == "min" else np.concatenate([edge - 1,
                                                                             [len(g) - 1]])
    out[g[pick]] = values[by_group[pick]]
    return out


def _positional(ids: np.ndarray, ngroups: int, values: np.ndarray, rows: np.ndarray,
                n: np.ndarray, func: str) -> tuple[np.ndarray, ...]:
    """``(row, value, count)`` of every group's first (or last) value in row order."""
    if func == "first":
        pos = np.full(ngroups, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(pos, ids, rows)
    else:
        pos = np.full(ngroups, -1, np.int64)
        np.maximum.at(pos, ids, rows)
    out = np.zeros(ngroups, dtype=values.dtype)
    if values.dtype == object:
        out[:] = ""
    chosen = rows == pos[ids]
    out[ids[chosen]] = values[chosen]
    return pos, out, n


def _distinct_pairs(ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(group, value)`` pairs without repeats (the state of ``nunique``)."""
    if len(ids) == 0:
        return ids.astype(np.int64), values
    vcodes, uniq = factorize(values)
    pair_ids, nkinds = combine([ids.astype(np.int64), vcodes],
                               [int(ids.max()) + 1, len(uniq)])
    first = representatives(pair_ids, nkinds)
    return ids[first].astype(np.int64), values[first]
