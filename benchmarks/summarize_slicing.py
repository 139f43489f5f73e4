"""Medians across several runs of bench_slicing.py (each run's ratios are same-run ratios).

Usage: ``python benchmarks/summarize_slicing.py run1.json run2.json ...``; writes
``benchmarks/results/bench_slicing_runs.md`` and prints it.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

RATIOS = [("auto_over_carray", ">= 1.0", lambda v: v >= 1.0),
          ("carray_over_best_blosc2", "<= 1.3", lambda v: v <= 1.3),
          ("zarr_over_carray", ">= 5", lambda v: v >= 5),
          ("h5py_over_carray", ">= 5", lambda v: v >= 5)]
CASES = {"slice0": "a[i, :, :]", "slice1": "a[:, j, :]", "slice2": "a[:, :, k]",
         "box": "10x10x10 box", "element": "single element"}


def main(paths: list[str]) -> str:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    rows = {}
    chunk_over_element = {}
    for run in runs:
        for r in run["ratios"]:
            if "chunk_over_element" in r:
                chunk_over_element.setdefault(r["where"], []).append(
                    r["chunk_over_element"]["carray"])
            else:
                rows.setdefault((r["where"], r["case"]), []).append(r)
    lines = [f"# bench_slicing: medians of {len(runs)} runs", "",
             "Each cell: median of the per-run ratios (each computed within one run), "
             "then the range over runs; carray's time is the median per operation.", "",
             "| where | case | carray | " + " | ".join(f"{n} ({t})" for n, t, _ in RATIOS) + " |",
             "| --- | --- | ---: |" + " --- |" * len(RATIOS)]
    for (where, case), rs in rows.items():
        cells = []
        for name, _, ok in RATIOS:
            vals = [r[name] for r in rs if r.get(name) is not None]
            if not vals:
                cells.append("-")
                continue
            med = statistics.median(vals)
            cells.append(f"{med:.2f}x ({min(vals):.2f}-{max(vals):.2f}) "
                         f"{'met' if ok(med) else 'MISSED'}")
        t = statistics.median(r["carray_s"] for r in rs)
        shown = f"{t * 1e3:.2f} ms" if t >= 1e-3 else f"{t * 1e6:.1f} us"
        lines.append(f"| {where} | {CASES.get(case, case)} | {shown} | " + " | ".join(cells)
                     + " |")
    lines += ["", "Whole-chunk decode / single-element read, carray (target >= 10x):", ""]
    for where, vals in chunk_over_element.items():
        med = statistics.median(vals)
        lines.append(f"- {where}: {med:.1f}x ({min(vals):.1f}-{max(vals):.1f}) "
                     f"{'met' if med >= 10 else 'MISSED'}")
    text = "\n".join(lines) + "\n"
    out = Path(__file__).parent / "results" / "bench_slicing_runs.md"
    out.write_text(text)
    return text


if __name__ == "__main__":
    print(main(sys.argv[1:]))
