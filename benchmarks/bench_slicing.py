"""N-d slicing: carray against python-blosc2, zarr v3 and h5py, side by side in one run.

Workload: one float64 3-D array (default (368, 368, 368), ~400 MB; ``--quick``:
(184, 184, 184), ~50 MB) holding a smooth, non-separable sum of sines plus a
little noise, quantised to 1/256 (compresses ~2.8x), generated slab by slab.
Every library stores it with the SAME chunk shape -- carray's default,
``carray.chunks.shapes.default_chunks_blocks(shape, 8)`` -- and the same codec (lz4,
clevel 5, byte shuffle by default; ``--cname``, ``--clevel``) with two Blosc
threads. Configurations:

* ``carray``: ``ca.carray(data, chunks=chunks, blocks=None, ...)`` -- its own
  default block shape for N-d chunks;
* ``blosc2-auto``: python-blosc2 ``NDArray`` with its automatic blocks;
* ``blosc2-cubic``: blocks with every side the cube root of blosc2-auto's block
  item count (at most the chunk); dropped if equal to carray's blocks;
* ``blosc2-cablocks``: carray's default blocks from ``default_chunks_blocks``;
* ``zarr``: zarr v3 with ``BloscCodec``;
* ``h5py``: h5py with hdf5plugin's Blosc filter (in memory: the ``core``
  driver without backing store); its decoded-chunk cache capped at one chunk.

Each is built in memory and on disk (``.b2nd`` file, zarr ``LocalStore``, HDF5
file, carray ``rootdir``; disk arrays are reopened read-only before reading).
Cases, each timed per operation as the median of ``--repeat`` runs, every run
reading at its own set of positions:

* ``slice0/1/2``: ``a[i, :, :]``, ``a[:, j, :]``, ``a[:, :, k]``, 8 indices per
  run, consecutive ones in different chunk rows;
* ``box``: 32 boxes of 10x10x10 at random positions per run;
* ``element``: 64 single elements per run, each in another chunk than the one
  before (so a "last decoded chunk" cache never helps);
* ``chunk``: the whole chunks holding the first 16 of those elements, read as
  ``a[chunk bounds]`` -- for carray this is the "decode the whole chunk" cost
  that the single-element read is compared with.

For each location all configurations are built first, then every case is
timed across all of them back to back. Every library reads the same positions
in the same order; each case starts with one untimed warm-up run at positions
no timed run uses. Disk reads are
warm-cache by default (every file was just written, so no library is favoured);
``--cold`` evicts each library's files from the page cache
(``posix_fadvise(DONTNEED)``) before every timed run instead. Results are
checked against the source before timing; a library that errors or returns
wrong data is reported as unavailable, never timed. If carray cannot be
imported or cannot build/read N-d arrays yet, the peers still run and carray
is reported as unavailable.

Targets (same run): carray vs blosc2-auto >= 1.0x; carray <= 1.3x the best
blosc2 configuration of that case; zarr and h5py >= 5x slower than carray;
carray whole-chunk decode >= 10x a single-element read.

Run: ``python benchmarks/bench_slicing.py [--quick] [--repeat N] [--shape 368,368,368]
[--cname lz4] [--clevel 5] [--cold] [--where memory|disk|both] [--chunks C,C,C
--blocks B,B,B]`` (``--chunks/--blocks`` only to override carray's defaults, or
when ``carray.chunks.shapes.default_chunks_blocks`` cannot be loaded). ``BENCH_TMP``
chooses where the disk arrays go (default: the system temp dir).
Writes ``benchmarks/results/bench_slicing.{json,md}`` (``--quick``:
``bench_slicing_quick.{json,md}``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

NTHREADS = 2
# hdf5plugin's and numcodecs' bundled c-blosc read this; set before they are imported.
os.environ.setdefault("BLOSC_NTHREADS", str(NTHREADS))

import numpy as np  # noqa: E402
from _common import median_time  # noqa: E402

RESULTS = Path(__file__).parent / "results"
ITEMSIZE = 8
# carray's blocks when --carray-blocks overrides its default (None: the default).
CARRAY_BLOCKS = None
SLICES_PER_RUN, BOXES_PER_RUN, ELEMENTS_PER_RUN, CHUNKS_PER_RUN = 8, 32, 64, 16
BOX = 10
CASES = {
    "slice0": "a[i, :, :]",
    "slice1": "a[:, j, :]",
    "slice2": "a[:, :, k]",
    "box": f"{BOX}x{BOX}x{BOX} box",
    "element": "single element",
    "chunk": "whole chunk (a[chunk bounds])",
}
OPS_PER_RUN = {"slice0": SLICES_PER_RUN, "slice1": SLICES_PER_RUN, "slice2": SLICES_PER_RUN,
               "box": BOXES_PER_RUN, "element": ELEMENTS_PER_RUN, "chunk": CHUNKS_PER_RUN}
TARGET_CASES = ("slice0", "slice1", "slice2", "box", "element")
BLOSC2_CONFIGS = ("blosc2-auto", "blosc2-cubic", "blosc2-cablocks")
TARGET_AUTO, TARGET_BEST, TARGET_PEER, TARGET_CHUNK = 1.0, 1.3, 5.0, 10.0


# -- carray ---------------------------------------------------------------------------------

def load_carray():
    """``(module, None)`` or ``(None, reason)``: a broken install is reported, not timed."""
    try:
        import carray as ca
    except Exception as e:  # noqa: BLE001 - any failure means "unavailable", reported as is
        return None, f"import carray failed: {type(e).__name__}: {e}"
    return ca, None


def load_default_chunks_blocks():
    """carray's default chunk and block rule, and where it came from."""
    from carray.chunks.shapes import default_chunks_blocks

    return default_chunks_blocks, "carray.chunks.shapes"


