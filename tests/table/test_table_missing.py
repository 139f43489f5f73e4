"""Missing values in tables: every column type, in memory and on disk, through changes,
versions and reopens; pandas, Arrow, Parquet, duckdb and polars agree."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca
from carray.errors import UnsupportedDTypeError
from carray.table.columns.kinds import null_count, read_any, read_valid
from carray.table.columns.nullable import NullableColumn

pd = pytest.importorskip("pandas", reason="pandas is a test dependency")
pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")


@pytest.fixture(params=["memory", "disk"])
def where(request, tmp_path):
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


def _reopen(t, where, mode="a"):
    if not where:
        return t
    t.close()
    return ca.ctable(rootdir=where["rootdir"], mode=mode)


def _columns():
    """One column of each type, rows 1 and 4 missing (nested: a field's rows)."""
    rec = np.ma.masked_array(np.array([(i, i / 2) for i in range(6)],
                                      dtype=[("p", "i4"), ("q", "f8")]))
    rec["q"][[1, 4]] = np.ma.masked
    missing = [0, 1, 0, 0, 1, 0]
    return {
        "i": np.ma.masked_array(np.arange(6, dtype=np.int64), mask=missing),
        "f": np.ma.masked_array(np.arange(6) * 1.5, mask=missing),
        "b": np.ma.masked_array(np.arange(6) % 2 == 0, mask=missing),
        "s": np.array(["a", None, "cc", "", None, "ffff"], dtype=object),
        "d": np.ma.masked_array(np.arange(6).astype("M8[D]"), mask=missing),
        "n": rec,
    }


def test_every_column_type_holds_missing_values(where):
    t = ca.ctable(_columns(), **where)
    t = _reopen(t, where, mode="r")
    for name in ("i", "f", "b", "s", "d"):
        col = t.cols[name]
        assert isinstance(col, NullableColumn), name
        assert null_count(col) == 2 and col.isnull().tolist() == [0, 1, 0, 0, 1, 0]
        assert read_valid(col, range(6)).tolist() == [1, 0, 1, 1, 0, 1]
        assert read_valid(col, np.array([4, 0])).tolist() == [False, True]
        got = t[name][:]
        assert isinstance(got, np.ma.MaskedArray) and got.mask.tolist() == [0, 1, 0, 0, 1, 0]
        assert t[name][1] is np.ma.masked and t[name][0] is not np.ma.masked
    assert t["s"][:].compressed().tolist() == ["a", "cc", "", "ffff"]
    assert t["i"][2] == 2 and t["f"][:].sum() == (0 + 2 + 3 + 5) * 1.5
    assert t["d"][:].compressed().tolist() == np.array([0, 2, 3, 5], "M8[D]").tolist()
    nested = t.cols["n"]
    assert null_count(nested.cols["q"]) == 2 and null_count(nested.cols["p"]) == 0
    assert read_valid(t.cols["i"].data, range(6)) is None  # a plain column: cannot be missing
    # Whole rows are masked arrays too.
    rows = t[:]
    assert isinstance(rows, np.ma.MaskedArray) and rows.mask["f"].tolist() == [0, 1, 0, 0, 1, 0]
    assert rows.mask["s"][4] and not rows.mask["s"][3]
    assert t[1]["f"] is np.ma.masked and t[2]["f"] == 3.0


def test_reductions_skip_missing_as_pandas_does(where):
    rng = np.random.default_rng(3)
    values = rng.normal(size=1000)
    values[rng.random(1000) < 0.3] = np.nan
    s = pd.Series(values)
    t = ca.ctable.fromdataframe(pd.DataFrame({"x": s}), **where)
    col = t["x"]
    assert col.null_count() == s.isna().sum() and col.count() == s.count()
    assert np.isclose(col.sum(), s.sum()) and np.isclose(col.mean(), s.mean())
    assert np.isclose(col.std(ddof=1), s.std()) and np.isclose(col.var(ddof=1), s.var())
    assert col.min() == s.min() and col.max() == s.max()
    empty = ca.ctable({"x": np.ma.masked_all(3, dtype=float)})["x"]
    assert empty.sum() == 0 and np.isnan(empty.mean()) and empty.min() is np.ma.masked


def test_append_setitem_resize_and_versions(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable({"a": np.arange(4), "x": np.ma.masked_array([1.0, 2, 3, 4], mask=[0, 1, 0, 0]),
                   "s": np.array(["p", "q", None, "r"], dtype=object)}, rootdir=root)
    t.snapshot("v0")
    t.append((4, None, "z"))
    t.append({"a": [5, 6], "x": np.ma.masked_array([5.0, 6], mask=[1, 0]), "s": [None, "w"]})
    t.append([[7], [7.0], ["v"]])
    assert t["x"][:].mask.tolist() == [0, 1, 0, 0, 1, 1, 0, 0]
    assert t["s"][:].mask.tolist() == [0, 0, 1, 0, 0, 1, 0, 0]
    t["x"][0] = None
    t["x"][1] = 20.0  # present again
    t["s"][2] = "filled"
    t["x"][6:8] = np.ma.masked_array([60.0, 70.0], mask=[0, 1])
    t.flush()
    t.snapshot("v1")
    assert t["x"][:].mask.tolist() == [1, 0, 0, 0, 1, 1, 0, 1]
    assert t["x"][1] == 20.0 and t["s"][2] == "filled"
    t.resize(10)  # grown rows are missing
    assert t["x"][:].mask.tolist()[-2:] == [True, True] and t["s"][9] is np.ma.masked
    t.resize(3)
    assert len(t["x"]) == 3 and t["x"][:].mask.tolist() == [1, 0, 0]
    t.close()
    old = ca.open(root, tag="v1")
    assert old["x"][:].mask.tolist() == [1, 0, 0, 0, 1, 1, 0, 1] and len(old) == 8
    older = ca.open(root, tag="v0")
    assert older["x"][:].mask.tolist() == [0, 1, 0, 0] and older["s"][2] is np.ma.masked
    now = ca.open(root, mode="r")
    assert len(now) == 3 and now["x"][:].mask.tolist() == [1, 0, 0]


def test_a_column_gains_validity_on_its_first_missing_value(where):
    t = ca.ctable({"a": np.arange(3), "s": np.array(["x", "y", "z"], dtype=object)}, **where)
    assert read_valid(t.cols["a"], range(3)) is None
    t.append((3, None))
    t.append({"a": np.ma.masked_array([4], mask=[1]), "s": ["w"]})
    assert isinstance(t.cols["a"], NullableColumn) and isinstance(t.cols["s"], NullableColumn)
    assert t.names == ["a", "s"]
    assert t["a"][:].mask.tolist() == [0, 0, 0, 0, 1] and t["s"][3] is np.ma.masked
    assert t["a"][:4].tolist() == [0, 1, 2, 3]
    t = _reopen(t, where, mode="r")
    assert t.null_counts() == {"a": 1, "s": 1}
    t2 = ca.ctable({"a": np.arange(3)}, **({} if not where else
                                          {"rootdir": where["rootdir"] + "2"}))
    t2.make_nullable("a")
    t2["a"][1] = None
    assert t2["a"][:].mask.tolist() == [0, 1, 0]


def test_a_failed_write_leaves_the_old_state(where, monkeypatch):
    t = ca.ctable({"a": np.arange(3), "x": np.ma.masked_array([1.0, 2, 3], mask=[0, 1, 0])},
                  **where)
    real = ca.carray.append

    def broken(self, values):
        if np.asarray(values).dtype == np.bool_:  # the validity: after the values
            raise OSError("disk full")
        return real(self, values)

    monkeypatch.setattr(ca.carray, "append", broken)
    with pytest.raises(OSError, match="disk full"):
        t.append((3, None))
    monkeypatch.undo()
    assert len(t) == 3 and len(t["x"]) == 3 and t["x"][:].mask.tolist() == [0, 1, 0]
    assert len(t.cols["x"].data) == 3 and len(t.cols["a"]) == 3
    back = _reopen(t, where, mode="r")
    assert len(back) == 3 and back["x"][:].mask.tolist() == [0, 1, 0]
    assert back["x"][:].filled(-1).tolist() == [1.0, -1, 3.0]


def test_copy_keeps_missing_values(where, tmp_path):
    t = ca.ctable(_columns(), **where)
    c = ca.ctable(t, rootdir=str(tmp_path / "copy"))
    for name in ("i", "s", "d"):
        assert c[name][:].mask.tolist() == t[name][:].mask.tolist()


def test_bcolz_tables_refuse_missing_values(tmp_path):
    root = str(tmp_path / "b")
    with pytest.raises(UnsupportedDTypeError, match="bcolz 1.x"):
        ca.ctable({"x": np.ma.masked_array([1.0, 2], mask=[0, 1])}, rootdir=root, mode="w",
                  format="bcolz")
    t = ca.ctable({"x": np.arange(3.0)}, rootdir=str(tmp_path / "b2"), format="bcolz")
    with pytest.raises(UnsupportedDTypeError, match="bcolz 1.x"):
        t.append([[None]])
    assert len(t) == 3


# -- pandas, Arrow, Parquet, duckdb, polars ----------------------------------------------------


def _frame():
    return pd.DataFrame({
        "i": pd.array([1, None, 3, 4], dtype="Int64"),
        "f": [1.5, np.nan, 70.0, np.nan],
        "F": pd.array([0.5, None, 2.0, 3.0], dtype="Float64"),
        "b": pd.array([True, None, False, True], dtype="boolean"),
        "s": ["a", None, "c", "dd"],
        "o": pd.Series(["a", None, "c", None], dtype=object),
        "t": pd.to_datetime(["2020-01-01", None, "2021-06-01", "2022-01-01"]),
        "full": [1, 2, 3, 4],
    })


def test_pandas_missing_values_round_trip(where):
    df = _frame()
    t = ca.ctable.fromdataframe(df, **where)
    t = _reopen(t, where, mode="r")
    assert t.null_counts() == df.isna().sum().to_dict()
    assert read_valid(t.cols["full"], range(4)) is None  # nothing missing: no validity
    out = t.todataframe()
    assert out.isna().equals(df.isna())
    assert str(out["i"].dtype) == "Int64" and str(out["b"].dtype) == "boolean"
    assert out["f"].dtype == np.float64 and out["t"].dtype.kind == "M"
    for name in df.columns:
        assert out[name].dropna().tolist() == df[name].dropna().tolist(), name


def test_arrow_nulls_of_every_type_round_trip(where):
    table = pa.table({
        "i8": pa.array([1, None, 3], pa.int8()), "u64": pa.array([None, 2, 3], pa.uint64()),
        "f": pa.array([1.0, None, 2.0]), "b": pa.array([None, True, False]),
        "s": pa.array(["x", None, "zz"]), "ls": pa.array([None, "y", "z"], pa.large_string()),
        "ts": pa.array([0, None, 2], pa.timestamp("ms")), "d": pa.array([1, 2, None], pa.date32()),
        "dict": pa.array(["u", None, "u"]).dictionary_encode(),
        "list": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6.0)), 2,
                                                  mask=pa.array([False, True, False])),
    })
    t = ca.ctable.from_arrow(table, **where)
    t = _reopen(t, where, mode="r")
    back = t.to_arrow()
    for name in table.column_names:
        assert back.column(name).null_count == table.column(name).null_count, name
        expected = table.column(name)
        if pa.types.is_dictionary(expected.type):
            expected = expected.cast(pa.string())
        assert back.column(name).to_pylist() == expected.to_pylist(), name
    assert pa.table(t).equals(back)  # the C stream, a batch at a time


