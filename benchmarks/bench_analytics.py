"""Tables for analysis against duckdb, polars and pandas: index lookups, ranges,
group-by and out-of-core sort, every library in the same run.

Data: ``_analytics_data.make_frame`` (10 M flights-like rows by default), written as
Parquet and as a ctable on disk.  The cases are in ``_analytics_lookups.py`` (indexes)
and ``_analytics_groupsort.py`` (group-by, sort); each library is timed once per
round, and a ratio is taken between timings of the same round.

Run: ``python benchmarks/bench_analytics.py [--rows N] [--rounds R] [--only lookups|groupsort]``.
Writes ``benchmarks/results/bench_analytics.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

import numpy as np
from _analytics_data import make_frame, materialise
from _analytics_groupsort import groupsort_cases
from _analytics_lookups import lookup_cases

import carray as ca

RESULTS = Path(__file__).parent / "results"


def _seconds(case: dict, lib: str) -> tuple[float, float, float]:
    """Median, min and max seconds of ``lib`` in ``case``."""
    median = case.get("median", case["seconds"])[lib]
    lo, hi = case["range"][lib]
    return median, lo, hi


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g}"


def report(results: dict) -> str:
    lines = [f"# Tables for analysis ({results['rows']:,} rows, {results['rounds']} rounds, "
             f"{results['cores']} cores)", "",
             "Milliseconds: median [min-max] of the rounds; ratios are peer / carray "
             "within a round (above 1: carray faster), median of the rounds.", ""]
    for case in results["cases"]:
        lines += [f"## {case['name']}", "", "| library | ms |", "|---|---|"]
        libs = case["range"].keys()
        for lib in libs:
            median, lo, hi = _seconds(case, lib)
            lines.append(f"| {lib} | {_ms(median)} [{_ms(lo)}-{_ms(hi)}] |")
        ratios = case.get("ratios") or case.get("ratio_vs_carray") or {}
        if ratios:
            lines += ["", "Ratios: " + ", ".join(f"{k} {v:.3g}" for k, v in ratios.items())]
        facts = {k: v for k, v in case.items()
                 if k not in {"name", "seconds", "median", "range", "ratios", "ratio_vs_carray"}}
        if facts:
            lines += ["", "Facts: " + ", ".join(f"{k} = {v}" for k, v in facts.items())]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["lookups", "groupsort"])
    parser.add_argument("--out", default="bench_analytics")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_analytics_")
    try:
        df = make_frame(args.rows)
        paths = materialise(df, work)
        cases: list[dict] = []
        if args.only in (None, "lookups"):
            cases += lookup_cases(df, paths, args.rounds)
        if args.only in (None, "groupsort"):
            cases += groupsort_cases(df, paths, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {"rows": args.rows, "rounds": args.rounds, "cores": os.cpu_count(),
               "machine": platform.machine(), "carray": ca.__version__,
               "numpy": np.__version__, "cases": cases}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1, default=str))
    text = report(results)
    (RESULTS / f"{args.out}.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
