"""Chunk and block shapes: the defaults chosen from the dtype and the CPU's caches, and
what a new array gets from what its creator asked for.

See :func:`default_chunks_blocks` and :func:`default_blocks` for the rules and why,
:func:`calc_chunklen` for bcolz's runs of rows and :func:`choose_grid` for how
they combine.  The geometry itself is :class:`carray.chunks.grid.NDGrid`.
"""

from __future__ import annotations

import math
import operator
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from carray.chunks import geometry as geo
from carray.chunks.keys import _as_shape
from carray.core.dtypes import MAX_NBYTES
from carray.errors import ShapeError

__all__ = ["CacheSizes", "cpu_cache_sizes", "calc_chunklen", "choose_grid",
           "default_blocks", "default_chunks_blocks", "row_chunk_tail"]

#: numpy's own limit; file formats with a lower one (b2nd) check theirs.
MAX_DIM = 64


@dataclass(frozen=True)
class CacheSizes:
    l1d: int
    l2: int
    l3: int


_FALLBACK_CACHES = CacheSizes(32 * 2**10, 2**20, 8 * 2**20)
_SYS_CACHE = "/sys/devices/system/cpu/cpu0/cache"


def _parse_size(text: str) -> int:
    # sysfs writes "32K", "1024K", "8M"; be lenient about plain bytes and "G".
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    digits = text[:-1] if scale != 1 else text
    return int(digits) * scale


@lru_cache(maxsize=8)
def cpu_cache_sizes(root: str = _SYS_CACHE) -> CacheSizes:
    """L1 data, L2 and L3 sizes of CPU 0, read from sysfs.

    Any level that cannot be read (not Linux, containers hiding sysfs, CPUs
    without an L3) falls back to 32 KiB / 1 MiB / 8 MiB.
    """
    found: dict[int, int] = {}
    for d in sorted(Path(root).glob("index*")):  # a missing root globs to nothing
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            size = _parse_size((d / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and size > 0:
            found[level] = max(found.get(level, 0), size)
    fb = _FALLBACK_CACHES
    return CacheSizes(found.get(1, fb.l1d), found.get(2, fb.l2), found.get(3, fb.l3))


def _clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, x))


def _cubic(lengths: Sequence[int], budget: float) -> list[int]:
    """Per-axis sizes, each <= its length, with product about ``budget``, sides near equal.

    Water filling: axes are visited shortest first; each gets the n-th root of
    the budget still left (or its whole length if shorter), so what a short
    axis cannot use goes to the longer ones. Among equal lengths the last axis
    is visited last and absorbs the rounding, which keeps runs contiguous in C
    order.
    """
    n = len(lengths)
    sizes = [1] * n
    order = sorted(range(n), key=lambda ax: (lengths[ax], -ax))
    for done, ax in enumerate(order):
        side = budget ** (1.0 / (n - done))
        # A tiny epsilon so exact roots (e.g. 64 ** (1/3)) do not floor down.
        size = _clamp(int(side * (1 + 1e-9)), 1, lengths[ax])
        sizes[ax] = size
        budget = budget / size
    return sizes


