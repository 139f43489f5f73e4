"""ctable.sort: stable, several keys and directions, strings and missing values, out of
core (runs spilled and merged), against pandas (hypothesis) and polars."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.table.analysis import sort as table_sort
from carray.table.analysis.groupby_kernels import GroupByError

WORDS = ["", "a", "b", "ab", "é", "zz", "a\x00", "B", "aa"]


@pytest.fixture(params=["memory", "disk"])
def where(request, tmp_path):
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


def want_sorted(df: pd.DataFrame, by, ascending, na_position="last") -> pd.DataFrame:
    return df.sort_values(by, ascending=ascending, kind="stable",
                          na_position=na_position).reset_index(drop=True)


def assert_frames(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    for name in want.columns:
        g, w = got[name].to_numpy(), want[name].to_numpy()
        if w.dtype.kind == "f":
            np.testing.assert_array_equal(g, w, err_msg=name)  # NaN == NaN here
        else:
            np.testing.assert_array_equal(g.astype(object), w.astype(object), err_msg=name)


@st.composite
def frames(draw):
    n = draw(st.integers(0, 150))
    return pd.DataFrame({
        "i": np.array(draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), np.int64),
        "f": np.array(draw(st.lists(st.one_of(st.sampled_from([1.5, -2.0, 0.0]),
                                              st.just(np.nan)), min_size=n, max_size=n))),
        "s": pd.Series(draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n)),
                       dtype=object),
        "u": np.array(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), np.uint8),
        "row": np.arange(n),
    })


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=frames(), by=st.lists(st.sampled_from(["i", "f", "s", "u"]), min_size=1,
                                max_size=3, unique=True),
       data=st.data(), na_position=st.sampled_from(["last", "first"]),
       memory=st.sampled_from([None, None, 20_000]))
def test_sort_matches_pandas(df, by, data, na_position, memory):
    ascending = data.draw(st.lists(st.booleans(), min_size=len(by), max_size=len(by)))
    t = ca.ctable.fromdataframe(df)
    got = t.sort(by, ascending, na_position=na_position, memory=memory).todataframe()
    assert_frames(got, want_sorted(df, by, ascending, na_position))


def test_out_of_core_on_disk_many_runs(where, tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    n = 6000
    df = pd.DataFrame({"k": rng.integers(0, 50, n), "x": rng.random(n),
                       "s": pd.Series(rng.choice(["b", "a", "c", "dd"], n), dtype=object),
                       "d": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n))})
    t = ca.ctable.fromdataframe(df, chunklen=500, **where)
    merged = []
    real_merge = table_sort._merge
    monkeypatch.setattr(table_sort, "_merge", lambda keys, runs, blen: merged.append(
        len(runs)) or real_merge(keys, runs, blen))
    out = str(tmp_path / "sorted")
    got = t.sort(["s", "d", "k"], [True, False, True], rootdir=out, memory=250_000)
    # Runs merged a few at a time, on several levels, the last into the result.
    assert len(merged) >= 3 and min(merged) >= 2
    assert got.rootdir == out and len(got.versions()) == 1
    assert_frames(ca.open(out, mode="r").todataframe(),
                  want_sorted(df, ["s", "d", "k"], [True, False, True]))
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".carray-sort-")]
    with pytest.raises(ca.errors.ContainerExistsError):
        t.sort("x", rootdir=out, mode="a")
    again = t.sort("x", rootdir=out, memory=250_000)  # mode 'w' replaces it
    np.testing.assert_array_equal(again.cols["x"][:], np.sort(df["x"].to_numpy()))


def test_stable_and_directions(where):
    k = np.array([2, 1, 2, 1, 2, 1, 0])
    t = ca.ctable({"k": k, "r": np.arange(7)}, **where)
    assert list(t.sort("k").cols["r"][:]) == [6, 1, 3, 5, 0, 2, 4]
    assert list(t.sort("k", ascending=False).cols["r"][:]) == [0, 2, 4, 1, 3, 5, 6]
    assert list(t.sort("k", memory=1).cols["r"][:]) == [6, 1, 3, 5, 0, 2, 4]


def test_matches_polars_on_a_fixed_table():
    pl = pytest.importorskip("polars", reason="polars is a test dependency")
    rng = np.random.default_rng(9)
    n = 3000
    df = pd.DataFrame({"a": rng.integers(0, 5, n), "b": rng.normal(size=n),
                       "c": pd.Series(rng.choice(["x", "y", "é", "Z"], n), dtype=object)})
    df.loc[rng.random(n) < 0.1, "b"] = np.nan
    t = ca.ctable.fromdataframe(df)
    got = t.sort(["c", "a", "b"], [False, True, False], memory=140_000).todataframe()
    want = (pl.from_pandas(df, nan_to_null=True)
            .sort(["c", "a", "b"], descending=[True, False, True], nulls_last=True,
                  maintain_order=True).to_pandas())
    assert_frames(got, want)


def test_failure_leaves_nothing_and_keeps_the_old_table(tmp_path, monkeypatch):
    t = ca.ctable({"x": np.arange(5000)[::-1].copy(), "y": np.arange(5000)})
    out = str(tmp_path / "out")
    real = table_sort._Spill.append
    calls = []

    def failing(self, batch):
        calls.append(1)
        if len(calls) == 3:  # the third run
            raise OSError(28, "No space left on device")
        return real(self, batch)

    monkeypatch.setattr(table_sort._Spill, "append", failing)
    with pytest.raises(OSError, match="No space"):
        t.sort("x", rootdir=out, memory=100_000)
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(table_sort._Spill, "append", real)
    t.sort("y", rootdir=out).close()
    calls.clear()
    monkeypatch.setattr(table_sort._Spill, "append", failing)
    with pytest.raises(OSError):
        t.sort("x", rootdir=out, memory=100_000)
    assert os.listdir(tmp_path) == ["out"] and len(calls) == 3
    np.testing.assert_array_equal(ca.open(out, mode="r").cols["y"][:], np.arange(5000))


def test_bad_arguments_and_empty():
    t = ca.ctable({"x": np.zeros(0), "s": np.zeros(0, dtype=object)})
    assert len(t.sort(["s", "x"])) == 0 and t.sort("x").names == ["x", "s"]
    with pytest.raises(GroupByError, match="no column 'nope' to sort by"):
        t.sort("nope")
    with pytest.raises(GroupByError, match="2 directions"):
        t.sort("x", ascending=[True, False])
    with pytest.raises(GroupByError, match="na_position"):
        t.sort("x", na_position="middle")


def test_missing_and_categorical_keys_through_the_contract(monkeypatch):
    rng = np.random.default_rng(4)
    n = 500
    codes = rng.integers(0, 3, n)
    cats = np.array(["zeta", "alpha", "mid"], dtype=object)
    valid = rng.random(n) > 0.2
    t = ca.ctable({"c": codes, "v": rng.integers(0, 4, n), "r": np.arange(n)})
    ccol, vcol = t.cols["c"], t.cols["v"]
    monkeypatch.setattr(table_sort, "read_codes",
                        lambda col, rows: codes[rows] if col is ccol else None)
    monkeypatch.setattr(table_sort, "read_valid",
                        lambda col, rows: valid[rows] if col is vcol else None)
    df = pd.DataFrame({"c": pd.Categorical.from_codes(codes, categories=list(cats)),
                       "v": pd.array(t.cols["v"][:], dtype="Int64"), "r": np.arange(n)})
    df.loc[~valid, "v"] = pd.NA
    for na in ("last", "first"):
        for memory in (None, 8000):
            got = t.sort(["c", "v"], [False, True], na_position=na, memory=memory)
            want = df.sort_values(["c", "v"], ascending=[False, True], kind="stable",
                                  na_position=na)
            np.testing.assert_array_equal(got.cols["r"][:], want["r"].to_numpy())
