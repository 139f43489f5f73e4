"""Writes at the pace of the codec, and appends without the copy (issue 27, items 4-5).

Cases, each carray and its peer timed in the same round, rounds interleaved:

* whole-array write of 100 MB of float64 (``np.linspace(0, 1000, 12_500_000)`` plus
  normal noise of sd 0.01, seeded), lz4 level 5, shuffle, carray's default chunks
  and Blosc block size, to carray's default on-disk format: ``ca.carray(data,
  rootdir=..., mode='w')`` then close, against ``blosc2.asarray(data, urlpath=...,
  mode='w')`` with the same chunks, blocks and codec; with fsync on (carray's default;
  python-blosc2 never syncs) and, reported apart, off;
* the full read ``a[:]`` of those arrays against python-blosc2's ``b[:]``;
* 100 appends of 10,000 int64 rows (a random walk, as in ``bench_appends.py``) to a
  new dataset on disk, then close: against h5py with hdf5plugin's Blosc filter (which
  never syncs) with carray's fsync on and off, and against python-blosc2.

``run(repeat, quick)`` returns every time measured; ``python benchmarks/_moves_writes.py
[--repeat N] [--quick]`` prints medians and ranges.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_appends import ROWS, blosc2_run, h5py_run, make_block

import carray as ca

APPENDS = 100


def _data(n: int) -> np.ndarray:
    rng = np.random.default_rng(27)
    return np.linspace(0, 1000, n) + rng.normal(0, 0.01, n)


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _clear(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _clear_all(path: Path) -> None:
    """``path`` and what peers wrote beside it (``path`` plus their extension)."""
    for found in path.parent.glob(path.name + "*"):
        _clear(found)


def _write_cases(tmp: Path, repeat: int, quick: bool) -> list[dict[str, Any]]:
    import blosc2

    data = _data(1_250_000 if quick else 12_500_000)
    cp = ca.CParams(cname="lz4", clevel=5, shuffle=ca.SHUFFLE)
    probe = ca.carray(data[:1], cparams=cp, expectedlen=len(data))
    chunks = probe.chunks
    # carray's Blosc blocks for lz4 are 16 KiB: give python-blosc2 the same.
    blocks = tuple(b for b in probe.blocks) if probe.blocks else (16384 // data.itemsize,)
    b2cp = blosc2.CParams(codec=blosc2.Codec.LZ4, clevel=5, filters=[blosc2.Filter.SHUFFLE])
    ca_on, ca_off, b2 = tmp / "on.carray", tmp / "off.carray", tmp / "w.b2nd"
    times: dict[str, list[float]] = {k: [] for k in ("on", "off", "b2", "read", "b2read")}
    for _ in range(repeat):
        for path, fsync, key in ((ca_on, True, "on"), (ca_off, False, "off")):
            _clear(path)
            times[key].append(_timed(lambda p=path, f=fsync: ca.carray(
                data, rootdir=str(p), mode="w", cparams=cp, fsync=f).close()))
        _clear(b2)
        times["b2"].append(_timed(lambda: blosc2.asarray(
            data, urlpath=str(b2), mode="w", cparams=b2cp, chunks=chunks, blocks=blocks)))
        a, b = ca.open(str(ca_on), mode="r"), blosc2.open(str(b2))
        times["read"].append(_timed(lambda a=a: a[:]))
        times["b2read"].append(_timed(lambda b=b: b[:]))
        np.testing.assert_array_equal(a[:], b[:])
    size = f"{data.nbytes / 1e6:.0f} MB float64, chunks {chunks}, blocks {blocks}"
    return [
        {"name": "whole-array write, fsync on", "carray_s": times["on"],
         "peer": "python-blosc2 asarray (never syncs)", "peer_s": times["b2"],
         "target": ">= 1.2x", "note": size},
        {"name": "whole-array write, fsync off", "carray_s": times["off"],
         "peer": "python-blosc2 asarray", "peer_s": times["b2"], "target": "(reported)",
         "note": size},
        {"name": "full read a[:]", "carray_s": times["read"], "peer": "python-blosc2 b[:]",
         "peer_s": times["b2read"], "target": ">= 2x", "note": size},
    ]


def _carray_appends(path: Path, block: np.ndarray, n: int, chunklen: int,
                    fsync: bool) -> None:
    cp = ca.CParams(cname="lz4", clevel=5, shuffle=ca.SHUFFLE)
    with ca.carray(np.empty(0, "i8"), cparams=cp, chunklen=chunklen, rootdir=str(path),
                   mode="w", fsync=fsync) as a:
        for _ in range(n):
            a.append(block)


def _append_cases(tmp: Path, repeat: int, quick: bool) -> list[dict[str, Any]]:
    block = make_block()
    n = 20 if quick else APPENDS
    chunklen = ca.carray(block[:1], expectedlen=n * ROWS).chunklen
    runs = {
        "on": lambda p: _carray_appends(p, block, n, chunklen, True),
        "off": lambda p: _carray_appends(p, block, n, chunklen, False),
        "h5py": lambda p: h5py_run(str(p), block, n, chunklen),  # writes p + ".h5"
        "b2": lambda p: blosc2_run(str(p), block, n, chunklen),  # writes p + ".b2nd"
    }
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeat):
        for key, run in runs.items():
            path = tmp / f"app_{key}"
            _clear_all(path)
            times[key].append(_timed(lambda r=run, p=path: r(p)))
            _clear_all(path)
    note = f"{n} appends of {ROWS:,} int64 rows, chunk length {chunklen:,}, lz4 5 shuffle"
    return [
        {"name": "100 appends, fsync off", "carray_s": times["off"],
         "peer": "h5py + hdf5plugin Blosc", "peer_s": times["h5py"], "target": ">= 1.5x",
         "note": note},
        {"name": "100 appends, fsync on (default)", "carray_s": times["on"],
         "peer": "h5py + hdf5plugin Blosc (never syncs)", "peer_s": times["h5py"],
         "target": ">= 1.0x", "note": note},
        {"name": "100 appends, fsync on (default)", "carray_s": times["on"],
         "peer": "python-blosc2", "peer_s": times["b2"], "target": ">= 20x", "note": note},
    ]


def run(repeat: int, quick: bool) -> dict[str, Any]:
    """Every case's times (seconds), carray and its peer measured in the same rounds."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("CARRAY_BENCH_DIR")) as tmp:
        cases = _write_cases(Path(tmp), repeat, quick) + \
            _append_cases(Path(tmp), repeat, quick)
    return {"cases": cases, "repeat": repeat, "quick": quick}


def _summary(case: dict[str, Any]) -> str:
    c, p = case["carray_s"], case["peer_s"]
    mc, mp = statistics.median(c), statistics.median(p)
    return (f"{case['name']:<34} carray {mc * 1e3:8.1f} ms [{min(c) * 1e3:.1f}-"
            f"{max(c) * 1e3:.1f}]  {case['peer']}: {mp * 1e3:8.1f} ms [{min(p) * 1e3:.1f}-"
            f"{max(p) * 1e3:.1f}]  ratio {mp / mc:5.2f}x  (target {case['target']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = run(args.repeat, args.quick)
    for case in result["cases"]:
        print(_summary(case))


if __name__ == "__main__":
    main()
