"""The kinds of table index, as a query reads them: which rows (or blocks of rows) may
hold the values a condition asks for.

* ``sorted``: the column's values sorted, with their row numbers (:func:`build_sorted`);
  a small sample of the values (one per :data:`SAMPLE_EVERY`) stays in memory, so a
  lookup is a binary search in it and the decoding of one block of the index per
  bound.  Equality, ``in`` and ranges; exact counts for the planner.
* ``bloom``: one Bloom filter per block of rows (:func:`build_bloom`): the blocks that
  may hold a value.  Equality and ``in`` only; cheap to build (no sort) and small.
  For unsorted high-cardinality columns, where zone maps rule no block out.

An index answers with a superset of the matching rows: the query checks the whole
expression on them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from carray.errors import IndexUnsupportedError
from carray.table.index.build import (
    SAMPLE_EVERY,
    bloom_blocks,
    bloomable,
    build_bloom,
    build_sorted,
    keys_of,
)

#: Most rows per Bloom filter (a column's chunk, when shorter: the rows a lookup decodes
#: when its filter says "maybe").
BLOOM_BLOCK = 1 << 16


@dataclass
class Condition:
    """What a query asks of one column: values between ``lo`` and ``hi`` (None:
    unbounded; ``*_strict``: the bound itself excluded) and, when ``members`` is not
    None, equal to one of them; ``empty``: nothing can match (a NaN bound).  ``parts``
    counts the expression's conjuncts it stands for."""

    lo: Any = None
    hi: Any = None
    lo_strict: bool = False
    hi_strict: bool = False
    members: list[Any] | None = None
    empty: bool = False
    parts: int = 0

    def admits(self, value: Any) -> bool:
        """Whether ``value`` is within the bounds."""
        if self.lo is not None and not (value > self.lo if self.lo_strict else value >= self.lo):
            return False
        return self.hi is None or bool(value < self.hi if self.hi_strict else value <= self.hi)

    def describe(self, name: str) -> str:
        if self.empty:
            return f"{name}: nothing (a NaN bound)"
        if self.members is not None:
            shown = ", ".join(repr(m) for m in self.members[:5])
            more = ", ..." if len(self.members) > 5 else ""
            return f"{name} in [{shown}{more}]" if len(self.members) != 1 else \
                f"{name} == {self.members[0]!r}"
        parts = [f"{self.lo!r} {'<' if self.lo_strict else '<='} " if self.lo is not None
                 else "", name,
                 f" {'<' if self.hi_strict else '<='} {self.hi!r}" if self.hi is not None
                 else ""]
        return "".join(parts)


def is_missing(value: Any) -> bool:
    """NaN or NaT: equal to nothing, and no bound."""
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return False


@dataclass
class Found:
    """Candidate rows: explicit ``rows`` (ascending), with the column's ``values`` at them
    when the index knows them, and ``ranges`` ``[lo, hi)`` to check."""

    rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ranges: list[tuple[int, int]] = field(default_factory=list)
    values: np.ndarray | None = None

    @property
    def size(self) -> int:
        return len(self.rows) + sum(hi - lo for lo, hi in self.ranges)


