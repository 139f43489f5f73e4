"""Keys: what a numpy-style index selects, normalised before any chunk is touched.

Three readings of a key, one per kind of container access:

* :func:`orthogonal_key` -- ``a[key]`` and ``a.oindex[key]``: every axis is
  indexed on its own (``np.ix_`` semantics), so ``a[[0, 2], [1, 3]]`` is a 2x2
  block.  With at most one index array this is numpy's own meaning.
* :func:`coordinate_key` -- ``a.vindex[key]`` and keys holding an N-d boolean
  mask: numpy's advanced indexing exactly (arrays broadcast together and pick
  single items), resolved to the coordinates of every selected item.
* :func:`select` -- rows of one-dimensional row containers (table columns,
  string columns): a row number, a range or row numbers, plus what numpy
  applies to those rows afterwards.

Nothing here knows about chunks; :mod:`carray.chunks.grid` maps the result onto them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.errors import IndexingError

#: What one axis of a selection picks: an ascending or descending ``range``
#: (slices and ints, kept lazy so big slices cost nothing) or an intp array.
AxisIndex = range | np.ndarray
#: A numpy-style index: int, slice, Ellipsis, None, array-like, or a tuple of them.
Key = Any


def _as_shape(name: str, value: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, got {value!r}") from None


def _is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


@dataclass(frozen=True)
class OrthoKey:
    """A key normalised for orthogonal indexing of an array of ``shape``.

    Attributes
    ----------
    shape : tuple of int
        Shape of the indexed array.
    axes : tuple of (range or ndarray)
        One entry per array axis: the in-bounds positions it selects, in
        output order. Slices and ints are ``range`` objects (``start``,
        ``stop``, ``step``; the step may be negative); arrays and masks are
        1-d intp arrays (any order, repeats allowed).
    dropped : tuple of int
        Array axes indexed by an int; they have length 1 in ``sel_shape`` and
        vanish from ``out_shape``.
    newaxes : tuple of int
        Positions in ``out_shape`` of the length-1 axes ``None`` adds.
    out_shape : tuple of int
        Shape of the result.
    """

    shape: tuple[int, ...]
    axes: tuple[AxisIndex, ...]
    dropped: tuple[int, ...]
    newaxes: tuple[int, ...]
    out_shape: tuple[int, ...]

    @property
    def sel_shape(self) -> tuple[int, ...]:
        """Shape of the selection with one axis per array axis (what pieces fill)."""
        return tuple(len(a) for a in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.sel_shape)

    def finish(self, out: np.ndarray) -> np.ndarray:
        """Turn an array of ``sel_shape`` into the result of ``out_shape``.

        Dropping int axes and adding new ones only removes or inserts length-1
        axes, so a reshape does it without moving data.
        """
        return out.reshape(self.out_shape)

    def expand_values(self, values: Any) -> np.ndarray:
        """Broadcast values for an assignment to ``out_shape``, then view as ``sel_shape``."""
        values = np.asarray(values)
        return np.broadcast_to(values, self.out_shape).reshape(self.sel_shape)


def _axis_index(k: Key, n: int, ax: int) -> AxisIndex:
    """What one key entry selects on an axis of length ``n``."""
    if isinstance(k, slice):
        return range(n)[k]
    arr = np.asarray(k)
    if arr.size == 0 and arr.dtype.kind in "fO" and not isinstance(k, np.ndarray):
        arr = arr.astype(np.intp)  # a list [] comes out as float64
    if arr.dtype == bool:
        if arr.ndim == 0:
            raise TypeError("boolean scalar indices are not supported by orthogonal indexing")
        if arr.ndim > 1:
            raise TypeError(f"a {arr.ndim}-d boolean mask is not supported by orthogonal "
                            "indexing; use one 1-d mask per axis")
        if arr.shape[0] != n:
            raise IndexingError(f"boolean index did not match indexed array along axis {ax}; "
                             f"size of axis is {n} but size of corresponding boolean axis "
                             f"is {arr.shape[0]}")
        return np.flatnonzero(arr).astype(np.intp, copy=False)
    if not np.issubdtype(arr.dtype, np.integer):
        raise IndexingError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis "
                         "(`None`) and integer or boolean arrays are valid indices")
    if arr.ndim != 1:
        raise TypeError(f"orthogonal indexing takes 1-d index arrays, got a {arr.ndim}-d one "
                        f"for axis {ax}")
    return in_bounds(arr.astype(np.intp, copy=False), n, ax)


def in_bounds(idx: np.ndarray, n: int, ax: int) -> np.ndarray:
    """Index array ``idx`` into an axis of length ``n``, negatives wrapped; IndexingError
    (numpy's wording) for any out of range."""
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexingError(f"index {bad} is out of bounds for axis {ax} with size {n}")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
    return idx


def orthogonal_key(key: Key, shape: Sequence[int]) -> OrthoKey:
    """Normalise a numpy-style ``key`` for orthogonal indexing of ``shape``.

    Accepts ints (negative too), slices with any step, ``...``, ``None``, and
    per axis a 1-d integer array/list (any order, repeats) or a 1-d boolean
    mask of the axis's length.

    Raises
    ------
    IndexingError
        An IndexError: out-of-bounds ints or array entries, a mask of the wrong length, too
        many indices, more than one ``...``, or an entry of an invalid type.
    TypeError
        Numpy keys orthogonal indexing cannot express: masks of ndim > 1,
        index arrays of ndim != 1, boolean scalars.
    """
    shape = _as_shape("shape", shape)
    ndim = len(shape)
    if not isinstance(key, tuple):
        key = (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')")
    for k in key:
        # Checked before counting axes: such a mask would consume several.
        if isinstance(k, np.ndarray) and k.dtype == bool and k.ndim > 1:
            raise TypeError(f"a {k.ndim}-d boolean mask is not supported by orthogonal "
                            "indexing; use one 1-d mask per axis")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexingError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{used} were indexed")
    # Identity, not ``in``: ``==`` against an array key is elementwise.
    i = next((i for i, k in enumerate(key) if k is Ellipsis), None)
    if i is not None:
        key = key[:i] + (slice(None),) * (ndim - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (ndim - used)

    axes: list[AxisIndex] = []
    dropped: list[int] = []
    newaxes: list[int] = []
    out_shape: list[int] = []
    for k in key:
        if k is None:
            newaxes.append(len(out_shape))
            out_shape.append(1)
            continue
        ax = len(axes)
        n = shape[ax]
        if _is_int(k) or (isinstance(k, np.ndarray) and k.ndim == 0
                          and np.issubdtype(k.dtype, np.integer)):
            i = int(k)
            if not -n <= i < n:
                raise IndexingError(f"index {i} is out of bounds for axis {ax} with size {n}")
            i %= n
            axes.append(range(i, i + 1))
            dropped.append(ax)
            continue
        sel = _axis_index(k, n, ax)
        axes.append(sel)
        out_shape.append(len(sel))
    return OrthoKey(shape, tuple(axes), tuple(dropped), tuple(newaxes), tuple(out_shape))



def needs_coordinates(key: Key) -> bool:
    """Whether ``key`` holds an N-d boolean mask, which only numpy's meaning can express."""
    entries = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, np.ndarray) and k.dtype == bool and k.ndim > 1 for k in entries)


@dataclass(frozen=True)
class CoordKey:
    """Every item numpy's advanced indexing selects, as one coordinate array per axis.

    ``coords[ax]`` has the result's shape (``out_shape``) and holds each selected
    item's position along axis ``ax``.
    """

    shape: tuple[int, ...]
    coords: tuple[np.ndarray, ...]
    out_shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.out_shape)


