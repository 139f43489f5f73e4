"""Readers in other processes while a writer process commits.

* A reader that holds a version reads exactly the same values on every read while a
  writer makes ``COMMITS`` commits (appends, edits, shrinks and, for a table, added and
  dropped columns), with no error and no retry (a read that meets a changed file and
  reads again counts as one).
* Writers appending and flushing, readers reopening again and again and keeping
  handles open for a while: no reader ever meets an error.  A handle of a superchunk
  array or a table keeps showing the version it opened; a ``.b2nd`` frame promises old
  or new values, so its readers only check that every value read is one the writer
  wrote there.

CI makes 100 commits and runs the readers 1.5 s; ``CARRAY_SOAK=1`` makes 1,000 and runs
them 60 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import carray as ca
from carray.cli.verify import verify_path

SOAK = os.environ.get("CARRAY_SOAK") == "1"
COMMITS = 1000 if SOAK else 100
SECONDS = 60.0 if SOAK else 1.5
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def _python(function: str, *args: object, **popen) -> subprocess.Popen:
    """A process running ``function(*args)`` of this module."""
    code = (f"import sys; sys.path.insert(0, {TESTS_DIR!r}); import test_reader_holds as m; "
            f"m.{function}(*sys.argv[1:])")
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], text=True,
                            **popen)


def _strings(v: np.ndarray) -> np.ndarray:
    return np.array([f"s{'x' * (int(k) % 4)}{k}" for k in v], dtype=object)


# -- a reader holding one version ------------------------------------------------------------

def _retries() -> list[int]:
    """Count, in this process, every read that starts again: an array reopened after a
    file changed under it, a table's view loaded again, a version found dropped while
    being opened."""
    from carray.array.array import carray
    from carray.table.bcolz import refresh as _table_refresh
    from carray.versions.repo import Repository

    count = [0]
    reopen, load, hold = carray.reopen, _table_refresh.TableReader.load, Repository.hold

    def counted_reopen(self):
        count[0] += 1
        return reopen(self)

    def counted_load(self):
        count[0] += 1
        return load(self)

    def counted_hold(self, manifest):
        got = hold(self, manifest)
        count[0] += got is None
        return got

    carray.reopen = counted_reopen
    _table_refresh.TableReader.load = counted_load
    Repository.hold = counted_hold
    return count


def _digest(obj) -> str:
    """Everything a reader may ask of an array or a table, as one string."""
    obj.free_cachemem()  # read the files, not what earlier reads kept
    h = hashlib.sha1()
    if isinstance(obj, ca.ctable):
        h.update(repr(obj.names).encode())
        rows = obj[:]
        for name in obj.names:
            col = obj.cols[name][:]
            assert len(col) == len(obj), f"column {name} has {len(col)} rows of {len(obj)}"
            assert (col == rows[name]).all(), f"column {name} reads unlike the rows"
            h.update(repr(col.tolist()).encode() if col.dtype == object else col.tobytes())
        h.update(repr([tuple(r) for r in obj.where("x >= 0", outcols=["x"])]).encode())
    else:
        values = obj[:]
        assert int(obj[len(obj) // 2]) == int(values[len(obj) // 2])
        h.update(values.tobytes())
    return f"{len(obj)}:{h.hexdigest()}"


def holder(root: str, stop: str) -> None:
    """Hold the newest version of ``root`` and read it until file ``stop`` exists; print
    the tally as JSON."""
    retries = _retries()
    r = ca.open(root, mode="r")
    want = _digest(r)
    print("ready", r.version, want, flush=True)
    tally = {"reads": 0, "changed": 0, "errors": 0, "first_error": None}
    while not os.path.exists(stop):
        try:
            got = _digest(r)
        except Exception as exc:  # noqa: BLE001 - counted, not hidden
            tally["errors"] += 1
            tally["first_error"] = tally["first_error"] or repr(exc)
            continue
        tally["reads"] += 1
        tally["changed"] += got != want
    tally["retries"] = retries[0]
    print(json.dumps(tally), flush=True)


def commit_many(root: str, kind: str, commits: str) -> None:
    """Commit ``commits`` changes of every kind to ``root``."""
    rng = np.random.default_rng(5)
    if kind == "array":
        a = ca.open(root, mode="a", fsync=False)
        for k in range(int(commits)):
            n, step = len(a), k % 4
            if step == 0:
                a.append(rng.integers(0, 1000, size=int(rng.integers(1, 2500))))
            elif step == 1:
                lo = int(rng.integers(0, n))
                a[lo:lo + int(rng.integers(1, 3000))] = -k
            elif step == 2:
                a[rng.integers(0, n, size=20)] = k
            else:
                a.resize(max(1000, n - int(rng.integers(0, 2000))))
            a.commit(f"change {k}")
        a.close()
        return
    t = ca.ctable(rootdir=root, mode="a", auto_flush=False, fsync=False)
    for k in range(int(commits)):
        n, step = len(t), k % 6
        if step == 0:
            v = rng.integers(0, 1000, size=int(rng.integers(1, 900)))
            t.append({name: (v * 3 if name == "z" else _strings(v) if name == "s" else v)
                      for name in t.names})
        elif step == 1:
            lo = int(rng.integers(0, n))
            t[lo:lo + int(rng.integers(1, 400))] = tuple(
                "edited" if name == "s" else -k for name in t.names)
        elif step == 2:
            name = t.names[int(rng.integers(0, len(t.names)))]
            t.cols[name][rng.integers(0, n, size=10)] = "col edit" if name == "s" else k
        elif step == 3:
            t.trim(int(rng.integers(0, max(1, min(n - 200, 600)))))
        elif step == 4 and "z" not in t.names:
            t.addcol(np.arange(len(t)) * 3, name="z")
        elif step == 4:
            t.delcol("z")
        else:
            t.resize(n + int(rng.integers(1, 200)))
        t.commit(f"change {k}")
    t.close()


def _create(root: str, kind: str) -> None:
    v = np.arange(3000)
    if kind == "array":
        ca.carray(v, chunklen=500, rootdir=root, mode="w").close()
    else:
        # z is dropped and added again while the reader holds the version that has it.
        ca.ctable({"x": v, "y": v * 0.5, "s": _strings(v), "z": v * 3}, chunklen=128,
                  rootdir=root, mode="w").close()


@pytest.mark.parametrize("kind", ["array", "table"])
def test_a_held_version_reads_the_same_through_many_commits(tmp_path, kind):
    root = str(tmp_path / kind)
    _create(root, kind)
    stop = str(tmp_path / "stop")
    reader = _python("holder", root, stop, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, held, want = (reader.stdout.readline().split() + ["", "", ""])[:3]
        assert ready == "ready", reader.stderr.read()
        writer = _python("commit_many", root, kind, COMMITS, stderr=subprocess.PIPE)
        _, err = writer.communicate(timeout=3000)
        assert writer.returncode == 0, err
        # Still held: another reader opening it now reads it as it was committed.
        again = ca.open(root, version=held)
        assert _digest(again) == want, "the held version, opened again, reads otherwise"
        again.close()
        open(stop, "w").close()
        out, err = reader.communicate(timeout=600)
    finally:
        reader.kill()
    tally = json.loads(out.strip().splitlines()[-1])
    if SOAK:
        print(f"\nheld reader, {kind}, {COMMITS} commits: {tally}")
    assert tally["reads"] > 0
    assert (tally["errors"], tally["changed"], tally["retries"]) == (0, 0, 0), tally
    problems, _ = verify_path(root)
    assert problems == []


# -- readers reopening while a writer appends ---------------------------------------------

def _path(tmp_path, kind: str) -> str:
    return str(tmp_path / ("d.b2nd" if kind == "b2nd" else "d"))


def _strings_of(v: np.ndarray) -> np.ndarray:
    """``f"s{x}"``, of variable length (an object column, not fixed-width)."""
    return np.array([f"s{k}" for k in v], dtype=object)


def append_for(root: str, kind: str, seconds: str) -> None:
    """Append ``x == position`` (a table: ``y == 2 * x``, ``s == f"s{x}"``) and flush,
    for ``seconds``."""
    rng = np.random.default_rng(3)
    obj = ca.ctable(rootdir=root, mode="a", auto_flush=False, fsync=False) \
        if kind == "table" else ca.open(root, mode="a", fsync=False)
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        n = len(obj)
        v = np.arange(n, n + int(rng.integers(1, 2500)))
        obj.append({"x": v, "y": v * 2.0, "s": _strings_of(v)} if kind == "table" else v)
        obj.flush()
    obj.close()


def _check_prefix(obj, kind: str) -> int:
    """Check every value read is the one the writer put there; the length read."""
    obj.free_cachemem()
    if kind == "table":
        rows = obj[:]
        x = rows["x"]
        assert (x == np.arange(len(x))).all(), "x is not its position"
        assert (rows["y"] == 2.0 * x).all(), "a row mixes appends"
        strings, want = rows["s"].tolist(), [f"s{k}" for k in x.tolist()]
        if strings != want:
            i = next(i for i, (a, b) in enumerate(zip(strings, want, strict=True)) if a != b)
            raise AssertionError(f"strings torn: row {i} of {len(x)} reads "
                                 f"{strings[i:i + 3]}, written {want[i:i + 3]}")
        return len(rows)
    values = obj[:]
    assert (values == np.arange(len(values))).all(), "a value is not its position"
    return len(values)


def reopening_reader(root: str, kind: str, seconds: str) -> None:
    """Open ``root`` again and again, keep the last few handles open and read them all,
    for ``seconds``; print the tally as JSON."""
    versioned = kind != "b2nd"
    held: list = []
    tally = {"opens": 0, "reads": 0, "errors": 0, "changed": 0, "first_error": None}
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        try:
            obj = ca.open(root, mode="r")
            held.append((obj, _check_prefix(obj, kind)))
            tally["opens"] += 1
            if len(held) > 5:
                held.pop(0)[0].close()
            for obj, length in held:
                got = _check_prefix(obj, kind)
                tally["reads"] += 1
                tally["changed"] += versioned and got != length
        except Exception as exc:  # noqa: BLE001 - counted, not hidden
            tally["errors"] += 1
            tally["first_error"] = tally["first_error"] or repr(exc)
    print(json.dumps(tally), flush=True)


@pytest.mark.parametrize("kind", ["superchunk", "table", "b2nd"])
def test_readers_reopening_while_a_writer_appends_meet_no_error(tmp_path, kind):
    root = _path(tmp_path, kind)
    v = np.arange(1000)
    if kind == "table":
        ca.ctable({"x": v, "y": v * 2.0, "s": _strings_of(v)}, rootdir=root,
                  chunklen=1000, mode="w").close()
    else:
        ca.carray(v, chunklen=1000, rootdir=root, mode="w").close()
    readers = [_python("reopening_reader", root, kind, SECONDS, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE) for _ in range(2)]
    writer = _python("append_for", root, kind, SECONDS, stderr=subprocess.PIPE)
    try:
        _, err = writer.communicate(timeout=SECONDS + 600)
        assert writer.returncode == 0, err
        tallies = []
        for r in readers:
            out, err = r.communicate(timeout=SECONDS + 600)
            assert r.returncode == 0, err
            tallies.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in (writer, *readers):
            p.kill()
    if SOAK:
        print(f"\nreopening readers, {kind}, {SECONDS:.0f} s: {tallies}")
    for tally in tallies:
        assert tally["opens"] > 0
        assert (tally["errors"], tally["changed"]) == (0, 0), tally
