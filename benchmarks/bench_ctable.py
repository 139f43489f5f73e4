"""ctable queries against pandas, polars, duckdb, numpy+numexpr, pyarrow+Parquet and
python-blosc2.

Data: 10 M rows x 4 columns (int64 ``id`` = row number, float64 ``x`` and
``y`` uniform in [0, 1), int32 ``category`` in [0, 100)).  Query:
``(x < 0.1) & (y > 0.5)`` returning the matching ``id`` values (~5% of rows).

Cases, every library in the same run, medians of ``--repeat`` runs:

* memory: our in-memory (compressed) table vs pandas ``df.query`` and a
  boolean mask, polars ``DataFrame.filter`` (uncompressed, multi-threaded), numpy
  + numexpr on plain arrays, python-blosc2's ``CTable.where``.
* disk, cold open: open the dataset and run the query each time (warm page
  cache: it cannot be dropped here) - ours vs pyarrow reading the needed
  Parquet columns with a filter, polars ``scan_parquet`` and duckdb over the
  same Parquet file, vs python-blosc2 lazy expressions over its on-disk
  ``.b2nd`` arrays.
* sorted on ``x``: the same on disk, ours with the per-chunk min/max pruning
  on and off, vs pyarrow+Parquet (which prunes by row-group statistics).
* conversion: ``fromdataframe``/``todataframe`` vs pandas ``to_parquet``/``read_parquet``.

Run: ``python benchmarks/bench_ctable.py [--rows N] [--repeat R] [--rounds N]``.
Writes ``benchmarks/results/bench_ctable.{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import blosc2
import duckdb
import numexpr
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

import carray as ca

RESULTS = Path(__file__).parent / "results"
EXPR = "(x < 0.1) & (y > 0.5)"
ROUNDS = 3  # every library timed once per round; ratios come from same-round timings


def median_time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def make_frame(n: int, sort: bool) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    x, y = rng.random(n), rng.random(n)
    if sort:
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    return pd.DataFrame({"id": np.arange(n, dtype=np.int64), "x": x, "y": y,
                         "category": rng.integers(0, 100, n).astype(np.int32)})


@dataclasses.dataclass
class Row:
    id: int
    x: float
    y: float
    category: int


def blosc2_table(df: pd.DataFrame):
    return blosc2.CTable.from_pandas(df, Row)


def blosc2_on_disk(df: pd.DataFrame, root: str) -> None:
    os.makedirs(root, exist_ok=True)
    for name in df.columns:
        blosc2.asarray(df[name].to_numpy(), urlpath=f"{root}/{name}.b2nd", mode="w")


def blosc2_disk_query(root: str) -> np.ndarray:
    ids = blosc2.open(f"{root}/id.b2nd")
    x, y = blosc2.open(f"{root}/x.b2nd"), blosc2.open(f"{root}/y.b2nd")
    return np.asarray(ids[(x < 0.1) & (y > 0.5)][:])


def parquet_query(path: str) -> np.ndarray:
    table = pq.read_table(path, columns=["id"], filters=[("x", "<", 0.1), ("y", ">", 0.5)])
    return table.column("id").to_numpy()


def polars_scan_query(path: str) -> np.ndarray:
    return pl.scan_parquet(path).filter((pl.col("x") < 0.1) & (pl.col("y") > 0.5)) \
        .select("id").collect()["id"].to_numpy()


def duckdb_query(con, path: str) -> np.ndarray:
    return con.execute(f"SELECT id FROM read_parquet('{path}') WHERE x < 0.1 AND y > 0.5") \
        .fetchnumpy()["id"]


def ours_query(t: ca.ctable, prune: bool = True) -> np.ndarray:
    return t.fetchwhere(EXPR, outcols=["id"], prune=prune)["id"]


def run(rows: int, repeat: int) -> dict:
    results: dict = {"rows": rows, "repeat": repeat, "expression": EXPR,
                     "machine": platform.machine(), "cores": os.cpu_count(),
                     "versions": {"carray": ca.__version__, "pandas": pd.__version__,
                                  "pyarrow": pa.__version__, "blosc2": blosc2.__version__,
                                  "numexpr": numexpr.__version__, "numpy": np.__version__},
                     "cases": {}}
    tmp = tempfile.mkdtemp(prefix="bench_ctable_")
    try:
        for sort in (False, True):
            results["cases"].update(run_data(rows, sort, tmp, repeat))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def run_data(rows: int, sort: bool, tmp: str, repeat: int) -> dict:
    """Every case on one data set (random, or sorted on x)."""
    label = "sorted" if sort else "random"
    df = make_frame(rows, sort)
    want = df["id"].to_numpy()[((df.x < 0.1) & (df.y > 0.5)).to_numpy()]
    mem = ca.ctable.fromdataframe(df)
    disk_root = f"{tmp}/ours_{label}"
    ca.ctable.fromdataframe(df, rootdir=disk_root).close()
    parquet = f"{tmp}/{label}.parquet"
    df.to_parquet(parquet, index=False)
    b2root = f"{tmp}/b2_{label}"
    blosc2_on_disk(df, b2root)

    timings = {}
    if not sort:
        arrays = {c: df[c].to_numpy() for c in df.columns}
        b2t = blosc2_table(df)
        pdf = pl.from_pandas(df)
        timings.update({
            "carray (memory)": lambda: ours_query(mem),
            "pandas df.query": lambda: df.query(EXPR)["id"].to_numpy(),
            "pandas mask": lambda: df["id"].to_numpy()[
                ((df["x"] < 0.1) & (df["y"] > 0.5)).to_numpy()],
            "numpy+numexpr": lambda: arrays["id"][numexpr.evaluate(
                EXPR, local_dict={"x": arrays["x"], "y": arrays["y"]})],
            "blosc2 CTable.where": lambda: np.asarray(
                b2t.where(EXPR, columns=["id"])["id"][:]),
            "polars filter (memory)": lambda: pdf.filter(
                (pl.col("x") < 0.1) & (pl.col("y") > 0.5))["id"].to_numpy(),
        })
    con = duckdb.connect()
    con.execute("SET threads = 2")
    timings.update({
        "carray (disk, cold open)": lambda: ours_query(ca.open(disk_root, mode="r")),
        "carray (disk, cold open, no pruning)": lambda: ours_query(
            ca.open(disk_root, mode="r"), prune=False),
        "pyarrow+Parquet (filter)": lambda: parquet_query(parquet),
        "polars scan_parquet": lambda: polars_scan_query(parquet),
        "duckdb Parquet": lambda: duckdb_query(con, parquet),
        "blosc2 lazyexpr (disk)": lambda: blosc2_disk_query(b2root),
    })
    for name, fn in timings.items():  # each checked once, which also warms it up
        if not np.array_equal(np.sort(np.asarray(fn())), want):
            raise AssertionError(f"{name} returned wrong ids")
    case: dict[str, list[float]] = {name: [] for name in timings}
    for r in range(ROUNDS):
        for name, fn in timings.items():
            seconds, _ = median_time(fn, repeat)
            case[name].append(seconds)
            print(f"round {r + 1} {label:7s} {name:40s} {seconds * 1e3:9.2f} ms", flush=True)
    out: dict = {label: case}
    if not sort:
        conv = {
            "carray fromdataframe (disk)": lambda: ca.ctable.fromdataframe(
                df, rootdir=f"{tmp}/conv", mode="w").close(),
            "carray fromdataframe (memory)": lambda: ca.ctable.fromdataframe(df),
            "pandas to_parquet": lambda: df.to_parquet(f"{tmp}/conv.parquet", index=False),
            "carray todataframe (disk, cold open)": lambda: ca.open(
                f"{tmp}/conv", mode="r").todataframe(),
            "carray todataframe (memory)": lambda: mem.todataframe(),
            "pandas read_parquet": lambda: pd.read_parquet(f"{tmp}/conv.parquet"),
        }
        out["conversion"] = {}
        for name, fn in conv.items():
            out["conversion"][name] = [median_time(fn, repeat)[0]]
            print(f"convert {name:40s} {out['conversion'][name][0] * 1e3:9.2f} ms", flush=True)
    return out


def ratios(results: dict) -> dict:
    """Each ratio (peer time / ours) per round: same-round timings only."""
    r, s, c = results["cases"]["random"], results["cases"]["sorted"], \
        results["cases"]["conversion"]

    def per_round(peer: dict, peer_name: str, ours: dict, ours_name: str) -> list[float]:
        return [p / o for p, o in zip(peer[peer_name], ours[ours_name], strict=False)]

    mem, disk = "carray (memory)", "carray (disk, cold open)"
    return {
        "memory vs pandas df.query (target >= 2)": per_round(r, "pandas df.query", r, mem),
        "memory vs pandas mask": per_round(r, "pandas mask", r, mem),
        "memory vs numpy+numexpr": per_round(r, "numpy+numexpr", r, mem),
        "memory vs blosc2 CTable.where (target >= 5)":
            per_round(r, "blosc2 CTable.where", r, mem),
        "memory vs polars in memory (target >= 1.0)":
            per_round(r, "polars filter (memory)", r, mem),
        "disk vs polars scan_parquet (target >= 2)": per_round(r, "polars scan_parquet", r,
                                                               disk),
        "disk vs duckdb Parquet (target >= 2)": per_round(r, "duckdb Parquet", r, disk),
        "disk vs pyarrow+Parquet (target >= 3)": per_round(r, "pyarrow+Parquet (filter)", r,
                                                           disk),
        "disk vs blosc2 lazyexpr (target > 1)": per_round(r, "blosc2 lazyexpr (disk)", r,
                                                          disk),
        "sorted: disk vs pyarrow+Parquet (target >= 2)":
            per_round(s, "pyarrow+Parquet (filter)", s, disk),
        "sorted: pruning on vs off (target >= 5)":
            per_round(s, "carray (disk, cold open, no pruning)", s, disk),
        "fromdataframe (disk) vs to_parquet":
            per_round(c, "pandas to_parquet", c, "carray fromdataframe (disk)"),
        "todataframe (disk) vs read_parquet":
            per_round(c, "pandas read_parquet", c, "carray todataframe (disk, cold open)"),
    }


def write(results: dict, name: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    results["ratios"] = ratios(results)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [f"# {name}", "",
             f"{results['rows']:,} rows x 4 columns; query `{EXPR}` returning ids; times are "
             f"medians of {results['repeat']} runs (first round); ratios are the median "
             f"[range] over {ROUNDS} rounds, every library in each round; "
             f"{results['cores']} cores.", "",
             "| case | library | ms |", "| --- | --- | ---: |"]
    for case, timings in results["cases"].items():
        for lib, seconds in timings.items():
            lines.append(f"| {case} | {lib} | {seconds[0] * 1e3:.2f} |")
    lines += ["", "| ratio (peer time / ours) | median [range] |", "| --- | ---: |"]
    lines += [f"| {k} | {statistics.median(v):.2f}x [{min(v):.2f}, {max(v):.2f}] |"
              for k, v in results["ratios"].items()]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    global ROUNDS
    ROUNDS = args.rounds
    ca.set_nthreads(2)
    blosc2.set_nthreads(2)
    numexpr.set_num_threads(2)
    name = "bench_ctable" if args.rows == 10_000_000 else f"bench_ctable_{args.rows}"
    write(run(args.rows, args.repeat), name)


if __name__ == "__main__":
    main()
