"""Groups at fsspec URLs (``memory://`` and S3 on moto's loopback server) keep the same
commit guarantees as on disk, and dask reads every member in parallel."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca
import carray.versions.dataset
from carray.groups.store import TXN_DIR
from carray.stores import resolve
from carray.versions import Repository, seq_of


def _fill(g):
    with g.transaction("made"):
        g.create_array("time", np.arange(6), dims="time", chunks=(4,))
        g.create_array("obs/temp", np.arange(18.0).reshape(6, 3), dims=("time", "x"),
                       chunks=(4, 3))
        g.create_table("events", {"t": np.arange(4), "s": np.array(list("abcd"), object)})
        g.attrs["title"] = "remote"


def test_a_remote_group_commits_reopens_and_travels_in_time(remote_root):
    url, options = remote_root
    g = ca.group(url, mode="w", storage_options=options)
    _fill(g)
    made = g.version
    g.append({"time": [6, 7], "obs/temp": np.ones((2, 3))}, dim="time", message="day")
    g.close()
    r = ca.open_group(url, storage_options=options)
    assert r["obs/temp"].shape == (8, 3) and r.attrs["title"] == "remote"
    assert r["events"]["s"][:].tolist() == list("abcd")
    assert "temp  (time: 8, x: 3) float64 chunks (4, 3)" in r.tree()
    old = ca.open_group(url, version=made, storage_options=options)
    assert old["obs/temp"].shape == (6, 3) and old["time"][:].tolist() == list(range(6))
    assert isinstance(ca.open(url, storage_options=options), ca.Group)


def test_a_remote_commit_without_its_outcome_never_counts(remote_root, monkeypatch):
    """The record is the commit point: a commit whose outcome is recorded nowhere (it
    died before writing its record) leaves the group and every member at the version
    before, and a later writer decides it aborted and goes on."""
    url, options = remote_root
    g = ca.group(url, mode="w", storage_options=options)
    _fill(g)
    g.append({"time": [6], "obs/temp": np.ones((1, 3))}, dim="time")
    g.close()
    store, root = resolve(url, options)
    head = Repository(store, root).latest()
    assert head.txn is not None
    # The outcome lives in a marker beside each manifest of the commit (the record is
    # gone once every one holds it): without them, as before the record was written.
    changed = [("", head.seq)] + [(n["dir"], seq_of(n["version"]))
                                  for n in head.meta["nodes"].values() if "version" in n]
    for path, seq in changed:
        marker = store.join(root, path, "versions", f"{seq:010d}.ok") if path else \
            store.join(root, "versions", f"{seq:010d}.ok")
        if store.exists(marker) and (path in ("", "time", "obs/temp")):
            store.delete(marker)
    assert not store.listdir(store.join(root, TXN_DIR))
    r = ca.open_group(url, storage_options=options)
    assert r["time"].shape == (6,) and r["obs/temp"].shape == (6, 3)
    assert ca.carray(rootdir=f"{url}/time", mode="r", storage_options=options).shape == (6,)
    # Nothing is locked on object stores: a writer waits for the unfinished commit's
    # owner (lock_timeout), then decides it aborted.
    monkeypatch.setattr(carray.versions.dataset, "DEFAULT_DECIDE_AFTER", 0.2)
    w = ca.group(url, storage_options=options)  # a writer goes on from there
    w.append({"time": [60], "obs/temp": np.zeros((1, 3))}, dim="time")
    w.close()
    assert ca.open_group(url, storage_options=options)["time"][:].tolist() == \
        [*range(6), 60]


@pytest.mark.parametrize("where", ["disk", "remote"])
def test_dask_reads_every_member_in_parallel(where, tmp_path, s3):
    dask = pytest.importorskip("dask", reason="dask is a test dependency")
    if where == "disk":
        url, options = str(tmp_path / "g"), None
    else:
        url, options = s3.url(f"dask-{tmp_path.name}"), s3.storage_options
    g = ca.group(url, mode="w", storage_options=options)
    _fill(g)
    g.close()
    r = ca.open_group(url, storage_options=options)
    arrays = {path: obj.to_dask(chunks=obj.chunks) for path, kind, obj in r.walk()
              if kind == "array"}
    assert set(arrays) == {"time", "obs/temp"}
    assert arrays["obs/temp"].chunks == ((4, 2), (3,))
    (values,) = dask.compute(arrays, scheduler="threads")
    np.testing.assert_array_equal(values["obs/temp"], np.arange(18.0).reshape(6, 3))
    np.testing.assert_array_equal(values["time"], np.arange(6))
