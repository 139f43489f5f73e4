"""Directories written before versions (format 2, kept in tests/data/carray_v2): they read
as they are, a reader writes nothing, and a writer's first commit makes them versioned."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import numpy as np
import pytest

import carray as ca

DATA = pathlib.Path(__file__).parents[1] / "data" / "carray_v2"
ARRAYS = ["a1d", "nd", "zeros", "blosc1", "edited"]


def _files(root) -> dict:
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(root) for f in fs}


@pytest.mark.parametrize("name", ARRAYS)
def test_a_directory_of_format_2_reads_and_upgrades(tmp_path, name):
    root = tmp_path / f"{name}.carray"
    shutil.copytree(DATA / f"{name}.carray", root)
    expected = np.load(DATA / f"{name}.expected.npy")
    before = _files(root)
    r = ca.open(str(root), mode="r")
    np.testing.assert_array_equal(r[:], expected)
    np.testing.assert_array_equal(r[tuple(slice(1, None, 3) for _ in expected.shape)],
                                  expected[tuple(slice(1, None, 3) for _ in expected.shape)])
    assert r.versions() == [] and r.version is None
    r.close()
    assert _files(root) == before  # mode 'r' wrote nothing
    attrs = ca.open(str(root), mode="r").attrs.getall()
    w = ca.open(str(root))
    w.append(expected[:2])
    vid = w.commit("after the upgrade")
    w.close()
    storage = json.loads((root / "meta" / "storage").read_text())
    assert storage["format_version"] == 4 and "crc32" in storage
    assert not (root / "meta" / "sizes").exists() and not (root / "meta" / "attrs").exists()
    b = ca.open(str(root), mode="r")
    np.testing.assert_array_equal(b[:], np.concatenate([expected, expected[:2]]))
    assert b.version == vid and b.attrs.getall() == attrs
    from carray.cli.verify import verify_path

    assert verify_path(root)[0] == []


def test_a_bloscpack_compatible_directory_stays_so(tmp_path, bloscpack_peer):
    root = tmp_path / "b.carray"
    shutil.copytree(DATA / "blosc1.carray", root)
    expected = np.load(DATA / "blosc1.expected.npy")
    w = ca.open(str(root))
    w[5] = -1.0
    w.append(np.ones(100))
    w.close()
    expected = np.concatenate([expected, np.ones(100)])
    expected[5] = -1.0
    raw = b"".join(bloscpack_peer.unpack_bytes_from_file(str(root / "data" / f))[0]
                   for f in sorted(os.listdir(root / "data")))
    np.testing.assert_array_equal(np.frombuffer(raw, expected.dtype), expected)


def test_a_table_of_format_2_reads_and_upgrades(tmp_path):
    root = tmp_path / "table.ctable"
    shutil.copytree(DATA / "table.ctable", root)
    x = np.load(DATA / "table.x.expected.npy")
    y = np.load(DATA / "table.y.expected.npy")
    s = json.loads((DATA / "table.s.expected.json").read_text())
    before = _files(root)
    r = ca.open(str(root), mode="r")
    assert r.names == ["x", "y", "s"] and r.attrs["source"] == "fixture"
    np.testing.assert_array_equal(r["x"][:], x)
    assert r["s"][:].tolist() == s
    r.close()
    assert _files(root) == before
    t = ca.open(str(root))  # a writer: its columns become one versioned dataset
    assert len(t.versions()) == 1
    t.append({"x": [1], "y": [2.0], "s": ["new"]})
    t.close()
    assert sorted(os.listdir(root)) == ["__table__", "s", "versions", "x", "y"]
    u = ca.open(str(root), mode="r")
    np.testing.assert_array_equal(u["y"][:-1], y)
    assert u["s"][:].tolist() == [*s, "new"] and u.attrs["source"] == "fixture"
    from carray.cli.verify import verify_path
    assert verify_path(root)[0] == []
