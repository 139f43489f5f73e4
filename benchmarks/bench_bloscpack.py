"""Bloscpack (.blp) files: carray vs the bloscpack 0.16 package vs raw python-blosc2.

One float64 array (a noisy ramp: compressible, not trivially so) is packed to a
``.blp`` file and unpacked again by

* carray (``carray.bloscpack.pack_array`` / ``unpack_array``), with and without
  fsync before the rename (bloscpack never fsyncs, so ``fsync=False`` is the like-for-like
  number; the default is durable),
* the bloscpack package (``pack_ndarray_to_file`` / ``unpack_ndarray_from_file``),
* raw python-blosc2, chunk by chunk in memory (``blosc2.compress`` of each 1 MiB chunk,
  ``blosc2.decompress`` of each): the codec's own cost, a ceiling for the file formats,

all with blosclz, clevel 7, byte shuffle, 1 MiB chunks and adler32 checksums, interleaved,
each timing the median of ``--repeat`` runs.  Reads are warm-cache.  It also times carray's
read of an adler32 file with verification against a file without checksums.

Run: ``python benchmarks/bench_bloscpack.py [--quick] [--repeat N] [--size-mb MB]``.
Writes ``benchmarks/results/bench_bloscpack.{json,md}``.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import median_time

import carray
from carray.formats import bloscpack as ours

for _name in ("MutableMapping", "Mapping", "Sequence", "Iterable"):  # bloscpack 0.16 on 3.10+
    if not hasattr(collections, _name):
        setattr(collections, _name, getattr(collections.abc, _name))
import blosc2  # noqa: E402
import bloscpack  # noqa: E402

RESULTS = Path(__file__).parent / "results"
CHUNK = 2**20
CPARAMS = carray.CParams(clevel=7, cname="blosclz", shuffle=carray.SHUFFLE)


def make_data(nbytes: int) -> np.ndarray:
    n = nbytes // 8
    rng = np.random.default_rng(42)
    return np.linspace(0.0, 1000.0, n) + rng.normal(0.0, 0.001, n).round(4)


def blosc2_pack(a: np.ndarray) -> list[bytes]:
    flat = a.view(np.uint8)
    return [blosc2.compress(flat[i:i + CHUNK], typesize=8, clevel=7,
                            filter=blosc2.Filter.SHUFFLE, codec=blosc2.Codec.BLOSCLZ)
            for i in range(0, flat.nbytes, CHUNK)]


def blosc2_unpack(chunks: list[bytes]) -> list[bytes]:
    return [blosc2.decompress(c) for c in chunks]


def run(size_mb: int, repeat: int, workdir: str) -> dict:
    a = make_data(size_mb * 2**20)
    mb = a.nbytes / 1e6
    p_ours, p_peer = os.path.join(workdir, "ours.blp"), os.path.join(workdir, "peer.blp")
    p_none = os.path.join(workdir, "none.blp")
    # Writers replace scratch files; readers read files written once, so no read meets
    # a file that is still being flushed.
    w_ours, w_peer = os.path.join(workdir, "w_ours.blp"), os.path.join(workdir, "w_peer.blp")
    pack = {
        "carray": lambda: ours.pack_array(a, w_ours, cparams=CPARAMS, chunk_size=CHUNK,
                                          fsync=False),
        "carray (fsync)": lambda: ours.pack_array(a, w_ours, cparams=CPARAMS,
                                                  chunk_size=CHUNK),
        "bloscpack": lambda: bloscpack.pack_ndarray_to_file(
            a, w_peer, chunk_size=CHUNK,
            blosc_args=bloscpack.BloscArgs(clevel=7, shuffle=True, cname="blosclz")),
        "python-blosc2 (memory)": lambda: blosc2_pack(a),
    }
    chunks = blosc2_pack(a)
    unpack = {
        "carray": lambda: ours.unpack_array(p_ours),
        "bloscpack": lambda: bloscpack.unpack_ndarray_from_file(p_peer),
        "python-blosc2 (memory)": lambda: blosc2_unpack(chunks),
    }
    checks = {
        "adler32, verify": lambda: ours.unpack_array(p_ours),
        "adler32, verify=False": lambda: ours.unpack_array(p_ours, verify=False),
        "checksum None": lambda: ours.unpack_array(p_none),
    }
    for fn in pack.values():  # warm up
        fn()
    ours.pack_array(a, p_ours, cparams=CPARAMS, chunk_size=CHUNK, fsync=False)
    bloscpack.pack_ndarray_to_file(a, p_peer, chunk_size=CHUNK, blosc_args=bloscpack.BloscArgs(
        clevel=7, shuffle=True, cname="blosclz"))
    ours.pack_array(a, p_none, cparams=CPARAMS, chunk_size=CHUNK, checksum=None, fsync=False)
    assert np.array_equal(ours.unpack_array(p_peer), a)
    assert np.array_equal(bloscpack.unpack_ndarray_from_file(p_ours), a)
    times: dict[str, dict[str, list[float]]] = {"pack": {}, "unpack": {}, "checksum": {}}
    # Interleave the contenders so drifting machine load hits them alike, rotating
    # their order; flush the writers' dirty pages before reading, or the first
    # reader after the writers pays for the kernel's write-back.
    for rep in range(repeat):
        for group, fns in (("pack", pack), ("unpack", unpack), ("checksum", checks)):
            os.sync()
            names = list(fns)
            names = names[rep % len(names):] + names[:rep % len(names)]
            for name in names:
                times[group].setdefault(name, []).append(median_time(fns[name], 1))
    res: dict = {"size_mb": round(mb, 1), "ratio": {}, "pack_MBps": {}, "unpack_MBps": {},
                 "read_s": {}}
    for name, ts in times["pack"].items():
        res["pack_MBps"][name] = round(mb / statistics.median(ts), 1)
    for name, ts in times["unpack"].items():
        res["unpack_MBps"][name] = round(mb / statistics.median(ts), 1)
    for name, ts in times["checksum"].items():
        res["read_s"][name] = round(statistics.median(ts), 4)
    res["file_MB"] = {"carray": round(os.path.getsize(p_ours) / 1e6, 2),
                      "bloscpack": round(os.path.getsize(p_peer) / 1e6, 2)}
    res["ratio"]["pack carray / bloscpack"] = round(
        res["pack_MBps"]["carray"] / res["pack_MBps"]["bloscpack"], 2)
    res["ratio"]["pack carray (fsync) / bloscpack"] = round(
        res["pack_MBps"]["carray (fsync)"] / res["pack_MBps"]["bloscpack"], 2)
    res["ratio"]["unpack carray / bloscpack"] = round(
        res["unpack_MBps"]["carray"] / res["unpack_MBps"]["bloscpack"], 2)
    verify, none = res["read_s"]["adler32, verify"], res["read_s"]["checksum None"]
    res["checksum_overhead_pct"] = round(100 * (verify - none) / verify, 1)
    return res


def markdown(res: dict, meta: dict) -> str:
    lines = [f"# Bloscpack benchmark ({res['size_mb']} MB float64, blosclz 7, shuffle, "
             f"1 MiB chunks, adler32)", "",
             f"{meta['python']} on {meta['machine']}, {meta['cores']} cores, "
             f"median of {meta['repeat']} interleaved runs, warm cache.", "",
             "| contender | pack MB/s | unpack MB/s |", "| --- | ---: | ---: |"]
    for name, v in res["pack_MBps"].items():
        lines.append(f"| {name} | {v} | {res['unpack_MBps'].get(name, '')} |")
    lines += ["", "| ratio | value |", "| --- | ---: |"]
    lines += [f"| {k} | {v}x |" for k, v in res["ratio"].items()]
    lines += ["", "| carray read | seconds |", "| --- | ---: |"]
    lines += [f"| {k} | {v} |" for k, v in res["read_s"].items()]
    lines += ["", f"adler32 verification costs {res['checksum_overhead_pct']}% of the read time "
              "(vs a file without checksums).", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 MB, 3 runs")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--size-mb", type=int, default=None)
    parser.add_argument("--dir", default=None, help="where to write the .blp files")
    args = parser.parse_args()
    size = args.size_mb or (40 if args.quick else 400)
    repeat = args.repeat or (3 if args.quick else 5)
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        res = run(size, repeat, workdir)
    meta = {"python": platform.python_version(), "machine": platform.machine(),
            "cores": carray.detect_number_of_cores(), "nthreads": carray.get_nthreads(),
            "repeat": repeat, "numpy": np.__version__, "blosc2": blosc2.__version__,
            "bloscpack": bloscpack.__version__, "quick": args.quick}
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    (RESULTS / f"bench_bloscpack{suffix}.json").write_text(
        json.dumps({"meta": meta, "results": res}, indent=2) + "\n")
    (RESULTS / f"bench_bloscpack{suffix}.md").write_text(markdown(res, meta))
    print(markdown(res, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
