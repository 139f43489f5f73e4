"""New superchunk files are filled in memory and written whole (one put, one fsync)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import carray as ca
from carray.codecs import parallel as _parallel
from carray.layouts.superchunk.layout import SuperchunkLayout
from carray.stores.local import LocalHandle, LocalStore, LocalStream


def sc_path(root, k: int) -> str:
    return os.path.join(root, "data", f"sc_{k:06d}.blp")


def make(root, data, **kw):
    return ca.carray(data, chunklen=100, rootdir=root, mode="w",
                     storage={"superchunksize": 4}, **kw)


def test_appended_files_are_written_whole_without_chunk_writes(tmp_path, monkeypatch):
    pwrites, puts = [], []
    real_pwrite, real_stream = LocalHandle.pwrite, LocalStore.stream
    monkeypatch.setattr(LocalHandle, "pwrite",
                        lambda self, data, off: pwrites.append(off) or real_pwrite(self, data, off))
    monkeypatch.setattr(LocalStore, "stream",
                        lambda self, path, **kw: puts.append(path) or
                        real_stream(self, path, **kw))
    data = np.arange(1400, dtype="i8")
    a = make(tmp_path / "a", data)
    sc_puts = [p for p in puts if "sc_" in os.path.basename(p)]
    # 14 chunks: three full files and one of two chunks, each written as one new file
    # (streamed, renamed into place whole).
    assert sorted(sc_puts) == [sc_path(tmp_path / "a", k) for k in range(4)]
    assert pwrites == []  # no chunk went to a file on its own
    np.testing.assert_array_equal(a[:], data)
    a.close()
    np.testing.assert_array_equal(ca.open(tmp_path / "a", mode="r")[:], data)


def test_stamps_of_kept_chunks_match_the_written_files(tmp_path):
    a = make(tmp_path / "a", np.arange(0))
    a.append(np.arange(1000, dtype="i8"))
    before = [a.engine.chunk_stamp(n) for n in range(10)]
    a.close()
    b = ca.open(tmp_path / "a", mode="r")
    assert [b.engine.chunk_stamp(n) for n in range(10)] == before


def test_reads_and_rewrites_while_a_file_is_being_filled(tmp_path):
    a = make(tmp_path / "a", np.arange(0))
    a.append(np.arange(250, dtype="i8"))  # two chunks kept, the tail in memory
    assert not os.path.exists(sc_path(tmp_path / "a", 0))
    assert a[150] == 150  # a read writes the file first
    assert os.path.exists(sc_path(tmp_path / "a", 0))
    a.append(np.arange(250, 900, dtype="i8"))
    a[420:430] = -1  # a rewrite of a kept chunk
    want = np.arange(900)
    want[420:430] = -1
    np.testing.assert_array_equal(a[:], want)
    a.close()
    np.testing.assert_array_equal(ca.open(tmp_path / "a", mode="r")[:], want)


def test_a_whole_file_written_but_not_committed_is_ignored(tmp_path):
    root = tmp_path / "a"
    a = make(root, np.arange(100, dtype="i8"))
    a.flush()
    layout = a.engine._layout  # noqa: SLF001 - the test drives the layout directly
    assert isinstance(layout, SuperchunkLayout)
    chunk = a.engine.read_stored(0)
    for n in range(1, 8):  # fills superchunk 0 to its end, then all of superchunk 1
        layout.write_chunk(n, chunk)
    layout.files.sync()  # written, never committed (a crash)
    assert os.path.exists(sc_path(root, 1))
    b = ca.open(root, mode="r")
    assert len(b) == 100
    np.testing.assert_array_equal(b[:], np.arange(100))


def test_an_error_writing_a_file_surfaces_at_the_flush(tmp_path, monkeypatch):
    a = make(tmp_path / "a", np.arange(0))
    real_write = LocalStream.write

    def failing_write(self, parts):
        if "sc_000001" in str(self.path):
            raise OSError(28, "No space left on device")
        return real_write(self, parts)

    monkeypatch.setattr(LocalStream, "write", failing_write)
    a.append(np.arange(800, dtype="i8"))
    with pytest.raises(OSError):
        a.flush()
    _parallel.background("files").submit(lambda: None).result()
    monkeypatch.undo()
    a.close()  # written again, whole
    np.testing.assert_array_equal(ca.open(tmp_path / "a", mode="r")[:], np.arange(800))


def test_mode_w_replaces_a_dataset_and_clears_the_old_one_in_the_background(tmp_path):
    root = tmp_path / "a"
    make(root, np.arange(1000, dtype="i8")).close()
    a = make(root, np.arange(300, dtype="f4"))
    np.testing.assert_array_equal(a[:], np.arange(300, dtype="f4"))
    a.close()
    _parallel.background("cleanup").submit(lambda: None).result()  # let it finish
    assert sorted(os.listdir(tmp_path)) == ["a"]
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], np.arange(300, dtype="f4"))


def test_kept_chunks_are_written_when_the_interpreter_exits(tmp_path):
    import subprocess
    import sys
    import textwrap

    root = tmp_path / "a"
    code = textwrap.dedent(f"""
        import numpy as np, carray as ca
        a = ca.carray(np.zeros((0, 6)), chunks=(100, 3), rootdir={str(root)!r}, mode="w",
                      storage={{"superchunksize": 4}})
        a.append(np.arange(1450 * 6.0).reshape(1450, 6))
    """)  # no flush: the interpreter's exit flushes, after the worker threads stop
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    np.testing.assert_array_equal(ca.open(root, mode="r")[:],
                                  np.arange(1450 * 6.0).reshape(1450, 6))
