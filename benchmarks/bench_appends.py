"""100 appends of 10,000 rows to a new dataset on disk: carray vs h5py and python-blosc2.

Each run creates the dataset, appends 100 blocks of 10,000 int64 rows (a random walk,
as in ``bench_carray.py``) and flushes; the time covers all of it.  carray runs with
``fsync=True`` (its default: the data is on stable storage when ``flush()``
returns) and with ``fsync=False`` (like the peers, which leave it to the page
cache).  h5py uses hdf5plugin's Blosc filter; every library uses lz4, clevel 5,
shuffle and the chunk length carray picks for 8 MB.

Run: ``python benchmarks/bench_appends.py [--repeat N] [--appends N]``.
Writes ``benchmarks/results/bench_appends.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import carray as ca

RESULTS = Path(__file__).parent / "results"
ROWS = 10_000


def make_block() -> np.ndarray:
    rng = np.random.default_rng(42)
    return np.cumsum(rng.integers(-3, 4, ROWS, dtype=np.int64))


def carray_run(path: str, block: np.ndarray, n: int, chunklen: int, fsync: bool) -> None:
    cp = ca.CParams(cname="lz4", clevel=5, shuffle=ca.SHUFFLE)
    with ca.carray(np.empty(0, "i8"), cparams=cp, chunklen=chunklen, rootdir=path,
                   mode="w", fsync=fsync) as a:
        for _ in range(n):
            a.append(block)


def h5py_run(path: str, block: np.ndarray, n: int, chunklen: int) -> None:
    import h5py
    import hdf5plugin

    filt = hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE)
    with h5py.File(path + ".h5", "w") as f:
        d = f.create_dataset("a", shape=(0,), dtype="i8", chunks=(chunklen,),
                             maxshape=(None,), **filt)
        for _ in range(n):
            m = d.shape[0]
            d.resize((m + len(block),))
            d[m:] = block
        f.flush()


def blosc2_run(path: str, block: np.ndarray, n: int, chunklen: int) -> None:
    import blosc2

    cp = blosc2.CParams(codec=blosc2.Codec.LZ4, clevel=5, filters=[blosc2.Filter.SHUFFLE])
    a = blosc2.empty((0,), dtype="i8", chunks=(chunklen,), cparams=cp,
                     urlpath=path + ".b2nd", mode="w")
    for _ in range(n):
        m = a.shape[0]
        a.resize((m + len(block),))
        a[m:] = block


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--appends", type=int, default=100)
    args = parser.parse_args()
    block, n = make_block(), args.appends
    chunklen = ca.carray(block[:1], expectedlen=n * ROWS).chunklen
    cases = {
        "carray (fsync on)": lambda p: carray_run(p, block, n, chunklen, True),
        "carray (fsync off)": lambda p: carray_run(p, block, n, chunklen, False),
        "h5py + hdf5plugin Blosc": lambda p: h5py_run(p, block, n, chunklen),
        "python-blosc2": lambda p: blosc2_run(p, block, n, chunklen),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):  # interleaved, so drifts in load hit every case
            for k, (name, run) in enumerate(cases.items()):
                path = str(Path(tmp) / f"a{k}")
                t0 = time.perf_counter()
                run(path)
                times[name].append(time.perf_counter() - t0)
                for leftover in Path(tmp).iterdir():
                    if leftover.is_dir():
                        shutil.rmtree(leftover)
                    else:
                        leftover.unlink()
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms"
                                                  for k, v in times.items()), flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    out = {"appends": n, "rows": ROWS, "chunklen": chunklen, "repeat": args.repeat,
           "machine": platform.platform(), "median_s": med, "runs_s": times}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_appends.json").write_text(json.dumps(out, indent=1))
    lines = [f"# bench_appends\n\n{n} appends of {ROWS:,} int64 rows to a new dataset on "
             f"disk, then flush; chunk length {chunklen:,}; lz4, clevel 5, shuffle; medians of "
             f"{args.repeat} interleaved runs. Ratio = peer time / carray time.\n",
             "| library | median | vs carray (fsync on) | vs carray (fsync off) |",
             "| --- | ---: | ---: | ---: |"]
    on, off = med["carray (fsync on)"], med["carray (fsync off)"]
    for name, t in med.items():
        lines.append(f"| {name} | {t * 1e3:.1f} ms | {t / on:.2f}x | {t / off:.2f}x |")
    (RESULTS / "bench_appends.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
