"""Helpers shared by the compute tests: arrays in memory or on disk, drawn by hypothesis."""

from __future__ import annotations

import contextlib
import tempfile

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import carray as ca

DTYPES = [np.float64, np.float32, np.int64, np.int32, np.int8, np.uint16, np.bool_]


@contextlib.contextmanager
def stored(values: np.ndarray, chunks: tuple[int, ...], disk: bool):
    """A carray holding ``values`` with ``chunks``, in memory or in a temporary directory."""
    if not disk:
        yield ca.carray(values, chunks=chunks)
        return
    with tempfile.TemporaryDirectory() as tmp:
        a = ca.carray(values, chunks=chunks, rootdir=f"{tmp}/a")
        a.flush()
        yield ca.open(f"{tmp}/a", mode="r")


def elements(dtype: np.dtype, nan: bool = False):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return st.floats(-1000, 1000, width=dtype.itemsize * 8, allow_nan=False) | (
            st.just(float("nan")) if nan else st.nothing())
    if dtype.kind == "b":
        return st.booleans()
    info = np.iinfo(dtype)
    return st.integers(max(info.min, -100), min(info.max, 100))


@st.composite
def chunked_arrays(draw, dtypes=DTYPES, max_ndim=3, max_len=7, nan=False, min_len=0):
    """(values, chunks) of a random small array."""
    ndim = draw(st.integers(1, max_ndim))
    shape = tuple(draw(st.lists(st.integers(min_len, max_len), min_size=ndim,
                                max_size=ndim)))
    chunks = tuple(draw(st.integers(1, max(n, 1) + 1)) for n in shape)
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    values = draw(hnp.arrays(dtype, shape, elements=elements(dtype, nan)))
    return values, chunks


@st.composite
def axes(draw, ndim: int, tuples: bool = True):
    """None, an int (maybe negative) or a tuple of distinct axes."""
    kinds = ["none", "int"] + (["tuple"] if tuples else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(ax - ndim if draw(st.booleans()) else ax for ax in chosen)


@st.composite
def masks(draw, shape: tuple[int, ...]):
    """A where= mask that broadcasts to ``shape`` (some axes of length 1)."""
    mshape = tuple(1 if draw(st.booleans()) else n for n in shape)
    return draw(hnp.arrays(np.bool_, mshape))
