"""Categorical table columns: codes plus a dictionary, in memory and on disk; round trips
with pandas and Arrow, writes, versions, and queries that compare codes."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from table_places import reopen

import carray as ca
from carray import registry
from carray.core.problems import tally
from carray.errors import (
    ExpressionError,
    FormatError,
    ReadOnlyError,
    UnsupportedDTypeError,
)
from carray.table import query as table_query
from carray.table.columns.category import CategoryColumn
from carray.table.columns.kinds import categories_of, read_any, read_codes

pd = pytest.importorskip("pandas", reason="pandas: the categorical round trips")
pa = pytest.importorskip("pyarrow", reason="pyarrow: dictionary arrays")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow.parquet: Parquet files")

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])




def frame():
    return pd.DataFrame({
        "carrier": pd.Categorical(["UA", "AA", None, "UA", "DL"],
                                  categories=["UA", "AA", "DL", "ZZ"]),
        "x": np.arange(5),
    })


# -- how a column is made, and what it holds ---------------------------------------------------


def test_pandas_categorical_round_trips_with_categories_and_missing(where):
    t = reopen(ca.ctable(frame(), **where))
    col = t.cols["carrier"]
    assert isinstance(col, CategoryColumn)
    assert col.categories.tolist() == ["UA", "AA", "DL", "ZZ"]  # unused 'ZZ' kept
    assert col.codes().tolist() == [0, 1, -1, 0, 2]
    assert col[:].tolist() == ["UA", "AA", None, "UA", "DL"]
    assert col.null_count() == 1 and col.valid().tolist() == [True, True, False, True, True]
    assert t.dtype["carrier"] == np.dtype(object)
    pd.testing.assert_frame_equal(t.todataframe(), frame())


def test_ordered_flag_and_numeric_categories_round_trip(where):
    df = pd.DataFrame({
        "size": pd.Categorical(["m", "s", "l", None], categories=["s", "m", "l"],
                               ordered=True),
        "n": pd.Categorical([10, 20, None, 10]),
        "when": pd.Categorical(pd.to_datetime(["2024-01-01", None, "2024-01-02",
                                               "2024-01-01"])),
    })
    t = reopen(ca.ctable(df, **where))
    assert t.cols["size"].ordered and not t.cols["n"].ordered
    assert t.cols["n"].categories.dtype == np.int64
    back = t.todataframe()
    pd.testing.assert_frame_equal(back, df)
    assert back["size"].cat.ordered


def test_arrow_dictionary_arrays_and_the_c_stream_round_trip(where):
    arr = pa.chunked_array([
        pa.array(["b", "a", None]).dictionary_encode(),
        pa.array(["c", "b"]).dictionary_encode(),  # another dictionary: unified
    ])
    src = pa.table({"k": arr, "v": pa.array([1, 2, 3, 4, 5])})
    t = reopen(ca.ctable(src, **where))
    assert t.cols["k"][:].tolist() == ["b", "a", None, "c", "b"]
    out = t.to_arrow()
    assert pa.types.is_dictionary(out.schema.field("k").type)
    assert out.column("k").to_pylist() == ["b", "a", None, "c", "b"]
    streamed = pa.table(t)  # through __arrow_c_stream__
    assert streamed.schema == out.schema
    assert streamed.column("k").to_pylist() == ["b", "a", None, "c", "b"]


def test_a_null_in_an_arrow_dictionary_is_a_missing_value():
    arr = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, None, 1], pa.int8()),
                                         pa.array(["a", None, "b"]))
    col = ca.ctable(pa.table({"k": arr})).cols["k"]
    assert col.categories.tolist() == ["a", "b"] and col.codes().tolist() == [0, -1, 1, -1, -1]


def test_parquet_dictionary_columns_stay_categorical(tmp_path):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"carrier": ["UA", "AA", "UA", None]}), path)
    t = ca.ctable(pq.read_table(path, read_dictionary=["carrier"]))
    assert isinstance(t.cols["carrier"], CategoryColumn)
    assert t.cols["carrier"][:].tolist() == ["UA", "AA", "UA", None]


def test_carray_convert_keeps_categories_and_zones_through_parquet(tmp_path, monkeypatch):
    from carray.integrations.convert import convert  # noqa: PLC0415 - only this test converts

    monkeypatch.setattr("carray.table.interop.STREAM_ROWS", 4)  # batches, each a dictionary
    n = 10
    src = pd.DataFrame({
        "c": pd.Categorical(["UA", None, "AA", "DL", "UA"] * 2, categories=["UA", "AA", "DL"],
                            ordered=True),
        "ts": pd.date_range("2024-01-01", periods=n, freq="D", tz="America/New_York"),
    })
    ca.ctable(src, rootdir=str(tmp_path / "t.ctable")).close()
    convert(tmp_path / "t.ctable", tmp_path / "t.parquet")
    assert pa.types.is_dictionary(pq.read_schema(tmp_path / "t.parquet").field("c").type)
    convert(tmp_path / "t.parquet", tmp_path / "back.ctable")
    back = ca.open(str(tmp_path / "back.ctable"), mode="r")
    assert isinstance(back.cols["c"], CategoryColumn)
    pd.testing.assert_frame_equal(back.todataframe(), src)


def test_explicit_categorical_addcol_and_categorize(where):
    t = ca.ctable({"x": np.arange(6), "s": np.array(list("abcabc"), dtype=object)}, **where)
    t.addcol(ca.categorical([3, 1, None, 3, 1, 2]), name="n")
    t.addcol(ca.categorical(["lo", "hi", "hi", "lo", "mid", "hi"], ordered=True), name="o")
    t.addcol(ca.categorical(["b", "a", "b", "b", "a", "a"], categories=["b", "a", "c"]),
             name="e")
    t.categorize("s")
    assert t.names == ["x", "s", "n", "o", "e"]
    assert isinstance(t.cols["s"], CategoryColumn) and isinstance(t.cols["n"], CategoryColumn)
    t = reopen(t)
    assert t.cols["s"].categories.tolist() == ["a", "b", "c"]
    assert t.cols["n"].categories.tolist() == [1, 2, 3]
    assert t.cols["n"].null_count() == 1
    assert t.cols["o"].ordered and t.cols["o"].categories.tolist() == ["hi", "lo", "mid"]
    assert t.cols["e"].categories.tolist() == ["b", "a", "c"] and not t.cols["e"].ordered
    assert t.cols["e"].codes().tolist() == [0, 1, 0, 0, 1, 1]
    t.decategorize("s")
    assert not isinstance(t.cols["s"], CategoryColumn) and t.cols["s"][:].tolist() == \
        list("abcabc")
    with pytest.raises(ValueError, match="missing"):
        t.decategorize("n")  # ints cannot hold the missing value


def test_the_contract_reads_codes_categories_and_values(where):
    t = ca.ctable(frame(), **where)
    col = t.cols["carrier"]
    assert categories_of(col).tolist() == ["UA", "AA", "DL", "ZZ"]
    assert read_codes(col, range(1, 4)).tolist() == [1, -1, 0]
    assert read_codes(col, np.array([4, 0])).tolist() == [2, 0]
    assert read_any(col, np.array([2, 4])).tolist() == [None, "DL"]
    assert categories_of(t.cols["x"]) is None and read_codes(t.cols["x"], range(2)) is None


# -- writes -------------------------------------------------------------------------------------


def test_appends_with_new_values_extend_the_dictionary(where):
    t = ca.ctable(frame(), **where)
    t.append({"carrier": ["NEW", None, "AA"], "x": [5, 6, 7]})
    t.append(pd.DataFrame({"carrier": pd.Categorical(["ZZ", "OTHER"]), "x": [8, 9]}))
    t.append([("UA", 10)])
    t = reopen(t)
    col = t.cols["carrier"]
    assert col.categories.tolist() == ["UA", "AA", "DL", "ZZ", "NEW", "OTHER"]
    assert col[:].tolist() == ["UA", "AA", None, "UA", "DL", "NEW", None, "AA", "ZZ",
                               "OTHER", "UA"]
    assert col.codes(range(5, 11)).tolist() == [4, -1, 1, 3, 5, 0]


def test_setitem_resize_and_edits_through_the_column(where):
    t = ca.ctable(frame(), **where)
    t[0] = ("DL", 100)
    t["carrier"][1] = None
    t.cols["carrier"][3:5] = ["Q", "UA"]
    t.resize(7)
    t = reopen(t)
    assert t.cols["carrier"][:].tolist() == ["DL", None, None, "Q", "UA", None, None]
    t.resize(2)
    t["carrier"] = ["AA", "AA"]
    t = reopen(t)
    assert t.cols["carrier"][:].tolist() == ["AA", "AA"] and t["x"][:].tolist() == [100, 1]
    assert "Q" in t.cols["carrier"].categories.tolist()  # the dictionary only grows


def test_ordered_categories_refuse_new_values_and_a_failed_append_changes_nothing(where):
    df = pd.DataFrame({"c": pd.Categorical(["a", "b"]),
                       "o": pd.Categorical(["lo", "hi"], categories=["lo", "hi"],
                                           ordered=True)})
    t = reopen(ca.ctable(df, **where))
    before = t.cols["c"].categories.tolist()
    with pytest.raises(ValueError, match="ordered categories"):
        t.append({"c": ["NEW"], "o": ["mid"]})  # 'c' extends its dictionary first
    assert len(t) == 2 and t.cols["c"][:].tolist() == ["a", "b"]
    t = reopen(t)
    assert len(t) == 2 and t.cols["o"][:].tolist() == ["lo", "hi"]
    assert t.cols["c"].categories.tolist() == before  # rolled back with the codes
    t.append({"c": ["b"], "o": ["hi"]})
    assert t.cols["c"][:].tolist() == ["a", "b", "b"]


def test_versions_keep_codes_and_dictionary_together(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable(frame(), rootdir=root)
    v0 = t.snapshot("before")
    t.append({"carrier": ["NEW"], "x": [5]})
    t.commit("new carrier")
    old = ca.open(root, tag="before")
    assert len(old) == 5 and old.cols["carrier"].categories.tolist() == ["UA", "AA", "DL", "ZZ"]
    assert ca.open(root, mode="r").cols["carrier"][:].tolist()[-1] == "NEW"
    made = {v.id: v.time for v in t.versions()}
    then = ca.open(root, as_of=made[v0])  # by time, the same version
    assert then.version == v0 and then.cols["carrier"].categories.tolist()[-1] == "ZZ"
    t.restore(v0)
    assert t.cols["carrier"].categories.tolist() == ["UA", "AA", "DL", "ZZ"]
    t.append({"carrier": ["OTHER"], "x": [6]})
    assert t.cols["carrier"].codes(range(5, 6)).tolist() == [4]
    t.close()


# kill -9 in the middle of an append that extends the dictionary (see kill_points)

_OLD = (["UA", "AA", None, "UA", "DL"], [1, 2, 3, 4, 5])
_NEW = (["NEW", None, "AA", "OTHER"], [6, 7, 8, 9])


def _crash_create(root: str) -> None:
    ca.ctable({"c": ca.categorical(_OLD[0]), "n": ca.categorical(_OLD[1])}, rootdir=root,
              chunklen=4).close()


def _crash_append(root: str) -> None:
    t = ca.open(root, mode="a")
    t.append({"c": _NEW[0], "n": _NEW[1]})
    t.close()


def _crash_check(root: str) -> str:
    for mode in ("r", "a"):  # a reader first, then a writer that recovers
        t = ca.open(root, mode=mode)
        got = (t.cols["c"][:].tolist(), t.cols["n"][:].tolist())
        if got not in ((_OLD[0], _OLD[1]), (_OLD[0] + _NEW[0], _OLD[1] + _NEW[1])):
            return f"mode {mode}: unexpected rows {got}"
        for name in ("c", "n"):
            codes, cats = t.cols[name].codes(), t.cols[name].categories
            if len(codes) and codes.max() >= len(cats):
                return f"mode {mode}: a code of {name!r} past its dictionary"
        t.close()
    problems, _ = tally(registry.verify(root))
    return "ok" if not problems else f"verify: {problems[:2]}"


def drive_crash(work: str, kills: int) -> dict:
    """Kill the append at ``kills`` storage calls spread over it; the tally of checks."""
    import shutil  # noqa: PLC0415 - the driver's own process

    from kill_points import count_calls, in_child, points  # noqa: PLC0415

    pristine = os.path.join(work, "pristine")
    assert in_child(_crash_create, pristine).error is None
    counting = os.path.join(work, "count")
    shutil.copytree(pristine, counting)

    def counted(root: str) -> int:
        count = count_calls()
        _crash_append(root)
        return count[0]

    total = in_child(counted, counting).result
    out: dict[str, int] = {}
    for at, how in points(total, kills, np.random.default_rng(5)):
        root = os.path.join(work, f"t{at}")
        shutil.copytree(pristine, root)
        killed = in_child(_crash_append, root, at=at, how=how)
        checked = in_child(_crash_check, root)
        result = killed.error or checked.error or checked.result
        out[result] = out.get(result, 0) + 1
    return out


def test_kill9_in_an_append_leaves_codes_and_dictionary_consistent(tmp_path):
    from kill_points import run_driver  # noqa: PLC0415 - the crash tests' helper

    kills = 100 if os.environ.get("CARRAY_SOAK") == "1" else 5
    tally_ = run_driver("test_table_categories", "drive_crash", str(tmp_path), kills)
    assert tally_ == {"ok": sum(tally_.values())}, tally_


def test_read_only_opens_read_and_refuse_writes(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable(frame(), rootdir=root).close()
    t = ca.open(root, mode="r")
    assert t.cols["carrier"][:].tolist() == ["UA", "AA", None, "UA", "DL"]
    with pytest.raises(ReadOnlyError):
        t.cols["carrier"].append(["UA"])
    with pytest.raises(ReadOnlyError):
        t.cols["carrier"][0] = "AA"
    with pytest.raises(ReadOnlyError):
        t.append({"carrier": ["UA"], "x": [9]})
    assert len(ca.open(root, mode="r")) == 5


def test_verify_accepts_a_table_with_categorical_columns(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable({"s": ca.categorical(["a", "b", None]), "n": ca.categorical([1, 2, 1])},
                  rootdir=root)
    t.append({"s": ["c"], "n": [7]})
    t.close()
    problems, checked = tally(registry.verify(root))
    assert problems == [] and checked == 5  # s: codes, offsets, values; n: codes, dictionary


def test_a_code_past_the_dictionary_is_a_format_error():
    col = ca.ctable(frame()).cols["carrier"]
    col.codes_array()[1] = 7  # written past the column's own checks
    with pytest.raises(FormatError, match="past the dictionary"):
        col[:]


def test_bcolz_format_tables_store_decoded_values(tmp_path):
    df = pd.DataFrame({"s": pd.Categorical(["a", "b", "a"]), "f": pd.Categorical([0.5, None, 1])})
    t = ca.ctable(df, rootdir=str(tmp_path / "b"), format="bcolz")  # bcolz has no categories
    assert not isinstance(t.cols["s"], CategoryColumn) and t.cols["s"][:].tolist() == \
        ["a", "b", "a"]
    np.testing.assert_array_equal(t.cols["f"][:], [0.5, np.nan, 1.0])
    with pytest.raises(ValueError, match="missing values"):
        t.addcol(ca.categorical([1, None, 2]), name="n")
    with pytest.raises(UnsupportedDTypeError, match="versioned"):
        CategoryColumn(["a"], rootdir=str(tmp_path / "alone"))  # only inside a table


def test_encoded_values_go_into_plain_columns_decoded(where):
    t = ca.ctable({"s": np.array(["a"], dtype=object), "f": [1.0]}, **where)
    t.append(pd.DataFrame({"s": pd.Categorical(["z"]), "f": pd.Categorical([None, 2.0])[1:]}))
    assert t["s"][:].tolist() == ["a", "z"] and t["f"][:].tolist() == [1.0, 2.0]


def test_in_memory_tables_pickle_and_copy_with_their_categories(tmp_path):
    t = ca.ctable(frame())
    back = pickle.loads(pickle.dumps(t))
    assert back.cols["carrier"][:].tolist() == ["UA", "AA", None, "UA", "DL"]
    for copy in (t.copy(), t.copy(rootdir=str(tmp_path / "c"))):
        assert isinstance(copy.cols["carrier"], CategoryColumn)
        assert copy.cols["carrier"][:].tolist() == ["UA", "AA", None, "UA", "DL"]
        assert copy.cols["carrier"].categories.tolist() == ["UA", "AA", "DL", "ZZ"]


# -- queries ------------------------------------------------------------------------------------


def _rows(t, expr):
    return t.fetchwhere(expr, outcols=["nrow__"])["nrow__"].tolist()


def test_queries_compare_codes_and_values_not_in_the_dictionary_match_nothing(where):
    t = ca.ctable(frame(), **where)
    assert _rows(t, "carrier == 'UA'") == [0, 3]
    assert _rows(t, "'UA' == carrier") == [0, 3]
    assert _rows(t, "carrier == 'nope'") == []
    assert _rows(t, "carrier != 'UA'") == [1, 4]  # a missing value matches nothing
    assert _rows(t, "carrier != 'nope'") == [0, 1, 3, 4]
    assert _rows(t, "carrier in ['UA', 'DL', 'nope']") == [0, 3, 4]
    assert _rows(t, "carrier not in ['UA']") == [1, 4]
    assert _rows(t, "(carrier == 'AA') | (x > 3)") == [1, 4]
    assert _rows(t, "~(carrier == 'UA')") == [1, 4]  # negations reach the comparisons
    assert _rows(t, "not ((carrier == 'AA') & (x > 0))") == [0, 3, 4]
    assert _rows(t, "~~(carrier == 'UA')") == [0, 3]
    assert t.fetchwhere("carrier == 'DL'")[0].tolist() == ("DL", 4)
    assert [r.carrier for r in t.where("carrier in ['AA', 'DL']")] == ["AA", "DL"]
    assert [r.carrier for r in t.where("carrier != 'nope'", skip=1, limit=2)] == ["AA", "UA"]
    assert t.fetchwhere("carrier == 'UA'", prune=False, outcols=["carrier", "nrow__"]).tolist() \
        == [("UA", 0), ("UA", 3)]
    assert t.eval("carrier == 'UA'", out_flavor="numpy").tolist() == \
        [True, False, False, True, False]
    sub = t.fetchwhere("x != 1", out_flavor="ctable")  # a new table: still categorical
    assert isinstance(sub.cols["carrier"], CategoryColumn)
    assert sub.cols["carrier"].categories.tolist() == ["UA", "AA", "DL", "ZZ"]
    assert sub.cols["carrier"][:].tolist() == ["UA", None, "UA", "DL"]


def test_numeric_and_datetime_categories_compare_by_value(where):
    t = ca.ctable({
        "n": ca.categorical([1, 2, None, 3, 2]),
        "f": ca.categorical([0.5, 1.0, 2.0, None, 0.5]),
        "d": pd.Series(pd.Categorical(pd.to_datetime(
            ["2024-01-01", None, "2024-01-02", "2024-01-01", "2024-01-03"]))),
    }, **where)
    assert _rows(t, "n == 2") == _rows(t, "n == 2.0") == [1, 4]
    assert _rows(t, "n == 2.5") == _rows(t, "n == '2'") == []
    assert _rows(t, "n in [1, 3]") == [0, 3] and _rows(t, "n not in [1, 3]") == [1, 4]
    assert _rows(t, "f == 0.5") == [0, 4] and _rows(t, "f != 1") == [0, 2, 4]
    assert _rows(t, "d == '2024-01-01'") == [0, 3]
    assert _rows(t, "d in ['2024-01-02', '2024-01-03T00:00']") == [2, 4]
    assert _rows(t, "d == '2024-01-01T00:00:00.5'") == []


def test_ordering_comparisons_need_ordered_categories(where):
    df = pd.DataFrame({"c": pd.Categorical(["b", "a", "c"]),
                       "o": pd.Categorical(["hi", "lo", None], categories=["lo", "hi"],
                                           ordered=True)})
    t = ca.ctable(df, **where)
    assert _rows(t, "o > 'lo'") == [0] and _rows(t, "o <= 'hi'") == [0, 1]
    assert _rows(t, "'hi' > o") == [1]
    with pytest.raises(ExpressionError, match="unordered"):
        t.fetchwhere("c < 'b'")
    with pytest.raises(ExpressionError, match="not a category"):
        t.fetchwhere("o < 'mid'")
    with pytest.raises(ExpressionError, match="compared with literal"):
        t.fetchwhere("c + 1 > 2")


def test_queries_read_only_the_codes_and_zone_maps_prune_them(tmp_path):
    n = 4096
    values = np.repeat(np.array(["AA", "DL", "UA", "WN"], dtype=object), n // 4)
    t = ca.ctable({"c": ca.categorical(values), "x": np.arange(n)}, chunklen=256,
                  rootdir=str(tmp_path / "t"))
    assert _rows(t, "c == 'UA'") == list(range(2048, 3072))  # learns the zone maps
    ev = table_query.evaluator(t, "c == 'UA'", None, None, 1)
    assert list(ev.columns) == ["c__codes"] and ev.columns["c__codes"].dtype == np.int32
    list(ev.blocks())
    assert ev.skipped == 12  # 4 of 16 blocks hold code 2


_VALUES = st.lists(st.one_of(st.none(), st.sampled_from(["UA", "AA", "DL", "WN", "B6"])),
                   min_size=0, max_size=60)
_LITERALS = st.lists(st.sampled_from(["UA", "AA", "DL", "XX"]), min_size=1, max_size=3)


@FAST
@given(values=_VALUES, lits=_LITERALS, op=st.sampled_from(["==", "!=", "in", "not in"]),
       negate=st.booleans())
def test_query_answers_match_pandas_and_polars(values, lits, op, negate):
    pl = pytest.importorskip("polars", reason="polars: its filter answers")
    s = pd.Series(pd.Categorical(values))
    t = ca.ctable({"c": s, "x": np.arange(len(values))}, chunklen=8)
    if op in ("==", "!="):
        expr = f"c {op} {lits[0]!r}"
        hit = s == lits[0] if op == "==" else (s != lits[0]) & s.notna()
        pcol = pl.col("c") == lits[0] if op == "==" else pl.col("c") != lits[0]
    else:
        expr = f"c {op} {lits!r}"
        hit = s.isin(lits) if op == "in" else ~s.isin(lits) & s.notna()
        pcol = pl.col("c").is_in(lits) if op == "in" else ~pl.col("c").is_in(lits)
    if negate:  # three-valued, as SQL and polars: a missing value stays unmatched
        expr, hit, pcol = f"not ({expr})", ~hit & s.notna(), ~pcol
    got = _rows(t, expr)
    assert got == np.flatnonzero(hit.to_numpy()).tolist()
    frame_pl = pl.DataFrame({"c": pl.Series(values, dtype=pl.String), "i": range(len(values))})
    assert got == frame_pl.filter(pcol)["i"].to_list()


@FAST
@given(values=_VALUES, more=_VALUES, ordered=st.booleans())
def test_round_trips_through_pandas_and_arrow_match(values, more, ordered):
    cats = sorted({v for v in values + more if v is not None})
    s = pd.Categorical(values, categories=cats, ordered=ordered)
    t = ca.ctable({"c": pd.Series(s)})
    t.append({"c": more})
    want = pd.Series(pd.Categorical(values + more, categories=cats, ordered=ordered),
                     name="c")
    pd.testing.assert_series_equal(t.todataframe()["c"], want)
    back = t.to_arrow().column("c").combine_chunks()
    assert back.type.ordered == ordered and back.to_pylist() == values + more
    assert t.cols["c"].null_count() == sum(v is None for v in values + more)


@FAST
@given(values=st.one_of(
    st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=40),
    st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=40),
    st.lists(st.one_of(st.none(), st.floats(-3, 3, allow_nan=False)), max_size=40)))
def test_plain_values_encode_as_pandas_does(values):
    mine = ca.categorical(values)
    if all(v is None for v in values):
        assert (mine.codes == -1).all()
        return
    theirs = pd.Categorical(values)
    np.testing.assert_array_equal(mine.codes, theirs.codes)
    assert mine.categories.tolist() == theirs.categories.tolist()
    col = CategoryColumn(mine)
    col.append(values[::-1])  # the same values again: no new category
    assert col.categories.tolist() == theirs.categories.tolist()
    again = values[::-1]
    valid = col.valid(range(len(values), 2 * len(values)))
    assert valid.tolist() == [v is not None for v in again]
    decoded = col[len(values):]
    assert [decoded[i] for i in np.flatnonzero(valid)] == [v for v in again if v is not None]


def test_dask_partitions_share_the_categorical_dtype_and_zones():
    pytest.importorskip("dask.dataframe", reason="dask: a DataFrame over the table")
    df = pd.DataFrame({
        "carrier": pd.Categorical(["UA", "AA", None, "UA", "DL"] * 20),
        "ts": pd.date_range("2024-01-01", periods=100, freq="h", tz="Europe/Paris"),
    })
    d = ca.ctable(df, chunklen=16).to_dask(partition_rows=32)
    assert d.npartitions == 4 and d.dtypes["carrier"] == df.dtypes["carrier"]
    pd.testing.assert_frame_equal(d.compute(), df)


def test_pandas_and_polars_arrays_given_directly(where):
    import datetime

    pl = pytest.importorskip("polars", reason="polars is a test dependency")
    cat = pd.Categorical(["UA", None, "AA", "UA"], categories=["UA", "AA"], ordered=True)
    t = ca.ctable({"c": cat, "i": pd.array([1, None, 3, 4], dtype="Int64"),
                   "p": pl.Series([1.5, None, 2.0, 0.5]), "ps": pl.Series(["x", None, "", "z"]),
                   "d": pd.Series([datetime.date(2024, 1, 1), None, datetime.date(2024, 3, 1),
                                   datetime.date(2024, 2, 29)])}, **where)
    assert isinstance(t.cols["c"], CategoryColumn)
    back = t.todataframe()
    assert back["c"].dtype == pd.CategoricalDtype(["UA", "AA"], ordered=True)
    assert back["c"].isna().tolist() == [False, True, False, False]
    assert back["i"].dtype == "Int64" and t.dtype["d"] == np.dtype("M8[D]")
    assert t.null_counts() == {"c": 1, "i": 1, "p": 1, "ps": 1, "d": 1}


def test_object_columns_of_other_values_are_typed_errors():
    with pytest.raises(ca.UnsupportedDTypeError, match="'o'"):
        ca.ctable(pd.DataFrame({"o": [1, "a", 2.5]}))
    with pytest.raises(ca.UnsupportedDTypeError, match="'o'"):
        ca.ctable(pd.DataFrame({"o": [1, "a", None]}))