def test_parquet_round_trip_with_nulls(tmp_path, monkeypatch):
    from carray.integrations.convert import convert

    monkeypatch.setattr("carray.table.interop.STREAM_ROWS", 3)  # several row groups
    # The first row group has no nulls in 'x': the column gains validity on a later one.
    arrow = pa.table({"x": pa.array([1, 2, 3, None, 5, 6, 7]),
                      "s": pa.array(["a", None, "c", "d", "e", None, "g"])})
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow.parquet is a test dependency")
    pq.write_table(arrow, tmp_path / "in.parquet", row_group_size=3)
    convert(tmp_path / "in.parquet", tmp_path / "t.ctable")
    t = ca.open(tmp_path / "t.ctable", mode="r")
    assert t["x"][:].mask.tolist() == [0, 0, 0, 1, 0, 0, 0]
    convert(tmp_path / "t.ctable", tmp_path / "out.parquet")
    assert pq.read_table(tmp_path / "out.parquet").equals(arrow.cast(pa.schema(
        [("x", pa.int64()), ("s", pa.large_string())])))


def test_duckdb_counts_what_pandas_counts():
    duckdb = pytest.importorskip("duckdb", reason="duckdb is a test dependency")
    rng = np.random.default_rng(26)
    delay = rng.normal(10, 40, 5000)
    delay[rng.random(5000) < 0.1] = np.nan
    df = pd.DataFrame({"dep_delay": delay, "carrier": rng.choice(["UA", "AA"], 5000)})
    t = ca.ctable.fromdataframe(df)
    expected = int((df["dep_delay"] > 60).sum())
    got = duckdb.sql("select count(*) from t where dep_delay > 60").fetchall()[0][0]
    assert got == expected == len(t.fetchwhere("dep_delay > 60"))
    nulls = duckdb.sql("select count(*) from t where dep_delay is null").fetchall()[0][0]
    assert nulls == int(df["dep_delay"].isna().sum())


