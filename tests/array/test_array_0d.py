"""0-d carrays: numpy scalars as arrays of shape (), in memory and in every layout that
can hold them, and python-blosc2's 0-d frames opened as carrays."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import carray as ca

DATA = pathlib.Path(__file__).parents[1] / "data" / "blosc2"


@pytest.mark.parametrize("value", [np.float64(3.5), np.int8(-7), np.bool_(True),
                                   np.complex64(1 + 2j), np.array("abc"), 42])
def test_scalar_in_memory(value):
    a = ca.carray(value)
    expected = np.asarray(value)
    assert a.shape == () and a.ndim == 0 and a.size == 1 and a.dtype == expected.dtype
    assert a[()] == expected[()]
    assert np.asarray(a).shape == () and np.asarray(a)[()] == expected[()]
    assert a[...].shape == ()
    assert a.nbytes == expected.dtype.itemsize and a.chunks == ()


@pytest.mark.parametrize("fmt,name", [("superchunk", "s"), ("b2nd", "s.b2nd"),
                                      ("caterva", "s.caterva")])
def test_scalar_on_disk_round_trips(tmp_path, fmt, name):
    path = str(tmp_path / name)
    a = ca.carray(np.float32(2.5), rootdir=path, format=fmt)
    a[()] = 4.0
    a.close()
    b = ca.open(path, mode="r")
    assert b.shape == () and b.dtype == np.float32 and b[()] == 4.0


def test_scalar_b2nd_reads_in_python_blosc2(tmp_path):
    blosc2 = pytest.importorskip("blosc2", reason="blosc2 is a test dependency")
    path = str(tmp_path / "x.b2nd")
    ca.carray(np.int64(123), rootdir=path).close()
    assert blosc2.open(path)[()] == 123


def test_python_blosc2_scalar_frame_opens_as_a_carray():
    a = ca.open(str(DATA / "nd_scalar_0d.b2nd"), mode="r")
    expected = np.load(DATA / "nd_scalar_0d.expected.npy")
    assert a.shape == () == expected.shape
    assert a[()] == expected[()]


def test_rows_api_refuses_a_scalar_as_numpy_does():
    a = ca.carray(np.float64(1))
    with pytest.raises(TypeError):
        len(a)
    with pytest.raises(TypeError):
        iter(a)
    with pytest.raises(TypeError):
        a.append(1)
    with pytest.raises(IndexError):
        a[0]
    with pytest.raises(ValueError):
        a.resize(3)
    with pytest.raises(ValueError):
        ca.carray(np.float64(1), rootdir="unused", format="bcolz")


def test_scalar_copy_reshape_and_display():
    a = ca.carray(np.int32(5))
    b = a.copy(cparams=ca.CParams(clevel=9))
    assert b[()] == 5 and b.cparams.clevel == 9
    assert a.reshape((1, 1))[:].tolist() == [[5]]
    assert ca.arange(1).reshape(())[()] == 0
    assert str(a) == "5" and repr(a).startswith("carray((), int32)")
    assert ca.carray(a)[()] == 5


def test_empty_b2nd_reports_the_chunks_python_blosc2_reports(tmp_path):
    # python-blosc2 records chunks and blocks of 0 along an empty axis.
    a = ca.open(str(DATA / "nd_empty_0x3.b2nd"), mode="r")
    assert a.shape == (0, 3) and a.chunks == (0, 3) and a.blocks == (0, 3)
    assert a[:].shape == (0, 3) and list(a.iterblocks()) == []
    c = a.copy()
    assert c.shape == (0, 3)


def test_empty_b2nd_keeps_its_zero_chunks_until_it_grows(tmp_path):
    import shutil

    path = str(tmp_path / "e.b2nd")
    shutil.copy(DATA / "nd_empty_0x3.b2nd", path)
    a = ca.open(path)
    a.flush()
    a.close()
    assert ca.open(path, mode="r").chunks == (0, 3)
    a = ca.open(path)
    a.append(np.ones((2, 3)))
    assert a.chunks[1] == 3 and a.chunks[0] >= 1
    a.close()
    b = ca.open(path, mode="r")
    np.testing.assert_array_equal(b[:], np.ones((2, 3)))


def test_head_of_a_scalar_is_its_value(tmp_path):
    from carray import registry

    path = str(DATA / "nd_scalar_0d.b2nd")
    assert registry.guess(path).head(path, 5, None)["value"] == 42.5
    own = str(tmp_path / "s")
    ca.carray(np.int16(3), rootdir=own).close()
    assert registry.guess(own).head(own, 5, None)["value"] == 3
    assert not [f for f in registry.verify(own) if hasattr(f, "what")]
