"""One writer at a time: the writer's lock on every layout and on tables."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import carray as ca
from carray.errors import LockError
from carray.stores import LOCAL
from carray.stores.lock import LOCK_SUFFIX, WriteLock

_HOLDER = textwrap.dedent("""
    import sys, time
    import carray as ca
    kind, path = sys.argv[1], sys.argv[2]
    obj = ca.ctable(rootdir=path, mode="a") if kind == "table" else ca.open(path, mode="a")
    print("locked", flush=True)
    sys.stdin.readline()
""")


def _make(tmp_path, kind: str) -> str:
    if kind == "table":
        path = str(tmp_path / "t")
        ca.ctable({"a": np.arange(10)}, rootdir=path).close()
    else:
        path = str(tmp_path / ("x.b2nd" if kind == "b2nd" else "x"))
        ca.carray(np.arange(10), rootdir=path, format=None if kind != "bcolz" else "bcolz",
                  chunklen=4).close()
    return path


@pytest.mark.parametrize("kind", ["superchunk", "bcolz", "b2nd", "table"])
def test_a_second_writer_gets_lock_error_at_once(tmp_path, kind):
    path = _make(tmp_path, kind)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, kind, path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.perf_counter()
        with pytest.raises(LockError, match="already open for writing"):
            ca.ctable(rootdir=path, mode="a") if kind == "table" else ca.open(path, mode="a")
        assert time.perf_counter() - t0 < 5  # at once, not after a wait
        assert isinstance(LockError("x"), BlockingIOError)
        # Readers never need the lock.
        reader = ca.ctable(rootdir=path, mode="r") if kind == "table" else \
            ca.open(path, mode="r")
        assert len(reader) == 10
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait()
    # Released when the holder went away: writing works again.
    obj = ca.ctable(rootdir=path, mode="a") if kind == "table" else ca.open(path, mode="a")
    obj.append(np.arange(3) if kind != "table" else {"a": np.arange(3)})
    obj.close()


def test_handles_of_one_process_share_the_lock(tmp_path):
    path = _make(tmp_path, "superchunk")
    a = ca.open(path, mode="a")
    b = ca.open(path, mode="a")  # a handle kept open does not lock its own process out
    b.close()
    a.append(np.arange(2))
    a.close()
    assert len(ca.open(path, mode="r")) == 12


def test_lock_file_of_a_single_file_dataset_goes_away(tmp_path):
    path = _make(tmp_path, "b2nd")
    a = ca.open(path, mode="a")
    assert os.path.exists(path + LOCK_SUFFIX)
    a.close()
    assert sorted(os.listdir(tmp_path)) == ["x.b2nd"]


def test_directories_are_locked_without_extra_files(tmp_path):
    path = _make(tmp_path, "bcolz")
    before = sorted(os.listdir(path))
    lock = WriteLock.acquire(LOCAL, path)
    assert lock is not None and lock.held
    assert sorted(os.listdir(path)) == before
    lock.release()
    assert not lock.held
    lock.release()  # twice is harmless


def test_no_lock_where_nothing_can_be_locked(tmp_path):
    assert WriteLock.acquire(LOCAL, str(tmp_path / "missing")) is None
