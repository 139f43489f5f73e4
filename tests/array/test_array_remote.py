"""carrays and ctables at fsspec URLs: ``memory://`` and S3 (moto's server on loopback)."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest

import carray as ca
from carray.errors import ContainerExistsError, ContainerNotFoundError, ReadOnlyError
from carray.stores import resolve
from carray.stores.fsspec import FsspecStore

_ids = itertools.count()
FORMATS = ["superchunk", "bcolz", "b2nd"]


@pytest.fixture(params=["memory", "s3"])
def where(request):
    """``(url maker, storage_options)`` for a fresh location on each store."""
    n = next(_ids)
    if request.param == "memory":
        yield (lambda name: f"memory://carray-remote/{n}/{name}"), None
        import fsspec

        fs = fsspec.filesystem("memory")
        if fs.exists(f"/carray-remote/{n}"):
            fs.rm(f"/carray-remote/{n}", recursive=True)
    else:
        s3 = request.getfixturevalue("s3")
        yield (lambda name: s3.url(f"remote/{n}/{name}")), s3.storage_options


def _data(fmt: str) -> np.ndarray:
    a = np.random.default_rng(3).normal(size=(90, 12, 10))
    return a.reshape(90, -1) if fmt == "bcolz" else a


def _grid(fmt: str) -> dict:
    return {} if fmt == "bcolz" else {"chunks": (16, 8, 8), "blocks": (4, 4, 8)}


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_edit_reopen(where, fmt):
    url_of, opts = where
    url = url_of("a.b2nd" if fmt == "b2nd" else "a")
    data = _data(fmt)
    a = ca.carray(data, rootdir=url, format=fmt, storage_options=opts, chunklen=16
                  if fmt == "bcolz" else None, **_grid(fmt))
    a.append(data[:7])
    a[3] = 7.5
    a.attrs["units"] = "m"
    a.flush()
    expect = np.concatenate([data, data[:7]])
    expect[3] = 7.5
    b = ca.open(url, mode="r", storage_options=opts)
    assert b.rootdir == url
    np.testing.assert_array_equal(b[:], expect)
    np.testing.assert_array_equal(b[5:80:3, 2], expect[5:80:3, 2])
    assert b.attrs["units"] == "m"
    with pytest.raises(ReadOnlyError):
        b[0] = 1
    c = ca.open(url, mode="a", storage_options=opts)
    c.resize(40)
    c.flush()
    np.testing.assert_array_equal(ca.open(url, mode="r", storage_options=opts)[:],
                                  expect[:40])


def test_create_refuses_existing_and_open_names_missing(where):
    url_of, opts = where
    ca.carray(np.arange(10), rootdir=url_of("x"), storage_options=opts)
    with pytest.raises(ContainerExistsError, match="x"):
        ca.carray(np.arange(10), rootdir=url_of("x"), storage_options=opts)
    ca.carray(np.arange(5), rootdir=url_of("x"), storage_options=opts, mode="w")
    assert len(ca.open(url_of("x"), storage_options=opts)) == 5
    with pytest.raises(ContainerNotFoundError, match="nothing-here"):
        ca.open(url_of("nothing-here"), storage_options=opts)


def test_table_with_strings(where):
    url_of, opts = where
    url = url_of("t")
    t = ca.ctable({"x": np.arange(500), "s": [f"v{i}" for i in range(500)]}, rootdir=url,
                  storage_options=opts)
    t.append({"x": [500], "s": ["last"]})
    t.flush()
    u = ca.open(url, mode="r", storage_options=opts)
    assert len(u) == 501 and u["x"][500] == 500 and str(u["s"][500]) == "last"
    assert [str(v) for v in u["s"][10:13]] == ["v10", "v11", "v12"]


def test_local_paths_refuse_storage_options(tmp_path):
    with pytest.raises(ValueError, match="storage_options"):
        ca.carray(np.arange(3), rootdir=tmp_path / "a", storage_options={"key": "k"})


# -- what is fetched ----------------------------------------------------------------------

def _spy(monkeypatch):
    """Record every ranged read (path, offset, length) and the most made at once."""
    seen: list[tuple[str, int, int]] = []
    state = {"now": 0, "most": 0}
    lock = threading.Lock()
    real = FsspecStore.read_range

    def read_range(self, path, offset, n):
        with lock:
            seen.append((path, offset, n))
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        try:
            time.sleep(0.002)  # a network round trip, so that overlapping fetches show
            return real(self, path, offset, n)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(FsspecStore, "read_range", read_range)
    return seen, state


def test_partial_read_fetches_only_its_bytes(where, monkeypatch):
    url_of, opts = where
    url = url_of("big")
    a = ca.carray(np.arange(400_000, dtype="f8"), chunklen=25_000, rootdir=url,
                  storage_options=opts, cparams=ca.CParams(clevel=1),
                  storage={"superchunksize": 16})
    a.close()
    b = ca.open(url, mode="r", storage_options=opts)
    b[0]  # opens the superchunk file: header, metadata, offsets
    seen, _ = _spy(monkeypatch)
    assert b[123_457] == 123_457.0
    fetched = sum(n for _, _, n in seen)
    assert fetched < 60_000, seen  # the superchunk holds ~1.6 MB; one chunk ~100 KB
    assert all(p.rsplit("/", 1)[-1].startswith("sc_000000_") for p, _, _ in seen)


def test_chunks_are_fetched_concurrently(where, monkeypatch):
    url_of, opts = where
    url = url_of("c")
    data = np.random.default_rng(0).normal(size=(64, 64, 64))
    a = ca.carray(data, rootdir=url, storage_options=opts, chunks=(16, 16, 16))
    a.close()
    b = ca.open(url, mode="r", storage_options=opts)
    b[0, 0, 0]
    _, state = _spy(monkeypatch)
    np.testing.assert_array_equal(b[:], data)
    assert state["most"] > 4  # 64 chunks, fetched many at a time


def test_repeated_reads_come_from_the_range_cache(where, monkeypatch):
    url_of, opts = where
    url = url_of("r")
    ca.carray(np.arange(100_000), chunklen=10_000, rootdir=url, storage_options=opts)
    b = ca.open(url, mode="r", storage_options=opts)
    b[55_000]
    calls = []
    fs = resolve(url, opts)[0].fs  # fsspec shares one file system per set of options
    real = fs.cat_file
    monkeypatch.setattr(fs, "cat_file", lambda *a, **k: calls.append(a) or real(*a, **k))
    b.free_cachemem()
    assert b[55_001] == 55_001
    assert calls == []


def test_reading_most_of_a_superchunk_fetches_it_whole(where, monkeypatch):
    url_of, opts = where
    url = url_of("whole")
    data = np.arange(64_000, dtype="f8")
    ca.carray(data, chunklen=4000, rootdir=url, storage_options=opts,
              storage={"superchunksize": 4}).close()
    b = ca.open(url, mode="r", storage_options=opts)
    fs = resolve(url, opts)[0].fs  # fsspec shares one file system per set of options
    requests = []
    for name in ("cat_file", "info"):
        real = getattr(fs, name)
        monkeypatch.setattr(fs, name, lambda *a, _real=real, _name=name, **k:
                            requests.append(_name) or _real(*a, **k))
    np.testing.assert_array_equal(b[:], data)
    # One GET per file, and one for the page of the index (read once, then kept).
    assert requests.count("cat_file") == 4 + 1 and "info" not in requests
    np.testing.assert_array_equal(b[:], data)  # the files are open now: ranged reads


# -- sharding: a part of the dataset lives in files of its own ------------------------------

def _record(monkeypatch, store_cls=FsspecStore):
    """Paths read (``get``/ranged reads) and written (``put``) through any FsspecStore."""
    seen = {"read": set(), "put": []}
    real_range, real_get, real_put = (store_cls.read_range, store_cls.get, store_cls.put)

    def read_range(self, path, offset, n):
        seen["read"].add(path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1])
        return real_range(self, path, offset, n)

    def get(self, path):
        seen["read"].add(path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1])
        return real_get(self, path)

    def put(self, path, data, *, fsync=True):
        seen["put"].append(path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1])
        return real_put(self, path, data, fsync=fsync)

    def put_if_absent(self, path, data, *, fsync=True):
        seen["put"].append(path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1])
        return real_create(self, path, data, fsync=fsync)

    real_create = store_cls.put_if_absent
    monkeypatch.setattr(store_cls, "read_range", read_range)
    monkeypatch.setattr(store_cls, "get", get)
    monkeypatch.setattr(store_cls, "put", put)
    monkeypatch.setattr(store_cls, "put_if_absent", put_if_absent)
    return seen


def test_a_reader_of_one_part_touches_only_its_file(where, monkeypatch):
    url_of, opts = where
    url = url_of("sharded")
    ca.carray(np.arange(80_000), chunklen=1000, rootdir=url, storage_options=opts,
              storage={"superchunksize": 10}).close()
    seen = _record(monkeypatch)
    b = ca.open(url, mode="r", storage_options=opts)
    np.testing.assert_array_equal(b[31_000:38_000], np.arange(31_000, 38_000))
    # (on object stores a commit writes files of its own: sc_KKKKKK_G.blp)
    data_files = {p.split("_")[1].split(".")[0] for p in seen["read"] if p.startswith("data/")}
    assert data_files == {"000003"}
    assert {p for p in seen["read"] if not p.startswith(("data/", "versions/"))} <= {
        "meta/storage", "meta/member"}


def test_an_append_writes_new_objects_and_never_rewrites_one(where, monkeypatch):
    """On object stores a commit writes its records to files of its own: nothing a
    published version refers to is ever rewritten (docs/spec/commit.md [C2])."""
    url_of, opts = where
    url = url_of("appended")
    ca.carray(np.arange(45_000), chunklen=1000, rootdir=url, storage_options=opts,
              storage={"superchunksize": 10}).close()
    store, root = resolve(url, opts)
    before = set(store.listdir(store.join(root, "data")))
    a = ca.open(url, mode="a", storage_options=opts)
    seen = _record(monkeypatch)
    a.append(np.arange(45_000, 52_000))
    a.flush()
    # (zone maps are a cache of chunk summaries, one file per segment of chunks)
    data = {p for p in seen["put"] if p.startswith("data/")}
    assert {p.split("_")[1] for p in data} == {"000004", "000005"}
    assert not {p.split("/")[1] for p in data} & before  # new objects only
    others = {p for p in seen["put"] if not p.startswith(("versions/", "data/"))}
    assert others <= {"meta/zonemap_000000.npy"}
    assert any(p.endswith(".mf") for p in seen["put"])
    np.testing.assert_array_equal(ca.open(url, mode="r", storage_options=opts)[:],
                                  np.arange(52_000))
