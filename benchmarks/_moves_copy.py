"""Copy of a zstd-compressed array by moving its chunks, against ``cp -r`` of its files.

The source: float64 ``linspace(0, 1000, n)`` plus normal noise of 0.01 (1 GB, or
100 MB with ``quick``), zstd level 5 with shuffle, the chunks carray picks, in
carray's superchunk layout.  Three copies, each with the library's defaults (fsync
on: the copy is on stable storage when ``copy`` returns):

* within carray's layout: ``a.copy(rootdir=...)`` moves every chunk as its bytes;
* to ``.b2nd``: the frame takes the blocks Blosc chose for the source's chunks, so
  every chunk but the partial last one moves (a ``.b2nd`` chunk is padded);
* to bcolz: bcolz chunks are Blosc1 and carray's are Blosc2, so every chunk is
  decoded and compressed again (decoding on every core; c-blosc 1.x compresses one
  chunk at a time on its own threads, its block size being process-wide state).

The peer is ``cp -r`` of the source's files, which does not sync; each case also
times ``cp -r`` followed by an fsync of every file it wrote (16 at once), the
same durability carray's copy gives.  Each case is run ``repeat`` times, carray
and the peers taking turns.  The page cache holds the source for all.

Run: ``PYTHONPATH=src python benchmarks/_moves_copy.py [--repeat N] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import carray as ca
from carray.array import transfer

CPARAMS = ca.CParams(cname="zstd", clevel=5, shuffle=ca.SHUFFLE)


def make_source(path: str, nitems: int) -> ca.carray:
    """The source array, written a slice at a time (never the whole of it in memory)."""
    rng = np.random.default_rng(0)
    step = 4_000_000
    a = ca.carray(np.empty(0, "f8"), cparams=CPARAMS, expectedlen=nitems, rootdir=path,
                  mode="w")
    for start in range(0, nitems, step):
        stop = min(start + step, nitems)
        x = np.arange(start, stop) * (1000 / (nitems - 1))  # linspace(0, 1000) piecewise
        a.append(x + rng.normal(0, 0.01, stop - start))
    a.close()
    return ca.open(path, mode="r")


def _size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def _cp_synced(src: str, dst: str) -> None:
    """``cp -r``, then every file it wrote made durable (16 fsyncs at once)."""
    subprocess.run(["cp", "-r", src, dst], check=True)
    files = [os.path.join(d, f) for d, _, fs in os.walk(dst) for f in fs]

    def sync(path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(sync, files))


def _codec_floor(a: ca.carray) -> None:
    """What the bcolz copy cannot avoid: every chunk decoded and compressed again as a
    Blosc1 chunk (python-blosc on all cores), with no I/O."""
    import blosc

    step = a.chunks[0]
    for start in range(0, len(a), step):
        rows = a[start:start + step]
        blosc.compress(rows, typesize=8, clevel=5, shuffle=blosc.SHUFFLE, cname="zstd")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(repeat: int = 3, quick: bool = False) -> dict:
    nitems = 12_500_000 if quick else 125_000_000
    root = tempfile.mkdtemp(prefix="moves_copy_", dir=os.environ.get("BENCH_TMP"))
    try:
        src = os.path.join(root, "src")
        a = make_source(src, nitems)
        cases = []
        targets = [("carray layout", os.path.join(root, "dst"), {}),
                   (".b2nd", os.path.join(root, "dst.b2nd"), {}),
                   ("bcolz", os.path.join(root, "dst.bcolz"), {"format": "bcolz"}),
                   # Reported beside the defaults: what the copy costs without the sync.
                   ("carray layout, fsync off", os.path.join(root, "dst"), {"fsync": False}),
                   (".b2nd, fsync off", os.path.join(root, "dst.b2nd"), {"fsync": False})]
        for label, dst, extra in targets:
            ours, peer, synced = [], [], []
            for _ in range(repeat):
                _remove(dst)
                ours.append(_timed(lambda d=dst, e=extra: a.copy(rootdir=d, mode="w", **e)
                                   .close()))
                _remove(dst)
                peer.append(_timed(lambda d=dst: subprocess.run(["cp", "-r", src, d],
                                                                check=True)))
                _remove(dst)
                synced.append(_timed(lambda d=dst: _cp_synced(src, d)))
                _remove(dst)
            _, stats = transfer.copy_of(a, rootdir=dst, mode="w", **extra)
            _remove(dst)
            floor = "" if label != "bcolz" else \
                f"; decoding and compressing alone (no I/O) take {_timed(lambda: _codec_floor(a)):.2f} s"
            ratio = statistics.median(ours) / statistics.median(peer)
            ratio_synced = statistics.median(ours) / statistics.median(synced)
            cases.append({
                "name": f"copy {nitems * 8 / 1e9:.1f} GB zstd array to {label}",
                "carray_s": ours, "peer": "cp -r", "peer_s": peer,
                "target": "as fast as Blosc1 chunks allow" if label == "bcolz"
                else "(reported)" if "fsync off" in label else "within 1.5x of cp -r",
                "note": f"{stats.summary()}; median {ratio:.2f}x cp -r, "
                        f"{ratio_synced:.2f}x cp -r followed by an fsync of its files; "
                        f"{'fsync off' if 'fsync off' in label else 'fsync on'} "
                        f"(cp -r does not sync); source {_size(src) / 1e6:.0f} MB "
                        f"stored{floor}",
                "peer_synced": "cp -r, then fsync of every file", "peer_synced_s": synced,
            })
        a.close()
        return {"cases": cases, "items": nitems, "cpus": os.cpu_count()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100 MB instead of 1 GB")
    args = parser.parse_args()
    result = run(args.repeat, args.quick)
    for case in result["cases"]:
        ours, peer = case["carray_s"], case["peer_s"]
        print(f"{case['name']}: carray {statistics.median(ours):.3f} s "
              f"[{min(ours):.3f}-{max(ours):.3f}], {case['peer']} "
              f"{statistics.median(peer):.3f} s [{min(peer):.3f}-{max(peer):.3f}], cp -r + "
              f"fsync {statistics.median(case['peer_synced_s']):.3f} s; "
              f"{case['note']}")


if __name__ == "__main__":
    main()
