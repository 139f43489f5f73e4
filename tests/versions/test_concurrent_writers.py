"""Writers that race to commit one dataset where nothing is locked (object stores; here
``memory://``, whose handles in one process lock nothing either): every commit that
returns an id is kept, appends from both writers all land, disjoint edits rebase, and
overlapping ones raise ConflictError with the loser's changes still pending
(docs/spec/commit.md [C1] [C2] [C9] [C10] [C11])."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import carray as ca
from carray.errors import ConflictError


@pytest.fixture
def url():
    return f"memory://race-{uuid.uuid4().hex}"


def _array(url, n=10, chunklen=4):
    a = ca.carray(np.arange(n, dtype="f8"), chunklen=chunklen, rootdir=f"{url}/a",
                  mode="w", storage={"versions": "all"})
    a.close()
    return f"{url}/a"


def test_appends_of_two_writers_both_land_C1_C9_C10(url):
    path = _array(url)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b.append([100.0, 101.0, 102.0])
    vb = b.commit("b")
    c.append([200.0])
    vc = c.commit("c")
    got = ca.open(path)[:]
    assert got.tolist() == [*range(10), 100, 101, 102, 200]
    ids = {v.id for v in ca.open(path).versions()}
    assert {vb, vc} <= ids
    assert ca.open(path, version=vb)[:].tolist() == [*range(10), 100, 101, 102]


def test_disjoint_edits_rebase_C11(url):
    path = _array(url, n=16)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b[1] = -1.0
    b.commit()
    c[13] = -13.0
    c.append([7.0])
    c.attrs["who"] = "c"
    c.commit()
    got = ca.open(path)
    assert got[1] == -1 and got[13] == -13 and got[-1] == 7 and len(got) == 17
    assert got.attrs["who"] == "c"


def test_overlapping_edits_conflict_and_stay_pending_C11(url):
    path = _array(url, n=16)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b[2] = 2.5
    b.commit()
    c[3] = 3.5  # the same chunk (0..3) as b's edit
    with pytest.raises(ConflictError) as info:
        c.commit()
    assert "chunk" in str(info.value) and info.value.conflicts
    assert c[3] == 3.5  # still pending
    assert ca.open(path)[3] == 3.0  # nothing of it committed
    c.reset()  # dropped: the newest version
    assert c[2] == 2.5 and c[3] == 3.0
    c[3] = 3.5
    c.commit()
    assert ca.open(path)[2:4].tolist() == [2.5, 3.5]


def test_refresh_puts_pending_changes_on_top_of_the_newest(url):
    path = _array(url)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b.append([1.0])
    b.commit()
    c.append([2.0])
    assert c.refresh() is True
    assert c[:].tolist() == [*range(10), 1.0, 2.0]
    assert c.refresh() is False
    c.commit()
    assert ca.open(path)[:].tolist() == [*range(10), 1.0, 2.0]


def test_attribute_conflict(url):
    path = _array(url)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b.attrs["k"] = 1
    b.commit()
    c.attrs["k"] = 2
    with pytest.raises(ConflictError):
        c.commit()


def test_a_shrink_conflicts_with_any_other_change(url):
    path = _array(url)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b.append([1.0])
    b.commit()
    c.resize(5)
    with pytest.raises(ConflictError):
        c.commit()
    assert len(ca.open(path)) == 11


def test_n_d_appends_and_edits_rebase(url):
    a = ca.carray(np.zeros((6, 5, 4)), chunks=(2, 5, 2), rootdir=f"{url}/nd", mode="w")
    a.close()
    b, c = ca.open(f"{url}/nd", mode="a"), ca.open(f"{url}/nd", mode="a")
    b[0, :, 0:2] = 1.0
    b.append(np.full((3, 5, 4), 2.0))
    b.commit()
    c[5, :, 2:] = 3.0
    c.append(np.full((1, 5, 4), 4.0))
    c.commit()
    want = np.zeros((10, 5, 4))
    want[0, :, 0:2] = 1
    want[5, :, 2:] = 3
    want[6:9] = 2
    want[9] = 4
    np.testing.assert_array_equal(ca.open(f"{url}/nd")[:], want)


# -- tables -------------------------------------------------------------------------------


def _table(url):
    t = ca.ctable({"x": np.arange(10), "s": np.array([f"s{i}" for i in range(10)], "U4"),
                   "c": pd_categorical(["a", "b"] * 5)},
                  rootdir=f"{url}/t", mode="w", chunklen=4)
    t.close()
    return f"{url}/t"


def pd_categorical(values):
    pd = pytest.importorskip("pandas", reason="categories come from pandas")
    return pd.Series(pd.Categorical(values))


def test_table_appends_of_two_writers_both_land(url):
    path = _table(url)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b.append({"x": [100, 101], "s": ["b0", "b1"], "c": ["a", "z"]})
    b.commit()
    c.append({"x": [200], "s": ["c0"], "c": ["y"]})
    c["x"][1] = -1
    c.commit()
    got = ca.open(path).todataframe()
    assert got["x"].tolist() == [0, -1, *range(2, 10), 100, 101, 200]
    assert got["s"].tolist()[-3:] == ["b0", "b1", "c0"]
    assert got["c"].astype(str).tolist()[-3:] == ["a", "z", "y"]


def test_table_edits_of_the_same_rows_conflict(url):
    path = _table(url)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b["x"][2] = 22
    b.commit()
    c["x"][3] = 33
    with pytest.raises(ConflictError) as info:
        c.commit()
    assert "x" in str(info.value)
    c.reset()
    assert c["x"][2] == 22 and c["x"][3] == 3


def test_table_columns_changed_by_another_writer_conflict(url):
    path = _table(url)
    b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
    b.addcol(np.zeros(10), name="y")
    b.commit()
    c.append({"x": [1], "s": ["q"], "c": ["a"]})
    with pytest.raises(ConflictError):
        c.commit()


# -- groups -------------------------------------------------------------------------------


def test_group_writers_appending_to_different_arrays_both_land(url):
    g = ca.group(f"{url}/g", mode="w")
    with g.transaction():
        g.create_array("a", np.arange(4), chunks=(4,))
        g.create_array("b", np.arange(4), chunks=(4,))
    g.close()
    w1, w2 = ca.group(f"{url}/g"), ca.group(f"{url}/g")
    w1["a"].append([10])
    w1.commit()
    w2["b"].append([20])
    w2.commit()
    r = ca.open_group(f"{url}/g")
    assert r["a"][:].tolist() == [0, 1, 2, 3, 10]
    assert r["b"][:].tolist() == [0, 1, 2, 3, 20]


def test_group_writers_appending_to_one_array_both_land(url):
    g = ca.group(f"{url}/g", mode="w")
    g.create_array("a", np.arange(4), chunks=(4,))
    g.close()
    w1, w2 = ca.group(f"{url}/g"), ca.group(f"{url}/g")
    w1["a"].append([10])
    w1.commit()
    w2["a"].append([20])
    w2.commit()
    assert ca.open_group(f"{url}/g")["a"][:].tolist() == [0, 1, 2, 3, 10, 20]


def test_group_attrs_of_one_node_conflict(url):
    g = ca.group(f"{url}/g", mode="w")
    g.create_array("a", np.arange(4), chunks=(4,))
    g.close()
    w1, w2 = ca.group(f"{url}/g"), ca.group(f"{url}/g")
    w1.attrs["title"] = "one"
    w1.commit()
    w2.attrs["title"] = "two"
    with pytest.raises(ConflictError):
        w2.commit()


# -- failures at every storage call of a losing writer's commit (its rebase) -------------

_CALLS = ("put", "put_if_absent", "get", "get_ranges", "read_range", "delete", "listdir",
          "isfile")


def _failing_at(monkeypatch, at: int):
    from carray.stores.fsspec import FsspecStore

    count = [0]
    for name in _CALLS:
        real = getattr(FsspecStore, name)

        def call(self, *args, _real=real, **kwargs):
            count[0] += 1
            if count[0] == at:
                raise OSError(5, "injected I/O error")
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(FsspecStore, name, call)
    return count


@pytest.mark.parametrize("change", ["append", "edit"])
def test_a_failure_at_any_storage_call_of_a_rebase_loses_nothing_C9_C10(change, monkeypatch):
    """The loser of a race rebases; an I/O error at any storage call of its commit (the
    publish attempt, reading the winner's version, the rebase, the publish after it)
    raises, leaves the winner's version whole, and keeps the loser's change pending:
    committing again lands it."""
    for at in range(1, 200):
        url = f"memory://fail-{uuid.uuid4().hex}"
        path = _array(url, n=16)
        b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
        b.append([100.0])
        b.commit()
        if change == "append":
            c.append([200.0])
        else:
            c[13] = -13.0
        count = _failing_at(monkeypatch, at)
        failed = False
        try:
            c.commit()
        except OSError:
            failed = True
        finally:
            monkeypatch.undo()
        got = ca.open(path)[:].tolist()
        want = [*range(16), 100.0]
        if change == "append":
            mine = [*want, 200.0]
        else:
            mine = list(want)
            mine[13] = -13.0
        assert got in (want, mine), (at, got)
        if failed:
            c.commit()  # the change was kept pending
        assert ca.open(path)[:].tolist() == mine, at
        if count[0] < at:  # the commit made fewer calls: every one was failed once
            break
    else:
        pytest.fail("the commit never completed")


def test_a_failure_at_any_storage_call_of_a_table_rebase_loses_nothing(monkeypatch):
    for at in range(1, 400):
        url = f"memory://tfail-{uuid.uuid4().hex}"
        path = _table(url)
        b, c = ca.open(path, mode="a"), ca.open(path, mode="a")
        b.append({"x": [100], "s": ["b"], "c": ["a"]})
        b.commit()
        c.append({"x": [200], "s": ["c"], "c": ["z"]})
        count = _failing_at(monkeypatch, at)
        failed = False
        try:
            c.commit()
        except OSError:
            failed = True
        finally:
            monkeypatch.undo()
        got = ca.open(path)["x"][:].tolist()
        assert got in ([*range(10), 100], [*range(10), 100, 200]), (at, got)
        if failed:
            c.commit()  # the change was kept pending
        assert ca.open(path)["x"][:].tolist() == [*range(10), 100, 200], at
        if count[0] < at:
            break
    else:
        pytest.fail("the commit never completed")
