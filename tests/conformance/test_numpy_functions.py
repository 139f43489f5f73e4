"""Every numpy function that takes a column, on every kind of column, against pandas'
nullable dtypes (pyarrow.compute, or numpy on the values present, where pandas has no
answer): missing values are skipped, never counted as their fillers."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from carray.table.columns.functions import MissingAwareArray

from .tables import SETTINGS, TIMEOUT, canon, each_place, tables

pytestmark = TIMEOUT

NUMBERS = ["i64", "i32", "f64", "f32", "b"]
ORDERED = ["s", "u", "d", "t", "z"]  # text and times: orders, extremes, distinct values


def _scalar(value: Any) -> Any:
    """A reduction's answer as a comparable Python value (None: missing or NaN)."""
    if value is np.ma.masked or value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (pd.Timestamp, np.datetime64)):
        stamp = pd.Timestamp(value)
        return None if pd.isna(stamp) else stamp.tz_localize(None).as_unit("ns").value \
            if stamp.tz is None else stamp.tz_convert("UTC").as_unit("ns").value
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


_REFUSED = object()


def _same(got: Any, want: Any, what: str) -> None:
    if got is _REFUSED:
        return
    g, w = _scalar(got), _scalar(want)
    if isinstance(w, float) or isinstance(g, float):
        assert (g is None) == (w is None), (what, got, want)
        if g is not None:
            assert np.isclose(g, w, rtol=1e-6, atol=1e-9), (what, got, want)
    else:
        assert g == w, (what, got, want)


def _instants(values: list[Any]) -> list[Any]:
    """Canonical values with zones left out: numpy's arrays hold a zoned column's UTC
    instants."""
    return [v[0] if isinstance(v, tuple) else v for v in values]


def _same_rows(got: Any, want: pd.Series, what: str) -> None:
    """An array answer (masked where missing) against a pandas Series."""
    g = _instants(canon(pd.Series(np.ma.asanyarray(got).tolist(), dtype=object)))
    w = _instants(canon(want.astype(object)))
    assert [x is None for x in g] == [x is None for x in w], what
    for a, b in zip(g, w, strict=True):
        if isinstance(a, float) or isinstance(b, float):
            assert np.isclose(a, b, rtol=1e-6), what
        else:
            assert a == b, what


# name -> (carray's call, pandas' answer)
Reductions = dict[str, tuple[Callable[[Any], Any], Callable[[pd.Series], Any]]]
REDUCTIONS: Reductions = {
    "sum": (np.sum, lambda s: s.sum()),
    "nansum": (np.nansum, lambda s: s.sum()),
    "prod": (np.prod, lambda s: s.prod()),
    "mean": (np.mean, lambda s: s.mean()),
    "nanmean": (np.nanmean, lambda s: s.mean()),
    "std": (lambda c: np.std(c, ddof=1), lambda s: s.std()),
    "nanstd0": (np.nanstd, lambda s: s.std(ddof=0)),
    "var": (lambda c: np.var(c, ddof=1), lambda s: s.var()),
    "nanvar0": (np.nanvar, lambda s: s.var(ddof=0)),
    "min": (np.min, lambda s: s.min()),
    "amax": (np.amax, lambda s: s.max()),
    "nanmin": (np.nanmin, lambda s: s.min()),
    "nanmax": (np.nanmax, lambda s: s.max()),
    "median": (np.median, lambda s: s.median()),
    "nanmedian": (np.nanmedian, lambda s: s.median()),
    "quantile": (lambda c: np.quantile(c, 0.3), lambda s: s.quantile(0.3)),
    "nanpercentile": (lambda c: np.nanpercentile(c, 80), lambda s: s.quantile(0.8)),
    "average": (np.average, lambda s: s.mean()),
    "argmin": (np.argmin, lambda s: s.argmin() if s.notna().any() else None),
    "nanargmax": (np.nanargmax, lambda s: s.argmax() if s.notna().any() else None),
    "any": (np.any, lambda s: s.any()),
    "all": (np.all, lambda s: s.all()),
    "count_nonzero": (np.count_nonzero,
                      lambda s: int(pc.sum(pc.not_equal(pa.array(s.dropna().astype(float)),
                                                        0)).as_py() or 0)),
    "add.reduce": (np.add.reduce, lambda s: s.sum()),
}
ORDER_REDUCTIONS = ["min", "amax", "argmin"]


def _pandas(func: Callable[[pd.Series], Any], s: pd.Series) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return func(s)
        except (TypeError, ValueError):  # no answer for no values
            return None


