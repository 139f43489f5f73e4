"""A synthetic table shaped like nycflights13's ``flights``: integer columns with nulls,
float delays with nulls, text columns with missing values (``tailnum``), and zoned
timestamps (``time_hour`` in New York).  300,000 rows under CARRAY_SOAK=1 (about the
real table's size), a few thousand in CI."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .tables import SOAK

ROWS = 300_000 if SOAK else 4_000
CARRIERS = ["UA", "B6", "EV", "DL", "AA", "MQ", "US", "9E", "WN", "VX", "FL", "AS", "F9",
            "YV", "HA", "OO"]
AIRPORTS = ["EWR", "JFK", "LGA"]


def flights(rows: int = ROWS, seed: int = 13) -> pd.DataFrame:
    """The table as pandas holds it, with its nullable dtypes."""
    rng = np.random.default_rng(seed)
    cancelled = rng.random(rows) < 0.025  # no departure: its times and delays are missing
    dep_delay = np.round(rng.gamma(0.6, 25, rows) - 8)
    arr_delay = np.round(dep_delay + rng.normal(-6, 12, rows))
    tails = np.array([f"N{k}{c}" for k, c in zip(rng.integers(100, 999, 4000),
                                                  rng.choice(list("ABCJ"), 4000),
                                                  strict=True)], dtype=object)
    tailnum = pd.array(tails[rng.integers(0, len(tails), rows)].tolist(),
                       dtype=pd.StringDtype("python", na_value=pd.NA))
    tailnum[rng.random(rows) < 0.0075] = pd.NA
    start = pd.Timestamp("2013-01-01 05:00", tz="America/New_York")
    hours = np.sort(rng.integers(0, 365 * 24, rows))
    time_hour = pd.Series(start + pd.to_timedelta(hours, unit="h"))
    return pd.DataFrame({
        "id": np.arange(rows, dtype=np.int64),
        "month": time_hour.dt.month.astype(np.int64),
        "dep_time": pd.array(np.where(cancelled, None, rng.integers(500, 2359, rows)),
                             dtype="Int64"),
        "dep_delay": pd.array(np.where(cancelled, None, dep_delay), dtype="Float64"),
        "arr_delay": pd.array(np.where(cancelled | (rng.random(rows) < 0.003), None,
                                       arr_delay), dtype="Float64"),
        "carrier": pd.array(rng.choice(CARRIERS, rows).tolist(),
                            dtype=pd.StringDtype("python", na_value=pd.NA)),
        "tailnum": tailnum,
        "origin": pd.array(rng.choice(AIRPORTS, rows).tolist(),
                           dtype=pd.StringDtype("python", na_value=pd.NA)),
        "distance": rng.integers(80, 4983, rows).astype(np.int64),
        "time_hour": time_hour,
    })
