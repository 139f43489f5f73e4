"""Per-chunk min/max summaries: kept through writes, saved in segments, read lazily."""

from __future__ import annotations

import os

import numpy as np
import pytest

import carray as ca
from carray.compute.zonemap import ZoneMap


@pytest.fixture
def small_segments(monkeypatch):
    monkeypatch.setattr(ZoneMap, "SEGMENT", 4)


@pytest.mark.parametrize("fmt", ["bcolz", "superchunk"])
def test_segments_follow_appends_and_shrinks(tmp_path, small_segments, fmt):
    root = str(tmp_path / "a")
    a = ca.carray(np.arange(100.0), chunklen=10, rootdir=root, format=fmt)  # 10 chunks
    a.close()
    meta = os.path.join(root, "meta")
    names = sorted(n for n in os.listdir(meta) if n.startswith("zonemap_"))
    assert names == ["zonemap_000000.npy", "zonemap_000001.npy", "zonemap_000002.npy"]
    before = {n: os.stat(os.path.join(meta, n)).st_mtime_ns for n in names}
    a = ca.open(root)
    a.append(np.arange(100.0, 110.0))  # chunk 10: only segment 2 changes
    a.close()
    after = {n: os.stat(os.path.join(meta, n)).st_mtime_ns for n in names}
    assert after["zonemap_000000.npy"] == before["zonemap_000000.npy"]
    assert after["zonemap_000001.npy"] == before["zonemap_000001.npy"]
    a = ca.open(root)
    a.resize(35)  # 3 full chunks left: segments 1 and 2 go
    a.close()
    assert sorted(n for n in os.listdir(meta) if n.startswith("zonemap_")) == \
        ["zonemap_000000.npy"]
    r = ca.open(root, mode="r")
    zones = r.zone_map()
    assert len(zones) == 3 and zones.known.all()
    np.testing.assert_array_equal(zones.lo, [0, 10, 20])
    np.testing.assert_array_equal(zones.hi, [9, 19, 29])


def test_opening_reads_no_summaries(tmp_path, monkeypatch):
    root = str(tmp_path / "a")
    ca.carray(np.arange(1000), chunklen=10, rootdir=root).close()
    calls = []
    from carray.layouts.base import Sidecars

    original = Sidecars.load
    monkeypatch.setattr(Sidecars, "load",
                        lambda self, name: calls.append(name) or original(self, name))
    a = ca.open(root, mode="r")
    assert a[500] == 500 and calls == []
    zones = a.zone_map()
    assert calls == ["zonemap_000000.npy"] and zones.known.all()


def test_a_damaged_segment_is_only_a_cache(tmp_path, small_segments):
    root = str(tmp_path / "t")
    x = np.arange(200.0)
    ca.ctable({"x": x}, chunklen=10, rootdir=root).close()
    with open(os.path.join(root, "x", "meta", "zonemap_000001.npy"), "wb") as f:
        f.write(b"garbage")
    t = ca.open(root, mode="r")
    zones = t["x"].zone_map()
    assert zones.known[:4].all() and not zones.known[4:8].any()
    assert list(t.fetchwhere("x > 197.5")["x"]) == [198.0, 199.0]
    assert list(t.fetchwhere("(x > 44.5) & (x < 46)")["x"]) == [45.0]
