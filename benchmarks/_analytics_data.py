"""The data set of ``bench_analytics.py``: a flights-like table, as a pandas DataFrame,
a Parquet file and a ctable on disk (run as scripts: this folder is on sys.path).

Columns (``rows`` rows, default 10 M):

* ``id``: int64, a random permutation of ``0..rows-1`` (unsorted unique keys: point
  lookups);
* ``route``: int32 in ``[0, 1000)`` (the group-by key, 1,000 groups);
* ``carrier``: one of 20 two-letter strings (skewed);
* ``dep_delay``: float64 minutes, about 5% NaN (missing);
* ``distance``: int32 in ``[50, 5000)``;
* ``x``: float64 uniform in ``[0, 1)`` (ranges at a chosen selectivity).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

CARRIERS = np.array(["AA", "AS", "B6", "DL", "EV", "F9", "G4", "HA", "MQ", "NK", "OH",
                     "OO", "QX", "UA", "VX", "WN", "YV", "YX", "9E", "ZW"], dtype=object)


def make_frame(rows: int, seed: int = 7) -> pd.DataFrame:
    """The benchmark's table in memory (the same for a given ``rows`` and ``seed``)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(CARRIERS) + 1)
    carrier = CARRIERS[rng.choice(len(CARRIERS), rows, p=weights / weights.sum())]
    delay = rng.normal(10.0, 40.0, rows)
    delay[rng.random(rows) < 0.05] = np.nan
    return pd.DataFrame({
        "id": rng.permutation(rows).astype(np.int64),
        "route": rng.integers(0, 1000, rows, dtype=np.int32),
        "carrier": pd.Series(carrier, dtype=object),
        "dep_delay": delay,
        "distance": rng.integers(50, 5000, rows, dtype=np.int32),
        "x": rng.random(rows),
    })


def materialise(df: pd.DataFrame, workdir: str | os.PathLike) -> dict[str, str]:
    """Write ``df`` as Parquet and as a ctable under ``workdir``; their paths by name
    (``parquet``, ``ctable``)."""
    import carray as ca

    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    paths = {"parquet": str(work / "flights.parquet"), "ctable": str(work / "flights.ctable")}
    df.to_parquet(paths["parquet"], index=False)
    ca.ctable.fromdataframe(df, rootdir=paths["ctable"], mode="w").close()
    return paths
