"""What the conformance suite found, each pinned by the smallest example (the drawn tables
find them only some of the time in CI)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import carray as ca
from carray.table.analysis.groupby_kernels import GroupByError

from .tables import TIMEOUT

pytestmark = TIMEOUT


def records(missing: bool = True) -> np.ma.MaskedArray:
    rec = np.ma.MaskedArray(np.zeros(4, dtype=[("p", "i4"), ("q", "f8")]))
    rec["p"] = [1, 2, 3, 4]
    if missing:
        rec["q"][1] = np.ma.masked
    return rec


def test_bcolz_layout_takes_masked_arrays_with_nothing_masked(tmp_path):
    t = ca.ctable({"x": np.ma.MaskedArray([1, 2, 3, 4]), "n": records(missing=False)},
                  rootdir=str(tmp_path / "t"), format="bcolz")
    assert t["x"][:].tolist() == [1, 2, 3, 4] and t.null_counts()["x"] == 0


def test_bcolz_layout_refuses_records_with_missing_fields(tmp_path):
    with pytest.raises(ca.UnsupportedDTypeError, match="records with missing values"):
        ca.ctable({"n": records()}, rootdir=str(tmp_path / "t"), format="bcolz")


@pytest.mark.parametrize("fmt", [None, "bcolz"])
def test_records_to_pandas_and_arrow_and_back(tmp_path, fmt):
    rec = records(missing=fmt is None)
    t = ca.ctable({"n": rec, "x": np.arange(4)}, rootdir=str(tmp_path / "t"), format=fmt)
    assert t.todataframe()["n"].tolist() == rec.tolist()  # tuples, None where missing
    arrow = pa.table(t)
    assert arrow.schema.field("n").type == pa.struct([("p", pa.int32()), ("q", pa.float64())])
    assert arrow.column("n").to_pylist()[1] == {"p": 2, "q": None if fmt is None else 0.0}
    back = ca.ctable(arrow)
    assert np.ma.asanyarray(back["n"][:]).tolist() == rec.tolist()


def test_queries_keep_missing_fields_of_records_with_and_without_an_index():
    n = 300
    rec = np.ma.MaskedArray(np.zeros(n, dtype=[("p", "i4"), ("q", "f8")]))
    rec["q"][:5] = np.ma.masked
    t = ca.ctable({"n": rec, "x": np.ma.MaskedArray(np.arange(n), mask=np.arange(n) % 7 == 0)},
                  chunklen=8)
    want = [((0, None), k) for k in range(1, 5)]
    for indexed in (False, True):
        if indexed:
            t.create_index("x")
        got = t["x < 5"]  # (numpy's tolist() cannot take a record's masks within a row)
        assert list(zip(got["n"].tolist(), got["x"].tolist(), strict=True)) == want
        assert [tuple(r) for r in t.where("x < 5")] == want


def test_object_columns_of_nothing_but_none_hold_text():
    t = ca.ctable({"s": np.array([None, None], dtype=object),
                   "p": pd.Series([None, None], dtype=pd.StringDtype())})
    assert t.dtype["s"] == t.dtype["p"] == np.dtype(object)
    assert t.null_counts() == {"s": 2, "p": 2}
    t.append({"s": ["a"], "p": ["b"]})
    assert t["s"][:].tolist() == [None, None, "a"]


def test_null_tests_of_categorical_columns_in_queries():
    t = ca.ctable({"c": pd.Categorical(["UA", None, "AA"])})
    assert t.fetchwhere("isnull(c)", outcols="nrow__")["nrow__"].tolist() == [1]
    assert t.fetchwhere("notna(c) & (c != 'UA')", outcols="nrow__")["nrow__"].tolist() == [2]


def test_groups_without_values_are_missing_in_the_values_type():
    t = ca.ctable({"k": [1, 1, 2],
                   "d": np.ma.MaskedArray(np.array(["2024-01-01", "2024-01-02", "NaT"],
                                                   dtype="M8[D]"), mask=[0, 0, 1]),
                   "i": np.ma.MaskedArray([5, 6, 7], mask=[0, 0, 1]),
                   "s": np.array(["a", "b", None], dtype=object)})
    got = t.groupby("k").agg({"d": ("d", "min"), "i": ("i", "max"), "s": ("s", "first"),
                              "m": ("i", "mean"), "sd": ("i", "std")})
    assert got.dtype["i"] == np.int64 and got.dtype["d"] == np.dtype("M8[D]")
    back = got.todataframe()
    assert back.isna().sum().to_dict() == {"k": 0, "d": 1, "i": 1, "s": 1, "m": 1, "sd": 1}
    assert back["d"][0] == pd.Timestamp("2024-01-01")  # never the filler's 1970-01-01


def test_categorical_keys_and_extremes_follow_the_dictionary():
    cats = pd.Categorical(["lo", "hi", "mid", None, "hi"], categories=["lo", "mid", "hi"],
                          ordered=True)
    t = ca.ctable({"c": cats, "k": [1, 1, 1, 2, 2]})
    got = t.groupby("k").agg({"top": ("c", "max"), "low": ("c", "min")}).todataframe()
    assert got["top"].tolist() == ["hi", "hi"] and got["low"].tolist() == ["lo", "hi"]
    counts = t.value_counts("c", dropna=False).todataframe()
    assert counts["c"].dtype == pd.CategoricalDtype(["lo", "mid", "hi"], ordered=True)
    keys = t.groupby("c", dropna=False).size().todataframe()["c"]
    assert keys.dtype == counts["c"].dtype and keys.tolist()[:3] == ["lo", "mid", "hi"]
    plain = ca.ctable({"c": pd.Categorical(["a", "b"]), "k": [1, 1]})
    with pytest.raises(GroupByError, match="unordered"):
        plain.groupby("k").agg({"m": ("c", "min")})


def test_numpy_reductions_of_nullable_booleans_and_fixed_text():
    t = ca.ctable({"b": np.ma.MaskedArray([True, False, True], mask=[0, 0, 1]),
                   "u": np.ma.MaskedArray(np.array(["b", "a", "c"]), mask=[0, 0, 1])})
    s = pd.Series(pd.array([True, False, None], dtype="boolean"))
    assert np.median(t["b"]) == s.astype("Int64").median()
    assert np.quantile(t["b"], 0.5) == s.astype("Int64").quantile(0.5)
    assert (np.min(t["u"]), np.max(t["u"])) == ("a", "b")


def test_csv_files_of_a_header_only_read_as_text_columns(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a,b\n")
    t = ca.ctable.from_csv(path)
    assert t.names == ["a", "b"] and len(t) == 0 and pd.read_csv(path).shape == (0, 2)


def test_polars_categoricals_with_missing_values():
    frame = pl.DataFrame({"c": pl.Series(["UA", None, "AA"], dtype=pl.Categorical)})
    t = ca.ctable(frame)
    assert t.todataframe()["c"].tolist()[::2] == ["UA", "AA"] and t.null_counts()["c"] == 1


def test_arrow_streams_are_table_sources():
    t = ca.ctable({"x": np.arange(3), "s": ["a", None, "c"]})
    tbl = t  # duckdb finds it by its name
    back = ca.ctable(duckdb.sql("SELECT * FROM tbl").arrow())
    assert back.todataframe()["s"].tolist()[::2] == ["a", "c"] and back.null_counts()["s"] == 1
    reader = pa.RecordBatchReader.from_batches(pa.table(tbl).schema, pa.table(tbl).to_batches())
    assert len(ca.ctable(reader)) == 3


def test_converting_a_table_to_csv_writes_floats_as_floats(tmp_path):
    from carray.integrations.convert import convert_table

    root = str(tmp_path / "t.ctable")
    ca.ctable({"f": [1.0, 2.0, np.nan]}, rootdir=root).close()
    convert_table(root, str(tmp_path / "t.csv"))
    assert ca.ctable.from_csv(tmp_path / "t.csv").dtype["f"] == np.float64
    assert pd.read_csv(tmp_path / "t.csv")["f"].dtype == np.float64
