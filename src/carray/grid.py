"""The chunk grid: every read and write is a selection mapped onto it.

An array is chunked along its first axis into chunks of ``chunklen`` rows; a
row is one item of the trailing shape.  A numpy-style key splits into the rows
it selects (an int, a positive-step range, or an array of row numbers) and a
remainder applied to those rows afterwards.  Keeping that split here means
``a[3]``, ``a[::-7]``, ``a[mask]``, ``a[:, 5, 2:9]`` and ``a[[4, 1], 0]`` all go
through the same few lines, on reads and on writes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

# bcolz 1.x chunk size heuristic (specs/bcolz.md section 8).
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


@dataclass(frozen=True)
class Span:
    """The part of one chunk a positive-step row range touches."""

    nchunk: int
    start: int   # first row inside the chunk
    stop: int    # one past the last row inside the chunk (start + (count-1)*step + 1)
    step: int
    out_start: int  # position of these rows in the selection's output
    count: int


@dataclass(frozen=True)
class RowGrid:
    """Rows ``[i*chunklen, (i+1)*chunklen)`` live in chunk ``i``."""

    chunklen: int

    def nchunks(self, nrows: int) -> int:
        return -(-nrows // self.chunklen)

    def spans(self, start: int, stop: int, step: int = 1) -> Iterator[Span]:
        """Split ``range(start, stop, step)`` (step > 0) into per-chunk spans."""
        if step <= 0:
            raise ValueError("spans needs a positive step")
        n = len(range(start, stop, step))
        if n == 0:
            return
        last = start + (n - 1) * step
        row, out = start, 0
        cl = self.chunklen
        while row <= last:
            nchunk = row // cl
            chunk_end = min((nchunk + 1) * cl, last + 1)
            count = (chunk_end - row - 1) // step + 1
            local = row - nchunk * cl
            yield Span(nchunk, local, local + (count - 1) * step + 1, step, out, count)
            out += count
            row += count * step

    def groups(self, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Group row numbers by chunk: ``(nchunk, rows inside the chunk, output positions)``.

        ``rows`` may be in any order and hold repeats; positions keep that order.
        """
        if rows.size == 0:
            return
        order = np.argsort(rows, kind="stable")
        sorted_rows = rows[order]
        chunk_ids = sorted_rows // self.chunklen
        bounds = np.flatnonzero(np.diff(chunk_ids)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(sorted_rows)], strict=True):
            nchunk = int(chunk_ids[lo])
            yield nchunk, sorted_rows[lo:hi] - nchunk * self.chunklen, order[lo:hi]


@dataclass(frozen=True)
class Selection:
    """A key split into the rows it picks and what to apply to those rows.

    ``rows`` is an int (one row, axis dropped), a ``range`` with positive or
    negative step, or an int64 array of row numbers.  ``post`` is ``None`` when
    the rows are the answer, else a key to index the rows' array with (its first
    entry addresses the selected rows in their selection order).
    """

    rows: int | range | np.ndarray
    post: tuple | None

    @property
    def nrows(self) -> int:
        if isinstance(self.rows, int):
            return 1
        return len(self.rows)


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _expand(key, ndim: int) -> tuple:
    """Make ``key`` a tuple with Ellipsis expanded; None entries kept."""
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(
        (np.ndim(k) if (isinstance(k, np.ndarray) and k.dtype == bool) else 1)
        for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were "
            "indexed")
    if n_ellipsis:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - consumed) + key[i + 1:]
    return key


def _as_index_array(k) -> np.ndarray | None:
    """An array key (list, ndarray, array-like with __array__), or None for scalars/slices."""
    if isinstance(k, (slice, type(None))) or k is Ellipsis or _is_int(k):
        return None
    if isinstance(k, (bool, np.bool_)):
        return np.asarray(k)
    arr = np.asarray(k)
    if arr.dtype == object and arr.size == 0:
        arr = arr.astype(np.intp)
    return arr


def select(key, shape: tuple[int, ...]) -> Selection:
    """Split a numpy-style key on an array of ``shape`` into rows and remainder.

    Raises
    ------
    IndexError
        Out-of-bounds rows, wrong mask lengths, or malformed keys, with numpy's wording.
    """
    ndim = len(shape)
    nrows = shape[0]
    key = _expand(key, ndim)
    # The first entry that is not None addresses axis 0.
    pos = next((i for i, k in enumerate(key) if k is not None), None)
    if pos is None:  # only newaxis entries: every row, then add the axes
        return Selection(range(nrows), key + (Ellipsis,))
    k0 = key[pos]
    before, after = key[:pos], key[pos + 1:]
    trivial_rest = not before and all(
        isinstance(k, slice) and k == slice(None) for k in after)
    # numpy broadcasts array indices with each other and with the ints beside them,
    # so with any in the remainder, rows picked by an array are addressed by position.
    advanced_rest = any(_is_int(k) or _as_index_array(k) is not None for k in after)

    if _is_int(k0):
        i = int(k0)
        if not -nrows <= i < nrows:
            raise IndexError(f"index {i} is out of bounds for axis 0 with size {nrows}")
        i %= nrows
        if trivial_rest:
            return Selection(i, None)
        # Keep the row axis (index 0 of a one-row range): numpy then places any
        # broadcast dimensions exactly as it would, and writes get an array.
        return Selection(range(i, i + 1), before + (0,) + after)

    if isinstance(k0, slice):
        rows = range(nrows)[k0]
        post = None if trivial_rest else before + (slice(None),) + after
        return Selection(rows, post)

    arr = _as_index_array(k0)
    if arr is None:
        raise IndexError(f"invalid index {k0!r}")
    if arr.dtype == bool:
        if arr.ndim == 0:
            # a[True] / a[False]: numpy adds an axis of length 1 or 0.
            return Selection(range(nrows), key[:pos] + (arr,) + after)
        if arr.shape[0] != nrows:
            raise IndexError(
                f"boolean index did not match indexed array along axis 0; size of axis is "
                f"{nrows} but size of corresponding boolean axis is {arr.shape[0]}")
        if arr.ndim > 1:
            # A mask spanning several axes: pick the rows any of it touches, then apply it.
            touched = np.flatnonzero(arr.reshape(nrows, -1).any(axis=1))
            sub = arr[touched]
            return Selection(touched.astype(np.int64), before + (sub,) + after)
        rows = np.flatnonzero(arr).astype(np.int64)
        if trivial_rest:
            return Selection(rows, None)
        first = np.arange(len(rows)) if advanced_rest else slice(None)
        return Selection(rows, before + (first,) + after)
    if not np.issubdtype(arr.dtype, np.integer):
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer "
            "or boolean arrays are valid indices")
    flat = arr.reshape(-1).astype(np.int64, copy=False)
    if flat.size:
        lo, hi = int(flat.min()), int(flat.max())
        if lo < -nrows or hi >= nrows:
            bad = lo if lo < -nrows else hi
            raise IndexError(f"index {bad} is out of bounds for axis 0 with size {nrows}")
        if lo < 0:
            flat = np.where(flat < 0, flat + nrows, flat)
    if arr.ndim == 1 and trivial_rest:
        return Selection(flat, None)
    # Read each distinct row once, then let numpy apply the original semantics.
    uniq, inverse = np.unique(flat, return_inverse=True)
    return Selection(uniq, before + (inverse.reshape(arr.shape),) + after)
