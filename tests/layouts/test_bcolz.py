"""bcolz 1.x directories: golden fixtures read exactly, our files match bcolz's bytes,
real bcolz (bcolz-zipline, same format and reader) reads ours and we read its."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.errors import CodecUnavailableError, FormatError, UnsafeDataError

DATA = Path(__file__).parent.parent / "data" / "bcolz"
FIXTURES = [e for e in json.loads((DATA / "MANIFEST.json").read_text())["fixtures"]
            if e["kind"] == "carray"]
REQUIRED = [e for e in FIXTURES if not e.get("optional")]


def _expected(entry) -> np.ndarray:
    return np.load(DATA / entry["expected"])


def _decode_json(value):
    if isinstance(value, dict):
        if "$float" in value:
            return float(value["$float"])
        if "$bytes" in value:
            return bytes.fromhex(value["$bytes"])
    return value


@pytest.mark.parametrize("entry", REQUIRED, ids=[e["name"] for e in REQUIRED])
def test_fixture_reads_exactly(entry):
    a = ca.open(DATA / entry["path"], mode="r")
    expected = _expected(entry)
    meta = entry["expected_meta"]
    assert a.shape == expected.shape == tuple(meta["shape"])
    assert a.dtype == expected.dtype.base
    assert a.chunklen == meta["chunklen"]
    assert a.nchunks == meta["nchunks_full"] and a.leftover == meta["nleftover"]
    assert a.cparams.to_dict() == meta["cparams"]
    assert a.attrs.getall() == meta["attrs"]
    got = a[:]
    if expected.dtype.kind == "f":
        np.testing.assert_array_equal(got, expected)
    else:
        assert np.array_equal(got, expected)
    # partial reads agree with the full read
    n = len(expected)
    if n:
        for key in (n // 2, slice(n // 3, n // 3 + 7), slice(None, None, 5), [0, n - 1, n // 2]):
            np.testing.assert_array_equal(a[key], expected[key])


def test_fixture_dflt_values():
    by_name = {e["name"]: e for e in FIXTURES}
    assert ca.open(DATA / by_name["c_i2_resized_dflt"]["path"], mode="r").dflt == -5
    assert np.isinf(ca.open(DATA / by_name["c_f8_blosclz_c1_dflt_inf"]["path"], mode="r").dflt)
    assert np.isnan(ca.open(DATA / by_name["c_f8_lz4hc_c9_shuffle_dflt_nan"]["path"],
                            mode="r").dflt)
    assert ca.open(DATA / by_name["c_u8_big"]["path"], mode="r").dflt == 2**64 - 1
    assert ca.open(DATA / by_name["c_S10_zstd"]["path"], mode="r").dflt == b"none"


def test_snappy_fixture_raises_a_clear_error():
    with pytest.raises(CodecUnavailableError, match="Snappy"):
        ca.open(DATA / "c_i4_snappy.bcolz", mode="r")[:]


def test_object_fixture_needs_opt_in(tmp_path):
    with pytest.raises(UnsafeDataError, match="pickle"):
        ca.open(DATA / "c_object_pickle.bcolz", mode="r")
    a = ca.open(DATA / "c_object_pickle.bcolz", mode="r", allow_pickle=True)
    expected = json.loads((DATA / "c_object_pickle.expected.json").read_text())
    assert a[:].tolist() == [_decode_json(x) for x in expected]
    with pytest.raises(ca.ReadOnlyError):
        a[0] = 1
    # Opted in, an object array is writable as in bcolz (one pickle per chunk file).
    copy = tmp_path / "objects.bcolz"
    shutil.copytree(DATA / "c_object_pickle.bcolz", copy)
    writable = ca.open(copy, mode="a", allow_pickle=True)
    writable[0] = {"new": 1}
    writable.close()
    assert ca.open(copy, mode="r", allow_pickle=True)[0] == {"new": 1}


def test_structured_fixture_reads_with_literal_dtype_parse():
    a = ca.open(DATA / "c_structured.bcolz", mode="r")
    assert np.array_equal(a[:], np.load(DATA / "c_structured.expected.npy"))


def test_mode_r_writes_nothing(tmp_path):
    root = tmp_path / "f"
    shutil.copytree(DATA / "c_i4_lz4_c5_shuffle.bcolz", root)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}
    a = ca.open(root, mode="r")
    a[:], a[3], a[::7], a.attrs.getall()
    with pytest.raises(ca.ReadOnlyError):
        a.append([1])
    with pytest.raises(ca.ReadOnlyError):
        a[0] = 1
    with pytest.raises(ca.ReadOnlyError):
        a.attrs["x"] = 1
    a.flush()
    a.close()
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}
    assert before == after


# -- what we write is what bcolz writes ----------------------------------------------------

def _rebuild(entry, root):
    """Write the fixture's content with the fixture's parameters."""
    params = entry["params"]
    meta = entry["expected_meta"]
    expected = _expected(entry)
    cparams = params.get("cparams") or {}
    cparams = {k: v for k, v in cparams.items() if k in ("clevel", "shuffle", "cname", "quantize")}
    a = ca.carray(expected, rootdir=root, format="bcolz", mode="w", chunklen=meta["chunklen"],
                  cparams=cparams or None, dflt=ca.open(DATA / entry["path"], mode="r").dflt,
                  expectedlen=json.loads(meta["meta_storage_text"])["expectedlen"])
    for k, v in meta["attrs"].items():
        a.attrs[k] = v
    a.flush()
    return a


SIMPLE = [e for e in REQUIRED if not e["params"].get("ops") and e["name"] != "c_f8_quantize3"]


@pytest.mark.parametrize("entry", SIMPLE, ids=[e["name"] for e in SIMPLE])
def test_written_metadata_matches_bcolz_bytes(entry, tmp_path):
    root = tmp_path / "x.bcolz"
    a = _rebuild(entry, root)
    meta = entry["expected_meta"]
    assert (root / "meta" / "storage").read_text() == meta["meta_storage_text"]
    sizes = json.loads((root / "meta" / "sizes").read_text())
    want = json.loads(meta["meta_sizes_text"])
    assert sizes["shape"] == want["shape"] and sizes["nbytes"] == want["nbytes"]
    # bcolz's keys in bcolz's order, then the checksum carray adds (bcolz reads by key).
    assert list(sizes) == ["shape", "nbytes", "cbytes", "carray_check"]
    assert (root / "__attrs__").read_text() == (DATA / entry["path"] / "__attrs__").read_text()
    files = sorted(p.name for p in (root / "data").iterdir())
    assert files == sorted(f.split("/")[1] for f in entry["files"] if f.startswith("data/"))
    for h in meta["chunk_headers"]:
        raw = (root / "data" / h["file"]).read_bytes()
        golden = bytes.fromhex(h["first_32_bytes_hex"])
        assert raw[:16] == golden[:16]          # blpk v1 header, nchunks 1
        assert raw[16] == 2                     # Blosc1 format version
        assert raw[18] >> 5 == golden[18] >> 5  # same codec
        assert raw[19:24] == golden[19:24]      # typesize and nbytes
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], a[:])


def test_leftover_chunk_holds_only_leftover_rows(tmp_path):
    a = ca.carray(np.arange(25, dtype="i4"), chunklen=10, rootdir=tmp_path / "a", format="bcolz")
    raw = (tmp_path / "a" / "data" / "__2.blp").read_bytes()
    assert raw[:16] == b"blpk\x01\x00\x00\x00" + struct.pack("<q", 1)
    assert struct.unpack_from("<i", raw, 20)[0] == 5 * 4
    assert len(a) == 25


# -- real bcolz ----------------------------------------------------------------------------

bcolz = pytest.importorskip("bcolz", reason="bcolz-zipline 1.13.0, the real bcolz, has wheels only for Python < 3.13")

DTYPES = ["i1", "u2", "i4", "i8", "u8", "f2", "f4", "f8", "?", "S7", "U3", "M8[s]"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib"])
def test_bcolz_reads_what_we_write(dtype, cname, tmp_path):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 100, 1037).astype(dtype)
    root = str(tmp_path / "ours")
    a = ca.carray(data, rootdir=root, format="bcolz", chunklen=100,
                  cparams=ca.CParams(cname=cname, shuffle=ca.BITSHUFFLE if cname == "zstd"
                                     else ca.SHUFFLE))
    a.append(data[:50])
    a[5] = data[6]
    a.attrs["unit"] = "m"
    a.flush()
    theirs = bcolz.open(root, mode="r")
    expected = np.concatenate([data, data[:50]])
    expected[5] = data[6]
    assert theirs.chunklen == 100 and len(theirs) == len(expected)
    assert np.array_equal(theirs[:], expected)
    assert theirs.attrs["unit"] == "m"


def test_bcolz_reads_our_multidimensional_and_resized(tmp_path):
    root = str(tmp_path / "md")
    data = np.arange(2 * 3 * 57, dtype="f8").reshape(57, 2, 3)
    a = ca.carray(data, rootdir=root, format="bcolz", chunklen=8, dflt=-1.0)
    a.resize(70)
    a.trim(3)
    theirs = bcolz.open(root, mode="r")
    expected = np.concatenate([data, np.full((10, 2, 3), -1.0)])
    assert theirs.shape == expected.shape
    assert np.array_equal(theirs[:], expected)


def test_bcolz_can_append_to_ours_and_we_read_it_back(tmp_path):
    root = str(tmp_path / "shared")
    ca.carray(np.arange(1000, dtype="i8"), rootdir=root, format="bcolz", chunklen=64).flush()
    theirs = bcolz.open(root, mode="a")
    theirs.append(np.arange(1000, 1100, dtype="i8"))
    theirs.flush()
    assert np.array_equal(ca.open(root, mode="r")[:], np.arange(1100))


def test_we_read_what_bcolz_writes(tmp_path):
    root = str(tmp_path / "theirs")
    data = np.random.default_rng(1).normal(size=5000)
    b = bcolz.carray(data, rootdir=root, chunklen=300,
                     cparams=bcolz.cparams(clevel=7, cname="zstd", shuffle=2), mode="w")
    b.append(data[:77])
    b[10:20] = 0.5
    b.attrs["note"] = "é"
    b.flush()
    ours = ca.open(root, mode="a")
    expected = np.concatenate([data, data[:77]])
    expected[10:20] = 0.5
    assert np.array_equal(ours[:], expected)
    assert ours.attrs["note"] == "é"
    ours.append([1.0, 2.0])
    ours.flush()
    assert np.array_equal(bcolz.open(root, mode="r")[-3:], [expected[-1], 1.0, 2.0])


# -- corrupt and hostile directories ---------------------------------------------------------

def _copy(tmp_path, name="c_i4_lz4_c5_shuffle.bcolz"):
    root = tmp_path / "bad"
    shutil.copytree(DATA / name, root)
    for p in root.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return root


def test_bad_json_names_the_file(tmp_path):
    root = _copy(tmp_path)
    (root / "meta" / "sizes").write_text("{not json")
    with pytest.raises(FormatError, match=r"sizes.*not valid JSON"):
        ca.open(root)


def test_missing_meta_file(tmp_path):
    root = _copy(tmp_path)
    (root / "meta" / "storage").unlink()
    with pytest.raises(FormatError, match="meta/storage"):
        ca.open(root)


def test_missing_chunk_file_names_it(tmp_path):
    root = _copy(tmp_path)
    (root / "data" / "__2.blp").unlink()
    a = ca.open(root, mode="r")
    with pytest.raises(FormatError, match=r"__2\.blp.*missing"):
        a[:]


@pytest.mark.parametrize("cut", [0, 10, 20, 40])
def test_truncated_chunk_file(tmp_path, cut):
    root = _copy(tmp_path)
    path = root / "data" / "__1.blp"
    path.write_bytes(path.read_bytes()[:cut])
    a = ca.open(root, mode="r")
    with pytest.raises(FormatError, match=r"__1\.blp"):
        a[:]


def test_header_claiming_more_than_the_file(tmp_path):
    root = _copy(tmp_path)
    path = root / "data" / "__0.blp"
    raw = bytearray(path.read_bytes())
    struct.pack_into("<i", raw, 16 + 12, 2**31 - 1)
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"__0\.blp.*claims"):
        ca.open(root, mode="r")[0]


def test_chunk_with_wrong_magic_or_version(tmp_path):
    root = _copy(tmp_path)
    path = root / "data" / "__0.blp"
    raw = bytearray(path.read_bytes())
    raw[4] = 3
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="version 3"):
        ca.open(root, mode="r")[:]
    raw[:4] = b"XXXX"
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="magic"):
        ca.open(root, mode="r")[:]


def test_chunk_of_the_wrong_size(tmp_path):
    root = _copy(tmp_path)
    other = ca.carray(np.arange(10, dtype="i4"), chunklen=10, rootdir=tmp_path / "o",
                      format="bcolz")
    shutil.copy(tmp_path / "o" / "data" / "__0.blp", root / "data" / "__0.blp")
    with pytest.raises(FormatError, match="expected"):
        ca.open(root, mode="r")[:]
    assert len(other) == 10


@pytest.mark.parametrize("sizes", [
    '{"shape": [-1], "nbytes": 0, "cbytes": 0}',
    '{"shape": [], "nbytes": 0, "cbytes": 0}',
    '{"shape": "x"}',
    '[1, 2]',
])
def test_bad_sizes_values(tmp_path, sizes):
    root = _copy(tmp_path)
    (root / "meta" / "sizes").write_text(sizes)
    with pytest.raises(FormatError, match="sizes"):
        ca.open(root)


@pytest.mark.parametrize("change", [
    {"chunklen": 0}, {"chunklen": "x"}, {"dtype": "nonsense"}, {"dtype": "__import__('os')"},
    {"cparams": {"clevel": 12, "shuffle": 1}}, {"cparams": {"clevel": 5, "shuffle": 1,
                                                            "cname": "brotli"}},
])
def test_bad_storage_values(tmp_path, change):
    root = _copy(tmp_path)
    storage = json.loads((root / "meta" / "storage").read_text())
    storage.update(change)
    (root / "meta" / "storage").write_text(json.dumps(storage))
    with pytest.raises(FormatError, match="storage"):
        ca.open(root)


def test_bad_attrs_file(tmp_path):
    root = _copy(tmp_path)
    (root / "__attrs__").write_text("[1]")
    with pytest.raises(FormatError, match="__attrs__"):
        ca.open(root).attrs.getall()
    (root / "__attrs__").write_text("\n")
    assert ca.open(root).attrs.getall() == {}


def test_stale_chunk_files_are_ignored(tmp_path):
    root = _copy(tmp_path, "c_u4_trimmed.bcolz")
    shutil.copy(root / "data" / "__0.blp", root / "data" / "__999.blp")
    assert np.array_equal(ca.open(root, mode="r")[:], np.load(DATA / "c_u4_trimmed.expected.npy"))
