"""What every :class:`carray.stores.Store` must do, as tests any store can run.

A test module subclasses :class:`StoreConformance` and provides two fixtures:
``store`` (the store under test) and ``root`` (a fresh directory path inside it,
already made with ``store.makedirs``).  ``storage_options`` may be overridden for
stores whose URLs need options to be reopened.  :class:`FsspecStoreConformance`
adds the range cache of :class:`carray.stores.fsspec.FsspecStore`.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from carray.stores import Store, resolve


class StoreConformance:
    """Tests of the :class:`Store` and :class:`Handle` contracts."""

    @pytest.fixture
    def storage_options(self):
        return None

    @staticmethod
    def put(store: Store, path: str, data) -> str:
        """Put ``data`` at ``path``, making its directory first as layouts do."""
        store.makedirs(store.dirname(path))
        store.put(path, data, fsync=False)
        return path

    # -- whole objects ----------------------------------------------------------------------------

    def test_put_get_bytes(self, store, root):
        path = self.put(store, store.join(root, "a.bin"), b"hello world")
        assert store.get(path) == b"hello world"
        assert store.size(path) == 11

    def test_put_iterable_of_parts(self, store, root):
        arr = np.arange(10, dtype="<i4")
        parts = [b"head", bytearray(b"-"), memoryview(arr).cast("B"), arr[::-1].copy(), b""]
        path = self.put(store, store.join(root, "parts.bin"), iter(parts))
        assert store.get(path) == b"head-" + arr.tobytes() + arr[::-1].tobytes()

    def test_put_empty_object(self, store, root):
        path = self.put(store, store.join(root, "empty"), b"")
        assert store.get(path) == b""
        assert store.size(path) == 0
        assert store.isfile(path)
        with store.open(path) as h:
            assert h.size == 0
            assert h.pread(10, 0) == b""

    def test_overwrite(self, store, root):
        path = self.put(store, store.join(root, "a.bin"), b"first version, long")
        store.put(path, b"second", fsync=False)
        assert store.get(path) == b"second"
        assert store.size(path) == 6
        with store.open(path) as h:
            assert h.size == 6
            assert h.pread(100, 0) == b"second"

    def test_sync_file_and_dir(self, store, root):
        path = self.put(store, store.join(root, "later"), b"durable")
        store.sync_file(path)
        store.sync_dir(root)
        assert store.get(path) == b"durable"

    def test_missing_objects(self, store, root):
        path = store.join(root, "nothing")
        for call in (lambda: store.open(path), lambda: store.open(path, "r+"),
                     lambda: store.get(path), lambda: store.size(path),
                     lambda: store.delete(path)):
            with pytest.raises(FileNotFoundError):
                call()
        assert store.stamp(path) == (-1, -1)

    def test_bad_open_mode(self, store, root):
        path = self.put(store, store.join(root, "a"), b"x")
        with pytest.raises(ValueError, match="mode"):
            store.open(path, "w")

    # -- read handles -----------------------------------------------------------------------------

    def test_pread(self, store, root):
        data = bytes(range(256)) * 4
        path = self.put(store, store.join(root, "r.bin"), data)
        with store.open(path) as h:
            assert h.size == len(data)
            assert h.pread(10, 0) == data[:10]
            assert h.pread(100, 500) == data[500:600]
            assert h.pread(0, 5) == b""
            assert h.pread(50, len(data) - 20) == data[-20:]  # past the end: fewer bytes
            assert h.pread(10, len(data)) == b""  # at the end: nothing
            assert h.pread(10, len(data) + 100) == b""  # after the end: nothing

    def test_pread_into(self, store, root):
        data = np.arange(1000, dtype="<u2").tobytes()
        path = self.put(store, store.join(root, "r.bin"), data)
        with store.open(path) as h:
            buf = np.zeros(100, np.uint8)
            assert h.pread_into(buf, 10) == 100
            assert buf.tobytes() == data[10:110]
            out = np.zeros(50, "<u2")  # a typed buffer is filled byte by byte
            assert h.pread_into(out, 200) == 100
            assert out.tobytes() == data[200:300]
            tail = bytearray(b"\xff" * 64)
            assert h.pread_into(tail, len(data) - 16) == 16  # past the end: fewer
            assert tail[:16] == data[-16:] and tail[16:] == b"\xff" * 48
            assert h.pread_into(bytearray(8), len(data)) == 0
            assert h.pread_into(bytearray(8), len(data) + 8) == 0

    def test_write_on_read_handle_is_refused(self, store, root):
        path = self.put(store, store.join(root, "ro"), b"read only")
        with store.open(path) as h:
            with pytest.raises(PermissionError):
                h.pwrite(b"x", 0)
            with pytest.raises(PermissionError):
                h.truncate(2)
        assert store.get(path) == b"read only"

    # -- write handles ----------------------------------------------------------------------------

    def test_pwrite_in_the_middle(self, store, root):
        path = self.put(store, store.join(root, "w.bin"), b"0123456789")
        with store.open(path, "r+") as h:
            h.pwrite(b"ab", 4)
            assert h.size == 10
            assert h.pread(10, 0) == b"0123ab6789"  # the handle sees its own writes
            h.sync()
        with store.open(path) as fresh:
            assert fresh.pread(10, 0) == b"0123ab6789"
        assert store.get(path) == b"0123ab6789"

    def test_pwrite_past_the_end_fills_with_zeros(self, store, root):
        path = self.put(store, store.join(root, "w.bin"), b"abc")
        with store.open(path, "r+") as h:
            h.pwrite(np.array([1, 2], dtype="<u2"), 6)
            assert h.size == 10
            h.sync()
        assert store.get(path) == b"abc\0\0\0\x01\0\x02\0"
        assert store.size(path) == 10

    def test_sync_then_close_keeps_the_writes(self, store, root):
        path = self.put(store, store.join(root, "w.bin"), b"abc")
        h = store.open(path, "r+")
        h.pwrite(b"Z", 1)
        h.sync()
        h.close()  # never uploads by itself: it may run in a finalizer
        assert store.get(path) == b"aZc"

    def test_truncate(self, store, root):
        path = self.put(store, store.join(root, "t.bin"), b"0123456789")
        with store.open(path, "r+") as h:
            h.truncate(4)
            assert h.size == 4
            assert h.pread(10, 0) == b"0123"
            h.sync()
        assert store.get(path) == b"0123"
        with store.open(path, "r+") as h:
            h.truncate(6)  # growing fills with zeros
            h.sync()
        assert store.get(path) == b"0123\0\0"
        with store.open(path, "r+") as h:
            h.truncate(0)
            h.pwrite(b"new", 0)
            h.sync()
        assert store.get(path) == b"new"

    # -- names ------------------------------------------------------------------------------------

    def test_exists_isfile_isdir(self, store, root):
        sub = store.join(root, "sub")
        path = self.put(store, store.join(sub, "f"), b"x")
        assert store.exists(path) and store.isfile(path) and not store.isdir(path)
        assert store.exists(sub) and store.isdir(sub) and not store.isfile(sub)
        missing = store.join(root, "missing")
        assert not store.exists(missing)
        assert not store.isfile(missing)
        assert not store.isdir(missing)

    def test_listdir(self, store, root):
        self.put(store, store.join(root, "b"), b"1")
        self.put(store, store.join(root, "a"), b"2")
        self.put(store, store.join(root, "d", "inner"), b"3")
        self.put(store, store.join(root, "d", "deeper", "x"), b"4")
        assert sorted(store.listdir(root)) == ["a", "b", "d"]
        assert sorted(store.listdir(store.join(root, "d"))) == ["deeper", "inner"]
        assert store.listdir(store.join(root, "missing")) == []

    def test_makedirs_then_put(self, store, root):
        sub = store.join(root, "x", "y", "z")
        store.makedirs(sub)
        store.makedirs(sub)  # already there: fine
        store.put(store.join(sub, "obj"), b"data", fsync=False)
        assert store.isdir(sub)
        assert store.get(store.join(sub, "obj")) == b"data"
        assert store.listdir(store.join(root, "x")) == ["y"]

    def test_delete(self, store, root):
        path = self.put(store, store.join(root, "gone"), b"bye")
        keep = self.put(store, store.join(root, "kept"), b"stay")
        store.delete(path)
        assert not store.exists(path)
        assert store.get(keep) == b"stay"
        with pytest.raises(FileNotFoundError):
            store.delete(path)

    def test_rmtree_directory(self, store, root):
        tree = store.join(root, "tree")
        for name in ("a", "b/c", "b/d/e"):
            self.put(store, store.join(tree, *name.split("/")), name.encode())
        # A sibling whose name starts with the tree's must survive.
        sibling = self.put(store, store.join(root, "tree2", "f"), b"sibling")
        store.rmtree(tree)
        assert not store.exists(tree)
        assert store.listdir(tree) == []
        assert store.get(sibling) == b"sibling"
        assert sorted(store.listdir(root)) == ["tree2"]

    def test_rmtree_single_object(self, store, root):
        path = self.put(store, store.join(root, "one"), b"1")
        store.rmtree(path)
        assert not store.exists(path)

    def test_rmtree_missing(self, store, root):
        with pytest.raises(FileNotFoundError):
            store.rmtree(store.join(root, "missing"))

    def test_rename_object(self, store, root):
        src = self.put(store, store.join(root, "src"), b"new contents")
        dst = self.put(store, store.join(root, "dst"), b"old")
        store.rename(src, dst)
        assert not store.exists(src)
        assert store.get(dst) == b"new contents"
        assert store.size(dst) == 12
        other = store.join(root, "fresh")
        store.rename(dst, other)  # to a name not taken yet
        assert store.get(other) == b"new contents"
        assert not store.exists(dst)
        with pytest.raises(FileNotFoundError):
            store.rename(dst, src)

    def test_rename_directory(self, store, root):
        src = store.join(root, "from")
        for name in ("a", "b/c"):
            self.put(store, store.join(src, *name.split("/")), name.encode())
        dst = store.join(root, "to")
        store.rename(src, dst)
        assert not store.exists(src)
        assert store.get(store.join(dst, "a")) == b"a"
        assert store.get(store.join(dst, "b", "c")) == b"b/c"
        assert sorted(store.listdir(dst)) == ["a", "b"]

    # -- stamps, ranges, urls, pickling -----------------------------------------------------------

    def test_stamp(self, store, root):
        path = self.put(store, store.join(root, "s"), b"version 1")
        first = store.stamp(path)
        assert first == store.stamp(path)
        assert first[0] == 9
        store.put(path, b"version 2", fsync=False)  # same size, new bytes
        assert store.stamp(path) != first
        store.put(path, b"v3", fsync=False)
        assert store.stamp(path)[0] == 2
        store.delete(path)
        assert store.stamp(path) == (-1, -1)

    def test_get_ranges(self, store, root):
        rng = np.random.default_rng(7)
        blobs = {}
        for i in range(3):
            path = store.join(root, f"o{i}")
            blobs[path] = rng.integers(0, 256, 5000 + 1000 * i, np.uint8).tobytes()
            self.put(store, path, blobs[path])
        paths = sorted(blobs)
        requests = []
        for _ in range(40):
            path = paths[int(rng.integers(3))]
            offset = int(rng.integers(0, len(blobs[path])))
            requests.append((path, offset, int(rng.integers(1, len(blobs[path]) - offset + 1))))
        requests.append(requests[0])  # the same range twice
        got = store.get_ranges(requests)
        assert got == [blobs[p][o:o + n] for p, o, n in requests]
        assert store.get_ranges([]) == []
        [one] = store.get_ranges([(paths[0], 10, 5)])
        assert one == blobs[paths[0]][10:15]

    def test_url(self, store, root, storage_options):
        path = self.put(store, store.join(root, "named.bin"), b"by url")
        url = store.url(path)
        assert isinstance(url, str) and url.endswith("named.bin")
        again, again_path = resolve(url, storage_options)
        assert again.get(again_path) == b"by url"

    def test_pickle(self, store, root):
        path = self.put(store, store.join(root, "p"), b"pickled")
        copy = pickle.loads(pickle.dumps(store))
        assert isinstance(copy, type(store))
        assert copy.get(path) == b"pickled"
        with copy.open(path) as h:
            assert h.pread(3, 2) == b"ckl"

    def test_handles_are_independent(self, store, root):
        path = self.put(store, store.join(root, "h"), b"abcdef")
        with store.open(path) as r1, store.open(path) as r2:
            assert r1.pread(3, 0) == b"abc"
            assert r2.pread(3, 3) == b"def"


class FsspecStoreConformance(StoreConformance):
    """Adds the byte-range cache of :class:`~carray.stores.fsspec.FsspecStore`."""

    @pytest.fixture
    def fetches(self, store, monkeypatch):
        """Calls of ``store.fs.cat_file`` while the test runs, as (path, start, end)."""
        calls: list[tuple] = []
        real = store.fs.cat_file

        def counting(path, start=None, end=None, **kwargs):
            calls.append((path, start, end))
            return real(path, start=start, end=end, **kwargs)

        monkeypatch.setattr(store.fs, "cat_file", counting)
        return calls

    def test_second_read_comes_from_the_cache(self, store, root, fetches):
        path = self.put(store, store.join(root, "c"), bytes(range(200)))
        with store.open(path) as h:
            assert h.pread(100, 50) == bytes(range(50, 150))
        n = len(fetches)
        assert n >= 1
        with store.open(path) as h:
            assert h.pread(100, 50) == bytes(range(50, 150))
            assert h.pread(10, 60) == bytes(range(60, 70))  # inside a cached range
        assert store.get_ranges([(path, 50, 100)]) == [bytes(range(50, 150))]
        assert len(fetches) == n
        with store.open(path) as h:
            assert h.pread(10, 190) == bytes(range(190, 200))  # not cached yet
        assert len(fetches) == n + 1

    @staticmethod
    def read_all(store: Store, path: str) -> bytes:
        with store.open(path) as h:
            return h.pread(h.size, 0)

    @pytest.mark.parametrize("change", ["put", "pwrite", "rename", "delete", "rmtree",
                                        "invalidate"])
    def test_changes_invalidate_the_cache(self, store, root, fetches, change):
        path = self.put(store, store.join(root, "c"), b"old bytes")
        other = self.put(store, store.join(root, "other"), b"NEW BYTES")
        assert self.read_all(store, path) == b"old bytes"
        assert self.read_all(store, other) == b"NEW BYTES"  # both cached now
        if change == "put":
            store.put(path, b"NEW BYTES", fsync=False)
        elif change == "pwrite":
            with store.open(path, "r+") as w:
                w.pwrite(b"NEW BYTES", 0)
                w.sync()
        elif change == "rename":
            store.rename(other, path)
        else:
            # The store drops the object, then it is rewritten behind the store's back.
            if change == "delete":
                store.delete(path)
            elif change == "rmtree":
                store.rmtree(path)
            store.fs.pipe_file(path, b"NEW BYTES")
            if change == "invalidate":
                store.invalidate(path)
        n = len(fetches)
        assert self.read_all(store, path) == b"NEW BYTES"
        assert len(fetches) == n + 1
