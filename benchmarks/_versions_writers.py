"""Writers in several processes, and the cost of a rebase: the cases ``writers`` and
``rebase`` of ``bench_versions.py``.

``writers``: N processes commit to one dataset at once, locally and on an S3 endpoint
(moto on 127.0.0.1, its own process), and the figure is commits a second (every
process's commits over the wall time from the common start to the last one's end).

* carray: every commit appends ``rows`` rows (one chunk) to one 1-d array.  Locally a
  writer opens the array, appends, commits and closes for each commit, the writers
  taking turns through the dataset's lock (what a user does when several processes
  add to one array); with the default ``fsync=True`` and with ``fsync=False``.  On S3
  a writer holds its handle and commits repeatedly; nothing is locked and a writer
  that loses the race to publish a version rebases (its rows go after the winner's).
* icechunk: concurrent appends that resize one zarr array conflict in its model
  (see :func:`icechunk_append_conflict`), so its writers do what its users do to
  ingest in parallel: the array is made at its final size up front, and every commit
  is a writable session that writes one chunk-sized region of its own and commits
  with ``rebase_with=icechunk.ConflictDetector()`` (the repository opened once per
  process).

``rebase``: two handles on one array in one process; the commit of one of them when
the other committed first (one rebase), against the same commit when nothing raced
it, for an append and for an edit of another chunk; on ``memory://`` and on S3.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid

import numpy as np

import carray as ca

_WRITER = r"""
import fcntl, json, os, sys, time
import numpy as np

cfg = json.loads(sys.argv[1])
me, n, rows, url = cfg["me"], cfg["commits"], cfg["rows"], cfg["url"]
blocks = [np.arange(rows, dtype="i8") + (me * n + i) * rows for i in range(n)]
conflicts = 0
if cfg["lib"] == "carray":
    import carray as ca
    from carray.engine.core import ArrayEngine
    from carray.errors import ConflictError

    rebases = 0
    rebase = ArrayEngine.rebase

    def counted(self, newer):  # how often a commit found its seq taken
        global rebases
        rebases += 1
        return rebase(self, newer)

    ArrayEngine.rebase = counted
    kw = {"mode": "a", "storage": {"lock_timeout": 600}}
    if cfg["options"]:
        kw["storage_options"] = cfg["options"]
    else:
        kw["fsync"] = cfg["fsync"]
    # Held from before the start where nothing is locked; locally, opened in the first
    # commit (the lock is then held until the last).
    held = ca.open(url, **kw) if cfg["hold"] and cfg["options"] else None

    def commit(i):
        global conflicts, held
        if held is None and cfg["hold"]:
            held = ca.open(url, **kw)
        c = held if held is not None else ca.open(url, **kw)
        c.append(blocks[i])
        while True:
            try:
                c.commit()
                break
            except ConflictError:
                conflicts += 1
                c.refresh()
        if held is None:
            c.close()
else:
    import icechunk, zarr

    icechunk.set_logs_filter("error")
    storage = (icechunk.s3_storage(**cfg["s3"]) if cfg["s3"]
               else icechunk.local_filesystem_storage(url))
    repo = icechunk.Repository.open(storage)
    solver = icechunk.ConflictDetector()
    turns = open(cfg["turns"], "rb") if cfg["turns"] else None

    def commit(i):
        k = me * n + i
        if turns is not None:
            fcntl.flock(turns, fcntl.LOCK_EX)
        session = repo.writable_session("main")
        z = zarr.open_array(session.store, path="a", mode="r+")
        z[k * rows:(k + 1) * rows] = blocks[i]
        session.commit(f"writer {me}: chunk {k}", rebase_with=solver)
        if turns is not None:
            fcntl.flock(turns, fcntl.LOCK_UN)

print("ready", flush=True)
sys.stdin.readline()
start = time.monotonic()
for i in range(n):
    commit(i)
end = time.monotonic()
if cfg["lib"] == "carray" and held is not None:
    held.close()
print(json.dumps({"start": start, "end": end, "conflicts": conflicts,
                  "rebases": rebases if cfg["lib"] == "carray" else None}), flush=True)
