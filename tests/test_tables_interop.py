"""ctable <-> pandas and Arrow, column by column."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")


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
    assert np.isnan(t["f"][1])
    out = t.to_arrow()
    assert out.column("l").to_pylist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]


def test_nulls_and_mixed_objects_are_refused():
    with pytest.raises(ValueError, match="nulls"):
        ca.ctable.from_arrow(pa.table({"i": pa.array([1, None])}))
    with pytest.raises(ValueError, match="nulls|missing"):
        ca.ctable.fromdataframe(pd.DataFrame({"s": ["a", None]}))
    with pytest.raises(TypeError, match="only str"):
        ca.ctable.fromdataframe(pd.DataFrame({"o": ["a", 1]}))


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
