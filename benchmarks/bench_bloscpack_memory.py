"""Peak memory of Bloscpack pack and unpack, file to file: carray vs bloscpack 0.16.

A float64 array (the noisy ramp of ``bench_bloscpack.py``) is saved as a ``.npy``
file, then each step runs in a fresh Python process that reports its peak
resident set size (``resource.getrusage(RUSAGE_SELF).ru_maxrss``):

* ``carray pack``: ``carray.bloscpack.pack_npy(npy, blp)`` (the ``carray pack`` verb),
* ``carray unpack``: ``carray.bloscpack.unpack_file(blp, npy)`` (``carray unpack``),
* ``bloscpack pack`` / ``bloscpack unpack``: bloscpack 0.16's file-to-file functions
  (``pack_file_to_file`` / ``unpack_file_from_file``, on the same bytes),
* ``carray import``: a process that only imports carray, the floor under the others.

Run: ``python benchmarks/bench_bloscpack_memory.py [--size-mb MB] [--dir DIR]``.
Writes ``benchmarks/results/bench_bloscpack_memory.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
TARGET_MB = 300

# Each child prints its peak RSS in MiB (ru_maxrss is KiB on Linux) and its wall time.
# ru_maxrss survives fork and exec, so it is at least the parent's RSS at the fork: the
# parent stays small (it writes the input in a child too), and the child also reports
# VmHWM, its own high-water mark since exec.
_CHILD = """
import collections, collections.abc, resource, sys, time
for name in ("MutableMapping", "Mapping", "Sequence", "Iterable"):  # bloscpack 0.16
    if not hasattr(collections, name):
        setattr(collections, name, getattr(collections.abc, name))
step, src, dst = sys.argv[1:4]
t0 = time.perf_counter()
if step.startswith("carray"):
    from carray.formats import bloscpack as bp
    if step == "carray pack":
        bp.pack_npy(src, dst, fsync=False)
    elif step == "carray unpack":
        bp.unpack_file(src, dst, fsync=False)
else:
    import bloscpack
    if step == "bloscpack pack":
        bloscpack.pack_file_to_file(src, dst)
    else:
        bloscpack.unpack_file_from_file(src, dst)
seconds = time.perf_counter() - t0
hwm = -1.0
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) / 1024
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, hwm, seconds)
"""


def write_npy(path: str, nbytes: int) -> None:
    """The benchmark array, written a slice at a time (this process stays small too)."""
    n = nbytes // 8
    out = np.lib.format.open_memmap(path, mode="w+", dtype="f8", shape=(n,))
    rng = np.random.default_rng(42)
    step, slope = 2**22, 1000.0 / max(n - 1, 1)
    for start in range(0, n, step):
        stop = min(start + step, n)
        out[start:stop] = np.arange(start, stop) * slope + \
            rng.normal(0.0, 0.001, stop - start).round(4)
    out.flush()
    del out


def child(step: str, src: str, dst: str) -> tuple[float, float, float]:
    done = subprocess.run([sys.executable, "-c", _CHILD, step, src, dst], check=True,
                          capture_output=True, text=True)
    rss, hwm, seconds = done.stdout.split()
    return float(rss), float(hwm), float(seconds)


def run(size_mb: int, workdir: str) -> dict:
    npy = os.path.join(workdir, "a.npy")
    subprocess.run([sys.executable, __file__, "--write-npy", npy, "--size-mb", str(size_mb)],
                   check=True)
    paths = {"blp": os.path.join(workdir, "a.blp"), "out": os.path.join(workdir, "out.npy"),
             "peer_blp": os.path.join(workdir, "peer.blp"),
             "peer_out": os.path.join(workdir, "peer.out")}
    steps = [("carray import", npy, npy),
             ("carray pack", npy, paths["blp"]),
             ("carray unpack", paths["blp"], paths["out"]),
             ("bloscpack pack", npy, paths["peer_blp"]),
             ("bloscpack unpack", paths["peer_blp"], paths["peer_out"])]
    res: dict = {"size_mb": round(os.path.getsize(npy) / 2**20, 1), "peak_rss_MiB": {},
                 "vm_hwm_MiB": {}, "seconds": {}}
    for name, src, dst in steps:
        os.sync()
        time.sleep(0.5)
        rss, hwm, seconds = child(name, src, dst)
        res["peak_rss_MiB"][name] = round(rss, 1)
        res["vm_hwm_MiB"][name] = round(hwm, 1)
        res["seconds"][name] = round(seconds, 3)
    with open(npy, "rb") as a, open(paths["out"], "rb") as b:
        same = True
        while same:
            x, y = a.read(2**24), b.read(2**24)
            same = x == y
            if not x:
                break
        res["round_trip_identical"] = same
    return res


def markdown(res: dict, meta: dict) -> str:
    lines = [f"# Bloscpack peak memory, file to file ({res['size_mb']} MiB float64 .npy)", "",
             f"{meta['python']} on {meta['machine']}, {meta['cores']} cores; each step in a "
             "fresh process, peak RSS from `getrusage` (includes the interpreter and its "
             f"imports); target under {TARGET_MB} MB.", "",
             "| step | peak RSS MiB (ru_maxrss) | VmHWM MiB | seconds |",
             "| --- | ---: | ---: | ---: |"]
    for name, rss in res["peak_rss_MiB"].items():
        lines.append(f"| {name} | {rss} | {res['vm_hwm_MiB'][name]} | {res['seconds'][name]} |")
    lines += ["", f"carray's unpacked .npy is byte-identical to the input: "
              f"{res['round_trip_identical']}.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=400)
    parser.add_argument("--dir", default=None, help="where to write the files")
    parser.add_argument("--write-npy", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_npy:  # the input, written by a child so the parent stays small
        write_npy(args.write_npy, args.size_mb * 2**20)
        return 0
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        res = run(args.size_mb, workdir)
    meta = {"python": platform.python_version(), "machine": platform.machine(),
            "cores": os.cpu_count(), "numpy": np.__version__}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_bloscpack_memory.json").write_text(
        json.dumps({"meta": meta, "results": res}, indent=2) + "\n")
    (RESULTS / "bench_bloscpack_memory.md").write_text(markdown(res, meta))
    print(markdown(res, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
