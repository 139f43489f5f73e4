"""numpy's functions and ufuncs on table columns with missing values
(carray.table.columns.functions): against pandas' nullable dtypes, and numpy's masked arrays
where pandas has no answer."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


def flights_delays(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    delay = np.round(rng.normal(10, 40, n))
    missing = rng.random(n) < 0.03
    return delay, missing


@pytest.fixture(params=["memory", "disk"])
def delays(request, tmp_path):
    values, missing = flights_delays()
    where = {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}
    t = ca.ctable({"dep_delay": np.ma.MaskedArray(values, mask=missing)}, **where)
    return t["dep_delay"], pd.Series(pd.array(np.where(missing, np.nan, values),
                                              dtype="Float64"))


def test_reductions_skip_missing_values_as_pandas(delays):
    col, s = delays
    assert np.median(col) == s.median() and np.nanmedian(col) == s.median()
    for func, method in ((np.mean, "mean"), (np.nanmean, "mean"), (np.sum, "sum"),
                         (np.nansum, "sum"), (np.min, "min"), (np.max, "max")):
        assert func(col) == pytest.approx(getattr(s, method)()), func.__name__
    for func in (np.std, np.nanstd, np.var, np.nanvar):
        method = func.__name__.replace("nan", "")
        assert func(col, ddof=1) == pytest.approx(getattr(s, method)()), func.__name__
    assert np.quantile(col, 0.9) == pytest.approx(s.quantile(0.9))
    assert np.percentile(col, [10, 50]) == pytest.approx([s.quantile(0.1), s.quantile(0.5)])


def test_histogram_counts_only_values_present(delays):
    col, s = delays
    counts, edges = np.histogram(col, bins=20)
    want, want_edges = np.histogram(s.dropna().to_numpy(float), bins=20)
    assert counts.sum() == s.count() and counts.tolist() == want.tolist()
    np.testing.assert_allclose(edges, want_edges)
    weights = np.arange(len(s), dtype=float)
    got, _ = np.histogram(col, bins=5, weights=weights)  # weights of missing rows dropped
    np.testing.assert_allclose(got, np.histogram(s.dropna().to_numpy(float), bins=5,
                                                 weights=weights[s.notna().to_numpy()])[0])


def test_positions_orders_and_ufuncs(delays):
    col, s = delays
    assert np.argmin(col) == s.argmin() and np.argmax(col) == s.argmax()
    order = np.argsort(col, kind="stable")  # missing last, as pandas' sort_values
    assert order.tolist() == s.sort_values(kind="stable").index.tolist()
    got = np.sort(col)
    assert np.ma.getmaskarray(got).sum() == s.isna().sum()
    assert got.compressed().tolist() == s.dropna().sort_values().tolist()
    doubled = np.multiply(col, 2)  # a ufunc: masked where missing
    assert isinstance(doubled, np.ma.MaskedArray)
    assert doubled.mask.tolist() == s.isna().tolist()
    assert np.add.reduce(col) == pytest.approx(s.sum())
    cum = np.cumsum(col)
    assert cum.mask.tolist() == s.isna().tolist()
    np.testing.assert_allclose(cum.compressed(), s.cumsum().dropna().to_numpy(float))
    uniq = np.unique(col)
    assert uniq[-1] is np.ma.masked and uniq[:-1].tolist() == sorted(s.dropna().unique())


def test_methods_take_numpy_arguments_and_empty_columns(delays):
    col, s = delays
    assert col.mean(axis=0) == pytest.approx(s.mean())
    assert col.std(ddof=1) == pytest.approx(s.std())
    empty = ca.ctable({"x": np.ma.MaskedArray([1.0, 2.0], mask=[True, True])})["x"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for a column with no value
        assert np.sum(empty) == 0 and np.isnan(np.mean(empty))
        assert np.min(empty) is np.ma.masked and np.isnan(np.median(empty))
        assert np.argmax(empty) is np.ma.masked
        assert np.histogram(empty, bins=3, range=(0, 1))[0].sum() == 0


def test_asarray_gives_nan_where_a_float_is_missing(delays):
    col, s = delays
    np.testing.assert_array_equal(np.asarray(col), s.to_numpy(float, na_value=np.nan))


@pytest.mark.parametrize("kind", ["Int64", "boolean", "string", "category"])
def test_other_kinds_of_columns(kind):
    rng = np.random.default_rng(3)
    n = 500
    if kind == "Int64":
        s = pd.Series(pd.array(rng.integers(-50, 50, n), dtype="Int64"))
    elif kind == "boolean":
        s = pd.Series(pd.array(rng.random(n) < 0.4, dtype="boolean"))
    else:
        s = pd.Series(rng.choice(["UA", "AA", "DL"], n), dtype=object)
    s[rng.random(n) < 0.1] = None
    if kind == "string":
        s = s.astype(object)
    elif kind == "category":
        s = s.astype("category")
    col = ca.ctable({"c": s})["c"]
    present = s.dropna()
    if kind in ("Int64", "boolean"):
        assert np.sum(col) == present.sum() and np.mean(col) == pytest.approx(present.mean())
        assert np.count_nonzero(col) == int((present != 0).sum())
        assert np.median(col) == pytest.approx(present.median())
    else:  # the values themselves (a categorical's decoded), as np.asarray(s) holds them
        values = present.to_numpy(object)
        assert np.min(col) == min(values) and np.max(col) == max(values)
    got = np.unique(col, return_counts=True)
    counts = s.value_counts(dropna=False).sort_index(na_position="last")
    assert got[1].tolist() == counts.tolist()
    assert got[0][:-1].tolist() == counts.index[:-1].tolist() and got[0][-1] is np.ma.masked
    order = np.argsort(col, kind="stable")
    plain = s.astype(object) if kind == "category" else s
    assert order.tolist() == plain.sort_values(kind="stable", na_position="last"
                                               ).index.tolist()
    hits = np.isin(col, ["UA", 1, True])
    assert hits.tolist() == s.isin(["UA", 1, True]).tolist()


@SETTINGS
@given(values=st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), max_size=60),
       q=st.floats(0, 1))
def test_integer_reductions_match_pandas(values, q):
    s = pd.Series(pd.array(values, dtype="Int64"))
    masked = np.ma.MaskedArray([0 if v is None else v for v in values],
                               mask=[v is None for v in values], dtype=np.int64)
    col = ca.ctable({"x": masked}, chunklen=7)["x"]
    present = s.dropna().to_numpy(np.int64)
    assert np.sum(col) == s.sum() and np.count_nonzero(col) == np.count_nonzero(present)
    if not len(present):
        assert np.min(col) is np.ma.masked and np.quantile(col, q) is np.ma.masked
        return
    assert np.min(col) == s.min() and np.max(col) == s.max()
    assert np.mean(col) == pytest.approx(s.mean())
    assert np.median(col) == pytest.approx(s.median())
    assert np.quantile(col, q) == pytest.approx(s.quantile(q))
    assert np.histogram(col)[0].tolist() == np.histogram(present)[0].tolist()
