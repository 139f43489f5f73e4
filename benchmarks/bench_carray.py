"""carray against numpy, python-blosc2, zarr v3 and h5py, side by side in one run.

Cases (each library with the same chunk length, codec, level and shuffle, and
two Blosc threads): write a whole array, build it by appending 10,000 rows at a time, read
everything back to numpy, 10,000 random single-element reads, 1,000 random
1,000-element slices; in memory and on disk.  Every timing is the median of
``--repeat`` runs.  Disk reads are warm-cache (the page cache cannot be
dropped from here), so they measure decoding and library overhead, not the
disk).  Also measured: peak memory of a full read (the larger of tracemalloc's
peak and RSS growth, in a fresh process; ru_maxrss is inherited across
fork/exec here, so it cannot be used) and the scale case (open a dataset of
100,000 chunks and read one element, in fresh processes; per-row append cost
on it vs on an empty array).

Run: ``python benchmarks/bench_carray.py [--quick] [--repeat N] [--size-mb MB]``.
Writes ``benchmarks/results/bench_carray.{json,md}`` and one PNG chart per case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import median_time

import carray as ca

RESULTS = Path(__file__).parent / "results"
APPEND_ROWS = 10_000
NTHREADS = 2


def make_data(kind: str, nbytes: int) -> np.ndarray:
    rng = np.random.default_rng(42)
    n = nbytes // 8
    if kind == "int64":  # counters: a random walk of small steps
        return np.cumsum(rng.integers(-3, 4, n, dtype=np.int64))
    t = np.linspace(0, 200 * np.pi, n)  # a sampled signal with a little noise
    return (np.sin(t) * 100 + rng.normal(0, 0.01, n)).round(3)


# -- one adapter per library: create, append, open, read -----------------------------------

class CArrayLib:
    name = "carray"

    def __init__(self, cname, chunklen, path):
        self.cp = ca.CParams(cname=cname, clevel=5, shuffle=ca.SHUFFLE)
        self.chunklen, self.path = chunklen, path

    def write(self, data):
        return ca.carray(data, cparams=self.cp, chunklen=self.chunklen, rootdir=self.path,
                         mode="w")

    def empty(self, dtype):
        return ca.carray(np.empty(0, dtype), cparams=self.cp, chunklen=self.chunklen,
                         rootdir=self.path, mode="w")

    def append(self, a, block):
        a.append(block)

    def finish(self, a):
        a.flush()

    def open(self, written):
        return ca.open(self.path, mode="r") if self.path else written


class Blosc2Lib:
    name = "python-blosc2"

    def __init__(self, cname, chunklen, path):
        import blosc2

        self.b2 = blosc2
        self.cp = blosc2.CParams(codec=getattr(blosc2.Codec, cname.upper()), clevel=5,
                                 filters=[blosc2.Filter.SHUFFLE], nthreads=NTHREADS)
        self.dp = blosc2.DParams(nthreads=NTHREADS)
        self.chunklen = chunklen
        self.path = path + ".b2nd" if path else None

    def write(self, data):
        return self.b2.asarray(data, chunks=(self.chunklen,), cparams=self.cp, dparams=self.dp,
                               urlpath=self.path, mode="w")

    def empty(self, dtype):
        return self.b2.empty((0,), dtype=dtype, chunks=(self.chunklen,), cparams=self.cp,
                             dparams=self.dp, urlpath=self.path, mode="w")

    def append(self, a, block):
        n = a.shape[0]
        a.resize((n + len(block),))
        a[n:] = block

    def finish(self, a):
        pass

    def open(self, written):
        return self.b2.open(self.path, mode="r", dparams=self.dp) if self.path else written


class ZarrLib:
    name = "zarr"

    def __init__(self, cname, chunklen, path):
        import zarr
        from zarr.codecs import BloscCodec

        self.zarr = zarr
        self.codec = BloscCodec(cname=cname, clevel=5, shuffle="shuffle")
        self.chunklen = chunklen
        self.path = path + ".zarr" if path else None

    def _store(self):
        if self.path:
            shutil.rmtree(self.path, ignore_errors=True)
            return self.zarr.storage.LocalStore(self.path)
        return self.zarr.storage.MemoryStore()

    def write(self, data):
        z = self.zarr.create_array(self._store(), shape=data.shape, dtype=data.dtype,
                                   chunks=(self.chunklen,), compressors=[self.codec])
        z[:] = data
        return z

    def empty(self, dtype):
        return self.zarr.create_array(self._store(), shape=(0,), dtype=dtype,
                                      chunks=(self.chunklen,), compressors=[self.codec])

    def append(self, z, block):
        z.append(block)

    def finish(self, z):
        pass

    def open(self, written):
        return self.zarr.open_array(self.path, mode="r") if self.path else written


class H5Lib:
    name = "h5py"

    def __init__(self, cname, chunklen, path):
        import h5py
        import hdf5plugin

        self.h5py = h5py
        self.filt = hdf5plugin.Blosc(cname=cname, clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE)
        self.chunklen = chunklen
        self.path = path + ".h5" if path else None
        self._n = 0

    def _file(self):
        if self.path:
            return self.h5py.File(self.path, "w")
        self._n += 1
        return self.h5py.File(f"mem{self._n}.h5", "w", driver="core", backing_store=False)

    def write(self, data):
        f = self._file()
        d = f.create_dataset("a", data=data, chunks=(self.chunklen,), maxshape=(None,),
                             **self.filt)
        f.flush()
        return d

    def empty(self, dtype):
        return self._file().create_dataset("a", shape=(0,), dtype=dtype,
                                           chunks=(self.chunklen,), maxshape=(None,),
                                           **self.filt)

    def append(self, d, block):
        n = d.shape[0]
        d.resize((n + len(block),))
        d[n:] = block

    def finish(self, d):
        d.file.flush()

    def open(self, written):
        return self.h5py.File(self.path, "r")["a"] if self.path else written


class NumpyLib:
    name = "numpy"

    def __init__(self, cname, chunklen, path):
        pass

    def write(self, data):
        return data.copy()

    def empty(self, dtype):
        return [np.empty(0, dtype)]

    def append(self, parts, block):
        parts.append(block.copy())

    def finish(self, parts):
        if isinstance(parts, list):
            parts[:] = [np.concatenate(parts)]

    def open(self, written):
        return written


LIBS = [CArrayLib, Blosc2Lib, ZarrLib, H5Lib, NumpyLib]


def measure(lib_cls, cname, chunklen, path, data, repeat, n_appends, elems, starts):
    """Every case for one library; returns median seconds per case."""
    lib = lib_cls(cname, chunklen, path)
    appender = lib_cls(cname, chunklen, path + "_append" if path else None)
    block = data[:APPEND_ROWS]

    def write():
        lib.finish(lib.write(data))

    def append():
        e = appender.empty(data.dtype)
        for _ in range(n_appends):
            appender.append(e, block)
        appender.finish(e)

    res = {"write": median_time(write, max(1, repeat // 2)),
           "append": median_time(append, max(1, repeat // 2))}
    a = lib.open(lib.write(data))
    res["read"] = median_time(lambda: a[:], repeat)
    res["element"] = median_time(lambda: [a[i] for i in elems], repeat)
    res["slice"] = median_time(lambda: [a[s:s + 1000] for s in starts], repeat)
    assert np.array_equal(a[12345:12400], data[12345:12400])
    return res


def run_config(kind, cname, where, data, tmp, repeat, n_appends):
    chunklen = ca.carray(data[:1], expectedlen=len(data)).chunklen
    rng = np.random.default_rng(7)
    elems = rng.integers(0, len(data), 10_000).tolist()
    starts = rng.integers(0, len(data) - 1000, 1_000).tolist()
    out = {}
    for lib_cls in LIBS:
        if lib_cls is NumpyLib and where == "disk":
            continue
        path = str(Path(tmp) / f"{lib_cls.name}_{kind}_{cname}") if where == "disk" else None
        res = measure(lib_cls, cname, chunklen, path, data, repeat, n_appends, elems, starts)
        out[lib_cls.name] = res
        print(f"  {kind:7} {cname:4} {where:6} {lib_cls.name:14} " +
              " ".join(f"{k}={v * 1e3:9.2f}ms" for k, v in res.items()), flush=True)
    return {"chunklen": chunklen, "append_rows": n_appends * APPEND_ROWS, "results": out}


# -- memory and scale, in fresh processes --------------------------------------------------

_PEAK = """
import gc, sys, tracemalloc
lib, path, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
if lib == "carray":
    import carray as ca; a = ca.open(path, mode="r")
