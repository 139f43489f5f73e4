"""ctable: construction, indexing, writes and persistence, in memory and on disk."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import carray as ca

WHERE = ["memory", "disk"]


@pytest.fixture(params=WHERE)
def where(request, tmp_path):
    """kwargs placing a table in memory or in a fresh directory."""
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


def reopen(t: ca.ctable, mode: str = "r") -> ca.ctable:
    if t.rootdir is None:
        return t
    t.flush()
    if mode != "r":
        t.close()  # one writable handle at a time
    return ca.open(t.rootdir, mode=mode)


def sample(n: int = 50) -> np.ndarray:
    rec = np.zeros(n, dtype=[("i", "<i8"), ("f", "<f8"), ("s", "S4"), ("u", "<U3"),
                             ("b", "?"), ("v", "<i2", (2,))])
    rec["i"] = np.arange(n) * 3 - 20
    rec["f"] = np.linspace(-1, 1, n)
    rec["s"] = [b"s%d" % (k % 100) for k in range(n)]
    rec["u"] = [f"é{k % 10}" for k in range(n)]
    rec["b"] = np.arange(n) % 3 == 0
    rec["v"] = np.arange(2 * n).reshape(n, 2)
    return rec


def test_from_structured_array_reads_back_exactly(where):
    rec = sample()
    t = ca.ctable(rec, chunklen=7, **where)
    assert t.names == list(rec.dtype.names)
    assert t.dtype == rec.dtype and len(t) == 50 and t.shape == (50,)
    t2 = reopen(t)
    np.testing.assert_array_equal(t2[:], rec)
    assert t2[3] == rec[3]
    assert isinstance(t2[3], np.void)


@pytest.mark.parametrize("key", [slice(None), slice(3, 40, 4), slice(None, None, -3),
                                 slice(-5, None), [0, 49, 7, 7, -1], np.array([], dtype=int),
                                 -1, 0, 17])
def test_row_keys_match_numpy(where, key):
    rec = sample()
    t = reopen(ca.ctable(rec, chunklen=6, **where))
    np.testing.assert_array_equal(t[key], rec[key])


def test_boolean_keys_match_numpy(where):
    rec = sample()
    t = reopen(ca.ctable(rec, chunklen=6, **where))
    mask = rec["i"] % 4 == 0
    np.testing.assert_array_equal(t[mask], rec[mask])
    np.testing.assert_array_equal(t[ca.carray(mask)], rec[mask])


def test_other_sources(where, tmp_path):
    rec = sample(20)
    for i, src in enumerate([
        [rec[n] for n in rec.dtype.names],
        {n: rec[n] for n in rec.dtype.names},
        ca.ctable(rec),
    ]):
        kw = {k: f"{v}{i}" for k, v in where.items()}
        names = list(rec.dtype.names) if isinstance(src, list) else None
        t = reopen(ca.ctable(src, names=names, **kw))
        np.testing.assert_array_equal(t[:], rec)


def test_default_names_and_errors():
    t = ca.ctable([np.arange(3), np.ones(3)])
    assert t.names == ["f0", "f1"]
    with pytest.raises(ValueError, match="different lengths"):
        ca.ctable([np.arange(3), np.ones(4)])
    with pytest.raises(ValueError, match="duplicate"):
        ca.ctable([np.arange(3), np.ones(3)], names=["a", "a"])
    with pytest.raises(ValueError, match="2 names for 1 columns"):
        ca.ctable([np.arange(3)], names=["a", "b"])
    with pytest.raises(TypeError):
        ca.ctable(42)


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "..\\x", "nul\x00", "__rootdirs__",
                                 "__attrs__"])
def test_unsafe_column_names_are_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="not allowed"):
        ca.ctable({bad: np.arange(3)}, rootdir=str(tmp_path / "t"))
    assert not (tmp_path / "t").exists() or not (tmp_path / "t" / "__rootdirs__").exists()
    t = ca.ctable({"ok": np.arange(3)})
    with pytest.raises(ValueError, match="not allowed"):
        t.addcol(np.arange(3), name=bad)


def test_unsafe_names_in_a_version_are_refused(tmp_path):
    from carray.versions import Manifest

    t = ca.ctable({"a": np.arange(3)}, rootdir=str(tmp_path / "t"))
    t.close()
    newest = sorted((tmp_path / "t" / "versions").glob("*.mf"))[-1]
    m = Manifest.decode(newest.read_bytes())
    for columns in ({"../evil": "array"}, {"a": "array", "missing": "array"}, ["a"]):
        newest.write_bytes(m.replace(meta={**m.meta, "columns": columns}).encode())
        with pytest.raises(ca.FormatError):
            ca.open(str(tmp_path / "t"))


def test_unsafe_names_on_disk_are_refused(tmp_path):
    t = ca.ctable({"a": np.arange(3)}, rootdir=str(tmp_path / "t"), format="bcolz")
    t.close()
    (tmp_path / "t" / "__rootdirs__").write_text(json.dumps({"names": ["../evil"]}) + "\n")
    with pytest.raises(ca.FormatError, match="bad column name"):
        ca.open(str(tmp_path / "t"))
    (tmp_path / "t" / "__rootdirs__").write_text('{"names": "a"}\n')
    with pytest.raises(ca.FormatError):
        ca.open(str(tmp_path / "t"))
    (tmp_path / "t" / "__rootdirs__").write_text('{"names": ["a", "missing"]}\n')
    with pytest.raises(ca.FormatError, match="missing"):
        ca.open(str(tmp_path / "t"))
    (tmp_path / "t" / "__rootdirs__").write_text("not json")
    with pytest.raises(ca.FormatError):
        ca.open(str(tmp_path / "t"))


def test_column_access(where):
    rec = sample()
    t = reopen(ca.ctable(rec, chunklen=8, **where))
    assert isinstance(t["i"], ca.carray)
    np.testing.assert_array_equal(t["i"][:], rec["i"])
    np.testing.assert_array_equal(t.cols["f"][:], rec["f"])
    assert list(t.cols) == t.names and len(t.cols) == 6
    sub = t[["f", "i"]]
    assert sub.names == ["f", "i"]
    np.testing.assert_array_equal(sub[:], rec[["f", "i"]])
    with pytest.raises(KeyError):
        t[["nope"]]


def test_append_forms(where):
    rec = sample(30)
    t = ca.ctable(rec[:10], chunklen=4, **where)
    t.append(rec[10:15])                                    # structured array
    t.append([rec[n][15:18] for n in rec.dtype.names])      # list of columns
    t.append({n: rec[n][18:20] for n in rec.dtype.names})   # dict of columns
    t.append(rec[20])                                       # one record
    t.append(list(rec[21].tolist()))                        # one row as scalars
    t.append([tuple(r) for r in rec[22:25].tolist()])      # a list of row tuples
    t.append(ca.ctable(rec[25:30]))                         # another table
    np.testing.assert_array_equal(reopen(t)[:], rec)
    with pytest.raises(ValueError, match="a row has"):
        t.append([(1, 2.0)])


def test_append_is_checked_before_anything_is_written(where):
    rec = sample(10)
    t = ca.ctable(rec, chunklen=4, **where)
    bad = {n: rec[n][:3] for n in rec.dtype.names}
    bad["f"] = rec["f"][:2]
    with pytest.raises(ValueError, match="different lengths"):
        t.append(bad)
    with pytest.raises(ValueError, match="missing"):
        t.append({"i": [1]})
    with pytest.raises(ValueError):
        t.append({**{n: rec[n][:1] for n in rec.dtype.names}, "i": ["not a number"]})
    t2 = reopen(t)
    assert len(t2) == 10
    np.testing.assert_array_equal(t2[:], rec)


def test_setitem_rows_and_columns(where):
    rec = sample(40)
    t = ca.ctable(rec, chunklen=6, **where)
    exp = rec.copy()
    t[3] = exp[10]
    exp[3] = exp[10]
    t[5:9] = exp[20:24]
    exp[5:9] = exp[20:24]
    row = (1, 2.5, b"z", "q", True, [7, 8])
    t[12] = row
    exp[12] = row
    t["f"] = np.arange(40.0)
    exp["f"] = np.arange(40.0)
    t["i < 0"] = exp[0]  # rows where an expression holds
    exp[exp["i"] < 0] = exp[0]
    np.testing.assert_array_equal(reopen(t)[:], exp)


@pytest.mark.parametrize("key", [0, -1, 2, slice(None, None, 2), slice(None, None, -1),
                                 [3, 1], slice(None)])
def test_rows_written_back_unchanged_with_a_string_column(where, key):
    names = np.array(["a", "", "ccc", "é", "e"], dtype=object)
    t = ca.ctable({"s": names, "x": np.arange(5)}, **where)
    t[key] = t[key]
    t["s"] = names
    rows = reopen(t)[:]
    assert list(rows["s"]) == list(names) and list(rows["x"]) == list(range(5))


def test_addcol_delcol_persist_at_once(where):
    rec = sample(25)
    t = ca.ctable(rec[["i", "f"]], chunklen=5, **where)
    t.addcol(rec["s"], name="s")
    t.addcol(rec["b"], name="b", pos=0)
    t.addcol(rec["u"])  # default name f<pos>
    assert t.names == ["b", "i", "f", "s", "f4"]
    t.delcol("i")
    t.delcol(pos=0)
    assert t.names == ["f", "s", "f4"]
    with pytest.raises(ValueError, match="exactly one"):
        t.delcol()
    with pytest.raises(ValueError, match="rows"):
        t.addcol(np.arange(3), name="short")
    with pytest.raises(ValueError, match="already exists"):
        t.addcol(rec["f"], name="f")
    t2 = reopen(t)  # no flush needed for structure: reopen sees it
    assert t2.names == ["f", "s", "f4"]
    np.testing.assert_array_equal(t2["f4"][:], rec["u"])
    if where:  # the directories of dropped columns go once no kept version has them
        assert sorted(os.listdir(where["rootdir"])) == ["__table__", "f", "f4", "s",
                                                        "versions"]


def test_addcol_move_takes_an_existing_carray_directory(tmp_path):
    t = ca.ctable({"a": np.arange(10)}, rootdir=str(tmp_path / "t"))
    c = ca.carray(np.arange(10.0) * 2, rootdir=str(tmp_path / "c"))
    t.addcol(c, name="c", move=True)
    assert not (tmp_path / "c").exists()
    t.close()
    np.testing.assert_array_equal(ca.open(str(tmp_path / "t"))["c"][:], np.arange(10.0) * 2)


def test_resize_trim_copy(where):
    rec = sample(30)
    t = ca.ctable(rec, chunklen=4, **where)
    t.trim(5)
    t.resize(27)
    exp = np.concatenate([rec[:25], np.zeros(2, dtype=rec.dtype)])
    np.testing.assert_array_equal(reopen(t)[:], exp)
    c = t.copy()
    np.testing.assert_array_equal(c[:], exp)
    assert c.rootdir is None
    with pytest.raises(ValueError):
        t.trim(100)


def test_iter_and_iterblocks(where):
    rec = sample(33)
    t = reopen(ca.ctable(rec, chunklen=5, **where))
    rows = list(t.iter(2, 30, 3, outcols=["nrow__", "i", "u"], skip=1, limit=4))
    want = [(k, int(rec["i"][k]), str(rec["u"][k])) for k in range(2, 30, 3)][1:5]
    assert [tuple(r) for r in rows] == want
    assert rows[0].nrow__ == want[0][0] and rows[0].u == want[0][2]
    blocks = list(t.iterblocks(7, outcols="f, i"))
    assert [len(b) for b in blocks] == [7, 7, 7, 7, 5]
    np.testing.assert_array_equal(np.concatenate(blocks), rec[["f", "i"]])
    assert len(list(t)) == 33


def test_attrs_persist(where):
    t = ca.ctable({"a": np.arange(3)}, **where)
    t.attrs["title"] = "x"
    t.cols["a"].attrs["unit"] = "m"
    t2 = reopen(t)
    assert t2.attrs["title"] == "x" and t2.cols["a"].attrs["unit"] == "m"


def test_modes(tmp_path):
    root = str(tmp_path / "t")
    t = ca.ctable({"a": np.arange(5)}, rootdir=root)
    t.close()
    with pytest.raises(ca.ContainerExistsError):
        ca.ctable({"a": np.arange(5)}, rootdir=root, mode="a")
    with pytest.raises(ValueError, match="needs columns"):
        ca.ctable(rootdir=root, mode="w")
    before = {p: os.stat(os.path.join(dp, p)).st_mtime_ns
              for dp, _, fs in os.walk(root) for p in fs}
    r = ca.open(root, mode="r")
    with pytest.raises(ca.ReadOnlyError):
        r.append({"a": [1]})
    with pytest.raises(ca.ReadOnlyError):
        r.attrs["x"] = 1
    with pytest.raises(ca.ReadOnlyError):
        r.addcol(np.arange(5), name="b")
    r.close()
    after = {p: os.stat(os.path.join(dp, p)).st_mtime_ns
             for dp, _, fs in os.walk(root) for p in fs}
    assert before == after
    t = ca.ctable({"b": np.arange(2)}, rootdir=root, mode="w")
    assert ca.open(root, mode="r").names == ["b"]
    with pytest.raises(ca.ContainerNotFoundError):
        ca.ctable(rootdir=str(tmp_path / "none"), mode="r")


def test_a_column_alone_keeps_the_table_length(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable({"a": np.arange(10), "b": np.arange(10.0)}, rootdir=root).close()
    a = ca.open(os.path.join(root, "a"))  # a writer of the column, holding the table's lock
    a[3] = -3  # edits are versions of the table
    a.flush()
    a.append(np.arange(10, 16))
    with pytest.raises(ValueError, match="table's length"):
        a.flush()
    a.resize(10)
    a.close()
    t = ca.open(root, mode="r")
    assert len(t) == 10 and t["a"][3] == -3


def test_interrupted_append_never_shows_uneven_columns(tmp_path):
    """A bcolz table: a crash between column flushes: readers see the shorter length."""
    root = str(tmp_path / "t")
    t = ca.ctable({"a": np.arange(10), "b": np.arange(10.0), "s": np.array(
        ["x"] * 10, dtype=object)}, rootdir=root, chunklen=4, format="bcolz")
    t.close()
    # Simulate the crash: one column got the new rows, the others did not.
    a = ca.open(os.path.join(root, "a"))
    a.append(np.arange(10, 16))
    a.close()
    r = ca.open(root, mode="r")
    assert len(r) == 10 and len(r["a"]) == 10
    np.testing.assert_array_equal(r["a"][:], np.arange(10))
    np.testing.assert_array_equal(r[:]["b"], np.arange(10.0))
    assert len(ca.open(os.path.join(root, "a"), mode="r")) == 16  # 'r' wrote nothing
    w = ca.open(root)  # 'a' cuts the extra rows, then appends cleanly
    w.append({"a": [99], "b": [9.5], "s": ["y"]})
    w.close()
    got = ca.open(root, mode="r")[:]
    assert list(got["a"]) == [*range(10), 99] and list(got["s"]) == ["x"] * 10 + ["y"]


def test_failed_column_write_cuts_the_table_back(monkeypatch):
    t = ca.ctable({"a": np.arange(10), "b": np.arange(10.0)}, chunklen=4)
    calls = {"n": 0}
    orig = ca.carray.append

    def failing(self, arr):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return orig(self, arr)

    monkeypatch.setattr(ca.carray, "append", failing)
    with pytest.raises(OSError):
        t.append({"a": np.arange(5), "b": np.arange(5.0)})
    monkeypatch.undo()
    assert len(t) == 10 and len(t["a"]) == 10 and len(t["b"]) == 10


def test_repr_and_info():
    t = ca.ctable({"a": np.arange(30)})
    assert "ctable((30,)" in repr(t)
    assert "..." in str(t)
    assert t.nbytes == 240 and t.cbytes > 0 and t.size == 30 and t.ndim == 1


def test_fromiter_with_structured_dtype(where):
    dt = np.dtype([("a", "i4"), ("b", "f8")])
    t = ca.fromiter(((i, i / 2) for i in range(100)), dtype=dt, count=100, **where)
    assert isinstance(t, ca.ctable)
    np.testing.assert_array_equal(t[:], np.array([(i, i / 2) for i in range(100)], dtype=dt))
    with pytest.raises(ValueError, match="too short"):
        ca.fromiter(((i, i) for i in range(3)), dtype=dt, count=5)


def test_empty_table(where):
    t = ca.ctable(np.zeros(0, dtype=[("a", "i4"), ("b", "S3")]), **where)
    t2 = reopen(t, "a")
    assert len(t2) == 0 and t2.names == ["a", "b"]
    t2.append({"a": [1], "b": [b"x"]})
    assert reopen(t2)[0].tolist() == (1, b"x")
    assert len(ca.ctable()) == 0


# -- every row key, against numpy ------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402


def _row_keys(n: int):
    ints = st.integers(-n, n - 1) if n else st.nothing()
    bounds = st.none() | st.integers(-n - 3, n + 3)
    steps = st.none() | st.integers(-5, 5).filter(lambda s: s != 0)
    lists = st.lists(st.integers(-n, n - 1), max_size=12) if n else st.just([])
    lists = lists.map(lambda v: np.array(v, dtype=int))
    return ints | st.builds(slice, bounds, bounds, steps) | lists | hnp.arrays(bool, n)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 40), chunklen=st.integers(1, 9), disk=st.booleans(), data=st.data())
def test_every_row_key_matches_numpy(tmp_path_factory, n, chunklen, disk, data):
    rec = sample(n)
    rec["s"] = rec["s"][::-1] if n else rec["s"]
    strings = np.array([f"v{i}" * (i % 4) for i in range(n)], dtype=object)
    root = str(tmp_path_factory.mktemp("t") / "t") if disk else None
    t = ca.ctable({**{k: rec[k] for k in rec.dtype.names}, "vs": strings}, chunklen=chunklen,
                  rootdir=root)
    if root:
        t.close()
        t = ca.open(root, mode="a")
    key = data.draw(_row_keys(n))
    got = t[key]
    want = rec[key]
    for name in rec.dtype.names:
        np.testing.assert_array_equal(np.asarray(got[name]), want[name])
    assert list(np.atleast_1d(got["vs"])) == list(np.atleast_1d(strings[key]))
    # writes through the same key land where numpy's would
    new = np.zeros_like(rec)
    new["i"] = -np.arange(n) - 1
    exp = rec.copy()
    exp[key] = new[key]
    t2 = ca.ctable(rec, chunklen=chunklen, rootdir=f"{root}2" if root else None)
    t2[key] = new[key]
    np.testing.assert_array_equal(t2[:], exp)


# -- odd input: unknown output columns, the row number's name, null counts --------------------


def test_unknown_columns_are_typed_key_errors_naming_the_column(where):
    t = ca.ctable({"x": np.arange(5), "y": np.arange(5.0)}, **where)
    for call in (lambda: t.fetchwhere("x > 2", outcols=["x", "nope"]),
                 lambda: list(t.where("x > 2", outcols="nope")),
                 lambda: t[["x", "nope"]], lambda: t.cols["nope"], lambda: t.delcol("nope"),
                 lambda: t.todataframe(columns=["nope"])):
        with pytest.raises(ca.ColumnNotFoundError, match="'nope'") as info:
            call()
        assert isinstance(info.value, KeyError) and isinstance(info.value, ca.CArrayError)
        assert "x" in str(info.value) and not str(info.value).startswith('"')


def test_the_row_number_name_is_refused_for_a_column(where):
    with pytest.raises(ca.ColumnNameError, match="nrow__"):
        ca.ctable({"nrow__": np.arange(3)}, **where)
    t = ca.ctable({"x": np.arange(3) + 10}, **where)
    with pytest.raises(ca.ColumnNameError, match="row number"):
        t.addcol(np.arange(3), name="nrow__")
    assert isinstance(ca.ColumnNameError("x"), ValueError)
    assert t.fetchwhere("x > 10", outcols=["nrow__", "x"]).tolist() == [(1, 11), (2, 12)]


def test_every_column_has_a_null_count(where):
    import pandas as pd

    t = ca.ctable({"i": np.arange(4), "s": np.array(["a", "b", "", "d"], dtype=object),
                   "u": np.array(["a", "b", "c", "d"]), "c": pd.Categorical(list("abab")),
                   "n": np.zeros(4, dtype=[("p", "i4"), ("q", "f8")]),
                   "m": np.ma.MaskedArray(np.arange(4.0), mask=[0, 1, 0, 0])}, **where)
    assert {n: t.cols[n].null_count() for n in t.names} == \
        {"i": 0, "s": 0, "u": 0, "c": 0, "n": 0, "m": 1}
    assert t.null_counts() == {"i": 0, "s": 0, "u": 0, "c": 0, "n": 0, "m": 1}
