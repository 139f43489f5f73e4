"""Reading and summing a large array with dask on a local cluster: carray vs zarr v3.

Usage::

    python benchmarks/bench_distributed.py [--size-gb 2] [--s3-size-gb 0.5] [--repeats 3]
                                           [--chunk-mb 2,8,32] [--s3-chunk-mb 8]

One float64 array (a smooth signal plus noise, measured at float32 precision:
lz4 + shuffle compresses it about 2.4-2.6x) is written once per backend and chunk
size, by carray (superchunk directory, ``cparams`` lz4 clevel 5 shuffle) and by
zarr v3 (``BloscCodec`` lz4 clevel 5 shuffle), with equal chunks and one dask
block per chunk.  Each run then times ``open -> dask array -> sum().compute()``
on a ``LocalCluster`` of 1 and of 2 worker processes (one thread each; both
codecs decode single-threaded inside a worker, so a worker is one core), from
local disk (warm page cache) and from a moto S3 server in a child process.

Reported: median seconds over the repeats (after one warm-up round; each round
reads every dataset in turn), 2-worker/1-worker speedup, zarr/ours time ratio,
and the largest worker's peak RSS above its RSS at the start of the compute
(the kernel's high-water mark, reset before each compute; median over the repeats), against the chunk size.
Everything is compared within the same run.  Results go to ``benchmarks/results/bench_distributed.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CPARAMS = {"cname": "lz4", "clevel": 5, "shuffle": 1}
SPEEDUP_TARGET = 1.7
ZARR_TARGET = 1.5


# -- data -----------------------------------------------------------------------------------


def _signal(block: np.ndarray, block_info=None) -> np.ndarray:
    """A smooth function plus noise at float32 precision; each item depends on its index
    only, so every chunking holds the same values."""
    start = block_info[None]["array-location"][0][0]
    i = np.arange(start, start + len(block), dtype=np.uint64)
    noise = ((i * np.uint64(2654435761)) % np.uint64(2**32)).astype(np.float64) / 2**32 - 0.5
    x = i.astype(np.float64)
    values = 100 * np.sin(x / 5000) + 10 * np.cos(x / 77_777) + 0.02 * noise
    return values.astype(np.float32).astype(np.float64)


def source(nitems: int, chunk_items: int):
    """The benchmark array, computed block by block on the workers."""
    import dask.array as da

    template = da.empty(nitems, chunks=chunk_items, dtype=np.float64)
    return template.map_blocks(_signal, dtype=np.float64)


def superchunk_items(chunk_items: int) -> int:
    """Items per superchunk file with carray's default superchunk size."""
    from carray.layouts.superchunk.layout import default_superchunksize

    return chunk_items * default_superchunksize(chunk_items * 8)


def write_ours(darr, url: str, options: dict | None, chunk_items: int) -> None:
    import carray as ca
    from carray.layouts.superchunk.layout import default_superchunksize

    # carray's default files (about 16 MB of chunks each); the source's blocks are
    # rechunked to whole files so that each task writes its own.
    ca.from_dask(darr, url, storage_options=options, mode="w", chunks=(chunk_items,),
                 cparams=CPARAMS, rechunk=True,
                 storage={"superchunksize": default_superchunksize(chunk_items * 8)})


def open_ours(url: str, options: dict | None, chunk_items: int):
    import carray as ca

    return ca.open(url, mode="r", storage_options=options).to_dask()  # a block per file


def _zarr_store(url: str, options: dict | None, read_only: bool):
    import zarr

    if options is None:
        return zarr.storage.LocalStore(url, read_only=read_only)
    return zarr.storage.FsspecStore.from_url(url, storage_options=options, read_only=read_only)


