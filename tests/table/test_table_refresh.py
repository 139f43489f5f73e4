"""A table opened read-only shows one whole committed state: right after a writer was
killed mid-change (reading through the undo record it left, writing nothing), and
after a writer of this process committed more (the view is built again)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import carray as ca
from carray.stores import LOCAL
from carray.table.bcolz.refresh import committed_view, open_columns
from carray.table.bcolz.undo import COMMITS_FILE, TXN_FILE, Record

N = 60
# Every kill point with CARRAY_SOAK=1; in CI every fourth column flush, every fifth rename.
EVERY = os.environ.get("CARRAY_SOAK") == "1"
STRIDE = {"flush": "4", "rename": "5"}


def _base(n: int = N, fmt: str | None = None) -> dict:
    """The table before the change; bcolz's text columns are fixed-width, so wide enough
    for every value a change writes (a longer one is refused, never cut)."""
    x = np.arange(n)
    text = object if fmt is None else "U16"
    return {"x": x, "y": x * 2.0, "s": np.array([f"s{k}" for k in x], dtype=text)}


def _values(t) -> dict:
    rec = t[:]
    return {name: rec[name].tolist() for name in t.names}


def _snapshot(root: str) -> dict:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


# -- the changes a writer is killed in, and the committed states each passes through ------

def _change(t, op: str) -> None:
    """One change (or two, the first not flushed) as the writer makes it."""
    if op == "setitem":  # several columns, several chunks
        t[5:45] = (-1, -2.0, "edited")
    elif op == "setitem-points":
        t[[2, 17, 33, 58]] = (-3, -6.0, "points")
    elif op == "append":
        t.append({"x": np.arange(100, 170), "y": np.arange(100, 170) * 2.0,
                  "s": [f"new{k}" for k in range(70)]})
    elif op == "trim":
        t.trim(37)
    elif op == "grow":
        t.resize(N + 45)
    elif op == "addcol":  # an edit not flushed yet, committed before the column is added
        t[0:20] = (-5, -10.0, "before addcol")
        t.addcol(np.arange(N) * 3, name="z")
    elif op == "delcol":
        t.append({"x": [7], "y": [14.0], "s": ["late"]})
        t.delcol("y")
    else:
        raise AssertionError(op)


OPS = ["setitem", "setitem-points", "append", "trim", "grow", "addcol", "delcol"]
# Changes that keep auto_flush off, so that a first change waits for the second.
UNFLUSHED = {"addcol", "delcol"}


def _states(op: str) -> list[dict]:
    """Every committed state the change passes through, in order (replayed in memory)."""
    t = ca.ctable(_base(), chunklen=16)
    states = [_values(t)]
    if op == "addcol":
        t[0:20] = (-5, -10.0, "before addcol")
        states.append(_values(t))
        t.addcol(np.arange(N) * 3, name="z")
    elif op == "delcol":
        t.append({"x": [7], "y": [14.0], "s": ["late"]})
        states.append(_values(t))
        t.delcol("y")
    else:
        _change(t, op)
    states.append(_values(t))
    return states


# Runs in its own process: for every kill point, a forked child opens the table, makes
# the change and is killed (SIGKILL) right after its ``at``-th column flush or file
# rename; the driver reports which copies were killed.
DRIVER = textwrap.dedent("""
    import json, os, shutil, signal, sys
    import carray as ca
    from carray.array.array import carray
    from test_table_refresh import _change
    pristine, work, op, hook, auto_flush, stride = sys.argv[1:7]
    killed = []
    for at in range(1, 400, int(stride)):
        root = os.path.join(work, f"k{at}")
        shutil.copytree(pristine, root)
        pid = os.fork()
        if pid == 0:
            count = [0]
            def after(func):
                def call(*args, **kwargs):
                    out = func(*args, **kwargs)
                    count[0] += 1
                    if count[0] == at:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return out
                return call
            try:
                t = ca.ctable(rootdir=root, mode="a", auto_flush=auto_flush == "1")
                if hook == "flush":
                    carray.flush = after(carray.flush)
                else:
                    os.replace = after(os.replace)
                    os.rename = after(os.rename)
                _change(t, op)
                t.flush()
            except BaseException:
                import traceback
                traceback.print_exc()
                sys.stderr.flush()
                os._exit(4)  # a forked child never runs the parent's exit handlers
            os._exit(3)  # finished before the kill point
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status):
            assert os.WEXITSTATUS(status) == 3, status
            shutil.rmtree(root)
            break
        assert os.WTERMSIG(status) == signal.SIGKILL, status
        killed.append(root)
    print(json.dumps(killed))
