"""The N-d chunk grid: reads and writes through pieces checked against numpy.

Every property stores a random array the way a chunked N-d carray would (each
chunk padded to its extended shape and reblocked into Blosc block order), then
answers an orthogonal key piece by piece and compares with a reference built
from per-axis index arrays that never goes through ``orthogonal_key``.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import grids, keys, reference

from carray.chunks.grid import NDGrid, deblock, gather, plan, reblock, scatter
from carray.chunks.keys import orthogonal_key

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def store(arr: np.ndarray, grid: NDGrid) -> dict[int, np.ndarray]:
    """Every chunk of ``arr``, zero-padded and in block order, by linear index."""
    chunks = {}
    for n in range(grid.nchunks):
        coords = grid.chunk_coords(n)
        ext = np.zeros(grid.ext_chunks, arr.dtype)
        ext[tuple(slice(0, v) for v in grid.valid_shape(coords))] = arr[grid.chunk_slices(coords)]
        chunks[n] = reblock(ext, grid)
    return chunks


def load(chunks: dict[int, np.ndarray], grid: NDGrid, dtype) -> np.ndarray:
    arr = np.empty(grid.shape, dtype)
    for n, raw in chunks.items():
        coords = grid.chunk_coords(n)
        ext = deblock(raw, grid)
        arr[grid.chunk_slices(coords)] = ext[tuple(slice(0, v) for v in grid.valid_shape(coords))]
    return arr


def read(chunks, grid, okey, dtype) -> np.ndarray:
    out = np.full(okey.sel_shape, -1, dtype)
    for piece in plan(grid, okey):
        gather(piece, deblock(chunks[piece.nchunk], grid), out)
    return okey.finish(out)


def random_array(grid: NDGrid, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1000, size=grid.shape, dtype=np.int32)


# ------------------------------------------------------------------ properties

@SETTINGS
@given(st.data())
def test_read_matches_reference(data):
    grid = data.draw(grids())
    arr = random_array(grid, data.draw(st.integers(0, 2**16)))
    key, wants, ints = data.draw(keys(grid.shape))
    okey = orthogonal_key(key, grid.shape)
    expected = reference(arr, wants, ints, key)
    got = read(store(arr, grid), grid, okey, arr.dtype)
    assert okey.out_shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    # With no arrays, or one and no ints (numpy would broadcast the two and may
    # move the result axis), orthogonal indexing is numpy's own.
    arrays = sum(isinstance(k, (list, np.ndarray)) for k in key)
    if arrays == 0 or (arrays == 1 and not ints):
        np.testing.assert_array_equal(got, arr[key])


@SETTINGS
@given(st.data())
def test_write_matches_reference(data):
    grid = data.draw(grids())
    arr = random_array(grid, data.draw(st.integers(0, 2**16)))
    key, wants, ints = data.draw(keys(grid.shape))
    okey = orthogonal_key(key, grid.shape)
    # New values derived from the target item, so repeated indices agree.
    src = random_array(grid, data.draw(st.integers(0, 2**16))) + 5000
    values = reference(src, wants, ints, key)
    expected = arr.copy()
    expected[np.ix_(*wants)] = src[np.ix_(*wants)]
    chunks = store(arr, grid)
    sel_values = okey.expand_values(values)
    for piece in plan(grid, okey):
        # A fully covered chunk need not be decoded: padding is zeros anyway.
        ext = (np.zeros(grid.ext_chunks, arr.dtype) if piece.full
               else deblock(chunks[piece.nchunk], grid).copy())
        scatter(piece, sel_values, ext)
        chunks[piece.nchunk] = reblock(ext, grid)
    np.testing.assert_array_equal(load(chunks, grid, arr.dtype), expected)


@SETTINGS
@given(st.data())
def test_pieces_touch_exactly_the_needed_blocks(data):
    grid = data.draw(grids())
    key, wants, _ = data.draw(keys(grid.shape))
    okey = orthogonal_key(key, grid.shape)
    brute = set()
    for item in product(*[np.unique(w).tolist() for w in wants]):
        c = tuple(i // cs for i, cs in zip(item, grid.chunks, strict=True))
        local = tuple(i - x * cs for i, x, cs in zip(item, c, grid.chunks, strict=True))
        b = tuple(q // bs for q, bs in zip(local, grid.blocks, strict=True))
        brute.add((grid.chunk_index(c), int(np.ravel_multi_index(b, grid.blocks_per_chunk))))
    pieces = list(plan(grid, okey))
    got = {(p.nchunk, int(b)) for p in pieces for b in p.blocks}
    assert got == brute
    nchunks = [p.nchunk for p in pieces]
    assert nchunks == sorted(set(nchunks))  # each chunk once, in C order
    for p in pieces:
        assert list(p.blocks) == sorted(set(p.blocks.tolist()))
        assert p.coords == grid.chunk_coords(p.nchunk)
        valid = grid.valid_shape(p.coords)
        expect_full = all(set(np.asarray(loc).tolist()) == set(range(v))
                          for loc, v in zip(p.local, valid, strict=True))
        assert p.full == expect_full
    assert sum(math.prod(p.shape) for p in pieces) == okey.size


@SETTINGS
@given(grids(), st.integers(0, 2**16))
def test_reblock_deblock_round_trip(grid, seed):
    rng = np.random.default_rng(seed)
    ext = rng.integers(0, 100, size=grid.ext_chunks, dtype=np.int32)
    raw = reblock(ext, grid)
    assert raw.shape == (grid.chunk_items,) and raw.flags.c_contiguous
    np.testing.assert_array_equal(deblock(raw, grid), ext)
    # Block ``k`` is the k-th run of ``prod(blocks)`` items of the stored chunk.
    per = math.prod(grid.blocks)
    for k in range(grid.nblocks):
        want = ext[grid.block_slices(k)].reshape(-1)
        np.testing.assert_array_equal(raw[k * per:(k + 1) * per], want)
    # Raw bytes work too and come back as items of ``itemsize``.
    as_bytes = deblock(raw.view(np.uint8), grid)
    np.testing.assert_array_equal(as_bytes.view(np.int32).reshape(grid.ext_chunks), ext)


# ------------------------------------------------------------------- examples

def test_grid_properties():
    g = NDGrid((10, 100), (4, 30), (2, 7), 4)  # the fixture nd_i4_2d_zstd_shuffle
    assert g.grid_shape == (3, 4) and g.nchunks == 12
    assert g.ext_chunks == (4, 35) and g.blocks_per_chunk == (2, 5) and g.nblocks == 10
    assert g.chunk_nbytes == 560 and g.block_nbytes == 56
    assert g.valid_shape((2, 3)) == (2, 10)
    assert g.resized((20, 5)).grid_shape == (5, 1)
    assert NDGrid((0, 5), (3, 5), (1, 5), 8).nchunks == 0
    g0 = NDGrid((), (), (), 8)
    assert g0.nchunks == 1 and g0.ext_chunks == ()
    okey = orthogonal_key((), ())
    (piece,) = plan(g0, okey)
    assert piece.nchunk == 0 and piece.blocks.tolist() == [0]


def test_mixed_key_example():
    arr = np.arange(6 * 7 * 8).reshape(6, 7, 8)
    g = NDGrid(arr.shape, (4, 3, 5), (2, 2, 3), arr.itemsize)
    key = ([5, 0, 5], None, slice(None, None, -3), -2)
    okey = orthogonal_key(key, arr.shape)
    assert okey.out_shape == (3, 1, 3) and okey.dropped == (2,) and okey.newaxes == (1,)
    got = read(store(arr, g), g, okey, arr.dtype)
    np.testing.assert_array_equal(got, arr[np.ix_([5, 0, 5], [6, 3, 0], [6])][:, None, :, 0])


def test_reading_one_block_decodes_one_block():
    g = NDGrid((100, 100), (50, 50), (10, 10), 8)
    (piece,) = plan(g, orthogonal_key((12, slice(31, 38)), g.shape))
    assert piece.nchunk == 0 and piece.blocks.tolist() == [1 * 5 + 3] and not piece.full
    pieces = list(plan(g, orthogonal_key((slice(50, 100), slice(None)), g.shape)))
    assert [p.nchunk for p in pieces] == [2, 3] and all(p.full for p in pieces)


@pytest.mark.parametrize(("args", "match"), [
    (((4, 4), (2,), (1,), 4), "same number of dimensions"),
    (((4,) * 65, (1,) * 65, (1,) * 65, 1), "at most 64"),
    (((4, -1), (2, 2), (1, 1), 4), "negative"),
    (((4, 4), (2, 0), (1, 1), 4), "chunk size 0 and block size 1"),
    (((4, 4), (2, 2), (1, -1), 4), "block size -1, both"),
    (((4, 4), (2, 2), (3, 1), 4), "larger than chunks"),
    (((4, 4), (2, 2), (1, 1), 0), "itemsize"),
    (((2**16, 2**16), (2**16, 2**16), (1, 1), 1), "exceed"),
])
def test_grid_validation(args, match):
    with pytest.raises(ValueError, match=match):
        NDGrid(*args)


def test_resized_checks_ndim():
    g = NDGrid((4, 4), (2, 2), (1, 1), 4)
    with pytest.raises(ValueError, match="resize"):
        g.resized((4,))
    with pytest.raises(ValueError, match="negative"):
        g.resized((4, -4))


def test_plan_rejects_foreign_key():
    g = NDGrid((4, 4), (2, 2), (1, 1), 4)
    with pytest.raises(ValueError, match="shape"):
        list(plan(g, orthogonal_key(0, (5, 4))))


def test_deblock_rejects_wrong_size():
    g = NDGrid((4, 4), (2, 2), (1, 1), 4)
    with pytest.raises(ValueError, match="items"):
        deblock(np.zeros(5, np.int32), g)
    with pytest.raises(ValueError, match="expected"):
        reblock(np.zeros((2, 3), np.int32), g)