# -- queries: three-valued logic --------------------------------------------------------------


def test_queries_follow_three_valued_logic(where):
    t = ca.ctable({"a": np.arange(6),
                   "x": np.ma.masked_array([1.0, 5, 3, 7, 2, 9], mask=[0, 1, 0, 0, 1, 0]),
                   "s": np.array(["p", None, "q", None, "p", "r"], dtype=object)}, **where)

    def rows(expr):
        return t.fetchwhere(expr)["a"].tolist()

    assert rows("x > 2") == [2, 3, 5]
    assert rows("~(x > 2)") == [0]  # not unknown is unknown
    assert rows("(x > 2) | (a == 1)") == [1, 2, 3, 5]  # unknown or True is True
    assert rows("(x > 2) & (a < 3)") == [2]
    assert rows("isnull(x)") == [1, 4] and rows("notna(x)") == [0, 2, 3, 5]
    assert rows("s == 'p'") == [0, 4] and rows("s != 'p'") == [2, 5]
    assert rows("isna(s) | (x > 8)") == [1, 3, 5]
    assert rows("x + a > 5") == [3, 5]  # arithmetic with a missing operand is unknown
    assert [r.a for r in t.where("x < 4")] == [0, 2]
    assert [b["a"].tolist() for b in t.whereblocks("x < 4")] == [[0, 2]]
    doubled = t.eval("x * 2", out_flavor="numpy")
    assert doubled.mask.tolist() == [0, 1, 0, 0, 1, 0] and doubled[3] == 14
    assert rows("(a > 3) | isnull(s)") == [1, 3, 4, 5]


