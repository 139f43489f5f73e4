"""Local files of the file formats: written under a temporary name, put in place atomically."""

from __future__ import annotations

import errno
import os
import sys
import threading

import pytest

from carray.errors import StorageError
from carray.formats import local_write as lw
from carray.stores import files as _fileio
from carray.stores.tempnames import HOST, Temporary, is_temporary, parse, temporary_name

LINUX = sys.platform.startswith("linux")


def test_groups_are_written_in_order_and_the_patch_applied(tmp_path):
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"head", b"----"], [b"abc"], [], [bytearray(b"de"), memoryview(b"f")]],
                  fsync=False, patch=lambda: (b"HEAD", 0))
    assert open(path, "rb").read() == b"HEAD----abcdef"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_a_replaced_file_stays_readable_by_those_who_opened_it(tmp_path):
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"old contents"]], fsync=False)
    with open(path, "rb") as old:
        lw.write_file(path, [[b"new"]], fsync=True)
        assert old.read() == b"old contents"
    assert open(path, "rb").read() == b"new"
    assert os.listdir(tmp_path) == ["f.bin"]


@pytest.mark.skipif(not LINUX, reason="renameat2 is Linux's")
def test_an_existing_file_is_replaced_by_exchanging_names(tmp_path, monkeypatch):
    calls = []
    real = _fileio._renameat2
    monkeypatch.setattr(_fileio, "_renameat2", lambda *a: calls.append(a) or real(*a))
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"one"]], fsync=False)
    assert [c[-1] for c in calls] == [_fileio._RENAME_NOREPLACE]  # nothing to replace
    calls.clear()
    lw.write_file(path, [[b"two"]], fsync=False)
    assert [c[-1] for c in calls] == [_fileio._RENAME_NOREPLACE, _fileio._RENAME_EXCHANGE]
    assert open(path, "rb").read() == b"two"
    assert os.listdir(tmp_path) == ["f.bin"]


@pytest.mark.parametrize("exchange", [None, lambda *a: -1], ids=["unavailable", "refused"])
def test_without_the_exchange_a_plain_rename_replaces(tmp_path, monkeypatch, exchange):
    monkeypatch.setattr(_fileio, "_renameat2", exchange)
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"one"]], fsync=False)
    lw.write_file(path, [[b"two"]], fsync=False)
    assert open(path, "rb").read() == b"two"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_a_directory_is_not_replaced(tmp_path):
    target = tmp_path / "d"
    (target / "inner").mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        lw.write_file(str(target), [[b"x"]], fsync=False)
    assert os.listdir(tmp_path) == ["d"] and os.listdir(target) == ["inner"]


def test_a_failure_midway_keeps_the_old_file(tmp_path):
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"old"]], fsync=False)

    def groups():
        yield [b"new"]
        raise ValueError("the producer failed")

    with pytest.raises(ValueError, match="producer failed"):
        lw.write_file(path, groups(), fsync=False)
    assert open(path, "rb").read() == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_storage_failures_are_storage_errors(tmp_path, monkeypatch):
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"old"]], fsync=False)

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(StorageError, match="f.bin"):
        lw.write_file(path, [[b"new"]], fsync=False)
    monkeypatch.undo()
    assert open(path, "rb").read() == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_short_writes_are_finished(tmp_path, monkeypatch):
    real_writev, real_write = os.writev, os.write
    # Every call writes at most 3 bytes, as a signal or a nearly full disk may cause.
    monkeypatch.setattr(os, "writev", lambda fd, bufs: real_write(fd, bytes(bufs[0])[:3]))
    monkeypatch.setattr(os, "write", lambda fd, buf: real_write(fd, bytes(buf)[:3]))
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"abcdefgh", b"ijklm", b"n"], [b"opqrstu"]], fsync=False)
    monkeypatch.setattr(os, "writev", real_writev)
    assert open(path, "rb").read() == b"abcdefghijklmnopqrstu"


@pytest.mark.parametrize("fsync", [True, False])
def test_fsync_only_when_asked(tmp_path, monkeypatch, fsync):
    calls = []
    real = os.fsync

    def fsync_of(fd):
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync_of)
    lw.write_file(str(tmp_path / "f.bin"), [[b"x"]], fsync=fsync)
    # The file's bytes (still under its temporary name), then the directory's entries.
    assert len(calls) == (2 if fsync else 0)
    if fsync:
        assert is_temporary(os.path.basename(calls[0]), "f.bin") and calls[1] == str(tmp_path)


def test_temporary_names_differ_between_threads(tmp_path):
    names = []
    thread = threading.Thread(target=lambda: names.append(temporary_name("p")))
    thread.start()
    thread.join()
    assert names[0] != temporary_name("p")
    assert parse(temporary_name("p")) == Temporary("p", HOST, os.getpid())


@pytest.mark.skipif(not LINUX, reason="renameat2 is Linux's")
def test_the_old_file_is_released_by_the_cleanup_thread(tmp_path, monkeypatch):
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [[b"old"]], fsync=False)
    queued = []
    monkeypatch.setattr(lw, "in_background", lambda fn, *args: queued.append((fn, args)))
    lw.write_file(path, [[b"new"]], fsync=False)
    # Unlinked at once (nothing left beside the file), still open until the queue closes it.
    assert os.listdir(tmp_path) == ["f.bin"]
    [(fn, (fd,))] = queued
    assert fn is os.close and os.pread(fd, 10, 0) == b"old"
    fn(fd)
    assert open(path, "rb").read() == b"new"


def test_more_parts_than_one_writev_takes(tmp_path, monkeypatch):
    monkeypatch.setattr(lw, "_IOV_MAX", 4)
    parts = [bytes([i]) * (i + 1) for i in range(11)]
    path = str(tmp_path / "f.bin")
    lw.write_file(path, [parts], fsync=False)
    assert open(path, "rb").read() == b"".join(parts)
    monkeypatch.undo()
    many = [b"%d," % i for i in range(5000)]  # beyond Linux's 1024 buffers per call
    lw.write_file(path, [many], fsync=False)
    assert open(path, "rb").read() == b"".join(many)
