"""Round trips through pandas, Arrow (the C stream too), Parquet, polars, duckdb and CSV:
values, missing values, kinds of values and zones come back, and the peer library sees
what pandas' reference holds.  Where a format cannot hold something (records in CSV or
pandas, zone names in CSV, categories in CSV), the test says what it gets instead."""

from __future__ import annotations

import os
import tempfile

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given

import carray as ca
from carray.integrations.convert import convert_table

from .tables import (
    KINDS,
    SETTINGS,
    TIMEOUT,
    assert_frame_like,
    canon,
    each_place,
    family,
    tables,
)

pytestmark = TIMEOUT
COLUMNS = list(KINDS)


def _back(t: ca.ctable) -> pd.DataFrame:
    return t.todataframe()[COLUMNS]


def _same_nested(t: ca.ctable, nested: np.ma.MaskedArray, what: str) -> None:
    assert np.ma.asanyarray(t.cols["n"][:]).tolist() == nested.tolist(), what


@SETTINGS
@given(drawn=tables())
def test_pandas_and_arrow(drawn, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            df = t.todataframe(columns=COLUMNS)
            assert_frame_like(df, ref.frame, f"{place} todataframe")
            assert_frame_like(_back(ca.ctable(df)), ref.frame, f"{place} pandas")
            if len(t):
                with pytest.raises(ca.UnsupportedDTypeError):  # records: tuples, not a kind
                    ca.ctable(t.todataframe(columns=["n"]))
            for how, table in (("stream", pa.table(t)), ("to_arrow", t.to_arrow())):
                assert table.schema.field("n").type == pa.struct([("p", pa.int32()),
                                                                  ("q", pa.float64())])
                assert {n: table.column(n).null_count for n in COLUMNS} == \
                    ref.frame.isna().sum().to_dict(), (place, how)
                zone = table.schema.field("z").type.tz
                assert pd.Timestamp(0, tz=zone).tz == pd.Timestamp(0, tz=ref.zone).tz
                back = ca.ctable(table)
                assert_frame_like(_back(back), ref.frame, f"{place} arrow {how}")
                _same_nested(back, ref.nested, f"{place} arrow {how}")
            arrow_frame = pa.table(t).select(COLUMNS).to_pandas()  # Arrow's own pandas
            for name in COLUMNS:
                assert canon(arrow_frame[name]) == canon(ref.frame[name]) or \
                    family(ref.frame[name].dtype) == "float", (place, name)


@SETTINGS
@given(drawn=tables())
def test_parquet(drawn, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            path = os.path.join(tempfile.mkdtemp(dir=tmp_path), f"{place}.parquet")
            pq.write_table(pa.table(t), path)
            back = ca.ctable(pq.read_table(path))
            assert_frame_like(_back(back), ref.frame, f"{place} parquet")
            _same_nested(back, ref.nested, f"{place} parquet")
            theirs = pd.read_parquet(path)
            assert theirs[COLUMNS].isna().sum().to_dict() == ref.frame.isna().sum().to_dict()
            if t.rootdir is not None:  # carray's own conversion, both ways
                t.flush()
                out = str(tmp_path / f"{place}-conv.parquet")
                convert_table(t.rootdir, out, overwrite=True)
                again = str(tmp_path / f"{place}-again.ctable")
                convert_table(out, again, overwrite=True)
                with ca.open(again, mode="r") as converted:
                    assert_frame_like(_back(converted), ref.frame, f"{place} convert")
                    _same_nested(converted, ref.nested, f"{place} convert")


@SETTINGS
@given(drawn=tables())
def test_polars_and_duckdb(drawn, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            # polars takes zone names only (it refuses Arrow's fixed offsets, '+05:30').
            names = [n for n in t.names if n != "z" or ref.zone[0] not in "+-"]
            frame = pl.DataFrame(t[names])
            nulls = {n: int(frame[n].null_count()) for n in names if n != "n"}
            assert nulls == ref.frame[[n for n in names if n != "n"]].isna().sum().to_dict()
            back = ca.ctable(frame)
            kept = [n for n in COLUMNS if n in names]
            assert_frame_like(back.todataframe()[kept], ref.frame[kept], f"{place} polars")
            _same_nested(back, ref.nested, f"{place} polars")
            tbl = t  # duckdb finds the Python variable by its name
            counts = duckdb.sql("SELECT " + ", ".join(
                f'count(*) - count("{n}")' for n in COLUMNS) + " FROM tbl").fetchall()[0]
            assert dict(zip(COLUMNS, counts, strict=True)) == \
                ref.frame.isna().sum().to_dict(), place
            got = ca.ctable(duckdb.sql("SELECT * FROM tbl").arrow())
            want = ref.frame.copy()
            # duckdb gives a zoned column in its session's zone (the same instants), and
            # reads a dictionary column as text.
            want["z"] = want["z"].dt.tz_convert(got.todataframe()["z"].dt.tz)
            want["c"] = want["c"].astype(object).astype(pd.StringDtype("python",
                                                                       na_value=pd.NA))
            assert_frame_like(_back(got), want, f"{place} duckdb")
            _same_nested(got, ref.nested, f"{place} duckdb")
            del tbl


def _as_csv_reads(frame: pd.DataFrame) -> pd.DataFrame:
    """The reference as a CSV file gives it back: empty text is missing, categories are
    text, zoned instants come back in UTC (a CSV file holds offsets, not zone names)."""
    out = frame.copy()
    for name in ("s", "u"):
        out[name] = out[name].mask(out[name] == "")
    out["c"] = out["c"].astype(object).astype(pd.StringDtype("python", na_value=pd.NA))
    out["z"] = out["z"].dt.tz_convert("UTC")
    return out


@SETTINGS
@given(drawn=tables())
def test_csv(drawn, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            path = os.path.join(tempfile.mkdtemp(dir=tmp_path), f"{place}.csv")
            with pytest.raises(ca.UnsupportedDTypeError, match="one value per row"):
                t.to_csv(path)  # records: CSV holds one value per field
            assert not os.path.exists(path)
            t.to_csv(path, columns=COLUMNS)
            back = ca.ctable.from_csv(path)
            want = _as_csv_reads(ref.frame)
            got = _back(back)
            nothing = [n for n in COLUMNS if want[n].isna().all()]  # no type in the file
            assert all(got[n].isna().all() for n in nothing), place
            keep = [n for n in COLUMNS if n not in nothing]
            assert_frame_like(got[keep], want[keep], f"{place} csv")
            theirs = pd.read_csv(path)  # pandas reads the same missing values
            assert theirs.isna().sum().to_dict() == want.isna().sum().to_dict(), place
