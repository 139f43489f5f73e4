"""A table user's day: head and tail, isin in queries and on columns (against pandas)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.compute.parse import Expression
from carray.compute.prune import Bounds, may_match
from carray.errors import ExpressionError
from carray.table.columns import kinds as table_columns
from carray.table.columns import membership

WHERE = ["memory", "disk"]


@pytest.fixture(params=WHERE)
def where(request, tmp_path):
    """kwargs placing a table in memory or in a fresh directory."""
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


def sample(n: int = 40) -> dict[str, np.ndarray]:
    return {
        "i": np.arange(n, dtype=np.int64) * 3 - 7,
        "f": np.linspace(-1, 1, n),
        "s": np.array([f"k{k % 7}" for k in range(n)], dtype=object),
        "d": np.datetime64("2024-02-27") + np.arange(n).astype("m8[D]"),
        "u": np.array([f"é{k % 4}" for k in range(n)], dtype="U3"),
    }


def as_frame(t: ca.ctable) -> pd.DataFrame:
    return t.todataframe()


# -- head and tail ------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 5, 39, 40, 41, 1000, -1, -5, -40, -41])
def test_head_and_tail_match_pandas(where, n):
    data = sample()
    t = ca.ctable(data, chunklen=8, **where)
    df = pd.DataFrame(data)
    for got, want in ((t.head(n), df.head(n)), (t.tail(n), df.tail(n))):
        assert got.rootdir is None  # always a new in-memory table
        assert got.names == t.names and got.dtype == t.dtype
        pd.testing.assert_frame_equal(as_frame(got), want.reset_index(drop=True),
                                      check_dtype=False)


def test_head_default_is_five_rows_and_reads_only_them(where, monkeypatch):
    t = ca.ctable(sample(), chunklen=8, **where)
    asked = []
    real = table_columns.read_any

    def spy(col, rows):
        asked.append(rows)
        return real(col, rows)

    monkeypatch.setattr(table_columns, "read_any", spy)
    assert len(t.head()) == 5 and len(t.tail()) == 5
    assert asked and all(r in (range(0, 5), range(35, 40)) for r in asked)
    np.testing.assert_array_equal(t.tail()["i"][:], sample()["i"][-5:])


def test_head_rejects_non_integers():
    t = ca.ctable(sample(3))
    with pytest.raises(TypeError, match="n must be an int"):
        t.head(2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        t.tail("3")  # type: ignore[arg-type]


def test_head_keeps_multidimensional_and_nested_columns(where):
    rec = np.zeros(12, dtype=[("a", "i4"), ("b", "f8")])
    rec["a"] = np.arange(12)
    t = ca.ctable({"v": np.arange(36).reshape(12, 3), "r": rec}, **where)
    h = t.tail(2)
    np.testing.assert_array_equal(h["v"][:], np.arange(36).reshape(12, 3)[-2:])
    np.testing.assert_array_equal(h["r"][:], rec[-2:])


def test_head_of_an_old_version(tmp_path):
    t = ca.ctable(sample(10), rootdir=str(tmp_path / "t"))
    t.snapshot("first")
    t.append({k: v[:3] for k, v in sample(3).items()})
    old = ca.open(str(tmp_path / "t"), tag="first")
    assert len(old.tail(100)) == 10 and len(t.tail(100)) == 13


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.integers(-50, 50), max_size=30), n=st.integers(-35, 35),
       chunklen=st.integers(1, 9))
def test_head_and_tail_hypothesis(values, n, chunklen):
    arr = np.array(values, dtype=np.int64)
    strs = np.array([str(v) for v in values], dtype=object)
    t = ca.ctable({"x": arr, "s": strs}, chunklen=chunklen)
    df = pd.DataFrame({"x": arr, "s": strs})
    np.testing.assert_array_equal(t.head(n)["x"][:], df.head(n)["x"].to_numpy())
    np.testing.assert_array_equal(t.tail(n)["x"][:], df.tail(n)["x"].to_numpy())
    assert list(t.tail(n)["s"][:]) == list(df.tail(n)["s"])


# -- missing values and categories, through the contract (a local fake of it) -------------------


def fake_contract(monkeypatch, module, col, valid=None, codes=None, categories=None):
    """Make ``module``'s contract functions say ``col`` has missing values / categories."""
    real_valid, real_codes, real_cats = (module.read_valid, module.read_codes,
                                         module.categories_of)
    monkeypatch.setattr(module, "read_valid", lambda c, rows: (
        valid[np.asarray(rows)] if c is col and valid is not None else real_valid(c, rows)))
    monkeypatch.setattr(module, "read_codes", lambda c, rows: (
        codes[np.asarray(rows)] if c is col and codes is not None else real_codes(c, rows)))
    monkeypatch.setattr(module, "categories_of", lambda c: (
        categories if c is col and categories is not None else real_cats(c)))