def test_a_filter_over_nulls_equals_polars():
    pl = pytest.importorskip("polars", reason="polars is a test dependency")
    rng = np.random.default_rng(5)
    n = 3000
    x = rng.normal(size=n)
    y = rng.integers(0, 10, n).astype(float)
    df = pd.DataFrame({"x": x, "y": y, "k": np.arange(n)})
    df.loc[rng.random(n) < 0.2, "x"] = np.nan
    df.loc[rng.random(n) < 0.2, "y"] = np.nan
    t = ca.ctable.fromdataframe(df)
    lf = pl.from_arrow(t.to_arrow())
    mine = t.fetchwhere("((x > 0) | (y < 3)) & ~(y == 5)")["k"].tolist()
    theirs = lf.filter(((pl.col("x") > 0) | (pl.col("y") < 3)) & ~(pl.col("y") == 5))
    assert mine == theirs["k"].to_list()
    assert t["x"].sum() == pytest.approx(lf["x"].sum())
    assert t["y"].mean() == pytest.approx(lf["y"].mean())
    assert t["x"].std(ddof=1) == pytest.approx(lf["x"].std())
    assert t["x"].count() == lf["x"].count()


def test_read_any_gives_fillers():
    t = ca.ctable({"x": np.ma.masked_array([1, 2, 3], mask=[0, 1, 0])})
    assert read_any(t.cols["x"], range(3)).tolist() == [1, 0, 3]
    assert read_any(t.cols["x"], np.array([2, 1])).tolist() == [3, 0]


def test_query_results_keep_missing_values(where):
    t = ca.ctable({"a": np.arange(6),
                   "x": np.ma.masked_array([1.0, 5, 3, 7, 2, 9], mask=[0, 1, 0, 0, 1, 0]),
                   "s": np.array(["p", None, "q", None, "p", "r"], dtype=object)}, **where)
    out = t.fetchwhere("a >= 1")
    assert isinstance(out, np.ma.MaskedArray)
    assert out.mask["x"].tolist() == [1, 0, 0, 1, 0] and out.mask["s"].tolist() == [1, 0, 1, 0, 0]
    assert [tuple(r) for r in t.where("a > 2")] == [(3, 7.0, None), (4, None, "p"),
                                                      (5, 9.0, "r")]
    blocks = list(t.whereblocks("a >= 0", blen=4))
    assert [b.mask["x"].tolist() for b in blocks] == [[0, 1, 0, 0], [1, 0]]
    sub = t.fetchwhere("a > 0", out_flavor="ctable")
    assert sub.null_counts() == {"a": 0, "x": 2, "s": 2}
    assert t.fetchwhere("a > 10").shape == (0,)


