"""Zone maps in reductions: chunks whose min/max summaries settle the answer are not read.

Two uses of the per-chunk summaries of 1-d numeric carrays (:mod:`carray.compute.zonemap`):

* ``min``/``max`` of a whole 1-d carray take the bounds of every summarised
  chunk as they are and decode only the chunks without a summary (the last,
  partial one, and any written by other programs); of a sorted array that is
  almost nothing.
* A boolean expression built from comparisons of such carrays with constants,
  membership (``x in [...]``), ``isnan``, ``&``, ``|`` and ``~`` is decided per
  chunk three-valued (may it be true somewhere? may it be false somewhere?) by
  :mod:`carray.compute.prune`, the logic table queries use too.  A chunk where it is certainly
  constant is not decoded: counting, ``any``/``all`` and the other reductions
  use the constant, and a ``where=`` mask that is certainly false drops the
  chunk.  ``any``/``all`` over everything stop at the first chunk that decides
  them.

Summaries are read once per reduction on the caller's thread (:func:`gather`);
worker threads only look them up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.compute import prune
from carray.compute._types import is_carray
from carray.compute.evaluate import carray_leaves, regions
from carray.compute.expr import Expr, is_scalar, leaf_selection
from carray.compute.ops import IsIn


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

    def bounds_of(key: tuple[Any, tuple[slice, ...], tuple[int, ...]]) -> prune.Bounds | None:
        b = _leaf_bounds(*key, info)
        if b is None:
            return None
        return prune.Bounds(np.array([b[0]]), np.array([b[1]]), np.array([b[2]]),
                            np.ones(1, bool))

    may_true, may_false = prune.tri((src, region, shape), _describe, bounds_of, 1)
    if may_true[0] and not may_false[0]:
        return True
    if may_false[0] and not may_true[0]:
        return False
    return None


def _leaf_bounds(leaf: Any, region, shape, info: Summaries) -> tuple[Any, Any, bool] | None:
    summary = info.get(id(leaf))
    if summary is None:
        return None
    sel = leaf_selection(region, shape, tuple(leaf.shape))
    start, stop, step = sel[0].indices(leaf.shape[0])
    return summary.bounds(start, stop) if step == 1 else None


_SYMBOL = {np.less: "<", np.less_equal: "<=", np.greater: ">", np.greater_equal: ">=",
           np.equal: "==", np.not_equal: "!="}
_AND_OR = {np.logical_and: "and", np.bitwise_and: "and", np.logical_or: "or",
           np.bitwise_or: "or"}


def _describe(item: tuple[Any, Any, Any]) -> prune.Fact | None:
    """What a node of a lazy expression is to :func:`carray.compute.prune.tri`; nodes
    travel with the box of the node's shape they are asked about."""
    node, region, shape = item
    if is_scalar(node):
        return prune.Fact("constant", value=node) if isinstance(node, (bool, np.bool_)) \
            else None
    if is_carray(node):
        return prune.Fact("column", key=item) if node.dtype == bool else None
    if not isinstance(node, Expr):
        return None
    func, args = node.func, node.args
    # Operands broadcast to the node's shape: ask each about its part of the box.
    kids = tuple((a, region, shape) if is_scalar(a) or is_carray(a) else
                 (a, leaf_selection(region, shape, tuple(a.shape)), tuple(a.shape))
                 for a in args)
    if func in _AND_OR and node.dtype == bool:
        return prune.Fact(_AND_OR[func], kids)
    if func in (np.logical_not, np.invert) and node.dtype == bool:
        return prune.Fact("not", kids)
    if isinstance(func, IsIn) and is_carray(args[0]):
        return prune.Fact("isin", key=kids[0], value=func.members, invert=func.invert)
    if func is np.isnan and is_carray(args[0]):
        return prune.Fact("isnan", key=kids[0])
    if func in _SYMBOL:
        op = _SYMBOL[func]
        if is_scalar(args[0]) and is_carray(args[1]):
            return prune.Fact("compare", key=kids[1], op=prune.FLIP[op], value=args[0])
        if is_carray(args[0]) and is_scalar(args[1]):
            return prune.Fact("compare", key=kids[0], op=op, value=args[1])
    return None


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
