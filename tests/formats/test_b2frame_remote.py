"""Blosc2 frames written to remote stores (``memory://`` and S3 served by moto): the same
bytes as a local write, read back by carray and by python-blosc2, replaced whole, and
nothing left behind by a failed write."""

from __future__ import annotations

import os

import blosc2
import numpy as np
import pytest

from carray.errors import ContainerExistsError
from carray.layouts.b2nd import write as _b2frame_write
from carray.layouts.b2nd.frame import read_array, read_frame, write_array
from carray.stores import resolve

pytest.importorskip("fsspec", reason="fsspec is the 'remote' extra (CI has it)")

# Compressible, with two all-zero chunks (stored as special offsets, no bytes).
ARRAY = (np.arange(120 * 90, dtype="<i4").reshape(120, 90) // 7) % 1000
ARRAY[:40, :30] = 0
GRID = {"chunks": (40, 30), "blocks": (10, 15)}
ATTRS = {"units": "m", "scale": [1, 2.5]}


@pytest.fixture
def one_thread():
    """Blosc2 compressing on one thread: with several, the same input now and then
    compresses to different (equally valid) bytes, which byte comparisons cannot allow."""
    before = blosc2.nthreads
    blosc2.set_nthreads(1)
    yield
    blosc2.set_nthreads(before)


def local_copy(url: str, options, dst) -> str:
    """The object (or sparse directory) at ``url`` fetched to the local path ``dst``."""
    store, path = resolve(url, options)
    store.fs.get(path, os.fspath(dst), recursive=store.isdir(path))
    return os.fspath(dst)


def tree(path) -> dict[str, bytes]:
    """Every file under ``path`` (or ``path`` itself) by relative name."""
    if os.path.isfile(path):
        with open(path, "rb") as f:
            return {"": f.read()}
    out = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_remote_frame_reads_back_and_matches_a_local_write(remote_root, tmp_path, contiguous,
                                                          one_thread):
    root, options = remote_root
    url = f"{root}/sub/a.b2nd"
    write_array(ARRAY, url, contiguous=contiguous, vlmeta=ATTRS, storage_options=options,
                **GRID)
    got = read_array(url, storage_options=options)
    assert got.dtype == ARRAY.dtype and np.array_equal(got, ARRAY)
    with read_frame(url, storage_options=options) as f:
        assert f.contiguous == contiguous and f.vlmeta == ATTRS
        assert (f.chunkshape, f.blockshape) == (GRID["chunks"], GRID["blocks"])

    local = tmp_path / "local.b2nd"
    write_array(ARRAY, local, contiguous=contiguous, vlmeta=ATTRS, **GRID)
    fetched = local_copy(url, options, tmp_path / "fetched.b2nd")
    assert tree(fetched) == tree(local)
    b2 = blosc2.open(fetched, mode="r")
    assert np.array_equal(b2[...], ARRAY) and b2.chunks == GRID["chunks"]
    assert b2.vlmeta["units"] == "m"


def test_remote_frames_replace_each_other(remote_root):
    root, options = remote_root
    url = f"{root}/o.b2nd"
    store, path = resolve(url, options)
    write_array(np.arange(50), url, contiguous=False, chunks=(10,), blocks=(5,),
                storage_options=options)
    write_array(np.arange(5.0), url, storage_options=options)
    assert store.isfile(path) and not store.isdir(path)
    assert np.array_equal(read_array(url, storage_options=options), np.arange(5.0))
    write_array(np.arange(3), url, contiguous=False, storage_options=options)
    assert store.isdir(path)
    assert np.array_equal(read_array(url, storage_options=options), np.arange(3))
    assert store.listdir(store.dirname(path)) == ["o.b2nd"]  # no temporary left
    assert sorted(store.listdir(path)) == ["00000000.chunk", "chunks.b2frame"]


def test_remote_refuses_to_replace_a_directory_that_is_not_a_frame(remote_root):
    root, options = remote_root
    store, path = resolve(f"{root}/dir", options)
    store.put(store.join(path, "keep.txt"), b"x")
    with pytest.raises(ContainerExistsError, match="not a sparse frame") as info:
        write_array(np.arange(3), f"{root}/dir", storage_options=options)
    assert store.url(path) in str(info.value)
    assert store.get(store.join(path, "keep.txt")) == b"x"


@pytest.mark.parametrize("contiguous", [True, False], ids=["cframe", "sframe"])
def test_a_failed_remote_write_leaves_nothing(remote_root, monkeypatch, contiguous):
    root, options = remote_root
    url = f"{root}/f.b2nd"
    real, calls = _b2frame_write.compress2, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(_b2frame_write, "compress2", failing)
    with pytest.raises(KeyboardInterrupt):
        write_array(ARRAY, url, contiguous=contiguous, storage_options=options, **GRID)
    store, path = resolve(url, options)
    store.invalidate()
    assert not store.exists(path)
    assert store.listdir(store.dirname(path)) == []
