"""ctable <-> pandas and Arrow, column by column."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca

pd = pytest.importorskip("pandas", reason="pandas is a test dependency")
pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")


@pytest.fixture(params=["memory", "disk"])
def where(request, tmp_path):
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


def frame(n=500):
    rng = np.random.default_rng(1)
    return pd.DataFrame({
        "id": np.arange(n, dtype=np.int64),
        "x": rng.random(n),
        "cat": rng.integers(0, 5, n).astype(np.int32),
        "name": [f"n{i}é" for i in range(n)],
        "when": pd.date_range("2020-01-01", periods=n, freq="h"),
        "ok": rng.random(n) > 0.5,
    })


def test_dataframe_round_trip(where):
    df = frame()
    t = ca.ctable.fromdataframe(df, chunklen=64, **where)
    assert isinstance(t["name"], ca.StringColumn)
    if t.rootdir:
        t.close()
        t = ca.open(t.rootdir, mode="r")
    back = t.todataframe()
    pd.testing.assert_frame_equal(back, df)
    sub = t.todataframe(columns=["x", "id"])
    assert list(sub.columns) == ["x", "id"]
    arrow_strings = t.todataframe(strings="arrow")
    assert list(arrow_strings["name"]) == list(df["name"])


def test_fixed_strings_for_bcolz(where):
    df = frame(20)
    t = ca.ctable.fromdataframe(df, strings="fixed", **where)
    assert t.dtype["name"].kind == "U"
    assert list(t["name"][:]) == list(df["name"])


def test_arrow_round_trip(where):
    df = frame()
    table = pa.Table.from_pandas(df, preserve_index=False)
    t = ca.ctable.from_arrow(table, chunklen=100, **where)
    out = t.to_arrow()
    assert out.column("name").type == pa.large_string()
    assert out.column("name").to_pylist() == table.column("name").to_pylist()
    for name in ["id", "x", "cat", "ok", "when"]:
        assert out.column(name).to_pylist() == table.column(name).to_pylist()
    assert ca.ctable(table).names == table.column_names


def test_arrow_special_columns():
    table = pa.table({
        "d": pa.array(["a", "b", "a"]).dictionary_encode(),
        "l": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6.0)), 2),
        "s": pa.chunked_array([["x"], ["yy", "zzz"]]),
        "f": pa.array([1.0, None, 3.0]),
    })
    t = ca.ctable.from_arrow(table)
    assert list(t["d"][:]) == ["a", "b", "a"]
    np.testing.assert_array_equal(t["l"][:], np.arange(6.0).reshape(3, 2))
    assert list(t["s"][:]) == ["x", "yy", "zzz"]
    assert t["f"][1] is np.ma.masked  # an Arrow null is missing, not NaN
    out = t.to_arrow()
    assert out.column("l").to_pylist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]


def test_mixed_objects_are_refused():
    # (Nulls and None are missing values: tests/table/test_table_missing.py.)
    with pytest.raises(TypeError, match="only str"):
        ca.ctable.fromdataframe(pd.DataFrame({"o": ["a", 1]}))
    with pytest.raises(TypeError, match="only str"):
        ca.ctable.fromdataframe(pd.DataFrame({"o": ["a", 1, None]}, dtype=object))


def test_append_dataframe_and_arrow(where):
    df = frame(30)
    t = ca.ctable.fromdataframe(df.iloc[:10], **where)
    t.append(df.iloc[10:20])
    t.append(pa.Table.from_pandas(df.iloc[20:], preserve_index=False))
    pd.testing.assert_frame_equal(t.todataframe(), df)


def test_categorical_and_string_dtypes():
    df = pd.DataFrame({"c": pd.Categorical(["a", "b", "a"]),
                       "s": pd.array(["x", "y", "z"], dtype="string")})
    t = ca.ctable.fromdataframe(df)
    assert list(t["c"][:]) == ["a", "b", "a"] and list(t["s"][:]) == ["x", "y", "z"]


# -- the Arrow C stream, the interchange protocol, notebooks ------------------------------------


@pytest.fixture
def mixed(tmp_path):
    n = 10_007
    t = ca.ctable({"id": np.arange(n), "x": np.linspace(0, 1, n),
                   "name": np.array([f"s{i % 11}" for i in range(n)], dtype=object),
                   "v": np.arange(2 * n, dtype="f4").reshape(n, 2)},
                  rootdir=tmp_path / "t.ctable", mode="w")
    yield t
    t.close()


def test_pa_table_reads_the_c_stream(mixed, monkeypatch):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    monkeypatch.setattr("carray.table.interop.STREAM_ROWS", 1000)
    reader = pa.RecordBatchReader.from_stream(mixed)
    batches = list(reader)
    assert [b.num_rows for b in batches] == [1000] * 10 + [7]  # a batch at a time
    got = pa.table(mixed)
    assert got.column_names == ["id", "x", "name", "v"]
    assert got.schema.field("name").type == pa.large_string()
    assert got.column("id").to_pylist() == list(range(len(mixed)))
    assert got.column("name")[12].as_py() == "s1"
    assert got.column("v")[3].as_py() == [6.0, 7.0]
    assert got.equals(mixed.to_arrow())


def test_c_stream_honours_a_requested_schema(mixed):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("name", pa.large_string()),
                        ("v", pa.list_(pa.float32(), 2))])
    got = pa.RecordBatchReader.from_stream(mixed, schema=schema).read_all()
    assert got.schema.equals(schema)


def test_polars_and_duckdb_read_a_ctable(mixed):
    pl = pytest.importorskip("polars", reason="polars is a test dependency")
    duckdb = pytest.importorskip("duckdb", reason="duckdb is a test dependency")
    df = pl.DataFrame(mixed)
    assert df.shape == (len(mixed), 4) and df["name"][12] == "s1"
    t = mixed  # noqa: F841 - duckdb finds Arrow streams by the variable's name
    assert duckdb.sql("SELECT count(*), max(id) FROM t").fetchall() == [
        (len(mixed), len(mixed) - 1)]


def test_pandas_reads_columns_through_the_protocols(tmp_path):
    pd = pytest.importorskip("pandas", reason="pandas is a test dependency")
    pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    t = ca.ctable({"a": np.arange(5), "s": np.array(list("abcde"), dtype=object)})
    for df in (pd.api.interchange.from_dataframe(t), pd.DataFrame.from_arrow(t)):
        assert list(df.columns) == ["a", "s"]
        assert df["a"].tolist() == [0, 1, 2, 3, 4] and df["s"].tolist() == list("abcde")
    with pytest.raises(RuntimeError, match="allow_copy"):
        t.__dataframe__(allow_copy=False)


def test_repr_html_shows_the_edges_only(mixed):
    html = mixed._repr_html_()
    assert html.count("<tr>") < 20 and "s1" in html and "10,007" in html
    assert "&hellip;" in html
    a = ca.carray(np.arange(1_000_000))
    html = a._repr_html_()
    assert "999999" in html and "499999" not in html and "ratio" in html
    small = ca.carray(np.arange(3))
    assert "&hellip;" not in small._repr_html_()


def test_repr_html_of_empty_and_0d_arrays():
    assert "5.0" in ca.carray(np.array(5.0))._repr_html_()
    assert "&hellip;" not in ca.carray(np.arange(0))._repr_html_()
    assert "<td>0</td>" in ca.ctable({"a": np.arange(0)})._repr_html_()  # 0 rows


def test_text_arrow_cannot_hold_raises_a_carray_error(tmp_path):
    pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    from carray.errors import UnsupportedDTypeError

    # numpy's 'U' items hold any 32-bit value; UTF-8 has no code point above 0x10FFFF.
    u = np.frombuffer(b"u\0\0\0\xff\xff\xff\xff1\0\0\0", "<U3").repeat(4)
    t = ca.ctable({"i": np.arange(4), "u": u})
    with pytest.raises(UnsupportedDTypeError, match="UTF-8"):
        t.to_arrow()
