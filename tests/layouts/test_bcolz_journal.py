"""The bcolz layout's journaled commits: killed at any file operation, a directory reads
back (by carray, and by bcolz itself) as one whole committed state."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import carray as ca
from carray.cli.verify import verify_path
from carray.layouts.bcolz.journal import Journal, is_leftover, staged_name

_WRITERS = ("write", "pwrite", "fsync", "replace", "rename", "unlink", "ftruncate")

SOAK = os.environ.get("CARRAY_SOAK") == "1"


class _Crash(Exception):  # noqa: N818 - named for what it simulates
    """A simulated kill -9 (an Exception, so finalizers that meet it stay quiet)."""


class _Killer:
    """From the ``at``-th writing ``os`` call on, the process is 'dead': every further
    writing call raises too, so nothing after the kill reaches the disk."""

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


def _states():
    s0 = np.arange(70, dtype=np.int64)
    s1 = s0.copy()
    s1[5:60] = -1
    s1 = np.concatenate([s1, np.arange(100, 120)])
    return [s0, s1, s1[:20]]


def _writer(root: str) -> None:
    a = ca.open(root, mode="a")
    a[5:60] = -1
    a.append(np.arange(100, 120))
    a.flush()
    a.resize(20)
    a.close()


def test_killed_at_every_file_operation(tmp_path, monkeypatch, frozen_gc):
    states = _states()
    seen = set()
    for at in range(1, 300):
        root = str(tmp_path / f"c{at}")
        ca.carray(states[0], rootdir=root, chunklen=16, format="bcolz").close()
        killer = _Killer(monkeypatch, at)
        try:
            _writer(root)
        except _Crash:
            pass
        finished = not killer.dead
        gc.collect()  # the dead writer's handles go while writes still fail
        killer.revive()
        ours = ca.open(root, mode="r")[:]  # read-only: reads through a journal
        which = [i for i, s in enumerate(states) if len(s) == len(ours) and (s == ours).all()]
        assert which, f"killed at operation {at}: not a committed state"
        seen.add(which[0])
        a = ca.open(root, mode="a")  # recovers
        assert np.array_equal(a[:], ours)
        a.close()
        left = [n for n in os.listdir(os.path.join(root, "data")) if is_leftover(n)]
        assert not left and not os.path.exists(os.path.join(root, "meta", "journal"))
        assert verify_path(root)[0] == []
        if finished:
            break
    assert seen == {0, 1, 2}


def test_bcolz_reads_every_interrupted_commit(tmp_path, monkeypatch):
    bcolz = pytest.importorskip("bcolz", reason="bcolz is a test dependency")
    states = _states()
    for at in range(1, 300, 3 if SOAK else 6):  # every third call under CARRAY_SOAK=1
        root = str(tmp_path / f"b{at}")
        ca.carray(states[0], rootdir=root, chunklen=16, format="bcolz").close()
        killer = _Killer(monkeypatch, at)
        try:
            _writer(root)
        except _Crash:
            pass
        finished = not killer.dead
        gc.collect()
        killer.revive()
        a = ca.open(root, mode="a")  # recovery first: bcolz knows no journal
        ours = a[:]
        a.close()
        theirs = bcolz.open(root, mode="r")[:]
        assert np.array_equal(theirs, ours)
        if finished:
            break


def test_a_damaged_journal_is_discarded(tmp_path):
    root = str(tmp_path / "j")
    ca.carray(np.arange(40), rootdir=root, chunklen=16, format="bcolz").close()
    journal = Journal((0,), b'{"shape": [3], "nbytes": 24, "cbytes": 0}\n').encode()
    with open(os.path.join(root, "meta", "journal"), "wb") as f:
        f.write(journal[:-3])  # cut short: never complete, so never applied
    with open(os.path.join(root, "data", staged_name(0)), "wb") as f:
        f.write(b"half a chunk")
    assert list(ca.open(root, mode="r")[:]) == list(range(40))
    a = ca.open(root, mode="a")
    assert list(a[:]) == list(range(40))
    a.close()
    assert sorted(os.listdir(os.path.join(root, "data"))) == ["__0.blp", "__1.blp", "__2.blp"]
    assert not os.path.exists(os.path.join(root, "meta", "journal"))


def test_journal_round_trip():
    j = Journal((3, 0, 7), b'{"shape": [9]}\n')
    assert Journal.decode(j.encode()) == j
    assert Journal.decode(b"") is None
    assert Journal.decode(j.encode()[:10]) is None
    bad = bytearray(j.encode())
    bad[-2] ^= 1
    assert Journal.decode(bytes(bad)) is None
