"""Reductions (sum, mean, std, min, argmax, ...) streamed over the chunks of a carray or of a
lazy expression, with numpy's signatures and results.

Every chunk is reduced on its own (numpy's pairwise sum inside it), on worker
threads a few chunks ahead of the caller (:func:`carray.compute.evaluate.waves`);
the per-chunk partial results meeting in one output cell are combined on the
caller's thread in chunk order, pairwise (a binary counter per output cell:
partial ``k`` of a cell is merged with its left neighbours as far as the lowest
set bit of ``k`` says), so float sums keep pairwise accuracy and are identical
whatever the number of threads.  Memory stays at a few chunks plus the result
and a few partials per output cell (one per bit of the chunk count along the
reduced axes).  Mean, variance and standard deviation carry (count, mean, sum
of squared deviations) per chunk and merge them with Chan's formulas.

Where every carray operand shares shape, chunks and blocks, a chunk is decoded
and evaluated in stored order into per-thread scratch buffers and reduced there
(:mod:`carray.compute.stored`: no gather into C order, no new arrays); each
reducer's ``partial_stored`` first overwrites the chunk's padding with a value
that leaves its result alone.  argmin/argmax and ``where=`` take the general
path.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from carray.chunks.shapes import MAX_VISITED_CHUNKS
from carray.compute import stats, zones
from carray.compute._types import is_carray
from carray.compute.evaluate import grid_shape, plan_chunks, regions, threaded_for, values_at, waves
from carray.compute.expr import Expr, as_operand, leaf_selection
from carray.compute.stored import StoredChunk, padding_identity, stored_plan
from carray.errors import BroadcastError, ShapeError, UnsupportedDTypeError

NO_VALUE: Any = np._NoValue  # numpy's "argument not given"

#: Each reduction and the keyword arguments numpy's function of that name takes.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "sum": ("dtype", "keepdims", "initial", "where"),
    "prod": ("dtype", "keepdims", "initial", "where"),
    "mean": ("dtype", "keepdims", "where"),
    "std": ("dtype", "ddof", "keepdims", "where"),
    "var": ("dtype", "ddof", "keepdims", "where"),
    "min": ("keepdims", "initial", "where"),
    "max": ("keepdims", "initial", "where"),
    "any": ("keepdims", "where"),
    "all": ("keepdims", "where"),
    "argmin": ("keepdims",),
    "argmax": ("keepdims",),
    "count_nonzero": ("keepdims",),
}
_DEFAULTS = {"dtype": None, "keepdims": False, "initial": NO_VALUE, "where": True, "ddof": 0}


def numpy_reduce(op: str, arr: np.ndarray, axis: Any, **kwargs: Any) -> Any:
    """numpy's own reduction ``op`` of an in-memory array (the reference we follow)."""
    given = {k: v for k, v in kwargs.items() if v is not _DEFAULTS[k] and
             not (k == "where" and v is True)}
    if op == "count_nonzero":
        return np.count_nonzero(arr, axis=axis, **given)
    return getattr(np, op)(arr, axis=axis, **given)