""")


def _killed_copies(tmp_path, op: str, hook: str, fmt: str | None) -> list[str]:
    pristine = str(tmp_path / "pristine")
    ca.ctable(_base(fmt=fmt), rootdir=pristine, chunklen=16, format=fmt).close()
    work = tmp_path / "work"
    work.mkdir()
    auto_flush = "0" if op in UNFLUSHED else "1"
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep +
           os.environ.get("PYTHONPATH", "")}
    stride = "1" if EVERY else STRIDE[hook]
    out = subprocess.run([sys.executable, "-c", DRIVER, pristine, str(work), op, hook,
                          auto_flush, stride], check=True, capture_output=True, text=True,
                         env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check_reader(t) -> dict:
    """Everything a reader may ask, all of one state; that state."""
    n = len(t)
    got = _values(t)
    for name in t.names:
        assert len(got[name]) == n
        assert t[name][:].tolist()[:n] == got[name]  # the column itself, as shown
        assert len(t[name]) == n
    assert [tuple(r) for r in t.iter()] == list(zip(*got.values(), strict=True))
    assert len(list(t.where("x >= -10"))) == n
    assert sum(len(b) for b in t.iterblocks(7)) == n
    return got


@pytest.mark.parametrize("fmt", [None, "bcolz"])
@pytest.mark.parametrize("op", OPS)
def test_a_reader_after_a_kill_sees_the_last_commit(tmp_path, op, fmt):
    states = _states(op)
    copies = _killed_copies(tmp_path, op, "flush", fmt)
    assert copies, "the change made no column flush"
    with_record = 0
    for root in copies:
        recorded = os.path.exists(os.path.join(root, TXN_FILE))
        before = _snapshot(root)
        ro = ca.ctable(rootdir=root, mode="r")
        got = _check_reader(ro)
        ro.close()
        del ro
        assert _snapshot(root) == before, f"{root}: mode 'r' wrote"
        assert got in states, f"{root}: not a committed state"
        if recorded:
            with_record += 1
            if op != "trim":  # a shrink is finished, never undone
                assert got != states[-1], f"{root}: the unfinished change shows"
        rw = ca.ctable(rootdir=root, mode="a")  # recovers
        assert _values(rw) == got, f"{root}: the reader and the recovery disagree"
        rw.close()
        assert not os.path.exists(os.path.join(root, TXN_FILE))
    # A bcolz table makes a change whole with an undo record; a versioned one publishes
    # each change in one step, so a kill leaves no record to read through.
    assert bool(with_record) == (fmt == "bcolz"), "undo records where there should be none"


@pytest.mark.parametrize("op", ["setitem", "trim", "addcol"])
def test_a_reader_after_a_kill_at_any_rename_sees_the_last_commit(tmp_path, op):
    states = _states(op)
    copies = _killed_copies(tmp_path, op, "rename", None)
    assert copies  # a versioned table renames few files: its commit is one rename
    for root in copies:
        before = _snapshot(root)
        ro = ca.ctable(rootdir=root, mode="r")
        got = _check_reader(ro)
        del ro
        assert _snapshot(root) == before
        assert got in states
        rw = ca.ctable(rootdir=root, mode="a")
        assert _values(rw) == got
        rw.close()


# -- in one process: a reader of a bcolz table follows a writer's commits --------------------
# (a reader of a versioned table holds its version until refresh(): tests/versions/test_versions.py)

def test_a_reader_follows_commits(tmp_path):
    root = str(tmp_path / "t")
    w = ca.ctable(_base(fmt="bcolz"), rootdir=root, chunklen=16, format="bcolz")
    r = ca.ctable(rootdir=root, mode="r")
    x_col = r["x"]
    assert len(r) == N
    w.append({"x": [100], "y": [200.0], "s": ["hundred"]})
    assert len(r) == N + 1 and r[-1].tolist() == (100, 200.0, "hundred")
    assert r["x"][:].tolist() == list(range(N)) + [100]
    w[0:3] = (-1, -2.0, "e")
    assert r[0:4]["s"].tolist() == ["e", "e", "e", "s3"]
    assert r.fetchwhere("x < 0", outcols="y").tolist() == [(-2.0,)] * 3
    assert [row.x for row in r.where("x < 0")] == [-1, -1, -1]
    np.testing.assert_array_equal(r.eval("y - 2 * x")[:], np.zeros(N + 1))
    w.trim(10)
    assert len(r) == N - 9 and len(list(r)) == N - 9
    w.addcol(w["x"][:] * 3, name="z")
    assert r.names == ["x", "y", "s", "z"] and r[5]["z"] == 15
    w.delcol("y")
    assert r.names == ["x", "s", "z"] and r[:]["z"].tolist() == [3 * v for v in r[:]["x"]]
    assert x_col[:3].tolist() == [-1, -1, -1]  # a column taken earlier still reads
    w.close()


def test_iteration_continues_across_commits(tmp_path):
    root = str(tmp_path / "t")
    w = ca.ctable(_base(fmt="bcolz"), rootdir=root, chunklen=16, format="bcolz")
    r = ca.ctable(rootdir=root, mode="r")
    rows = r.iter()
    first = [next(rows) for _ in range(5)]
    new = np.empty(N, dtype=w.dtype)
    new["x"], new["y"], new["s"] = np.arange(N) + 1000, (np.arange(N) + 1000) * 2.0, "w"
    w[:] = new
    rest = list(rows)
    assert [row.x for row in first] == [0, 1, 2, 3, 4]
    assert all(row.y == 2 * row.x for row in first + rest)
    assert len(first) + len(rest) == N
    assert {row.s for row in rest} <= {"w"} | {f"s{k}" for k in range(N)}
    w.close()


def test_a_reader_follows_a_change_that_goes_on_without_reopening(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable(_base(fmt="bcolz"), rootdir=root, chunklen=16, format="bcolz").close()
    w = ca.ctable(rootdir=root, mode="a", auto_flush=False)
    w[0:5] = (-1, -2.0, "a")  # recorded, then written to every column, not committed
    for name in w.names:
        w.cols[name].flush()
    r = ca.ctable(rootdir=root, mode="r")
    assert r[0:6]["x"].tolist() == [0, 1, 2, 3, 4, 5]  # read through the record
    held = r.cols["x"]
    assert held.rootdir is None  # the column with its old values put back, in memory
    w[10:12] = (-3, -6.0, "b")  # the same change goes on
    for name in w.names:
        w.cols[name].flush()
    assert r[9:13]["x"].tolist() == [9, 10, 11, 12]
    assert r.cols["x"] is held  # its new edit put back in memory: nothing reopened
    assert r[:].tolist() == ca.ctable(_base())[:].tolist()
    w.flush()  # the change commits: the reader moves to the new state
    assert r[0]["x"] == -1 and r[10]["s"] == "b" and r.cols["x"] is not held
    w.close()


def test_a_read_overlapping_a_commit_is_read_again(tmp_path):
    root = str(tmp_path / "t")
    w = ca.ctable(_base(fmt="bcolz"), rootdir=root, chunklen=16, format="bcolz")
    r = ca.ctable(rootdir=root, mode="r")
    calls = []

    def read():
        calls.append(len(r.read_column("x", range(3))))
        if len(calls) == 1:  # a writer commits while this read runs
            w[0:3] = (9, 18.0, "nine")
        return r[0:3]

    got = r.read_committed(read)
    assert len(calls) == 2 and got["x"].tolist() == [9, 9, 9]
    w.close()


def test_a_reader_errors_of_its_own_are_not_retried(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable(_base(), rootdir=root).close()
    r = ca.ctable(rootdir=root, mode="r")
    with pytest.raises(IndexError):
        r[N + 5]
    with pytest.raises(KeyError):
        r.where("x > 1", outcols=["nope"])


def test_the_writer_counts_commits(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable(_base(fmt="bcolz"), rootdir=root, format="bcolz")

    def count() -> int:
        with open(os.path.join(root, COMMITS_FILE), "rb") as f:
            return int(f.read())

    before = count()
    t.append({"x": [1], "y": [2.0], "s": ["a"]})
    after_append = count()
    assert after_append >= before + 2  # raised when the record is saved and committed
    t.addcol(np.zeros(N + 1), name="z")
    assert count() == after_append + 1
    t.close()


# -- reading through a record, in memory --------------------------------------------------

def test_committed_view_puts_old_values_back_in_memory(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable(_base(fmt="bcolz"), rootdir=root, chunklen=16, format="bcolz")
    t.append({"x": [1, 2], "y": [2.0, 4.0], "s": ["a", "b"]})
    t.close()
    cols = open_columns(LOCAL, root, "r", True, None, ca.ctable)[0]
    before = _snapshot(root)
    record = Record("rollback", N, [
        {"x": ("rows", np.array([1, 4]), np.array([101, 104])),
         "s": ("tail", 3, [f"old{k}" for k in range(3, N)])},
        {"x": ("rows", np.array([1]), np.array([1]))}])
    view, n = committed_view(dict(cols), record)
    assert n == N and all(len(c) == N for c in view.values())
    assert view["x"][:5].tolist() == [0, 101, 2, 3, 104]  # the first edit's values win
    assert [str(v) for v in view["s"].read_rows(range(2, 5))] == ["s2", "old3", "old4"]
    assert view["y"] is cols["y"]  # untouched: the column on disk, clipped
    assert len(cols["x"]) == N + 2 and cols["x"][1] == 1  # edited copies only
    assert _snapshot(root) == before


def test_a_finishing_shrink_shows_its_new_length(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable(_base(fmt="bcolz"), rootdir=root, chunklen=16, format="bcolz").close()
    cols = open_columns(LOCAL, root, "r", True, None, ca.ctable)[0]
    view, n = committed_view(dict(cols), Record("finish", 25, []))
    assert n == 25 and all(len(c) == 25 for c in view.values())
