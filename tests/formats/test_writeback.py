"""New superchunk files written on the background threads while the writer goes on
(carray.layouts.superchunk.filling), and what a commit syncs.

* a failure on the background threads (a full disk, a failed sync) reaches the caller
  at the flush that needs the file; the committed state stays readable and nothing
  handed over is lost: the next flush writes the file again, whole;
* with ``fsync=True`` a commit syncs every data file it wrote once, whatever the
  number of appends or chunks behind it, plus a fixed few for the version.
"""

from __future__ import annotations

import errno
import os
import threading
import time

import numpy as np
import pytest

import carray as ca
import carray.layouts.superchunk.filling as filling
from carray.errors import StorageError
from carray.stores.tempnames import is_temporary, parse

SC = 4  # chunks per superchunk file
CHUNK = 64


def _new(path, fsync=True):
    return ca.carray(np.arange(10, dtype=np.int64), chunklen=CHUNK, rootdir=str(path),
                     mode="w", storage={"superchunksize": SC}, fsync=fsync)


def _data(n, seed=0):
    return np.random.default_rng(seed).integers(0, 1 << 40, n)


class _Background:
    """Makes the ``at``-th call of ``name`` on a background thread (``files``, or the
    ``sync`` thread that finishes the last file of a commit) fail."""

    def __init__(self, monkeypatch, name: str, at: int = 1, err: int = errno.ENOSPC,
                 always: bool = False) -> None:
        self.count, self.fired, self.at, self.err, self.always = 0, 0, at, err, always
        real = getattr(os, name)

        def call(*args, **kwargs):
            if threading.current_thread().name.startswith(("carray-files", "carray-sync")):
                self.count += 1
                if self.count == self.at or (self.always and self.count >= self.at):
                    self.fired += 1
                    raise OSError(self.err, os.strerror(self.err))
            return real(*args, **kwargs)

        monkeypatch.setattr(os, name, call)


@pytest.fixture
def small_spills(monkeypatch):
    monkeypatch.setattr(filling, "SPILL_BYTES", 1000)  # a spill every few records


@pytest.mark.parametrize("name", ["write", "fdatasync", "replace"])
@pytest.mark.parametrize("at", [1, 2, 4])
def test_a_background_failure_reaches_the_flush_and_loses_nothing(tmp_path, monkeypatch,
                                                                  small_spills, name, at):
    path = tmp_path / "a"
    a = _new(path)
    first = _data(CHUNK * SC * 2 - 10, 1)  # superchunks 0 and 1 full: the rest go to new files
    a.append(first)
    a.flush()
    committed = np.concatenate([np.arange(10), first])
    more = _data(CHUNK * SC * 3 + 17, 2)  # three new files and part of a fourth
    faults = _Background(monkeypatch, name, at)
    a.append(more)
    if faults.fired or name != "write":
        with pytest.raises(StorageError) as info:
            a.flush()
        assert info.value.errno == errno.ENOSPC and "sc_" in info.value.filename
    else:  # the failing call came after the last write of the background threads
        a.flush()
    assert faults.fired == 1
    np.testing.assert_array_equal(ca.open(str(path), mode="r")[:], committed)
    monkeypatch.undo()
    expected = np.concatenate([committed, more])
    np.testing.assert_array_equal(a[:], expected)
    a.flush()  # the files are written again, whole
    a.close()
    np.testing.assert_array_equal(ca.open(str(path), mode="r")[:], expected)
    assert not [n for n in os.listdir(path / "data") if is_temporary(n)]


def test_a_disk_full_until_space_returns(tmp_path, monkeypatch, small_spills):
    path = tmp_path / "a"
    a = _new(path)
    a.flush()
    faults = _Background(monkeypatch, "write", 1, always=True)
    data = _data(CHUNK * SC * 5, 3)
    for k in range(5):  # each step fails, at the append (it rewrites a chunk of a file
        # that could not be written) or at the flush; none changes what is committed
        with pytest.raises(StorageError) as info:
            a.append(data[k * CHUNK * SC:(k + 1) * CHUNK * SC])
            a.flush()
        assert info.value.errno == errno.ENOSPC
        np.testing.assert_array_equal(ca.open(str(path), mode="r")[:], np.arange(10))
    assert faults.fired >= 5
    shown = a[:]
    assert np.array_equal(shown[:10], np.arange(10))
    monkeypatch.undo()
    a.append(data[:100])
    a.close()
    np.testing.assert_array_equal(ca.open(str(path), mode="r")[:],
                                  np.concatenate([shown, data[:100]]))


