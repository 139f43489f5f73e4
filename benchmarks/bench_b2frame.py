"""carray's pure-Python Blosc2 frame reader/writer against python-blosc2, on one big array.

Case: a float64 3-D array (~400 MB; ``--quick``: ~40 MB) written as a contiguous
``.b2nd`` frame and read back whole. Both libraries use the same chunk and block
shapes (the ones python-blosc2 picks by itself), zstd level 5 with byte
shuffle, and the same number of Blosc threads. Our writer runs with
``fsync=False`` because python-blosc2 does not fsync either. Every timing is
the median of ``--repeat`` runs; reads are warm-cache (the page cache cannot be
dropped from here). Also timed: carray with its own default chunk/block shapes,
and reading one small region.

Run: ``python benchmarks/bench_b2frame.py [--quick] [--repeat N]``.
Writes ``benchmarks/results/bench_b2frame.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import blosc2
import numpy as np
from _common import median_time

import carray as ca
from carray.layouts.b2nd.frame import read_array, read_frame, write_array

RESULTS = Path(__file__).parent / "results"


def make_data(shape) -> np.ndarray:
    # A smooth field plus a little noise: compresses like measured data, not like zeros.
    rng = np.random.default_rng(42)
    z, y, x = (np.linspace(0, 4 * np.pi, n) for n in shape)
    field = np.sin(z)[:, None, None] + np.cos(y)[None, :, None] * np.sin(x)[None, None, :]
    return (field * 100 + rng.normal(0, 0.01, shape)).round(3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="~40 MB instead of ~400 MB")
    ap.add_argument("--repeat", type=int, default=None, help="runs per timing (median)")
    ap.add_argument("--nthreads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    shape = (40, 500, 250) if args.quick else (400, 500, 250)
    repeat = args.repeat or (3 if args.quick else 5)
    ca.set_nthreads(args.nthreads)
    blosc2.set_nthreads(args.nthreads)
    data = make_data(shape)
    cp = blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=5, filters=[blosc2.Filter.SHUFFLE],
                        nthreads=args.nthreads)
    dp = blosc2.DParams(nthreads=args.nthreads)
    ours_cp = ca.CParams(cname="zstd", clevel=5, shuffle=ca.SHUFFLE)
    results: dict = {
        "shape": list(shape), "dtype": "float64", "mbytes": data.nbytes / 2**20,
        "repeat": repeat, "nthreads": args.nthreads, "blosc2": blosc2.__version__,
        "numpy": np.__version__, "python": sys.version.split()[0],
        "machine": platform.machine(), "cpus": os.cpu_count(), "timings_s": {},
    }
    t = results["timings_s"]
    with tempfile.TemporaryDirectory() as tmp:
        p_b2, p_ours, p_def = (os.path.join(tmp, n) for n in ("b2.b2nd", "ours.b2nd",
                                                               "def.b2nd"))

        def b2_write():
            blosc2.asarray(data, urlpath=p_b2, mode="w", cparams=cp, dparams=dp)

        t["write_python_blosc2"] = median_time(b2_write, repeat)
        b2 = blosc2.open(p_b2, mode="r", dparams=dp)
        chunks, blocks = tuple(b2.chunks), tuple(b2.blocks)
        del b2
        results["chunks"], results["blocks"] = list(chunks), list(blocks)

        def ours_write():
            write_array(data, p_ours, chunks=chunks, blocks=blocks, cparams=ours_cp,
                        fsync=False)

        t["write_carray"] = median_time(ours_write, repeat)
        t["write_carray_fsync"] = median_time(
            lambda: write_array(data, p_ours, chunks=chunks, blocks=blocks, cparams=ours_cp),
            max(1, repeat // 2))

        def b2_read():
            return blosc2.open(p_b2, mode="r", dparams=dp)[:]

        def ours_read():
            return read_array(p_ours)

        assert np.array_equal(b2_read(), data) and np.array_equal(ours_read(), data)
        assert np.array_equal(read_array(p_b2), data)
        t["read_python_blosc2"] = median_time(b2_read, repeat)
        t["read_carray"] = median_time(ours_read, repeat)
        t["read_carray_of_python_blosc2_file"] = median_time(lambda: read_array(p_b2), repeat)
        t["read_python_blosc2_of_carray_file"] = median_time(
            lambda: blosc2.open(p_ours, mode="r", dparams=dp)[:], repeat)

        key = (slice(7, 9), slice(100, 140), slice(30, 90))
        t["region_python_blosc2"] = median_time(
            lambda: blosc2.open(p_b2, mode="r", dparams=dp)[key], repeat * 4)
        with read_frame(p_ours) as f:
            assert np.array_equal(f[key], data[key])
        t["region_carray"] = median_time(lambda: read_frame(p_ours)[key], repeat * 4)

        write_array(data, p_def, cparams=ours_cp, fsync=False)
        with read_frame(p_def) as f:
            results["carray_default_chunks"] = list(f.chunkshape)
            results["carray_default_blocks"] = list(f.blockshape)
        t["write_carray_default_shapes"] = median_time(
            lambda: write_array(data, p_def, cparams=ours_cp, fsync=False), repeat)
        t["read_carray_default_shapes"] = median_time(lambda: read_array(p_def), repeat)
        results["file_mbytes"] = {n: os.path.getsize(p) / 2**20 for n, p in
                                  (("python_blosc2", p_b2), ("carray", p_ours),
                                   ("carray_default_shapes", p_def))}
    RESULTS.mkdir(exist_ok=True)
    name = "bench_b2frame_quick.json" if args.quick else "bench_b2frame.json"
    (RESULTS / name).write_text(json.dumps(results, indent=1) + "\n")
    mb = results["mbytes"]
    for k, v in t.items():
        rate = f"{mb / v:8.0f} MB/s" if not k.startswith("region") else ""
        print(f"{k:40s} {v * 1000:9.1f} ms {rate}")
    print(json.dumps({k: v for k, v in results.items() if k != "timings_s"}))


if __name__ == "__main__":
    main()
