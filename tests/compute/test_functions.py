"""numpy functions streamed over carrays (carray.compute.functions): boolean masks, NaN
reductions, quantiles, histograms, running sums and lazy transposes and casts, against
numpy, in memory and on disk, with the streaming path forced on small arrays."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from compute_helpers import axes, chunked_arrays, stored
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.compute import protocols, quantiles

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
FLOATS = [np.float64, np.float32]
NUMBERS = [np.float64, np.float32, np.int64, np.int16, np.uint8]
# numpy's own warnings for empty or all-NaN slices, which ours must give too.
EMPTY_SLICE = ("Mean of empty slice", "All-NaN slice", "Degrees of freedom")


@pytest.fixture(autouse=True)
def streamed(monkeypatch):
    """Every array takes the streaming path, however small."""
    monkeypatch.setattr(protocols, "FALLBACK_BYTES", 0)


def with_specials(values: np.ndarray, data) -> np.ndarray:
    """Some items set to NaN, +-inf, and maybe a whole line of NaN."""
    if values.dtype.kind != "f" or not values.size:
        return values
    flat = values.reshape(-1)
    for special in (np.nan, np.inf, -np.inf):
        picks = data.draw(st.lists(st.integers(0, flat.size - 1), max_size=3))
        flat[picks] = special
    if values.ndim > 1 and data.draw(st.booleans()):
        values[0] = np.nan
    return values


def run(func, *args, **kwargs):
    """(result or the builtin exception class, whether numpy's empty-slice warning came)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = func(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - compared with numpy's failure
            result = next(c for c in type(exc).__mro__ if c.__module__ == "builtins")
    warned = any(issubclass(w.category, RuntimeWarning) and
                 str(w.message).startswith(EMPTY_SLICE) for w in caught)
    return result, warned


def check(got, want, exact: bool = True) -> None:
    if isinstance(want, type):
        assert got is want or (isinstance(got, type) and issubclass(got, want)), (got, want)
        return
    got_arr, want_arr = np.asarray(got), np.asarray(want)
    assert got_arr.shape == want_arr.shape and got_arr.dtype == want_arr.dtype, \
        (got_arr.shape, want_arr.shape, got_arr.dtype, want_arr.dtype)
    assert np.ndim(got) == np.ndim(want)
    if exact or want_arr.dtype.kind not in "fc":
        np.testing.assert_array_equal(got_arr, want_arr)
    else:
        rtol = 1e-4 if want_arr.dtype.itemsize <= 4 else 1e-9
        np.testing.assert_allclose(got_arr, want_arr, rtol=rtol, atol=rtol, equal_nan=True)


@SETTINGS
@given(data=st.data(), arr=chunked_arrays(max_ndim=3), disk=st.booleans(),
       kind=st.sampled_from(["lazy", "carray", "numpy"]))
def test_boolean_mask_selection_and_assignment(data, arr, disk, kind):
    values, chunks = arr
    threshold = values.reshape(-1)[0] if values.size else 0
    want = values > threshold
    with stored(values, chunks, disk) as a:
        mask = {"lazy": lambda: a > threshold, "carray": lambda: ca.carray(want),
                "numpy": lambda: want}[kind]()
        got = a[mask]
        assert got.dtype == values.dtype and got.ndim == 1
        np.testing.assert_array_equal(got, values[want])
        np.testing.assert_array_equal((a + 1)[a > threshold], (values + 1)[want])
    if not disk:
        b = ca.carray(values.copy(), chunks=chunks)
        b[ca.carray(want) if kind == "carray" else b > threshold] = 0
        expected = values.copy()
        expected[want] = 0
        np.testing.assert_array_equal(b[...], expected)


def test_mask_assignment_of_one_value_per_item():
    x = np.arange(60).reshape(3, 4, 5)
    b = ca.carray(x, chunks=(2, 3, 2))
    b[b % 7 == 0] = -np.arange(9)
    expected = x.copy()
    expected[x % 7 == 0] = -np.arange(9)
    np.testing.assert_array_equal(b[...], expected)
    with pytest.raises(ValueError):
        b[b > 50] = [1, 2]


NAN_FUNCS = ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmin", "nanmax",
             "nanargmin", "nanargmax"]


@SETTINGS
@given(data=st.data(), arr=chunked_arrays(dtypes=NUMBERS + [np.bool_], nan=True),
       disk=st.booleans(), name=st.sampled_from(NAN_FUNCS), keepdims=st.booleans())
def test_nan_reductions_match_numpy(data, arr, disk, name, keepdims):
    values, chunks = arr
    values = with_specials(values, data)
    axis = data.draw(axes(values.ndim, tuples=not name.startswith("nanarg")))
    kwargs = {"axis": axis, "keepdims": keepdims}
    if name in ("nanvar", "nanstd"):
        kwargs["ddof"] = data.draw(st.integers(0, 2))
    func = getattr(np, name)
    want, want_warned = run(func, values, **kwargs)
    with stored(values, chunks, disk) as a:
        got, got_warned = run(func, a, **kwargs)
    check(got, want, exact=name in ("nanmin", "nanmax", "nanargmin", "nanargmax"))
    assert got_warned == want_warned


METHODS = ["linear", "lower", "higher", "nearest", "midpoint", "hazen", "weibull",
           "median_unbiased", "normal_unbiased", "interpolated_inverted_cdf",
           "inverted_cdf", "averaged_inverted_cdf", "closest_observation"]


@SETTINGS
@given(data=st.data(), arr=chunked_arrays(dtypes=NUMBERS, nan=True, max_len=9),
       disk=st.booleans(), name=st.sampled_from(["quantile", "percentile", "median"]),
       nan=st.booleans(), keepdims=st.booleans())
