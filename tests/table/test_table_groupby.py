"""ctable.groupby, unique and value_counts: against pandas (hypothesis) and polars, in
memory and on disk, with missing values and categories read through the contract of
:mod:`carray.table.columns.kinds` (a fake of it here until the real columns exist)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.table.analysis import groupby as table_groupby
from carray.table.analysis.groupby_kernels import GroupByError

AGGS = ["count", "size", "sum", "mean", "min", "max", "std", "var", "first", "last",
        "nunique"]
WORDS = ["", "a", "b", "ab", "é", "zz", "a\x00", "B"]


@pytest.fixture(params=["memory", "disk"])
def where(request, tmp_path):
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


def frame_of(t: ca.ctable) -> pd.DataFrame:
    return t.todataframe()


def expected(df: pd.DataFrame, keys: list[str], spec: dict, dropna: bool = True
             ) -> pd.DataFrame:
    return df.groupby(keys, dropna=dropna, sort=True).agg(**spec).reset_index()


def assert_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for name in want.columns:
        g, w = got[name].to_numpy(), want[name].to_numpy()
        if w.dtype.kind == "f" or g.dtype.kind == "f":
            np.testing.assert_allclose(g.astype(float), w.astype(float), rtol=1e-9,
                                       atol=1e-9, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(g.astype(object), w.astype(object), err_msg=name)


@st.composite
def tables(draw):
    n = draw(st.integers(0, 120))
    ints = st.lists(st.integers(-3, 3), min_size=n, max_size=n)
    floats = st.lists(st.one_of(st.sampled_from([0.5, -1.0, 2.0, 0.0, -0.0]),
                                st.just(np.nan)), min_size=n, max_size=n)
    df = pd.DataFrame({
        "ki": np.array(draw(ints), dtype=np.int64),
        "ks": pd.Series(draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n)),
                        dtype=object),
        "kf": np.array(draw(floats), dtype=np.float64),
        "v": np.array(draw(st.lists(st.one_of(st.floats(-1e3, 1e3), st.just(np.nan)),
                                    min_size=n, max_size=n)), dtype=np.float64),
        "w": np.array(draw(st.lists(st.integers(-10**6, 10**6), min_size=n, max_size=n)),
                      dtype=np.int32),
    })
    return df


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=tables(), keys=st.sampled_from([["ki"], ["ks"], ["kf"], ["ks", "ki"],
                                          ["kf", "ks"], ["ki", "kf", "ks"]]),
       aggs=st.lists(st.sampled_from(AGGS), min_size=1, max_size=4, unique=True),
       col=st.sampled_from(["v", "w", "ks"]), blen=st.sampled_from([None, 7, 32]),
       dropna=st.booleans())
def test_groupby_matches_pandas(df, keys, aggs, col, blen, dropna):
    if col == "ks":
        aggs = [a for a in aggs if a not in ("sum", "mean", "std", "var")] or ["count"]
    if col in keys:
        col = "v"
    t = ca.ctable.fromdataframe(df)
    spec = {f"o_{a}": (col, a) for a in aggs}
    got = frame_of(t.groupby(keys, dropna=dropna).agg(spec, blen=blen))
    assert_same(got, expected(df, keys, spec, dropna))


def test_every_aggregation_on_disk_result_and_blocks(where, tmp_path):
    rng = np.random.default_rng(1)
    n = 5000
    df = pd.DataFrame({"k": rng.integers(0, 40, n).astype(np.int32),
                       "s": pd.Series(rng.choice(["x", "yy", "zzz"], n), dtype=object),
                       "v": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n)),
                       "i": rng.integers(-5, 5, n)})
    t = ca.ctable.fromdataframe(df, chunklen=256, **where)
    spec = {f"{c}_{a}": (c, a) for c in ("v", "i") for a in AGGS}
    spec.update({f"s_{a}": ("s", a) for a in ("count", "min", "max", "first", "last",
                                              "nunique")})
    out = str(tmp_path / "out")
    got = t.groupby(["k", "s"]).agg(spec, rootdir=out, blen=300)
    assert got.rootdir == out and len(got.versions()) >= 1
    assert_same(frame_of(ca.open(out, mode="r")), expected(df, ["k", "s"], spec))
    assert got.dtype["i_sum"] == np.int64 and got.dtype["k"] == np.int32


def test_matches_polars_on_a_fixed_table():
    pl = pytest.importorskip("polars", reason="polars is a test dependency")
    rng = np.random.default_rng(5)
    n = 20_000
    df = pd.DataFrame({"route": rng.integers(0, 300, n).astype(np.int32),
                       "carrier": pd.Series(rng.choice(["AA", "DL", "UA", "WN"], n),
                                            dtype=object),
                       "delay": np.where(rng.random(n) < 0.05, np.nan, rng.normal(5, 20, n)),
                       "dist": rng.integers(50, 5000, n).astype(np.int32)})
    t = ca.ctable.fromdataframe(df)
    got = t.groupby(["carrier", "route"]).agg(
        {"m": ("delay", "mean"), "hi": ("dist", "max"), "n": ("delay", "count"),
         "sd": ("delay", "std"), "u": ("dist", "nunique"), "f": ("delay", "first")},
        blen=4096).todataframe()
    want = (pl.from_pandas(df, nan_to_null=True).group_by(["carrier", "route"])
            .agg(pl.col("delay").mean().alias("m"), pl.col("dist").max().alias("hi"),
                 pl.col("delay").count().alias("n"), pl.col("delay").std().alias("sd"),
                 pl.col("dist").n_unique().alias("u"),
                 pl.col("delay").drop_nulls().first().alias("f"))
            .sort(["carrier", "route"]).to_pandas())
    assert_same(got, want)


def test_shorthands_size_count_and_errors():
    df = pd.DataFrame({"k": [2, 1, 2, 1, 3], "v": [1.0, np.nan, 3.0, 4.0, 5.0],
                       "s": pd.Series(["a", "b", "c", "d", "e"], dtype=object)})
    t = ca.ctable.fromdataframe(df)
    assert_same(frame_of(t.groupby("k").agg(v="sum")), df.groupby("k").agg(v=("v", "sum"))
                .reset_index())
    assert_same(frame_of(t.groupby("k").agg({"v": ["min", "max"]})),
                df.groupby("k").agg(v_min=("v", "min"), v_max=("v", "max")).reset_index())
    assert_same(frame_of(t.groupby("k").agg(n=("v", "count"))),
                df.groupby("k").agg(n=("v", "count")).reset_index())
    assert_same(frame_of(t.groupby("k").size()),
                df.groupby("k").size().rename("size").reset_index())
    assert_same(frame_of(t.groupby("k").count()), df.groupby("k").count().reset_index())
    with pytest.raises(GroupByError, match="no key column 'nope'"):
        t.groupby("nope")
    with pytest.raises(GroupByError, match="no column 'nope'"):
        t.groupby("k").agg(x=("nope", "sum"))
    with pytest.raises(GroupByError, match="unknown aggregation 'median'"):
        t.groupby("k").agg(x=("v", "median"))
    with pytest.raises(GroupByError, match="has no mean"):
        t.groupby("k").agg(x=("s", "mean"))
    with pytest.raises(GroupByError, match="several columns named"):
        t.groupby("k").agg(k=("v", "sum"))
    assert isinstance(GroupByError("x"), ValueError)


def test_empty_table_and_all_missing_groups():
    t = ca.ctable({"k": np.zeros(0, np.int64), "v": np.zeros(0)})
    got = t.groupby("k").agg(n=("v", "count"), m=("v", "mean"))
    assert len(got) == 0 and got.names == ["k", "n", "m"]
    df = pd.DataFrame({"k": [1, 1, 2], "v": [np.nan, np.nan, 1.0], "i": [5, 6, 7]})
    t = ca.ctable.fromdataframe(df)
    spec = {"mn": ("v", "min"), "f": ("v", "first"), "s": ("v", "sum"), "sd": ("v", "std")}
    assert_same(frame_of(t.groupby("k").agg(spec)), expected(df, ["k"], spec))


def test_unique_and_value_counts(where):
    rng = np.random.default_rng(3)
    vals = np.where(rng.random(3000) < 0.1, np.nan, rng.integers(0, 30, 3000).astype(float))
    words = rng.choice(["b", "a", "é", "c"], 3000).astype(object)
    t = ca.ctable({"f": vals, "s": words}, chunklen=128, **where)
    np.testing.assert_array_equal(t.unique("f"), np.unique(vals[~np.isnan(vals)]))
    np.testing.assert_array_equal(t.unique("s"), np.unique(words))
    for name, dropna in (("f", True), ("f", False), ("s", True)):
        got = t.value_counts(name, dropna=dropna).todataframe()
        want = pd.Series(t.cols[name][:]).value_counts(dropna=dropna)
        assert list(got.columns) == [name, "count"]
        assert (np.diff(got["count"].to_numpy()) <= 0).all()
        pairs = {(None if isinstance(v, float) and np.isnan(v) else v, c)
                 for v, c in zip(got[name], got["count"], strict=True)}
        assert pairs == {(None if isinstance(v, float) and np.isnan(v) else v, c)
                         for v, c in want.items()}
    with pytest.raises(GroupByError, match="no column 'nope'"):
        t.unique("nope")


# -- missing values and categories through the contract (a fake until they land) -----------


class FakeColumn:
    """What the contract knows of a column: which rows are valid, and a categorical's
    codes and dictionary."""

    def __init__(self, valid=None, codes=None, categories=None):
        self._valid, self._codes, self.categories = valid, codes, categories

    def valid(self, rows):
        return None if self._valid is None else self._valid[np.asarray(rows)]

    def null_count(self):
        return 0 if self._valid is None else int((~self._valid).sum())

    def codes(self, rows):
        return None if self._codes is None else self._codes[np.asarray(rows)]


@pytest.fixture
def fake_contract(monkeypatch):
    """Columns registered here answer the contract functions the group-by and sort read."""
    registry: dict[int, FakeColumn] = {}

    def read_valid(col, rows):
        fake = registry.get(id(col))
        return None if fake is None else fake.valid(rows)

    def read_codes(col, rows):
        fake = registry.get(id(col))
        return None if fake is None else fake.codes(rows)

    def categories_of(col):
        fake = registry.get(id(col))
        return None if fake is None else fake.categories

    from carray.table.analysis import sort as table_sort
    for module in (table_groupby, table_sort):
        for name, fn in (("read_valid", read_valid), ("read_codes", read_codes),
                         ("categories_of", categories_of)):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, fn)
    return registry


def test_missing_and_categorical_keys_through_the_contract(fake_contract):
    rng = np.random.default_rng(11)
    n = 2000
    cats = np.array(["zeta", "alpha", "mid"], dtype=object)  # dictionary order, not sorted
    codes = rng.integers(0, 3, n)
    kvalid = rng.random(n) > 0.1
    v = rng.integers(0, 100, n)
    vvalid = rng.random(n) > 0.2
    t = ca.ctable({"c": codes, "k": rng.integers(0, 5, n), "v": v}, chunklen=100)
    fake_contract[id(t.cols["c"])] = FakeColumn(codes=codes, categories=cats)
    fake_contract[id(t.cols["k"])] = FakeColumn(valid=kvalid)
    fake_contract[id(t.cols["v"])] = FakeColumn(valid=vvalid)
    df = pd.DataFrame({
        "c": pd.Categorical.from_codes(codes, categories=list(cats)),
        "k": pd.array(np.where(kvalid, t.cols["k"][:], 0), dtype="Int64"),
        "v": pd.array(v, dtype="Int64"),
    })
    df.loc[~kvalid, "k"] = pd.NA
    df.loc[~vvalid, "v"] = pd.NA
    spec = {"n": ("v", "count"), "s": ("v", "sum"), "mx": ("v", "max"),
            "f": ("v", "first"), "u": ("v", "nunique"), "rows": ("v", "size")}
    for dropna in (True, False):
        got = t.groupby(["c", "k"], dropna=dropna).agg(spec, blen=300).todataframe()
        want = df.groupby(["c", "k"], dropna=dropna, observed=True).agg(**spec).reset_index()
        assert list(got["c"]) == [str(x) for x in want["c"]]  # dictionary order
        want["k"] = want["k"].astype("float64")
        assert_same(got.drop(columns="c"), want.drop(columns="c").astype(
            {c: "float64" for c in ("n", "s", "mx", "f", "u", "rows")}))