class _Spec:
    """One reduction's parameters, checked against numpy on a one-item stand-in."""

    def __init__(self, op: str, src: Any, axis: Any, kwargs: dict[str, Any]) -> None:
        self.op, self.src, self.shape = op, src, tuple(src.shape)
        ndim = len(self.shape)
        self.kw = {k: kwargs.get(k, _DEFAULTS[k]) for k in SIGNATURES[op]}
        self.axis_arg = axis
        if op in ("argmin", "argmax") and axis is not None and not isinstance(
                axis, (int, np.integer)):
            raise TypeError(f"{op} takes an int axis or None, got {axis!r}")
        self.axes = tuple(range(ndim)) if axis is None else \
            tuple(sorted(normalize_axis_tuple(axis, ndim)))
        where = self.kw.get("where", True)
        self.where = None if where is True or (isinstance(where, np.bool_) and where) \
            else as_operand(where)
        if self.where is not None:
            wshape = np.shape(self.where)
            try:
                ok = np.broadcast_shapes(wshape, self.shape) == self.shape
            except ValueError:
                ok = False
            if not ok:
                raise BroadcastError(f"where= of shape {wshape} does not broadcast to the "
                                     f"array's shape {self.shape}")
        self.result_dtype = self._probe()

    def _probe(self) -> np.dtype:
        one = np.zeros((1,) * len(self.shape), dtype=self.src.dtype)
        kw = dict(self.kw)
        if self.where is not None:
            kw["where"] = np.ones((1,) * len(self.shape), dtype=bool)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                res = numpy_reduce(self.op, one, self.axis_arg, **kw)
        except TypeError as exc:  # the signature was checked above: this is the dtype
            raise UnsupportedDTypeError(f"{self.op} is not defined for dtype "
                                        f"{self.src.dtype} with these arguments: {exc}"
                                        ) from None
        return np.asarray(res).dtype

    def acc_dtype(self) -> np.dtype:
        """The dtype sums run in: numpy's choice for mean/var (float64 for ints, float32
        for float16), the result's for sum and prod."""
        dtype = self.kw.get("dtype")
        if dtype is not None:
            dtype = np.dtype(dtype)
            # A mean in integers would be truncated chunk by chunk: keep it in float64.
            return dtype if dtype.kind in "fc" or self.op not in ("mean", "var", "std") \
                else np.dtype(np.float64)
        kind = self.src.dtype.kind
        if self.op in ("mean", "var", "std"):
            if kind in "biu":
                return np.dtype(np.float64)
            if self.src.dtype == np.float16:
                return np.dtype(np.float32)
            return self.src.dtype
        if self.result_dtype == np.float16:
            return np.dtype(np.float32)  # as numpy's own half-precision sums accumulate
        return self.result_dtype


def reduce(op: str, src: Any, axis: Any = None, out: np.ndarray | None = None,
           **kwargs: Any) -> Any:
    """Reduction ``op`` (a name in :data:`SIGNATURES`) of a carray or expression, with
    numpy's arguments and results; ``out`` receives the result when given."""
    spec = _Spec(op, src, axis, kwargs)
    if math.prod(spec.shape) == 0 or not spec.shape:
        where = spec.kw.get("where", True)
        kw = dict(spec.kw, where=where if spec.where is None else np.asarray(where))
        result = numpy_reduce(op, np.asarray(src), axis, **kw)
    else:
        result = _stream(spec)
    if out is not None:
        out[...] = result
        return out
    if op == "count_nonzero" and axis is None and not spec.kw["keepdims"]:
        return int(result)
    return result


def _keep_shape(spec: _Spec) -> tuple[int, ...]:
    return tuple(1 if ax in spec.axes else n for ax, n in enumerate(spec.shape))


