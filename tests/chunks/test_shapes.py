"""Default chunk and block shapes: valid for any shape, sized from the caches."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from carray.chunks.grid import NDGrid
from carray.chunks.shapes import CacheSizes, cpu_cache_sizes, default_blocks, default_chunks_blocks
from carray.core.dtypes import MAX_NBYTES
from carray.errors import ShapeError

SHAPES = st.lists(st.integers(0, 3000), min_size=1, max_size=6).map(tuple) | st.lists(
    st.sampled_from([0, 1, 2, 3, 7, 10**4, 10**6, 10**9]), min_size=1, max_size=8).map(tuple)


@settings(max_examples=300, deadline=None)
@given(SHAPES, st.sampled_from([1, 2, 4, 8, 12, 16, 33, 100, 4096, 2**20]),
       st.sampled_from([None, CacheSizes(32 * 2**10, 2**20, 8 * 2**20),
                        CacheSizes(48 * 2**10, 2 * 2**20, 32 * 2**20),
                        CacheSizes(32 * 2**10, 256 * 2**10, 0)]))
def test_default_chunks_blocks_are_valid(shape, itemsize, caches):
    chunks, blocks = default_chunks_blocks(shape, itemsize, caches)
    if math.prod(shape) * itemsize > MAX_NBYTES:  # past 64-bit sizes: refused at once
        with pytest.raises(ShapeError, match="64-bit"):
            NDGrid(shape, chunks, blocks, itemsize)
        return
    grid = NDGrid(shape, chunks, blocks, itemsize)  # validates
    assert math.prod(chunks) * itemsize <= max(8 * 2**20, itemsize)
    assert grid.block_nbytes <= max(32 * 2**10 * 1.5, 2 * itemsize)
    # Never pointlessly small: a chunk holds the array or a few hundred KiB.
    nbytes = math.prod(shape) * itemsize
    if all(shape):
        assert grid.chunk_nbytes >= min(nbytes, 256 * 2**10) or grid.chunk_nbytes >= itemsize * 8
    # Whole blocks tile a chunk with less than one block of padding per axis.
    for c, b, e in zip(chunks, blocks, grid.ext_chunks, strict=True):
        assert e - c < b


def test_default_chunks_are_cubic_and_blocks_thin_on_frames():
    caches = CacheSizes(32 * 2**10, 2**20, 32 * 2**20)
    chunks, blocks = default_chunks_blocks((2000, 2000, 2000), 8, caches)
    assert max(chunks) <= 2 * min(chunks)
    # Frames: one row per block, the rest shared near-cubically.
    assert blocks[0] == 1 and abs(blocks[1] - blocks[2]) <= 2
    # A short axis is taken whole, the others share what it leaves.
    chunks, blocks = default_chunks_blocks((3, 50000, 50000), 4, caches)
    assert chunks[0] == 3
    assert abs(chunks[1] - chunks[2]) <= chunks[2] // 4
    # Matrices and images with a short channel axis get near-cubic blocks.
    for shape in [(20000, 20000), (4000, 4000, 3)]:
        chunks, blocks = default_chunks_blocks(shape, 8, caches)
        assert abs(blocks[0] - blocks[1]) <= 2
    # A small array is one chunk.
    assert default_chunks_blocks((10, 20), 8, caches)[0] == (10, 20)


def test_default_blocks_tile_given_chunks():
    caches = CacheSizes(48 * 2**10, 2**20, 32 * 2**20)
    assert default_blocks((96, 96, 96), 8, caches) == (1, 32, 32)
    assert default_blocks((100,), 8, caches) == (100,)


def test_cpu_cache_sizes_from_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate(
            [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
             (3, "Unified", "64M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert cpu_cache_sizes(str(tmp_path)) == CacheSizes(48 * 2**10, 2 * 2**20, 64 * 2**20)
    assert cpu_cache_sizes(str(tmp_path / "missing")) == CacheSizes(
        32 * 2**10, 2**20, 8 * 2**20)
    real = cpu_cache_sizes()
    assert real.l1d > 0 and real.l2 > 0 and real.l3 > 0
