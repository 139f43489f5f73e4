"""The store conformance suite on every store: local disk, and fsspec over memory, the
local file system and S3 (moto's server on loopback)."""

from __future__ import annotations

import contextlib
import uuid

import fsspec  # noqa: E402 - the 'remote' extra, a test dependency
import pytest

from carray.stores import LOCAL, LocalStore, is_url, resolve
from carray.stores.fsspec import FsspecStore, RangeCache  # noqa: E402

from .conformance import FsspecStoreConformance, StoreConformance


class TestLocalStore(StoreConformance):
    @pytest.fixture
    def store(self):
        return LOCAL

    @pytest.fixture
    def root(self, tmp_path):
        path = str(tmp_path / "root")
        LOCAL.makedirs(path)
        return path


class TestMemoryStore(FsspecStoreConformance):
    @pytest.fixture
    def store(self):
        store, _ = resolve("memory://")
        return store

    @pytest.fixture
    def root(self, store):
        path = f"/conformance-{uuid.uuid4().hex}"
        store.makedirs(path)
        yield path
        with contextlib.suppress(FileNotFoundError):
            store.fs.rm(path, recursive=True)


class TestFileSystemStore(FsspecStoreConformance):
    """fsspec's own local file system, through the fsspec store (not :class:`LocalStore`)."""

    @pytest.fixture
    def store(self):
        return FsspecStore(fsspec.filesystem("file"))

    @pytest.fixture
    def root(self, tmp_path):
        path = (tmp_path / "root").as_posix()
        LOCAL.makedirs(path)
        return path


class TestS3Store(FsspecStoreConformance):
    @pytest.fixture
    def storage_options(self, s3):
        return s3.storage_options

    @pytest.fixture
    def store(self, s3):
        store, _ = resolve(s3.url(""), s3.storage_options)
        return store

    @pytest.fixture
    def root(self, s3, store):
        _, path = resolve(s3.url(f"conformance-{uuid.uuid4().hex}"), s3.storage_options)
        yield path
        with contextlib.suppress(FileNotFoundError):
            store.rmtree(path)


# -- resolve and the cache on their own ------------------------------------------------------------

def test_resolve(tmp_path):
    assert resolve(str(tmp_path)) == (LOCAL, str(tmp_path))
    assert resolve(tmp_path) == (LOCAL, str(tmp_path))
    assert resolve(f"file://{tmp_path}") == (LOCAL, str(tmp_path))
    store, path = resolve("memory://some/where/")
    assert isinstance(store, FsspecStore) and path == "/some/where"
    assert resolve((store, "x")) == (store, "x")
    with pytest.raises(ValueError, match="storage_options"):
        resolve(str(tmp_path), {"anon": True})
    assert is_url("s3://b/k") and is_url("memory://x")
    assert not is_url("file:///x") and not is_url("/x") and not is_url(tmp_path)
    assert isinstance(LOCAL, LocalStore)


def test_range_cache_budget_and_forget():
    cache = RangeCache(budget=100)
    cache.add("p", 0, b"x" * 60)
    cache.add("p", 100, b"y" * 60)  # over budget: the oldest goes
    assert cache.get("p", 0, 10) is None
    assert cache.get("p", 110, 10) == b"y" * 10
    cache.add("p", 100, b"z" * 60)  # the same range again replaces it
    assert cache.get("p", 100, 60) == b"z" * 60
    cache.add("q/r", 0, b"q" * 10)
    cache.add("qq", 0, b"q" * 10)
    cache.forget("q")  # q and everything under it, not qq
    assert cache.get("q/r", 0, 1) is None
    assert cache.get("qq", 0, 10) == b"q" * 10
    assert cache.get("p", 100, 60) == b"z" * 60
    cache.add("big", 0, b"b" * 101)  # larger than the budget: not kept
    assert cache.get("big", 0, 1) is None
    cache.forget()
    assert cache.get("p", 100, 1) is None
