"""Statistics of one chunk's values, worked out where a writer has them in hand.

For every chunk of a numeric array (kinds b, i, u, f) the writer works out, on
the thread that compresses the chunk, what whole-array reductions need
(:mod:`carray.compute.stats`) and what query pruning needs (:mod:`carray.compute.zonemap`):

* ``count``: the chunk's items inside the array (never the padding of an edge chunk);
* ``lo``/``hi``: minimum and maximum, NaN ignored (NaN only when every item is NaN);
* ``nnan``: how many items are NaN (floats);
* ``nonzero``: how many items are not zero (NaN counts as not zero, as in numpy);
* ``total``: the sum, as numpy's ``sum`` would give it for the chunk: int64 for
  signed ints and bools, uint64 for unsigned ints (both wrapping as numpy's do),
  float64 for floats (numpy's pairwise sum, over the values that are not NaN);
* ``fsum``: the sum in float64 of the values that are not NaN (what a mean takes;
  for ints it differs from ``total`` when ``total`` wrapped);
* ``m2``: the sum of squared deviations from the chunk's mean (over the values
  that are not NaN), so chunks merge with Chan's parallel formula.

The plain sum of a float chunk is NaN when ``nnan`` is not zero, else ``total``;
infinities give what numpy gives (inf, or NaN when both signs meet).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Item kinds that get statistics.
KINDS = "biuf"

_LOCAL = threading.local()


def total_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of a chunk's ``total`` for items of ``dtype``."""
    kind = np.dtype(dtype).kind
    return np.dtype({"f": "<f8", "u": "<u8"}.get(kind, "<i8"))


@dataclass(frozen=True)
class ChunkStats:
    """The statistics of one chunk (or of several merged), see the module doc."""

    count: int
    nnan: int
    nonzero: int
    lo: Any
    hi: Any
    total: Any
    fsum: float
    m2: float

    @property
    def numbers(self) -> int:
        """Items that are not NaN."""
        return self.count - self.nnan


#: Items of the float64 buffer each thread keeps (8 MiB); bigger chunks get a new one.
_KEPT = 2**20


def _scratch(n: int) -> np.ndarray:
    """This thread's float64 buffer of at least ``n`` items (no page faults per chunk)."""
    if n > _KEPT:
        return np.empty(n, dtype=np.float64)
    buf = getattr(_LOCAL, "buf", None)
    if buf is None or len(buf) < n:
        buf = _LOCAL.buf = np.empty(max(n, 1024), dtype=np.float64)
    return buf[:n]


def _flat(values: np.ndarray) -> np.ndarray:
    if values.ndim == 1:
        return values
    return values.reshape(-1) if values.flags.c_contiguous else np.ascontiguousarray(values).ravel()


def _repeats(values: np.ndarray) -> bool:
    """Whether ``values`` is one item broadcast (np.broadcast_to of a scalar)."""
    return values.size > 1 and not any(values.strides)


def of_values(values: np.ndarray) -> ChunkStats:
    """The statistics of ``values`` (a chunk's valid items, any shape, not empty)."""
    if _repeats(values):
        return constant(values.reshape(-1)[0], values.size)
    flat = _flat(values)
    kind = flat.dtype.kind
    if kind == "f":
        return _of_floats(flat)
    if kind == "b":
        nonzero = int(np.count_nonzero(flat))
        n = flat.size
        lo, hi = np.bool_(nonzero == n), np.bool_(nonzero > 0)
        mean = nonzero / n
        # Squared deviations of zeros and ones from their mean, in closed form.
        m2 = nonzero * (1 - mean) ** 2 + (n - nonzero) * mean ** 2
        return ChunkStats(n, 0, nonzero, lo, hi, np.int64(nonzero), float(nonzero), float(m2))
    total = np.add.reduce(flat, dtype=total_dtype(flat.dtype))
    if flat.dtype.itemsize < 8:
        fsum = float(total)  # exact in int64: the float is the sum rounded once
    else:
        fsum = float(np.add.reduce(flat, dtype=np.float64))
    return ChunkStats(flat.size, 0, int(np.count_nonzero(flat)), flat.min(), flat.max(),
                      total, fsum, _m2(flat, fsum / flat.size))


def _m2(flat: np.ndarray, mean: float) -> float:
    """Sum of squared deviations of ``flat`` from ``mean`` (pairwise, in float64)."""
    if not np.isfinite(mean):
        return float("nan")
    dev = np.subtract(flat, mean, out=_scratch(flat.size), dtype=np.float64,
                      casting="unsafe")
    np.multiply(dev, dev, out=dev)
    return float(np.add.reduce(dev))


def _of_floats(flat: np.ndarray) -> ChunkStats:
    n = flat.size
    with np.errstate(invalid="ignore", over="ignore"):
        total = np.add.reduce(flat, dtype=np.float64)
        lo, hi = np.minimum.reduce(flat), np.maximum.reduce(flat)
        nnan = 0
        numbers = flat
        if np.isnan(total) or np.isnan(lo):  # a NaN somewhere (or inf meeting -inf)
            nan = np.isnan(flat)
            nnan = int(np.count_nonzero(nan))
            if nnan:
                numbers = flat[~nan]
                total = np.add.reduce(numbers, dtype=np.float64)
                lo = np.fmin.reduce(flat)
                hi = np.fmax.reduce(flat)
        # Comparing with zero and counting the booleans is 3x quicker than numpy's
        # count_nonzero of floats (NaN is not zero either way; -0.0 is).
        nonzero = n - int(np.count_nonzero(np.equal(flat, 0)))
        mean = float(total) / len(numbers) if len(numbers) else float("nan")
        m2 = _m2(numbers, mean) if len(numbers) else 0.0
    return ChunkStats(n, nnan, nonzero, lo, hi, np.float64(total), float(total), m2)


def constant(value: Any, count: int) -> ChunkStats:
    """The statistics of ``count`` items all equal to ``value`` (a numpy scalar): a chunk
    of the fill value, stored without its items."""
    value = np.asarray(value).reshape(())[()]
    dtype = np.asarray(value).dtype
    nan = dtype.kind == "f" and bool(np.isnan(value))
    nonzero = count if value != 0 or nan else 0
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype.kind == "f":
            total = np.float64(0.0) if nan else np.float64(value) * count
            fsum = float(total)
            m2 = 0.0 if nan or np.isfinite(value) else float("nan")
        else:
            tdt = total_dtype(dtype)
            total = tdt.type(value.astype(tdt)) * tdt.type(count)  # wraps as a sum would
            fsum = float(value) * count
            m2 = 0.0
    return ChunkStats(count, count if nan else 0, nonzero, value, value, total, fsum, m2)
