"""Expressions over operands with missing values: three-valued (Kleene) logic.

An operand with missing values is a :class:`Maybe`: its values and where they are
known.  An operation with a missing operand is unknown (a comparison too), except
that ``&`` and ``|`` on booleans follow Kleene's logic (``False & unknown`` is
False, ``True | unknown`` is True) and ``isnull(x)`` / ``notnull(x)`` (also
``isna`` / ``notna``) are always known.  A query selects the rows where the result
is known and True, as SQL, pandas and polars do.

Operands with missing values are columns that answer ``valid(rows)`` (a table's
nullable and categorical columns) and ``numpy.ma.MaskedArray`` variables.
Expressions whose operands hold no missing values never come here: they cost
nothing more.  ``eval`` gives a masked array (``out_flavor='numpy'``) masked where
the result is unknown; a boolean result is False there (it selects no row), and a
result stored as a carray holds fillers there.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Maybe:
    """Values and where they are known (a missing operand's block, or a result)."""

    __slots__ = ("known", "values")

    def __init__(self, values: Any, known: Any) -> None:
        self.values = values
        self.known = known

    def __getitem__(self, key: Any) -> Maybe:
        return Maybe(self.values[key], self.known[key])

    def __len__(self) -> int:
        return len(self.values)

    @property
    def dtype(self) -> np.dtype:
        return np.asarray(self.values).dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.values)


class MaskedOperand:
    """A ``numpy.ma.MaskedArray`` operand, read as a column with missing values is."""

    parallel_reads = True  # slices of an array in memory

    def __init__(self, values: np.ma.MaskedArray) -> None:
        self._data = np.ma.getdata(values)
        self._valid = ~np.ma.getmaskarray(values)
        self.dtype, self.shape, self.ndim = self._data.dtype, self._data.shape, self._data.ndim

    def __len__(self) -> int:
        return len(self._data)

    def read_rows(self, rows: range) -> np.ndarray:
        return self._data[rows.start:rows.stop]

    def valid(self, rows: range) -> np.ndarray:
        return self._valid[rows.start:rows.stop]


def operand(value: Any) -> Any:
    """An array operand of an expression: masked arrays keep what they mask."""
    if isinstance(value, np.ma.MaskedArray):
        return MaskedOperand(value)
    return np.asarray(value)


def isnull(x: Any) -> Any:
    """True where ``x`` is missing (an operand without missing values: nowhere)."""
    if isinstance(x, Maybe):
        return ~np.asarray(x.known, dtype=bool)
    return np.zeros(np.shape(x), dtype=bool)


def notnull(x: Any) -> Any:
    """True where ``x`` holds a value."""
    return ~isnull(x)


def _parts(a: Any) -> tuple[Any, Any]:
    """``(values, known)``; a plain operand is known everywhere."""
    if isinstance(a, Maybe):
        return a.values, a.known
    return a, True


def _is_bool(values: Any) -> bool:
    return np.asarray(values).dtype == np.bool_


def _kleene(func: Any, left: Any, right: Any) -> Maybe:
    (lv, lk), (rv, rk) = _parts(left), _parts(right)
    lv, rv = np.asarray(lv, dtype=bool), np.asarray(rv, dtype=bool)
    if func is np.bitwise_and:
        # Known where both are, or where either is a known False.
        known = (lk & rk) | (lk & ~lv) | (rk & ~rv)
        return Maybe(lv & rv, known)
    known = (lk & rk) | (lk & lv) | (rk & rv)
    return Maybe(lv | rv, known)


def apply(func: Any, *args: Any) -> Any:
    """``func(*args)`` where some operands may be :class:`Maybe` (see the module doc)."""
    if func is isnull or func is notnull:
        return func(*args)
    if not any(isinstance(a, Maybe) for a in args):
        return func(*args)
    if func in (np.bitwise_and, np.bitwise_or) and all(_is_bool(_parts(a)[0]) for a in args):
        return _kleene(func, *args)
    values = [_parts(a)[0] for a in args]
    known: Any = True
    for a in args:
        if isinstance(a, Maybe):
            known = known & np.asarray(a.known, dtype=bool)
    with np.errstate(all="ignore"):  # fillers (0 where missing) may divide by zero
        out = func(*values)
    return Maybe(out, known)


def settle(result: Any) -> Any:
    """What an expression evaluated with :func:`apply` gives: a boolean result True only
    where known and True; another result a masked array (masked where unknown)."""
    if not isinstance(result, Maybe):
        return result
    values = np.asarray(result.values)
    known = np.broadcast_to(np.asarray(result.known, dtype=bool), values.shape)
    if values.dtype == np.bool_:
        return values & known
    return np.ma.MaskedArray(values, mask=~known)


__all__ = ["MaskedOperand", "Maybe", "operand", "apply", "settle", "isnull", "notnull"]
