"""The superchunk layout against the bcolz 1.x layout and python-blosc2 ``.b2nd``, one run.

Cases (same chunk length, lz4 level 5 with byte shuffle, two Blosc threads; both
carray layouts with their default fsync=True): write a whole array, build it by
appending 10,000 rows at a time, read everything back, 10,000 random
single-element reads, and the number of files each makes.  Also: the cost of
adler32 verification as a fraction of a full read (superchunk, verify on vs
off), opening a dataset of 1,000,000 chunks and reading one element in a fresh
process (timed inside it, after ``import carray``), and the bytes written when
one element of a persisted chunk changes (counted by wrapping ``os.write`` and
``os.pwrite``).  Every timing is the median of ``--repeat`` runs; disk reads are
warm-cache.

Run: ``python benchmarks/bench_superchunk.py [--quick] [--repeat N] [--size-mb MB]``.
Writes ``benchmarks/results/bench_superchunk.{json,md}``.
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
LIBS = ("superchunk", "bcolz", "python-blosc2")


def make_data(nbytes: int) -> np.ndarray:
    rng = np.random.default_rng(42)
    t = np.linspace(0, 200 * np.pi, nbytes // 8)
    return (np.sin(t) * 100 + rng.normal(0, 0.01, t.size)).round(3)


class CArrayLib:
    def __init__(self, fmt: str, chunklen: int, path: str) -> None:
        self.fmt, self.chunklen, self.path = fmt, chunklen, path
        self.cp = ca.CParams(cname="lz4", clevel=5, shuffle=ca.SHUFFLE)

    def write(self, data):
        a = ca.carray(data, cparams=self.cp, chunklen=self.chunklen, rootdir=self.path,
                      mode="w", format=self.fmt)
        a.close()

    def build_by_appending(self, data):
        a = ca.carray(np.empty(0, data.dtype), cparams=self.cp, chunklen=self.chunklen,
                      rootdir=self.path, mode="w", format=self.fmt)
        for i in range(0, len(data), APPEND_ROWS):
            a.append(data[i:i + APPEND_ROWS])
        a.close()

    def open(self, **storage):
        return ca.carray(rootdir=self.path, mode="r", storage=storage or None)


class Blosc2Lib:
    def __init__(self, chunklen: int, path: str) -> None:
        import blosc2

        self.b2, self.chunklen, self.path = blosc2, chunklen, path + ".b2nd"
        self.cp = blosc2.CParams(codec=blosc2.Codec.LZ4, clevel=5,
                                 filters=[blosc2.Filter.SHUFFLE], nthreads=NTHREADS)
        self.dp = blosc2.DParams(nthreads=NTHREADS)

    def write(self, data):
        self.b2.asarray(data, chunks=(self.chunklen,), cparams=self.cp, dparams=self.dp,
                        urlpath=self.path, mode="w")

    def build_by_appending(self, data):
        a = self.b2.empty((0,), dtype=data.dtype, chunks=(self.chunklen,), cparams=self.cp,
                          dparams=self.dp, urlpath=self.path, mode="w")
        for i in range(0, len(data), APPEND_ROWS):
            block = data[i:i + APPEND_ROWS]
            n = a.shape[0]
            a.resize((n + len(block),))
            a[n:] = block

    def open(self):
        return self.b2.open(self.path, mode="r", dparams=self.dp)


def count_files(path: str) -> int:
    if os.path.isfile(path):
        return 1
    return sum(len(files) for _, _, files in os.walk(path))


def lib_cases(data, chunklen, tmp, repeat) -> dict:
    """Writes first for every library, then reads, each group in rotating order.

    The page cache is synced before each group: a read right after a write would
    otherwise pay for the kernel writing that data back.
    """
    out: dict = {name: {} for name in LIBS}
    idx = np.random.default_rng(1).integers(0, len(data), 10_000).tolist()
    libs = {name: Blosc2Lib(chunklen, str(Path(tmp) / name)) if name == "python-blosc2"
            else CArrayLib(name, chunklen, str(Path(tmp) / name)) for name in LIBS}
    for rep in range(repeat):
        order = LIBS[rep % len(LIBS):] + LIBS[:rep % len(LIBS)]
        for name in order:
            lib = libs[name]
            out[name].setdefault("write_s", []).append(median_time(
                lambda lib=lib: lib.write(data), 1))
            out[name].setdefault("append_s", []).append(median_time(
                lambda lib=lib: lib.build_by_appending(data), 1))
        os.sync()
        for name in order:
            a = libs[name].open()
            out[name].setdefault("read_s", []).append(median_time(lambda a=a: a[:], 1))

            def elements(a=a):
                for i in idx:
                    a[i]
            out[name].setdefault("element_s", []).append(median_time(elements, 1))
        fast = libs["superchunk"].open(verify=False)
        out["superchunk"].setdefault("read_noverify_s", []).append(
            median_time(lambda f=fast: f[:], 1))
    for name in LIBS:
        r = out[name] = {k: statistics.median(v) for k, v in out[name].items()}
        r["files"] = count_files(libs[name].path)
        assert np.array_equal(libs[name].open()[:], data), name
        print(f"  {name}: {r}", flush=True)
    sc = out["superchunk"]
    sc["checksum_fraction"] = max(0.0, 1 - sc["read_noverify_s"] / sc["read_s"])
    return out


def checksum_case(nbytes, chunklen, tmp, repeat) -> dict:
    """Verification cost on the benchmark signal and on a well-compressing random walk."""
    walk = np.cumsum(np.random.default_rng(3).integers(-3, 4, nbytes // 8, dtype=np.int64))
    out = {}
    for name, data in (("signal", make_data(nbytes)), ("random_walk", walk)):
        path = str(Path(tmp) / f"ck_{name}")
        a = ca.carray(data, chunklen=chunklen, rootdir=path, mode="w",
                      cparams=ca.CParams(cname="lz4", clevel=5))
        ratio = a.nbytes / a.cbytes
        a.close()
        on = ca.carray(rootdir=path, mode="r")
        off = ca.carray(rootdir=path, mode="r", storage={"verify": False})
        t_on = median_time(lambda on=on: on[:], repeat)
        t_off = median_time(lambda off=off: off[:], repeat)
        out[name] = {"ratio": ratio, "read_verify_s": t_on, "read_noverify_s": t_off,
                     "fraction": max(0.0, 1 - t_off / t_on)}
        print(f"  checksum {name}: {out[name]}", flush=True)
    return out


class WriteCounter:
    """Counts bytes passed to os.write / os.pwrite, per file name, while active."""

    def __init__(self) -> None:
        self.by_fd: dict[int, int] = {}
        self.names: dict[str, int] = {}

    def __enter__(self):
        self._write, self._pwrite = os.write, os.pwrite

        def write(fd, data):
            n = self._write(fd, data)
            self._add(fd, n)
            return n

        def pwrite(fd, data, offset):
            n = self._pwrite(fd, data, offset)
            self._add(fd, n)
            return n

        os.write, os.pwrite = write, pwrite
        return self

    def _add(self, fd, n):
        try:
            name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            name = "?"
        name = name.split(".")[0] if ".tmp" in name else name
        self.names[name] = self.names.get(name, 0) + n

    def __exit__(self, *exc):
        os.write, os.pwrite = self._write, self._pwrite


def inplace_case(data, chunklen, tmp) -> dict:
    out = {}
    for fmt in ("superchunk", "bcolz"):
        path = str(Path(tmp) / f"inplace_{fmt}")
        ca.carray(data, chunklen=chunklen, rootdir=path, mode="w", format=fmt).close()
        a = ca.open(path, mode="a")
        pos = chunklen * 7 + 123
        with WriteCounter() as wc:
            a[pos] = a[pos] + 0.001
            a.flush()
        cbytes = len(a.engine.read_stored(7))
        a.close()
        out[fmt] = {"bytes_written": sum(wc.names.values()), "by_file": wc.names,
                    "chunk_cbytes": cbytes}
        if fmt == "superchunk":
            files = {k: v for k, v in wc.names.items() if k.startswith("sc_")}
            out[fmt]["superchunk_file_bytes"] = sum(files.values())
        print(f"  in-place {fmt}: {out[fmt]}", flush=True)
    return out


_OPEN_ONE = """
import time, sys
import carray as ca
t1 = time.perf_counter()
a = ca.open(sys.argv[1], mode="r")
v = a[int(sys.argv[2])]
print(time.perf_counter() - t1)
"""


def many_chunks_case(tmp, nchunks, repeat) -> dict:
    root = str(Path(tmp) / "many_chunks")
    chunklen = 8
    a = ca.carray(np.empty(0, "i8"), chunklen=chunklen, rootdir=root, mode="w", fsync=False)
    step = 800_000
    t0 = time.perf_counter()
    for i in range(0, chunklen * nchunks, step):
        a.append(np.arange(i, min(i + step, chunklen * nchunks), dtype="i8"))
    a.append(np.arange(3, dtype="i8"))
    a.close()
    build = time.perf_counter() - t0
    opens = []
    for k in range(max(5, repeat)):
        proc = subprocess.run([sys.executable, "-c", _OPEN_ONE, root,
                               str(chunklen * nchunks - 1 - 7919 * k)],
                              capture_output=True, text=True, check=True)
        opens.append(float(proc.stdout))
    return {"nchunks": nchunks + 1, "files": count_files(root), "build_s": build,
            "open_and_read_one_s": statistics.median(opens)}


def report(res: dict) -> str:
    lines = ["# Superchunk layout vs bcolz layout vs python-blosc2 (.b2nd)\n",
             f"{res['size_bytes'] / 2**20:.0f} MiB float64, chunklen {res['chunklen']} "
             f"({res['chunklen'] * 8 / 2**20:.1f} MiB chunks), lz4 clevel 5 shuffle, "
             f"{NTHREADS} threads, median of {res['repeat']} runs; {res['platform']}\n",
             "| case | " + " | ".join(LIBS) + " |", "|---" * (len(LIBS) + 1) + "|"]
    for key, label, fmt in (("write_s", "write (s)", "{:.3f}"),
                            ("append_s", "append 10,000 rows at a time (s)", "{:.3f}"),
                            ("read_s", "full read (s)", "{:.3f}"),
                            ("element_s", "10,000 random elements (s)", "{:.3f}"),
                            ("files", "files", "{}")):
        lines.append(f"| {label} | " + " | ".join(fmt.format(res["libs"][n][key])
                                                   for n in LIBS) + " |")
    sc = res["libs"]["superchunk"]
    lines += ["", f"* adler32 verification: read {sc['read_s']:.3f} s with, "
                  f"{sc['read_noverify_s']:.3f} s without = "
                  f"{100 * sc['checksum_fraction']:.1f}% of read time (target < 15%)"]
    for name, c in res["checksums"].items():
        lines.append(f"* adler32 verification, {name} data (compression ratio {c['ratio']:.2f}):"
                     f" {100 * c['fraction']:.1f}% of read time ({c['read_verify_s']:.3f} s vs "
                     f"{c['read_noverify_s']:.3f} s)")
    m = res["many_chunks"]
    lines.append(f"* {m['nchunks']:,} chunks in {m['files']} files: open + read one element "
                 f"in a fresh process {1000 * m['open_and_read_one_s']:.1f} ms (target < 50 ms)")
    ip = res["inplace"]
    lines.append(f"* one element changed in a {ip['superchunk']['chunk_cbytes']:,}-byte chunk: "
                 f"superchunk layout wrote {ip['superchunk']['bytes_written']:,} bytes "
                 f"({ip['superchunk']['superchunk_file_bytes']:,} into the superchunk file, the "
                 f"rest journal + meta/sizes); bcolz layout wrote "
                 f"{ip['bcolz']['bytes_written']:,} bytes")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="40 MB, 100,000 chunks, 1 repeat")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--size-mb", type=int, default=400)
    args = p.parse_args(argv)
    size = (40 if args.quick else args.size_mb) * 2**20
    repeat = 1 if args.quick else args.repeat
    nchunks = 100_000 if args.quick else 1_000_000
    ca.set_nthreads(NTHREADS)
    data = make_data(size)
    chunklen = 131_072  # 1 MiB chunks, bcolz's choice for 400 MB
    tmp = tempfile.mkdtemp(prefix="bench_sc_", dir=os.environ.get("BENCH_TMP"))
    try:
        res = {"size_bytes": data.nbytes, "chunklen": chunklen, "repeat": repeat,
               "platform": f"{platform.machine()} {platform.python_version()}"}
        print("libraries", flush=True)
        res["libs"] = lib_cases(data, chunklen, tmp, repeat)
        print("checksums", flush=True)
        res["checksums"] = checksum_case(data.nbytes, chunklen, tmp, max(repeat, 5))
        print("in place", flush=True)
        res["inplace"] = inplace_case(data, chunklen, tmp)
        print("many chunks", flush=True)
        res["many_chunks"] = many_chunks_case(tmp, nchunks, repeat)
        print(res["many_chunks"], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    name = "bench_superchunk_quick" if args.quick else "bench_superchunk"
    (RESULTS / f"{name}.json").write_text(json.dumps(res, indent=1))
    (RESULTS / f"{name}.md").write_text(report(res))
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
