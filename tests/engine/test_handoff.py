"""Appends hand filled chunks to the compressing threads: nothing is lost or reordered,
and a storage error reaches the caller with the handed-over items kept."""

from __future__ import annotations

import errno

import numpy as np
import pytest
from test_core import WHERE, _layout_classes, make

import carray as ca
from carray.codecs import parallel as _parallel
from carray.engine.handoff import Handoff


@pytest.fixture(autouse=True)
def two_workers(monkeypatch):
    """Handing over needs a spare thread: have two, whatever this machine has."""
    monkeypatch.setattr(_parallel, "workers", lambda: 2)


def append_in_pieces(a, data, step):
    for i in range(0, len(data), step):
        a.append(data[i:i + step])


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("shape", [(), (3, 5)])
def test_small_appends_read_back_at_once_and_after_reopening(where, shape, tmp_path):
    data = np.arange(2000 * max(1, int(np.prod(shape)))).reshape(2000, *shape) * 3 + 1
    if where == "bcolz" and shape:
        a = make(where, tmp_path, data[:0], chunklen=64)  # bcolz chunks whole rows
    else:
        a = make(where, tmp_path, data[:0], chunks=(64, *(2 for _ in shape)))
    for i in range(0, len(data), 37):
        a.append(data[i:i + 37])
        assert a[i].tolist() == data[i].tolist()  # reads store what was handed over first
    np.testing.assert_array_equal(a[:], data)
    assert a.cbytes > 0
    if where != "memory":
        a.close()
        np.testing.assert_array_equal(ca.open(a.rootdir, mode="r")[:], data)


def test_appends_return_before_their_chunks_are_stored(tmp_path):
    a = ca.carray(np.empty(0, "f8"), chunklen=1000, rootdir=tmp_path / "a")
    a.append(np.ones(1000))  # one whole run: stored by the append itself
    a.flush()
    a.append(np.ones(500))
    a.append(np.ones(500))  # fills the tail: handed over, not stored yet
    assert a.engine.nfull == 2 and len(a) == 2000 and a.engine.leftover == 0
    assert a.engine.dirty
    a.flush()
    assert not a.engine.dirty
    np.testing.assert_array_equal(ca.open(a.rootdir, mode="r")[:], np.ones(2000))


def test_chunks_in_flight_stay_bounded(tmp_path, monkeypatch):
    seen = []
    real = Handoff.submit

    def submit(self, *args):
        real(self, *args)
        seen.append(len(self))

    monkeypatch.setattr(Handoff, "submit", submit)
    a = ca.carray(np.empty(0, "i8"), chunklen=100, rootdir=tmp_path / "a")
    append_in_pieces(a, np.arange(100_000), 50)
    assert max(seen) <= 2 * _parallel.workers() + 1
    np.testing.assert_array_equal(a[:], np.arange(100_000))


class FailingStores:
    """``Layout.write_chunk`` raises ENOSPC while ``full`` is set."""

    def __init__(self, monkeypatch) -> None:
        self.full = False
        originals = {cls: cls.write_chunk for cls in _layout_classes()}

        def write_chunk(layout, nchunk, data, digest=None):
            if self.full:
                raise OSError(errno.ENOSPC, "No space left on device")
            return originals[type(layout)](layout, nchunk, data, digest)

        for cls in originals:
            monkeypatch.setattr(cls, "write_chunk", write_chunk)


@pytest.mark.parametrize("where", WHERE)
def test_a_full_disk_while_storing_handed_chunks_loses_nothing(where, tmp_path, monkeypatch):
    data = np.arange(1000)
    a = make(where, tmp_path, data[:0], chunklen=100)
    append_in_pieces(a, data[:500], 50)
    a.flush()
    disk = FailingStores(monkeypatch)
    disk.full = True
    with pytest.raises(OSError) as err:  # the error reaches a later call
        append_in_pieces(a, data[500:], 50)
        a.flush()
    assert err.value.errno == errno.ENOSPC
    kept = len(a)
    assert 500 < kept <= 1000
    with pytest.raises(OSError):
        a.flush()  # still full: still an error, nothing dropped
    assert len(a) == kept
    disk.full = False
    a.append(data[kept:])
    np.testing.assert_array_equal(a[:], data)
    if where != "memory":
        a.close()
        np.testing.assert_array_equal(ca.open(a.rootdir, mode="r")[:], data)


def test_a_failed_operation_keeps_what_was_handed_over(tmp_path, monkeypatch):
    a = ca.carray(np.empty(0, "i8"), chunklen=100, rootdir=tmp_path / "a")
    append_in_pieces(a, np.arange(450), 50)  # chunks 0-3 handed over, 50 rows in the tail
    disk = FailingStores(monkeypatch)
    disk.full = True
    with pytest.raises(OSError):
        a[10] = -1  # a change stores the handed chunks first: that fails
    disk.full = False
    expect = np.arange(450)
    np.testing.assert_array_equal(a[:], expect)
    a[10] = -1
    expect[10] = -1
    a.close()
    np.testing.assert_array_equal(ca.open(a.rootdir, mode="r")[:], expect)


def test_zone_maps_see_handed_chunks(tmp_path):
    a = ca.carray(np.empty(0, "f8"), chunklen=100, rootdir=tmp_path / "a")
    append_in_pieces(a, np.arange(1000.0), 25)
    a.flush()
    assert a.max() == 999.0 and a.min() == 0.0
    assert ((a > 990).sum()) == 9
