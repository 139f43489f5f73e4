"""Nested table columns: a column of a structured dtype is stored field by field in
subdirectories (``b/sc1``, ``b/sc3``), each field a real column."""

from __future__ import annotations

import os

import numpy as np
import pytest

import carray as ca
from carray.table.columns.nested import NestedColumn

INNER = np.dtype([("sc1", "i4"), ("sc3", "f8")])
ROW = np.dtype([("a", "i8"), ("b", INNER)])


@pytest.fixture(params=["memory", "disk"])
def rootdir(request, tmp_path):
    return None if request.param == "memory" else str(tmp_path / "t")


def sample(n: int = 100) -> np.ndarray:
    rows = np.zeros(n, dtype=ROW)
    rows["a"] = np.arange(n)
    rows["b"]["sc1"] = np.arange(n) * 10
    rows["b"]["sc3"] = np.arange(n) / 4
    return rows


def test_rows_read_back_as_nested_records(rootdir):
    rows = sample()
    t = ca.ctable(rows, rootdir=rootdir)
    assert t.dtype == ROW and t.names == ["a", "b"]
    assert isinstance(t.cols["b"], NestedColumn)
    got = t[:]
    assert got.dtype == ROW
    np.testing.assert_array_equal(got, rows)
    assert t[7].tolist() == (7, (70, 1.75))
    np.testing.assert_array_equal(t[[3, 1, 4]], rows[[3, 1, 4]])
    np.testing.assert_array_equal(t["b"][10:20], rows["b"][10:20])


def test_a_field_is_a_real_column(rootdir):
    t = ca.ctable(sample(), rootdir=rootdir)
    sc1 = t.cols["b"]["sc1"]
    assert isinstance(sc1, ca.carray) and sc1.dtype == np.dtype("i4")
    np.testing.assert_array_equal(sc1[:], np.arange(100) * 10)
    assert t.cols["b"].names == ["sc1", "sc3"]


def test_stored_in_subdirectories(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable(sample(), rootdir=root).close()
    b = os.path.join(root, "b")
    assert os.path.isdir(os.path.join(b, "sc1")) and os.path.isdir(os.path.join(b, "sc3"))
    # The table's version names the fields (a bcolz table writes b/__rootdirs__ instead).
    assert ca.open(root, mode="r").versions()[0].shape == (100,)
    # Each field opens on its own, as the carray it is.
    np.testing.assert_array_equal(ca.open(os.path.join(b, "sc3"), mode="r")[:],
                                  np.arange(100) / 4)
    t = ca.open(root, mode="r")
    np.testing.assert_array_equal(t[:], sample())


def test_append_edit_resize(rootdir):
    rows = sample(10)
    t = ca.ctable(rows, rootdir=rootdir)
    more = sample(5)
    t.append(more)
    t[2] = (-1, (-2, -3.0))
    rows = np.concatenate([rows, more])
    rows[2] = (-1, (-2, -3.0))
    np.testing.assert_array_equal(t[:], rows)
    t.resize(12)
    np.testing.assert_array_equal(t[:], rows[:12])
    assert [r.a for r in t.where("a > 7")] == [8, 9]
    if rootdir is not None:
        t.close()
        np.testing.assert_array_equal(ca.open(rootdir, mode="r")[:], rows[:12])


def test_deeper_nesting_and_iteration(rootdir):
    deep = np.dtype([("x", "i2"), ("y", [("p", "f4"), ("q", "u1")])])
    dtype = np.dtype([("k", "i4"), ("n", deep)])
    rows = np.zeros(20, dtype=dtype)
    rows["k"] = np.arange(20)
    rows["n"]["y"]["p"] = np.arange(20) * 1.5
    t = ca.ctable(rows, rootdir=rootdir)
    assert isinstance(t.cols["n"]["y"], NestedColumn)
    np.testing.assert_array_equal(t.cols["n"]["y"]["p"][:], rows["n"]["y"]["p"])
    np.testing.assert_array_equal(np.concatenate(list(t.iterblocks(7))), rows)
    assert len(list(t.iter())) == 20


def test_fromiter_with_a_nested_dtype():
    t = ca.fromiter(((i, (i * 10, i / 4)) for i in range(30)), dtype=ROW, count=30)
    np.testing.assert_array_equal(t[:], sample(30))


def test_verify_checks_the_fields(tmp_path):
    from carray import registry

    root = str(tmp_path / "t")
    ca.ctable(sample(), rootdir=root).close()
    assert not [f for f in registry.verify(root) if hasattr(f, "what")]
    os.remove(os.path.join(root, "b", "sc3", "meta", "storage"))
    problems = [f for f in registry.verify(root) if hasattr(f, "what")]
    assert problems and "sc3" in str(problems[0].path)


def test_bcolz_format_records_are_one_column_as_bcolz_writes_them(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable(sample(), rootdir=root, format="bcolz").close()
    col = ca.open(os.path.join(root, "b"), mode="r")  # one carray of records
    assert isinstance(col, ca.carray) and col.layout == "Bcolz" and col.dtype == INNER
    assert not os.path.exists(os.path.join(root, "b", "sc1"))
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], sample())


def test_a_carray_of_records_becomes_a_nested_column():
    records = ca.carray(sample(20)["b"])
    t = ca.ctable([np.arange(20), records], names=["a", "b"])
    assert isinstance(t.cols["b"], NestedColumn)
    np.testing.assert_array_equal(t[:], sample(20))
    t.addcol(sample(20)["b"], name="c")
    np.testing.assert_array_equal(t.cols["c"]["sc3"][:], sample(20)["b"]["sc3"])
