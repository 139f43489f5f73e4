"""Tables commit as a whole: a crash never leaves columns of different lengths or half an
edit, in either column layout."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import carray as ca
from carray.table.bcolz.undo import TXN_FILE, Record

# Every file operation (slow); in CI every fifth.
EVERY = os.environ.get("CARRAY_SOAK") == "1"
_WRITERS = ("write", "pwrite", "fsync", "replace", "rename", "link", "unlink", "ftruncate")


class _Crash(Exception):  # noqa: N818 - named for what it simulates
    """A simulated kill -9 (an Exception, so finalizers that meet it stay quiet)."""


class _Killer:
    """From the ``at``-th writing ``os`` call on, every writing call fails: the process
    is 'dead' and nothing after the kill reaches the disk."""

    def __init__(self, monkeypatch, at: int) -> None:
        self.at, self.count = at, 0
        self._mp = monkeypatch
        for name in _WRITERS:
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, func):
        def call(*args, **kwargs):
            self.count += 1
            if self.count >= self.at:
                raise _Crash
            return func(*args, **kwargs)
        return call

    @property
    def dead(self) -> bool:
        return self.count >= self.at

    def revive(self) -> None:
        self._mp.undo()


def _files(root: str) -> dict:
    """Every file under ``root`` and its bytes."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                out[os.path.join(dirpath, name)] = f.read()
    return out


def _rows(t) -> list:
    return [tuple(r) for r in t[:].tolist()] if len(t) else []


def _base(n=40, fmt=None):
    """The table before the changes; bcolz's text columns are fixed-width, so wide enough
    for every value a change writes (a longer one is refused, never cut)."""
    i = np.arange(n)
    text = object if fmt is None else "U8"
    return {"i": i, "f": i * 0.5, "s": np.array([f"s{k}" for k in i], dtype=text)}


def _changes(t) -> None:
    t[3:25] = (-1, -0.5, "edited")
    t.append({"i": [90, 91], "f": [9.0, 9.5], "s": ["new", "rows"]})
    t.flush()
    t.resize(30)
    t.flush()


def _states(auto_flush: bool) -> list:
    t = ca.ctable(_base(), chunklen=16, auto_flush=auto_flush)
    states = [_rows(t)]
    t[3:25] = (-1, -0.5, "edited")
    if auto_flush:
        states.append(_rows(t))
    t.append({"i": [90, 91], "f": [9.0, 9.5], "s": ["new", "rows"]})
    states.append(_rows(t))
    t.resize(30)
    states.append(_rows(t))
    return states


@pytest.mark.parametrize("auto_flush", [True, False])
@pytest.mark.parametrize("fmt", [None, "bcolz"])
def test_killed_at_every_file_operation(tmp_path, monkeypatch, fmt, auto_flush, frozen_gc):
    states = _states(auto_flush)
    seen = set()
    pristine = str(tmp_path / "pristine")
    ca.ctable(_base(fmt=fmt), rootdir=pristine, chunklen=16, format=fmt, fsync=False).close()
    # A kill, not a power cut: fsync changes nothing here but the time taken.
    for at in range(1, 2000, 1 if EVERY else 5):
        root = str(tmp_path / f"t{at}")
        shutil.copytree(pristine, root)
        killer = _Killer(monkeypatch, at)
        t = None
        try:
            t = ca.ctable(rootdir=root, mode="a", auto_flush=auto_flush, fsync=False)
            _changes(t)
        except _Crash:
            pass
        finished = not killer.dead
        del t  # while 'dead': whatever its handles try to write on the way out fails
        gc.collect()  # (handles in reference cycles too)
        killer.revive()
        # A reader before any writer came back: the state the writer will recover,
        # read through the record in memory, nothing written.
        files = _files(root)
        ro = ca.ctable(rootdir=root, mode="r")
        seen_ro = _rows(ro)
        assert {len(c) for c in ro.cols.values()} <= {len(ro)}
        del ro
        assert _files(root) == files, f"killed at {at}: mode 'r' wrote"
        t2 = ca.ctable(rootdir=root, mode="a")  # recovers
        got = _rows(t2)
        lengths = {len(c) for c in t2.cols.values()}
        t2.close()
        assert lengths == {len(got)}, f"killed at {at}: columns of lengths {lengths}"
        assert got in states, f"killed at operation {at}: not a committed state"
        assert seen_ro == got, f"killed at {at}: the reader showed another state"
        seen.add(states.index(got))
        assert not os.path.exists(os.path.join(root, TXN_FILE))
        if finished:
            break
    assert {0, len(states) - 1} <= seen


