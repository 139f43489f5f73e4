"""Table operations against pandas' nullable dtypes: head and tail, sort, group-by with
every aggregation and both ``dropna``, unique, value_counts and isin, in every place."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from carray.table.analysis.groupby_kernels import GroupByError

from .tables import (
    CATEGORIES,
    FLOATS,
    INTS,
    KINDS,
    SETTINGS,
    TIMEOUT,
    WORDS,
    assert_frame_like,
    canon,
    each_place,
    family,
    tables,
    zone_name,
)

COLUMNS = list(KINDS)
KEYS = ["i64", "i32", "b", "s", "u", "c", "d", "t", "z", "f64"]
AGGREGATIONS = {
    "number": ["count", "size", "sum", "mean", "min", "max", "std", "var", "first", "last",
               "nunique"],
    "other": ["count", "size", "min", "max", "first", "last", "nunique"],
}

pytestmark = TIMEOUT


def _frame(t: Any) -> pd.DataFrame:
    return t.todataframe()[COLUMNS]


@SETTINGS
@given(drawn=tables(), n=st.integers(-70, 70))
def test_head_and_tail(drawn, n, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            assert_frame_like(_frame(t.head(n)), ref.frame.head(n).reset_index(drop=True),
                              f"{place} head({n})")
            assert_frame_like(_frame(t.tail(n)), ref.frame.tail(n).reset_index(drop=True),
                              f"{place} tail({n})")


@SETTINGS
@given(drawn=tables(), by=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
       data=st.data())
def test_sort(drawn, by, data, tmp_path):
    ascending = data.draw(st.lists(st.booleans(), min_size=len(by), max_size=len(by)))
    na_position = data.draw(st.sampled_from(["last", "first"]))
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            rootdir = str(tmp_path / f"sorted-{place}") if place != "memory" else None
            got = t.sort(by, ascending=ascending, na_position=na_position, rootdir=rootdir)
            numbered = ref.frame.assign(_row=np.arange(len(ref.frame)))
            ordered = numbered.sort_values(by, ascending=ascending, na_position=na_position,
                                           kind="stable").reset_index(drop=True)
            want = ordered.drop(columns="_row")
            assert_frame_like(_frame(got), want, f"{place} sort({by}, {ascending})")
            rows = ordered["_row"].to_numpy()
            assert np.ma.asanyarray(got["n"][:]).tolist() == ref.nested[rows].tolist()
            got.close()


def _reference_groups(df: pd.DataFrame, keys: list[str], spec: dict[str, tuple[str, str]],
                      dropna: bool) -> pd.DataFrame:
    return df.groupby(keys, dropna=dropna, sort=True, observed=True).agg(**spec).reset_index()


def _aggregations(draw: Any, keys: list[str]) -> dict[str, tuple[str, str]]:
    columns = [c for c in COLUMNS if c not in keys]
    chosen = draw(st.lists(st.sampled_from(columns), min_size=1, max_size=4, unique=True))
    spec = {}
    for col in chosen:
        kind = "number" if KINDS[col] in ("int", "float") else "other"
        for func in draw(st.lists(st.sampled_from(AGGREGATIONS[kind]), min_size=1,
                                  max_size=4, unique=True)):
            spec[f"{col}_{func}"] = (col, func)
    return spec


@SETTINGS
@given(drawn=tables(), keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2,
                                     unique=True),
       dropna=st.booleans(), blen=st.sampled_from([None, 4]), data=st.data())
def test_groupby_every_aggregation(drawn, keys, dropna, blen, data, tmp_path):
    asked = _aggregations(data.draw, keys)
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            spec = dict(asked)
            unordered = isinstance(ref.frame["c"].dtype, pd.CategoricalDtype) and \
                not ref.ordered
            refused = {out for out, (col, func) in spec.items()
                       if col == "c" and func in ("min", "max") and unordered}
            if refused:  # pandas too: unordered categories have no min or max
                with pytest.raises(GroupByError, match="unordered"):
                    t.groupby(keys, dropna=dropna).agg(spec)
                spec = {k: v for k, v in spec.items() if k not in refused} or \
                    {"size": (keys[0], "size")}
            got = t.groupby(keys, dropna=dropna).agg(spec, blen=blen).todataframe()
            want = _reference_groups(ref.frame, keys, spec, dropna)
            what = f"{place} groupby({keys}, dropna={dropna}) {spec}"
            assert list(got.columns) == list(want.columns), what
            assert len(got) == len(want), what
            for name in keys:  # the keys: kind, zone and values
                assert family(got[name].dtype) == family(want[name].dtype), (what, name)
                assert canon(got[name]) == canon(want[name]), (what, name)
            for out in spec:
                _same_values(got[out], want[out], f"{what} {out}")
            sizes = t.groupby(keys, dropna=dropna).size().todataframe()["size"]
            assert sizes.tolist() == ref.frame.groupby(keys, dropna=dropna, sort=True,
                                                       observed=True).size().tolist(), what


def _same_values(got: pd.Series, want: pd.Series, what: str) -> None:
    g, w = canon(got), canon(want)
    assert [x is None for x in g] == [x is None for x in w], what
    if family(want.dtype) == "float":
        np.testing.assert_allclose([x for x in g if x is not None],
                                   [x for x in w if x is not None], rtol=1e-7, atol=1e-9,
                                   err_msg=what)
    else:
        assert g == w, what


@SETTINGS
@given(drawn=tables(), column=st.sampled_from(KEYS), dropna=st.booleans())
def test_unique_and_value_counts(drawn, column, dropna, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            s = ref.frame[column]
            what = f"{place} {column} dropna={dropna}"
            present = s.dropna()
            if isinstance(s.dtype, pd.CategoricalDtype):  # the dictionary's order
                want = [c for c in s.cat.categories if c in set(present)]
            else:
                want = sorted(set(canon(present)))
            got = canon(pd.Series(t.unique(column)))
            if family(s.dtype) == "datetime-zoned":
                assert zone_name(t.unique(column).timezone) == zone_name(s.dt.tz), what
                got = [(v, zone_name(s.dt.tz)) for v, _ in got]
            assert got == (want if isinstance(s.dtype, pd.CategoricalDtype) else want), what
            counts = t.value_counts(column, dropna=dropna).todataframe()
            assert family(counts[column].dtype) == family(s.dtype), what
            pairs = list(zip(canon(counts[column]), counts["count"].tolist(), strict=True))
            expected = s.value_counts(dropna=dropna)
            expected = expected[expected > 0]  # values held (pandas lists a dictionary's all)
            assert dict(pairs) == dict(zip(canon(pd.Series(expected.index, dtype=s.dtype)),
                                           expected.tolist(), strict=True)), what
            assert [c for _, c in pairs] == sorted((c for _, c in pairs), reverse=True), what


@SETTINGS
@given(drawn=tables(), data=st.data())
def test_isin(drawn, data, tmp_path):
    pools = {"i64": INTS + [None], "i32": INTS[:-1], "f64": FLOATS + [np.nan],
             "f32": FLOATS, "b": [True, False, None], "s": WORDS + [None], "u": WORDS,
             "c": CATEGORIES + ["ZZ", None]}
    column = data.draw(st.sampled_from(list(pools)))
    values = data.draw(st.lists(st.sampled_from(pools[column]), max_size=4))
    invert = data.draw(st.booleans())
    markers = [v for v in values if v is None or (isinstance(v, float) and np.isnan(v))]
    plain = [v for v in values if not any(v is m for m in markers)]
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            s = ref.frame[column]
            # A missing row is a member of values holding any missing marker (None, NaN),
            # whatever the column's dtype: pandas says so for strings and categories, and
            # for nullable numbers only of pd.NA.
            want = (s.isin(plain) & s.notna()).to_numpy(bool) | \
                (s.isna().to_numpy(bool) & bool(markers))
            want = ~want if invert else want
            got = t.cols[column].isin(values, invert=invert)
            assert got.tolist() == want.tolist(), (place, column, values, invert)
            assert np.isin(t.cols[column], values, invert=invert).tolist() == want.tolist()