@pytest.mark.parametrize("end", ["head", "tail"])
def test_head_and_tail_carry_missing_values(end):
    f = np.arange(10, dtype=float)
    valid = np.arange(10) % 3 != 0
    t = ca.ctable({"f": np.ma.MaskedArray(f, mask=~valid), "s": ["a", None] * 5})
    part = getattr(t, end)(7)
    rows = slice(0, 7) if end == "head" else slice(3, 10)
    got = part["f"][:]
    assert np.array_equal(np.ma.getmaskarray(got), ~valid[rows])
    np.testing.assert_array_equal(got.compressed(), f[rows][valid[rows]])
    assert table_columns.null_count(part.cols["s"]) == sum(v is None for v in (["a", None] * 5)[rows])


def test_head_and_tail_carry_categories():
    cats = np.array(["low", "mid", "high"], dtype=object)
    codes = np.array([0, 2, -1, 1, 0, 2], dtype=np.int8)
    t = ca.ctable({"c": pd.Categorical.from_codes(codes, cats, ordered=True)})
    for part, rows in ((t.tail(4), slice(2, 6)), (t.head(3), slice(0, 3))):
        got = part.todataframe()["c"]
        assert got.dtype == t.todataframe()["c"].dtype  # the whole dictionary, ordered
        assert got.cat.codes.tolist() == codes[rows].tolist()


# -- isin in expressions --------------------------------------------------------------------


def test_isin_function_and_in_operator_agree(where):
    data = sample()
    t = ca.ctable(data, chunklen=6, **where)
    df = pd.DataFrame(data)
    cases = [
        ("isin(i, [-7, 2, 5, 200])", "i in [-7, 2, 5, 200]", df.i.isin([-7, 2, 5, 200])),
        ("isin(s, ['k1', 'k3'])", "s in ('k1', 'k3')", df.s.isin(["k1", "k3"])),
        ("isin(u, ['é2'])", "u in ['é2']", df.u.isin(["é2"])),
        ("isin(d, ['2024-02-29', '2024-03-02'])", "d in ['2024-02-29', '2024-03-02']",
         df.d.isin(pd.to_datetime(["2024-02-29", "2024-03-02"]))),
        ("~isin(i, [-7]) & (f > 0)", "(i not in [-7]) and f > 0",
         ~df.i.isin([-7]) & (df.f > 0)),
        ("isin(i, [])", "i in []", df.i.isin([])),
    ]
    for call, op, want in cases:
        expected = np.flatnonzero(want.to_numpy())
        for text in (call, op):
            got = t.fetchwhere(text, outcols="nrow__")["nrow__"]
            np.testing.assert_array_equal(got, expected, err_msg=text)
        np.testing.assert_array_equal(t.eval(call, out_flavor="numpy"), want.to_numpy())


def test_isin_prunes_blocks_like_in(where):
    n = 4096
    t = ca.ctable({"x": np.arange(n), "y": np.arange(n) % 10}, chunklen=256, **where)
    for text in ("isin(x, [5, 300])", "x in [5, 300]", "not isin(x, [5]) and x < 7"):
        want = [r.x for r in t.where(text, prune=False)]
        assert [r.x for r in t.where(text)] == want and want
    lo = np.arange(0, n, 256)
    b = Bounds(lo, lo + 255, np.zeros(len(lo), bool), np.ones(len(lo), bool))
    for text in ("isin(x, [5, 300])", "~isin(x, range_free) | (x < 0)"):
        tree = Expression.parse(text.replace("range_free", "[7]")).tree
        hits = np.flatnonzero(may_match(tree, {"x": b}, {}, len(lo)))
        assert list(hits) == ([0, 1] if text.startswith("isin") else list(range(len(lo))))
    # A block holding only listed values is certainly false for "not in".
    one = Bounds(np.array([7, 0]), np.array([7, 9]), np.zeros(2, bool), np.ones(2, bool))
    tree = Expression.parse("~isin(x, [7])").tree
    assert list(may_match(tree, {"x": one}, {}, 2)) == [False, True]


@pytest.mark.parametrize("text", ["isin(x)", "isin(x, [1], [2])", "isin(x, y)",
                                  "isin(x, [y])"])
def test_isin_bad_calls_are_expression_errors(text):
    t = ca.ctable({"x": np.arange(3), "y": np.arange(3)})
    with pytest.raises(ExpressionError):
        t.fetchwhere(text)


def test_isin_numbers_against_strings_is_an_expression_error():
    t = ca.ctable({"x": np.arange(3)})
    with pytest.raises(ExpressionError, match="numeric"):
        t.fetchwhere("isin(x, ['a'])")


# -- the column method ------------------------------------------------------------------------


