"""ArrayEngine.decode_stored: one chunk decoded whole, in stored (block) order."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca
from carray.chunks import geometry as geo


def _chunk(x: np.ndarray, coords, chunks, ext) -> np.ndarray:
    """Chunk ``coords`` of ``x`` in C order, extended shape, padding zeroed."""
    box = tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, chunks, strict=True))
    part = x[box]
    out = np.zeros(ext, dtype=x.dtype)
    out[tuple(slice(0, n) for n in part.shape)] = part
    return out


@pytest.mark.parametrize("disk", [False, True])
def test_blocked_chunks_come_out_in_block_order(tmp_path, disk):
    x = np.arange(9 * 10 * 7, dtype=np.int32).reshape(9, 10, 7)
    chunks, blocks = (4, 6, 7), (3, 4, 2)
    kw = {"rootdir": tmp_path / "a", "mode": "w"} if disk else {}
    a = ca.carray(x, chunks=chunks, blocks=blocks, **kw)
    a.flush()
    a.free_cachemem()  # on disk the last rows are stored: decode them, not the kept tail
    engine = a.engine
    grid = engine.grid
    ext = grid.ext_chunks
    assert ext == (6, 8, 8)
    out = np.empty(grid.chunk_items, dtype=x.dtype)
    for nchunk in range(grid.nchunks):
        coords = grid.chunk_coords(nchunk)
        if disk or coords[0] < engine.nfull:  # in memory the last rows wait in the tail
            assert engine.decode_stored(nchunk, out) == blocks
            valid = grid.valid_shape(coords)
            got = geo.blocked_view(out, ext, blocks).reshape(ext)
            want = _chunk(x, coords, chunks, ext)
            inside = tuple(slice(0, n) for n in valid)
            np.testing.assert_array_equal(got[inside], want[inside])


def test_c_ordered_chunks_report_their_extended_shape():
    x = np.arange(40.0).reshape(8, 5)
    a = ca.carray(x, chunks=(4, 5), blocks=(2, 5))  # blocks of whole rows: C order
    out = np.empty(a.engine.grid.chunk_items)
    assert a.engine.decode_stored(1, out) == (4, 5)
    np.testing.assert_array_equal(out, x[4:].ravel())


def test_chunks_held_decoded_in_the_tail_are_refused():
    x = np.arange(30.0).reshape(6, 5)
    a = ca.carray(x[:4], chunks=(4, 5), blocks=(2, 5))
    a.append(x[4:])  # a partial run of rows, kept decoded
    out = np.empty(a.engine.grid.chunk_items)
    assert a.engine.decode_stored(0, out) is not None
    assert a.engine.decode_stored(1, out) is None