_UNFLUSHED = textwrap.dedent("""
    import os, sys
    import numpy as np
    import carray as ca
    t = ca.ctable(rootdir=sys.argv[1], mode="a", auto_flush=False)
    t.append({"i": [7], "f": [7.0], "s": ["late"]})
    t[0:5] = (-9, -9.0, "half")
    t.cols["i"].flush()          # one column commits on its own ...
    t.cols["s"].flush()
    os._exit(0)                  # ... and the writer dies before the table's flush
""")


def test_a_column_flushed_alone_is_rolled_back(tmp_path):
    root = str(tmp_path / "u")
    ca.ctable(_base(fmt="bcolz"), rootdir=root, chunklen=16, format="bcolz").close()
    subprocess.run([sys.executable, "-c", _UNFLUSHED, root], check=True)
    assert os.path.exists(os.path.join(root, TXN_FILE))
    ro = ca.ctable(rootdir=root, mode="r")
    assert len(ro) == 40  # the recorded length: never the rows of one column only
    assert _rows(ro) == _rows(ca.ctable(_base()))  # the flushed edit is read through
    t = ca.ctable(rootdir=root, mode="a")
    assert _rows(t) == _rows(ca.ctable(_base()))
    t.close()
    assert not os.path.exists(os.path.join(root, TXN_FILE))


def test_a_column_of_a_versioned_table_flushed_alone_waits_for_the_table(tmp_path):
    root = str(tmp_path / "v")
    ca.ctable(_base(), rootdir=root, chunklen=16).close()
    subprocess.run([sys.executable, "-c", _UNFLUSHED, root], check=True)
    ro = ca.ctable(rootdir=root, mode="r")
    assert len(ro.versions()) == 1  # the columns' flushes published nothing
    assert _rows(ro) == _rows(ca.ctable(_base()))
    t = ca.ctable(rootdir=root, mode="a")
    assert _rows(t) == _rows(ca.ctable(_base()))
    t.close()


_EXIT_UNFLUSHED = textwrap.dedent("""
    import sys
    import carray as ca
    t = ca.ctable(rootdir=sys.argv[1], mode="a", auto_flush=False)
    t.append({"i": [7], "f": [7.0], "s": ["late"]})
""")


def test_auto_flush_off_still_commits_at_exit(tmp_path):
    root = str(tmp_path / "x")
    ca.ctable(_base(), rootdir=root, chunklen=16).close()
    subprocess.run([sys.executable, "-c", _EXIT_UNFLUSHED, root], check=True)
    t = ca.ctable(rootdir=root, mode="r")
    assert len(t) == 41 and t[40]["s"] == "late"


def test_record_round_trip():
    r = Record("rollback", 12, [{"a": ("rows", np.array([1, 5]), np.array([2.5, 3.5])),
                                 "s": ("tail", 3, ["x", "yé", ""])}])
    back = Record.decode(r.encode())
    assert back.kind == "rollback" and back.length == 12 and back.change == r.change
    assert Record("rollback", 12).change != r.change  # every change its own name
    how, rows, values = back.edits[0]["a"]
    assert how == "rows" and rows.tolist() == [1, 5] and values.tolist() == [2.5, 3.5]
    assert back.edits[0]["s"] == ("tail", 3, ["x", "yé", ""])
    assert Record.decode(r.encode()[:-10]) is None
    assert Record.decode(b"junk") is None


def test_new_tables_use_the_superchunk_layout(tmp_path):
    t = ca.ctable(_base(), rootdir=str(tmp_path / "n"))
    assert t.cols["i"].layout == "Superchunk"
    b = ca.ctable(_base(fmt="bcolz"), rootdir=str(tmp_path / "b"), format="bcolz")
    assert b.cols["i"].layout == "Bcolz"
    b.close()
    b = ca.ctable(rootdir=str(tmp_path / "b"))
    b.addcol(np.arange(40), name="more")  # an opened bcolz table stays bcolz
    assert b.cols["more"].layout == "Bcolz"