def _call(call: Callable[[Any], Any], col: Any, s: pd.Series) -> Any:
    """``call(col)``: without a warning when a column that can hold missing values has
    none present (pandas gives none; a plain empty column warns as numpy does for an
    empty array); numpy's own refusal of an empty array that cannot hold missing values
    counts as no answer, as pandas' NA."""
    silent = isinstance(col, MissingAwareArray) and not s.notna().any()
    with warnings.catch_warnings():
        warnings.simplefilter("error" if silent else "ignore", RuntimeWarning)
        try:
            return call(col)
        except (ValueError, IndexError):  # numpy's quantile of nothing is an IndexError
            if len(col) or col.null_count():
                raise
            return None
        except TypeError:
            # A column that cannot hold missing values is a plain array: where numpy has
            # no answer for its values (quantiles of booleans, the minimum of fixed-width
            # text), it has none either, with a TypeError.
            if isinstance(col, MissingAwareArray):
                raise
            try:
                call(np.asarray(col))
            except TypeError:
                return _REFUSED
            raise


def _numbers(s: pd.Series) -> pd.Series:
    """A boolean column summed and averaged as numbers (pandas' answers for them)."""
    return s.astype("Int64") if s.dtype == "boolean" else s


@SETTINGS
@given(drawn=tables(), names=st.lists(st.sampled_from(list(REDUCTIONS)), min_size=3,
                                      max_size=8, unique=True))
def test_reductions_skip_missing_values(drawn, names, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            for column in NUMBERS:
                s = ref.frame[column]
                for name in names:
                    call, answer = REDUCTIONS[name]
                    if name == "prod" and column != "b":
                        continue  # products overflow (in an order-dependent way)
                    got = _call(call, t.cols[column], s)
                    want = _pandas(answer, _numbers(s) if name not in ORDER_REDUCTIONS
                                   else s)
                    _same(got, want, f"{place} {column} {name}")
            for column in ORDERED:
                s = ref.frame[column]
                for name in ORDER_REDUCTIONS:
                    call, answer = REDUCTIONS[name]
                    _same(_call(call, t.cols[column], s), _pandas(answer, s),
                          f"{place} {column} {name}")


@SETTINGS
@given(drawn=tables(), bins=st.sampled_from([1, 3, 10]), weighted=st.booleans())
def test_histograms_count_values_present(drawn, bins, weighted, tmp_path):
    weights = np.linspace(0.5, 2.0, len(drawn)) if weighted else None
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            for column in ("i64", "f64", "f32"):
                s = ref.frame[column]
                present = s.notna().to_numpy(bool)
                values = s.dropna().to_numpy(t.cols[column].dtype)
                kwargs = {"weights": weights[present]} if weighted else {}
                rng = None if len(values) else (0, 1)  # numpy needs a range for no values
                want, want_edges = np.histogram(values, bins=bins, range=rng, **kwargs)
                got, edges = np.histogram(t.cols[column], bins=bins, range=rng,
                                          weights=weights)
                np.testing.assert_allclose(got, want, err_msg=f"{place} {column}")
                np.testing.assert_allclose(edges, want_edges, err_msg=f"{place} {column}")
                if not weighted:
                    assert got.sum() == s.count(), (place, column)


@SETTINGS
@given(drawn=tables())
def test_functions_keeping_rows_are_masked_where_missing(drawn, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            for column in ("i64", "f64", "f32"):
                col, s = t.cols[column], ref.frame[column]
                what = f"{place} {column}"
                _same_rows(np.cumsum(col), s.cumsum(), f"{what} cumsum")
                _same_rows(np.clip(col, -1, 2), s.clip(-1, 2), f"{what} clip")
                _same_rows(np.round(col, 1), s.round(1), f"{what} round")
                _same_rows(np.add(col, 1), s + 1, f"{what} add")
                _same_rows(np.absolute(col), s.abs(), f"{what} absolute")
                _same_rows(np.negative(col), -s, f"{what} negative")
                arrow = pc.pairwise_diff(pa.array(s.astype(object), type=pa.float64()))
                _same_rows(np.diff(col).astype(float),
                           pd.Series(arrow.to_pylist()[1:], dtype="Float64"), f"{what} diff")
                if column != "i64":
                    floats = np.asarray(col, dtype=float)  # NaN where missing
                    np.testing.assert_array_equal(floats, s.to_numpy(float, na_value=np.nan))


@SETTINGS
@given(drawn=tables())
def test_orders_and_distinct_values_put_missing_last(drawn, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            for column in NUMBERS + ORDERED + ["c"]:
                col, s = t.cols[column], ref.frame[column]
                plain = s.astype(object) if isinstance(s.dtype, pd.CategoricalDtype) else s
                what = f"{place} {column}"
                order = np.argsort(col, kind="stable")
                assert order.tolist() == plain.sort_values(
                    kind="stable", na_position="last").index.tolist(), what
                _same_rows(np.sort(col), plain.sort_values(kind="stable", na_position="last")
                           .reset_index(drop=True), f"{what} sort")
                values, counts = np.unique(col, return_counts=True)
                present = plain.dropna()
                want = present.value_counts().sort_index()
                tail = [None] if s.isna().any() else []
                assert _instants(canon(pd.Series(np.ma.asanyarray(values).tolist(),
                                                 dtype=object))) == \
                    _instants(canon(pd.Series(list(want.index) + tail, dtype=object))), what
                assert counts.tolist() == want.tolist() + ([int(s.isna().sum())] if tail
                                                           else []), what
