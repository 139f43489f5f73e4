"""The array engine: every operation is all-or-nothing on its state and its chunks."""

from __future__ import annotations

import errno

import numpy as np
import pytest

import carray as ca
from carray.layouts.base import Layout

WHERE = ["memory", "superchunk", "bcolz", "b2nd"]


def make(where, tmp_path, data, **kw):
    if where == "memory":
        return ca.carray(data, **kw)
    fmt = {"superchunk": "superchunk", "bcolz": "bcolz", "b2nd": "b2nd"}[where]
    root = tmp_path / ("a.b2nd" if where == "b2nd" else "a")
    return ca.carray(data, rootdir=root, format=fmt, **kw)


class FailOnce:
    """Make ``Layout.write_chunk`` raise ENOSPC on its ``nth`` call (counted from 0)."""

    def __init__(self, monkeypatch, nth: int) -> None:
        self.calls, self.nth = 0, nth
        real = type(self).real = Layout.write_chunk  # noqa: F841 - kept for the patch

        def write_chunk(layout, nchunk, data, digest=None):
            self.calls += 1
            if self.calls - 1 == self.nth:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.originals[type(layout)](layout, nchunk, data, digest)

        self.originals = {}
        for cls in _layout_classes():
            self.originals[cls] = cls.write_chunk
            monkeypatch.setattr(cls, "write_chunk", write_chunk)
        del real


def _layout_classes():
    from carray.layouts import B2ndLayout, MemoryLayout
    from carray.layouts.bcolz.layout import BcolzLayout
    from carray.layouts.superchunk.layout import SuperchunkLayout

    return [MemoryLayout, SuperchunkLayout, BcolzLayout, B2ndLayout]


def snapshot(a):
    return a.shape, a.engine.nfull, a.leftover, a.cbytes, a[:].copy()


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("nth", [0, 1, 3])
def test_a_failed_append_leaves_the_array_as_it_was(where, nth, tmp_path, monkeypatch):
    a = make(where, tmp_path, np.arange(250), chunklen=100)
    before = snapshot(a)
    FailOnce(monkeypatch, nth)
    with pytest.raises(OSError):
        a.append(np.arange(1000, 1600))
    shape, nfull, left, cbytes, values = snapshot(a)
    assert (shape, nfull, left, cbytes) == before[:4]
    np.testing.assert_array_equal(values, before[4])
    monkeypatch.undo()
    a.append(np.arange(7))  # it goes on working
    expect = np.concatenate([np.arange(250), np.arange(7)])
    np.testing.assert_array_equal(a[:], expect)
    if where != "memory":
        a.close()
        np.testing.assert_array_equal(ca.open(a.rootdir, mode="r")[:], expect)


@pytest.mark.parametrize("where", WHERE)
def test_a_failed_setitem_puts_back_the_chunks_it_rewrote(where, tmp_path, monkeypatch):
    a = make(where, tmp_path, np.arange(1000), chunklen=100)
    before = a[:].copy()
    FailOnce(monkeypatch, 2)  # the third chunk of the edit fails
    with pytest.raises(OSError):
        a[50:450] = -1
    monkeypatch.undo()
    np.testing.assert_array_equal(a[:], before)
    a.free_cachemem()
    np.testing.assert_array_equal(a[:], before)
    if where != "memory":
        a.close()
        np.testing.assert_array_equal(ca.open(a.rootdir, mode="r")[:], before)


@pytest.mark.parametrize("where", WHERE)
def test_a_failed_pointwise_write_changes_nothing(where, tmp_path, monkeypatch):
    a = make(where, tmp_path, np.arange(1000), chunklen=100)
    FailOnce(monkeypatch, 1)
    with pytest.raises(OSError):
        a.vindex[[5, 150, 250, 999]] = 0
    monkeypatch.undo()
    a.free_cachemem()
    np.testing.assert_array_equal(a[:], np.arange(1000))


