"""Writing an array's chunks a file at a time, in parallel (what dask writers use)."""

from __future__ import annotations

import numpy as np

from carray.chunkio import ChunkIO
from carray.grid import NDGrid
from carray.layouts.base import Layout


class UnitWriter:
    """Writes whole files (units) of chunks of one array, each file alone.

    Parallel writers (one per unit, in any process) each use one on their own
    handle; the driver then records the final shape (``ArrayEngine.adopt``).
    """

    def __init__(self, layout: Layout, io: ChunkIO, grid: NDGrid) -> None:
        self._layout, self._io, self._grid = layout, io, grid

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

    def _chunk(self, block: np.ndarray, origin: tuple[int, ...], nchunk: int) -> np.ndarray:
        """Chunk ``nchunk`` in stored order, from the block starting at ``origin``.

        As appends store it: a chunk of the last, partial run of chunk rows passes
        its row count, so layouts that do not pad store only those rows.
        """
        grid = self._grid
        coords = grid.chunk_coords(nchunk)
        box = tuple(slice(c * s - o, min((c + 1) * s, n) - o)
                    for c, s, o, n in zip(coords, grid.chunks, origin, grid.shape, strict=True))
        region = block[box]
        rows = region.shape[0] if region.shape[0] < grid.chunks[0] else None
        return self._io.stored_from_region(region, grid, rows)
