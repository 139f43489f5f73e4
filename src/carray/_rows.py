"""bcolz's row API on a carray: iterating rows and blocks of rows and ``where``, a run of
chunk rows at a time (``sum`` and the other reductions are in :mod:`carray.compute`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from carray._util import skip_and_limit


class RowIteration:
    """Iteration over the first axis, a run of chunk rows at a time.

    Mixed into :class:`carray.array.carray`; uses its public ``read_rows``,
    ``chunks``, ``shape``, ``dtype`` and ``ndim``.
    """


    if TYPE_CHECKING:  # provided by the class this is mixed into
        @property
        def chunks(self) -> tuple[int, ...]: ...

        @property
        def shape(self) -> tuple[int, ...]: ...

        @property
        def dtype(self) -> np.dtype: ...

        @property
        def ndim(self) -> int: ...

        def read_rows(self, rows: range, out: np.ndarray | None = None) -> np.ndarray: ...

        def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]:
        if not self.ndim:
            raise TypeError("iteration over a 0-d carray")
        return self.iter()

    def iter(self, start: int = 0, stop: int | None = None, step: int = 1,
             limit: int | None = None, skip: int = 0) -> Iterator[Any]:
        """Iterate over rows ``start:stop:step``, skipping ``skip`` and yielding at most ``limit``."""
        if step <= 0:
            raise NotImplementedError("iter needs a positive step")
        rows = range(self.shape[0])[start:stop:step]
        blen = max(self.chunks[0], 1)
        blocks = (self.read_rows(rows[i:i + blen]) for i in range(0, len(rows), blen))
        return skip_and_limit(blocks, skip, limit)

    def iterblocks(self, blen: int | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[np.ndarray]:
        """Iterate over consecutive blocks of ``blen`` rows (default: the chunk length)."""
        blen = blen or max(self.chunks[0], 1)  # a Blosc2 frame may record 0 when empty
        if blen < 1:
            raise ValueError("blen must be positive")
        rows = range(self.shape[0])[start:stop]
        for i in range(0, len(rows), blen):
            yield self.read_rows(rows[i:i + blen])

    def where(self, boolarr: Any, limit: int | None = None, skip: int = 0) -> Iterator[Any]:
        """Iterate over the values where ``boolarr`` (same length, bool) is true."""
        if self.ndim != 1:
            raise NotImplementedError("where works on 1-d arrays")
        if len(boolarr) != len(self):
            raise ValueError(f"boolarr has length {len(boolarr)}, expected {len(self)}")
        mask_src = boolarr if hasattr(boolarr, "read_rows") else np.asarray(boolarr)
        if mask_src.dtype != bool:
            raise TypeError("boolarr must be of bool dtype")
        cl, n = max(self.chunks[0], 1), len(self)

        def blocks() -> Iterator[np.ndarray]:
            for i in range(0, n, cl):
                mask = np.asarray(mask_src[i:i + cl])
                if mask.any():
                    yield self.read_rows(range(i, min(i + cl, n)))[mask]

        return skip_and_limit(blocks(), skip, limit)

    def wheretrue(self, limit: int | None = None, skip: int = 0) -> Iterator[int]:
        """Iterate over the indices where this (bool) array is true."""
        if self.dtype.kind != "b" or self.ndim != 1:
            raise TypeError("wheretrue needs a 1-d bool carray")
        cl, n = max(self.chunks[0], 1), len(self)
        blocks = (np.flatnonzero(self.read_rows(range(i, min(i + cl, n)))) + i
                  for i in range(0, n, cl))
        return (int(i) for i in skip_and_limit(blocks, skip, limit))