def test_column_isin_matches_pandas(where):
    data = sample(100)
    data["f"][::9] = np.nan
    t = ca.ctable(data, chunklen=7, **where)
    df = pd.DataFrame(data)
    cases = [("i", [-7, 2, 5, "x", 8.0]), ("s", {"k1", "k6", 3}), ("f", [np.nan, -1.0]),
             ("s", ca.ctable({"a": np.array(["k2"], dtype=object)})["a"]),
             ("i", np.array([-4, -1])), ("i", pd.Series([11, 14])), ("u", ["é1"]),
             ("i", ca.carray(np.array([20, 23]))), ("f", [])]
    for name, values in cases:
        got = t[name].isin(values)
        plain = values[:] if hasattr(values, "chunklen") else values
        want = df[name].isin(list(plain) if isinstance(plain, set) else plain).to_numpy()
        assert isinstance(got, np.ndarray) and got.dtype == np.bool_
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {values!r}")
        np.testing.assert_array_equal(t[name].isin(values, invert=True), ~want)
    dates = t["d"].isin(["2024-03-01", np.datetime64("2024-03-05")])
    np.testing.assert_array_equal(
        dates, df.d.isin(pd.to_datetime(["2024-03-01", "2024-03-05"])).to_numpy())
    np.testing.assert_array_equal(t[t["s"].isin(["k1"])]["i"], data["i"][data["s"] == "k1"])


def test_column_isin_of_expressions_and_nd_arrays():
    a = ca.carray(np.arange(20).reshape(10, 2), chunklen=3)
    np.testing.assert_array_equal(a.isin([3, 4, 19]), np.isin(np.arange(20).reshape(10, 2),
                                                               [3, 4, 19]))
    np.testing.assert_array_equal((a * 2).isin([6]), np.isin(np.arange(20).reshape(10, 2) * 2,
                                                             [6]))


def test_column_isin_refuses_a_single_value():
    t = ca.ctable({"s": np.array(["a", "b"], dtype=object)})
    with pytest.raises(TypeError, match="list-like"):
        t["s"].isin("a")


def test_column_isin_missing_values(monkeypatch):
    t = ca.ctable({"x": np.array([1, 0, 2, 0, 3])})
    valid = np.array([True, False, True, False, True])
    fake_contract(monkeypatch, membership, t.cols["x"], valid=valid)
    # As pandas' nullable Int64: a missing row is in a list only if it lists a missing marker.
    want = pd.array([1, None, 2, None, 3], dtype="Int64")
    s = pd.Series(want)
    np.testing.assert_array_equal(t["x"].isin([0, 1]), s.isin([0, 1]).to_numpy())
    np.testing.assert_array_equal(t["x"].isin([None, 2]), s.isin([pd.NA, 2]).to_numpy())


def test_column_isin_categories_test_codes(monkeypatch):
    cats = np.array(["low", "mid", "high"], dtype=object)
    codes = np.array([0, 2, 1, 1, 0, 2, 2], dtype=np.int8)
    t = ca.ctable({"c": cats[codes]})
    fake_contract(monkeypatch, membership, t.cols["c"], codes=codes, categories=cats)
    monkeypatch.setattr(membership, "read_any", lambda c, rows: pytest.fail("decoded"))
    got = t["c"].isin(["high", "nope"])
    np.testing.assert_array_equal(got, pd.Series(cats[codes]).isin(["high", "nope"]))


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.integers(-20, 20), max_size=40),
       members=st.lists(st.integers(-25, 25) | st.text("ab", max_size=2), max_size=6),
       chunklen=st.integers(1, 9))
def test_isin_hypothesis(values, members, chunklen):
    arr = np.array(values, dtype=np.int64)
    strs = np.array([f"{'a' * (abs(v) % 3)}{'b' * (v % 2)}" for v in values], dtype=object)
    t = ca.ctable({"x": arr, "s": strs}, chunklen=chunklen)
    df = pd.DataFrame({"x": arr, "s": strs})
    np.testing.assert_array_equal(t["x"].isin(members), df.x.isin(members).to_numpy())
    np.testing.assert_array_equal(t["s"].isin(members), df.s.isin(members).to_numpy())
    ints = [m for m in members if isinstance(m, int)]
    texts = [m for m in members if isinstance(m, str)]
    got = t.fetchwhere(f"isin(x, {ints!r}) | isin(s, {texts!r})", outcols="nrow__")
    want = np.flatnonzero((df.x.isin(ints) | df.s.isin(texts)).to_numpy())
    np.testing.assert_array_equal(got["nrow__"], want)


def test_isin_on_bytes_and_timestamps(where):
    t = ca.ctable({"b": np.array([b"x1", b"y2", b"x1"]),
                   "m": np.array(["2024-01-01T10:00", "2024-01-02T00:00", "2024-01-01T10:00"],
                                 dtype="M8[s]")}, **where)
    rows = lambda text: list(t.fetchwhere(text, outcols="nrow__")["nrow__"])  # noqa: E731
    assert rows("isin(b, ['x1'])") == [0, 2] and rows("b in [b'y2']") == [1]
    assert rows("isin(m, ['2024-01-01T10:00:00'])") == [0, 2]
    assert rows("m not in ['2024-01-02']") == [0, 2]  # the day's midnight
    # As in expressions, a str meets a bytes column encoded.
    assert t["b"].isin(["x1"]).tolist() == [True, False, True]
    assert t["m"].isin([np.datetime64("2024-01-02")]).tolist() == [False, True, False]
    import datetime

    assert t["m"].isin([datetime.datetime(2024, 1, 1, 10)]).tolist() == [True, False, True]
    assert t["m"].isin([pd.Timestamp("2024-01-02")]).tolist() == [False, True, False]