else:
    import blosc2; a = blosc2.open(path, mode="r")
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
gc.collect()
before = rss()
tracemalloc.start()  # numpy reports its buffers to tracemalloc
x = a[:]
peak = tracemalloc.get_traced_memory()[1]
print(max(peak, rss() - before) / nbytes)
"""

_OPEN_ONE = """
import time, sys
t0 = time.perf_counter()
import carray as ca
t1 = time.perf_counter()
a = ca.open(sys.argv[1], mode="r")
v = a[int(sys.argv[2])]
print(time.perf_counter() - t1)
"""


def peak_memory(data, tmp):
    paths = {"carray": str(Path(tmp) / "peak_ca"), "python-blosc2": str(Path(tmp) / "peak.b2nd")}
    ca.carray(data, rootdir=paths["carray"], mode="w")
    import blosc2

    blosc2.asarray(data, urlpath=paths["python-blosc2"], mode="w")
    out = {}
    for lib, path in paths.items():
        proc = subprocess.run([sys.executable, "-c", _PEAK, lib.split("-")[-1] if lib != "carray"
                               else lib, path, str(data.nbytes)],
                              capture_output=True, text=True, check=True)
        out[lib] = float(proc.stdout)
    return out


def scale_case(tmp, repeat):
    root = str(Path(tmp) / "many_chunks")
    chunklen, nchunks = 16, 100_000
    a = ca.carray(np.empty(0, "i8"), chunklen=chunklen, rootdir=root, mode="w")
    for i in range(0, chunklen * nchunks, 160_000):
        a.append(np.arange(i, i + 160_000, dtype="i8"))
    a.append(np.arange(5, dtype="i8"))  # a partial last chunk, like a live dataset
    nchunks = a.nchunks
    a.close()  # one writer at a time: it is opened again below
    opens = []
    for k in range(max(3, repeat)):
        proc = subprocess.run([sys.executable, "-c", _OPEN_ONE, root, str(777_777 + k)],
                              capture_output=True, text=True, check=True)
        opens.append(float(proc.stdout))

    def per_row(arr):
        t0 = time.perf_counter()
        for i in range(10_000):
            arr.append(i)
        return (time.perf_counter() - t0) / 10_000

    big = ca.open(root, mode="a")
    small = ca.carray(np.empty(0, "i8"), chunklen=chunklen, rootdir=str(Path(tmp) / "e"),
                      mode="w")
    return {"nchunks": nchunks, "open_and_read_one_s": statistics.median(opens),
            "append_per_row_big_s": per_row(big), "append_per_row_empty_s": per_row(small)}


# -- reporting ---------------------------------------------------------------------------

CASES = {
    "write": ("whole-array write", None),
    "append": ("build the array by appending 10,000 rows at a time", None),
    "read": ("full read to numpy", None),
    "element": ("10,000 random single-element reads", None),
    "slice": ("1,000 random 1,000-element slices", None),
}
TARGETS = {  # (peer, minimum speed-up of carray over it)
    "read": [("python-blosc2", 2.0)],
    "write": [("python-blosc2", 1.2)],
    "append": [("python-blosc2", 50.0), ("h5py", 2.0)],
    "element": [("python-blosc2", 3.0)],
}


def report(results, nbytes):
    lines = ["# bench_carray", "",
             f"{nbytes / 2**20:.0f} MB per array; chunk length as carray picks it for that "
             f"size (same for every library); clevel 5, shuffle, {NTHREADS} Blosc threads; "
             "medians; warm page cache. Ratio = peer time / carray time (> 1: carray faster).",
             ""]
    for case, (title, _) in CASES.items():
        lines += [f"## {title}", "", "| data | codec | where | library | median | ratio | target |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for cfg in results["configs"]:
            res = cfg["results"]
            ours = res["carray"][case]
            for lib, r in res.items():
                t = r[case]
                ratio = t / ours
                target = ""
                for peer, need in TARGETS.get(case, []) + [("zarr", 2.0)]:
                    if lib == peer:
                        target = f"{'met' if ratio >= need else 'MISSED'} (>= {need}x)"
                lines.append(f"| {cfg['kind']} | {cfg['cname']} | {cfg['where']} | {lib} | "
                             f"{t * 1e3:.2f} ms | {ratio:.2f}x | {target} |")
        lines += ["", f"![{title}](benchmarks/results/bench_carray_{case}.png)", ""]
    pm = results["peak_memory"]
    lines += ["## Peak memory of a full read (peak allocation / array size)", "",
              "| library | ratio | target |", "| --- | --- | --- |"]
    for lib, r in pm.items():
        lines.append(f"| {lib} | {r:.2f} | {'met' if r < 1.5 else 'MISSED'} (< 1.5) |"
                     if lib == "carray" else f"| {lib} | {r:.2f} | |")
    sc = results["scale"]
    lines += ["", "## Scale: a dataset of 100,000 chunks", "",
              f"- open + read one element, fresh process (median): "
              f"{sc['open_and_read_one_s'] * 1e3:.1f} ms (target < 50 ms: "
              f"{'met' if sc['open_and_read_one_s'] < 0.05 else 'MISSED'})",
              f"- append one row: {sc['append_per_row_big_s'] * 1e6:.2f} us on it, "
              f"{sc['append_per_row_empty_s'] * 1e6:.2f} us on an empty array", ""]
    return "\n".join(lines)


def charts(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for case, (title, _) in CASES.items():
        cfgs = results["configs"]
        libs = [lib.name for lib in LIBS]
        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / len(libs)
        for j, lib in enumerate(libs):
            vals = [c["results"].get(lib, {}).get(case, np.nan) * 1e3 for c in cfgs]
            ax.bar(np.arange(len(cfgs)) + j * width, vals, width, label=lib)
        ax.set_xticks(np.arange(len(cfgs)) + 0.4 - width / 2)
        ax.set_xticklabels([f"{c['kind']}\n{c['cname']} {c['where']}" for c in cfgs])
        ax.set_yscale("log")
        ax.set_ylabel("median time (ms, log scale; lower is better)")
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(RESULTS / f"bench_carray_{case}.png", dpi=90)
        plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="40 MB arrays, fewer repeats")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--size-mb", type=int, default=400)
    p.add_argument("--peak-only", action="store_true",
                   help="re-measure only peak memory into an existing results file")
    args = p.parse_args(argv)
    if args.peak_only:
        results = json.loads((RESULTS / "bench_carray.json").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            results["peak_memory"] = peak_memory(make_data("int64", results["size_bytes"]), tmp)
        (RESULTS / "bench_carray.json").write_text(json.dumps(results, indent=1))
        (RESULTS / "bench_carray.md").write_text(report(results, results["size_bytes"]))
        print(results["peak_memory"])
        return 0
    size = (40 if args.quick else args.size_mb) * 2**20
    repeat = 3 if args.quick else args.repeat
    n_appends = size // 8 // APPEND_ROWS  # the whole array, built 10,000 rows at a time
    ca.set_nthreads(NTHREADS)
    RESULTS.mkdir(parents=True, exist_ok=True)
    configs = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        for kind, cname in (("int64", "lz4"), ("int64", "zstd"), ("float64", "lz4")):
            data = make_data(kind, size)
            for where in ("memory", "disk"):
                cfg = run_config(kind, cname, where, data, tmp, repeat, n_appends)
                configs.append({"kind": kind, "cname": cname, "where": where, **cfg})
                for f in Path(tmp).iterdir():
                    shutil.rmtree(f) if f.is_dir() else f.unlink()
        data = make_data("int64", size)
        peak = peak_memory(data, tmp)
        print("  peak memory", peak, flush=True)
        scale = scale_case(tmp, repeat)
        print("  scale", scale, flush=True)
    import blosc2
    import h5py
    import zarr

    results = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "platform": platform.platform()},
               "versions": {"carray": ca.__version__, "numpy": np.__version__,
                            "blosc2": blosc2.__version__, "zarr": zarr.__version__,
                            "h5py": h5py.__version__},
               "size_bytes": size, "repeat": repeat, "configs": configs,
               "peak_memory": peak, "scale": scale}
    (RESULTS / "bench_carray.json").write_text(json.dumps(results, indent=1))
    (RESULTS / "bench_carray.md").write_text(report(results, size))
    charts(results)
    print(report(results, size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