def test_verify_a_table_with_missing_values(tmp_path):
    from carray.core.problems import Problem
    from carray.registry import verify

    root = str(tmp_path / "t")
    t = ca.ctable({"a": np.arange(3), "s": np.array(["a", None, "c"], dtype=object)},
                  rootdir=root)
    t.append((None, "d"))  # 'a' gains validity
    t.close()
    findings = list(verify(root))
    assert findings and not [f for f in findings if isinstance(f, Problem)]


def test_copies_iteration_and_pickles_keep_missing_values(where, tmp_path):
    import pickle

    t = ca.ctable({"a": np.arange(4), "x": np.ma.masked_array([1.0, 2, 3, 4], mask=[0, 1, 0, 0]),
                   "s": np.array(["a", None, "c", "d"], dtype=object)}, **where)
    assert [tuple(r) for r in t] == [(0, 1.0, "a"), (1, None, None), (2, 3.0, "c"),
                                     (3, 4.0, "d")]
    # (A stored table pickles as its reopening: in memory, as its columns.)
    pickled = [pickle.loads(pickle.dumps(t))] if not where else []
    for other in (t.copy(), t.copy(rootdir=str(tmp_path / "c")), *pickled):
        assert other.null_counts() == {"a": 0, "x": 1, "s": 1}
        assert other[:].mask.tolist() == t[:].mask.tolist()
    assert ca.eval("x * 2", user_dict={"x": t.cols["x"]}, out_flavor="numpy").mask.tolist() \
        == [False, True, False, False]


def test_rows_set_with_missing_values(where):
    t = ca.ctable({"a": np.arange(4), "x": np.ma.masked_array([1.0, 2, 3, 4], mask=[0, 1, 0, 0]),
                   "s": np.array(["a", None, "c", "d"], dtype=object)}, **where)
    t[2] = (7, None, None)
    t[1] = (5, 5.5, "z")  # present again
    t[0:2] = (None, 3.0, "k")  # 'a' gains validity
    t[[3]] = np.ma.masked_array(np.array([(9, 9.0, "w")], dtype=t.dtype), mask=[(0, 1, 0)])
    t = _reopen(t, where, mode="r")
    assert [tuple(r) for r in t] == [(None, 3.0, "k"), (None, 3.0, "k"), (7, None, None),
                                     (9, None, "w")]


def test_queries_over_missing_values_on_worker_threads(monkeypatch):
    monkeypatch.setattr("carray.array.expression._GROUP_BYTES", 1 << 14)  # many groups: threaded
    rng = np.random.default_rng(9)
    n = 40_000
    x = np.ma.masked_array(rng.random(n), mask=rng.random(n) < 0.3)
    t = ca.ctable({"k": np.arange(n), "x": x, "y": rng.random(n)}, chunklen=1000)
    assert t.cols["x"].parallel_reads
    # (numpy.ma masks 'missing | True'; Kleene's logic says True.)
    expected = np.flatnonzero((x > 0.5).filled(False) | (t["y"][:] < 0.1))
    assert t.fetchwhere("(x > 0.5) | (y < 0.1)")["k"].tolist() == expected.tolist()
    doubled = t.eval("x * 2", out_flavor="numpy")
    assert doubled.mask.tolist() == x.mask.tolist()


def test_dask_partitions_hold_missing_values():
    pytest.importorskip("dask.dataframe", reason="dask.dataframe is a test dependency")
    t = ca.ctable({"a": np.arange(6),
                   "x": np.ma.masked_array(np.arange(6.0), mask=[0, 1, 0, 0, 1, 0]),
                   "i": np.ma.masked_array(np.arange(6), mask=[1, 0, 0, 0, 0, 0])})
    d = t.to_dask(partition_rows=2)
    assert d.count().compute().tolist() == [6, 4, 5]
    assert d["x"].sum().compute() == 10.0


