"""Arrays stored in Fortran order (``order='F'``): the stored array is the transpose, so
chunks hold their items in Fortran order, and reads come back Fortran-contiguous."""

from __future__ import annotations

import json

import blosc2
import numpy as np
import pytest

import carray as ca


@pytest.fixture(params=["memory", "disk"])
def rootdir(request, tmp_path):
    return None if request.param == "memory" else str(tmp_path / "f")


def sample() -> np.ndarray:
    return np.arange(6 * 5 * 4, dtype="f8").reshape(6, 5, 4)


def test_values_and_order(rootdir):
    x = sample()
    a = ca.carray(x, order="F", rootdir=rootdir, chunks=(4, 5, 2))
    assert a.order == "F" and a.shape == x.shape and a.chunks == (4, 5, 2)
    got = a[:]
    assert got.flags.f_contiguous
    np.testing.assert_array_equal(got, x)
    np.testing.assert_array_equal(a[1:5, ::2, 3], x[1:5, ::2, 3])
    assert a[5, 4, 3] == x[5, 4, 3]
    np.testing.assert_array_equal(a.vindex[[0, 5], [1, 2], [3, 0]], x[[0, 5], [1, 2], [3, 0]])
    np.testing.assert_array_equal(a[x > 50], x[x > 50])


def test_writes_appends_and_resizes(rootdir):
    x = sample()
    a = ca.carray(x, order="F", rootdir=rootdir, chunks=(4, 5, 2))
    a[2, 1:3] = -1
    x[2, 1:3] = -1
    a.vindex[[0, 1], [0, 1], [0, 1]] = [7, 8]
    x[[0, 1], [0, 1], [0, 1]] = [7, 8]
    a.append(np.ones((3, 5, 4)))
    x = np.concatenate([x, np.ones((3, 5, 4))])
    np.testing.assert_array_equal(a[:], x)
    np.testing.assert_array_equal(np.concatenate(list(a.iterblocks(4))), x)
    a.resize((10, 5, 3))
    np.testing.assert_array_equal(a[:9], x[:, :, :3])
    assert (a[9] == 0).all()


def test_order_is_recorded_and_reopened(tmp_path):
    path = str(tmp_path / "f")
    x = sample()
    ca.carray(x, order="F", rootdir=path).close()
    with open(f"{path}/meta/storage") as f:
        storage = json.load(f)
    assert storage["order"] == "F"
    b = ca.open(path, mode="r")
    assert b.order == "F" and b.shape == x.shape
    np.testing.assert_array_equal(b[:], x)
    assert ca.open(path).copy().order == "F"


def test_a_chunk_holds_its_items_in_fortran_order():
    x = sample()
    a = ca.carray(x, order="F", chunks=x.shape, blocks=x.shape)
    raw = blosc2.decompress(a.engine.read_stored(0))
    assert raw == x.tobytes(order="F")


def test_one_dimensional_fortran_is_c():
    a = ca.carray(np.arange(10), order="F")
    a.append([10, 11])
    np.testing.assert_array_equal(a[:], np.arange(12))


@pytest.mark.parametrize("fmt,name", [("b2nd", "x.b2nd"), ("bcolz", "x")])
def test_formats_without_fortran_order_refuse_it(tmp_path, fmt, name):
    with pytest.raises(ValueError, match="Fortran"):
        ca.carray(sample(), order="F", rootdir=str(tmp_path / name), format=fmt)
    with pytest.raises(ValueError):
        ca.carray(sample(), order="K")


def test_python_blosc2_reads_the_same_values(tmp_path):
    # python-blosc2 has no Fortran order: a copy to a .b2nd frame (C order) holds the
    # same values.
    x = sample()
    a = ca.carray(x, order="F")
    path = str(tmp_path / "c.b2nd")
    a.copy(rootdir=path, order="C").close()
    np.testing.assert_array_equal(blosc2.open(path)[:], x)


def test_fortran_rows_are_never_left_over():
    a = ca.carray(sample(), order="F", chunks=(4, 5, 4))
    assert a.leftover == a.leftover_elements == 0
    with pytest.raises(ValueError, match="Fortran"):
        _ = a.leftover_array