def _stream(spec: _Spec) -> Any:
    """The reduction, chunk by chunk: partials on worker threads, merged here in chunk
    order per output cell (a binary counter of pairwise merges, see the module docstring),
    each cell finished and written into the result once its last chunk is in."""
    chunks = plan_chunks(spec.src)
    reducer = _REDUCERS[spec.op](spec)
    info, winfo = zones.gather(spec.src), zones.gather(spec.where)
    quick = zones.shortcut(spec, chunks, info)
    quick = stats.answer(spec) if quick is None else quick  # chunk statistics, no decoding
    if quick is not None:
        result = np.full(_keep_shape(spec), quick, dtype=spec.result_dtype)
        return _finish_shape(spec, result)
    visited = math.prod(grid_shape(spec.shape, chunks))
    if visited > MAX_VISITED_CHUNKS:
        raise ShapeError(f"{spec.op} would decode {visited} chunks one by one, more than "
                         f"{MAX_VISITED_CHUNKS}; reduce slices of the array")
    skip, extra = zones.minmax_skip(spec, chunks, info)
    # Chunks reduced in stored order where they can be (see carray.compute.stored).
    stored = stored_plan(spec.src) if spec.where is None and reducer.stored_ok() else None
    gshape = grid_shape(spec.shape, chunks)
    per_cell = math.prod(gshape[ax] for ax in spec.axes)
    result = np.empty(_keep_shape(spec), dtype=spec.result_dtype)
    stacks: dict[tuple[int, ...], list[tuple[int, Any]]] = {}
    counts: dict[tuple[int, ...], int] = {}

    def partial_of(item: tuple[tuple[int, ...], tuple[slice, ...]]) -> Any:
        coords, region = item
        mask = None
        if spec.where is not None:
            const = zones.region_constant(spec.where, region, spec.shape, winfo)
            if const is False:
                return None
            if const is None:
                mask = _mask_at(spec.where, region, spec.shape)
        const = zones.region_constant(spec.src, region, spec.shape, info) \
            if spec.src.dtype == bool else None
        if const is not None:
            block = np.broadcast_to(np.bool_(const), tuple(s.stop - s.start for s in region))
        else:
            if stored is not None and stored.program.steps and reducer.pieces_ok():
                # An expression: piece by piece, each evaluated and reduced while in the
                # cache (carray.compute.kernel).  A lone carray gains nothing from pieces
                # that pays for their Python work: its chunks are decoded whole.
                return reducer.partial_pieces(stored.runs(coords),
                                              stored.grid.valid_shape(coords))
            chunk = stored.chunk(coords) if stored is not None else None
            if chunk is not None:
                return reducer.partial_stored(chunk)
            block = values_at(spec.src, region)
        return reducer.partial(block, mask, region)

    needed = None if skip is None else (lambda item: item[0][0] not in skip)
    for (coords, region), part in waves(regions(spec.shape, chunks), partial_of,
                                        threaded_for(chunks, spec.src), needed):
        cell = tuple(c for ax, c in enumerate(coords) if ax not in spec.axes)
        stack = stacks.setdefault(cell, [])
        level = 0
        while stack and stack[-1][0] == level:
            part = reducer.combine(stack.pop()[1], part)
            level += 1
        stack.append((level, part))
        counts[cell] = counts.get(cell, 0) + 1
        if counts[cell] == per_cell:
            merged = stacks.pop(cell)
            acc = merged[-1][1]
            for _, left in reversed(merged[:-1]):
                acc = reducer.combine(left, acc)
            if extra is not None:
                acc = reducer.combine(acc, extra)
            box = tuple(slice(0, 1) if ax in spec.axes else r
                        for ax, r in enumerate(region))
            result[box] = reducer.finish(acc, tuple(b.stop - b.start for b in box))
    return _finish_shape(spec, result)


def _finish_shape(spec: _Spec, result: np.ndarray) -> Any:
    if not spec.kw["keepdims"]:
        result = result.reshape(tuple(n for ax, n in enumerate(spec.shape)
                                      if ax not in spec.axes))
    return result[()] if result.ndim == 0 else result


def _mask_at(where: Any, region: tuple[slice, ...], shape: tuple[int, ...]) -> np.ndarray:
    """The where= mask in a box, broadcast to the box's shape."""
    sizes = tuple(s.stop - s.start for s in region)
    if isinstance(where, np.ndarray) or is_carray(where) or isinstance(where, Expr):
        sub = leaf_selection(region, shape, tuple(where.shape))
        mask = values_at(where, sub) if not isinstance(where, np.ndarray) else where[sub]
    else:
        mask = np.asarray(where)
    return np.broadcast_to(np.asarray(mask, dtype=bool), sizes)


# -- the reducers: partial result of one chunk, merging two, the final value --------------


