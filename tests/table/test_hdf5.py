"""ctable.tohdf5 / ctable.fromhdf5 through PyTables (the ``hdf5`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca

tables = pytest.importorskip("tables", reason="tables is a test dependency")


def sample(n: int = 40_000) -> ca.ctable:
    words = np.array(["a", "bé", "ccc", ""] * (n // 4), dtype=object)
    return ca.ctable([np.arange(n), np.linspace(0, 1, n), words,
                      np.arange(n * 2, dtype="i2").reshape(n, 2),
                      np.array([b"x", b"yz"] * (n // 2))],
                     names=["i", "f", "s", "pair", "raw"])


def test_round_trip_with_blosc_filters_and_attrs(tmp_path):
    path = str(tmp_path / "t.h5")
    t = sample()
    t.attrs["units"] = "m"
    t.attrs["scale"] = 2.5
    t.tohdf5(path, cparams=ca.CParams(clevel=3, cname="zstd"))
    with tables.open_file(path) as f:
        node = f.root.ctable
        assert node.nrows == len(t)
        assert node.filters.complib == "blosc:zstd" and node.filters.complevel == 3
        assert node.attrs["units"] == "m"
    u = ca.ctable.fromhdf5(path, rootdir=str(tmp_path / "back"))
    assert u.names == t.names and len(u) == len(t)
    for name in t.names:
        np.testing.assert_array_equal(u[name][:], t[name][:])
    assert u.attrs["units"] == "m" and u.attrs["scale"] == 2.5


def test_nodepath_mode_and_cname(tmp_path):
    path = str(tmp_path / "t.h5")
    t = ca.ctable([np.arange(10)], names=["x"])
    t.tohdf5(path)
    t.tohdf5(path, nodepath="/group/inner/t2", mode="a", cname="zlib")
    with tables.open_file(path) as f:
        assert f.root.group.inner.t2.filters.complib == "zlib"
        assert f.root.ctable.nrows == 10
    np.testing.assert_array_equal(ca.ctable.fromhdf5(path, "/group/inner/t2")["x"][:],
                                  np.arange(10))


def test_empty_table(tmp_path):
    path = str(tmp_path / "e.h5")
    ca.ctable([np.empty(0, "f4")], names=["v"]).tohdf5(path)
    u = ca.ctable.fromhdf5(path)
    assert len(u) == 0 and u.dtype == np.dtype([("v", "f4")])


def test_errors_name_the_file(tmp_path):
    with pytest.raises(ca.ContainerNotFoundError):
        ca.ctable.fromhdf5(str(tmp_path / "missing.h5"))
    path = str(tmp_path / "g.h5")
    with tables.open_file(path, "w") as f:
        f.create_group("/", "ctable")
    with pytest.raises(ca.FormatError, match="not a table"):
        ca.ctable.fromhdf5(path)
    with pytest.raises(ca.FormatError, match="no node"):
        ca.ctable.fromhdf5(path, "/nothing")
