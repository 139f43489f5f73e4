"""Fixtures shared by several test modules."""

from __future__ import annotations

import collections
import collections.abc
import importlib

import pytest

from carray.stores.local import LocalHandle


@pytest.fixture(autouse=True)
def _empty_memory_filesystem():
    """fsspec's ``memory://`` is one store for the whole process, and looking a path up
    scans every key in it: what a test leaves there is emptied after it, so that tests
    late in a run do not pay for every earlier one."""
    yield
    from fsspec.implementations.memory import MemoryFileSystem

    MemoryFileSystem.store.clear()
    MemoryFileSystem.pseudo_dirs[:] = [""]


@pytest.fixture
def frozen_gc():
    """Objects alive before the test are left out of garbage collections while it runs:
    a test calling ``gc.collect()`` in a loop (to drop a killed writer's handles) then
    pays for what it made, not for every module and object the session holds."""
    import gc

    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(params=["memory", "disk"])
def where(request, tmp_path):
    """``ctable`` arguments for a table in memory, then on disk."""
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


@pytest.fixture
def count_reads(monkeypatch):
    """Bytes read from local files while the test runs: ``{"bytes": total, "reads": [n...]}``.

    Every local read of a layout or a file format goes through a
    :class:`carray.stores.local.LocalHandle`, so counting there sees them all.
    """
    total = {"bytes": 0, "reads": []}
    pread, pread_into = LocalHandle.pread, LocalHandle.pread_into
    preadv_into = LocalHandle.preadv_into

    def note(n: int) -> None:
        total["bytes"] += n
        total["reads"].append(n)

    def counting_pread(self, n, offset):
        data = pread(self, n, offset)
        note(len(data))
        return data

    def counting_pread_into(self, buf, offset):
        n = pread_into(self, buf, offset)
        note(n)
        return n

    def counting_preadv_into(self, bufs, offset):
        n = preadv_into(self, bufs, offset)
        note(n)
        return n

    monkeypatch.setattr(LocalHandle, "pread", counting_pread)
    monkeypatch.setattr(LocalHandle, "pread_into", counting_pread_into)
    monkeypatch.setattr(LocalHandle, "preadv_into", counting_preadv_into)
    return total


@pytest.fixture(scope="session")
def bloscpack_peer():
    """The real bloscpack 0.16, a test dependency.

    It still imports ABCs from ``collections`` (gone in Python 3.10), so those
    names are put back first; nothing else changes.
    """
    for name in ("MutableMapping", "Mapping", "Sequence", "Iterable"):
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    module = importlib.import_module("bloscpack")
    importlib.import_module("bloscpack.append")  # a submodule the package does not import
    return module


@pytest.fixture(scope="session")
def s3():
    """A private S3 endpoint (moto's server on 127.0.0.1) shared by the whole session.

    Yields a :class:`carray.testing.S3Endpoint`: ``s3.url(key)`` is ``s3://bucket/key``
    and ``s3.storage_options`` what s3fs needs to reach it.  moto and s3fs are test
    dependencies.
    """
    from carray.testing import s3_server

    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture(params=["memory", "s3"])
def remote_root(request):
    """A fresh remote directory as ``(url, storage_options)``: once on ``memory://``, once
    on the session's S3 endpoint (see :func:`s3`); removed afterwards."""
    import contextlib
    import uuid

    from carray.stores import resolve

    name = f"carray-test-{uuid.uuid4().hex}"
    if request.param == "memory":
        url, options = f"memory://{name}", None
    else:
        s3 = request.getfixturevalue("s3")
        url, options = s3.url(name), s3.storage_options
    yield url, options
    store, path = resolve(url, options)
    with contextlib.suppress(FileNotFoundError):
        store.rmtree(path)


@pytest.fixture
def remote_fetches(remote_root, monkeypatch):
    """Byte counts of the ranges read from :func:`remote_root`'s file system while the
    test runs (every read of a remote object goes through ``cat_file``)."""
    from carray.stores import resolve

    fs = resolve(*remote_root)[0].fs  # fsspec hands out one instance per set of options
    sizes: list[int] = []
    real = fs.cat_file

    def counting(path, start=None, end=None, **kwargs):
        data = real(path, start=start, end=end, **kwargs)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(fs, "cat_file", counting)
    return sizes
