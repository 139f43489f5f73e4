"""Every reduction, on every axis combination, against numpy, in memory and on disk."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from compute_helpers import axes, chunked_arrays, masks, stored
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.codecs.threads import get_nthreads, set_nthreads
from carray.compute.reduce import SIGNATURES, numpy_reduce
from carray.errors import BroadcastError, UnsupportedDTypeError

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def check_same(got, want, dtype) -> None:
    """Same shape and dtype; floats close (sums are combined in another order), the rest
    exact."""
    got_arr, want_arr = np.asarray(got), np.asarray(want)
    assert got_arr.shape == want_arr.shape
    assert got_arr.dtype == want_arr.dtype, (got_arr.dtype, want_arr.dtype)
    assert np.ndim(got) == np.ndim(want)
    if want_arr.dtype.kind in "fc":
        rtol = 1e-2 if want_arr.dtype.itemsize <= 4 or np.dtype(dtype).itemsize <= 4 else 1e-9
        np.testing.assert_allclose(got_arr, want_arr, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got_arr, want_arr)


def compare(op: str, values: np.ndarray, a, axis, **kw) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = numpy_reduce(op, values, axis, **kw)
        except Exception as exc:  # noqa: BLE001 - ours must fail the same way
            builtin = next(c for c in type(exc).__mro__ if c.__module__ == "builtins")
            with pytest.raises(builtin):
                getattr(a, op)(axis, **kw) if op != "count_nonzero" else \
                    a.count_nonzero(axis, **kw)
            return
        got = getattr(a, op)(axis, **kw)
        via_numpy = numpy_reduce(op, a, axis, **kw)  # through __array_function__
    check_same(got, want, values.dtype)
    check_same(via_numpy, want, values.dtype)


@SETTINGS
@given(data=st.data(), arr=chunked_arrays(), disk=st.booleans(),
       op=st.sampled_from(sorted(SIGNATURES)))
def test_reductions_match_numpy(data, arr, disk, op):
    values, chunks = arr
    ndim = values.ndim
    tuples = op not in ("argmin", "argmax")
    axis = data.draw(axes(ndim, tuples))
    kw = {"keepdims": data.draw(st.booleans())}
    sig = SIGNATURES[op]
    if "dtype" in sig and data.draw(st.booleans()):
        # mean/var/std in an integer dtype: numpy truncates the mean; ours stays in float64
        choices = [np.float64, np.float32] if op in ("mean", "var", "std") else \
            [np.float64, np.int64, np.float32]
        kw["dtype"] = data.draw(st.sampled_from(choices))
    if "where" in sig and data.draw(st.booleans()):
        kw["where"] = data.draw(masks(values.shape))
        if op in ("min", "max"):
            kw["initial"] = data.draw(st.integers(-5, 5))
    if "ddof" in sig:
        kw["ddof"] = data.draw(st.integers(0, 2))
    if op in ("sum", "prod") and data.draw(st.booleans()):
        kw["initial"] = data.draw(st.integers(-3, 3))
    with stored(values, chunks, disk) as a:
        compare(op, values, a, axis, **kw)


@SETTINGS
@given(arr=chunked_arrays(dtypes=[np.float64, np.float32], nan=True, min_len=1),
       op=st.sampled_from(["min", "max", "argmin", "argmax", "sum", "any"]), data=st.data())
def test_nan_handling_matches_numpy(arr, op, data):
    values, chunks = arr
    axis = data.draw(axes(values.ndim, tuples=op not in ("argmin", "argmax")))
    compare(op, values, ca.carray(values, chunks=chunks), axis)


@SETTINGS
@given(arr=chunked_arrays(dtypes=[np.float64, np.int32, np.bool_]), data=st.data())
def test_where_given_as_carray_or_expression(arr, data):
    values, chunks = arr
    mask = data.draw(masks(values.shape))
    a = ca.carray(values, chunks=chunks)
    m = ca.carray(np.ascontiguousarray(np.broadcast_to(mask, values.shape)), chunks=chunks)
    check_same(a.sum(where=m), np.sum(values, where=mask), values.dtype)
    check_same(a.max(where=m, initial=-1, axis=-1), np.max(values, where=mask, initial=-1,
                                                           axis=-1), values.dtype)
    with np.errstate(all="ignore"):
        check_same(np.mean(a, where=a > 0, axis=0), np.mean(values, where=values > 0, axis=0),
                   values.dtype)


def test_float_sum_is_pairwise_accurate_and_thread_independent():
    rng = np.random.default_rng(1)
    values = rng.normal(1e6, 1.0, 2_000_000)
    a = ca.carray(values, chunks=(40_000,))
    exact = float(np.sum(values.astype(np.longdouble)))
    old = get_nthreads()
    try:
        set_nthreads(1)
        one = a.sum()
        set_nthreads(2)
        two = a.sum()
    finally:
        set_nthreads(old)
    assert one == two  # bit for bit
    assert abs(one - exact) <= abs(np.sum(values) - exact) + 1e-6 * abs(exact) * 1e-6


def test_axis_sum_of_3d_array_on_disk(tmp_path):
    values = np.random.default_rng(2).random((30, 20, 12))
    a = ca.carray(values, chunks=(7, 6, 5), rootdir=tmp_path / "a")
    for axis in (0, 1, 2, (0, 2), None):
        np.testing.assert_allclose(a.sum(axis=axis), values.sum(axis=axis))
    np.testing.assert_allclose(a.std(axis=1, ddof=1), values.std(axis=1, ddof=1))
    assert a.argmax() == values.argmax()


def test_bcolz_sum_dtype_forms():
    a = ca.carray(np.arange(10, dtype=np.int8))
    assert a.sum() == 45 and a.sum().dtype == np.sum(np.arange(10, dtype=np.int8)).dtype
    assert a.sum(dtype=np.float32).dtype == np.float32
    assert a.sum(np.float64).dtype == np.float64  # bcolz passed the dtype first


def test_refused_dtypes_and_shapes():
    s = ca.carray(np.array(["a", "b"]))
    with pytest.raises(UnsupportedDTypeError):
        s.sum()
    a = ca.carray(np.arange(6.).reshape(2, 3))
    with pytest.raises(BroadcastError):
        a.sum(where=np.ones(4, bool))
    with pytest.raises(np.exceptions.AxisError):
        a.sum(axis=2)
    with pytest.raises(TypeError):
        a.argmax(axis=(0, 1))


def test_out_argument():
    a = ca.carray(np.arange(12.).reshape(3, 4), chunks=(2, 2))
    out = np.empty(4)
    assert np.sum(a, axis=0, out=out) is out
    np.testing.assert_array_equal(out, np.arange(12.).reshape(3, 4).sum(axis=0))
