"""Rechunk of a (time, y, x) cube from frames to columns, against dask (issue 27, item 3).

The cube is float32 (T, 512, 512): a smooth field plus normal noise of 0.01, stored
on disk in (1, 512, 512) frames -- as a carray (superchunk layout, carray's default
lz4 level 5 with byte shuffle) and, for dask, as a Zarr v3 array with the same chunks
and the same Blosc codec.  Each run rechunks it to (T, 64, 64) columns on disk with a
256 MiB memory limit, in a fresh subprocess whose peak RSS is measured (``VmHWM``
of ``/proc/self/status``, the process's high-water mark, imports included;
``ru_maxrss`` would also count the parent's size at the fork):

* carray: ``a.rechunk((T, 64, 64), rootdir=..., max_mem="256MiB")`` (fsync on,
  the library's default);
* dask: ``dask.array.from_zarr(src).rechunk((T, 64, 64), block_size_limit=256MiB)``
  then ``.to_zarr(dst)`` into a Zarr v3 array with the same Blosc codec, under
  ``dask.config.set({"array.chunk-size": "256MiB", "scheduler": "threads",
  "num_workers": N})`` with N the machine's cores (dask's memory limit is its
  chunk-size limit: it has no hard cap on the threaded scheduler).

Runs alternate carray and dask.  The full case is a 2 GB cube (T = 2000); ``quick``
runs a ~200 MB one (T = 200).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

Y = X = 512
COLUMN = 64
MAX_MEM = "256MiB"
_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")

_CARRAY = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {src!r})
    import carray as ca
    a = ca.carray(rootdir={path!r}, mode="r")
    t0 = time.perf_counter()
    out = a.rechunk({chunks!r}, rootdir={dst!r}, max_mem={mem!r})
    out.close()
    dt = time.perf_counter() - t0
    print(json.dumps({{"s": dt, "rss": peak_rss()}}))
""")

_DASK = textwrap.dedent("""
    import json, os, time
    import dask, dask.array as da, zarr
    from zarr.codecs import BloscCodec
    with dask.config.set({{"array.chunk-size": {mem!r}, "scheduler": "threads",
                          "num_workers": os.cpu_count()}}):
        t0 = time.perf_counter()
        x = da.from_zarr({path!r})
        y = x.rechunk({chunks!r}, block_size_limit=dask.utils.parse_bytes({mem!r}))
        out = zarr.create_array({dst!r}, shape=x.shape, chunks={chunks!r}, dtype=x.dtype,
                                compressors=BloscCodec(cname="lz4", clevel=5,
                                                       shuffle="shuffle"),
                                zarr_format=3)
        da.store(y, out, lock=False)
        dt = time.perf_counter() - t0
    print(json.dumps({{"s": dt, "rss": peak_rss()}}))
""")

# The process's own high-water mark: VmHWM belongs to this process's memory map, while
# ru_maxrss also keeps the parent's size at the fork that started it.
_PEAK = textwrap.dedent("""
    def peak_rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
""")


def make_cube(where: str, t: int) -> tuple[str, str]:
    """Write the cube as a carray and as a Zarr v3 array under ``where``, a few frames
    at a time; their paths."""
    sys.path.insert(0, _SRC)
    import zarr
    from zarr.codecs import BloscCodec

    import carray as ca

    rng = np.random.default_rng(27)
    yy, xx = np.meshgrid(np.linspace(0, 4 * np.pi, Y), np.linspace(0, 4 * np.pi, X),
                         indexing="ij")
    ours, theirs = os.path.join(where, "cube"), os.path.join(where, "cube.zarr")
    a = ca.carray(np.empty((0, Y, X), dtype="f4"), chunks=(1, Y, X), rootdir=ours,
                  expectedlen=t)
    z = zarr.create_array(theirs, shape=(t, Y, X), chunks=(1, Y, X), dtype="f4",
                          compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
                          zarr_format=3)
    step = 50
    for start in range(0, t, step):
        n = min(step, t - start)
        phase = np.arange(start, start + n, dtype="f4")[:, None, None] / 50
        frames = (np.sin(yy + phase) * np.cos(xx - phase) +
                  rng.normal(0, 0.01, (n, Y, X))).astype("f4")
        a.append(frames)
        z[start:start + n] = frames
    a.close()
    return ours, theirs


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-4000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(repeat: int = 3, quick: bool = False) -> dict:
    """Time carray's rechunk and dask's, interleaved, ``repeat`` times each."""
    t = 200 if quick else 2000
    chunks = (t, COLUMN, COLUMN)
    work = tempfile.mkdtemp(prefix="bench-rechunk-", dir=os.environ.get("BENCH_TMP"))
    try:
        ours, theirs = make_cube(work, t)
        times: dict[str, list[float]] = {"carray": [], "dask": []}
        rss: dict[str, list[int]] = {"carray": [], "dask": []}
        for k in range(repeat):
            for lib, code, src in (("carray", _CARRAY, ours), ("dask", _DASK, theirs)):
                dst = os.path.join(work, f"out-{lib}-{k}" + (".zarr" if lib == "dask" else ""))
                got = _run(_PEAK + code.format(src=_SRC, path=src, dst=dst, chunks=chunks,
                                               mem=MAX_MEM))
                times[lib].append(got["s"])
                rss[lib].append(got["rss"] * 1024)  # Linux reports KiB
                shutil.rmtree(dst, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    nbytes = t * Y * X * 4
    ratio = statistics.median(times["dask"]) / statistics.median(times["carray"])
    return {"cases": [{
        "name": f"rechunk ({t}, {Y}, {X}) float32 {nbytes / 1e9:.2f} GB frames -> "
                f"({t}, {COLUMN}, {COLUMN}) columns, max_mem={MAX_MEM}",
        "carray_s": times["carray"], "peer": "dask", "peer_s": times["dask"],
        "target": ">= 2x faster than dask; peak RSS < 400 MB",
        "note": (f"dask/carray {ratio:.2f}x; peak RSS carray "
                 f"{max(rss['carray']) / 2**20:.0f} MiB, dask {max(rss['dask']) / 2**20:.0f} "
                 "MiB (VmHWM of each run's process, imports included)"),
        "carray_rss": rss["carray"], "peer_rss": rss["dask"],
    }]}


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    result = run(3, quick)
    for case in result["cases"]:
        print(case["name"])
        for lib, key in (("carray", "carray_s"), (case["peer"], "peer_s")):
            ts = case[key]
            print(f"  {lib:7s} median {statistics.median(ts):.2f} s "
                  f"(range {min(ts):.2f}-{max(ts):.2f})")
        print(f"  {case['note']}")
