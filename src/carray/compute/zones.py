"""Zone maps in reductions: chunks whose min/max summaries settle the answer are not read.

Two uses of the per-chunk summaries of 1-d numeric carrays (:mod:`carray.zonemap`):

* ``min``/``max`` of a whole 1-d carray take the bounds of every summarised
  chunk as they are and decode only the chunks without a summary (the last,
  partial one, and any written by other programs); of a sorted array that is
  almost nothing.
* A boolean expression built from comparisons of such carrays with constants,
  ``&``, ``|`` and ``~`` is decided per chunk three-valued (may it be true
  somewhere? may it be false somewhere?).  A chunk where it is certainly
  constant is not decoded: counting, ``any``/``all`` and the other reductions
  use the constant, and a ``where=`` mask that is certainly false drops the
  chunk.  ``any``/``all`` over everything stop at the first chunk that decides
  them.

Summaries are read once per reduction on the caller's thread (:func:`gather`);
worker threads only look them up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.compute._types import is_carray
from carray.compute.evaluate import carray_leaves, regions
from carray.compute.expr import Expr, is_scalar, leaf_selection


@dataclass(frozen=True)
class Summary:
    """Per-chunk bounds of one 1-d carray: its chunk length and the summarised chunks."""

    chunklen: int
    lo: np.ndarray
    hi: np.ndarray
    nan: np.ndarray
    known: np.ndarray

    def bounds(self, start: int, stop: int) -> tuple[Any, Any, bool] | None:
        """(min, max, any NaN) of items ``[start, stop)``, or None when not all summarised."""
        if stop <= start:
            return None
        c0, c1 = start // self.chunklen, (stop - 1) // self.chunklen
        if c1 >= len(self.known) or not self.known[c0:c1 + 1].all():
            return None
        lo, hi = self.lo[c0:c1 + 1], self.hi[c0:c1 + 1]
        if lo.dtype.kind == "f":  # fmin/fmax skip the NaN bounds of all-NaN chunks
            return np.fmin.reduce(lo), np.fmax.reduce(hi), bool(self.nan[c0:c1 + 1].any())
        return lo.min(), hi.max(), bool(self.nan[c0:c1 + 1].any())


Summaries = dict[int, Summary]

#: Switch the summaries off (to measure what they save, or to rule them out).
USE_SUMMARIES = True


def gather(src: Any) -> Summaries:
    """The summaries of every 1-d carray ``src`` reads (by ``id``), copied."""
    if src is None or not USE_SUMMARIES or not (is_carray(src) or isinstance(src, Expr)):
        return {}
    out = {}
    for leaf in carray_leaves(src):
        if leaf.ndim != 1 or id(leaf) in out:
            continue
        zm = leaf.zone_map()
        if zm is not None and len(zm):
            out[id(leaf)] = Summary(leaf.chunklen, zm.lo.copy(), zm.hi.copy(), zm.nan.copy(),
                                    zm.known.copy())
    return out


def region_constant(src: Any, region: tuple[slice, ...], shape: tuple[int, ...],
                    info: Summaries) -> bool | None:
    """True or False when boolean ``src`` certainly has that value everywhere in the box,
    else None."""
    if not info:
        return None
    tri = _tri(src, region, shape, info)
    if tri is None:
        return None
    may_true, may_false = tri
    if may_true and not may_false:
        return True
    if may_false and not may_true:
        return False
    return None


def _leaf_bounds(leaf: Any, region, shape, info: Summaries) -> tuple[Any, Any, bool] | None:
    summary = info.get(id(leaf))
    if summary is None:
        return None
    sel = leaf_selection(region, shape, tuple(leaf.shape))
    start, stop, step = sel[0].indices(leaf.shape[0])
    return summary.bounds(start, stop) if step == 1 else None


_FLIP = {np.less: np.greater, np.less_equal: np.greater_equal, np.greater: np.less,
         np.greater_equal: np.less_equal, np.equal: np.equal, np.not_equal: np.not_equal}


def _tri(node: Any, region, shape, info: Summaries) -> tuple[bool, bool] | None:
    """(may be true somewhere, may be false somewhere) of a boolean node in the box."""
    if is_carray(node):
        if node.dtype != bool:
            return None
        b = _leaf_bounds(node, region, shape, info)
        return None if b is None else (bool(b[1]), not bool(b[0]))
    if not isinstance(node, Expr):
        return None
    func, args = node.func, node.args
    if func in (np.logical_and, np.bitwise_and, np.logical_or, np.bitwise_or) and \
            node.dtype == bool:
        left = _tri(args[0], region, node.shape, info) if not is_scalar(args[0]) else \
            (bool(args[0]), not bool(args[0]))
        right = _tri(args[1], region, node.shape, info) if not is_scalar(args[1]) else \
            (bool(args[1]), not bool(args[1]))
        if func in (np.logical_and, np.bitwise_and):
            # False anywhere on one side is enough to make the whole box false.
            if left is not None and not left[0] or right is not None and not right[0]:
                return False, True
            if left is None or right is None:
                return None
            return left[0] and right[0], left[1] or right[1]
        if left is not None and not left[1] or right is not None and not right[1]:
            return True, False
        if left is None or right is None:
            return None
        return left[0] or right[0], left[1] and right[1]
    if func in (np.logical_not, np.invert) and node.dtype == bool:
        inner = _tri(args[0], region, node.shape, info)
        return None if inner is None else (inner[1], inner[0])
    if func in _FLIP:
        return _compare(func, args, region, node.shape, info)
    return None


def _compare(func, args, region, shape, info: Summaries) -> tuple[bool, bool] | None:
    left, right = args
    if is_scalar(left) and is_carray(right):
        left, right, func = right, left, _FLIP[func]
    if not (is_carray(left) and is_scalar(right)) or isinstance(right, complex) or \
            np.iscomplexobj(right):
        return None
    b = _leaf_bounds(left, region, shape, info)
    if b is None:
        return None
    lo, hi, nan = b
    c = right
    if isinstance(c, (float, np.floating)) and math.isnan(c):
        return (True, False) if func is np.not_equal else (False, True)
    with np.errstate(all="ignore"):
        if func is np.less:
            return bool(lo < c), bool(hi >= c) or nan
        if func is np.less_equal:
            return bool(lo <= c), bool(hi > c) or nan
        if func is np.greater:
            return bool(hi > c), bool(lo <= c) or nan
        if func is np.greater_equal:
            return bool(hi >= c), bool(lo < c) or nan
        inside = bool(lo <= c <= hi)
        single = bool(lo == c == hi)
    if func is np.equal:
        return inside, not single or nan
    return not single or nan, inside


def shortcut(spec: Any, chunks: tuple[int, ...], info: Summaries) -> Any:
    """The answer of ``any``/``all`` over every axis when a chunk's summaries decide it
    (a chunk certainly all true for ``any``, certainly all false for ``all``), else None."""
    if spec.op not in ("any", "all") or spec.where is not None or not info or \
            len(spec.axes) != len(spec.shape):
        return None
    decisive = spec.op == "any"
    for _, region in regions(spec.shape, chunks):
        if region_constant(spec.src, region, spec.shape, info) is decisive:
            return decisive
    return None


def minmax_skip(spec: Any, chunks: tuple[int, ...], info: Summaries
                ) -> tuple[set[int] | None, np.ndarray | None]:
    """For ``min``/``max`` of a whole 1-d carray: the chunks the summaries answer for, and
    their combined bound (as a partial result), or ``(None, None)``."""
    src = spec.src
    if spec.op not in ("min", "max") or not is_carray(src) or src.ndim != 1 or \
            spec.axes != (0,) or \
            spec.where is not None or id(src) not in info or src.dtype.kind not in "iuf":
        return None, None
    summary = info[id(src)]
    known = np.flatnonzero(summary.known)
    if not len(known) or tuple(chunks) != (summary.chunklen,):
        return None, None
    if summary.nan[known].any():
        bound = np.array([np.nan], dtype=src.dtype)
    elif spec.op == "max":
        bound = np.array([summary.hi[known].max()], dtype=src.dtype)
    else:
        bound = np.array([summary.lo[known].min()], dtype=src.dtype)
    return set(known.tolist()), bound