def test_a_reader_sees_only_committed_versions_while_files_stream(tmp_path, small_spills):
    path = tmp_path / "a"
    a = _new(path)
    a.flush()
    readers = [(ca.open(str(path), mode="r"), np.arange(10))]
    total = np.arange(10)
    for k in range(6):
        chunk = _data(CHUNK * SC + 13 * k, k)
        a.append(chunk)  # new files being written meanwhile
        total = np.concatenate([total, chunk])
        for reader, held in readers:  # each reader holds the version it opened
            np.testing.assert_array_equal(reader[:], held)
        a.flush()
        readers.append((ca.open(str(path), mode="r"), total))
    for reader, held in readers:
        np.testing.assert_array_equal(reader[:], held)
    a.close()


def test_closing_without_a_flush_leaves_no_temporary_files(tmp_path, small_spills):
    path = tmp_path / "a"
    a = _new(path)
    a.flush()
    a.append(_data(CHUNK * SC * 2 + 5))
    a.engine.release()  # drop unflushed work: what a takeover does
    assert not [n for n in os.listdir(path / "data") if is_temporary(n)]
    np.testing.assert_array_equal(ca.open(str(path), mode="r")[:], np.arange(10))


# -- what a commit syncs -------------------------------------------------------------------


class _Syncs:
    """Every fsync/fdatasync call, with the name of the file or directory synced."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[str] = []
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, self._wrap(real))

    def _wrap(self, real):
        def call(fd):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                target = "?"
            self.calls.append(target)
            return real(fd)
        return call

    def take(self) -> list[str]:
        calls, self.calls = self.calls, []
        return calls


def _kinds(calls: list[str], root: str) -> dict[str, int]:
    """Syncs counted by what they synced: ``data:sc_KKKKKK`` (a data file, under its
    temporary name or its own), ``version:ix`` / ``version:mf`` (a version's index pages
    and manifest), ``dir:data`` / ``dir:versions``."""
    out: dict[str, int] = {}
    for c in calls:
        rel = os.path.relpath(c, root)
        base = os.path.basename(rel)
        found = parse(base)  # a file under its temporary name counts as the file
        base = found.target if found is not None else base
        if rel in ("data", "versions", "meta", ".", ".."):
            key = "dir:" + rel
        elif rel.startswith("meta"):
            key = "meta:" + base.split(".")[0]
        elif rel.startswith("data"):
            key = "data:" + base.split(".blp")[0]
        else:
            key = "version:" + base.split(".")[1]
        out[key] = out.get(key, 0) + 1
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names synced files via /proc")
@pytest.mark.parametrize("appends", [1, 7, 40])
def test_a_commit_syncs_each_file_once_whatever_the_steps(tmp_path, monkeypatch, appends):
    root = str(tmp_path / "a")
    a = _new(root)
    a.append(_data(CHUNK - 10))  # a partial chunk in superchunk 0
    a.flush()
    syncs = _Syncs(monkeypatch)
    # Rows filling superchunks 0..2 and part of 3, in ``appends`` steps.
    data = _data(CHUNK * SC * 3 + 5, 4)
    for part in np.array_split(data, appends):
        a.append(part)
    a.flush()
    kinds = _kinds(syncs.take(), root)
    data_files = {k: v for k, v in kinds.items() if k.startswith("data:")}
    # One sync per data file written: the one extended and the three created.
    assert data_files == {"data:sc_000000": 1, "data:sc_000001": 1, "data:sc_000002": 1,
                          "data:sc_000003": 1}, kinds
    # The version: its index pages, its manifest and the two directories whose entries
    # changed (the new data files', the version's).
    rest = {k: v for k, v in kinds.items() if not k.startswith("data:")}
    assert rest == {"dir:data": 1, "version:ix": 1, "version:mf": 1, "dir:versions": 1}, \
        kinds
    # A commit of a change in place: the one file, and the version.
    a[3] = -1
    a.flush()
    kinds = _kinds(syncs.take(), root)
    assert {k: v for k, v in kinds.items() if k.startswith("data:")} == \
        {"data:sc_000000": 1}, kinds
    assert kinds == {"data:sc_000000": 1, "version:ix": 1, "version:mf": 1,
                     "dir:versions": 1}, kinds
    a.close()
    assert syncs.take() == []  # closing after the flush syncs nothing more
    with ca.carray(np.arange(5), rootdir=str(tmp_path / "b"), mode="w", fsync=False) as b:
        b.append(np.arange(100))
    assert syncs.take() == []  # fsync=False syncs nothing


def test_new_files_are_streamed_and_synced_before_they_get_their_names(tmp_path,
                                                                       monkeypatch,
                                                                       small_spills):
    order: list[tuple[str, str]] = []
    real_write, real_sync, real_replace = os.write, os.fdatasync, os.replace

    def name(fd):
        return os.readlink(f"/proc/self/fd/{fd}")

    def write(fd, data):
        if threading.current_thread().name.startswith("carray-files"):
            order.append(("write", name(fd)))
        return real_write(fd, data)

    def fdatasync(fd):
        order.append(("sync", name(fd)))
        return real_sync(fd)

    def replace(src, dst):
        order.append(("rename", os.fspath(src)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(os, "replace", replace)
    a = _new(tmp_path / "a")
    a.append(_data(CHUNK * SC * 2))
    a.flush()
    a.close()
    tmp1 = [p for op, p in order if is_temporary(os.path.basename(p), "sc_000001.blp")]
    ops = [op for op, p in order if p in tmp1]
    assert ops.count("write") > 2, ops  # streamed in several parts
    assert ops[-2:] == ["sync", "rename"], ops


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names synced files via /proc")
def test_a_new_array_is_made_durable_meanwhile_and_its_first_commit_waits(tmp_path,
                                                                         monkeypatch):
    syncs = _Syncs(monkeypatch)
    root = str(tmp_path / "n")
    a = ca.carray(np.arange(5), rootdir=root, mode="w")  # created, appended, committed
    kinds = _kinds(syncs.take(), root)
    # The storage file, the first version and every directory up to the parent's entry,
    # all before the first commit's manifest.
    for k in ("meta:storage", "dir:meta", "dir:data", "dir:.", "dir:..", "dir:versions"):
        assert kinds.get(k, 0) >= 1, (k, kinds)
    assert kinds["version:mf"] == 2  # the empty first version and the commit
    a.close()


def test_a_failed_sync_of_a_new_array_reaches_its_first_commit(tmp_path, monkeypatch):
    real = os.fsync
    fired = []

    def fsync(fd):
        if threading.current_thread().name.startswith("carray-sync") and not fired:
            fired.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    root = str(tmp_path / "n")
    a = ca.carray(np.zeros(0, dtype=np.int64), rootdir=root, mode="w")
    a.append(np.arange(10))
    with pytest.raises(StorageError) as info:
        a.flush()
    assert fired and info.value.errno == errno.EIO
    assert len(ca.open(root, mode="r")) == 0  # the first version: nothing else published
    a.flush()  # synced again, here: the commit goes through
    a.close()
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], np.arange(10))


def test_threads_read_many_files_at_once_while_handles_are_recycled(tmp_path, monkeypatch):
    """Reads of a file happen outside the files' lock: a handle being read is never the
    one closed to open another (few handles kept open here, many files)."""
    import carray.layouts.superchunk.files as sc_files

    monkeypatch.setattr(sc_files, "_OPEN_FILES", 3)
    data = _data(CHUNK * 40, 9)
    root = str(tmp_path / "m")
    ca.carray(data, chunklen=CHUNK, rootdir=root, mode="w",
              storage={"superchunksize": 1}).close()
    a = ca.open(root, mode="r")
    errors: list[BaseException] = []

    def reader(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(150):
                lo = int(rng.integers(0, len(data) - 1))
                hi = int(rng.integers(lo + 1, min(len(data), lo + 3 * CHUNK) + 1))
                np.testing.assert_array_equal(a[lo:hi], data[lo:hi])
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_first_version_dropped_before_its_background_sync_is_not_an_error(tmp_path,
                                                                           monkeypatch):
    """A new array's first version is synced on a background thread; commits that come
    first (attributes, a version without data files) may drop it, and the sync then has
    nothing left to do."""
    from carray.versions import repo as repo_module

    real = repo_module.Repository.sync_published

    def slow(self, seq):
        time.sleep(0.3)  # the commits below overtake it
        return real(self, seq)

    monkeypatch.setattr(repo_module.Repository, "sync_published", slow)
    root = str(tmp_path / "a")
    a = ca.carray(np.empty(0, "i8"), rootdir=root, mode="w", chunklen=100)
    a.attrs["units"] = "K"
    a.attrs["source"] = "a test"
    for _ in range(2):
        a.append(np.arange(1000))
        a.flush()
    a.close()
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], np.tile(np.arange(1000), 2))
