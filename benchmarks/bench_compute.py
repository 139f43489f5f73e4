"""Computing on compressed arrays: carray against python-blosc2, dask on zarr v3 and numpy.

Workload: two float64 3-D arrays ``a`` and ``b`` (default (384, 384, 352), ~415 MB
each; ``--quick``: (192, 192, 176), ~50 MB) of smooth sines plus a little noise,
quantised to 1/256, and a sorted 1-d float64 array of the same size.  Every
library stores them on disk with the SAME chunks (96, 96, 96) and blocks
(8, 32, 96) (zarr has no blocks: its Blosc codec gets the block size in bytes)
and the same codec (lz4, clevel 5, byte shuffle), with two threads.

Cases: ``sum()``, ``sum(axis=0)``, ``sum(axis=2)``, ``max(axis=1)``, ``std()``,
``(a * b + 1).sum()``, ``((a > 0) & (b < 0)).sum()``, ``(a * b + 1)`` computed
to a new array on disk, and ``max()`` of the sorted 1-d array (carray also
without its chunk summaries).  Peers: python-blosc2 (NDArray methods and its
lazy expressions), dask on zarr v3 (threaded scheduler), numpy on the arrays
decompressed in memory.  Each case is the median of ``--repeat`` runs, all
libraries back to back, in each of ``--rounds`` rounds; ratios (peer time / carray
time) are reported as the median and range over the rounds.  carray's peak traced
memory (tracemalloc, which sees numpy's buffers) is measured in a separate untimed
run.

    python benchmarks/bench_compute.py [--quick] [--repeat N] [--rounds N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from _common import median_time

import carray as ca
from carray.compute import zones

CHUNKS, BLOCKS = (96, 96, 96), (8, 32, 96)
RESULTS = Path(__file__).parent / "results"


def make_data(shape, phase: float) -> np.ndarray:
    rng = np.random.default_rng(int(phase * 10))
    out = np.empty(shape, dtype=np.float64)
    z, y, x = (np.linspace(0, 6 * np.pi, n) for n in shape)
    y, x = y[None, :, None], x[None, None, :]
    step = max(1, 2**22 // (shape[1] * shape[2]))
    for i in range(0, shape[0], step):
        zz = z[i:i + step, None, None]
        field = np.sin(zz + 2 * y + phase) + 0.5 * np.cos(3 * x - zz) \
            + 0.25 * np.sin(5 * y + 4 * x + phase)
        out[i:i + step] = np.round((field + rng.normal(0, 0.02, field.shape)) * 256) / 256
    return out


def build(root: Path, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> dict:
    import blosc2
    import zarr
    from zarr.codecs import BloscCodec

    cp = ca.CParams(cname="lz4", clevel=5, shuffle=1)
    out = {"ca": {}, "b2": {}, "zarr": {}}
    schunks = (CHUNKS[0] * CHUNKS[1] * CHUNKS[2],)
    sblocks = (BLOCKS[0] * BLOCKS[1] * BLOCKS[2],)
    b2params = {"codec": blosc2.Codec.LZ4, "clevel": 5, "filters": [blosc2.Filter.SHUFFLE],
                "nthreads": 2}
    for name, arr in (("a", a), ("b", b), ("s", s)):
        chunks, blocks = (CHUNKS, BLOCKS) if arr.ndim == 3 else (schunks, sblocks)
        x = ca.carray(arr, chunks=chunks, blocks=blocks, cparams=cp, rootdir=root / f"{name}.ca")
        x.flush()
        out["ca"][name] = ca.open(root / f"{name}.ca", mode="r")
        blosc2.asarray(arr, chunks=chunks, blocks=blocks, urlpath=str(root / f"{name}.b2nd"),
                       mode="w", cparams=b2params)
        out["b2"][name] = blosc2.open(str(root / f"{name}.b2nd"), mode="r")
        z = zarr.create_array(store=str(root / f"{name}.zarr"), shape=arr.shape,
                              chunks=chunks, dtype=arr.dtype, zarr_format=3,
                              compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle",
                                                     blocksize=int(np.prod(blocks)) * 8))
        z[...] = arr
        out["zarr"][name] = zarr.open_array(str(root / f"{name}.zarr"), mode="r")
    return out


def cases(arrays: dict, mem: dict, root: Path) -> dict:
    import dask.array as da

    A, B, S = (arrays["ca"][k] for k in "abs")  # noqa: N806
    A2, B2, S2 = (arrays["b2"][k] for k in "abs")  # noqa: N806
    Ad, Bd, Sd = (da.from_zarr(arrays["zarr"][k]) for k in "abs")  # noqa: N806
    a, b, s = mem["a"], mem["b"], mem["s"]

    def dk(x):
        return x.compute(scheduler="threads")

    def fresh(name):
        path = root / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        return path

    def ca_write():
        (A * B + 1).compute(rootdir=fresh("out.ca"), cparams=A.cparams)

    def b2_write():
        (A2 * B2 + 1).compute(urlpath=str(fresh("out.b2nd")), mode="w")

    def dask_write():
        (Ad * Bd + 1).to_zarr(str(fresh("out.zarr")), zarr_format=3)

    def ca_nozones():
        zones.USE_SUMMARIES = False
        try:
            return S.max()
        finally:
            zones.USE_SUMMARIES = True

    return {
        "sum()": {"carray": A.sum, "blosc2": A2.sum, "dask+zarr": lambda: dk(Ad.sum()),
                  "numpy": a.sum},
        "sum(axis=0)": {"carray": lambda: A.sum(axis=0), "blosc2": lambda: A2.sum(axis=0),
                        "dask+zarr": lambda: dk(Ad.sum(axis=0)), "numpy": lambda: a.sum(axis=0)},
        "sum(axis=2)": {"carray": lambda: A.sum(axis=2), "blosc2": lambda: A2.sum(axis=2),
                        "dask+zarr": lambda: dk(Ad.sum(axis=2)), "numpy": lambda: a.sum(axis=2)},
        "max(axis=1)": {"carray": lambda: A.max(axis=1), "blosc2": lambda: A2.max(axis=1),
                        "dask+zarr": lambda: dk(Ad.max(axis=1)), "numpy": lambda: a.max(axis=1)},
        "std()": {"carray": A.std, "blosc2": A2.std, "dask+zarr": lambda: dk(Ad.std()),
                  "numpy": a.std},
        "(a*b+1).sum()": {"carray": lambda: (A * B + 1).sum(),
                          "blosc2": lambda: (A2 * B2 + 1).sum(),
                          "dask+zarr": lambda: dk((Ad * Bd + 1).sum()),
                          "numpy": lambda: (a * b + 1).sum()},
        "((a>0)&(b<0)).sum()": {"carray": lambda: ((A > 0) & (B < 0)).sum(),
                                "blosc2": lambda: ((A2 > 0) & (B2 < 0)).sum(),
                                "dask+zarr": lambda: dk(((Ad > 0) & (Bd < 0)).sum()),
                                "numpy": lambda: ((a > 0) & (b < 0)).sum()},
        "a*b+1 to disk": {"carray": ca_write, "blosc2": b2_write, "dask+zarr": dask_write,
                          "numpy": lambda: np.save(fresh("out.npy"), a * b + 1)},
        "max() sorted 1-d": {"carray": S.max, "carray (no summaries)": ca_nozones,
                             "blosc2": S2.max, "dask+zarr": lambda: dk(Sd.max()),
                             "numpy": s.max},
    }


def check(results: dict) -> None:
    """Peers agree (loosely: float sums are combined in different orders)."""
    for case, libs in results.items():
        vals = {k: v for k, v in libs.items() if v is not None}
        ref = vals.get("numpy")
        for lib, v in vals.items():
            if not np.allclose(np.asarray(v, dtype=float), np.asarray(ref, dtype=float),
                               rtol=1e-6, equal_nan=True):
                print(f"  !! {case}: {lib} disagrees with numpy", file=sys.stderr)


ZEROS_SHAPE = (2000, 1000, 1000)  # float32: 8 GB


def zeros_on_disk(root: Path) -> dict:
    """Lazy fill: an 8 GB array of zeros on disk, carray against ``blosc2.zeros``
    (time to create and flush, files and bytes written)."""
    import blosc2

    def footprint(path: Path) -> tuple[int, int]:
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        return len(files), sum(p.stat().st_size for p in files)

    out = {}
    t0 = time.perf_counter()
    ca.zeros(ZEROS_SHAPE, dtype="f4", rootdir=root / "zeros.ca").flush()
    out["carray"] = (time.perf_counter() - t0, *footprint(root / "zeros.ca"))
    t0 = time.perf_counter()
    blosc2.zeros(ZEROS_SHAPE, dtype="f4", urlpath=str(root / "zeros.b2nd"), mode="w")
    out["blosc2"] = (time.perf_counter() - t0, *footprint(root / "zeros.b2nd"))
    for lib, (secs, nfiles, nbytes) in out.items():
        print(f"{'zeros 8 GB on disk':22s} {lib:24s} {secs * 1e3:9.1f} ms, {nfiles} files, "
              f"{nbytes} bytes", file=sys.stderr)
    return out


def peak_memory(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# Targets (ratio = peer time / carray time) the rows are held to.
NUMPY_TARGETS = {"sum()": 1.0, "sum(axis=0)": 0.5, "sum(axis=2)": 0.5, "max(axis=1)": 0.5,
                 "(a*b+1).sum()": 0.7}
BLOSC2_TARGET = 2.0
PEAK_TARGET = 0.05  # of one array, writing a*b+1 to disk


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="(192, 192, 176) arrays")
    p.add_argument("--repeat", type=int, default=3, help="timed calls per case and round")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of every case and library, for the median and range of ratios")
    p.add_argument("--dir", default=None, help="where to write the arrays (default: a tmpdir)")
    args = p.parse_args()
    ca.set_nthreads(2)
    shape = (192, 192, 176) if args.quick else (384, 384, 352)
    t0 = time.perf_counter()
    a, b = make_data(shape, 0.0), make_data(shape, 1.0)
    s = np.sort(a.reshape(-1))
    mem = {"a": a, "b": b, "s": s}
    root = Path(tempfile.mkdtemp(dir=args.dir, prefix="bench_compute_"))
    try:
        arrays = build(root, a, b, s)
        print(f"data ready in {time.perf_counter() - t0:.1f}s: {a.nbytes / 2**20:.0f} MB each "
              f"in {root}", file=sys.stderr)
        table = cases(arrays, mem, root)
        answers = {case: {lib: fn() for lib, fn in libs.items()}
                   for case, libs in table.items() if case != "a*b+1 to disk"}
        check(answers)
        rounds: list[dict] = []
        for r in range(args.rounds):
            timings: dict = {}
            for case, libs in table.items():
                timings[case] = {lib: median_time(fn, args.repeat) for lib, fn in libs.items()}
                print(f"round {r + 1} {case:22s} " + "  ".join(
                    f"{lib} {t * 1e3:.1f}" for lib, t in timings[case].items()),
                    file=sys.stderr)
            rounds.append(timings)
        peaks = {case: peak_memory(libs["carray"]) for case, libs in table.items()}
        zeros = zeros_on_disk(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write_results(args, shape, a.nbytes, rounds, peaks, zeros)


def _spread(values: list[float]) -> str:
    """``median [min, max]``."""
    return f"{statistics.median(values):.2f} [{min(values):.2f}, {max(values):.2f}]"


def write_results(args, shape, nbytes, rounds, peaks, zeros=None) -> None:
    RESULTS.mkdir(exist_ok=True)
    stem = "compute_quick" if args.quick else "compute"
    meta = {"shape": shape, "chunks": CHUNKS, "blocks": BLOCKS, "codec": "lz4/5/shuffle",
            "repeat": args.repeat, "rounds": args.rounds, "array_bytes": nbytes,
            "cpus": os.cpu_count()}
    (RESULTS / f"{stem}.json").write_text(json.dumps(
        {"meta": meta, "rounds": rounds, "carray_peak_bytes": peaks,
         "zeros_8gb": zeros}, indent=1))
    lines = [f"shape {shape} float64 ({nbytes / 2**20:.0f} MB per array), chunks {CHUNKS}, "
             f"blocks {BLOCKS}, lz4 clevel 5 shuffle, 2 threads; times are medians of "
             f"{args.repeat} calls in the first round; ratios are peer time / carray time, "
             f"median [range] over {args.rounds} rounds, every library in each round", "",
             "| case | carray ms | blosc2 ms | dask+zarr ms | numpy ms | blosc2/carray "
             f"(target >= {BLOSC2_TARGET}) | dask/carray | numpy/carray (target) | "
             "carray peak MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for case, t in rounds[0].items():
        ratio = {peer: [r[case][peer] / r[case]["carray"] for r in rounds]
                 for peer in ("blosc2", "dask+zarr", "numpy")}
        target = NUMPY_TARGETS.get(case)
        row = [case] + [f"{t[lib] * 1e3:.1f}" for lib in ("carray", "blosc2", "dask+zarr",
                                                          "numpy")]
        row += [_spread(ratio["blosc2"]), _spread(ratio["dask+zarr"]),
                _spread(ratio["numpy"]) + (f" (>= {target})" if target else ""),
                f"{peaks[case] / 2**20:.1f}"]
        lines.append("| " + " | ".join(row) + " |")
    share = peaks["a*b+1 to disk"] / nbytes
    lines += ["", f"Peak traced memory writing a*b+1 to disk: {share:.1%} of one array "
              f"(target < {PEAK_TARGET:.0%})."]
    if "carray (no summaries)" in rounds[0].get("max() sorted 1-d", {}):
        t = rounds[0]["max() sorted 1-d"]
        lines += ["", f"max() of the sorted 1-d array: {t['carray'] * 1e3:.2f} ms with chunk "
                  f"summaries, {t['carray (no summaries)'] * 1e3:.1f} ms without "
                  f"({t['carray (no summaries)'] / t['carray']:.0f}x)."]
    if zeros:
        lines += ["", f"zeros({ZEROS_SHAPE}, float32) on disk (8 GB, lazy fill): " + ", ".join(
            f"{lib} {secs * 1e3:.1f} ms, {nfiles} files, {nbytes} bytes"
            for lib, (secs, nfiles, nbytes) in zeros.items()) + "."]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