class _AnswersForItself:
    """A column that says itself what is missing (as categorical columns do)."""

    def __init__(self, values, valid):
        self._values, self._valid = np.asarray(values), np.asarray(valid, dtype=bool)
        self.dtype, self.chunklen, self.ndim = self._values.dtype, 4, 1

    def __len__(self):
        return len(self._values)

    @property
    def shape(self):
        return self._values.shape

    def read_rows(self, rows, out=None):
        return self._values[rows.start:rows.stop]

    def take(self, rows):
        return self._values[rows]

    def valid(self, rows):
        return self._valid[rows] if not isinstance(rows, range) else \
            self._valid[rows.start:rows.stop]

    def null_count(self):
        return int((~self._valid).sum())


def test_columns_answering_for_themselves_are_read_through_the_contract():
    fake = _AnswersForItself([1, 2, 3, 4, 5], [1, 0, 1, 1, 0])
    t = ca.ctable.over_columns({"k": ca.carray(np.arange(5)), "c": fake}, 5)
    assert null_count(fake) == 2 and read_valid(fake, range(1, 3)).tolist() == [False, True]
    assert t.null_counts() == {"k": 0, "c": 2}
    assert t.fetchwhere("c > 1")["k"].tolist() == [2, 3]
    assert t.fetchwhere("isnull(c) | (c == 1)")["k"].tolist() == [0, 1, 4]
    t.make_nullable("c")  # it holds missing values already: nothing to do
    assert t.cols["c"] is fake


def test_zone_maps_skip_blocks_of_columns_with_missing_values():
    from carray.table.query import evaluator

    n = 20_000
    x = np.ma.masked_array(np.arange(n, dtype=float), mask=np.arange(n) % 7 == 0)
    t = ca.ctable({"k": np.arange(n), "x": x}, chunklen=1000)
    for expr in ["x > 18500", "~(x < 18500)", "(x > 18500) | isnull(x)", "isnan(x)",
                 "(x < 10) & (k > 5)", "notnull(x) & ~(x != 3)"]:
        kept = t.fetchwhere(expr)["k"].tolist()
        assert kept == t.fetchwhere(expr, prune=False)["k"].tolist(), expr
        assert kept == np.flatnonzero(t.eval(expr, out_flavor="numpy")).tolist(), expr
    assert evaluator(t, "x > 18500", None, None, 0)._block_mask().sum() == 2


def test_printed_tables_show_missing_values():
    x = np.ma.masked_array(np.arange(50.0), mask=np.arange(50) % 3 == 0)
    t = ca.ctable({"k": np.arange(50), "x": x})
    assert "(48, --)" in str(t)
    assert "<td>48</td><td>--</td>" in t._repr_html_()


def test_nested_fields_and_nd_rows_with_missing_values(where):
    rec = np.ma.masked_array(np.array([(i, i / 2) for i in range(3)],
                                      dtype=[("p", "i4"), ("q", "f8")]))
    rec["q"][1] = np.ma.masked
    grid = np.ma.masked_array(np.arange(6.0).reshape(3, 2), mask=[[0, 0], [1, 1], [0, 0]])
    t = ca.ctable({"n": rec, "l": grid}, **where)
    more = np.ma.masked_array(np.array([(7, 7.5)], dtype=rec.dtype), mask=[(1, 0)])
    t.append({"n": more, "l": np.ma.masked_array([[8.0, 9.0]], mask=[[0, 0]])})
    t = _reopen(t, where, mode="r")
    assert t.cols["n"].null_counts() == {"p": 1, "q": 1}
    rows = t[:]
    assert rows.mask["n"]["q"].tolist() == [0, 1, 0, 0] and rows.mask["n"]["p"].tolist() == \
        [0, 0, 0, 1]
    assert rows.mask["l"].tolist() == [[0, 0], [1, 1], [0, 0], [0, 0]]
    assert t["l"][:].mask.any(axis=1).tolist() == [False, True, False, False]
    assert t.to_arrow(["l"]).column("l").to_pylist() == [[0.0, 1.0], None, [4.0, 5.0], [8.0, 9.0]]