class _Reducer:
    def __init__(self, spec: _Spec) -> None:
        self.spec = spec
        self.axes = spec.axes

    def combine(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if b is None:
            return a
        return self.merge(a, b)

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def partial(self, block: np.ndarray, mask: np.ndarray | None,
                region: tuple[slice, ...]) -> Any:
        raise NotImplementedError

    def finish(self, acc: Any, shape: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError

    def stored_ok(self) -> bool:
        """Whether chunks may be reduced in stored order (:meth:`partial_stored`)."""
        return True

    def partial_stored(self, chunk: StoredChunk) -> Any:
        """:meth:`partial` of a chunk in stored order (its padding may be overwritten)."""
        raise NotImplementedError

    def pieces_ok(self) -> bool:
        """Whether :meth:`partial_pieces` can reduce chunks piece by piece."""
        return len(self.axes) == len(self.spec.shape)

    def partial_pieces(self, pieces: Iterator[tuple[int, StoredChunk]],
                       valid: tuple[int, ...]) -> Any:
        """:meth:`partial` of a chunk (of valid shape ``valid``) from its runs of pieces
        (:meth:`StoredPlan.runs <carray.compute.stored.StoredPlan.runs>`), every axis
        reduced: the runs' partials merged in order."""
        acc = None
        for _, piece in pieces:
            acc = self.combine(acc, self.partial_stored(piece))
        return acc

    def reduce_stored(self, func: Any, chunk: StoredChunk, arr: np.ndarray | None = None,
                      **kwargs: Any) -> np.ndarray:
        """``func`` (a numpy reduction) of ``arr`` (default: the chunk's values; flat, in
        stored order) over the reduced axes, in C order with kept dimensions."""
        arr = chunk.flat if arr is None else arr
        if len(self.axes) == chunk.ndim:  # every axis: the order does not matter
            return chunk.to_c(func(arr, **kwargs), self.axes)
        reduced = func(chunk.view(arr), axis=chunk.view_axes(self.axes), keepdims=True,
                       **kwargs)
        return chunk.to_c(reduced, self.axes)

    def where_kw(self, mask: np.ndarray | None) -> dict[str, Any]:
        return {} if mask is None else {"where": mask}

    def count(self, block: np.ndarray, mask: np.ndarray | None) -> Any:
        """Items per output cell that take part."""
        if mask is None:
            return math.prod(block.shape[ax] for ax in self.axes)
        return np.count_nonzero(mask, axis=self.axes, keepdims=True)


class _Fold(_Reducer):
    """sum, prod, min, max, any, all: one ufunc folds partials."""

    _UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
              "any": np.logical_or, "all": np.logical_and}

    def __init__(self, spec: _Spec) -> None:
        super().__init__(spec)
        self.ufunc = self._UFUNC[spec.op]
        self.func = getattr(np, spec.op)
        kw: dict[str, Any] = {"axis": self.axes, "keepdims": True}
        if spec.op in ("sum", "prod"):
            kw["dtype"] = spec.acc_dtype()
        if spec.op in ("min", "max") and spec.kw["initial"] is not NO_VALUE:
            kw["initial"] = spec.kw["initial"]
        self.kw = kw

    def partial(self, block, mask, region):
        if self.spec.op == "sum" and block.dtype == bool and mask is None and \
                self.kw["dtype"].kind in "iu":
            # Counting is what a boolean sum is, and numpy counts without a cast.
            return _count(block, self.axes).astype(self.kw["dtype"])
        return self.func(block, **self.kw, **self.where_kw(mask))

    def stored_ok(self):
        # Complex numbers have no largest or smallest value to pad with.
        return not (self.spec.op in ("min", "max") and self.spec.src.dtype.kind == "c")

    def partial_stored(self, chunk):
        dtype = chunk.flat.dtype
        chunk.fill_padding(padding_identity(self.spec.op, dtype))
        kw = {k: v for k, v in self.kw.items() if k not in ("axis", "keepdims")}
        if self.spec.op == "sum" and dtype.kind == "b" and kw["dtype"].kind in "iu":
            return self.reduce_stored(np.count_nonzero, chunk).astype(kw["dtype"])
        return self.reduce_stored(self.func, chunk, **kw)

    def merge(self, a, b):
        return self.ufunc(a, b)

    def finish(self, acc, shape):
        spec = self.spec
        initial = spec.kw.get("initial", NO_VALUE)
        if acc is None:  # every item masked out: numpy's identity (or initial)
            acc = self.ufunc.identity if initial is NO_VALUE else initial
        elif spec.op in ("sum", "prod") and initial is not NO_VALUE:
            acc = self.ufunc(acc, initial)
        return np.broadcast_to(np.asarray(acc).astype(spec.result_dtype), shape)


def _count(block: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Non-zero items per output cell, keeping dimensions (numpy's whole-array count is a
    fast C loop; by axis it sums a boolean copy)."""
    if len(axes) == block.ndim:
        return np.full((1,) * block.ndim, np.count_nonzero(block), dtype=np.intp)
    return np.count_nonzero(block, axis=axes, keepdims=True)


class _CountNonzero(_Reducer):
    def partial(self, block, mask, region):
        return _count(block, self.axes)

    def partial_stored(self, chunk):
        chunk.fill_padding(0)
        return self.reduce_stored(np.count_nonzero, chunk).astype(np.intp)

    def merge(self, a, b):
        return a + b

    def finish(self, acc, shape):
        return np.broadcast_to(acc, shape)


class _Mean(_Reducer):
    def partial(self, block, mask, region):
        total = np.sum(block, axis=self.axes, keepdims=True, dtype=self.spec.acc_dtype(),
                       **self.where_kw(mask))
        return total, self.count(block, mask)

    def partial_stored(self, chunk):
        chunk.fill_padding(padding_identity("sum", chunk.flat.dtype))
        total = self.reduce_stored(np.sum, chunk, dtype=self.spec.acc_dtype())
        return total, chunk.count(self.axes)

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]

    def finish(self, acc, shape):
        total, n = acc if acc is not None else (np.zeros(shape, self.spec.acc_dtype()), 0)
        with np.errstate(all="ignore"):
            mean = np.true_divide(total, n, dtype=self.spec.acc_dtype()) if \
                self.spec.acc_dtype().kind in "fc" else total / n
        return np.broadcast_to(np.asarray(mean).astype(self.spec.result_dtype), shape)


class _Var(_Reducer):
    """Per chunk: count, mean and sum of squared deviations (two passes over the decoded
    chunk, as numpy does over the whole array); chunks merged with Chan's formulas."""

    def partial(self, block, mask, region):
        acc = self.spec.acc_dtype()
        n = self.count(block, mask)
        kw = self.where_kw(mask)
        with np.errstate(all="ignore"):
            mean = np.sum(block, axis=self.axes, keepdims=True, dtype=acc, **kw) / n
            if acc.kind == "c":
                dev = np.subtract(block, mean, dtype=acc)
                sq = dev.real * dev.real + dev.imag * dev.imag
            else:
                # The decoded chunk is ours: deviations and squares overwrite it in place.
                own = block.dtype == acc and block.flags.writeable
                sq = np.subtract(block, mean, out=block) if own else \
                    np.subtract(block, mean, dtype=acc)
                np.multiply(sq, sq, out=sq)
            m2 = np.sum(sq, axis=self.axes, keepdims=True, **kw)
        return np.asarray(n), mean, m2

    def partial_stored(self, chunk):
        acc = self.spec.acc_dtype()
        n = chunk.count(self.axes)
        chunk.fill_padding(padding_identity("sum", chunk.flat.dtype))
        every = len(self.axes) == chunk.ndim
        values = chunk.flat if every else chunk.view()
        kw = {} if every else {"axis": chunk.view_axes(self.axes), "keepdims": True}
        with np.errstate(all="ignore"):
            mean = np.sum(values, dtype=acc, **kw) / n
            # The values are scratch: deviations and squares overwrite them in place.
            dev = np.subtract(values, mean, out=values) if values.dtype == acc and \
                acc.kind != "c" else np.subtract(values, mean, dtype=acc)
            chunk.fill_padding(0, dev.reshape(-1))  # padding deviates by nothing
            if acc.kind == "c":
                sq = dev.real * dev.real + dev.imag * dev.imag
            else:
                sq = np.multiply(dev, dev, out=dev)
            m2 = np.sum(sq, **kw)
        return np.asarray(n), chunk.to_c(mean, self.axes), chunk.to_c(m2, self.axes)

    def merge(self, a, b):
        na, ma, qa = a
        nb, mb, qb = b
        n = na + nb
        with np.errstate(all="ignore"):
            delta = mb - ma
            frac = np.where(n > 0, nb / np.maximum(n, 1), 0)
            mean = np.where(na == 0, mb, np.where(nb == 0, ma, ma + delta * frac))
            d2 = delta.real * delta.real + delta.imag * delta.imag if delta.dtype.kind == "c" \
                else delta * delta
            q = np.where(na == 0, qb, np.where(nb == 0, qa, qa + qb + d2 * na * frac))
        return n, mean, q

    def finish(self, acc, shape):
        if acc is None:
            var = np.full(shape, np.nan)
        else:
            n, _, q = acc
            if np.any(n - self.spec.kw["ddof"] <= 0):
                warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning,
                              stacklevel=2)  # numpy's words
            with np.errstate(all="ignore"):
                var = q / np.maximum(n - self.spec.kw["ddof"], 0)
        if self.spec.op == "std":
            with np.errstate(all="ignore"):
                var = np.sqrt(var)
        return np.broadcast_to(np.asarray(var).astype(self.spec.result_dtype), shape)


class _Arg(_Reducer):
    """argmin/argmax: (best value, its index) per cell; the first occurrence wins, and NaN
    beats everything (numpy's rule)."""

    def __init__(self, spec: _Spec) -> None:
        super().__init__(spec)
        self.better = np.greater if spec.op == "argmax" else np.less
        self.func = np.argmax if spec.op == "argmax" else np.argmin
        self.flat = spec.axis_arg is None

    def partial(self, block, mask, region):
        starts = [s.start for s in region]
        if self.flat:
            local = int(self.func(block))
            pos = np.unravel_index(local, block.shape)
            value = block[pos]
            index = np.ravel_multi_index(tuple(p + s for p, s in zip(pos, starts,
                                                                     strict=True)),
                                         self.spec.shape)
            one = (1,) * block.ndim
            return np.full(one, value, dtype=block.dtype), np.full(one, index, dtype=np.intp)
        ax = self.axes[0]
        idx = self.func(block, axis=ax, keepdims=True)
        return np.take_along_axis(block, idx, ax), idx + starts[ax]

    def merge(self, a, b):
        va, ia = a
        vb, ib = b
        take = self.better(vb, va) | ((vb == va) & (ib < ia))
        if va.dtype.kind in "fc":
            na, nb = np.isnan(va), np.isnan(vb)
            take = np.where(na & nb, ib < ia, np.where(na, False, np.where(nb, True, take)))
        return np.where(take, vb, va), np.where(take, ib, ia)

    def finish(self, acc, shape):
        return np.broadcast_to(acc[1], shape)

    def stored_ok(self):
        return False  # positions need the C order


_REDUCERS: dict[str, type[_Reducer]] = {
    "sum": _Fold, "prod": _Fold, "min": _Fold, "max": _Fold, "any": _Fold, "all": _Fold,
    "count_nonzero": _CountNonzero, "mean": _Mean, "std": _Var, "var": _Var,
    "argmin": _Arg, "argmax": _Arg,
}
