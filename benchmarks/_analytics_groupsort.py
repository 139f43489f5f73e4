"""Group-by and sort cases of ``bench_analytics.py``: carray against polars, pandas and
duckdb on the same data, each round timing every library once (run as scripts: this
folder is on sys.path).

Run alone (``python benchmarks/_analytics_groupsort.py [rows]``, default 1 M rows)
while developing; ``bench_analytics.py`` calls :func:`groupsort_cases`.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import pandas as pd

# A sort's working memory, as a fraction of the sorted column's size: the target is
# peak memory under a quarter of it.
SORT_MEMORY_FRACTION = 0.125


def _time(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _case(name: str, runs: dict[str, Callable[[], object]], rounds: int,
          ours: str = "carray", extra: dict | None = None) -> dict:
    """Every library once per round; ratios of each peer to ``ours`` within a round."""
    seconds: dict[str, list[float]] = {lib: [] for lib in runs}
    for _ in range(rounds):
        for lib, fn in runs.items():
            seconds[lib].append(_time(fn))
    return _summary(name, seconds, ours, extra)


def _summary(name: str, seconds: dict[str, list[float]], ours: str = "carray",
             extra: dict | None = None) -> dict:
    ratios = {lib: [s / o for s, o in zip(v, seconds[ours], strict=True)]
              for lib, v in seconds.items() if lib != ours}
    return {
        "name": name,
        "seconds": seconds,
        "median": {lib: statistics.median(v) for lib, v in seconds.items()},
        "range": {lib: (min(v), max(v)) for lib, v in seconds.items()},
        "ratio_vs_carray": {lib: statistics.median(v) for lib, v in ratios.items()},
        **(extra or {}),
    }


def _groupby_cases(df: pd.DataFrame, paths: dict[str, str], rounds: int) -> list[dict]:
    import duckdb
    import polars as pl

    import carray as ca

    t = ca.ctable(rootdir=paths["ctable"], mode="r")
    spec = {"delay": ("dep_delay", "mean"), "far": ("distance", "max"), "n": ("id", "count")}
    pq = paths["parquet"]
    route = {
        "carray": lambda: t.groupby("route").agg(spec),
        "polars_scan_parquet": lambda: pl.scan_parquet(pq).group_by("route").agg(
            pl.col("dep_delay").mean().alias("delay"), pl.col("distance").max().alias("far"),
            pl.col("id").count().alias("n")).sort("route").collect(),
        "pandas_read_parquet": lambda: pd.read_parquet(
            pq, columns=["route", "dep_delay", "distance", "id"]).groupby("route").agg(
            delay=("dep_delay", "mean"), far=("distance", "max"), n=("id", "count")),
        "pandas_in_memory": lambda: df.groupby("route").agg(
            delay=("dep_delay", "mean"), far=("distance", "max"), n=("id", "count")),
        "duckdb_parquet": lambda: duckdb.sql(
            f"SELECT route, avg(dep_delay) AS delay, max(distance) AS far, count(id) AS n "
            f"FROM read_parquet('{pq}') GROUP BY route ORDER BY route").fetchnumpy(),
    }
    carrier = {
        "carray": lambda: t.groupby("carrier").agg(spec),
        "polars_scan_parquet": lambda: pl.scan_parquet(pq).group_by("carrier").agg(
            pl.col("dep_delay").mean().alias("delay"), pl.col("distance").max().alias("far"),
            pl.col("id").count().alias("n")).sort("carrier").collect(),
        "pandas_read_parquet": lambda: pd.read_parquet(
            pq, columns=["carrier", "dep_delay", "distance", "id"]).groupby("carrier").agg(
            delay=("dep_delay", "mean"), far=("distance", "max"), n=("id", "count")),
        "duckdb_parquet": lambda: duckdb.sql(
            f"SELECT carrier, avg(dep_delay) AS delay, max(distance) AS far, count(id) AS n "
            f"FROM read_parquet('{pq}') GROUP BY carrier ORDER BY carrier").fetchnumpy(),
    }
    return [_case("groupby route (1,000 groups), mean+max+count, from disk", route, rounds),
            _case("groupby carrier (20 strings), mean+max+count, from disk", carrier, rounds)]


_SORT_CHILD = r"""
import json, os, resource, sys, time, tracemalloc
import carray as ca
src, dst, by, memory = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
t = ca.ctable(rootdir=src, mode="r")
len(t), t.names
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
t.sort(by, rootdir=dst, mode="w", memory=memory).close()
secs = time.perf_counter() - t0
_, traced = tracemalloc.get_traced_memory()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": secs, "traced_peak": traced, "rss_growth": (peak - base) * 1024}))
"""


def _sort_once(src: str, dst: str, by: list[str], memory: int) -> dict:
    """One sort to disk in a fresh process: its time, the peak of memory traced by
    ``tracemalloc`` (numpy's buffers included) and the growth of peak RSS."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))), "src"), env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", _SORT_CHILD, src, dst, json.dumps(by),
                          str(memory)], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _sort_cases(df: pd.DataFrame, paths: dict[str, str], rounds: int) -> list[dict]:
    import duckdb
    import polars as pl

    pq = paths["parquet"]
    column_bytes = df["x"].to_numpy().nbytes
    memory = int(column_bytes * SORT_MEMORY_FRACTION)
    work = tempfile.mkdtemp(prefix="bench-sort-")
    cases = []
    try:
        for by in (["x"], ["route", "x"]):
            dst = os.path.join(work, "sorted")
            measured: list[dict] = []

            def ours(by: list[str] = by, dst: str = dst, measured: list = measured) -> None:
                measured.append(_sort_once(paths["ctable"], dst, by, memory))

            runs = {
                "carray": ours,
                "polars_scan_parquet": lambda by=by: pl.scan_parquet(pq).sort(by).sink_parquet(
                    os.path.join(work, "polars.parquet")),
                "duckdb_parquet": lambda by=by: duckdb.sql(
                    f"COPY (SELECT * FROM read_parquet('{pq}') ORDER BY {', '.join(by)}) TO "
                    f"'{os.path.join(work, 'duck.parquet')}' (FORMAT parquet)"),
            }
            case = _case(f"sort by {', '.join(by)} to disk (memory bound {memory:,} B)", runs,
                         rounds)
            # The process's start and imports are not the sort's: time it inside.
            case["seconds"]["carray_with_process_start"] = case["seconds"]["carray"]
            case["seconds"]["carray"] = [m["seconds"] for m in measured]
            case = _summary(case["name"], case["seconds"])
            case["column_bytes"] = column_bytes
            case["memory_bound"] = memory
            case["traced_peak_bytes"] = max(m["traced_peak"] for m in measured)
            case["rss_growth_bytes"] = max(m["rss_growth"] for m in measured)
            case["peak_vs_column"] = case["rss_growth_bytes"] / column_bytes
            cases.append(case)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return cases


def groupsort_cases(df: pd.DataFrame, paths: dict[str, str], rounds: int) -> list[dict]:
    """The group-by and sort cases over ``df`` and its files ``paths`` (``parquet``,
    ``ctable``), ``rounds`` rounds each."""
    return _groupby_cases(df, paths, rounds) + _sort_cases(df, paths, rounds)


if __name__ == "__main__":
    from _analytics_data import make_frame, materialise

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    workdir = tempfile.mkdtemp(prefix="bench-groupsort-")
    try:
        frame = make_frame(rows)
        files = materialise(frame, workdir)
        for c in groupsort_cases(frame, files, rounds=3):
            c.pop("seconds")
            print(json.dumps(c, indent=1, default=str))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
