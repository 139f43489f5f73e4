"""bcolz's row API on a carray: iterating rows and blocks of rows and ``where``, a run of
chunk rows at a time (``sum`` and the other reductions are in :mod:`carray.compute`);
functions of a carray's public API, which :class:`carray.array.array.carray` calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from carray.core.util import skip_and_limit


def iter_rows(a: Any, start: int = 0, stop: int | None = None, step: int = 1,
              limit: int | None = None, skip: int = 0) -> Iterator[Any]:
    """Rows ``start:stop:step`` of ``a``, skipping ``skip`` and yielding at most ``limit``."""
    if step <= 0:
        raise NotImplementedError("iter needs a positive step")
    rows = range(a.shape[0])[start:stop:step]
    blen = max(a.chunks[0], 1)
    blocks = (a.read_rows(rows[i:i + blen]) for i in range(0, len(rows), blen))
    return skip_and_limit(blocks, skip, limit)


def iter_blocks(a: Any, blen: int | None = None, start: int = 0,
                stop: int | None = None) -> Iterator[np.ndarray]:
    """Consecutive blocks of ``blen`` rows of ``a`` (default: the chunk length)."""
    blen = blen or max(a.chunks[0], 1)  # a Blosc2 frame may record 0 when empty
    if blen < 1:
        raise ValueError("blen must be positive")
    rows = range(a.shape[0])[start:stop]
    for i in range(0, len(rows), blen):
        yield a.read_rows(rows[i:i + blen])


def where(a: Any, boolarr: Any, limit: int | None = None, skip: int = 0) -> Iterator[Any]:
    """The values of ``a`` where ``boolarr`` (same length, bool) is true."""
    if a.ndim != 1:
        raise NotImplementedError("where works on 1-d arrays")
    if len(boolarr) != len(a):
        raise ValueError(f"boolarr has length {len(boolarr)}, expected {len(a)}")
    mask_src = boolarr if hasattr(boolarr, "read_rows") else np.asarray(boolarr)
    if mask_src.dtype != bool:
        raise TypeError("boolarr must be of bool dtype")
    cl, n = max(a.chunks[0], 1), len(a)

    def blocks() -> Iterator[np.ndarray]:
        for i in range(0, n, cl):
            mask = np.asarray(mask_src[i:i + cl])
            if mask.any():
                yield a.read_rows(range(i, min(i + cl, n)))[mask]

    return skip_and_limit(blocks(), skip, limit)


def wheretrue(a: Any, limit: int | None = None, skip: int = 0) -> Iterator[int]:
    """The indices where ``a`` (a 1-d bool array) is true."""
    if a.dtype.kind != "b" or a.ndim != 1:
        raise TypeError("wheretrue needs a 1-d bool carray")
    cl, n = max(a.chunks[0], 1), len(a)
    blocks = (np.flatnonzero(a.read_rows(range(i, min(i + cl, n)))) + i
              for i in range(0, n, cl))
    return (int(i) for i in skip_and_limit(blocks, skip, limit))
