"""Slabs: boxes of a carray or expression visited in C order with bounded memory.

Order statistics, boolean-mask selection and running sums need items in a
fixed order (C order over the whole array, or whole lines along some axes),
which chunk-by-chunk reductions do not give.  These helpers cut an array into
boxes that keep that order and hold at most a few chunks' worth of items, and
read them a few at a time on worker threads (:func:`carray.compute.evaluate.waves`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from carray.compute import protocols
from carray.compute.evaluate import plan_chunks, regions, threaded_for, values_at, waves

Region = tuple[slice, ...]

#: Items of one slab of the per-axis paths (quantiles along an axis): a slab holds whole
#: lines along the reduced axes, so it cannot be smaller than one line.
SLAB_ITEMS = 1 << 22


def row_slabs(shape: tuple[int, ...], chunks: tuple[int, ...]) -> Iterator[Region]:
    """Runs of whole chunk rows along axis 0 (every other axis whole): in order, they
    hold the items in C order."""
    rest = tuple(slice(0, n) for n in shape[1:])
    step = max(chunks[0], 1)
    for start in range(0, shape[0], step):
        yield (slice(start, min(start + step, shape[0])), *rest)


def line_slabs(shape: tuple[int, ...], chunks: tuple[int, ...], axes: tuple[int, ...],
               max_items: int = SLAB_ITEMS) -> Iterator[Region]:
    """Boxes that hold every item along ``axes`` and tile the other axes, in C order,
    each at most ``max_items`` items when a single line along ``axes`` fits."""
    sizes = [n if ax in axes else max(chunks[ax], 1) for ax, n in enumerate(shape)]
    kept = [ax for ax in range(len(shape)) if ax not in axes]
    for ax in kept:  # shrink the outer kept axes first: inner ones read contiguously
        while math.prod(sizes) > max_items and sizes[ax] > 1:
            sizes[ax] = -(-sizes[ax] // 2)
    for _, region in regions(shape, tuple(sizes)):
        yield region


def scan(src: Any, fn: Callable[[np.ndarray, Region], Any],
         boxes: Iterator[Region] | None = None) -> Iterator[tuple[Region, Any]]:
    """``(box, fn(values, box))`` for every chunk of ``src`` (or every box of ``boxes``),
    in order; ``fn`` runs on worker threads a few boxes ahead."""
    chunks = plan_chunks(src)
    if boxes is None:
        boxes = (region for _, region in regions(tuple(src.shape), chunks))

    def work(region: Region) -> Any:
        return fn(values_at(src, region), region)

    yield from waves(boxes, work, threaded_for(chunks, src))


def small(*values: Any) -> bool:
    """Whether the carrays and expressions among ``values`` are small enough for numpy's
    own function on ``np.asarray`` (see ``carray.compute.FALLBACK_BYTES``)."""
    total = sum(int(getattr(v, "nbytes", 0)) for v in values
                if isinstance(v, protocols.ComputeMixin))
    return total <= protocols.FALLBACK_BYTES
