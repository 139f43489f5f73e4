"""Chunks reduced and evaluated in stored order (block after block, padding included)
against numpy, on arrays whose blocks do not tile their chunks nor chunks their shape."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from compute_helpers import axes, elements
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import carray as ca
from carray.chunks import geometry as geo
from carray.codecs.threads import get_nthreads, set_nthreads
from carray.compute.reduce import numpy_reduce
from carray.compute.stored import StoredChunk, padding_identity, stored_plan

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
DTYPES = [np.float64, np.float32, np.int64, np.int16, np.uint8, np.bool_]
OPS = ["sum", "prod", "min", "max", "any", "all", "count_nonzero", "mean", "var", "std"]


@st.composite
def blocked_arrays(draw, dtypes=DTYPES, max_ndim=3):
    """(values, chunks, blocks): blocks that may not divide the chunks, chunks that may
    not divide the shape, so chunks have padding inside and at the array's edges."""
    ndim = draw(st.integers(1, max_ndim))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, n + 2)) for n in shape)
    blocks = tuple(draw(st.integers(1, c)) for c in chunks)
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    values = draw(hnp.arrays(dtype, shape, elements=elements(dtype)))
    return values, chunks, blocks


def make(values, chunks, blocks, tmp_path=None):
    if tmp_path is None:
        return ca.carray(values, chunks=chunks, blocks=blocks)
    ca.carray(values, chunks=chunks, blocks=blocks, rootdir=tmp_path, mode="w").flush()
    return ca.open(tmp_path, mode="r")


def check_close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        tol = 1e-3 if want.dtype.itemsize <= 4 else 1e-9
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


@SETTINGS
@given(arr=blocked_arrays(), op=st.sampled_from(OPS), data=st.data())
def test_reductions_in_stored_order_match_numpy(arr, op, data):
    values, chunks, blocks = arr
    a = make(values, chunks, blocks)
    assert stored_plan(a) is not None
    axis = data.draw(axes(values.ndim))
    keepdims = data.draw(st.booleans())
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            want = numpy_reduce(op, values, axis, keepdims=keepdims)
        except TypeError:
            return
        got = getattr(a, op)(axis, keepdims=keepdims)
    check_close(got, want)


@SETTINGS
@given(arr=blocked_arrays(dtypes=[np.float64, np.float32, np.int32]), data=st.data(),
       disk=st.booleans())
def test_expressions_of_two_arrays_in_stored_order(arr, data, disk, tmp_path_factory):
    values, chunks, blocks = arr
    other = data.draw(hnp.arrays(values.dtype, values.shape,
                                 elements=elements(values.dtype)))
    root = tmp_path_factory.mktemp("s") if disk else None
    a = make(values, chunks, blocks, None if root is None else root / "a")
    b = make(other, chunks, blocks, None if root is None else root / "b")
    x, y = values, other
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = [(a * b + 1, x * y + 1), ((a > 0) & (b < 1), (x > 0) & (y < 1)),
                 (a * a - b, x * x - y), (np.where(a > b, a, b * 2), np.where(x > y, x, y * 2)),
                 (-(a + b) * (a - 1), -(x + y) * (x - 1))]
        axis = data.draw(axes(values.ndim))
        for lazy, want in cases:
            assert stored_plan(lazy) is not None
            check_close(lazy.sum(axis=axis), want.sum(axis=axis))
            check_close(lazy.max(axis=axis), want.max(axis=axis))
            check_close(lazy.mean(axis=axis), want.mean(axis=axis))
            check_close(np.count_nonzero(lazy, axis=axis), np.count_nonzero(want, axis=axis))


