"""CSV in and out of tables, and ``isin``, against pandas, pyarrow and polars.

Data: ``--rows`` rows (default 1 M) of int64 ``i`` (row number), float64 ``x``
uniform in [0, 1), a string ``carrier`` of 5 values and a date ``day``, written
as CSV by pyarrow (about 42 bytes a row).

Cases, each in a fresh process (so the peak resident size is the case's own;
reported above what the imports take), medians of ``--repeat`` runs:

* read: ``ctable.from_csv`` into a stored table and into memory, vs pandas
  ``read_csv``, pyarrow ``csv.read_csv`` and polars ``read_csv`` (all three
  read the whole file into memory).
* write: ``t.to_csv`` of the stored table vs pandas ``to_csv``, pyarrow
  ``csv.write_csv`` and polars ``write_csv`` of an in-memory frame.
* isin: ``t['carrier'].isin([...])`` and ``t['i'].isin(<every 7th id>)`` on the
  stored table vs pandas ``Series.isin`` on an in-memory frame.

Run: ``python benchmarks/bench_csv.py [--rows N] [--repeat R]``.
Writes ``benchmarks/results/bench_csv.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

# Each case: setup (not timed) and the timed statement, run in a fresh interpreter.
# carray reads and writes CSV through pyarrow (and numpy's dates through pandas): imported
# before the peak is taken, as every other library's is.
OURS = "import carray as ca, numpy as np, pandas, pyarrow.csv, pyarrow.compute, shutil; "
CASES: dict[str, tuple[str, str]] = {
    "read: carray from_csv (stored)": (
        OURS, "shutil.rmtree(D + '/t', ignore_errors=True); "
        "ca.ctable.from_csv(F, rootdir=D + '/t').close()"),
    "read: carray from_csv (memory)": (OURS, "ca.ctable.from_csv(F)"),
    "read: pandas read_csv": ("import pandas as pd", "pd.read_csv(F, parse_dates=['day'])"),
    "read: pyarrow read_csv": ("import pyarrow.csv as pc", "pc.read_csv(F)"),
    "read: polars read_csv": ("import polars as pl", "pl.read_csv(F, try_parse_dates=True)"),
    "write: carray to_csv (stored table)": (
        OURS + "t = ca.open(D + '/stored', mode='r')", "t.to_csv(D + '/o.csv')"),
    "write: pandas to_csv": (
        "import pandas as pd; df = pd.read_csv(F, parse_dates=['day'])",
        "df.to_csv(D + '/o.csv', index=False)"),
    "write: pyarrow write_csv": (
        "import pyarrow.csv as pc; tb = pc.read_csv(F)", "pc.write_csv(tb, D + '/o.csv')"),
    "write: polars write_csv": (
        "import polars as pl; df = pl.read_csv(F, try_parse_dates=True)",
        "df.write_csv(D + '/o.csv')"),
    "isin strings: carray column": (
        OURS + "t = ca.open(D + '/stored', mode='r'); t['carrier'].isin(['UA'])",
        "t['carrier'].isin(['UA', 'B6'])"),
    "isin strings: pandas": (
        "import pandas as pd; df = pd.read_csv(F)", "df['carrier'].isin(['UA', 'B6'])"),
    "isin 1/7 of the ids: carray column": (
        OURS + "t = ca.open(D + '/stored', mode='r'); "
        "ids = np.arange(0, len(t), 7); t['i'].isin([1])", "t['i'].isin(ids)"),
    "isin 1/7 of the ids: pandas": (
        "import pandas as pd, numpy as np; df = pd.read_csv(F); ids = np.arange(0, len(df), 7)",
        "df['i'].isin(ids)"),
}

# The peak is the kernel's VmHWM: ru_maxrss would carry the parent's peak over fork.
RUNNER = """
import statistics, sys, time
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) * 1024
F, D, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
{setup}
base = hwm()
times = []
for _ in range(repeat):
    t0 = time.perf_counter()
    {stmt}
    times.append(time.perf_counter() - t0)
print(statistics.median(times), hwm() - base)
"""


def make_csv(path: Path, rows: int) -> int:
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pc

    rng = np.random.default_rng(1)
    carriers = np.array(["UA", "AA", "DL", "WN", "B6"], dtype=object)
    days = np.datetime64("2020-01-01") + rng.integers(0, 1000, rows).astype("m8[D]")
    pc.write_csv(pa.table({"i": np.arange(rows), "x": rng.random(rows),
                           "carrier": carriers[rng.integers(0, 5, rows)], "day": days}), path)
    return path.stat().st_size


def run_case(setup: str, stmt: str, csv: Path, where: Path, repeat: int) -> tuple[float, int]:
    code = RUNNER.format(setup=setup, stmt=stmt)
    out = subprocess.run([sys.executable, "-c", code, str(csv), str(where), str(repeat)],
                         capture_output=True, text=True, check=True)
    seconds, peak = out.stdout.split()
    return float(seconds), int(peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        csv = where / "data.csv"
        size = make_csv(csv, args.rows)
        import carray as ca

        ca.ctable.from_csv(csv, rootdir=str(where / "stored")).close()
        results = []
        for name, (setup, stmt) in CASES.items():
            seconds, peak = run_case(setup, stmt, csv, where, args.repeat)
            results.append({"case": name, "seconds": seconds, "peak_bytes_over_imports": peak})
            print(f"{name:40s} {seconds:8.3f} s  peak +{peak / 2**20:7.1f} MiB", flush=True)
    RESULTS.mkdir(exist_ok=True)
    meta = {"rows": args.rows, "csv_bytes": size, "repeat": args.repeat,
            "python": platform.python_version(), "machine": platform.machine()}
    (RESULTS / "bench_csv.json").write_text(json.dumps({"meta": meta, "results": results},
                                                       indent=2))
    lines = [f"# CSV and isin: {args.rows:,} rows, {size / 2**20:.1f} MiB of CSV", "",
             "| case | seconds (median) | peak resident size over the imports |",
             "| --- | ---: | ---: |"]
    lines += [f"| {r['case']} | {r['seconds']:.3f} | {r['peak_bytes_over_imports'] / 2**20:.1f} MiB |"
              for r in results]
    (RESULTS / "bench_csv.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