def union(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Row ranges ``[lo, hi)`` merged into disjoint ones, ascending."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(r for r in ranges if r[1] > r[0]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def exact_members(members: Sequence[Any], dtype: np.dtype) -> np.ndarray:
    """The ``members`` a column of ``dtype`` can hold exactly, converted (the others
    equal none of its values)."""
    out = []
    for m in members:
        try:
            with np.errstate(all="ignore"):
                v = np.asarray(m).astype(dtype)
                if bool(v == m):
                    out.append(v)
        except (TypeError, ValueError, OverflowError):
            continue
    return np.array(out, dtype=dtype)


class SortedIndex:
    """A sorted index over arrays ``values``, ``rows`` and ``sample`` (module doc)."""

    kind = "sorted"
    names = ("values", "rows", "sample")

    def __init__(self, arrays: dict[str, Any]) -> None:
        self.values, self.rows = arrays["values"], arrays["rows"]
        self.sample = np.asarray(arrays["sample"][:])  # small: held in memory
        self.arrays = arrays
        self._blocks: dict[int, np.ndarray] = {}

    @classmethod
    def build(cls, col: Any, length: int, memory: int,
              new_array: Callable[[str, np.ndarray], Any]) -> dict[str, Any]:
        if col.dtype.kind not in "biufmMSU" or col.ndim != 1:
            raise IndexUnsupportedError(f"a sorted index needs a column of fixed-width "
                                        f"scalars, not {col.dtype} of shape {col.shape}")
        values, rows, sample = build_sorted(col, length, memory, new_array)
        sampled = new_array("sample", sample[:0])
        sampled.append(sample)
        return {"values": values, "rows": rows, "sample": sampled}

    def _block(self, b: int) -> np.ndarray:
        """Block ``b`` of the sorted values (a few recent ones cached: hot keys repeat)."""
        block = self._blocks.get(b)
        if block is None:
            if len(self._blocks) > 64:
                self._blocks.clear()
            stop = min((b + 1) * SAMPLE_EVERY, len(self.values))
            block = self._blocks[b] = self.values.read_rows(range(b * SAMPLE_EVERY, stop))
        return block

    def _values(self, start: int, stop: int) -> np.ndarray:
        """Sorted values ``[start, stop)``: from the block a lookup just decoded when they
        lie in one."""
        b = start // SAMPLE_EVERY
        if (stop - 1) // SAMPLE_EVERY == b and b in self._blocks:
            return self._blocks[b][start - b * SAMPLE_EVERY:stop - b * SAMPLE_EVERY]
        return self.values.read_rows(range(start, stop))

    def position(self, value: Any, side: str) -> int:
        """Where ``value`` goes in the sorted values (``side`` as ``np.searchsorted``)."""
        i = int(np.searchsorted(self.sample, value, side=side))  # type: ignore[call-overload]
        b = max(i - 1, 0)
        block = self._block(b)
        return b * SAMPLE_EVERY + int(np.searchsorted(block, value, side=side))  # type: ignore[call-overload]

    def _last(self) -> int:
        """Where NaN (NaT) values start: they sort last and match no comparison."""
        kind = self.values.dtype.kind
        if kind not in "fcmM" or not len(self.values):
            return len(self.values)
        missing = np.array([np.nan if kind in "fc" else "NaT"], dtype=self.values.dtype)[0]
        return self.position(missing, "left")

    def spans(self, cond: Condition) -> list[tuple[int, int]]:
        """Positions ``[start, stop)`` of the sorted values the condition selects (exactly:
        as numpy compares them)."""
        if cond.empty:
            return []
        if cond.members is not None:
            members = [m for m in cond.members if not is_missing(m) and cond.admits(m)]
            if self.values.dtype.kind in "mMSU":
                members = list(np.asarray(members, dtype=self.values.dtype))
            out = sorted({(self.position(m, "left"), self.position(m, "right"))
                          for m in members})
            return [(a, b) for a, b in out if b > a]
        start = 0 if cond.lo is None else \
            self.position(cond.lo, "right" if cond.lo_strict else "left")
        stop = self._last() if cond.hi is None else \
            self.position(cond.hi, "left" if cond.hi_strict else "right")
        return [(start, stop)] if stop > start else []

    def count(self, cond: Condition) -> int:
        return sum(b - a for a, b in self.spans(cond))

    def find(self, cond: Condition) -> Found:
        """The rows the condition selects, ascending, with their values."""
        spans = self.spans(cond)
        if not spans:
            return Found(values=self.values[:0])
        rows = np.concatenate([self.rows.read_rows(range(a, b)) for a, b in spans])
        values = np.concatenate([self._values(a, b) for a, b in spans])
        order = np.argsort(rows, kind="stable")
        return Found(rows[order], values=values[order])


class BloomIndex:
    """Per-block Bloom filters over arrays ``bits`` and ``offsets`` (module doc)."""

    kind = "bloom"
    names = ("bits", "offsets", "block")

    def __init__(self, arrays: dict[str, Any]) -> None:
        self.bits = np.asarray(arrays["bits"][:])
        self.offsets = np.asarray(arrays["offsets"][:])
        self.block = int(arrays["block"][0])
        self.arrays = arrays
        self.dtype: np.dtype | None = None

    @classmethod
    def build(cls, col: Any, length: int, memory: int,
              new_array: Callable[[str, np.ndarray], Any]) -> dict[str, Any]:
        if not bloomable(col.dtype) or col.ndim != 1:
            raise IndexUnsupportedError(f"a bloom index needs a column of numbers, dates or "
                                        f"booleans, not {col.dtype} of shape {col.shape}")
        block = min(BLOOM_BLOCK, col.chunklen)  # a chunk: what a check decodes anyway
        bits, offsets = build_bloom(col, length, block)
        out = {"bits": new_array("bits", bits[:0]), "offsets": new_array("offsets", offsets[:0]),
               "block": new_array("block", offsets[:0])}
        out["bits"].append(bits)
        out["offsets"].append(offsets)
        out["block"].append(np.array([block], np.int64))
        return out

    def blocks(self, members: np.ndarray) -> np.ndarray:
        """Per block, whether it may hold one of ``members`` (of the column's dtype)."""
        if not len(members):
            return np.zeros(len(self.offsets) - 1, bool)
        return bloom_blocks(self.bits, self.offsets, np.unique(keys_of(members)))

    def count(self, cond: Condition) -> int | None:
        """Rows of the blocks to check; None when the condition is not equality."""
        found = self.find(cond)
        return None if found is None else found.size

    def find(self, cond: Condition) -> Found | None:
        if cond.members is None or self.dtype is None:
            return None
        may = self.blocks(exact_members(cond.members, self.dtype))
        ranges: list[tuple[int, int]] = []
        for b in np.flatnonzero(may):
            lo, hi = int(b) * self.block, (int(b) + 1) * self.block
            if ranges and ranges[-1][1] == lo:
                ranges[-1] = (ranges[-1][0], hi)
            else:
                ranges.append((lo, hi))
        return Found(ranges=ranges)


KINDS: dict[str, Any] = {"sorted": SortedIndex, "bloom": BloomIndex}
