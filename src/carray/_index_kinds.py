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

from carray._index_build import (
    SAMPLE_EVERY,
    bloom_blocks,
    bloomable,
    build_bloom,
    build_sorted,
    keys_of,
)
from carray.errors import IndexUnsupportedError

#: Rows per Bloom filter (the block a lookup decodes when its filter says "maybe").
BLOOM_BLOCK = 1 << 16


@dataclass
class Condition:
    """What a query asks of one column: values in ``[lo, hi]`` (None: unbounded; bounds
    are inclusive, a superset of strict ones) and, when ``members`` is not None, equal to
    one of them."""

    lo: Any = None
    hi: Any = None
    members: list[Any] | None = None

    def describe(self, name: str) -> str:
        if self.members is not None:
            shown = ", ".join(repr(m) for m in self.members[:5])
            more = ", ..." if len(self.members) > 5 else ""
            return f"{name} in [{shown}{more}]" if len(self.members) != 1 else \
                f"{name} == {self.members[0]!r}"
        parts = [f"{self.lo!r} <= " if self.lo is not None else "", name,
                 f" <= {self.hi!r}" if self.hi is not None else ""]
        return "".join(parts)


@dataclass
class Found:
    """Candidate rows: explicit ``rows`` (ascending) and ``ranges`` ``[lo, hi)`` to check."""

    rows: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ranges: list[tuple[int, int]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.rows) + sum(hi - lo for lo, hi in self.ranges)


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
            block = self._blocks[b] = self.values[b * SAMPLE_EVERY:(b + 1) * SAMPLE_EVERY]
        return block

    def position(self, value: Any, side: str) -> int:
        """Where ``value`` goes in the sorted values (``side`` as ``np.searchsorted``)."""
        i = int(np.searchsorted(self.sample, value, side=side))  # type: ignore[call-overload]
        b = max(i - 1, 0)
        block = self._block(b)
        return b * SAMPLE_EVERY + int(np.searchsorted(block, value, side=side))  # type: ignore[call-overload]

    def spans(self, cond: Condition) -> list[tuple[int, int]]:
        """Positions ``[start, stop)`` of the sorted values the condition may select."""
        if cond.members is not None:
            members = np.unique(np.asarray(cond.members, dtype=self.values.dtype)) \
                if self.values.dtype.kind in "mMSU" else np.unique(np.asarray(cond.members))
            out = [(self.position(m, "left"), self.position(m, "right")) for m in members
                   if (cond.lo is None or not m < cond.lo) and
                   (cond.hi is None or not m > cond.hi)]
            return [(a, b) for a, b in out if b > a]
        start = 0 if cond.lo is None else self.position(cond.lo, "left")
        stop = len(self.values) if cond.hi is None else self.position(cond.hi, "right")
        return [(start, stop)] if stop > start else []

    def count(self, cond: Condition) -> int:
        return sum(b - a for a, b in self.spans(cond))

    def find(self, cond: Condition) -> Found:
        parts = [self.rows[a:b] for a, b in self.spans(cond)]
        rows = np.concatenate(parts) if parts else np.empty(0, np.int64)
        return Found(np.unique(rows) if len(parts) > 1 else np.sort(rows))


class BloomIndex:
    """Per-block Bloom filters over arrays ``bits`` and ``offsets`` (module doc)."""

    kind = "bloom"
    names = ("bits", "offsets")

    def __init__(self, arrays: dict[str, Any]) -> None:
        self.bits = np.asarray(arrays["bits"][:])
        self.offsets = np.asarray(arrays["offsets"][:])
        self.arrays = arrays
        self.dtype: np.dtype | None = None

    @classmethod
    def build(cls, col: Any, length: int, memory: int,
              new_array: Callable[[str, np.ndarray], Any]) -> dict[str, Any]:
        if not bloomable(col.dtype) or col.ndim != 1:
            raise IndexUnsupportedError(f"a bloom index needs a column of numbers, dates or "
                                        f"booleans, not {col.dtype} of shape {col.shape}")
        bits, offsets = build_bloom(col, length, BLOOM_BLOCK)
        out = {"bits": new_array("bits", bits[:0]), "offsets": new_array("offsets", offsets[:0])}
        out["bits"].append(bits)
        out["offsets"].append(offsets)
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
            lo, hi = int(b) * BLOOM_BLOCK, (int(b) + 1) * BLOOM_BLOCK
            if ranges and ranges[-1][1] == lo:
                ranges[-1] = (ranges[-1][0], hi)
            else:
                ranges.append((lo, hi))
        return Found(ranges=ranges)


KINDS: dict[str, Any] = {"sorted": SortedIndex, "bloom": BloomIndex}
