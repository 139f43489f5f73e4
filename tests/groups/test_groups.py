"""Groups: members, attributes, dims, append along a dimension, versions, prune."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import carray as ca
from carray.errors import (
    ContainerExistsError,
    ModeError,
    ReadOnlyError,
    ShapeError,
    VersionsUnsupportedError,
)


@pytest.fixture(params=["memory", "disk"])
def make(request, tmp_path):
    """A new group, in memory or on disk."""
    def new():
        return ca.group() if request.param == "memory" else ca.group(tmp_path / "g", mode="w")
    return new


def _weather(g, days=5):
    with g.transaction("weather"):
        g.create_array("time", np.arange(days), dims="time", attrs={"units": "days"})
        g.create_array("temp", np.arange(days * 6.0).reshape(days, 2, 3),
                       dims=("time", "lat", "lon"), chunks=(2, 2, 3))
        g.create_array("lat", np.array([10.0, 20.0]), dims="lat")
    return g


def test_members_of_every_kind(make):
    g = make()
    a = g.create_array("a", np.arange(10), attrs={"x": 1})
    t = g.create_table("sub/events", {"id": np.arange(4), "s": np.array(list("abcd"), object)})
    s = g.create_group("other", attrs={"title": "t"})
    assert isinstance(a, ca.carray) and isinstance(t, ca.ctable) and isinstance(s, ca.Group)
    assert list(g) == ["a", "other", "sub"] and len(g) == 3
    assert "sub/events" in g and "events" in g["sub"] and "nope" not in g and "../x" not in g
    assert g["sub"].path == "sub" and g["sub"]["events"] is t and g["sub/events"] is t
    assert g.kind_of("sub") == "group" and g.kind_of("a") == "array"
    assert [n for n, _ in g.arrays()] == ["a"] and [n for n, _ in g.groups()] == ["other", "sub"]
    assert [n for n, _ in g["sub"].tables()] == ["events"]
    assert [(p, k) for p, k, _ in g.walk()] == [("a", "array"), ("other", "group"),
                                                ("sub", "group"), ("sub/events", "table")]
    assert g["a"].attrs["x"] == 1 and g["other"].attrs["title"] == "t"
    np.testing.assert_array_equal(g["sub/events"]["s"], np.array(list("abcd"), object))
    del g["sub"]
    assert list(g) == ["a", "other"] and "sub/events" not in g
    with pytest.raises(KeyError):
        g["sub"]


def test_members_work_as_any_container(make):
    g = make()
    a = g.create_array("x", np.arange(1000), chunks=(100,))
    a.append(np.arange(5))
    a[0:10] = -1
    assert a.sum() == np.arange(1000)[10:].sum() + np.arange(5).sum() - 10
    t = g.create_table("t", {"a": np.arange(100), "b": np.arange(100) * 2.0})
    t.append((100, 200.0))
    assert len(t) == 101 and list(t.where("a > 98", outcols="b")) == [(198.0,), (200.0,)]
    e = g.create_array("e", shape=(4, 3), dtype="i4", dflt=7)
    assert e.shape == (4, 3) and (e[:] == 7).all()


def test_names_and_misuse(make):
    g = make()
    g.create_array("a", np.arange(3))
    for bad in ["", ".", "..", "versions", "__group__", ".hidden", "a\\b", "a~1", "x/../y"]:
        with pytest.raises(ValueError):
            g.create_array(bad, np.arange(3))
    with pytest.raises(ContainerExistsError):
        g.create_array("a", np.arange(3))
    with pytest.raises(ValueError, match="not a group"):
        g.create_array("a/b", np.arange(3))
    with pytest.raises(TypeError):
        g.create_array("b", np.arange(3), rootdir="/elsewhere")
    with pytest.raises(ValueError, match="needs data"):
        g.create_array("b")
    g.create_group("sub")
    with pytest.raises(TypeError, match="only arrays"):
        g.set_dims("sub", "x")


def test_dims_are_checked_and_append_grows_them_together(make):
    g = _weather(make())
    assert g.dims == {"time": 5, "lat": 2, "lon": 3}
    assert g.dims_of("temp") == ("time", "lat", "lon")
    g.create_array("free", np.zeros((2, 2)))
    assert g.dims_of("free") == ("free_dim_0", "free_dim_1")
    with pytest.raises(ShapeError, match="dims must be 1"):
        g.set_dims("time", ("a", "b"))
    with pytest.raises(ShapeError, match="'lat' is 2 long"):
        g.create_array("bad", np.zeros(3), dims="lat")
    g.append({"time": [5, 6], "temp": np.ones((2, 2, 3))}, dim="time")
    assert g["temp"].shape == (7, 2, 3) and g.dims["time"] == 7
    np.testing.assert_array_equal(g["time"][:], np.arange(7))
    with pytest.raises(ShapeError, match="missing: temp"):
        g.append({"time": [7]}, dim="time")
    with pytest.raises(ShapeError, match="same length"):
        g.append({"time": [7], "temp": np.ones((2, 2, 3))}, dim="time")
    with pytest.raises(ShapeError, match="not an array"):
        g.append({"time": [7], "temp": np.ones((1, 2, 3)), "lat": [1.0]}, dim="time")
    with pytest.raises(ShapeError, match="cannot append"):
        g.append({"time": [7], "temp": np.ones((1, 3, 3))}, dim="time")
    assert g["temp"].shape == (7, 2, 3)
    g.append({"time": 7, "temp": np.ones((2, 3))}, dim="time")  # one step, no axis
    assert g["temp"].shape == (8, 2, 3)


def test_a_commit_breaking_a_dimension_is_refused_until_it_agrees(tmp_path):
    g = _weather(ca.group(tmp_path / "g", mode="w"))
    before = g.version
    g["time"].append([5])
    with pytest.raises(ShapeError, match="dimension 'time'"):
        g.commit()
    assert g.version == before
    g["temp"].append(np.zeros((1, 2, 3)))
    g.commit("both")
    assert g.version != before and g.versions()[0].message == "both"
    g.close()
    assert ca.open_group(tmp_path / "g")["temp"].shape == (6, 2, 3)


def test_attrs_and_tree(make):
    g = _weather(make())
    g.attrs["title"] = "a run"
    g.attrs.update(n=np.int16(3), when=np.datetime64("2026-01-02"))
    g.create_table("sub/events", {"id": np.arange(3)})
    text = g.tree()
    assert text.splitlines()[0] == "/"
    assert "temp  (time: 5, lat: 2, lon: 3) float64 chunks (2, 2, 3)" in text
    assert "events  table 3 rows (id)" in text
    assert g["sub"].tree().splitlines()[0] == "sub"
    assert g.attrs["n"] == 3 and g.attrs["n"].dtype == np.int16
    del g.attrs["title"]
    assert "title" not in g.attrs


def test_memory_groups_keep_no_versions():
    g = _weather(ca.group())
    assert g.version is None and g.url is None
    with pytest.raises(VersionsUnsupportedError):
        g.versions()
    with pytest.raises(ValueError):
        ca.group(mode="r")


def test_every_commit_is_one_version_and_old_ones_reopen(tmp_path):
    """Changes become a version at commit (or flush, close; a transaction's end), never
    otherwise (docs/spec/commit.md [C12])."""
    path = tmp_path / "g"
    g = _weather(ca.group(path, mode="w", storage={"versions": "all"}))
    first = g.version
    g.append({"time": [5], "temp": np.full((1, 2, 3), 9.0)}, dim="time", message="day 5")
    g.attrs["title"] = "x"
    g["temp"].attrs["units"] = "K"
    assert g.version == first and len(g.versions()) == 2  # pending: not a version yet
    g.commit()
    with g.transaction("two changes"):
        g["temp"][0] = -1
        g.create_group("sub")
    g.snapshot("final")
    kinds = [(v.message, v.tags) for v in g.versions()]
    assert kinds[:2] == [("two changes", ("final",)), ("day 5", ())]
    assert [m for m, _ in kinds].count("day 5") == 1
    g.close()
    old = ca.open_group(path, version=first)
    assert old["temp"].shape == (5, 2, 3) and old["temp"][0, 0, 0] == 0 and "sub" not in old
    assert "units" not in old["temp"].attrs
    new = ca.open_group(path, tag="final")
    assert new["temp"].shape == (6, 2, 3) and new["temp"][0, 0, 0] == -1
    assert new["temp"].attrs["units"] == "K" and new.attrs["title"] == "x"
    with pytest.raises(ReadOnlyError):
        new["temp"][0] = 1
    with pytest.raises(ReadOnlyError):
        new.attrs["y"] = 1
    with pytest.raises(ReadOnlyError):
        new.create_array("z", np.arange(2))
    assert isinstance(ca.open(path), ca.Group)


def test_a_failed_transaction_commits_nothing(make):
    g = _weather(make())
    before = g.version
    with pytest.raises(RuntimeError):
        with g.transaction():
            g.create_array("new", np.arange(3))
            g.attrs["x"] = 1
            raise RuntimeError("stop")
    assert "new" not in g and "x" not in g.attrs and g.version == before
    with pytest.raises(ValueError, match="dimension 'time'"):
        with g.transaction():  # refused at its end: nothing of it stays
            g.create_array("more", np.arange(3), dims="time")
            g.attrs["y"] = 1
    assert "more" not in g and "y" not in g.attrs and g.version == before
    g.create_array("new", np.arange(4))  # the name is free again
    g.close()
    if g.url is not None:
        assert ca.open_group(g.url)["new"][:].tolist() == [0, 1, 2, 3]


def test_a_reader_holds_its_version_while_a_writer_commits(tmp_path):
    path = tmp_path / "g"
    g = _weather(ca.group(path, mode="w"))
    r = ca.open_group(path)
    for day in range(5, 15):
        g.append({"time": [day], "temp": np.full((1, 2, 3), float(day))}, dim="time")
    g.prune(keep_last=1)
    assert r["temp"].shape == (5, 2, 3) and r["time"][:].tolist() == list(range(5))
    assert ca.open_group(path)["temp"].shape == (15, 2, 3)


def test_prune_drops_group_versions_and_what_only_they_named(tmp_path):
    path = tmp_path / "g"
    g = ca.group(path, mode="w", storage={"versions": "all"})
    g.create_array("x", np.zeros(50_000), chunks=(5_000,))
    g.commit()
    for i in range(4):
        g["x"][:] = i + 1
        g.commit()
    g.create_array("gone", np.arange(10))
    g.commit()
    del g["gone"]
    g.commit()
    assert len(g.versions()) == 8
    assert (path / "gone").is_dir()  # older versions name it
    assert g.prune(keep_last=3) == 5  # the last three name x's newest version only
    assert len(g.versions()) == 3 and (path / "gone").is_dir()
    assert len(g["x"].versions()) == 1
    assert g.prune(keep_last=1) == 2
    assert len(g.versions()) == 1 and not (path / "gone").exists()
    g.close()
    assert ca.open_group(path)["x"][:3].tolist() == [4.0, 4.0, 4.0]
    assert ca.prune(path) == 0


def test_member_names_freed_by_deletion_get_new_directories(tmp_path):
    path = tmp_path / "g"
    g = ca.group(path, mode="w", storage={"versions": "all"})
    g.create_array("x", np.arange(3))
    old = g.commit()
    del g["x"]
    g.create_array("x", np.arange(5) * 10)
    assert g.member_location("x") == "x~1"
    g.close()
    assert ca.open_group(path)["x"][:].tolist() == [0, 10, 20, 30, 40]
    assert ca.open_group(path, version=old)["x"][:].tolist() == [0, 1, 2]


def test_modes(tmp_path):
    path = tmp_path / "g"
    with pytest.raises(ca.ContainerNotFoundError):
        ca.open_group(path)
    ca.group(path, mode="x").close()
    with pytest.raises(ContainerExistsError):
        ca.group(path, mode="x")
    with ca.group(path) as g:  # 'a' opens it
        g.create_array("a", np.arange(2))
    with ca.group(path, mode="w") as g:  # 'w' replaces it
        assert list(g) == []
    with pytest.raises(ValueError):
        ca.group(path, mode="q")
    with pytest.raises(ValueError):
        ca.open_group(path, mode="w")
    with pytest.raises(ModeError, match="mode='r'"):  # an earlier version is read-only
        ca.open_group(path, mode="a", version="0000000000000000")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ca.ContainerNotFoundError):
        ca.open_group(tmp_path / "plain")


def test_a_damaged_group_manifest_is_an_error_naming_it(tmp_path):
    path = tmp_path / "g"
    with ca.group(path, mode="w") as g:
        g.create_array("a", np.arange(3))
    newest = sorted((path / "versions").glob("*.mf"))[-1]
    data = bytearray(newest.read_bytes())
    data[20] ^= 0xFF
    newest.write_bytes(bytes(data))
    with pytest.raises((ca.ChecksumError, ca.FormatError), match=newest.name):
        ca.open_group(path)


WRITER = """
import sys, numpy as np, carray as ca
g = ca.group(sys.argv[1], fsync=False)
for day in range(5, 45):
    g.append({"time": [day], "temp": np.full((1, 2, 3), float(day))}, dim="time")
    if day % 10 == 0:
        g.prune(keep_last=2)
g.close()
"""


def test_readers_see_whole_versions_while_another_process_commits(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "g"
    g = _weather(ca.group(path, mode="w"))
    g["temp"][:] = np.arange(5.0)[:, None, None]  # temp[t] == time[t] throughout
    g.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                              stderr=subprocess.PIPE)
    seen = set()
    try:
        while writer.poll() is None:
            r = ca.open_group(path)
            time, temp = r["time"][:], r["temp"][:]
            assert len(time) == len(temp) == r.dims["time"]
            assert (temp == time[:, None, None]).all()
            seen.add(len(time))
            r.close()
    finally:
        _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err.decode()
    assert len(seen) > 1
    assert ca.open_group(path)["temp"].shape == (45, 2, 3)


def test_opening_and_listing_a_big_group_reads_a_bounded_number_of_files(tmp_path,
                                                                          monkeypatch):
    from carray.stores.local import LocalStore

    path = tmp_path / "g"
    with ca.group(path, mode="w", fsync=False) as g, g.transaction():
        for i in range(300):
            g.create_array(f"v{i:03d}", np.arange(10.0) + i, dims="n",
                           attrs={"units": "m"})
    touched: list[str] = []
    for name in ("get", "open", "listdir", "isfile", "isdir", "exists"):
        real = getattr(LocalStore, name)

        def counting(self, p, *args, _real=real, **kwargs):
            touched.append(p)
            return _real(self, p, *args, **kwargs)

        monkeypatch.setattr(LocalStore, name, counting)
    r = ca.open_group(path)
    names, text, dims = list(r), r.tree(), r.dims
    assert len(names) == 300 and text.count("float64") == 300 and dims == {"n": 10}
    assert len(touched) < 20, touched
    member_files = [p for p in touched if re.search(r"/v\d{3}", p)]
    assert member_files == []
    assert r["v123"][3] == 126.0 and r["v123"].attrs["units"] == "m"


def test_restore_and_refresh(tmp_path):
    path = tmp_path / "g"
    g = _weather(ca.group(path, mode="w", storage={"versions": "all"}))
    assert list(g.coords) == ["lat", "time"]
    first = g.version
    r = ca.open_group(path)
    g.append({"time": [5], "temp": np.ones((1, 2, 3))}, dim="time")
    g.create_array("extra", np.arange(3))
    del g["lat"]
    g.attrs["x"] = 1
    assert r["temp"].shape == (5, 2, 3) and not r.refresh()  # nothing committed yet
    g.commit()
    assert r["temp"].shape == (5, 2, 3) and r.refresh()
    assert r["temp"].shape == (6, 2, 3) and "extra" in r and "lat" not in r
    assert not r.refresh()
    vid = g.restore(first)
    assert g.versions()[0].id == vid and g.versions()[0].message == f"restore {first}"
    assert g["temp"].shape == (5, 2, 3) and "extra" not in g and "lat" in g
    assert "x" not in g.attrs and g["lat"][:].tolist() == [10.0, 20.0]
    g.append({"time": [5], "temp": np.zeros((1, 2, 3))}, dim="time")  # goes on from there
    g.close()
    again = ca.open_group(path)
    assert again["temp"].shape == (6, 2, 3) and again["temp"][5].sum() == 0
    with pytest.raises(ReadOnlyError):
        again.restore(first)


@pytest.mark.parametrize("nodes", [
    None, [], {}, {"": {"kind": "array"}},
    {"": {"kind": "group"}, "a": {"kind": "array"}},  # no directory
    {"": {"kind": "group"}, "a": {"kind": "array", "dir": "../../elsewhere"}},
    {"": {"kind": "group"}, "a": {"kind": "array", "dir": "/abs"}},
    {"": {"kind": "group"}, "a": {"kind": "blob", "dir": "a"}},
    {"": {"kind": "group"}, "a/b": {"kind": "array", "dir": "a/b"}},  # no parent group
    {"": {"kind": "group"}, "a": {"kind": "array", "dir": "a", "dims": [1]}},
    {"": {"kind": "group"}, "a": {"kind": "array", "dir": "a", "version": 3}},
    {"": {"kind": "group"}, "..": {"kind": "group", "dir": "x"}},
])
def test_a_hostile_description_is_a_format_error(tmp_path, nodes):
    from carray.stores import LOCAL
    from carray.versions.repo import Repository

    path = tmp_path / "g"
    ca.group(path, mode="w").close()
    repo = Repository(LOCAL, str(path))
    head = repo.latest()
    repo.publish(head.replace(seq=head.seq + 1, id=f"{head.seq + 1:08x}00000000",
                              parent=head.id, meta={"kind": "group", "nodes": nodes}))
    with pytest.raises(ca.FormatError, match="damaged|no nodes|describe"):
        ca.open_group(path)


def test_a_missing_member_is_an_error_not_a_new_empty_member(tmp_path):
    path = tmp_path / "g"
    g = ca.group(path, mode="w")
    g.create_array("x", np.arange(5))
    g.close()
    shutil.rmtree(path / "x")
    for mode in ("r", "a"):
        h = ca.open_group(path, mode=mode)
        with pytest.raises(ca.ContainerNotFoundError, match="member 'x'"):
            h["x"]
        h.close()
    assert not (path / "x").exists()
