"""carray's versions against icechunk (zarr 3 arrays on local files, and on moto S3 for the
writers and rebase cases), side by side in one run.

Both libraries store the same int64 data (a random walk, as in ``bench_carray.py``) with
the same chunk length and codec (Blosc lz4, clevel 5, byte shuffle); icechunk uses its
local file system storage and zarr 3 arrays, carray its own layout.  Cases (issue 23):

1. ``commits``: 1,000 commits that each append one chunk to a 1-d array (carray: append
   + ``commit()``; icechunk: a writable session, append, ``commit``), carray with
   ``fsync=False`` (icechunk does not sync) and with its default ``fsync=True``;
2. ``one_chunk``: on an array of 100,000 chunks (chunk length 16), one element edited
   and committed: bytes written (``wchar`` of ``/proc/self/io``: every byte the
   process's threads handed to write calls; ``write_bytes``: what reached the block
   layer, in whole pages; and the new files of the directory) and time, fsync on (with
   the count and time spent in ``os.fsync``) and off;
3. ``open``: opening the newest version, and one among 10,000 kept versions
   (``storage={"versions": "all"}``) by id and by ``as_of``, in the same process and in a
   fresh one (timed after the import);
4. ``time_travel``: open + read the whole array at an old version and at the newest
   (icechunk: a read-only session at the snapshot id, the repository kept open);
5. ``edits``: 1,000 single-element edits each followed by a commit, default retention:
   how much the directory grows (icechunk keeps every snapshot: for context);
6. ``writers``: 4 writer processes committing one chunk each time to one dataset, locally
   and on S3 (moto's server on 127.0.0.1, its own process): commits a second over the
   wall time (carray appends; icechunk writes disjoint regions of a pre-sized array
   in writable sessions committed with a rebase; see ``_versions_writers.py``);
7. ``rebase``: the commit of a writer whose seq another writer took first (one rebase:
   of an append, of an edit of another chunk) against the same commit with no race,
   on ``memory://`` and on S3, with the requests each makes on S3.

Every case runs ``--rounds`` times (at least 3), both libraries back to back in each
round; a ratio is icechunk's time over carray's from the same round, and the report
gives the median and range over rounds.  The 10,000-version histories are made once
per run (carray with ``fsync=False``); the opens and reads on them use the defaults.

Run: ``python benchmarks/bench_versions.py [--quick] [--rounds N]``.
Writes ``benchmarks/results/versions.{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from _versions_report import report, targets
from _versions_writers import RequestLog, case_rebase, case_writers

import carray as ca

RESULTS = Path(__file__).parent / "results"
CNAME, CLEVEL = "lz4", 5
SENTINEL = 10**12  # edited values: far outside the random walk, one per edit
CASES = ("commits", "one_chunk", "open", "time_travel", "edits", "writers", "rebase")


def make_data(n: int, seed: int = 42) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.integers(-3, 4, n, dtype=np.int64))


# -- measuring -------------------------------------------------------------------------------

def proc_io() -> dict[str, int]:
    """This process's I/O counters (every thread's, the finished ones too)."""
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f.read().splitlines())}


class FsyncMeter:
    """Counts the calls of ``os.fsync`` and the time spent in them, on every thread."""

    def __init__(self) -> None:
        self.calls, self.seconds = 0, 0.0
        self._lock = threading.Lock()
        self._real = os.fsync

    def __enter__(self) -> FsyncMeter:
        real = self._real

        def fsync(fd):
            t0 = time.perf_counter()
            try:
                return real(fd)
            finally:
                took = time.perf_counter() - t0
                with self._lock:
                    self.calls += 1
                    self.seconds += took

        os.fsync = fsync
        return self

    def __exit__(self, *exc) -> None:
        os.fsync = self._real

    def take(self) -> tuple[int, float]:
        with self._lock:
            out = (self.calls, self.seconds)
            self.calls, self.seconds = 0, 0.0
        return out


def tree(path: str) -> dict[str, tuple[int, int, int]]:
    """Every file under ``path``: (size, allocated bytes, inode) by relative name."""
    out = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except FileNotFoundError:
                continue
            out[os.path.relpath(full, path)] = (st.st_size, st.st_blocks * 512, st.st_ino)
    return out


def tree_size(path: str) -> tuple[int, int, int]:
    """(bytes, allocated bytes, files) of everything under ``path``."""
    t = tree(path)
    return sum(v[0] for v in t.values()), sum(v[1] for v in t.values()), len(t)


def new_bytes(before: dict, after: dict) -> int:
    """Bytes of the files that are new (or replaced by a rename) plus the growth of the
    others: a lower bound of what was written (overwrites in place are not seen)."""
    total = 0
    for name, (size, _alloc, ino) in after.items():
        old = before.get(name)
        if old is None or old[2] != ino:
            total += size
        elif size > old[0]:
            total += size - old[0]
    return total


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": list(values)}


# -- the two libraries ------------------------------------------------------------------------

def cparams() -> ca.CParams:
    return ca.CParams(cname=CNAME, clevel=CLEVEL, shuffle=ca.SHUFFLE)


def ca_create(path: str, data: np.ndarray, chunklen: int, **kw) -> ca.carray:
    return ca.carray(data, cparams=cparams(), chunklen=chunklen, rootdir=path, mode="w", **kw)


class Ice:
    """One icechunk repository on local files holding the zarr 3 array ``a``."""

    def __init__(self, path: str, data: np.ndarray, chunklen: int) -> None:
        import icechunk
        import zarr
        from zarr.codecs import BloscCodec

        self.ic, self.zarr, self.path = icechunk, zarr, path
        shutil.rmtree(path, ignore_errors=True)
        self.repo = icechunk.Repository.create(icechunk.local_filesystem_storage(path))
        session = self.repo.writable_session("main")
        z = zarr.create_array(session.store, name="a", shape=data.shape, dtype=data.dtype,
                              chunks=(chunklen,),
                              compressors=[BloscCodec(cname=CNAME, clevel=CLEVEL,
                                                      shuffle="shuffle")])
        if len(data):
            z[:] = data
        self.created = session.commit("create")

    def append_commit(self, block: np.ndarray, message: str) -> str:
        session = self.repo.writable_session("main")
        z = self.zarr.open_array(session.store, path="a", mode="r+")
        z.append(block)
        return session.commit(message)

    def edit_commit(self, i: int, value: int, message: str) -> str:
        session = self.repo.writable_session("main")
        z = self.zarr.open_array(session.store, path="a", mode="r+")
        z[i] = value
        return session.commit(message)

    def open_at(self, snapshot_id: str | None = None):
        """The array at a snapshot (the newest of main by default), repository kept open."""
        at = {"snapshot_id": snapshot_id} if snapshot_id else {"branch": "main"}
        session = self.repo.readonly_session(**at)
        return self.zarr.open_array(session.store, path="a", mode="r")

    def snapshots(self) -> list:
        """Snapshots of main, newest first."""
        return list(self.repo.ancestry(branch="main"))


def ice_open_cold(path: str, **at):
    """Open the repository and the array at a version (what a new reader does)."""
    import icechunk
    import zarr

    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(path))
    if "snapshot_id" not in at:
        at = {"branch": "main"} | at
    return zarr.open_array(repo.readonly_session(**at).store, path="a", mode="r")


# -- 1. commits that append one chunk ---------------------------------------------------------

def case_commits(tmp: str, rounds: int, n: int, chunklen: int) -> dict:
    data = make_data(n * chunklen, seed=1)
    blocks = data.reshape(n, chunklen)
    out = {"n_commits": n, "chunklen": chunklen, "rounds": []}
    for r in range(rounds):
        res = {}
        for fsync in (False, True):
            path = os.path.join(tmp, f"commits_ca_{fsync}")
            a = ca_create(path, np.empty(0, "i8"), chunklen, fsync=fsync)
            with FsyncMeter() as meter:
                meter.take()
                t0 = time.perf_counter()
                for b in blocks:
                    a.append(b)
                    a.commit()
                took = time.perf_counter() - t0
                calls, in_fsync = meter.take()
            assert a.nchunks == n and a[-1] == data[-1]
            a.close()
            key = "carray_fsync" if fsync else "carray_nofsync"
            res[key] = took / n
            res[key + "_fsyncs"] = calls / n
            res[key + "_fsync_s"] = in_fsync / n
            shutil.rmtree(path)
        ice = Ice(os.path.join(tmp, "commits_ic"), np.empty(0, "i8"), chunklen)
        t0 = time.perf_counter()
        for i, b in enumerate(blocks):
            ice.append_commit(b, f"append {i}")
        res["icechunk"] = (time.perf_counter() - t0) / n
        assert ice.open_at()[-1] == data[-1]
        shutil.rmtree(ice.path)
        res["ratio_nofsync"] = res["icechunk"] / res["carray_nofsync"]
        res["ratio_fsync"] = res["icechunk"] / res["carray_fsync"]
        out["rounds"].append(res)
        print(f"  commits round {r}: " + " ".join(
            f"{k}={v:.2f}" if k.startswith("ratio") or k.endswith("_fsyncs") else
            f"{k}={v * 1e3:.2f}ms" for k, v in res.items()), flush=True)
    for key in ("carray_nofsync", "carray_fsync", "icechunk", "ratio_nofsync", "ratio_fsync",
                "carray_fsync_fsyncs", "carray_fsync_fsync_s"):
        out[key] = stats([r[key] for r in out["rounds"]])
    return out


# -- 2. a one-chunk commit on an array of 100,000 chunks -----------------------------------

def measure_edit(edit, commit, path: str, meter: FsyncMeter | None) -> dict:
    before_tree = tree(path)
    io0 = proc_io()
    if meter:
        meter.take()
    t0 = time.perf_counter()
    edit()
    t1 = time.perf_counter()
    commit()
    t2 = time.perf_counter()
    io1 = proc_io()
    calls, in_fsync = meter.take() if meter else (0, 0.0)
    return {"time_s": t2 - t0, "commit_s": t2 - t1, "fsyncs": calls, "fsync_s": in_fsync,
            "wchar": io1["wchar"] - io0["wchar"],
            "write_bytes": io1["write_bytes"] - io0["write_bytes"],
            "new_file_bytes": new_bytes(before_tree, tree(path))}


def case_one_chunk(tmp: str, rounds: int, nchunks: int, chunklen: int, edits: int,
                   icechunk: bool) -> dict:
    data = make_data(nchunks * chunklen, seed=2)
    path = os.path.join(tmp, "big_ca")
    t0 = time.perf_counter()
    ca_create(path, data, chunklen, fsync=False).close()
    build_ca = time.perf_counter() - t0
    rng = np.random.default_rng(3)
    out = {"nchunks": nchunks, "chunklen": chunklen, "edits_per_round": edits,
           "build_s": {"carray": build_ca}, "rounds": []}
    ice = None
    if icechunk:
        t0 = time.perf_counter()
        ice = Ice(os.path.join(tmp, "big_ic"), data, chunklen)
        out["build_s"]["icechunk"] = time.perf_counter() - t0
    print(f"  one_chunk: built {nchunks} chunks: {out['build_s']}", flush=True)
    k = 0
    for r in range(rounds):
        res = {}
        for fsync in (False, True):
            a = ca.open(path, mode="a", fsync=fsync)
            a[int(rng.integers(len(data)))] = 0  # the first edit loads what edits need
            a.commit()
            runs = []
            with FsyncMeter() as meter:
                for _ in range(edits):
                    i, k = int(rng.integers(len(data))), k + 1

                    def edit(a=a, i=i, v=SENTINEL + k):
                        a[i] = v

                    runs.append(measure_edit(edit, a.commit, path, meter))
            a.close()
            res["carray_fsync" if fsync else "carray_nofsync"] = {
                key: statistics.median(m[key] for m in runs) for key in runs[0]}
        if ice is not None:
            runs = []
            for _ in range(max(1, edits // 4)):
                i, k = int(rng.integers(len(data))), k + 1
                session = ice.repo.writable_session("main")
                z = ice.zarr.open_array(session.store, path="a", mode="r+")

                def edit(z=z, i=i, v=SENTINEL + k):
                    z[i] = v

                runs.append(measure_edit(edit, lambda s=session: s.commit("edit"), ice.path,
                                         None))
            res["icechunk"] = {key: statistics.median(m[key] for m in runs) for key in runs[0]}
        out["rounds"].append(res)
        print(f"  one_chunk round {r}: " + "; ".join(
            f"{lib}: {v['time_s'] * 1e3:.2f} ms (commit {v['commit_s'] * 1e3:.2f}, "
            f"{v['fsyncs']} fsyncs {v['fsync_s'] * 1e3:.2f} ms) wchar={v['wchar']} "
            f"write_bytes={v['write_bytes']} new_files={v['new_file_bytes']}"
            for lib, v in res.items()), flush=True)
    for lib in out["rounds"][0]:
        out[lib] = {key: stats([r[lib][key] for r in out["rounds"]])
                    for key in out["rounds"][0][lib]}
    return out


# -- 3 and 4. opens and reads among many kept versions ----------------------------------------

def build_history(tmp: str, nchunks: int, chunklen: int, n: int, icechunk: bool) -> dict:
    """An array with ``n`` + 1 kept versions: each commit edits one element."""
    data = make_data(nchunks * chunklen, seed=4)
    rng = np.random.default_rng(5)
    pos = rng.integers(0, len(data), n)
    path = os.path.join(tmp, "hist_ca")
    t0 = time.perf_counter()
    a = ca_create(path, data, chunklen, fsync=False, storage={"versions": "all"})
    ids = []
    for k in range(n):
        a[int(pos[k])] = SENTINEL + k
        ids.append(a.commit(f"edit {k}"))
    build = time.perf_counter() - t0
    times = {v.id: v.time for v in a.versions()}
    a.close()
    # What one more edit + commit costs with every version kept, fsync on (the default).
    a = ca.open(path, mode="a")
    tail = []
    for k in range(n, n + 3):
        t1 = time.perf_counter()
        a[int(pos[k % n])] = SENTINEL + k
        a.commit(f"edit {k}")
        tail.append(time.perf_counter() - t1)
    a.close()
    hist = {"data": data, "pos": pos, "ca_path": path, "ca_ids": ids,
            "ca_times": [times[i] for i in ids], "build_s": {"carray": build},
            "ca_commit_at_end_s": statistics.median(tail)}
    hist["ca_versions"] = len(times) + 3  # the edits, what creating committed, the 3 above
    assert len(times) >= n + 1, len(times)
    print(f"  history: carray {n} commits in {hist['build_s']['carray']:.1f} s", flush=True)
    if icechunk:
        t0 = time.perf_counter()
        ice = Ice(os.path.join(tmp, "hist_ic"), data, chunklen)
        snaps = [ice.edit_commit(int(pos[k]), SENTINEL + k, f"edit {k}") for k in range(n)]
        info = {s.id: s.written_at for s in ice.snapshots()}
        hist.update(ice=ice, ic_ids=snaps, ic_times=[info[s] for s in snaps])
        hist["build_s"]["icechunk"] = time.perf_counter() - t0
        tail = []
        for k in range(n, n + 3):
            t1 = time.perf_counter()
            ice.edit_commit(int(pos[k % n]), SENTINEL + k, f"edit {k}")
            tail.append(time.perf_counter() - t1)
        hist["ic_commit_at_end_s"] = statistics.median(tail)
        print(f"  history: icechunk {n} commits in {hist['build_s']['icechunk']:.1f} s",
              flush=True)
    return hist


def expected_at(hist: dict, k: int) -> tuple[int, int]:
    """An element version ``k`` edited and the value it holds there."""
    return int(hist["pos"][k]), SENTINEL + k


_OPEN = """
import datetime, sys, time
lib, kind, path, arg, where = sys.argv[1:6]
at = {}
if kind == "id":
    at = {"version" if lib == "carray" else "snapshot_id": arg}
