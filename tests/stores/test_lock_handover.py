"""bcolz directories: several handles of one process on one directory, as bcolz allows,
writing one at a time: a writable open hands writing over (:mod:`carray.stores.lock`)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import carray as ca
from carray.errors import CArrayError, HandleClosedError, LockError, ReadOnlyError, StorageError

KINDS = ["bcolz", "bcolz-table"]

# Another process trying to write: prints what happened.
_OTHER_WRITER = textwrap.dedent("""
    import sys
    import carray as ca
    from carray.errors import LockError
    try:
        ca.open(sys.argv[1], mode="a", storage={"lock_timeout": 0.3}).close()
    except LockError as exc:
        print("locked out:", exc)
    else:
        print("opened")
""")


def _other_process_writes(path: str) -> str:
    done = subprocess.run([sys.executable, "-c", _OTHER_WRITER, path], capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout.strip()


def _make(tmp_path, kind: str):
    if kind == "bcolz-table":
        return ca.ctable({"a": np.arange(10), "b": np.arange(10.0)}, chunklen=4,
                         rootdir=str(tmp_path / "t"), format="bcolz")
    return ca.carray(np.arange(10), chunklen=4, rootdir=str(tmp_path / "x"), format="bcolz")


def _rows(kind: str, start: int, n: int):
    values = np.arange(start, start + n)
    return {"a": values, "b": values.astype(float)} if kind == "bcolz-table" else values


def _values(obj, kind: str) -> list:
    return list(obj["a"][:] if kind == "bcolz-table" else obj[:])


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_handle_reads_what_the_first_wrote_and_writes_on(tmp_path, kind):
    first = _make(tmp_path, kind)
    first.append(_rows(kind, 10, 3))  # an array keeps these in memory until a flush
    second = ca.open(first.rootdir)  # mode 'a', bcolz's default
    assert second.mode == "a" and first.mode == "r"
    assert _values(second, kind) == list(range(13))  # the first handle was flushed
    second.append(_rows(kind, 13, 3))
    second.flush()
    if kind == "bcolz-table":  # a table reader follows its writer's commits
        assert _values(first, kind) == list(range(16))
    else:
        assert _values(first, kind) == list(range(13))
    with pytest.raises(ReadOnlyError, match="took writing over") as info:
        first.append(_rows(kind, 0, 1))
    assert str(info.value).startswith(f"{first.rootdir}: ")
    assert isinstance(info.value, PermissionError) and isinstance(info.value, CArrayError)
    with pytest.raises(ReadOnlyError):
        first.attrs["units"] = "m"
    first.close()  # the lock went with writing: closing the reader keeps it held
    del first
    gc.collect()
    assert _other_process_writes(second.rootdir).startswith("locked out:")
    second.attrs["units"] = "m"
    second.close()
    assert _other_process_writes(second.rootdir) == "opened"
    with ca.open(second.rootdir, mode="r") as again:
        assert _values(again, kind) == list(range(16)) and again.attrs["units"] == "m"


@pytest.mark.parametrize("kind", KINDS)
def test_bcolz_reopen_by_constructor_hands_over_too(tmp_path, kind):
    first = _make(tmp_path, kind)
    cls = ca.ctable if kind == "bcolz-table" else ca.carray
    second = cls(rootdir=first.rootdir)
    third = cls(rootdir=first.rootdir, mode="a")
    assert (first.mode, second.mode, third.mode) == ("r", "r", "a")
    third.append(_rows(kind, 10, 2))
    third.close()
    assert _values(ca.open(first.rootdir, mode="r"), kind) == list(range(12))


@pytest.mark.parametrize("kind", KINDS)
def test_a_handle_that_cannot_flush_keeps_writing(tmp_path, kind, monkeypatch):
    first = _make(tmp_path, kind)
    first.append(_rows(kind, 10, 2))

    def full_disk(*args, **kwargs):
        raise StorageError(28, "No space left on device", first.rootdir)

    monkeypatch.setattr(first, "flush", full_disk)
    with pytest.raises(StorageError):
        ca.open(first.rootdir)
    monkeypatch.undo()
    assert first.mode != "r"  # still the writer, its rows still pending
    assert _other_process_writes(first.rootdir).startswith("locked out:")
    first.append(_rows(kind, 12, 1))
    first.close()
    assert _values(ca.open(first.rootdir, mode="r"), kind) == list(range(13))


@pytest.mark.parametrize("kind", KINDS)
def test_mode_w_still_replaces_and_closes_the_older_handles(tmp_path, kind):
    first = _make(tmp_path, kind)
    second = ca.open(first.rootdir)  # took writing over: first reads
    if kind == "bcolz-table":
        third = ca.ctable({"a": np.arange(2), "b": np.arange(2.0)}, rootdir=first.rootdir,
                          mode="w", format="bcolz")
    else:
        third = ca.carray(np.arange(2), rootdir=first.rootdir, mode="w", format="bcolz")
    with pytest.raises(HandleClosedError):
        second.append(_rows(kind, 0, 1))
    third.close()
    assert _values(ca.open(first.rootdir, mode="r"), kind) == [0, 1]


def test_carray_own_layout_keeps_one_writable_handle(tmp_path):
    path = str(tmp_path / "x")
    first = ca.carray(np.arange(10), rootdir=path)
    with pytest.raises(LockError, match="another handle in this process"):
        ca.open(path)
    assert first.mode == "a"
    first.close()


def test_another_process_writer_is_not_handed_anything(tmp_path):
    holder_script = textwrap.dedent("""
        import sys
        import carray as ca
        handle = ca.open(sys.argv[1], mode="a")
        print("locked", flush=True)
        sys.stdin.readline()
    """)
    path = _make(tmp_path, "bcolz").rootdir
    ca.open(path, mode="r").close()
    holder = subprocess.Popen([sys.executable, "-c", holder_script, path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(LockError, match=f"process {holder.pid}"):
            ca.open(path, mode="a", storage={"lock_timeout": 0.2})
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait()


@pytest.mark.parametrize("kind", KINDS)
def test_real_bcolz_reads_what_the_handles_wrote(tmp_path, kind):
    bcolz = pytest.importorskip("bcolz")
    first = _make(tmp_path, kind)
    first.append(_rows(kind, 10, 3))
    second = ca.open(first.rootdir)
    second.append(_rows(kind, 13, 4))
    second.close()
    first.close()
    theirs = bcolz.open(first.rootdir, mode="r")
    values = theirs["a"][:] if kind == "bcolz-table" else theirs[:]
    assert list(values) == list(range(17))
    assert not os.path.exists(os.path.join(first.rootdir, "__txn__"))