def _targets(caches: CacheSizes | None) -> tuple[int, int]:
    """Bytes per block and per chunk (see :func:`default_chunks_blocks`)."""
    caches = caches or cpu_cache_sizes()
    block_target = _clamp(caches.l1d // 4, 4 * 2**10, 32 * 2**10)
    chunk_target = _clamp(caches.l3 // 4, 2 * 2**20, 8 * 2**20)
    return block_target, chunk_target


def default_blocks(chunks: Sequence[int], itemsize: int,
                   caches: CacheSizes | None = None) -> tuple[int, ...]:
    """The block shape for chunks of shape ``chunks``.

    * **Block bytes** target a quarter of the L1 data cache, clamped to 4 - 32
      KiB: a read decodes every block it touches whole, so small blocks keep the
      bytes decoded per item returned low, and a block, its compressed bytes and
      the shuffle scratch then stay in L1 while it is decoded.
    * **Frames: one row per block.**  When two or more axes after the first are
      longer than a cubic block's side, the first axis indexes whole frames
      (time steps, levels, images) and slices across it (``a[i]``) are the most
      common read: they then decode no other rows, while the other axes share
      the block near-cubically, so a slice orthogonal to any of them decodes the
      same few items per item returned.  The first axis takes whatever the
      others are too short to use.
    * **Otherwise near-cubic**, so rows and columns cost the same (matrices,
      images with a short channel axis last).
    * Each side is then made to tile the chunk: a divisor of the chunk side
      close below it, or else an even split (a side of 96 near 39 becomes 32).
    """
    chunks = _as_shape("chunks", chunks)
    if any(c <= 0 for c in chunks):
        raise ValueError(f"chunks {chunks} must be positive")
    block_target, _ = _targets(caches)
    budget = max(block_target // max(itemsize, 1), 1)
    blocks = _cubic(chunks, budget)
    side = max(blocks)
    if sum(1 for c in chunks[1:] if c > side) >= 2:
        rest = _cubic(chunks[1:], budget)
        first = _clamp(int(budget / math.prod(rest)), 1, chunks[0])
        blocks = [first, *rest]
    return tuple(_tile(c, b) for c, b in zip(chunks, blocks, strict=True))


def _tile(chunk: int, block: int) -> int:
    """A block side near ``block`` that tiles ``chunk``: a divisor within 3/4 of it if
    there is one, else ``chunk`` split evenly (less than one item of padding per block)."""
    for b in range(block, max(1, (3 * block) // 4) - 1, -1):
        if chunk % b == 0:
            return b
    return -(-chunk // -(-chunk // block))


_ROUND = 16


def default_chunks_blocks(shape: Sequence[int], itemsize: int,
                          caches: CacheSizes | None = None
                          ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Chunk and block shapes for an array of ``shape`` and ``itemsize``.

    * **Chunk bytes** target a quarter of L3 (shared between cores), clamped to
      2 - 8 MiB: big enough to compress well and to amortise a chunk's index
      entry, its I/O and the Python work per chunk a read does.
    * **Chunks are as cubic as the array allows**, so a slice along any axis
      touches about as many chunks; axes shorter than the cube side are taken
      whole and their unused share goes to the others.  Zero-length axes are
      sized as if unbounded, since they are likely to grow.  A side that does
      not span its axis is a multiple of 16 items, so blocks tile it exactly.
    * **Blocks** follow :func:`default_blocks`.

    Returns
    -------
    (chunks, blocks) : tuple of tuple of int
        Valid for :class:`NDGrid` with the same ``shape`` and ``itemsize``.
    """
    shape = _as_shape("shape", shape)
    itemsize = operator.index(itemsize)
    if itemsize <= 0:
        raise ValueError(f"itemsize must be positive, got {itemsize}")
    if itemsize > geo.MAX_CHUNK_NBYTES:
        raise ValueError(f"items of {itemsize} bytes do not fit in a Blosc2 chunk")
    if any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative length")
    if len(shape) > MAX_DIM:
        raise ValueError(f"{len(shape)} dimensions: arrays have at most {MAX_DIM}")
    _, chunk_target = _targets(caches)
    lengths = [s if s > 0 else sys.maxsize for s in shape]
    cubic = _cubic(lengths, max(chunk_target // itemsize, 1))
    # A side cut short of its axis is rounded down to a multiple of 16, so the
    # blocks tile it exactly (no padding inside the array).
    chunks = tuple(c if c == n or c < 2 * _ROUND else c // _ROUND * _ROUND
                   for c, n in zip(cubic, lengths, strict=True))
    return chunks, default_blocks(chunks, itemsize, caches)


# bcolz 1.x chunk size heuristic (docs/formats/bcolz-dir.md, "chunklen heuristic").
_MIN_EXPECTED_MB, _MAX_EXPECTED_MB = 1e-4, 1e4


def calc_chunklen(expectedlen: int, atomsize: int) -> int:
    """Rows per chunk for an array expected to grow to ``expectedlen`` rows.

    The same rule as bcolz 1.x: the chunk size grows with the expected data
    size, from 16 KiB for tiny arrays to 4 MiB above 10 GB.
    """
    atomsize = max(int(atomsize), 1)
    mb = max(int(expectedlen), 0) * atomsize / 2**20
    mb = min(max(mb, _MIN_EXPECTED_MB), _MAX_EXPECTED_MB)
    zone = int(math.log10(mb))  # truncates toward zero, as bcolz does
    chunksize = 4096 * int(2 ** (zone + 6))
    chunksize = max((chunksize // atomsize) * atomsize, atomsize)
    return chunksize // atomsize


def choose_grid(dtype: np.dtype, atomshape: tuple[int, ...], expected: int, *,
                chunklen: int | None = None, chunks: Sequence[int] | None = None,
                blocks: Sequence[int] | None = None, rows_only: bool = False,
                needs_blocks: bool = False) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The chunk and block shapes of a new array from what its creator asked for.

    ``chunklen`` chunks by runs of whole rows (bcolz); otherwise 1-d arrays (and
    ``rows_only`` layouts) get bcolz's chunk length for ``expected`` rows and
    N-d arrays :func:`default_chunks_blocks`.  Blocks default to
    :func:`default_blocks` unless chunks span whole rows (then None: Blosc's own
    byte blocks over C order), or the format ``needs_blocks``.
    """
    ndim = 1 + len(atomshape)
    itemsize = max(dtype.itemsize, 1)
    if chunklen is not None:
        if chunks is not None:
            raise ValueError("give chunklen or chunks, not both")
        if not isinstance(chunklen, (int, np.integer)) or isinstance(chunklen, bool) \
                or chunklen < 1:
            raise ValueError(f"chunklen must be a positive int, got {chunklen!r}")
        chunks = (int(chunklen), *row_chunk_tail(atomshape))
    elif chunks is None:
        if rows_only or ndim == 1:
            rowsize = itemsize * math.prod(atomshape)
            chunks = (calc_chunklen(expected, rowsize), *row_chunk_tail(atomshape))
        else:
            chunks, auto = default_chunks_blocks((expected, *atomshape), itemsize)
            blocks = auto if blocks is None else blocks
    else:
        chunks = tuple(chunks)
        if len(chunks) != ndim:
            raise ValueError(f"chunks {chunks} must have one size per axis ({ndim})")
    chunks = tuple(int(c) for c in chunks)
    row_like = chunks[1:] == row_chunk_tail(atomshape)
    if blocks is None and (needs_blocks or not (ndim == 1 or row_like)):
        blocks = default_blocks(chunks, itemsize)
    if blocks is not None:
        blocks = tuple(int(b) for b in blocks)
        if len(blocks) != ndim:
            raise ValueError(f"blocks {blocks} must have one size per axis ({ndim})")
    if rows_only and (blocks is not None or not row_like):
        raise ValueError("the bcolz layout chunks by whole rows only: give chunklen, "
                         "not chunks or blocks")
    return chunks, blocks


def row_chunk_tail(atomshape: Sequence[int]) -> tuple[int, ...]:
    """The trailing chunk shape of a row-chunked array (an empty axis still needs 1)."""
    return tuple(max(int(n), 1) for n in atomshape)


# -- sizes carray checks before allocating or writing anything --------------------------------

#: Most chunks an operation stores one by one to fill an array with its fill value, in
#: a layout that records every chunk (bcolz directories, Blosc1 superchunk files).
MAX_FILLED_CHUNKS = 2**18
#: Most chunks a reduction decodes one by one (past it, a ShapeError says so at once).
MAX_VISITED_CHUNKS = 2**24


def check_nbytes(shape: Sequence[int], itemsize: int, what: str = "an array") -> None:
    """Raise ShapeError when ``shape`` of ``itemsize``-byte items holds more bytes than a
    64-bit size counts (``2**63 - 1``)."""
    total = max(int(itemsize), 1)
    for n in shape:
        total *= int(n)
    if total > MAX_NBYTES:
        raise ShapeError(f"{what} of shape {tuple(int(n) for n in shape)} and {itemsize}-byte "
                         f"items would hold {total} bytes, more than 64-bit sizes count "
                         f"({MAX_NBYTES})")


def check_fill_count(count: int, where: str) -> None:
    """Raise ShapeError when filling would store ``count`` chunks one by one, past
    :data:`MAX_FILLED_CHUNKS`."""
    if count > MAX_FILLED_CHUNKS:
        raise ShapeError(f"{where} stores every chunk: filling {count} chunks one by one is "
                         f"refused (at most {MAX_FILLED_CHUNKS}); use larger chunks, or "
                         "carray's own layout, which records chunks of the fill value "
                         "without storing them")


def memory_bytes() -> int:
    """The machine's physical memory (a large number where it cannot be told)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 2**62


def check_memory(shape: Sequence[int], dtype: np.dtype, what: str = "a result") -> None:
    """Raise ShapeError (not numpy's MemoryError) when an array of ``shape`` alone would
    take more than the machine's memory."""
    nbytes = math.prod(int(n) for n in shape) * np.dtype(dtype).itemsize
    if nbytes > memory_bytes():
        raise ShapeError(f"{what} of shape {tuple(shape)} would take {nbytes} bytes, more "
                         f"than this machine's memory ({memory_bytes()} bytes); work on a "
                         "slice of it")


def result_array(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An empty array for a result of ``shape`` (:func:`check_memory` first)."""
    check_memory(shape, dtype)
    return np.empty(tuple(shape), dtype=dtype)