# -- data and positions -----------------------------------------------------------------------

def make_data(shape) -> np.ndarray:
    """A smooth, non-separable sum of sines plus a little noise, built slab by slab."""
    rng = np.random.default_rng(42)
    out = np.empty(shape, dtype=np.float64)
    z, y, x = (np.linspace(0, 6 * np.pi, n) for n in shape)
    y, x = y[None, :, None], x[None, None, :]
    step = max(1, 2**22 // (shape[1] * shape[2]))  # ~32 MB of float64 per slab
    for i in range(0, shape[0], step):
        zz = z[i:i + step, None, None]
        field = (np.sin(zz + 2 * y) + 0.5 * np.cos(3 * x - zz)
                 + 0.25 * np.sin(5 * y + 4 * x + 1) + 0.1 * np.sin(7 * zz) * np.cos(6 * x))
        noisy = field * 100 + rng.normal(0, 0.02, field.shape)
        # Quantised to 1/256 like a sensor reading: trailing zero mantissa bits make it
        # compressible (~2.8x with lz4 + shuffle), the noise keeps it from being trivial.
        out[i:i + step] = np.round(noisy * 256) / 256
    return out


def _coprime_step(n: int) -> int:
    """A stride through n chunks that jumps around the grid and still visits them all."""
    for s in (7, 5, 3, 11, 13, 1):
        if math.gcd(s, n) == 1:
            return s
    return 1


def make_positions(shape, chunks, nruns, seed=7):
    """Per case, ``nruns`` lists of keys; list 0 is the warm-up, no two lists share a key."""
    rng = np.random.default_rng(seed)
    grid = [-(-s // c) for s, c in zip(shape, chunks, strict=True)]
    nchunks = math.prod(grid)
    step = _coprime_step(nchunks)

    def chunk_bounds(n):
        coords = np.unravel_index(n % nchunks, grid)
        return [(int(c) * ch, min((int(c) + 1) * ch, s))
                for c, ch, s in zip(coords, chunks, shape, strict=True)]

    keys: dict[str, list[list]] = {case: [] for case in CASES}
    seen = set()

    def fresh(make):
        for _ in range(1000):
            k = make()
            if k not in seen:
                seen.add(k)
                return k
        return k

    for r in range(nruns):
        for ax in range(3):
            run = []
            for j in range(SLICES_PER_RUN):
                n = r * SLICES_PER_RUN + j
                lo = (n % grid[ax]) * chunks[ax]
                hi = min(lo + chunks[ax], shape[ax])
                key = fresh(lambda lo=lo, hi=hi, ax=ax: ("s", ax, int(rng.integers(lo, hi))))
                run.append(tuple(key[2] if a == ax else slice(None) for a in range(3)))
            keys[f"slice{ax}"].append(run)
        elems, chunk_keys = [], []
        for j in range(ELEMENTS_PER_RUN):
            b = chunk_bounds((r * ELEMENTS_PER_RUN + j) * step)
            e = fresh(lambda b=b: tuple(int(rng.integers(lo, hi)) for lo, hi in b))
            elems.append(e)
            if j < CHUNKS_PER_RUN:
                chunk_keys.append(tuple(slice(lo, hi) for lo, hi in b))
        keys["element"].append(elems)
        keys["chunk"].append(chunk_keys)
        boxes = []
        for j in range(BOXES_PER_RUN):
            b = chunk_bounds((r * BOXES_PER_RUN + j) * step + 1)
            start = fresh(lambda b=b: ("b",) + tuple(
                int(rng.integers(lo, max(lo + 1, min(hi, s - BOX + 1))))
                for (lo, hi), s in zip(b, shape, strict=True)))[1:]
            boxes.append(tuple(slice(s0, min(s0 + BOX, s)) for s0, s in
                               zip(start, shape, strict=True)))
        keys["box"].append(boxes)
    return keys


# -- one adapter per library/configuration ----------------------------------------------------

class Config:
    """Builds one array, reopens it for reading, describes it."""

    lib = ""

    def __init__(self, name, where, path, chunks, cname, clevel):
        self.name, self.where, self.chunks = name, where, tuple(chunks)
        self.cname, self.clevel = cname, clevel
        self.path = path if where == "disk" else None
        self.arr = None

    def build(self, data):  # -> the array to read from
        raise NotImplementedError

    def info(self) -> dict:
        return {}

    def files(self) -> list[str]:
        p = self.path
        if p is None or not os.path.exists(p):
            return []
        if os.path.isfile(p):
            return [p]
        return [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]

    def close(self):
        self.arr = None


class CArrayCfg(Config):
    lib = "carray"

    def __init__(self, *args, ca, blocks=None):
        super().__init__(*args)
        self.ca, self.blocks = ca, blocks

    def build(self, data):
        ca = self.ca
        cp = ca.CParams(cname=self.cname, clevel=self.clevel, shuffle=1)
        a = ca.carray(data, chunks=self.chunks, blocks=self.blocks, cparams=cp,
                      rootdir=self.path, mode="w")
        if hasattr(a, "flush"):
            a.flush()
        if self.path:
            if hasattr(a, "close"):
                a.close()
            a = ca.open(self.path, mode="r")
        self.arr = a

    def info(self):
        a = self.arr
        return {"chunks": _plain(getattr(a, "chunks", None)),
                "blocks": _plain(getattr(a, "blocks", None)),
                "cbytes": _plain(getattr(a, "cbytes", None))}

    def close(self):
        if self.arr is not None and hasattr(self.arr, "close"):
            try:
                self.arr.close()
            except Exception:  # noqa: BLE001
                pass
        self.arr = None


class Blosc2Cfg(Config):
    lib = "python-blosc2"

    def __init__(self, *args, blocks=None):
        super().__init__(*args)
        import blosc2

        self.b2, self.blocks = blosc2, blocks
        self.cp = blosc2.CParams(codec=getattr(blosc2.Codec, self.cname.upper()),
                                 clevel=self.clevel, filters=[blosc2.Filter.SHUFFLE],
                                 nthreads=NTHREADS)
        self.dp = blosc2.DParams(nthreads=NTHREADS)
        if self.path:
            self.path += ".b2nd"

    def build(self, data):
        kw = {"blocks": self.blocks} if self.blocks is not None else {}
        a = self.b2.asarray(data, chunks=self.chunks, cparams=self.cp, dparams=self.dp,
                            urlpath=self.path, mode="w", **kw)
        if self.path:
            del a
            a = self.b2.open(self.path, mode="r", dparams=self.dp)
        self.arr = a

    def info(self):
        a = self.arr
        return {"chunks": list(a.chunks), "blocks": list(a.blocks), "cbytes": int(a.cbytes)}


class ZarrCfg(Config):
    lib = "zarr"

    def __init__(self, *args):
        super().__init__(*args)
        import zarr
        from zarr.codecs import BloscCodec

        self.zarr = zarr
        self.codec = BloscCodec(cname=self.cname, clevel=self.clevel, shuffle="shuffle")
        if self.path:
            self.path += ".zarr"

    def build(self, data):
        zarr = self.zarr
        if self.path:
            shutil.rmtree(self.path, ignore_errors=True)
            store = zarr.storage.LocalStore(self.path)
        else:
            store = zarr.storage.MemoryStore()
        z = zarr.create_array(store, shape=data.shape, dtype=data.dtype, chunks=self.chunks,
                              compressors=[self.codec])
        z[:] = data
        self.arr = zarr.open_array(self.path, mode="r") if self.path else z

    def info(self):
        z = self.arr
        try:
            cbytes = int(z.nbytes_stored())
        except Exception:  # noqa: BLE001
            cbytes = None
        return {"chunks": list(z.chunks), "blocks": None, "cbytes": cbytes}


class H5Cfg(Config):
    lib = "h5py"
    _n = 0

    def __init__(self, *args):
        super().__init__(*args)
        import h5py
        import hdf5plugin

        self.h5py = h5py
        self.filt = hdf5plugin.Blosc(cname=self.cname, clevel=self.clevel,
                                     shuffle=hdf5plugin.Blosc.SHUFFLE)
        if self.path:
            self.path += ".h5"
        self.file = None

    def build(self, data):
        h5py = self.h5py
        # HDF5's decoded-chunk cache (8 MiB by default in HDF5 2.x, 1 MiB before) is
        # capped at one chunk, like carray's "last decoded chunk": with small chunks it
        # would otherwise hold the whole array and the rotating positions would not
        # defeat it. For the default 7 MB chunks this is HDF5's default behaviour.
        default = h5py.h5p.create(h5py.h5p.FILE_ACCESS).get_cache()[2]
        rdcc = min(default, math.prod(self.chunks) * data.itemsize)
        if self.path:
            f = h5py.File(self.path, "w")
        else:
            H5Cfg._n += 1
            f = h5py.File(f"slicing{H5Cfg._n}.h5", "w", driver="core", backing_store=False,
                          rdcc_nbytes=rdcc)
        f.create_dataset("a", data=data, chunks=self.chunks, **self.filt)
        if self.path:
            f.close()
            f = h5py.File(self.path, "r", rdcc_nbytes=rdcc)
        self.file, self.arr = f, f["a"]

    def info(self):
        d = self.arr
        return {"chunks": list(d.chunks), "blocks": None,
                "cbytes": int(d.id.get_storage_size()),
                "rdcc_nbytes": int(d.id.get_access_plist().get_chunk_cache()[1])}

    def close(self):
        if self.file is not None:
            self.file.close()
        self.file = self.arr = None


def _plain(v):
    """JSON-able form of an attribute we only record."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.integer):
        return int(v)
    try:
        return [_plain(x) for x in v]
    except TypeError:
        return repr(v)


# -- measuring --------------------------------------------------------------------------------

def evict(files):
    """Drop these files' pages from the page cache (no root needed)."""
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def time_per_op(arr, runs, repeat, files=None) -> float:
    """Median seconds per key: run r reads ``runs[r]`` (run 0 untimed warm-up)."""
    for key in runs[0]:
        arr[key]
    todo = iter(runs[1:])

    def one_run():
        for key in next(todo):
            arr[key]

    nops = len(runs[1])
    if files is None:
        return median_time(one_run, repeat) / nops
    times = []
    for _ in range(repeat):
        evict(files)
        times.append(median_time(one_run, 1))
    return statistics.median(times) / nops


def check(arr, data, keys):
    """Compare one key of every case with numpy; raise on a mismatch."""
    for case, runs in keys.items():
        key = runs[0][0]
        got = np.asarray(arr[key])
        if got.shape != data[key].shape or not np.array_equal(got, data[key]):
            raise AssertionError(f"{case} {key}: wrong result (shape {got.shape}, "
                                 f"expected {data[key].shape})")


def make_configs(where, tmp, chunks, cname, clevel, ca, blocks_cubic, blocks_ca):
    """``(name, factory)`` for every configuration; factories may raise (then reported)."""
    def args(name):
        return name, where, str(Path(tmp) / f"{name}_{where}"), chunks, cname, clevel

    cfgs = []
    if ca is not None:
        cfgs.append(("carray", lambda: CArrayCfg(*args("carray"), ca=ca,
                                                 blocks=CARRAY_BLOCKS)))
    cfgs.append(("blosc2-auto", lambda: Blosc2Cfg(*args("blosc2-auto"))))
    if blocks_cubic is not None:
        cfgs.append(("blosc2-cubic",
                     lambda: Blosc2Cfg(*args("blosc2-cubic"), blocks=blocks_cubic)))
    cfgs.append(("blosc2-cablocks", lambda: Blosc2Cfg(*args("blosc2-cablocks"),
                                                      blocks=blocks_ca)))
    cfgs.append(("zarr", lambda: ZarrCfg(*args("zarr"))))
    cfgs.append(("h5py", lambda: H5Cfg(*args("h5py"))))
    return cfgs


def run_where(where, data, keys, tmp, opts, ca, ca_error, blocks_cubic, blocks_ca):
    """Build every configuration for ``where``, then time case by case across them."""
    out = {}
    if ca is None:
        out["carray"] = {"lib": "carray", "error": ca_error}
    live = []
    for name, make in make_configs(where, tmp, opts.chunks, opts.cname, opts.clevel, ca,
                                   blocks_cubic, blocks_ca):
        cfg = None
        try:
            cfg = make()
            t0 = time.perf_counter()
            cfg.build(data)
            build_s = time.perf_counter() - t0
            check(cfg.arr, data, keys)
            info = cfg.info()
        except Exception as e:  # noqa: BLE001 - reported as "unavailable", never timed
            out[name] = {"lib": getattr(cfg, "lib", name), "error": f"{type(e).__name__}: {e}",
                         "traceback": traceback.format_exc(limit=6)}
            print(f"  {where:6} {name:16} UNAVAILABLE: {type(e).__name__}: {e}", flush=True)
            if cfg is not None:
                cfg.close()
            continue
        out[name] = {"lib": cfg.lib, "build_s": build_s, **info, "times_s": {}}
        if info.get("cbytes"):
            out[name]["cratio"] = data.nbytes / info["cbytes"]
        live.append(cfg)
        print(f"  {where:6} {name:16} built in {build_s:6.2f} s  chunks={info.get('chunks')} "
              f"blocks={info.get('blocks')} cratio={out[name].get('cratio', float('nan')):.2f}",
              flush=True)
    if where == "disk":
        os.sync()  # dirty pages cannot be evicted; also puts every library on the same footing
    for case in CASES:
        for cfg in list(live):
            files = cfg.files() if (opts.cold and where == "disk") else None
            try:
                t = time_per_op(cfg.arr, keys[case], opts.repeat, files)
            except Exception as e:  # noqa: BLE001
                out[cfg.name].setdefault("case_errors", {})[case] = f"{type(e).__name__}: {e}"
                print(f"  {where:6} {cfg.name:16} {case:8} FAILED: {e}", flush=True)
                continue
            out[cfg.name]["times_s"][case] = t
            print(f"  {where:6} {cfg.name:16} {case:8} {fmt_t(t):>10} per op", flush=True)
    for cfg in live:
        cfg.close()
    return out


# -- ratios and report ------------------------------------------------------------------------

def fmt_t(t):
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.3f} s"


def _t(res, name, case):
    return res.get(name, {}).get("times_s", {}).get(case)


def compute_ratios(configs):
    """Every target ratio, per location and case; ``None`` where a side is missing."""
    rows = []
    for where, res in configs.items():
        for case in TARGET_CASES:
            c = _t(res, "carray", case)
            b2 = {n: _t(res, n, case) for n in BLOSC2_CONFIGS if _t(res, n, case) is not None}
            best = min(b2, key=b2.get) if b2 else None
            auto, zarr_t, h5_t = (_t(res, n, case) for n in ("blosc2-auto", "zarr", "h5py"))
            ok = c is not None
            rows.append({
                "where": where, "case": case, "carray_s": c, "best_blosc2": best,
                "auto_over_carray": auto / c if ok and auto else None,
                "carray_over_best_blosc2": c / b2[best] if ok and best else None,
                "zarr_over_carray": zarr_t / c if ok and zarr_t else None,
                "h5py_over_carray": h5_t / c if ok and h5_t else None,
            })
        el = {n: (_t(res, n, "element"), _t(res, n, "chunk")) for n in res}
        rows.append({"where": where, "case": "chunk/element",
                     "chunk_over_element": {n: (ch / e if e and ch else None)
                                            for n, (e, ch) in el.items()}})
    return rows


def _mark(value, target, higher_is_better=True):
    if value is None:
        return "n/a"
    met = value >= target if higher_is_better else value <= target
    return f"{value:.2f}x {'met' if met else 'MISSED'}"


def report(results):
    shape, chunks = results["shape"], results["chunks"]
    cfgs = results["configs"]
    names = []
    for res in cfgs.values():
        names += [n for n in res if n not in names]
    lines = [
        "# bench_slicing", "",
        f"float64 array of shape {tuple(shape)} ({results['nbytes'] / 2**20:.0f} MB); chunks "
        f"{tuple(chunks)} for every library (from {results['chunks_from']}; carray's default "
        f"blocks {tuple(results['carray_default_blocks'])}); {results['cname']} clevel "
        f"{results['clevel']} + byte shuffle; {NTHREADS} Blosc threads; median of "
        f"{results['repeat']} runs per case, every run at other positions; disk reads "
        f"{'cold (page cache evicted before each run)' if results['cold'] else 'warm-cache'}. "
        f"Python {results['machine']['python']}, {results['machine']['cpus']} CPUs; "
        + ", ".join(f"{k} {v}" for k, v in results["versions"].items()) + ".", ""]
    if results.get("carray_error"):
        lines += [f"**carray unavailable**: {results['carray_error']}", ""]
    for where, res in cfgs.items():
        lines += [f"## {where}: time per operation", "",
                  "| config | chunks | blocks | cratio | " + " | ".join(CASES.values()) + " |",
                  "| --- | --- | --- | ---: | " + " | ".join("---:" for _ in CASES) + " |"]
        for n in names:
            r = res.get(n)
            if r is None:
                continue
            if "error" in r:
                lines.append(f"| {n} | | | | unavailable: {r['error'][:160]} |"
                             + " |" * (len(CASES) - 1))
                continue
            blocks = tuple(r["blocks"]) if isinstance(r.get("blocks"), list) else r.get("blocks")
            chk = tuple(r["chunks"]) if isinstance(r.get("chunks"), list) else r.get("chunks")
            cr = f"{r['cratio']:.2f}" if r.get("cratio") else ""
            lines.append(f"| {n} | {chk} | {blocks or '-'} | {cr} | "
                         + " | ".join(fmt_t(r["times_s"].get(c)) for c in CASES) + " |")
        lines.append("")
    lines += ["## Targets", "",
              "Ratios from the tables above (same run). blosc2-auto / carray >= 1.0; carray / "
              "best blosc2 config <= 1.3; zarr / carray and h5py / carray >= 5.", "",
              "| where | case | carray | auto / carray (>= 1.0) | carray / best blosc2 "
              "(<= 1.3) | best blosc2 | zarr / carray (>= 5) | h5py / carray (>= 5) |",
              "| --- | --- | ---: | --- | --- | --- | --- | --- |"]
    for row in results["ratios"]:
        if row["case"] == "chunk/element":
            continue
        lines.append(
            f"| {row['where']} | {CASES[row['case']]} | {fmt_t(row['carray_s'])} | "
            f"{_mark(row['auto_over_carray'], TARGET_AUTO)} | "
            f"{_mark(row['carray_over_best_blosc2'], TARGET_BEST, False)} | "
            f"{row['best_blosc2'] or '-'} | {_mark(row['zarr_over_carray'], TARGET_PEER)} | "
            f"{_mark(row['h5py_over_carray'], TARGET_PEER)} |")
    lines += ["", "## Whole-chunk decode / single-element read", "",
              "Target for carray: >= 10x (other libraries for context).", "",
              "| where | config | element | whole chunk | chunk / element |",
              "| --- | --- | ---: | ---: | --- |"]
    for row in results["ratios"]:
        if row["case"] != "chunk/element":
            continue
        res = cfgs[row["where"]]
        for n, ratio in row["chunk_over_element"].items():
            if n == "carray":
                cell = _mark(ratio, TARGET_CHUNK)
            else:
                cell = f"{ratio:.1f}x" if ratio else "n/a"
            lines.append(f"| {row['where']} | {n} | {fmt_t(_t(res, n, 'element'))} | "
                         f"{fmt_t(_t(res, n, 'chunk'))} | {cell} |")
    lines.append("")
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------

def _shape(text):
    return tuple(int(v) for v in text.split(","))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="(184, 184, 184), ~50 MB; 3 runs per case")
    p.add_argument("--repeat", type=int, default=None, help="runs per case (median)")
    p.add_argument("--shape", type=_shape, default=None, help="3 comma-separated lengths")
    p.add_argument("--cname", default="lz4")
    p.add_argument("--clevel", type=int, default=5)
    p.add_argument("--chunks", type=_shape, default=None,
                   help="override the chunk shape (default: carray's default_chunks_blocks)")
    p.add_argument("--blocks", type=_shape, default=None,
                   help="override carray's default block shape (used by blosc2-cablocks)")
    p.add_argument("--carray-blocks", type=_shape, default=None,
                   help="blocks for carray itself instead of its default (to compare shapes)")
    p.add_argument("--cold", action="store_true",
                   help="evict disk files from the page cache before every timed run")
    p.add_argument("--where", choices=("memory", "disk", "both"), default="both")
    opts = p.parse_args(argv)
    global CARRAY_BLOCKS
    CARRAY_BLOCKS = opts.carray_blocks
    shape = opts.shape or ((184, 184, 184) if opts.quick else (368, 368, 368))
    if len(shape) != 3:
        p.error("--shape needs 3 lengths")
    opts.repeat = opts.repeat or (3 if opts.quick else 7)

    ca, ca_error = load_carray()
    if ca is None:
        print(f"carray unavailable, measuring the peers only: {ca_error}", flush=True)
    elif hasattr(ca, "set_nthreads"):
        ca.set_nthreads(NTHREADS)
    if opts.chunks and opts.blocks:
        ca_chunks, ca_blocks, rule_from = opts.chunks, opts.blocks, "--chunks/--blocks"
    else:
        try:
            default_chunks_blocks, rule_from = load_default_chunks_blocks()
            ca_chunks, ca_blocks = default_chunks_blocks(shape, ITEMSIZE)
        except Exception as e:  # noqa: BLE001
            p.error(f"cannot get carray's default chunks/blocks ({type(e).__name__}: {e}); "
                    "pass --chunks and --blocks")
        if opts.chunks or opts.blocks:
            rule_from += " with --chunks/--blocks overrides"
        ca_chunks, ca_blocks = opts.chunks or ca_chunks, opts.blocks or ca_blocks
    opts.chunks = tuple(ca_chunks)
    ca_blocks = tuple(min(b, c) for b, c in zip(ca_blocks, opts.chunks, strict=True))
    if len(opts.chunks) != 3 or len(ca_blocks) != 3:
        p.error("--chunks and --blocks need 3 lengths")

    import blosc2
    import h5py
    import hdf5plugin
    import numcodecs
    import zarr

    if hasattr(numcodecs, "blosc"):
        numcodecs.blosc.set_nthreads(NTHREADS)
    probe = blosc2.empty(shape, dtype=np.float64, chunks=opts.chunks,
                         cparams=blosc2.CParams(codec=getattr(blosc2.Codec, opts.cname.upper()),
                                                clevel=opts.clevel,
                                                filters=[blosc2.Filter.SHUFFLE]))
    auto_blocks = tuple(probe.blocks)
    del probe
    side = max(1, round(math.prod(auto_blocks) ** (1 / 3)))
    blocks_cubic = tuple(min(side, c) for c in opts.chunks)
    cubic_note = None
    if blocks_cubic == tuple(ca_blocks):
        cubic_note = "equal to carray's default blocks: measured once, as blosc2-cablocks"
        blocks_cubic = None
    print(f"shape {shape}, chunks {opts.chunks} ({rule_from}), carray default blocks "
          f"{tuple(ca_blocks)}, blosc2 auto blocks {auto_blocks}, cubic "
          f"{blocks_cubic or cubic_note}", flush=True)

    t0 = time.perf_counter()
    data = make_data(shape)
    print(f"data: {data.nbytes / 2**20:.0f} MB in {time.perf_counter() - t0:.1f} s", flush=True)
    keys = make_positions(shape, opts.chunks, opts.repeat + 1)

    configs = {}
    wheres = ("memory", "disk") if opts.where == "both" else (opts.where,)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        for where in wheres:
            configs[where] = run_where(where, data, keys, tmp, opts, ca, ca_error,
                                       blocks_cubic, ca_blocks)
            gc.collect()
    if ca is not None and all("error" in configs[w].get("carray", {}) for w in configs):
        ca_error = "carray could not build/read the array: " + "; ".join(
            f"{w}: {configs[w]['carray']['error']}" for w in configs)

    versions = {"carray": getattr(ca, "__version__", None) if ca else "unavailable",
                "numpy": np.__version__, "blosc2": blosc2.__version__,
                "zarr": zarr.__version__, "numcodecs": numcodecs.__version__,
                "h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version,
                "hdf5plugin": hdf5plugin.version}
    results = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform(), "processor": platform.processor()},
        "versions": versions,
        "shape": list(shape), "dtype": "float64", "nbytes": data.nbytes,
        "chunks": list(opts.chunks), "chunks_from": rule_from,
        "carray_default_blocks": list(ca_blocks), "blosc2_auto_blocks": list(auto_blocks),
        "blosc2_cubic_blocks": list(blocks_cubic) if blocks_cubic else cubic_note,
        "cname": opts.cname, "clevel": opts.clevel, "shuffle": "byte", "nthreads": NTHREADS,
        "repeat": opts.repeat, "cold": opts.cold, "ops_per_run": OPS_PER_RUN,
        "box": BOX, "carray_error": ca_error, "configs": configs,
    }
    results["ratios"] = compute_ratios(configs)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "bench_slicing_quick" if opts.quick else "bench_slicing"
    (RESULTS / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
    md = report(results)
    (RESULTS / f"{stem}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
