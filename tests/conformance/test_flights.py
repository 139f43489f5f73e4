"""What a new user tries on a flights table (see flights.py), against pandas: numpy on
nullable columns, counts and groups of text with missing values, string functions,
zones through table operations, and a CSV round trip."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import carray as ca
from carray.cli.main import main

from .flights import flights
from .tables import TIMEOUT, canon

pytestmark = TIMEOUT


@pytest.fixture(scope="module")
def frame():
    return flights()


@pytest.fixture(scope="module", params=["memory", "disk"])
def table(request, frame, tmp_path_factory):
    where = {} if request.param == "memory" else \
        {"rootdir": str(tmp_path_factory.mktemp("flights") / "flights.ctable")}
    t = ca.ctable(frame, **where)
    yield t
    t.close()


def test_numpy_on_delays_skips_missing_values(table, frame):
    delay, s = table["dep_delay"], frame["dep_delay"]
    assert np.median(delay) == s.median() and np.nanmedian(delay) == s.median()
    assert np.mean(delay) == pytest.approx(s.mean())
    assert np.nanmean(delay) == pytest.approx(s.mean())
    assert np.sum(delay) == pytest.approx(s.sum())
    assert np.std(delay, ddof=1) == pytest.approx(s.std())
    assert np.nanstd(delay) == pytest.approx(s.std(ddof=0))
    counts, _ = np.histogram(delay, bins=30)
    assert counts.sum() == s.count() < len(s)
    assert np.quantile(table["arr_delay"], 0.9) == pytest.approx(frame["arr_delay"].quantile(0.9))
    assert np.max(table["dep_time"]) == frame["dep_time"].max()


def test_missing_tail_numbers_count_group_and_match(table, frame):
    s = frame["tailnum"]
    counts = table.value_counts("tailnum", dropna=False).todataframe()
    want = s.value_counts(dropna=False)
    assert dict(zip(canon(counts["tailnum"]), counts["count"], strict=True)) == \
        dict(zip(canon(pd.Series(want.index, dtype=s.dtype)), want, strict=True))
    groups = table.groupby("tailnum", dropna=False).agg(
        {"flights": ("id", "size"), "delay": ("dep_delay", "mean")}).todataframe()
    ref = frame.groupby("tailnum", dropna=False).agg(
        flights=("id", "size"), delay=("dep_delay", "mean")).reset_index()
    assert canon(groups["tailnum"]) == canon(ref["tailnum"])
    assert groups["flights"].tolist() == ref["flights"].tolist()
    np.testing.assert_allclose(groups["delay"].to_numpy(float, na_value=np.nan),
                               ref["delay"].to_numpy(float, na_value=np.nan), equal_nan=True)
    hits = table.fetchwhere("startswith(tailnum, 'N1') & (dep_delay > 30)", outcols=["id"])
    want = frame["id"][(s.str.startswith("N1") & (frame["dep_delay"] > 30)).fillna(False)]
    assert hits["id"].tolist() == want.tolist()


def test_the_zone_survives_every_table_operation(table, frame):
    zone = str(frame["time_hour"].dt.tz)
    for part in (table.head(3), table.tail(3), table.sort(["time_hour", "id"]).head(5),
                 table.groupby("time_hour").size().head(5),
                 table.fetchwhere("dep_delay > 100", out_flavor="ctable")):
        assert str(part.todataframe()["time_hour"].dt.tz) == zone
    first = next(iter(table.iter(outcols=["time_hour"]))).time_hour
    assert first == frame["time_hour"][0].to_pydatetime()


def test_csv_round_trip_and_info(table, frame, tmp_path, capsys):
    path = str(tmp_path / "flights.csv")
    table.to_csv(path)
    back = ca.ctable.from_csv(path)
    theirs = pd.read_csv(path)
    assert back.null_counts() == {k: int(v) for k, v in theirs.isna().sum().items()} == \
        {k: int(v) for k, v in frame.isna().sum().items()}
    assert back.dtype["dep_delay"] == np.float64 and back.dtype["distance"] == np.int64
    stamps = back.todataframe()["time_hour"]  # the same instants, zoned in UTC
    assert str(stamps.dt.tz) == "UTC"
    assert canon(stamps.dt.tz_convert(None)) == canon(frame["time_hour"].dt.tz_convert(None))
    assert main(["info", path]) == 0
    assert "datetime64" in capsys.readouterr().out
