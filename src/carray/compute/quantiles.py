"""Exact quantiles, percentiles and medians of carrays and expressions, streamed.

Over the whole array (``axis=None``) nothing is sorted: the few order
statistics numpy's method needs are found by selection, a pass at a time.

1. One pass counts the NaN and finds the smallest and largest value.
2. Values are mapped to unsigned integer keys with the same order (floats: the
   sign bit flipped, or every bit of the negatives), so a range of keys splits
   into equal bins with shifts, infinities included, with no rounding.  A pass
   counts the keys per bin in each range still holding a wanted rank; the bin
   holding the rank becomes the next range (a factor of 1024 narrower per pass,
   so at most 7 passes for 64-bit values).
3. Once a range holds few enough items (:data:`COLLECT_ITEMS`), a pass collects
   them and sorts them; a range of a single key needs no collecting.

numpy's result is then computed from the two order statistics around each
quantile's virtual index (``numpy.quantile`` on those two values with the
fractional part as ``q``, which is numpy's own interpolation), so every method
numpy has gives numpy's values and dtype.  Along an axis, slabs holding whole
lines along the reduced axes (:func:`carray.compute.slabs.line_slabs`) go to
numpy's own function, one at a time.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from carray.compute.evaluate import plan_chunks
from carray.compute.slabs import line_slabs, scan
from carray.errors import UnsupportedDTypeError, UnsupportedOptionError

#: A range of keys holding at most this many items is collected and sorted.
COLLECT_ITEMS = 1 << 20
_BIN_BITS = 10  # bins per narrowing pass: 2**_BIN_BITS

_ALPHA_BETA = {"interpolated_inverted_cdf": (0.0, 1.0), "hazen": (0.5, 0.5),
               "weibull": (0.0, 0.0), "median_unbiased": (1 / 3.0, 1 / 3.0),
               "normal_unbiased": (3 / 8.0, 3 / 8.0)}
_METHODS = {"linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf",
            "averaged_inverted_cdf", "closest_observation", *_ALPHA_BETA}


# -- order-preserving keys ---------------------------------------------------------------------


def _keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys ordered as the (non-NaN) values are."""
    kind, size = values.dtype.kind, values.dtype.itemsize
    if kind == "b":
        return values.astype(np.uint64)
    if kind == "u":
        return values.astype(np.uint64)
    bits = np.ascontiguousarray(values).view(f"u{size}")
    sign = np.array(1 << (8 * size - 1), dtype=bits.dtype)
    if kind == "i":
        return (bits ^ sign).astype(np.uint64)
    return np.where(bits & sign, ~bits, bits | sign).astype(np.uint64)