def test_masked_array_variables_in_expressions():
    x = np.ma.masked_array([1.0, 5, 3], mask=[0, 1, 0])
    scope = {"x": x, "y": np.array([0.0, 10, 10])}
    assert ca.eval("(x > 2) | (y > 5)", user_dict=scope, out_flavor="numpy").tolist() == \
        [False, True, True]
    assert ca.eval("x + y", user_dict=scope, out_flavor="numpy").mask.tolist() == \
        [False, True, False]
    t = ca.ctable({"k": np.arange(3)})
    assert t.fetchwhere("(k > 0) & (m > 2)", user_dict={"m": x})["k"].tolist() == [2]


def test_a_column_keeps_its_attributes_when_it_gains_validity(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable({"a": np.arange(3)}, rootdir=root)
    t.cols["a"].attrs["unit"] = "m"
    t.flush()
    t.append([[None]])
    t.cols["a"].attrs["more"] = 1
    t.close()
    with ca.open(root, mode="r") as back:
        assert isinstance(back.cols["a"], NullableColumn)
        assert dict(back.cols["a"].attrs) == {"unit": "m", "more": 1}


def test_a_column_set_whole_with_missing_values_gains_validity(where):
    t = ca.ctable({"a": np.arange(3), "x": np.arange(3.0)}, **where)
    t["x"] = [1.0, None, 2.0]
    t["a"] = np.ma.masked_array([5, 6, 7], mask=[1, 0, 0])
    t = _reopen(t, where, mode="r")
    assert [tuple(r) for r in t] == [(None, 1.0), (6, None), (7, 2.0)]


# -- missing values in string columns: group-by, counts and string functions ------------------


def tailnums(n: int, seed: int = 4) -> pd.Series:
    rng = np.random.default_rng(seed)
    s = pd.Series(rng.choice(["N101", "N22", "XA", "", "Nz"], n), dtype=object)
    s[rng.random(n) < 0.1] = None
    return s


@pytest.mark.parametrize("blen", [None, 97])  # one block, and blocks merged
def test_string_keys_with_missing_values_group_and_count(where, blen):
    s = tailnums(3000)
    t = ca.ctable({"tailnum": s.to_numpy(object), "x": np.arange(3000)}, chunklen=97,
                  **where)
    got = t.value_counts("tailnum", dropna=False).todataframe()
    want = s.value_counts(dropna=False)
    assert dict(zip(got["tailnum"].fillna("<NA>"), got["count"], strict=True)) == \
        {("<NA>" if pd.isna(k) else k): v for k, v in want.items()}
    groups = t.groupby("tailnum", dropna=False).agg({"n": ("x", "count"),
                                                     "s": ("x", "sum")}, blen=blen)
    assert groups.cols["tailnum"].null_count() == 1  # the group of missing keys: missing
    back = groups.todataframe()
    want = pd.DataFrame({"tailnum": s, "x": np.arange(3000)}).groupby(
        "tailnum", dropna=False).agg(n=("x", "count"), s=("x", "sum")).reset_index()
    assert back["tailnum"].isna().tolist() == want["tailnum"].isna().tolist()
    assert back["tailnum"].dropna().tolist() == want["tailnum"].dropna().tolist()
    assert back["n"].tolist() == want["n"].tolist() and back["s"].tolist() == want["s"].tolist()


def test_string_functions_on_missing_values_are_unknown(where):
    s = tailnums(500)
    t = ca.ctable({"tailnum": s.to_numpy(object), "x": np.arange(500)}, **where)
    text = s.astype(pd.StringDtype())  # pandas' nullable strings: NA stays NA
    for expr, want in (("startswith(tailnum, 'N')", text.str.startswith("N")),
                       ("~startswith(tailnum, 'N')", ~text.str.startswith("N")),
                       ("endswith(tailnum, '1') | isnull(tailnum)",
                        text.str.endswith("1") | text.isna()),
                       ("contains(tailnum, '2') & (x > 100)",
                        text.str.contains("2", regex=False) & (np.arange(500) > 100))):
        got = t.fetchwhere(expr, outcols=["x"])["x"]
        assert got.tolist() == np.flatnonzero(want.fillna(False).to_numpy(bool)).tolist(), expr


@pytest.mark.parametrize("expr", ["startswith(x, 'N')", "startswith(tailnum, 5)",
                                  "endswith(tailnum, tailnum)"])
def test_string_functions_called_wrong_are_expression_errors(expr):
    t = ca.ctable({"tailnum": tailnums(50).to_numpy(object), "x": np.arange(50)})
    with pytest.raises(ca.ExpressionError, match="needs"):
        t.fetchwhere(expr)
