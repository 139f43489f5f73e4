"""bcolz 1.x table directories: the t_* fixtures read exactly, our tables match
bcolz's bytes, and real bcolz (bcolz-zipline) reads ours and we read its."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import carray as ca

DATA = Path(__file__).parent.parent / "data" / "bcolz"
TABLES = [e for e in json.loads((DATA / "MANIFEST.json").read_text())["fixtures"]
          if e["kind"] == "ctable"]


@pytest.mark.parametrize("entry", TABLES, ids=[e["name"] for e in TABLES])
def test_table_fixture_reads_exactly(entry):
    t = ca.open(DATA / entry["path"], mode="r")
    meta = entry["expected_meta"]
    expected = np.load(DATA / entry["expected"])
    assert isinstance(t, ca.ctable)
    assert t.names == meta["names"] and len(t) == meta["len"]
    assert t.dtype == expected.dtype
    np.testing.assert_array_equal(t[:], expected)
    assert t.attrs.getall() == meta["attrs"]
    for name, colmeta in meta["columns"].items():
        col = t.cols[name]
        assert col.chunklen == colmeta["chunklen"]
        assert col.attrs.getall() == colmeta["attrs"]
    if len(t):
        np.testing.assert_array_equal(t[len(t) // 2], expected[len(expected) // 2])
        first = t.names[0]
        if expected.dtype[first].kind in "iuf":
            k = expected[first][len(expected) // 2]
            np.testing.assert_array_equal(t.fetchwhere(f"{first} == {k.item()!r}"),
                                          expected[expected[first] == k])


def test_column_attrs_of_fixture():
    t = ca.open(DATA / "t_basic.bcolz", mode="r")
    assert t.cols["f"].attrs["unit"] == "K"


# Tables made in one step (the others came from a sequence of appends and column changes).
ONE_STEP = [e for e in TABLES if e["params"]["ops"] == [f"create({e['expected_meta']['len']} rows)"]]


@pytest.mark.parametrize("entry", ONE_STEP, ids=[e["name"] for e in ONE_STEP])
def test_our_table_files_match_bcolz_bytes(entry, tmp_path):
    """Rebuilt with the same inputs, the JSON files are byte-identical."""
    meta = entry["expected_meta"]
    expected = np.load(DATA / entry["expected"])
    params = entry["params"]
    root = tmp_path / "t"
    kw = {"chunklen": params["chunklen"]} if params.get("chunklen") else {}
    if params.get("cparams"):
        kw["cparams"] = params["cparams"]
    t = ca.ctable(expected, rootdir=str(root), format="bcolz", **kw)
    for k, v in (params.get("attrs") or {}).items():
        t.attrs[k] = v
    t.close()
    assert (root / "__rootdirs__").read_text() == meta["rootdirs_text"]
    src = DATA / entry["path"]
    assert (root / "__attrs__").read_bytes() == (src / "__attrs__").read_bytes()
    for name, colmeta in meta["columns"].items():
        if meta["len"]:  # bcolz's empty columns record an expectedlen we do not copy
            assert (root / name / "meta" / "storage").read_text() == colmeta["meta_storage_text"]
        sizes = json.loads((root / name / "meta" / "sizes").read_text())
        assert sizes["shape"] == json.loads(colmeta["meta_sizes_text"])["shape"]
        nfiles = len(os.listdir(root / name / "data")) if (root / name / "data").exists() else 0
        assert nfiles == colmeta["n_blp_files"]


bcolz = pytest.importorskip("bcolz", reason="bcolz-zipline 1.13.0, the real bcolz, has wheels only for Python < 3.13")


def test_bcolz_reads_our_tables(tmp_path):
    root = str(tmp_path / "t")
    rec = np.zeros(1000, dtype=[("i", "<i8"), ("f", "<f4"), ("s", "S6"), ("u", "<U3"),
                                ("b", "?"), ("v", "<f8", (3,))])
    rec["i"] = np.arange(1000) - 500
    rec["f"] = np.linspace(0, 1, 1000)
    rec["s"] = [b"k%d" % (i % 50) for i in range(1000)]
    rec["u"] = [f"é{i % 7}" for i in range(1000)]
    rec["b"] = np.arange(1000) % 2 == 0
    rec["v"] = np.arange(3000.0).reshape(1000, 3)
    t = ca.ctable(rec, rootdir=root, chunklen=64, cparams=ca.CParams(cname="zstd", clevel=3),
                  format="bcolz")
    t.attrs["who"] = "carray"
    t.addcol(rec["i"] * 2, name="twice")
    t.delcol("b")
    t.append([rec[n][:5] for n in ["i", "f", "s", "u", "v"]] + [rec["i"][:5] * 2])
    t.close()
    theirs = bcolz.open(root, mode="r")
    assert list(theirs.names) == ["i", "f", "s", "u", "v", "twice"]
    assert len(theirs) == 1005
    got = theirs[:]
    np.testing.assert_array_equal(got["i"][:1000], rec["i"])
    np.testing.assert_array_equal(got["twice"][:1000], rec["i"] * 2)
    np.testing.assert_array_equal(got["u"][:1000], rec["u"])
    np.testing.assert_array_equal(got["v"][1000:], rec["v"][:5])
    assert theirs.attrs["who"] == "carray"
    assert len(list(theirs.where("i < -495", outcols=["i", "s"]))) == 5 + 5


def test_we_read_and_extend_what_bcolz_writes(tmp_path):
    root = str(tmp_path / "t")
    n = 3000
    theirs = bcolz.ctable([np.arange(n), np.arange(n) * 0.5, np.array([b"ab", b"c"] * (n // 2))],
                          names=["a", "b", "c"], rootdir=root, chunklen=256)
    theirs.attrs["x"] = 1
    theirs.addcol(np.arange(n, dtype="i2"), name="d")
    theirs.flush()
    ours = ca.open(root)
    np.testing.assert_array_equal(ours["b"][:], np.arange(n) * 0.5)
    assert ours.names == ["a", "b", "c", "d"] and ours.attrs["x"] == 1
    np.testing.assert_array_equal(ours.fetchwhere("(a > 10) & (a < 13)")["c"], [b"c", b"ab"])
    ours.append((n, 1.0, b"zz", 7))
    ours.close()
    again = bcolz.open(root, mode="r")
    assert len(again) == n + 1 and again[n].tolist() == (n, 1.0, b"zz", 7)
