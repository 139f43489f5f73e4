"""The default Blosc block size of row-chunked arrays: ratio, point reads, full reads.

Usage::

    python benchmarks/bench_blocksize.py [--mb 128] [--runs 3]

A 1-d float64 array (a smooth signal plus noise at float32 precision, as in
``bench_distributed.py``) stored in the superchunk layout on disk with lz4 and zstd
(clevel 5, shuffle) and each candidate block size.  Measured per run: compression
ratio, 2,000 random single-element reads (microseconds each, from the page cache)
and a full read (median of 5).  Reported: medians over the runs.  Results go to
``benchmarks/results/bench_blocksize.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import median_time

import carray as ca
from carray.codecs import blosc

RESULTS = Path(__file__).resolve().parent / "results"
SIZES_KIB = (16, 32, 64, 128, 256, 512)


def signal(n: int) -> np.ndarray:
    i = np.arange(n, dtype=np.uint64)
    noise = ((i * np.uint64(2654435761)) % np.uint64(2**32)).astype(np.float64) / 2**32 - 0.5
    x = i.astype(np.float64)
    values = 100 * np.sin(x / 5000) + 10 * np.cos(x / 77_777) + 0.02 * noise
    return values.astype(np.float32).astype(np.float64)


def measure(data: np.ndarray, cname: str, kib: int, root: Path) -> dict:
    blosc._BLOCK = blosc._BLOCK_DENSE = kib * 1024  # the default under test
    path = root / f"{cname}-{kib}"
    ca.carray(data, rootdir=path, mode="w", fsync=False,
              cparams=ca.CParams(cname=cname, clevel=5)).close()
    a = ca.open(path, mode="r")
    picks = np.random.default_rng(kib).integers(0, len(data), 2000).tolist()
    a[picks[0]]  # opens the files
    t0 = time.perf_counter()
    for i in picks:
        a[i]
    point_us = (time.perf_counter() - t0) / len(picks) * 1e6
    full_ms = median_time(lambda: a[:], 5) * 1e3
    return {"ratio": a.nbytes / a.cbytes, "point_us": point_us, "full_ms": full_ms}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=128)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    data = signal(args.mb * 2**20 // 8)
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            for cname in ("lz4", "zstd"):
                for kib in SIZES_KIB:
                    runs.setdefault(f"{cname} {kib}", []).append(
                        measure(data, cname, kib, Path(tmp)))
    rows = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in runs.items()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_blocksize.json").write_text(
        json.dumps({"config": vars(args), "runs": runs, "medians": rows}, indent=2) + "\n")
    lines = [f"# Default block size of row-chunked arrays ({args.mb} MB float64, "
             f"median of {args.runs} runs)", "",
             "| codec | block KiB | ratio | single element (us) | full read (ms) |",
             "|---|---:|---:|---:|---:|"]
    for key, r in rows.items():
        cname, kib = key.split()
        lines.append(f"| {cname} | {kib} | {r['ratio']:.3f} | {r['point_us']:.1f} | "
                     f"{r['full_ms']:.1f} |")
    (RESULTS / "bench_blocksize.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