@pytest.mark.parametrize("where", ["memory", "superchunk", "b2nd"])
def test_a_failed_nd_resize_restores_the_shape(where, tmp_path, monkeypatch):
    a = make(where, tmp_path, np.arange(60.0).reshape(6, 10), chunks=(4, 4), blocks=(2, 2))
    FailOnce(monkeypatch, 0)
    with pytest.raises(OSError):
        a.resize((6, 13))
    monkeypatch.undo()
    assert a.shape == (6, 10)


def test_listeners_see_every_full_chunk():
    seen = []

    class Listener:
        def chunk_written(self, nchunk, stats, stamp):
            seen.append((nchunk, int(stats.lo), int(stats.hi)))

        def chunks_dropped(self, first):
            seen.append(("dropped", first))

        def committing(self, engine, final):
            seen.append("commit")

    a = ca.carray(np.arange(0), dtype="i8", chunklen=10)
    a.engine.add_listener(Listener())
    a.append(np.arange(25))
    assert seen == [(0, 0, 9), (1, 10, 19)]
    a[12] = 100
    assert seen[-1] == (1, 10, 100)


def test_the_tail_counts_only_its_rows_in_cbytes(tmp_path):
    a = ca.carray(np.arange(150), chunklen=100, rootdir=tmp_path / "a", format="bcolz")
    a.close()
    b = ca.open(tmp_path / "a", mode="r")
    on_disk = sum(p.stat().st_size for p in (tmp_path / "a" / "data").iterdir())
    assert b.cbytes == on_disk


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("shape,chunks,blocks", [
    ((5000,), (1000,), None),
    ((60, 50, 40), (20, 25, 40), None),
    ((60, 50, 40), (20, 25, 40), (4, 5, 8)),
])
def test_single_items_read_the_right_value(where, shape, chunks, blocks, tmp_path):
    if where == "bcolz" and len(shape) > 1:
        chunks, blocks = (chunks[0], *shape[1:]), None  # bcolz stores whole rows
    data = np.random.default_rng(5).normal(size=shape).round(2)
    a = make(where, tmp_path, data, chunks=chunks, blocks=blocks)
    a.flush()
    b = a if where == "memory" else ca.open(a.rootdir, mode="r")
    rng = np.random.default_rng(6)
    for _ in range(200):
        idx = tuple(int(rng.integers(0, n)) for n in shape)
        assert b[idx] == data[idx]


def test_a_many_chunk_append_tells_listeners_in_order(tmp_path):
    a = ca.carray(np.arange(0), chunklen=100, rootdir=tmp_path / "a")
    seen = []

    class Listener:
        def chunk_written(self, nchunk, stats, stamp):
            seen.append((nchunk, int(stats.lo), int(stats.hi)))

        def chunks_dropped(self, first):
            pass

        def committing(self, engine, final):
            pass

    a.engine.add_listener(Listener())
    a.append(np.arange(2050))
    assert seen == [(n, n * 100, n * 100 + 99) for n in range(20)]


@pytest.mark.parametrize("dtype", ["f8", "i4", "u1", "?"])
def test_zone_maps_from_parallel_writes_match_chunk_by_chunk(dtype, tmp_path):
    rng = np.random.default_rng(8)
    data = (rng.normal(size=1000) * 50).astype(dtype)
    if dtype == "f8":
        data[120:130] = np.nan  # a chunk with NaNs
        data[300:400] = np.nan  # a chunk of NaNs only
        data[500] = np.inf
    whole = ca.carray(data, chunklen=100, rootdir=tmp_path / "whole")  # many chunks at once
    one = ca.carray(data[:0], chunklen=100, rootdir=tmp_path / "one")
    for i in range(0, 1000, 100):
        one.append(data[i:i + 100])  # one chunk per append
    a, b = whole.zone_map(), one.zone_map()
    assert a is not None and b is not None
    np.testing.assert_array_equal(a.known, b.known)
    np.testing.assert_array_equal(a.lo, b.lo)
    np.testing.assert_array_equal(a.hi, b.hi)
    np.testing.assert_array_equal(a.nan, b.nan)
    for field in ("full", "count", "nnan", "nonzero", "total", "fsum", "m2"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
