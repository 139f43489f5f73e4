"""Building table indexes out of core: a column's values sorted with their row numbers
(sorted runs, then merges), and per-block Bloom filters.

Memory is bounded by a byte budget, not by the column: a sorted index reads the column
in runs that fit the budget, sorts each and keeps it compressed; merges then read every
run through a small buffer.  What is built is only carrays made by ``new_array`` (in
memory, or directories of the index's build), so the caller decides where they live.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.table.columns.kinds import read_valid

#: Entries of a sorted index per entry of its in-memory sample (one decoded block of the
#: index per boundary of a lookup).
SAMPLE_EVERY = 1024
#: Rows of the index arrays per chunk (several samples per chunk: a lookup decodes only
#: the Blosc blocks it needs).
INDEX_CHUNKLEN = 1 << 16
#: Fewest entries a merge reads from one run at a time (below, merges go in passes).
_MIN_BUFFER = 4096
#: Bits of a Bloom filter per row of its block, and hashes per value: about one false
#: positive in a thousand blocks (fewer when values repeat).
BLOOM_BITS, BLOOM_HASHES = 16, 6

NewArray = Callable[[str, np.ndarray], Any]


def run_rows(itemsize: int, memory: int) -> int:
    """Rows of one sorted run within ``memory`` bytes (values, row numbers and the
    sort's permutation, twice over while sorting)."""
    return max(_MIN_BUFFER, memory // (2 * (itemsize + 16)))


def valid_rows(col: Any, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Values and row numbers of rows ``[lo, hi)`` of ``col`` that hold a value."""
    values = np.asarray(col.read_rows(range(lo, hi)))
    rows = np.arange(lo, hi, dtype=np.int64)
    valid = read_valid(col, range(lo, hi))
    if valid is not None:
        values, rows = values[valid], rows[valid]
    return values, rows


def build_sorted(col: Any, length: int, memory: int, new_array: NewArray
                 ) -> tuple[Any, Any, np.ndarray]:
    """The sorted index of rows ``[0, length)`` of ``col``: ``(values, rows, sample)``,
    values ascending (NaN last), ``sample`` every :data:`SAMPLE_EVERY`-th value.

    ``new_array(name, empty)`` makes an empty carray of ``empty``'s dtype; names
    starting with ``run`` are scratch the caller may remove afterwards.
    """
    step = run_rows(col.dtype.itemsize, memory)
    runs = []
    for i, lo in enumerate(range(0, length, step)):
        values, rows = valid_rows(col, lo, min(lo + step, length))
        order = np.argsort(values, kind="stable")
        vals, rws = new_array(f"run{i}v", values[:0]), new_array(f"run{i}r", rows[:0])
        vals.append(values[order])
        rws.append(rows[order])
        runs.append((vals, rws))
    if not runs:
        runs.append((new_array("run0v", np.empty(0, col.dtype)),
                     new_array("run0r", np.empty(0, np.int64))))
    fan_in = max(2, memory // (2 * _MIN_BUFFER * (col.dtype.itemsize + 8)))
    level = 0
    while len(runs) > 1:
        level += 1
        groups = [runs[i:i + fan_in] for i in range(0, len(runs), fan_in)]
        final = len(groups) == 1
        merged = []
        for g, group in enumerate(groups):
            names = ("values", "rows") if final else (f"run{level}.{g}v", f"run{level}.{g}r")
            vals = new_array(names[0], np.empty(0, col.dtype))
            rws = new_array(names[1], np.empty(0, np.int64))
            buffer = max(_MIN_BUFFER, memory // (2 * len(group) * (col.dtype.itemsize + 8)))
            for v, r in merge(group, buffer):
                vals.append(v)
                rws.append(r)
            merged.append((vals, rws))
        runs = merged
    vals, rws = runs[0]
    if level == 0:  # one run: it is the index
        vals, rws = _renamed(vals, "values", new_array), _renamed(rws, "rows", new_array)
    sample = np.concatenate([vals[i:i + 1] for i in range(0, len(vals), SAMPLE_EVERY)]) \
        if len(vals) else np.empty(0, col.dtype)
    return vals, rws, sample


def _renamed(arr: Any, name: str, new_array: NewArray) -> Any:
    out = new_array(name, np.empty(0, arr.dtype))
    for block in arr.iterblocks(INDEX_CHUNKLEN):
        out.append(block)
    return out


def merge(runs: list[tuple[Any, Any]], buffer: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Sorted runs ``(values, rows)`` merged, in pieces: each piece is every buffered
    entry up to the smallest of the runs' last buffered values (nothing after it can be
    smaller), sorted."""
    pos = [0] * len(runs)
    bufs: list[tuple[np.ndarray, np.ndarray]] = [(v[:0], r[:0]) for v, r in runs]

    def refill(i: int) -> None:
        v, r = runs[i]
        if len(bufs[i][0]) == 0 and pos[i] < len(v):
            hi = min(pos[i] + buffer, len(v))
            bufs[i] = (v[pos[i]:hi], r[pos[i]:hi])
            pos[i] = hi

    while True:
        for i in range(len(runs)):
            refill(i)
        live = [i for i in range(len(runs)) if len(bufs[i][0])]
        if not live:
            return
        # The smallest last value, NaN ordered last as np.sort does.
        bound = np.sort(np.array([bufs[i][0][-1] for i in live]))[:1]
        vparts, rparts = [], []
        for i in live:
            v, r = bufs[i]
            # Entries equal to the bound may follow in a later piece: fine, as lookups
            # sort the rows they find, and values only need to be in order.
            cut = int(np.searchsorted(v, bound, side="right")[0])
            vparts.append(v[:cut])
            rparts.append(r[:cut])
            bufs[i] = (v[cut:], r[cut:])
        values, rows = np.concatenate(vparts), np.concatenate(rparts)
        order = np.argsort(values, kind="stable")
        yield values[order], rows[order]


# -- Bloom filters: one per block of rows, over the values' 64-bit keys ---------------------


def bloomable(dtype: np.dtype) -> bool:
    """Whether a column of ``dtype`` can have Bloom filters (fixed-width numbers, dates,
    booleans)."""
    return dtype.kind in "biufmM" and dtype.itemsize <= 8 and dtype.shape == ()


def keys_of(values: np.ndarray) -> np.ndarray:
    """Each value as a 64-bit key; equal values (0.0 and -0.0 too) have equal keys."""
    kind = values.dtype.kind
    if kind == "f":
        return (values.astype(np.float64) + 0.0).view(np.uint64)
    if kind == "u":
        return values.astype(np.uint64)
    if kind in "mM":
        return values.view(np.int64).astype(np.int64).view(np.uint64)
    return values.astype(np.int64).view(np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every bit of the key reaches every bit of the hash."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def bloom_positions(keys: np.ndarray, nbits: int) -> np.ndarray:
    """Bit positions (``(len(keys), BLOOM_HASHES)``) of ``keys`` in a filter of ``nbits``
    bits (a power of two), by double hashing."""
    h1 = _mix(keys)
    h2 = _mix(keys ^ np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
    steps = np.arange(BLOOM_HASHES, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return ((h1[:, None] + steps * h2[:, None]) & np.uint64(nbits - 1)).astype(np.int64)


def build_bloom(col: Any, length: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Bloom filters of rows ``[0, length)`` of ``col``, one per ``block`` rows:
    ``(bits, offsets)``, filter ``b`` being ``bits[offsets[b]:offsets[b + 1]]`` (bytes).
    Rows without a value are left out."""
    filters = []
    for lo in range(0, length, block):
        values, _ = valid_rows(col, lo, min(lo + block, length))
        keys = keys_of(values)  # repeats set the same bits: no need to sort them out
        nbits = max(64, 1 << math.ceil(math.log2(max(1, BLOOM_BITS * len(keys)))))
        bits = np.zeros(nbits, bool)
        bits[bloom_positions(keys, nbits).ravel()] = True
        filters.append(np.packbits(bits, bitorder="little"))
    offsets = np.zeros(len(filters) + 1, np.int64)
    offsets[1:] = np.cumsum([len(f) for f in filters])
    bits_all = np.concatenate(filters) if filters else np.empty(0, np.uint8)
    return bits_all, offsets


def bloom_blocks(bits: np.ndarray, offsets: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per block, whether its filter may hold any of ``keys``."""
    nblocks = len(offsets) - 1
    out = np.zeros(nblocks, bool)
    sizes = np.diff(offsets) * 8
    for nbits in np.unique(sizes):
        which = np.flatnonzero(sizes == nbits)
        pos = bloom_positions(keys, int(nbits))  # (keys, hashes)
        byte = offsets[which][:, None, None] + (pos >> 3)[None]
        hit = (bits[byte] >> (pos & 7)[None].astype(np.uint8)) & 1
        out[which] = hit.all(axis=2).any(axis=1)
    return out
