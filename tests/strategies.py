"""Hypothesis strategies and references shared by the indexing tests.

``keys`` draws orthogonal keys (one entry per axis: int, slice with any step,
list, int array, 1-d mask; Ellipsis, newaxis, short forms) together with the
positions each axis must pick, and ``reference`` answers them the slow, obvious
way, one axis at a time, never through ``carray.chunks.keys``.  ``numpy_keys`` draws
keys for numpy's own advanced indexing (broadcast index arrays, N-d masks).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from carray.chunks.grid import NDGrid


@st.composite
def grids(draw, max_ndim=4, max_len=9):
    ndim = draw(st.integers(1, max_ndim))
    shape = tuple(draw(st.lists(st.integers(0, max_len), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, max(n, 1) + 2)) for n in shape)
    blocks = tuple(draw(st.integers(1, c)) for c in chunks)
    return NDGrid(shape, chunks, blocks, 4)


@st.composite
def axis_keys(draw, n: int):
    """One key entry for an axis of length ``n`` and the positions it must pick."""
    kinds = ["slice", "list", "array", "mask"] + (["int"] if n else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "int":
        i = draw(st.integers(-n, n - 1))
        return i, np.array([i % n]), True
    if kind == "slice":
        bound = st.none() | st.integers(-n - 3, n + 3)
        step = draw(st.none() | st.sampled_from([1, 2, 3, 5, -1, -2, -4]))
        sl = slice(draw(bound), draw(bound), step)
        return sl, np.arange(n)[sl], False
    if kind == "mask":
        mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        return mask, np.flatnonzero(mask), False
    idx = draw(st.lists(st.integers(-n, n - 1), max_size=6)) if n else []
    want = np.array([i % n for i in idx], dtype=np.intp)
    return (idx if kind == "list" else np.array(idx, dtype=np.int64)), want, False


@st.composite
def keys(draw, shape):
    """(key, per-axis positions, int axes)."""
    entries = [draw(axis_keys(n)) for n in shape]
    key = [e[0] for e in entries]
    wants = [e[1] for e in entries]
    ints = [ax for ax, e in enumerate(entries) if e[2]]
    full = [isinstance(k, slice) and k == slice(None) for k in key]
    style = draw(st.sampled_from(["plain", "ellipsis", "short"]))
    if style == "ellipsis":
        # Any run of full slices (even none) may become one Ellipsis.
        i = draw(st.integers(0, len(key)))
        run = 0
        while i + run < len(key) and full[i + run]:
            run += 1
        cut = draw(st.integers(0, run))
        key = key[:i] + [Ellipsis] + key[i + cut:]
    elif style == "short":
        # Trailing full slices may be left out.
        tail = 0
        while tail < len(key) and full[len(key) - 1 - tail]:
            tail += 1
        key = key[:len(key) - draw(st.integers(0, tail))]
    # Sprinkle newaxes anywhere.
    for _ in range(draw(st.integers(0, 2))):
        key.insert(draw(st.integers(0, len(key))), None)
    key = tuple(key)
    return key, wants, ints


def reference(arr: np.ndarray, wants, ints, key) -> np.ndarray:
    """Orthogonal indexing the slow, obvious way: one axis at a time."""
    res = arr
    for ax, w in enumerate(wants):
        res = np.take(res, np.asarray(w, dtype=np.intp), axis=ax)
    res = res.reshape(tuple(n for ax, n in enumerate(res.shape) if ax not in ints))
    # Walk the key to find where the newaxes land among the kept axes.
    nd_used = sum(1 for k in key if k is not None and k is not Ellipsis)
    pos, ax = 0, 0
    newaxes = []
    for k in key:
        if k is None:
            newaxes.append(pos)
            pos += 1
        elif k is Ellipsis:
            span = arr.ndim - nd_used
            pos += sum(1 for a in range(ax, ax + span) if a not in ints)
            ax += span
        else:
            pos += ax not in ints
            ax += 1
    for p in newaxes:
        res = np.expand_dims(res, p)
    return res


@st.composite
def numpy_keys(draw, shape):
    """A key numpy's advanced indexing accepts: index arrays that broadcast together
    (on any axes, maybe split by a slice), an N-d mask over leading axes, or plain
    basic entries."""
    ndim = len(shape)
    kind = draw(st.sampled_from(["arrays", "mask", "basic"]))
    if kind == "mask" and ndim:
        k = draw(st.integers(1, ndim))
        mask = draw(hnp.arrays(bool, shape[:k]))
        rest = [draw(_basic(n)) for n in shape[k:]]
        return (mask, *rest)
    if kind == "arrays" and ndim:
        axes = sorted(draw(st.sets(st.integers(0, ndim - 1), min_size=1, max_size=ndim)))
        bshape = draw(st.sampled_from([(), (3,), (2, 3), (1, 3)]))
        key = []
        for ax, n in enumerate(shape):
            if ax in axes and n:
                key.append(draw(hnp.arrays(np.int64, bshape, elements=st.integers(-n, n - 1))))
            else:
                key.append(draw(_basic(n)))
        return tuple(key)
    return tuple(draw(_basic(n)) for n in shape)


def _basic(n: int):
    bound = st.none() | st.integers(-n - 2, n + 2)
    steps = st.none() | st.sampled_from([1, 2, -1, -3])
    slices = st.builds(slice, bound, bound, steps)
    return slices | st.integers(-n, n - 1) if n else slices
