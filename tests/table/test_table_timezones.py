"""Timezone-aware timestamp columns: stored as UTC datetime64, the zone kept with the
column, and put back on by pandas and Arrow conversions."""

from __future__ import annotations

import datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from table_places import reopen

import carray as ca
from carray.table.columns.timezones import ZONE_ATTR

pd = pytest.importorskip("pandas", reason="pandas: datetime64[ns, tz] columns")
pa = pytest.importorskip("pyarrow", reason="pyarrow: timestamp(unit, tz) columns")

FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])




def zoned_frame(tz="Europe/Paris", unit="ns"):
    ts = pd.Series(pd.to_datetime(["2024-03-31 01:30", None, "2024-10-27 02:30"])
                   .as_unit(unit)).dt.tz_localize(tz, ambiguous=True)
    return pd.DataFrame({"ts": ts, "x": [1, 2, 3]})


def test_pandas_zoned_column_is_stored_as_utc_and_comes_back_zoned(where):
    df = zoned_frame()
    t = reopen(ca.ctable(df, **where))
    utc = t["ts"][:]
    assert utc.dtype == np.dtype("datetime64[ns]")
    assert utc[0] == np.datetime64("2024-03-31T00:30", "ns")  # +01:00 before the change
    assert utc[1] is np.ma.masked and t["ts"].null_count() == 1  # NaT: missing, as pandas
    assert t.cols["ts"].attrs[ZONE_ATTR] == "Europe/Paris"
    pd.testing.assert_frame_equal(t.todataframe(), df)


@pytest.mark.parametrize("tz", ["UTC", "America/New_York", datetime.UTC,
                                datetime.timezone(datetime.timedelta(hours=5, minutes=30)),
                                datetime.timezone(-datetime.timedelta(hours=3))])
def test_zones_by_name_and_fixed_offsets_round_trip(tz):
    df = zoned_frame(tz, unit="us")
    back = ca.ctable(df).todataframe()
    pd.testing.assert_frame_equal(back, df)  # the dtype too: its unit and zone
    assert back["ts"].dtype == df["ts"].dtype


def test_arrow_zoned_timestamps_round_trip_and_stream(where):
    arr = pa.array([0, None, 1_700_000_000_000], type=pa.timestamp("ms", tz="Asia/Tokyo"))
    t = reopen(ca.ctable(pa.table({"ts": arr}), **where))
    assert t["ts"][:].dtype == np.dtype("datetime64[ms]")
    assert t["ts"][:][2] == np.datetime64(1_700_000_000_000, "ms")
    out = t.to_arrow()
    assert out.schema.field("ts").type == pa.timestamp("ms", tz="Asia/Tokyo")
    assert out.column("ts").combine_chunks().equals(arr)
    assert pa.table(t).column("ts").combine_chunks().equals(arr)  # the C stream


