"""The core chunk/block geometry (carray.chunks.geometry)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from carray.chunks import geometry as geo


@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 5])
def test_interleave_and_deinterleave_are_inverse(ndim):
    order = geo.interleave(ndim)
    back = geo.deinterleave(ndim)
    assert sorted(order) == list(range(2 * ndim))
    assert tuple(order[i] for i in back) == tuple(range(2 * ndim))


def test_interleave_pairs_block_index_with_position():
    assert geo.interleave(3) == (0, 3, 1, 4, 2, 5)
    assert geo.deinterleave(3) == (0, 2, 4, 1, 3, 5)


@st.composite
def chunk_and_blocks(draw):
    ndim = draw(st.integers(1, 4))
    blocks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    ext = tuple(b * draw(st.integers(1, 3)) for b in blocks)
    return ext, blocks


@given(chunk_and_blocks())
def test_blocked_round_trip(case):
    ext, blocks = case
    chunk = np.arange(int(np.prod(ext))).reshape(ext)
    stored = geo.to_blocked(chunk, blocks).reshape(-1)
    assert np.array_equal(geo.blocked_view(stored, ext, blocks).reshape(ext), chunk)
    # the first block is stored first, itself in C order
    first = chunk[tuple(slice(0, b) for b in blocks)].reshape(-1)
    assert np.array_equal(stored[:first.size], first)
    assert geo.blocked_is_c_order(ext, blocks) == np.array_equal(stored, chunk.reshape(-1))


def test_grid_counts_and_boxes():
    g = geo.Geometry((10, 7), (4, 3), (2, 2), 8)
    assert g.extchunk == (4, 4)
    assert g.grid == (3, 3)
    assert g.nchunks == 9
    assert g.chunk_nbytes == 16 * 8 and g.block_nbytes == 4 * 8
    assert geo.chunk_coords(5, g.grid) == (1, 2)
    assert geo.chunk_index((1, 2), g.grid) == 5
    assert geo.chunk_box((2, 2), g.shape, g.chunkshape) == ((8, 10), (6, 7))
    assert geo.nchunks_of((0, 7), (4, 3)) == 0


@pytest.mark.parametrize("shape,chunks,blocks,itemsize,match", [
    ((4,), (4, 4), (2, 2), 1, "differ in length"),
    ((4,) * 17, (1,) * 17, (1,) * 17, 1, "at most 16"),
    ((4,), (4,), (2,), 0, "item size"),
    ((4,), (0,), (0,), 1, "has 4 items"),
    ((4,), (2,), (3,), 1, "larger than chunk"),
    ((2**20,), (2**20,), (2**20,), 4096, "exceed"),
])
def test_check_geometry_names_the_problem(shape, chunks, blocks, itemsize, match):
    assert match in geo.check_geometry(shape, chunks, blocks, itemsize)


def test_check_geometry_accepts_caterva_limits():
    assert geo.check_geometry((2,) * 8, (2,) * 8, (1,) * 8, 4, max_dim=geo.CATERVA_MAX_DIM) is None
    assert "at most 8" in geo.check_geometry((2,) * 9, (2,) * 9, (1,) * 9, 4,
                                             max_dim=geo.CATERVA_MAX_DIM)
