"""Writing an array's chunks a file at a time, in parallel (what dask writers use)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from carray.chunks.grid import NDGrid
from carray.chunks.io import ChunkIO
from carray.layouts.base import Layout


class UnitWriter:
    """Writes whole files (units) of chunks of one array, each file alone.

    Parallel writers (one per unit, in any process) each use one on their own
    handle; the driver then records the final shape (``ArrayEngine.adopt``).
    Writers that compress chunks themselves (on worker threads: :meth:`encode`)
    hand each unit's compressed chunks to :meth:`write_encoded`.
    """

    def __init__(self, layout: Layout, io: ChunkIO, grid: NDGrid) -> None:
        self._layout, self._io, self._grid = layout, io, grid

    @property
    def grid(self) -> NDGrid:
        """The chunk grid of the array's final shape."""
        return self._grid

    @property
    def unit_chunks(self) -> int:
        """Chunks per unit (the last unit may hold fewer)."""
        return self._layout.unit_chunks

    @property
    def padding(self) -> Any:
        """What the padding of edge chunks holds, as other writes store it."""
        return self._io.padding

    def write(self, block: np.ndarray, origin: tuple[int, ...], units: list[int]) -> int:
        """Encode and write units ``units`` from ``block``, the items starting at
        ``origin``; returns their stored bytes."""
        grid = self._grid
        size = self._layout.unit_chunks
        written = 0
        for u in units:
            chunks = [self._io.encode(self._chunk(block, origin, n), grid)
                      for n in range(u * size, min((u + 1) * size, grid.nchunks))]
            written += self._layout.write_unit(u, chunks)
        return written

    def write_encoded(self, unit: int, chunks: Sequence[bytes],
                      digests: Sequence[bytes | None] | None = None) -> int:
        """Write unit ``unit`` from its chunks, compressed by :meth:`encode` (and their
        :meth:`digest`, when worked out already); returns their stored bytes."""
        return self._layout.write_unit(unit, chunks, digests)

    def digest(self, data: bytes) -> bytes | None:
        """What the layout stores after compressed chunk ``data`` (any thread)."""
        return self._layout.chunk_digest(data)

    def encode(self, raw: np.ndarray, nthreads: int = 1) -> bytes:
        """Compress a chunk as :meth:`stored` or :meth:`trimmed` give it, on a worker
        thread (one of several compressing at once); ``nthreads`` > 1: with that many
        Blosc threads (a chunk too large for several to be in flight)."""
        if nthreads > 1:
            return self._io.encode(raw, self._grid, nthreads=nthreads)
        return self._io.encode_on_worker(raw, self._grid)

    @property
    def stored_blocks(self) -> tuple[int, ...]:
        """The shape of the blocks a stored chunk holds one after another, each in C
        order (the extended chunk shape when chunks are stored in C order)."""
        blocks = self._io.blocks
        return blocks if blocks is not None and self._io.blocked(self._grid) else \
            self._grid.ext_chunks

    def stored(self, region: np.ndarray) -> np.ndarray:
        """A chunk as it is stored, from its items ``region`` (its part inside the
        array, in C order)."""
        rows = region.shape[0] if region.shape[0] < self._grid.chunks[0] else None
        return self._io.stored_from_region(region, self._grid, rows)

    def trimmed(self, flat: np.ndarray, nchunk: int) -> np.ndarray:
        """Chunk ``nchunk`` as it is stored, from all its items in stored order, padding
        included (and holding :attr:`padding`): as :meth:`stored` makes it, a chunk of
        the last, partial run of chunk rows keeps only its rows where the layout
        stores them so."""
        grid = self._grid
        valid = grid.valid_shape(grid.chunk_coords(nchunk))
        ext = grid.ext_chunks
        if valid[0] < grid.chunks[0] and self._io.truncates(grid) and valid[1:] == ext[1:]:
            return flat[:valid[0] * math.prod(ext[1:])]
        return flat

    def _chunk(self, block: np.ndarray, origin: tuple[int, ...], nchunk: int) -> np.ndarray:
        """Chunk ``nchunk`` in stored order, from the block starting at ``origin``.

        As appends store it: a chunk of the last, partial run of chunk rows passes
        its row count, so layouts that do not pad store only those rows.
        """
        grid = self._grid
        coords = grid.chunk_coords(nchunk)
        box = tuple(slice(c * s - o, min((c + 1) * s, n) - o)
                    for c, s, o, n in zip(coords, grid.chunks, origin, grid.shape, strict=True))
        return self.stored(block[box])