def test_appends_queries_and_versions_keep_the_zone(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable(zoned_frame(), rootdir=root)
    t.append(pd.DataFrame({"ts": pd.to_datetime(["2025-01-01 12:00"]).tz_localize("UTC"),
                           "x": [4]}))  # another zone: the same instants, kept in Paris'
    t.append({"ts": np.array(["2025-06-01T00:00"], dtype="M8[ns]"), "x": [5]})  # UTC
    t.close()
    t = ca.open(root, mode="r")
    assert len(t) == 5 and t.cols["ts"].attrs[ZONE_ATTR] == "Europe/Paris"
    back = t.todataframe()["ts"]
    assert str(back.dt.tz) == "Europe/Paris"
    assert back[3] == pd.Timestamp("2025-01-01 13:00", tz="Europe/Paris")
    assert back[4] == pd.Timestamp("2025-06-01 02:00", tz="Europe/Paris")
    rows = t.fetchwhere("ts >= '2025-01-01'", outcols=["x"])["x"].tolist()
    assert rows == [4, 5]  # queries compare UTC instants
    sub = t.fetchwhere("x > 3", out_flavor="ctable")
    assert str(sub.todataframe()["ts"].dt.tz) == "Europe/Paris"


def test_zoned_column_added_with_addcol_keeps_its_zone(where):
    t = ca.ctable({"x": np.arange(3)}, **where)
    t.addcol(zoned_frame("Australia/Sydney")["ts"], name="ts")
    t.addcol(pd.date_range("2024-01-01", periods=3, tz="Asia/Tokyo"), name="idx")  # an index
    t = reopen(t)
    back = t.todataframe()
    assert str(back["ts"].dt.tz) == "Australia/Sydney" and str(back["idx"].dt.tz) == "Asia/Tokyo"
    assert t["idx"][0] == np.datetime64("2023-12-31T15:00")


_INSTANTS = st.lists(st.one_of(st.none(), st.integers(-2**40, 2**40)), max_size=30)
_ZONES = st.sampled_from(["UTC", "Europe/Paris", "America/Sao_Paulo", "Asia/Kathmandu",
                          "Pacific/Chatham"])


@FAST
@given(seconds=_INSTANTS, tz=_ZONES, unit=st.sampled_from(["s", "ms", "us", "ns"]))
def test_any_instants_round_trip_through_pandas_and_arrow(seconds, tz, unit):
    raw = np.array([np.datetime64("NaT") if s is None else np.datetime64(s, "s")
                    for s in seconds], dtype="M8[s]").astype(f"M8[{unit}]")
    ser = pd.Series(pd.DatetimeIndex(raw).tz_localize("UTC").tz_convert(tz))
    df = pd.DataFrame({"ts": ser})
    t = ca.ctable(df)
    np.testing.assert_array_equal(t["ts"][:], raw)
    pd.testing.assert_frame_equal(t.todataframe(), df)
    arrow = pa.Table.from_pandas(df, preserve_index=False)
    assert ca.ctable(arrow).to_arrow().equals(arrow)


# -- every path that returns rows or keys keeps the zone --------------------------------------


def paris_frame(n: int = 50) -> pd.DataFrame:
    ts = pd.Series(pd.date_range("2024-03-30", periods=n, freq="7h", tz="Europe/Paris"))
    ts[[i for i in (3, 17) if i < n]] = pd.NaT
    return pd.DataFrame({"ts": ts, "k": np.arange(n) % 4})


def test_head_tail_sort_and_keys_keep_the_zone(where):
    df = paris_frame()
    t = reopen(ca.ctable(df, **where))
    for got, want in ((t.head(7), df.head(7)), (t.tail(7), df.tail(7)),
                      (t.sort("ts", ascending=False), df.sort_values("ts", ascending=False,
                                                                     na_position="last"))):
        back = got.todataframe()
        assert str(back["ts"].dt.tz) == "Europe/Paris"
        pd.testing.assert_series_equal(back["ts"], want["ts"].reset_index(drop=True))
    keys = t.groupby("ts", dropna=False).size().todataframe()["ts"]
    want = df.groupby("ts", dropna=False).size().reset_index()["ts"]
    pd.testing.assert_series_equal(keys, want)
    counts = t.value_counts("ts").todataframe()
    assert str(counts["ts"].dt.tz) == "Europe/Paris"
    assert t.unique("ts").timezone == "Europe/Paris"
    assert t.sort("ts", rootdir=str(where.get("rootdir", "")) + "s" if where else None
                  ).todataframe()["ts"].dtype == df["ts"].dtype


def test_missing_instants_are_missing_values_and_keep_the_zone(where):
    df = paris_frame()
    t = reopen(ca.ctable(df, **where))
    assert t["ts"].null_count() == 2 == df["ts"].isna().sum()
    assert pa.table(t).schema.field("ts").type == pa.timestamp(df["ts"].dt.unit, tz="Europe/Paris")
    t2 = ca.ctable({"ts": df["ts"].iloc[:3]})
    t2.append(df.iloc[3:5][["ts"]])  # a NaT appended: the column gains validity, zone kept
    assert str(t2.todataframe()["ts"].dt.tz) == "Europe/Paris"
    assert t2["ts"].null_count() == 1


def test_rows_hold_aware_datetimes_in_the_zone(where):
    df = paris_frame(6)
    t = reopen(ca.ctable(df, **where))
    want = [None if pd.isna(v) else v.to_pydatetime() for v in df["ts"]]
    assert [r.ts for r in t.where("k >= 0")] == want
    assert [r.ts for r in t.iter()] == want
    first = next(iter(t)).ts
    assert str(first.tzinfo) == "Europe/Paris" and first.utcoffset().total_seconds() == 3600


def test_group_extremes_of_zoned_timestamps_keep_the_zone(where):
    df = paris_frame(20)
    t = reopen(ca.ctable(df, **where))
    got = t.groupby("k").agg({"first": ("ts", "min"), "last": ("ts", "last")}).todataframe()
    want = df.groupby("k").agg(first=("ts", "min"), last=("ts", "last")).reset_index()
    pd.testing.assert_series_equal(got["first"], want["first"])
    pd.testing.assert_series_equal(got["last"], want["last"])
