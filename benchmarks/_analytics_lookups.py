"""Lookups of ``bench_analytics.py``: point lookups, a narrow range and an ``in`` list
through carray's table indexes, against carray's own scan, duckdb (on the Parquet file,
and with an ART index on a duckdb table) and polars (run as scripts: this folder is on
sys.path).

carray's scan reads the version of the table from before the index was made (a
reader opened then holds it), so both read the same data.  Every round draws new keys,
the same for every library; ratios are peer / carray-indexed, per round.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

RANGE_WIDTH = 0.001  # of x, uniform in [0, 1): 0.1% of the rows
IN_KEYS = 10


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _case(name: str, rounds: int, runners: dict[str, Callable[[Any], Any]],
          draw: Callable[[np.random.Generator], Any], seed: int, **facts: Any) -> dict:
    """Time every runner on the same drawn argument per round (after one warm-up
    call each); medians, ranges and per-round ratios against ``ours``."""
    rng = np.random.default_rng(seed)
    warm = draw(rng)
    for run in runners.values():
        run(warm)
        run(warm)
    times: dict[str, list[float]] = {lib: [] for lib in runners}
    for _ in range(rounds):
        arg = draw(rng)
        for lib, run in runners.items():
            times[lib].append(_timed(lambda run=run, arg=arg: run(arg)))
    ours = times["carray_index"]
    return {
        "name": name,
        "seconds": {lib: statistics.median(ts) for lib, ts in times.items()},
        "range": {lib: (min(ts), max(ts)) for lib, ts in times.items()},
        "ratios": {f"{lib}/carray_index": statistics.median(t / o for t, o in zip(ts, ours,
                                                                                 strict=True))
                   for lib, ts in times.items() if lib != "carray_index"},
        **facts,
    }


def _peers(df: Any, paths: dict[str, str]) -> dict[str, Any]:
    import duckdb
    import polars as pl

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute(f"CREATE TABLE f AS SELECT * FROM read_parquet('{paths['parquet']}')")
    t0 = time.perf_counter()
    con.execute("CREATE INDEX f_id ON f (id)")
    art = time.perf_counter() - t0
    return {"duck": con, "art_build": art, "polars": pl.from_pandas(df),
            "parquet": paths["parquet"]}


def lookup_cases(df: Any, paths: dict[str, str], rounds: int) -> list[dict]:
    """Point lookup on ``id``, a 0.1% range on ``x``, ``id in [10 keys]`` (sorted
    index), and the point lookup through a bloom index; see the module doc."""
    import polars as pl

    import carray as ca

    n = len(df)
    peers = _peers(df, paths)
    duck, pdf, parquet = peers["duck"], peers["polars"], peers["parquet"]
    scan = ca.ctable(rootdir=paths["ctable"], mode="r")  # holds the version without index
    t = ca.ctable(rootdir=paths["ctable"], mode="a")
    built: dict[str, float] = {}
    t0 = time.perf_counter()
    t.create_index("id")
    built["id"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    t.create_index("x")
    built["x"] = time.perf_counter() - t0
    sizes = {c: info["cbytes"] for c, info in t.indexes.items()}
    t.close()
    ours = ca.ctable(rootdir=paths["ctable"], mode="r")
    ids = lambda rng: int(rng.integers(n))  # noqa: E731
    cases = []

    def duck_q(sql: str) -> Callable[[Any], Any]:
        return lambda arg: duck.execute(sql, arg if isinstance(arg, list) else [arg]).fetchnumpy()

    point = "SELECT * FROM {} WHERE id = ?"
    cases.append(_case("point lookup: id == k", rounds, {
        "carray_index": lambda k: ours.fetchwhere(f"id == {k}"),
        "carray_scan": lambda k: scan.fetchwhere(f"id == {k}"),
        "duckdb_parquet": duck_q(point.format(f"read_parquet('{parquet}')")),
        "duckdb_art": duck_q(point.format("f")),
        "polars": lambda k: pdf.filter(pl.col("id") == k),
    }, ids, 1, rows=n, index_build_seconds=built["id"], index_cbytes=sizes["id"],
        duckdb_art_build_seconds=peers["art_build"]))

    lows = lambda rng: float(rng.random() * (1 - RANGE_WIDTH))  # noqa: E731
    for what, outcols, sql_cols in [("row numbers and x", "nrow__, x", "x"),
                                    ("all columns", None, "*")]:
        cases.append(_range_case(what, outcols, sql_cols, rounds, ours, scan, duck, pdf,
                                 parquet, lows, n, built["x"], sizes["x"]))

    keys = lambda rng: [int(k) for k in rng.integers(n, size=IN_KEYS)]  # noqa: E731
    in_sql = "SELECT * FROM {} WHERE id IN (" + ", ".join("?" * IN_KEYS) + ")"
    cases.append(_case(f"in: id in [{IN_KEYS} keys]", rounds, {
        "carray_index": lambda ks: ours.fetchwhere(f"id in {ks}"),
        "carray_scan": lambda ks: scan.fetchwhere(f"id in {ks}"),
        "duckdb_parquet": duck_q(in_sql.format(f"read_parquet('{parquet}')")),
        "duckdb_art": duck_q(in_sql.format("f")),
        "polars": lambda ks: pdf.filter(pl.col("id").is_in(ks)),
    }, keys, 3, rows=n))
    ours.close()
    cases.append(_bloom_case(paths, n, rounds, scan, duck, parquet))
    scan.close()
    duck.close()
    return cases


def _range_case(what: str, outcols: str | None, sql_cols: str, rounds: int, ours: Any,
                scan: Any, duck: Any, pdf: Any, parquet: str,
                lows: Callable[[np.random.Generator], float], n: int, build: float,
                size: int) -> dict:
    """``a <= x < a + 0.001`` (0.1% of the rows), returning ``what``."""
    import polars as pl

    def expr(a: float) -> str:
        return f"(x >= {a!r}) & (x < {a + RANGE_WIDTH!r})"

    sql = f"SELECT {sql_cols} FROM {{}} WHERE x >= ? AND x < ?"
    pcols = [pl.col("x")] if sql_cols == "x" else [pl.all()]
    return _case(f"range: 0.1% of x, {what}", rounds, {
        "carray_index": lambda a: ours.fetchwhere(expr(a), outcols=outcols),
        "carray_scan": lambda a: scan.fetchwhere(expr(a), outcols=outcols),
        "duckdb_parquet": lambda a: duck.execute(sql.format(f"read_parquet('{parquet}')"),
                                                 [a, a + RANGE_WIDTH]).fetchnumpy(),
        "duckdb_table": lambda a: duck.execute(sql.format("f"),
                                               [a, a + RANGE_WIDTH]).fetchnumpy(),
        "polars": lambda a: pdf.filter((pl.col("x") >= a) & (pl.col("x") < a + RANGE_WIDTH)
                                       ).select(pcols),
    }, lows, 2, rows=n, index_build_seconds=build, index_cbytes=size)


def _bloom_case(paths: dict[str, str], n: int, rounds: int, scan: Any, duck: Any,
                parquet: str) -> dict:
    """``id == k`` through a bloom index (it replaces the sorted one on ``id``); the
    table is left with no index."""
    import carray as ca

    t = ca.ctable(rootdir=paths["ctable"], mode="a")
    t.drop_index("x")
    t.drop_index("id")
    t0 = time.perf_counter()
    t.create_index("id", kind="bloom")
    build = time.perf_counter() - t0
    size = t.indexes["id"]["cbytes"]
    t.close()
    ours = ca.ctable(rootdir=paths["ctable"], mode="r")
    sql = f"SELECT * FROM read_parquet('{parquet}') WHERE id = ?"
    case = _case("point lookup through a bloom index: id == k", rounds, {
        "carray_index": lambda k: ours.fetchwhere(f"id == {k}"),
        "carray_scan": lambda k: scan.fetchwhere(f"id == {k}"),
        "duckdb_parquet": lambda k: duck.execute(sql, [k]).fetchnumpy(),
    }, lambda rng: int(rng.integers(n)), 4, rows=n, index_build_seconds=build,
        index_cbytes=size)
    ours.close()
    t = ca.ctable(rootdir=paths["ctable"], mode="a")
    t.drop_index("id")
    t.close()
    return case


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    from _analytics_data import make_frame, materialise

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as work:
        frame = make_frame(rows)
        for case in lookup_cases(frame, materialise(frame, work), rounds=7):
            print(json.dumps(case, default=str, indent=1))