"""


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": list(values)}


def new_bucket(s3, name: str) -> str:
    """A new, empty bucket on ``s3`` for one dataset: moto's listings look at every key of
    a bucket, so datasets made before would slow the listings of the next."""
    import s3fs

    bucket = f"{name}-{uuid.uuid4().hex[:8]}"
    s3fs.S3FileSystem(**s3.storage_options).mkdir(bucket)
    return bucket


def ice_s3(s3, bucket: str) -> dict:
    """The keyword arguments of ``icechunk.s3_storage`` reaching ``bucket`` on ``s3``."""
    opts = s3.storage_options
    return {"bucket": bucket, "prefix": "repo", "endpoint_url": s3.endpoint_url,
            "allow_http": True, "force_path_style": True,
            "region": opts["client_kwargs"]["region_name"],
            "access_key_id": opts["key"], "secret_access_key": opts["secret"]}


def ice_storage(path: str, s3_kwargs: dict | None):
    import icechunk

    if s3_kwargs:
        return icechunk.s3_storage(**s3_kwargs)
    return icechunk.local_filesystem_storage(path)


def run_writers(configs: list[dict]) -> dict:
    """Start one process per config, let them go at once, and time them."""
    env = dict(os.environ, ICECHUNK_LOG="error")
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, json.dumps(cfg)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for cfg in configs]
    try:
        for p in procs:  # each imported its library and opened what it holds
            if p.stdout is None or p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a writer did not start: {p.communicate()[1][-3000:]}")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            stdout, stderr = p.communicate(timeout=1800)
            if p.returncode:
                raise RuntimeError(f"a writer failed: {stderr[-3000:]}")
            outs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    commits = sum(cfg["commits"] for cfg in configs)
    return {"wall_s": wall, "commits": commits, "commits_per_s": commits / wall,
            "conflicts": sum(o["conflicts"] for o in outs),
            "rebases": None if outs[0]["rebases"] is None else sum(o["rebases"] for o in outs)}


def _check_blocks(values: np.ndarray, total: int, rows: int, who: str) -> None:
    """Every writer's block is there once, whole, in one piece."""
    if len(values) != total * rows:
        raise AssertionError(f"{who}: {len(values)} rows, expected {total * rows}")
    blocks = values.reshape(total, rows)
    if not (np.diff(blocks, axis=1) == 1).all() or (blocks[:, 0] % rows).any():
        raise AssertionError(f"{who}: a block was split or changed")
    if sorted((blocks[:, 0] // rows).tolist()) != list(range(total)):
        raise AssertionError(f"{who}: blocks lost or repeated")


def writers_carray(url: str, options: dict | None, writers: int, commits: int, rows: int,
                   fsync: bool = True, hold: bool = False) -> dict:
    """carray's writers (see the module doc); ``hold``: each keeps one handle for all its
    commits (locally: holding the lock from its first commit to its last)."""
    ca.carray(np.zeros(0, dtype="i8"), chunklen=rows, rootdir=url, mode="w",
              storage_options=options).close()
    configs = [{"lib": "carray", "url": url, "options": options, "me": me, "commits": commits,
                "rows": rows, "fsync": fsync, "hold": hold}
               for me in range(writers)]
    out = run_writers(configs)
    a = ca.open(url, mode="r", storage_options=options)
    _check_blocks(a[:], writers * commits, rows, f"carray {url}")
    out["versions_kept"] = len(a.versions())
    a.close()
    return out


def writers_icechunk(path: str, s3_kwargs: dict | None, writers: int, commits: int,
                     rows: int, turns: bool = False) -> dict:
    """icechunk's writers (see the module doc); with ``turns`` they take turns through an
    ``flock`` of a file beside the repository, held from session to commit."""
    import icechunk
    import zarr

    repo = icechunk.Repository.create(ice_storage(path, s3_kwargs))
    session = repo.writable_session("main")
    total = writers * commits
    zarr.create_array(session.store, name="a", shape=(total * rows,), dtype="i8",
                      chunks=(rows,), fill_value=-1)
    session.commit("create")
    lock = ""
    if turns:
        lock = path.rstrip("/") + ".turns"
        open(lock, "wb").close()
    configs = [{"lib": "icechunk", "url": path, "s3": s3_kwargs, "me": me, "commits": commits,
                "rows": rows, "turns": lock} for me in range(writers)]
    out = run_writers(configs)
    z = zarr.open_array(repo.readonly_session(branch="main").store, path="a", mode="r")
    values = z[:]
    if not (values == np.arange(total * rows)).all():
        raise AssertionError(f"icechunk {path}: {(values == -1).sum()} rows never written")
    # Every commit is a snapshot of main (and the repository's first and "create").
    out["snapshots"] = len(list(repo.ancestry(branch="main")))
    if out["snapshots"] != total + 2:
        raise AssertionError(f"icechunk {path}: {out['snapshots']} snapshots, expected "
                             f"{total + 2}")
    return out


def first_line(exc: BaseException) -> str:
    """The line of an exception that says what went wrong (a writer's last error)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    said = [ln for ln in lines if "error" in ln.lower() and not ln.startswith("File ")]
    return (said[-1] if said else lines[-1] if lines else type(exc).__name__)[:300]


def case_writers(tmp: str, s3, rounds: int, writers: int, commits: int, rows: int,
                 icechunk: bool) -> dict:
    """``writers`` processes x ``commits`` commits of ``rows`` rows, locally and on S3."""
    out: dict = {"writers": writers, "commits_per_writer": commits, "rows": rows,
                 "rounds": []}
    if icechunk:
        out["icechunk_append_conflict"] = icechunk_append_conflict()
    for r in range(rounds):
        res: dict = {}
        for key, fsync, hold in (("fsync", True, False), ("nofsync", False, False),
                                 ("held", True, True)):
            path = os.path.join(tmp, f"writers_ca_{key}")
            res[f"local_carray_{key}"] = writers_carray(path, None, writers, commits, rows,
                                                        fsync=fsync, hold=hold)
            shutil.rmtree(path)
        if icechunk:
            path = os.path.join(tmp, "writers_ic")
            try:  # its local storage is not safe for concurrent commits: try and say
                writers_icechunk(path, None, writers, commits, rows)
                out.setdefault("local_icechunk_unlocked", []).append("ok")
            except (RuntimeError, AssertionError) as exc:
                out.setdefault("local_icechunk_unlocked", []).append(first_line(exc))
            shutil.rmtree(path, ignore_errors=True)
            res["local_icechunk"] = writers_icechunk(path, None, writers, commits, rows,
                                                     turns=True)
            shutil.rmtree(path)
            os.remove(path + ".turns")
        if s3 is not None:
            res["s3_carray"] = writers_carray(f"s3://{new_bucket(s3, 'writers')}/array",
                                              s3.storage_options, writers, commits, rows,
                                              hold=True)
            if icechunk:
                res["s3_icechunk"] = writers_icechunk(
                    "", ice_s3(s3, new_bucket(s3, "writers-ic")), writers, commits, rows)
        for where in ("local", "s3"):
            if f"{where}_icechunk" not in res:
                continue
            ic = res[f"{where}_icechunk"]["commits_per_s"]
            for key in [k for k in res if k.startswith(f"{where}_carray")]:
                res[f"ratio_{key}"] = res[key]["commits_per_s"] / ic
        out["rounds"].append(res)
        print(f"  writers round {r}: " + "; ".join(
            f"{k}: {v['commits_per_s']:.0f} commits/s ({v['wall_s']:.2f} s)"
            if isinstance(v, dict) else f"{k}={v:.2f}" for k, v in res.items()), flush=True)
    for key, v in out["rounds"][0].items():
        if isinstance(v, dict):
            out[key] = {m: stats([r[key][m] for r in out["rounds"]])
                        for m in ("commits_per_s", "wall_s", "conflicts", "rebases")
                        if v[m] is not None}
        else:
            out[key] = stats([r[key] for r in out["rounds"]])
    return out


def icechunk_append_conflict() -> str:
    """What icechunk says when two sessions append to one array and both commit with its
    most forgiving solver (the reason its writers write disjoint regions instead)."""
    import icechunk
    import zarr

    repo = icechunk.Repository.create(icechunk.in_memory_storage())
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="a", shape=(0,), dtype="i8", chunks=(4,))
    session.commit("create")
    first, second = repo.writable_session("main"), repo.writable_session("main")
    for s in (first, second):
        zarr.open_array(s.store, path="a", mode="r+").append(np.arange(4))
    first.commit("first")
    try:
        second.commit("second", rebase_with=icechunk.BasicConflictSolver())
    except (icechunk.ConflictError, icechunk.RebaseFailedError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return "no conflict: both appends committed"


# -- the cost of a rebase ---------------------------------------------------------------------

REBASE_KINDS = ("append_alone", "append_rebase", "edit_alone", "edit_rebase")


def _change(handle, kind: str, chunk: int, rows: int, value: int) -> None:
    if kind == "append":
        handle.append(np.full(rows, value, dtype="i8"))
    else:  # one element of a chunk of this handle's own
        handle[chunk * rows + 7] = value


class RequestLog:
    """The requests a moto server received while in the ``with`` block, by kind.

    It uses moto's recorder, which appends every request to the file named by
    ``MOTO_RECORDER_FILEPATH`` in the server's environment (set before the server
    starts); recording slows the server, so only untimed work is counted.
    """

    def __init__(self, endpoint_url: str, path: str) -> None:
        self.endpoint_url, self.path = endpoint_url, path
        self.counts: dict[str, int] = {}

    def _post(self, what: str) -> None:
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/recorder/{what}",
                                         method="POST", data=b"")
        urllib.request.urlopen(request, timeout=30).read()

    def __enter__(self) -> RequestLog:
        self._post("reset-recording")
        self._post("start-recording")
        return self

    def __exit__(self, *exc) -> None:
        self._post("stop-recording")
        counts: dict[str, int] = {}
        with open(self.path) as f:
            for line in f:
                entry = json.loads(line)
                kind = "LIST" if "list-type=" in entry["url"] else entry["method"]
                counts[kind] = counts.get(kind, 0) + 1
        counts["total"] = sum(counts.values())
        self.counts = counts


def _carray_trial(a, b, key: str, rows: int, value: int, log: RequestLog | None) -> float:
    """Handle ``b`` commits a change, then ``a`` one of the same kind: the time of
    ``a.commit()``; ``log`` counts the requests of ``a``'s change and commit."""
    kind, race = key.split("_")
    b.refresh()
    _change(b, kind, 0, rows, value)
    b.commit()
    if race == "alone":
        a.refresh()
    with log or contextlib.nullcontext():
        _change(a, kind, 1, rows, value + 1)
        t0 = time.perf_counter()
        a.commit()
        took = time.perf_counter() - t0
    return took


def rebase_carray(url: str, options: dict | None, rows: int, inner: int,
                  log: RequestLog | None = None) -> dict:
    """Median time of ``commit()`` of handle ``a`` in each of :data:`REBASE_KINDS`.

    In every trial handle ``b`` commits a change of the same kind first (to chunk 0 for
    an edit); "alone": ``a`` then moves to the newest version (``refresh``) before its
    change, so its commit takes the next seq; "rebase": it does not, so its commit
    finds that seq taken and rebases once onto ``b``'s version.  With ``log``, one
    more trial of each kind counts the requests.
    """
    ca.carray(np.arange(8 * rows, dtype="i8"), chunklen=rows, rootdir=url, mode="w",
              storage_options=options).close()
    a = ca.open(url, mode="a", storage_options=options)
    b = ca.open(url, mode="a", storage_options=options)
    times: dict[str, list[float]] = {k: [] for k in REBASE_KINDS}
    out: dict = {}
    value = 10**9
    for trial in range(inner + (log is not None)):
        for key in REBASE_KINDS:
            value += 2
            if trial < inner:
                times[key].append(_carray_trial(a, b, key, rows, value, None))
            else:
                assert log is not None
                _carray_trial(a, b, key, rows, value, log)
                out[f"{key}_requests"] = log.counts
    length, last_a, last_b = len(a), int(a[rows + 7]), int(a[7])
    a.close()
    b.close()
    check = ca.open(url, mode="r", storage_options=options)
    trials = inner + (log is not None)
    expect = 8 * rows + 4 * trials * rows  # 2 appends of a row block by each handle a trial
    got = (len(check), int(check[rows + 7]), int(check[7]))
    if got != (expect, last_a, last_b) or length != expect:
        raise AssertionError(f"carray rebase {url}: {got}, expected {expect} rows")
    check.close()
    out.update({k: statistics.median(v) for k, v in times.items()})
    return out


def rebase_icechunk(s3_kwargs: dict | None, rows: int, inner: int,
                    log: RequestLog | None = None) -> dict:
    """icechunk's commit of an edit of one chunk with and without another session's
    commit (of another chunk) first, ``rebase_with=ConflictDetector()`` (appends to one
    array do not rebase there); with ``log``, one more trial counts the requests of
    the edit and the commit (the session is made before)."""
    import icechunk
    import zarr

    storage = icechunk.s3_storage(**s3_kwargs) if s3_kwargs else \
        icechunk.in_memory_storage()
    repo = icechunk.Repository.create(storage)
    session = repo.writable_session("main")
    z = zarr.create_array(session.store, name="a", shape=(8 * rows,), dtype="i8",
                          chunks=(rows,))
    z[:] = np.arange(8 * rows)
    session.commit("create")
    solver = icechunk.ConflictDetector()
    times: dict[str, list[float]] = {"edit_alone": [], "edit_rebase": []}
    out: dict = {}
    value = 10**9
    for trial in range(inner + (log is not None)):
        for key in list(times):
            value += 2
            mine = None if key == "edit_alone" else repo.writable_session("main")
            other = repo.writable_session("main")
            zarr.open_array(other.store, path="a", mode="r+")[7] = value
            other.commit("other")
            mine = mine or repo.writable_session("main")
            counting = log if trial == inner else None
            with counting or contextlib.nullcontext():
                zarr.open_array(mine.store, path="a", mode="r+")[rows + 7] = value + 1
                t0 = time.perf_counter()
                mine.commit("mine", rebase_with=solver)
                took = time.perf_counter() - t0
            if counting is not None:
                out[f"{key}_requests"] = counting.counts
            else:
                times[key].append(took)
    z = zarr.open_array(repo.readonly_session(branch="main").store, path="a", mode="r")
    if (int(z[7]), int(z[rows + 7])) != (value, value + 1):
        raise AssertionError("icechunk rebase: an edit was lost")
    out.update({k: statistics.median(v) for k, v in times.items()})
    return out


def case_rebase(s3, rounds: int, rows: int, inner: int, icechunk: bool,
                log: RequestLog | None = None) -> dict:
    """:func:`rebase_carray` (and icechunk's edit) on ``memory://`` and on S3; the
    requests of each kind of commit on S3 counted once (first round) with ``log``."""
    out: dict = {"rows": rows, "inner": inner, "rounds": [], "requests": {}}
    for r in range(rounds):
        res: dict = {}
        tag = uuid.uuid4().hex[:8]
        stores = [("memory", f"memory://rebase-{tag}", None)]
        if s3 is not None:
            stores.append(("s3", f"s3://{new_bucket(s3, 'rebase')}/array", s3.storage_options))
        for where, url, options in stores:
            counting = log if where == "s3" and r == 0 else None
            res[f"{where}_carray"] = rebase_carray(url, options, rows, inner, counting)
            if where == "memory":  # its listings look at every key it holds
                import fsspec

                fsspec.filesystem("memory").rm(url, recursive=True)
            if icechunk:
                res[f"{where}_icechunk"] = rebase_icechunk(
                    ice_s3(s3, new_bucket(s3, "rebase-ic")) if where == "s3" else None, rows, inner,
                    counting)
        for lib, t in res.items():
            for key in [k for k in t if k.endswith("_requests")]:
                out["requests"].setdefault(lib, {})[key[:-len("_requests")]] = t.pop(key)
        out["rounds"].append(res)
        print(f"  rebase round {r}: " + "; ".join(
            f"{lib}: " + " ".join(f"{k}={v * 1e3:.2f}ms" for k, v in t.items())
            for lib, t in res.items()), flush=True)
    for lib, t in out["rounds"][0].items():
        out[lib] = {k: stats([r[lib][k] for r in out["rounds"]]) for k in t}
        for kind in ("append", "edit"):
            if f"{kind}_rebase" in t:
                out[lib][f"{kind}_extra"] = stats([r[lib][f"{kind}_rebase"] -
                                                   r[lib][f"{kind}_alone"]
                                                   for r in out["rounds"]])
    if out["requests"]:
        print("  requests of a change + commit on S3: " + json.dumps(out["requests"]),
              flush=True)
    return out