def _values(keys: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The values of ``keys`` (the inverse of :func:`_keys`)."""
    kind, size = dtype.kind, dtype.itemsize
    if kind in "bu":
        return keys.astype(dtype)
    bits = keys.astype(f"u{size}")
    sign = np.array(1 << (8 * size - 1), dtype=bits.dtype)
    if kind == "i":
        return (bits ^ sign).view(dtype)
    return np.where(bits & sign, bits ^ sign, ~bits).view(dtype)


# -- which order statistics numpy's method reads -------------------------------------------------


def _virtual(n: int, q: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower rank, upper rank, weight of the upper) of each quantile, numpy's way (the
    Hyndman & Fan definitions named in ``numpy.quantile``'s documentation)."""
    t = (n - 1) * q
    if method in ("lower", "higher", "nearest"):
        rounding: Any = {"lower": np.floor, "higher": np.ceil, "nearest": np.around}[method]
        return _exact(np.asarray(rounding(t)), n)
    if method in ("inverted_cdf", "closest_observation"):
        shifted = n * q - 1 - (0.5 if method == "closest_observation" else 0.0)
        low = np.floor(shifted)
        stay = (shifted - low) == 0
        if method == "closest_observation":
            stay &= low % 2 == 1
        return _exact(np.where(stay, low, low + 1), n)
    if method == "linear":
        v = t
    elif method == "midpoint":
        v = 0.5 * (np.floor(t) + np.ceil(t))
    elif method == "averaged_inverted_cdf":
        v = n * q - 1
    else:
        alpha, beta = _ALPHA_BETA[method]
        v = n * q + (alpha + q * (1 - alpha - beta)) - 1
    v = np.asarray(v, dtype=np.float64)
    low = np.floor(v)
    gamma = v - low
    if method == "midpoint":
        gamma = np.where(v % 1 == 0, 0.0, 0.5)
    elif method == "averaged_inverted_cdf":
        gamma = np.where(gamma == 0, 0.5, 1.0)
    lo = np.clip(low, 0, n - 1).astype(np.int64)
    hi = np.clip(low + 1, 0, n - 1).astype(np.int64)
    top, bottom = v >= n - 1, v < 0
    lo[top], hi[top] = n - 1, n - 1
    lo[bottom], hi[bottom] = 0, 0
    return lo, hi, np.where(top | bottom, 0.0, gamma)


def _exact(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos = np.clip(idx, 0, n - 1).astype(np.int64)
    return pos, pos, np.full(pos.shape, -1.0)  # weight -1: take the lower value as it is


# -- the passes ---------------------------------------------------------------------------------


def _first_pass(src: Any) -> tuple[int, int, int, int]:
    """(NaN count, other count, smallest key, largest key)."""
    floats = src.dtype.kind in "fc"

    def summary(block: np.ndarray, region: Any) -> tuple[int, int, int, int] | None:
        flat = block.reshape(-1)
        nans = int(np.count_nonzero(np.isnan(flat))) if floats else 0
        if nans:
            flat = flat[~np.isnan(flat)]
        if not flat.size:
            return (nans, 0, 0, 0) if nans else None
        keys = _keys(flat)
        return nans, flat.size, int(keys.min()), int(keys.max())

    nans = count = 0
    lo, hi = 2**64 - 1, 0
    for _, got in scan(src, summary):
        if got is None:
            continue
        nans += got[0]
        if got[1]:
            count += got[1]
            lo, hi = min(lo, got[2]), max(hi, got[3])
    return nans, count, lo, hi


class _Range:
    """Keys ``lo..hi`` (inclusive), holding ``count`` items whose ranks start at ``base``,
    and the wanted ranks among them."""

    def __init__(self, lo: int, hi: int, base: int, count: int, ranks: list[int]) -> None:
        self.lo, self.hi, self.base, self.count, self.ranks = lo, hi, base, count, ranks
        span = hi - lo + 1
        self.shift = max(span.bit_length() - _BIN_BITS, 0)

    @property
    def collect(self) -> bool:
        return self.count <= COLLECT_ITEMS

    def part(self, keys: np.ndarray) -> np.ndarray:
        inside = keys[(keys >= np.uint64(self.lo)) & (keys <= np.uint64(self.hi))]
        if self.collect:
            return inside
        bins = (inside - np.uint64(self.lo)) >> np.uint64(self.shift)
        return np.bincount(bins.astype(np.intp), minlength=1 << _BIN_BITS)

    def split(self, counts: np.ndarray) -> list[_Range]:
        """The narrower ranges (bins) holding the wanted ranks."""
        ends = np.cumsum(counts)
        out: dict[int, _Range] = {}
        for rank in self.ranks:
            b = int(np.searchsorted(ends, rank - self.base, side="right"))
            if b not in out:
                start = int(ends[b - 1]) if b else 0
                lo = self.lo + (b << self.shift)
                hi = min(self.hi, lo + (1 << self.shift) - 1)
                out[b] = _Range(lo, hi, self.base + start, int(counts[b]), [])
            out[b].ranks.append(rank)
        return list(out.values())


def _select(src: Any, ranks: list[int], first: tuple[int, int, int, int]) -> dict[int, int]:
    """The key at each rank (0-based, among the values that are not NaN)."""
    _, count, lo, hi = first
    found: dict[int, int] = {}
    pending = [_Range(lo, hi, 0, count, sorted(set(ranks)))]
    while pending:
        for r in [r for r in pending if r.lo == r.hi]:  # one key: every rank is that key
            found.update(dict.fromkeys(r.ranks, r.lo))
        pending = [r for r in pending if r.lo != r.hi]
        if not pending:
            break
        parts: list[list[np.ndarray]] = [[] for _ in pending]
        for _, got in scan(src, partial(_parts, pending)):
            for i, p in enumerate(got):
                parts[i].append(p)
        narrower = []
        for r, got in zip(pending, parts, strict=True):
            if r.collect:
                keys = np.sort(np.concatenate(got)) if got else np.empty(0, np.uint64)
                found.update({k: int(keys[k - r.base]) for k in r.ranks})
            else:
                narrower.extend(r.split(np.sum(got, axis=0)))
        pending = narrower
    return found


def _parts(ranges: list[_Range], block: np.ndarray, region: Any) -> list[np.ndarray]:
    flat = block.reshape(-1)
    if flat.dtype.kind in "fc":
        flat = flat[~np.isnan(flat)]
    keys = _keys(flat)
    return [r.part(keys) for r in ranges]


# -- the public functions -------------------------------------------------------------------------


def _reference(q: Any, method: str, nan: bool) -> Any:
    """numpy's own function for these arguments, taking ``(array, axis, keepdims)``; the
    median is numpy's separate function (a mean of the middle values, not a quantile)."""
    if q is None:
        middle: Any = np.nanmedian if nan else np.median
        return lambda x, axis=None, keepdims=False: middle(x, axis=axis, keepdims=keepdims)
    func: Any = np.nanquantile if nan else np.quantile
    return lambda x, axis=None, keepdims=False: func(x, q, axis=axis, method=method,
                                                     keepdims=keepdims)


def _flat(src: Any, q: Any, method: str, nan: bool) -> Any:
    """The quantiles (``q`` None: the median) of every item of ``src``, as numpy gives
    them."""
    reference = _reference(q, method, nan)
    first = _first_pass(src)
    nans, count = first[0], first[1]
    if count == 0 or (nans and not nan):
        # Nothing left to select from: numpy's answer (and warning) on a stand-in.
        return reference(np.full(1 if nans else 0, np.nan if nans else 0, dtype=src.dtype))
    qs = np.asarray(0.5 if q is None else q, dtype=np.float64).reshape(-1)
    lo, hi, gamma = _virtual(count, qs, "linear" if q is None else method)
    keys = _select(src, [*map(int, lo), *map(int, hi)], first)
    dtype = np.dtype(src.dtype)
    below = _values(np.array([keys[int(k)] for k in lo], dtype=np.uint64), dtype)
    above = _values(np.array([keys[int(k)] for k in hi], dtype=np.uint64), dtype)
    want = np.asarray(reference(np.zeros(2, dtype=dtype)))
    out = np.empty(want.shape, dtype=want.dtype).reshape(-1)
    for i in range(out.size):
        if q is None:  # numpy's median: the mean of the middle one or two values
            middle = [below[i]] if gamma[i] == 0 else [below[i], above[i]]
            out[i] = np.mean(np.array(middle, dtype=dtype))
        elif gamma[i] < 0:
            out[i] = below[i]
        else:
            g = float(gamma[i]) if type(q) in (int, float) else np.float64(gamma[i])
            with np.errstate(invalid="ignore"):
                out[i] = np.quantile(np.array([below[i], above[i]], dtype=dtype), g)
    shaped = out.reshape(want.shape)
    return shaped[()] if shaped.ndim == 0 else shaped


def _along(src: Any, q: Any, axes: tuple[int, ...], method: str, nan: bool,
           keepdims: bool) -> np.ndarray:
    """Quantiles (``q`` None: the median) along ``axes``: numpy's function on slabs of
    whole lines."""
    reference = _reference(q, method, nan)
    shape = tuple(src.shape)
    qshape = np.shape(q) if q is not None else ()
    keep = tuple(1 if ax in axes else n for ax, n in enumerate(shape))
    want = reference(np.zeros((2,) * len(shape), dtype=src.dtype), axis=axes, keepdims=True)
    # numpy's dtype can depend on the values: along an axis its NaN-aware functions take
    # the dtype of the first line's result (float32 when that line is all NaN, else
    # float64) and cast the other lines to it, and the first slab holds the first line.
    result: np.ndarray | None = None
    boxes = line_slabs(shape, plan_chunks(src), axes)
    lead = (slice(None),) * len(qshape)
    for region, got in scan(src, lambda block, region: reference(
            block, axis=axes, keepdims=True), boxes):
        got = np.asarray(got)
        if result is None:
            result = np.empty(qshape + keep, dtype=got.dtype)
        cell = tuple(slice(0, 1) if ax in axes else r for ax, r in enumerate(region))
        result[lead + cell] = got
    if result is None:
        result = np.empty(qshape + keep, dtype=np.asarray(want).dtype)
    if not keepdims:
        result = result.reshape(qshape + tuple(n for ax, n in enumerate(shape)
                                               if ax not in axes))
    return result


def _dispatch(a: Any, q: Any, axis: Any, out: np.ndarray | None, method: str,
              keepdims: bool, nan: bool) -> Any:
    """Checks, then the whole-array or the per-axis path."""
    if np.dtype(a.dtype).kind not in "biuf":
        raise UnsupportedDTypeError(f"quantiles of dtype {a.dtype} are not supported; "
                                    "numpy needs real numbers")
    shape = tuple(a.shape)
    axes = tuple(range(len(shape))) if axis is None else \
        tuple(sorted(normalize_axis_tuple(axis, len(shape))))
    qshape = np.shape(q) if q is not None else ()
    if math.prod(shape) == 0 or not shape:
        result = _reference(q, method, nan)(np.asarray(a), axis=axis, keepdims=keepdims)
    elif len(axes) == len(shape):
        result = _flat(a, q, method, nan)
        if keepdims:
            result = np.reshape(result, qshape + (1,) * len(shape))
    else:
        result = _along(a, q, axes, method, nan, keepdims)
    if out is not None:
        out[...] = result
        return out
    return result


def quantile(a: Any, q: Any, axis: Any = None, out: np.ndarray | None = None,
             overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
             *, weights: Any = None, interpolation: Any = None, nan: bool = False) -> Any:
    """The ``q``-th quantiles of a carray or expression, as ``numpy.quantile`` (or
    ``numpy.nanquantile`` with ``nan=True``): exact, with bounded memory (see the module
    docstring).

    Raises
    ------
    UnsupportedDTypeError
        Complex or non-numeric items, or ``weights`` (not supported here).
    """
    if interpolation is not None:
        method = interpolation
    if weights is not None:
        raise UnsupportedDTypeError("quantiles with weights= are not supported on carrays")
    if method not in _METHODS:
        raise UnsupportedOptionError(f"'{method}' is not a valid method. Use one of: {sorted(_METHODS)}")
    qarr = np.asarray(q)
    if qarr.ndim > 1:
        raise UnsupportedOptionError("q must be a scalar or 1d")
    if qarr.size and not (bool(np.all(qarr >= 0)) and bool(np.all(qarr <= 1))):
        raise UnsupportedOptionError("Quantiles must be in the range [0, 1]")
    return _dispatch(a, q, axis, out, method, keepdims, nan)


def percentile(a: Any, q: Any, axis: Any = None, out: np.ndarray | None = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
               *, weights: Any = None, interpolation: Any = None, nan: bool = False) -> Any:
    """The ``q``-th percentiles, as ``numpy.percentile`` (``numpy.nanpercentile`` with
    ``nan=True``); see :func:`quantile`."""
    qarr = np.true_divide(q, 100)
    if type(q) in (int, float):
        qarr = float(qarr)  # a Python q stays weakly typed, as in numpy
    if np.asarray(q).size and not (bool(np.all(qarr >= 0)) and bool(np.all(qarr <= 1))):
        raise UnsupportedOptionError("Percentiles must be in the range [0, 100]")
    return quantile(a, qarr, axis, out, overwrite_input, method, keepdims, weights=weights,
                    interpolation=interpolation, nan=nan)


def median(a: Any, axis: Any = None, out: np.ndarray | None = None,
           overwrite_input: bool = False, keepdims: bool = False, *,
           nan: bool = False) -> Any:
    """The median, as ``numpy.median`` (``numpy.nanmedian`` with ``nan=True``)."""
    return _dispatch(a, None, axis, out, "linear", keepdims, nan)


__all__ = ["median", "percentile", "quantile"]