def test_quantiles_match_numpy_exactly(monkeypatch, data, arr, disk, name, nan, keepdims):
    monkeypatch.setattr(quantiles, "COLLECT_ITEMS", 3)  # narrow by bins, pass after pass
    values, chunks = arr
    values = with_specials(values, data)
    kwargs: dict = {"axis": data.draw(axes(values.ndim)), "keepdims": keepdims}
    args: tuple = ()
    if name != "median":
        q = data.draw(st.sampled_from([0.5, 0.0, 1.0, [0.1, 0.5, 0.99], np.float64(0.3)]))
        args = (np.multiply(q, 100) if name == "percentile" and not isinstance(q, float)
                else q * 100 if name == "percentile" else q,)
        kwargs["method"] = data.draw(st.sampled_from(METHODS))
    func = getattr(np, ("nan" if nan else "") + name)
    want, want_warned = run(func, values, *args, **kwargs)
    with stored(values, chunks, disk) as a:
        got, got_warned = run(func, a, *args, **kwargs)
    check(got, want)
    assert got_warned == want_warned


def test_quantile_selection_holds_bounded_memory(monkeypatch):
    monkeypatch.setattr(quantiles, "COLLECT_ITEMS", 1 << 15)
    x = np.random.default_rng(3).standard_normal(1_500_000)
    a = ca.carray(x, chunks=(20_000,))
    tracemalloc.start()
    try:
        got = np.median(a), np.percentile(a, [1, 99.9])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got[0] == np.median(x)
    np.testing.assert_array_equal(got[1], np.percentile(x, [1, 99.9]))
    assert peak < x.nbytes / 3, peak


@SETTINGS
@given(data=st.data(), arr=chunked_arrays(dtypes=NUMBERS, min_len=1), disk=st.booleans(),
       weighted=st.booleans(), density=st.booleans())
def test_histogram_matches_numpy(data, arr, disk, weighted, density):
    values, chunks = arr
    bins = data.draw(st.sampled_from([1, 4, 10, [-50, 0, 3, 700], "range"]))
    kwargs: dict = {"density": density}
    if bins == "range":
        bins, kwargs["range"] = 5, (-10, 10)
    weights = np.linspace(0, 2, values.size).reshape(values.shape) if weighted else None
    want = np.histogram(values, bins, weights=weights, **kwargs)
    with stored(values, chunks, disk) as a:
        got = np.histogram(a, bins, weights=weights, **kwargs)
        edges = np.histogram_bin_edges(a, bins, range=kwargs.get("range"))
    check(got[1], want[1])
    check(edges, want[1])
    check(got[0], want[0], exact=not (weighted or density))


@SETTINGS
@given(data=st.data(), arr=chunked_arrays(dtypes=NUMBERS + [np.bool_], nan=True),
       disk=st.booleans(), name=st.sampled_from(["cumsum", "cumprod", "nancumsum",
                                                 "nancumprod"]))
def test_running_sums_are_carrays_equal_to_numpy(data, arr, disk, name):
    values, chunks = arr
    axis = data.draw(st.none() | st.integers(-values.ndim, values.ndim - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = getattr(np, name)(values, axis=axis)
        with stored(values, chunks, disk) as a:
            got = getattr(np, name)(a, axis=axis)
            assert isinstance(got, ca.carray)
            check(got[...], want)
            if name in ("cumsum", "cumprod"):
                check(getattr(a, name)(axis)[...], want)


@SETTINGS
@given(data=st.data(), arr=chunked_arrays(dtypes=NUMBERS, min_len=1), disk=st.booleans())
def test_transpose_astype_clip_round_are_lazy_and_equal_numpy(data, arr, disk):
    values, chunks = arr
    perm = tuple(data.draw(st.permutations(range(values.ndim))))
    with stored(values, chunks, disk) as a:
        t = np.transpose(a, perm)
        want_t = np.transpose(values, perm)
        check(np.asarray(t), want_t)
        check(np.asarray(a.T), values.T)
        check(np.asarray(a.transpose(*perm) * 2), want_t * 2)
        key = tuple(slice(data.draw(st.integers(0, n - 1)), None, 2) for n in want_t.shape)
        check(t[key], want_t[key])
        check(t.sum(axis=0), want_t.sum(axis=0), exact=False)
        for expr, want in [(a.astype(np.int32), values.astype(np.int32)),
                           (np.clip(a, 2, 50), np.clip(values, 2, 50)),
                           (np.round(a * 1.37, 1), np.round(values * 1.37, 1)),
                           (np.around(a, -1), np.around(values, -1)),
                           (np.isnan(a.astype(np.float32)), np.isnan(values.astype("f4")))]:
            assert isinstance(expr, ca.compute.LazyExpr)
            check(np.asarray(expr), want)
        assert a.astype(a.dtype, copy=False) is a
        with pytest.raises(TypeError):
            a.astype(np.int8, casting="safe") if values.dtype.itemsize > 1 else \
                a.astype(np.bool_, casting="safe")


def test_transpose_beside_its_operand_reads_each_at_its_own_box():
    x = np.arange(36.).reshape(6, 6)
    a = ca.carray(x, chunks=(4, 4))
    np.testing.assert_array_equal(np.asarray(a + a.T), x + x.T)
    np.testing.assert_array_equal((a * a.T).sum(axis=1), (x * x.T).sum(axis=1))
    c = (a.T - 1).compute()
    np.testing.assert_array_equal(c[...], x.T - 1)