@SETTINGS
@given(arr=blocked_arrays(dtypes=[np.float64, np.int16]), data=st.data())
def test_stored_chunk_padding_and_c_order(arr, data):
    """A chunk's stored values with garbage padding: filling the padding with an op's
    identity and reducing the block view gives numpy's result on the valid part."""
    values, chunks, blocks = arr
    ext = geo.ext_chunkshape(chunks, blocks)
    valid = tuple(min(c, n) for c, n in zip(chunks, values.shape, strict=True))
    chunk = np.full(ext, 77, dtype=values.dtype)  # padding that would change any result
    part = values[tuple(slice(0, v) for v in valid)]
    chunk[tuple(slice(0, v) for v in valid)] = part
    flat = geo.to_blocked(chunk, blocks).reshape(-1).copy()
    sc = StoredChunk(flat, tuple(blocks), tuple(ext), valid)
    ax = data.draw(axes(values.ndim))
    ax = tuple(range(values.ndim)) if ax is None else \
        tuple(sorted({a % values.ndim for a in ((ax,) if isinstance(ax, int) else ax)}))
    op = data.draw(st.sampled_from(["sum", "min", "max"]))
    sc.fill_padding(padding_identity(op, values.dtype))
    reduced = getattr(np, op)(sc.view(), axis=sc.view_axes(ax), keepdims=True)
    # Sums add in another order than numpy's over C order: equal up to rounding.
    np.testing.assert_allclose(sc.to_c(reduced, ax),
                               getattr(np, op)(part, axis=ax, keepdims=True), rtol=1e-12)
    assert sc.count(ax) == int(np.prod([valid[i] for i in ax]))


def test_float_sums_are_identical_whatever_the_thread_count(tmp_path):
    rng = np.random.default_rng(5)
    x, y = rng.normal(0, 1e3, (70, 66, 50)), rng.normal(0, 1, (70, 66, 50))
    a = make(x, (32, 32, 32), (8, 16, 32), tmp_path / "a")
    b = make(y, (32, 32, 32), (8, 16, 32), tmp_path / "b")
    old = get_nthreads()
    results = []
    try:
        for n in (1, 2, 3):
            set_nthreads(n)
            results.append([a.sum(), (a * b + 1).sum(), a.std(), a.sum(axis=1),
                            ((a > 0) & (b < 0)).sum(), a.max(axis=(0, 2))])
    finally:
        set_nthreads(old)
    for other in results[1:]:
        for got, first in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(got, first)  # bit for bit
    np.testing.assert_allclose(results[0][1], (x * y + 1).sum(), rtol=1e-12)
    np.testing.assert_allclose(results[0][2], x.std(), rtol=1e-12)


def test_operands_that_cannot_be_read_in_stored_order_fall_back():
    x = np.arange(60.).reshape(5, 12)
    a = ca.carray(x, chunks=(2, 5), blocks=(1, 2))
    f = ca.carray(x, chunks=(2, 5), order="F")
    other_blocks = ca.carray(x, chunks=(2, 5), blocks=(2, 5))
    for expr, want in [(a + np.arange(12.), x + np.arange(12.)), (a + f, x + x),
                       (a * other_blocks, x * x), (a + 1, x + 1)]:
        np.testing.assert_allclose(expr.sum(axis=0), want.sum(axis=0))
    assert stored_plan(a + np.arange(12.)) is None
    assert stored_plan(a + f) is None
    assert stored_plan(a * other_blocks) is None
    assert stored_plan(a + np.float64(2)) is not None
    assert stored_plan(ca.carray(np.array(["x", "y"]))) is None


@pytest.mark.parametrize("disk", [False, True])
def test_chunks_held_in_the_tail_are_read_the_general_way(tmp_path, disk):
    x = np.arange(7 * 6 * 5, dtype=np.float64).reshape(7, 6, 5)
    kw = {"rootdir": tmp_path / "t", "mode": "w"} if disk else {}
    a = ca.carray(x[:4], chunks=(3, 4, 5), blocks=(2, 2, 5), **kw)
    a.append(x[4:])  # rows past the last whole run wait decoded in the tail
    for op in ("sum", "max", "std"):
        np.testing.assert_allclose(getattr(a, op)(), getattr(x, op)())
        np.testing.assert_allclose(getattr(a, op)(axis=2), getattr(x, op)(axis=2))
    np.testing.assert_allclose((a * a).sum(axis=0), (x * x).sum(axis=0))


def test_plan_gives_one_chunk_in_stored_order():
    x = np.arange(24.).reshape(4, 6)
    a = ca.carray(x, chunks=(2, 3), blocks=(1, 3))
    plan = stored_plan(a * a + a)
    chunk = plan.chunk((1, 1))
    assert chunk is not None and chunk.valid == (2, 3)
    np.testing.assert_array_equal(np.sort(chunk.flat), np.sort((x * x + x)[2:4, 3:6].ravel()))
