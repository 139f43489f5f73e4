"""Versions of arrays: commit, tags, time travel, restore, retention, readers that hold a
version, prune, and the space an edit-heavy workload takes (in memory and on disk)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import carray as ca
from carray.errors import ReadOnlyError, VersionError, VersionsUnsupportedError


@pytest.fixture(params=["memory", "disk"])
def where(request, tmp_path):
    return None if request.param == "memory" else str(tmp_path / "a")


def _size(root) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


def test_commit_versions_and_restore(where):
    a = ca.carray(np.arange(1000), chunklen=100, rootdir=where)
    first = a.commit("first")
    assert isinstance(first, str) and len(first) == 16
    a[5] = -5
    a.append(np.arange(3))
    second = a.commit("second")
    assert second != first and a.commit() == second  # nothing changed: no new version
    a.snapshot("kept", "tagged")
    a[0] = 99
    third = a.commit()
    got = a.versions()
    assert [v.id for v in got][:2] == [third, second]
    v = got[1]
    assert v.message == "second" and v.tags == ("kept",) and v.shape == (1003,)
    assert v.nbytes == 1003 * 8 and v.cbytes > 0 and isinstance(v.time, dt.datetime)
    restored = a.restore(second)
    assert restored not in (first, second, third)
    assert a[0] == 0 and a[5] == -5 and len(a) == 1003
    assert a.versions()[0].kind == "restore"
    with pytest.raises(VersionError, match=first):  # default retention: not kept
        a.restore(first)


def test_open_a_version_by_id_tag_and_time(tmp_path):
    root = str(tmp_path / "a")
    a = ca.carray(np.zeros(10), rootdir=root, storage={"versions": "all"})
    ids, times = [], []
    for k in range(1, 4):
        a[:] = k
        ids.append(a.commit(f"set to {k}"))
        times.append(dt.datetime.now(dt.UTC))
        time.sleep(0.01)
    a.close()
    for k, vid in enumerate(ids, 1):
        b = ca.open(root, version=vid)
        assert b.mode == "r" and (b[:] == k).all() and b.version == vid
        with pytest.raises(ReadOnlyError, match=vid):
            b[0] = 1
        b.close()
    c = ca.open(root, as_of=times[1])
    assert (c[:] == 2).all()
    made = {v.id: v.time for v in c.versions()}
    for vid in ids:  # the time versions() gives finds that very version
        assert ca.open(root, as_of=made[vid]).version == vid
    with pytest.raises(VersionError):
        ca.open(root, as_of=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    w = ca.open(root)
    w.snapshot("newest")
    w.close()
    assert (ca.open(root, tag="newest")[:] == 3).all()
    with pytest.raises(VersionError):
        ca.open(root, tag="nope")
    with pytest.raises(VersionError):
        ca.open(root, version="0" * 16)


def test_a_reader_holds_its_version_until_refresh(tmp_path):
    root = str(tmp_path / "a")
    w = ca.carray(np.arange(100.0), chunklen=10, rootdir=root)
    r = ca.open(root, mode="r")
    held = r.version
    for k in range(20):  # default retention: the writer keeps only its newest version ...
        w[:] = k
        w.append([k])
        w.flush()
    assert r.version == held and (r[:] == np.arange(100.0)).all()  # ... but not under r
    assert r.refresh() and r.version == w.version and len(r) == 120 and r[0] == 19
    assert not r.refresh()
    r.close()
    w[:] = -1
    w.flush()
    assert len(w.versions()) == 1  # nothing holds the old ones any more


HOLDER = textwrap.dedent("""
    import sys, numpy as np, carray as ca
    r = ca.open(sys.argv[1], mode="r")
    want = r[:].copy()
    print("ready", flush=True)
    errors = reads = 0
    while sys.stdin.readline().strip() == "read":
        try:
            ok = np.array_equal(r[:], want) and np.array_equal(np.asarray(r), want)
        except Exception as exc:  # noqa: BLE001 - counted, not hidden
            print("error", type(exc).__name__, exc, flush=True)
            errors += 1
            continue
        reads += 1
        print("same" if ok else "changed", flush=True)