def coordinate_key(key: Key, shape: Sequence[int]) -> CoordKey:
    """Resolve ``key`` with numpy's own indexing rules on an array of ``shape``.

    Each axis' positions are read through a zero-stride broadcast view of
    ``arange``, so numpy itself applies the key (and raises its own errors) while
    the work and memory stay proportional to the result, not to the array.
    """
    shape = _as_shape("shape", shape)
    if isinstance(key, list):
        key = np.asarray(key)
    coords = []
    for ax, n in enumerate(shape):
        along = np.arange(n, dtype=np.intp).reshape((1,) * ax + (n,) + (1,) * (len(shape) - ax - 1))
        picked = np.broadcast_to(along, shape)[key]
        coords.append(np.array(picked, dtype=np.intp))  # keeps 0-d results 0-d
    if not coords:  # a 0-d array: numpy still validates the key
        out_shape = np.empty((), np.int8)[key].shape
        return CoordKey(shape, (), out_shape)
    return CoordKey(shape, tuple(coords), coords[0].shape)


# -- rows of one-dimensional row containers ---------------------------------------------------

@dataclass(frozen=True)
class Selection:
    """A key split into the rows it picks and what to apply to those rows.

    ``rows`` is an int (one row, axis dropped), a ``range`` with positive or
    negative step, or an int64 array of row numbers.  ``post`` is ``None`` when
    the rows are the answer, else a key to index the rows' array with (its first
    entry addresses the selected rows in their selection order).
    """

    rows: int | range | np.ndarray
    post: tuple[Any, ...] | None

    @property
    def nrows(self) -> int:
        if isinstance(self.rows, int):
            return 1
        return len(self.rows)