elif kind == "as_of":
    at = {"as_of": datetime.datetime.fromisoformat(arg)}
if lib == "carray":
    import carray as ca
    t0 = time.perf_counter()
    a = ca.open(path, mode="r", **at)
    took = time.perf_counter() - t0
else:
    import icechunk, zarr
    if kind != "id":
        at["branch"] = "main"
    t0 = time.perf_counter()
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(path))
    a = zarr.open_array(repo.readonly_session(**at).store, path="a", mode="r")
    took = time.perf_counter() - t0
print(took, int(a[int(where)]))
"""


def case_open(hist: dict, rounds: int, inner: int, icechunk: bool) -> dict:
    n = len(hist["ca_ids"])
    k = n // 2  # a version in the middle of the history
    where, value = expected_at(hist, k)
    last_where, last_value = expected_at(hist, n - 1)
    libs = [("carray", hist["ca_path"], hist["ca_ids"][k], hist["ca_times"][k])]
    if icechunk:
        libs.append(("icechunk", hist["ice"].path, hist["ic_ids"][k], hist["ic_times"][k]))
    out = {"versions": hist["ca_versions"], "old_version_index": k, "rounds": []}

    def open_warm(lib, path, kind, vid, when):
        if lib == "carray":
            at = {"latest": {}, "id": {"version": vid}, "as_of": {"as_of": when}}[kind]
            t0 = time.perf_counter()
            a = ca.open(path, mode="r", **at)
            took = time.perf_counter() - t0
            got = int(a[where if kind != "latest" else last_where])
            a.close()
        else:
            at = {"latest": {}, "id": {"snapshot_id": vid}, "as_of": {"as_of": when}}[kind]
            t0 = time.perf_counter()
            a = ice_open_cold(path, **at)
            took = time.perf_counter() - t0
            got = int(a[where if kind != "latest" else last_where])
        assert got == (value if kind != "latest" else last_value), (lib, kind, got)
        return took

    for r in range(rounds):
        res = {}
        for lib, path, vid, when in libs:
            for kind in ("latest", "id", "as_of"):
                warm = statistics.median(open_warm(lib, path, kind, vid, when)
                                         for _ in range(inner))
                arg = {"latest": "", "id": vid, "as_of": when.isoformat()}[kind]
                proc = subprocess.run(
                    [sys.executable, "-c", _OPEN, lib, kind, path, arg,
                     str(where if kind != "latest" else last_where)],
                    capture_output=True, text=True)
                if proc.returncode:
                    raise RuntimeError(f"open in a fresh process failed: {proc.stderr}")
                took, got = proc.stdout.split()
                assert int(got) == (value if kind != "latest" else last_value), (lib, kind)
                res[f"{lib}_{kind}"] = warm
                res[f"{lib}_{kind}_fresh"] = float(took)
        out["rounds"].append(res)
        print(f"  open round {r}: " + " ".join(f"{k}={v * 1e3:.1f}ms" for k, v in res.items()),
              flush=True)
    for key in out["rounds"][0]:
        out[key] = stats([r[key] for r in out["rounds"]])
    if icechunk:
        for kind in ("latest", "id", "as_of"):
            for sfx in ("", "_fresh"):
                out[f"ratio_{kind}{sfx}"] = stats([r[f"icechunk_{kind}{sfx}"] /
                                                   r[f"carray_{kind}{sfx}"]
                                                   for r in out["rounds"]])
    return out


def case_time_travel(hist: dict, rounds: int, inner: int, icechunk: bool) -> dict:
    n = len(hist["ca_ids"])
    olds = {"old_1pct": n // 100, "old_50pct": n // 2}
    data = hist["data"]
    out = {"versions": hist["ca_versions"], "old_versions": olds, "nbytes": data.nbytes,
           "rounds": []}

    def check(arr, k):
        i, v = expected_at(hist, k)
        assert arr[i] == v, (k, arr[i], v)
        assert arr.shape == data.shape

    def ca_read(vid, k):
        t0 = time.perf_counter()
        a = ca.open(hist["ca_path"], mode="r", **({"version": vid} if vid else {}))
        x = a[:]
        took = time.perf_counter() - t0
        a.close()
        check(x, k)
        return took

    def ic_read(sid, k):
        t0 = time.perf_counter()
        z = hist["ice"].open_at(sid)
        x = z[:]
        took = time.perf_counter() - t0
        check(x, k)
        return took

    jobs = [("carray_latest", ca_read, None, n - 1)]
    jobs += [(f"carray_{name}", ca_read, hist["ca_ids"][k], k) for name, k in olds.items()]
    if icechunk:
        jobs += [("icechunk_latest", ic_read, None, n - 1)]
        jobs += [(f"icechunk_{name}", ic_read, hist["ic_ids"][k], k)
                 for name, k in olds.items()]
    for r in range(rounds):
        res = {}
        for key, read, vid, k in jobs[r % len(jobs):] + jobs[:r % len(jobs)]:  # each first once
            res[key] = statistics.median(read(vid, k) for _ in range(inner))
        res = {key: res[key] for key, *_ in jobs}
        for name in olds:
            res[f"old_over_latest_{name}"] = res[f"carray_{name}"] / res["carray_latest"]
            if icechunk:
                res[f"ratio_{name}"] = res[f"icechunk_{name}"] / res[f"carray_{name}"]
        out["rounds"].append(res)
        print(f"  time travel round {r}: " + " ".join(
            f"{k}={v * 1e3:.1f}ms" if not k.startswith(("old_", "ratio")) else f"{k}={v:.2f}"
            for k, v in res.items()), flush=True)
    for key in out["rounds"][0]:
        out[key] = stats([r[key] for r in out["rounds"]])
    return out


# -- 5. directory growth under single-element edits ------------------------------------------

def case_edits(tmp: str, rounds: int, nchunks: int, chunklen: int, n: int,
               icechunk: bool) -> dict:
    data = make_data(nchunks * chunklen, seed=6)
    out = {"nchunks": nchunks, "chunklen": chunklen, "edits": n, "rounds": []}
    for r in range(rounds):
        rng = np.random.default_rng(100 + r)
        pos = rng.integers(0, len(data), n)
        res = {}
        path = os.path.join(tmp, "edits_ca")
        ca_create(path, data, chunklen).close()
        before = tree_size(path)
        a = ca.open(path, mode="a")
        t0 = time.perf_counter()
        for k in range(n):
            a[int(pos[k])] = SENTINEL + k
            a.commit()
        took = time.perf_counter() - t0
        a.close()
        after = tree_size(path)
        res["carray"] = {"before": before, "after": after, "growth": after[0] / before[0] - 1,
                         "growth_allocated": after[1] / before[1] - 1, "per_commit_s": took / n,
                         "versions": len(ca.open(path, mode="r").versions())}
        shutil.rmtree(path)
        if icechunk:
            ice = Ice(os.path.join(tmp, "edits_ic"), data, chunklen)
            before = tree_size(ice.path)
            t0 = time.perf_counter()
            for k in range(n):
                ice.edit_commit(int(pos[k]), SENTINEL + k, "edit")
            took = time.perf_counter() - t0
            after = tree_size(ice.path)
            res["icechunk"] = {"before": before, "after": after,
                               "growth": after[0] / before[0] - 1,
                               "growth_allocated": after[1] / before[1] - 1,
                               "per_commit_s": took / n}
            shutil.rmtree(ice.path)
            res["ratio_per_commit"] = res["icechunk"]["per_commit_s"] / \
                res["carray"]["per_commit_s"]
        out["rounds"].append(res)
        print(f"  edits round {r}: " + "; ".join(
            f"{lib}: {v['before'][0]} -> {v['after'][0]} bytes ({v['growth'] * 100:+.1f}%, "
            f"allocated {v['growth_allocated'] * 100:+.1f}%), "
            f"{v['per_commit_s'] * 1e3:.2f} ms a commit"
            for lib, v in res.items() if isinstance(v, dict)), flush=True)
    for lib in ("carray", "icechunk") if icechunk else ("carray",):
        out[lib] = {key: stats([r[lib][key] for r in out["rounds"]])
                    for key in ("growth", "growth_allocated", "per_commit_s")}
        out[lib]["before"] = out["rounds"][0][lib]["before"]
        out[lib]["after"] = out["rounds"][0][lib]["after"]
    if icechunk:
        out["ratio_per_commit"] = stats([r["ratio_per_commit"] for r in out["rounds"]])
    return out


def loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, to try the script")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-icechunk", action="store_true", help="carray alone")
    p.add_argument("--no-s3", action="store_true", help="writers and rebase without S3")
    p.add_argument("--cases", default=",".join(CASES),
                   help=f"comma-separated, of {','.join(CASES)}")
    p.add_argument("--out", default="versions", help="results file name (no suffix)")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    q = args.quick
    params = {"rounds": args.rounds,
              "commits": 100 if q else 1000, "commit_chunklen": 4096,
              "big_nchunks": 10_000 if q else 100_000, "big_chunklen": 16,
              "one_chunk_edits": 8 if q else 20,
              "history": 500 if q else 10_000, "history_nchunks": 256,
              "history_chunklen": 4096, "open_inner": 5, "read_inner": 5,
              "edits": 100 if q else 1000, "edits_nchunks": 256, "edits_chunklen": 4096,
              "writers": 4, "writer_commits": 10 if q else 50, "writer_rows": 4096,
              "rebase_inner": 5 if q else 20, "rebase_rows": 4096}
    icechunk = not args.no_icechunk
    os.environ.setdefault("ICECHUNK_LOG", "error")
    if icechunk:
        import icechunk as ic

        ic.set_logs_filter("error")
    ca.set_nthreads(2)
    RESULTS.mkdir(parents=True, exist_ok=True)
    load_start = loadavg()
    res: dict = {"params": params}
    cases = set(args.cases.split(","))
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")))
        s3 = log = None
        if cases & {"writers", "rebase"} and not args.no_s3:
            from carray.testing import s3_server

            # moto's recorder counts requests (rebase case) into this file.
            os.environ["MOTO_RECORDER_FILEPATH"] = os.path.join(tmp, "moto-requests.jsonl")
            s3 = stack.enter_context(s3_server(process=True))
            log = RequestLog(s3.endpoint_url, os.environ["MOTO_RECORDER_FILEPATH"])
        if "commits" in cases:
            res["commits"] = case_commits(tmp, args.rounds, params["commits"],
                                          params["commit_chunklen"])
        if "one_chunk" in cases:
            res["one_chunk"] = case_one_chunk(tmp, args.rounds, params["big_nchunks"],
                                              params["big_chunklen"],
                                              params["one_chunk_edits"], icechunk)
            shutil.rmtree(os.path.join(tmp, "big_ca"), ignore_errors=True)
            shutil.rmtree(os.path.join(tmp, "big_ic"), ignore_errors=True)
        if cases & {"open", "time_travel"}:
            hist = build_history(tmp, params["history_nchunks"], params["history_chunklen"],
                                 params["history"], icechunk)
            res["history"] = {"edits": params["history"], "build_s": hist["build_s"],
                              "commit_at_end_s": {"carray": hist["ca_commit_at_end_s"]}}
            if icechunk:
                res["history"]["commit_at_end_s"]["icechunk"] = hist["ic_commit_at_end_s"]
            if "open" in cases:
                res["open"] = case_open(hist, args.rounds, params["open_inner"], icechunk)
            if "time_travel" in cases:
                res["time_travel"] = case_time_travel(hist, args.rounds,
                                                      params["read_inner"], icechunk)
            hist.clear()
            shutil.rmtree(os.path.join(tmp, "hist_ca"), ignore_errors=True)
            shutil.rmtree(os.path.join(tmp, "hist_ic"), ignore_errors=True)
        if "edits" in cases:
            res["edits"] = case_edits(tmp, args.rounds, params["edits_nchunks"],
                                      params["edits_chunklen"], params["edits"], icechunk)
        if "writers" in cases:
            res["writers"] = case_writers(tmp, s3, args.rounds, params["writers"],
                                          params["writer_commits"], params["writer_rows"],
                                          icechunk)
        if "rebase" in cases:
            res["rebase"] = case_rebase(s3, args.rounds, params["rebase_rows"],
                                        params["rebase_inner"], icechunk, log)
    res["targets"] = targets(res)
    import zarr

    res["versions"] = {"carray": ca.__version__, "numpy": np.__version__,
                       "zarr": zarr.__version__}
    if icechunk:
        res["versions"]["icechunk"] = ic.__version__
    if s3 is not None:
        from importlib.metadata import version

        res["versions"]["moto"] = version("moto")
    res["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                      "platform": platform.platform(), "load_start": load_start,
                      "load_end": loadavg()}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(res, indent=1, default=str))
    text = report(res)
    (RESULTS / f"{args.out}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