def write_zarr(darr, url: str, options: dict | None, chunk_items: int) -> None:
    import dask.array as da
    import zarr
    from zarr.codecs import BloscCodec

    z = zarr.create_array(_zarr_store(url, options, False), shape=darr.shape,
                          chunks=(chunk_items,), dtype=darr.dtype, overwrite=True,
                          compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"))
    da.store(darr, z, lock=False)


def open_zarr(url: str, options: dict | None, chunk_items: int):
    import dask.array as da
    import zarr

    return da.from_zarr(zarr.open_array(_zarr_store(url, options, True), mode="r"))


def open_zarr_as_ours(url: str, options: dict | None, chunk_items: int):
    """zarr read with carray's dask blocks (a superchunk's worth of chunks per task)."""
    import dask.array as da
    import zarr

    z = zarr.open_array(_zarr_store(url, options, True), mode="r")
    return da.from_zarr(z, chunks=(superchunk_items(chunk_items),))


BACKENDS = {"carray": (write_ours, open_ours), "zarr": (write_zarr, open_zarr)}
#: Extra readers of a backend's data: (name, backend whose files they read, open).
VARIANTS = [("zarr-ourblocks", "zarr", open_zarr_as_ours)]
READERS = [*BACKENDS, *(name for name, _, _ in VARIANTS)]


def stored_bytes(url: str, options: dict | None) -> int:
    if options is None:
        return sum(f.stat().st_size for f in Path(url).rglob("*") if f.is_file())
    import s3fs

    return int(s3fs.S3FileSystem(**options).du(url))


# -- measuring ------------------------------------------------------------------------------


def _single_threaded_codecs() -> None:
    """Each worker decodes on its own thread only: one worker is one core."""
    import numcodecs.blosc

    import carray as ca

    ca.set_nthreads(1)
    numcodecs.blosc.use_threads = False


def _reset_peak_rss() -> int:
    """Reset this process's peak RSS (Linux: ``clear_refs`` 5); returns the RSS now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS")


def _peak_rss() -> int:
    return _status_kb("VmHWM")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


class PeakRSS:
    """The workers' peak RSS above their RSS at the start, in MB.

    The kernel keeps the peak (``VmHWM``), reset at the start: nothing polls during
    the compute, which on 2 cores would steal time from the scheduler.
    """

    def __init__(self, client) -> None:
        self._client = client

    def __enter__(self) -> PeakRSS:
        self._start = self._client.run(_reset_peak_rss)
        return self

    def __exit__(self, *exc) -> None:
        peaks = self._client.run(_peak_rss)
        self.peaks_mb = [(peaks[w] - self._start[w]) / 2**20 for w in peaks]


def time_read(client, open_fn, url: str, options: dict | None, chunk_items: int,
              expected: float) -> tuple[float, float]:
    """Seconds for open -> dask array -> sum, and the largest worker's RSS growth (MB)."""
    client.run(_gc)
    with PeakRSS(client) as rss:
        t0 = time.perf_counter()
        total = float(open_fn(url, options, chunk_items).sum().compute())
        elapsed = time.perf_counter() - t0
    if not math.isclose(total, expected, rel_tol=1e-9, abs_tol=1e-3):
        raise AssertionError(f"{url}: sum {total} != {expected}")
    return elapsed, max(rss.peaks_mb)


def _gc() -> None:
    import gc

    gc.collect()


# -- the run --------------------------------------------------------------------------------


def datasets(args, root: Path, s3) -> list[dict]:
    """Every dataset to write and read: backend x store x chunk size."""
    out = []
    gb = 2**30
    for chunk_mb in args.chunk_mb:
        for backend in BACKENDS:
            out.append(dict(backend=backend, store="disk", chunk_mb=chunk_mb,
                            size_gb=args.size_gb, url=str(root / f"{backend}-{chunk_mb}mb"),
                            options=None))
    if s3 is not None:
        for backend in BACKENDS:
            out.append(dict(backend=backend, store="s3", chunk_mb=args.s3_chunk_mb,
                            size_gb=args.s3_size_gb, url=s3.url(f"{backend}-bench"),
                            options=s3.storage_options))
    for d in out:
        d["chunk_items"] = int(d["chunk_mb"] * 2**20 // 8)
        d["nitems"] = int(d["size_gb"] * gb // 8)
        d["open"], d["writes"] = BACKENDS[d["backend"]][1], True
    for name, of, open_fn in VARIANTS:  # other readers of the same files
        out += [d | {"backend": name, "open": open_fn, "writes": False, "of": id(d)}
                for d in out if d["backend"] == of and d["writes"]]
    return out


def run(args) -> dict:
    from distributed import Client, LocalCluster

    from carray.testing import s3_server

    root = Path(tempfile.mkdtemp(prefix="bench-distributed-", dir=args.workdir))
    results: dict = {"config": vars(args) | {"python": sys.version.split()[0],
                                              "machine": platform.machine(),
                                              "cores": os.cpu_count()}, "runs": []}
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        s3 = stack.enter_context(s3_server(process=True)) if args.s3_size_gb > 0 else None
        sets = datasets(args, root, s3)
        sums: dict[int, float] = {}
        for nworkers in (2, 1):  # write with both workers, then read with 2 and with 1
            cluster = LocalCluster(n_workers=nworkers, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            with cluster, Client(cluster) as client:
                client.run(_single_threaded_codecs)
                if nworkers == 2:
                    for d in sets:
                        if not d["writes"]:
                            continue
                        darr = source(d["nitems"], d["chunk_items"])
                        t0 = time.perf_counter()
                        BACKENDS[d["backend"]][0](darr, d["url"], d["options"], d["chunk_items"])
                        d["write_s"] = time.perf_counter() - t0
                        d["stored_mb"] = stored_bytes(d["url"], d["options"]) / 2**20
                        if d["nitems"] not in sums:  # the same values at any chunking
                            sums[d["nitems"]] = float(darr.sum().compute())
                        d["expected_sum"] = sums[d["nitems"]]
                        print(f"wrote {d['backend']:7} {d['store']:5} {d['chunk_mb']:>4} MB "
                              f"chunks: {d['write_s']:.1f} s, ratio "
                              f"{d['size_gb'] * 1024 / d['stored_mb']:.2f}", flush=True)
                    by_id = {id(d): d for d in sets if d["writes"]}
                    for d in sets:
                        if not d["writes"]:
                            d.update({k: by_id[d["of"]][k] for k in
                                      ("write_s", "stored_mb", "expected_sum")})
                # Rounds go over every dataset in turn, so load from elsewhere on the
                # machine hits all alike; round 0 warms imports and the page cache.
                times: dict[int, list] = {i: [] for i in range(len(sets))}
                for rnd in range(args.repeats + 1):
                    for i, d in enumerate(sets):
                        t, peak = time_read(client, d["open"], d["url"], d["options"],
                                            d["chunk_items"], d["expected_sum"])
                        if rnd:
                            times[i].append((t, peak))
                keep = ("backend", "store", "chunk_mb", "size_gb", "write_s", "stored_mb")
                for i, d in enumerate(sets):
                    secs, peaks = [t for t, _ in times[i]], [p for _, p in times[i]]
                    r = {"workers": nworkers, "times_s": secs, "median_s": statistics.median(secs),
                         "peak_worker_rss_mb": statistics.median(peaks)}
                    results["runs"].append({k: d[k] for k in keep} | r)
                    print(f"read  {d['backend']:7} {d['store']:5} {d['chunk_mb']:>4} MB "
                          f"chunks, {nworkers} worker(s): median {r['median_s']:.2f} s, peak "
                          f"worker RSS +{r['peak_worker_rss_mb']:.0f} MB", flush=True)
    results["ratios"] = ratios(results["runs"])
    return results


def ratios(runs: list[dict]) -> list[dict]:
    """2-worker speedup and zarr/ours per (store, chunk size, workers), from this run."""
    by = {(r["backend"], r["store"], r["chunk_mb"], r["workers"]): r["median_s"] for r in runs}
    out = []
    for store, chunk_mb in sorted({(r["store"], r["chunk_mb"]) for r in runs}):
        row = {"store": store, "chunk_mb": chunk_mb}
        for backend in READERS:
            one, two = by.get((backend, store, chunk_mb, 1)), by.get((backend, store, chunk_mb, 2))
            if one and two:
                row[f"{backend}_speedup_2w"] = one / two
        for w in (1, 2):
            ours = by.get(("carray", store, chunk_mb, w))
            for other in READERS[1:]:
                theirs = by.get((other, store, chunk_mb, w))
                if ours and theirs:
                    row[f"{other}_over_carray_{w}w"] = theirs / ours
        out.append(row)
    return out


def markdown(results: dict) -> str:
    cfg = results["config"]
    lines = [
        "# Distributed reads: carray vs zarr v3",
        "",
        f"`python benchmarks/bench_distributed.py --size-gb {cfg['size_gb']} --s3-size-gb "
        f"{cfg['s3_size_gb']} --repeats {cfg['repeats']}` on {cfg['cores']} cores "
        f"(Python {cfg['python']}).",
        "",
        f"Sum of a float64 array: {cfg['size_gb']} GB on local disk (warm page cache), "
        f"{cfg['s3_size_gb']} GB on a moto S3 server in a child process (moto keeps objects "
        "in memory and serves them over HTTP on loopback, so S3 times measure request "
        "handling, not a network).  Both codecs: Blosc lz4, clevel 5, byte shuffle, equal "
        "chunks; one thread per worker process.  Each library reads with its own default "
        "dask blocks: carray one block per superchunk file (its default files hold about "
        "16 MB of chunks), zarr one block per chunk; `zarr-ourblocks` is zarr read with "
        "carray's blocks.",
        "",
        "## Medians",
        "",
        "| store | chunk MB | backend | workers | median s | GB/s | peak worker RSS MB | "
        "write s | stored MB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(results["runs"], key=lambda r: (r["store"], r["chunk_mb"], r["backend"],
                                                    r["workers"])):
        lines.append(f"| {r['store']} | {r['chunk_mb']} | {r['backend']} | {r['workers']} | "
                     f"{r['median_s']:.2f} | {r['size_gb'] / r['median_s']:.2f} | "
                     f"{r['peak_worker_rss_mb']:.0f} | {r['write_s']:.1f} | "
                     f"{r['stored_mb']:.0f} |")
    lines += ["", "## Ratios (same run)", "",
              f"Targets: 2-worker speedup >= {SPEEDUP_TARGET}x; zarr time / carray time >= "
              f"{ZARR_TARGET}x.", "",
              "| store | chunk MB | carray 2w speedup | zarr 2w speedup | "
              "zarr/carray 1w | zarr/carray 2w | zarr-ourblocks/carray 1w | "
              "zarr-ourblocks/carray 2w |", "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def cell(row: dict, key: str, target: float) -> str:
        v = row.get(key)
        return "-" if v is None else f"{v:.2f}x" + ("" if v >= target else " (below target)")

    for row in results["ratios"]:
        lines.append(f"| {row['store']} | {row['chunk_mb']} | "
                     f"{cell(row, 'carray_speedup_2w', SPEEDUP_TARGET)} | "
                     f"{cell(row, 'zarr_speedup_2w', SPEEDUP_TARGET)} | "
                     f"{cell(row, 'zarr_over_carray_1w', ZARR_TARGET)} | "
                     f"{cell(row, 'zarr_over_carray_2w', ZARR_TARGET)} | "
                     f"{cell(row, 'zarr-ourblocks_over_carray_1w', ZARR_TARGET)} | "
                     f"{cell(row, 'zarr-ourblocks_over_carray_2w', ZARR_TARGET)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size-gb", type=float, default=2.0, help="array size on local disk")
    p.add_argument("--s3-size-gb", type=float, default=0.5,
                   help="array size on the moto S3 server (0 skips S3)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chunk-mb", type=lambda s: [float(x) for x in s.split(",")],
                   default=[2.0, 8.0, 32.0], help="chunk sizes on disk, comma-separated")
    p.add_argument("--s3-chunk-mb", type=float, default=8.0)
    p.add_argument("--workdir", default=None, help="where the disk datasets go (temporary)")
    p.add_argument("--out", default=str(RESULTS / "bench_distributed"),
                   help="results path without extension")
    args = p.parse_args(argv)
    results = run(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