def _expand(key: Key, ndim: int) -> tuple[Any, ...]:
    """Make ``key`` a tuple with Ellipsis expanded; None entries kept."""
    entries: tuple[Any, ...] = key if isinstance(key, tuple) else (key,)
    key = entries
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')")
    consumed = sum(
        (np.ndim(k) if (isinstance(k, np.ndarray) and k.dtype == bool) else 1)
        for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexingError(
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were "
            "indexed")
    if n_ellipsis:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        entries = key[:i] + (slice(None),) * (ndim - consumed) + key[i + 1:]
    return entries


def _as_index_array(k: Key) -> np.ndarray | None:
    """An array key (list, ndarray, array-like with __array__), or None for scalars/slices."""
    if isinstance(k, (slice, type(None))) or k is Ellipsis or _is_int(k):
        return None
    if isinstance(k, (bool, np.bool_)):
        return np.asarray(k)
    arr = np.asarray(k)
    if arr.size == 0 and (arr.dtype == object or not isinstance(k, np.ndarray)):
        arr = arr.astype(np.intp)  # a list [] comes out as float64
    return arr


def select(key: Key, shape: tuple[int, ...]) -> Selection:
    """Split a numpy-style key on an array of ``shape`` into rows and remainder.

    Raises
    ------
    IndexingError
        An IndexError: out-of-bounds rows, wrong mask lengths, or malformed keys, with
        numpy's wording.
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
            raise IndexingError(f"index {i} is out of bounds for axis 0 with size {nrows}")
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
        raise IndexingError(f"invalid index {k0!r}")
    if arr.dtype == bool:
        if arr.ndim == 0:
            # a[True] / a[False]: numpy adds an axis of length 1 or 0.
            return Selection(range(nrows), key[:pos] + (arr,) + after)
        if arr.shape[0] != nrows:
            raise IndexingError(
                f"boolean index did not match indexed array along axis 0; size of axis is "
                f"{nrows} but size of corresponding boolean axis is {arr.shape[0]}")
        if arr.ndim > 1:
            # A mask spanning several axes: pick the rows any of it touches, then apply it.
            touched = np.flatnonzero(arr.reshape(nrows, -1).any(axis=1))
            sub = arr[touched]
            return Selection(touched.astype(np.int64), before + (sub,) + after)
        picked = np.flatnonzero(arr).astype(np.int64)
        if trivial_rest:
            return Selection(picked, None)
        first = np.arange(len(picked)) if advanced_rest else slice(None)
        return Selection(picked, before + (first,) + after)
    if not np.issubdtype(arr.dtype, np.integer):
        raise IndexingError(
            "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer "
            "or boolean arrays are valid indices")
    flat = in_bounds(arr.reshape(-1).astype(np.int64, copy=False), nrows, 0)
    if arr.ndim == 1 and trivial_rest:
        return Selection(flat, None)
    # Read each distinct row once, then let numpy apply the original semantics.
    uniq, inverse = np.unique(flat, return_inverse=True)
    return Selection(uniq, before + (inverse.reshape(arr.shape),) + after)