""")


def test_a_reader_in_another_process_holds_its_version(tmp_path):
    root = str(tmp_path / "a")
    x = np.random.default_rng(0).integers(0, 1000, (60, 40, 30))
    w = ca.carray(x, chunks=(16, 16, 16), blocks=(4, 8, 8), rootdir=root)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, root], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        rng = np.random.default_rng(1)
        for step in range(60):
            kind = step % 4
            if kind == 0:
                w[rng.integers(0, len(w))] = -step
            elif kind == 1:
                w.append(np.full((3, 40, 30), step))
            elif kind == 2:
                w.resize((max(len(w) - 5, 1), 40, 30))
            else:
                w[:5, :, :] = step
            w.flush()
            proc.stdin.write("read\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "same", f"after step {step}"
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    w.close()
    assert len(ca.open(root, mode="r").versions()) == 1


def test_retention_keeps_the_last_n(tmp_path):
    root = str(tmp_path / "a")
    a = ca.carray(np.zeros(100), chunklen=10, rootdir=root, storage={"versions": 3})
    for k in range(6):
        a[k] = k
        a.commit()
    assert len(a.versions()) == 3
    a.snapshot("five")
    for k in range(3):
        a[50 + k] = 1
        a.commit()
    assert len(a.versions()) == 4 and "five" in a.versions()[-1].tags
    a.untag("five")
    assert len(a.versions()) == 3
    assert a.prune(keep_last=1) == 2 and len(a.versions()) == 1


def test_prune_by_age_keeps_tagged_and_newest(tmp_path):
    root = str(tmp_path / "a")
    a = ca.carray(np.zeros(10), rootdir=root, storage={"versions": "all"})
    for k in range(5):
        a[0] = k
        a.commit()
        if k == 1:
            a.snapshot("one")
    vids = [v.id for v in a.versions()]
    a.close()
    # 7 versions (creation, the first data, 5 commits): all but the newest and "one" go.
    assert ca.prune(root, older_than=dt.timedelta(0)) == 5
    b = ca.open(root, mode="r")
    assert [v.id for v in b.versions()] == [vids[0], vids[3]]
    assert (ca.open(root, tag="one")[:1] == 1).all()


def test_edits_with_commits_do_not_grow_the_directory(tmp_path):
    root = str(tmp_path / "a")
    rng = np.random.default_rng(2)
    a = ca.carray(rng.random(200_000), chunklen=5000, rootdir=root, fsync=False)
    a.close()
    a = ca.open(root)
    start = _size(root)
    for k in range(300):
        a[int(rng.integers(0, 200_000))] = k
        a.commit()
    grown = _size(root) / start
    assert grown < 1.2, grown
    assert (ca.open(root, mode="r")[:] == a[:]).all()


def test_foreign_layouts_keep_no_versions(tmp_path):
    b = ca.carray(np.arange(10), rootdir=str(tmp_path / "b"), format="bcolz")
    f = ca.carray(np.arange(10), rootdir=str(tmp_path / "f.b2nd"))
    for x in (b, f):
        with pytest.raises(VersionsUnsupportedError, match="keeps no versions"):
            x.commit()
        with pytest.raises(VersionsUnsupportedError):
            x.versions()
        x.close()
    with pytest.raises(VersionsUnsupportedError):
        ca.open(str(tmp_path / "b"), version="0" * 16)


def test_versions_on_an_object_store(remote_root):
    url, opts = remote_root
    a = ca.carray(np.arange(100), chunklen=10, rootdir=url, storage_options=opts)
    v0 = a.commit()
    a[0] = -1
    a.commit()
    a.close()
    old = ca.open(url, version=v0, storage_options=opts)
    assert old[0] == 0  # kept: a replaced version stays for the grace period here
    assert ca.open(url, mode="r", storage_options=opts)[0] == -1


def test_a_file_freed_whole_inside_a_change_is_written_again(tmp_path):
    # resize(0) publishes a version in which no record of the file is kept, so the file
    # goes; a record written and dropped before that must not come back as free space.
    root = str(tmp_path / "a")
    a = ca.carray(np.array([-7]), chunklen=1, rootdir=root)
    a.append(np.array([1]))
    a.resize(0)
    a.append(np.array([2]))
    a.close()
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], [2])


def test_as_of_the_time_versions_gives_opens_that_version_among_fast_commits(tmp_path):
    root = str(tmp_path / "fast")
    a = ca.carray(np.zeros(100, "i8"), chunklen=16, rootdir=root, fsync=False,
                  storage={"versions": "all"})
    ids = []
    for k in range(60):
        a[k] = k + 1
        ids.append(a.commit())
    made = {v.id: v.time for v in a.versions()}
    a.close()
    for k, vid in enumerate(ids):
        b = ca.open(root, as_of=made[vid])
        assert b.version == vid and b[k] == k + 1
        b.close()
