"""Hostile metadata in every format is a typed carray error, never a crash (issue 14, item 4).

Each case that once crashed the interpreter (object fields read from file
bytes) runs in a subprocess, so a regression fails the test, not the run.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from metafiles import edit_meta

import carray as ca
from carray import registry
from carray.codecs import blosc, ranged
from carray.core.params import CParams
from carray.errors import CArrayError, FormatError, UnsafeDataError
from carray.formats import ds
from carray.formats.bloscpack.frame import array_spec
from carray.layouts.b2nd import frame as b2frame

DATA = Path(__file__).parents[1] / "data"
HOSTILE_DTYPES = ["[('a', 'O'), ('b', '<i8')]", "T", "O", "('O', (2,))",
                  "[('x', [('y', 'O')])]"]


def _superchunk(tmp_path: Path, name: str = "a") -> Path:
    root = tmp_path / name
    ca.carray(np.arange(100, dtype="i8"), rootdir=str(root), mode="w", chunklen=32).flush()
    return root


def _legacy(tmp_path: Path, name: str = "old") -> Path:
    """A superchunk directory written before versions (format 2): meta/sizes, meta/attrs."""
    root = tmp_path / name
    shutil.copytree(DATA / "carray_v2" / "a1d.carray", root)
    return root


def _edit_manifest(root: Path, **changes) -> None:
    """Replace the newest manifest by a well-formed one whose array has ``changes``."""
    from carray.versions import Manifest

    path = sorted((root / "versions").glob("*.mf"))[-1]
    m = Manifest.decode(path.read_bytes())
    path.write_bytes(m.replace(members=(m.members[0].replace(**changes),)).encode())


def _edit_json(path: Path, **changes) -> None:
    edit_meta(path, **changes)


def _in_subprocess(code: str) -> str:
    """Run ``code`` in a new interpreter; return its stdout (a crash fails the test)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


@pytest.mark.parametrize("descr", HOSTILE_DTYPES)
def test_superchunk_storage_dtype_is_refused_in_a_subprocess(tmp_path, descr):
    root = _superchunk(tmp_path)
    _edit_json(root / "meta" / "storage", dtype=descr)
    out = _in_subprocess(f"""
        import carray as ca
        try:
            a = ca.open({str(root)!r}, mode="r")
            print("read", a[:])
        except ca.UnsafeDataError as exc:
            print("refused", exc)
    """)
    assert out.startswith("refused") and "meta/storage" in out


@pytest.mark.parametrize("allow_pickle", [False, True])
def test_bcolz_object_field_is_refused_even_with_allow_pickle(tmp_path, allow_pickle):
    root = tmp_path / "b.bcolz"
    shutil.copytree(DATA / "bcolz" / "c_structured.bcolz", root)
    storage = json.loads((root / "meta" / "storage").read_text())
    _edit_json(root / "meta" / "storage", dtype=storage["dtype"].replace("'<i4'", "'O'", 1))
    out = _in_subprocess(f"""
        import carray as ca
        try:
            print("read", ca.open({str(root)!r}, mode="r", allow_pickle={allow_pickle})[:])
        except ca.UnsafeDataError as exc:
            print("refused", exc)
    """)
    assert out.startswith("refused")


def test_bcolz_pickles_still_need_and_accept_the_opt_in():
    with pytest.raises(UnsafeDataError, match="pickle"):
        ca.open(DATA / "bcolz" / "c_object_pickle.bcolz", mode="r")
    assert len(ca.open(DATA / "bcolz" / "c_object_pickle.bcolz", mode="r",
                       allow_pickle=True)) > 0


def test_b2nd_metalayer_object_dtype(tmp_path):
    path = tmp_path / "x.b2nd"
    shutil.copyfile(DATA / "blosc2" / "nd_f8_1d_lz4.b2nd", path)
    raw = bytearray(path.read_bytes())
    at = raw.index(b"\xdb\x00\x00\x00\x03<f8")
    raw[at + 5:at + 8] = b"|O8"
    path.write_bytes(raw)
    with pytest.raises(UnsafeDataError, match="x.b2nd"):
        b2frame.read_frame(path)
    with pytest.raises(UnsafeDataError):
        ca.open(path, mode="r")


@pytest.mark.parametrize("descr", ["'|O'", "[('a', '|O'), ('b', '<i8')]", "'T'"])
def test_bloscpack_metadata_object_dtype(descr):
    meta = {"container": "numpy", "dtype": descr, "shape": [4], "order": "C"}
    with pytest.raises(UnsafeDataError, match="f.blp"):
        array_spec(meta, "f.blp")


def test_superchunk_attribute_holding_objects(tmp_path):
    attrs = {"x": {"type": "array", "dtype": [["a", "|O"]], "shape": [1],
                   "encoding": "base64", "value": "AAAAAAAAAAA="}}
    root = _superchunk(tmp_path)
    _edit_manifest(root, attrs=attrs)  # in a version
    with pytest.raises(UnsafeDataError, match="attribute 'x'"):
        dict(ca.open(root, mode="r").attrs)
    old = _legacy(tmp_path)
    (old / "meta" / "attrs").write_text(json.dumps(attrs))  # in a directory of format 2
    with pytest.raises(UnsafeDataError, match="attrs"):
        dict(ca.open(old, mode="r").attrs)


# -- the untyped errors of issue 14 -------------------------------------------------------------

def test_deeply_nested_superchunk_attrs(tmp_path):
    root = _superchunk(tmp_path)
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises((FormatError, RecursionError, ValueError)):
        _edit_manifest(root, attrs={"x": deep})  # no such manifest can even be written
    mf = sorted((root / "versions").glob("*.mf"))[-1]
    from carray.codecs.checksums import crc32

    body = b"CAVERS01" + (200_002).to_bytes(4, "little") + b"[" * 100_000 + b"]" * 100_002
    mf.write_bytes(body + crc32(body).to_bytes(4, "little"))
    with pytest.raises(FormatError, match="manifest"):
        ca.open(root, mode="r")
    old = _legacy(tmp_path)
    (old / "meta" / "attrs").write_text("[" * 100_000)
    with pytest.raises(FormatError, match="meta/attrs"):
        dict(ca.open(old, mode="r").attrs)


@pytest.mark.parametrize("name", ["__attrs__", "meta/storage", "meta/sizes"])
def test_deeply_nested_bcolz_json(tmp_path, name):
    root = tmp_path / "b.bcolz"
    shutil.copytree(DATA / "bcolz" / "c_i4_lz4_c5_shuffle.bcolz", root)
    (root / name).write_text("[" * 100_000)
    with pytest.raises(FormatError, match=name.split("/")[-1]):
        dict(ca.open(root, mode="r").attrs)


def test_chunk_header_with_blocksize_zero():
    raw = bytearray(blosc.compress1(np.arange(1000, dtype="i8"), 8, CParams()))
    raw[8:12] = struct.pack("<i", 0)
    raw = bytes(raw)
    with pytest.raises(FormatError, match="blocksize=0"):
        blosc.decompress(raw, "c.blosc")
    with pytest.raises(FormatError, match="blocksize=0"):
        ranged.getitem_ranged(lambda o, n: raw[o:o + n], 0, np.empty(10, "i8"), len(raw))


def test_superchunk_chunk_with_blocksize_zero(tmp_path):
    root = _superchunk(tmp_path)
    sc = root / "data" / "sc_000000.blp"
    raw = bytearray(sc.read_bytes())
    # Every chunk here holds 32 int64 (256 bytes): find their headers by nbytes.
    pattern = struct.pack("<i", 256)
    at = raw.index(pattern, 32)
    raw[at + 4:at + 8] = struct.pack("<i", 0)
    sc.write_bytes(raw)
    a = ca.open(root, mode="r", storage={"verify": False})
    with pytest.raises(CArrayError):
        a[:]


def test_ds_type_that_is_a_list(tmp_path):
    raw = (DATA / "ds" / "medium.ds").read_bytes()
    first, rest = raw.split(b"\n", 1)
    header, body = rest.split(b"\n", 1)
    meta = json.loads(header)
    name = next(k for k in meta if not k.startswith("."))
    meta[name][".type"] = ["float64"]
    path = tmp_path / "bad.ds"
    path.write_bytes(first + b"\n" + json.dumps(meta).encode() + b"\n" + body)
    with pytest.raises(FormatError, match="bad.ds.*type"):
        ds.read(path)


@pytest.mark.parametrize("chunklen", [2**63, 2**40])
def test_bcolz_absurd_chunklen(tmp_path, chunklen):
    root = tmp_path / "b.bcolz"
    shutil.copytree(DATA / "bcolz" / "c_i4_lz4_c5_shuffle.bcolz", root)
    _edit_json(root / "meta" / "storage", chunklen=chunklen)
    with pytest.raises(FormatError, match="meta/storage"):
        ca.open(root, mode="r")[:]


@pytest.mark.parametrize("length", [2**31, 2**62, 2**64])
def test_lengths_beyond_the_files_are_refused_before_allocating(tmp_path, length):
    root = tmp_path / "b.bcolz"
    shutil.copytree(DATA / "bcolz" / "c_i4_lz4_c5_shuffle.bcolz", root)
    _edit_json(root / "meta" / "sizes", shape=[length])
    with pytest.raises(FormatError, match="meta/sizes"):
        ca.open(root, mode="r")[:]
    # A shape past 64-bit sizes is refused as soon as it is read, before any other check.
    old = _legacy(tmp_path)
    _edit_json(old / "meta" / "sizes", shape=[length], length=length)
    with pytest.raises(FormatError, match="meta/sizes|more than 64-bit sizes count"):
        ca.open(old, mode="r")[:]
    sc = _superchunk(tmp_path)
    _edit_manifest(sc, shape=(length,))
    with pytest.raises(FormatError, match="chunks for shape|more than 64-bit sizes count"):
        ca.open(sc, mode="r")[:]


def test_sparse_frame_missing_a_chunk_file(tmp_path):
    root = tmp_path / "s.b2nd"
    shutil.copytree(DATA / "blosc2" / "nd_f8_3d_sparse.b2nd", root)
    (root / "00000000.chunk").unlink()
    with pytest.raises(FormatError, match="00000000.chunk"):
        ca.open(root, mode="r")[:]
    with pytest.raises(FormatError, match="00000000.chunk"):
        b2frame.read_array(root)


def test_sparse_frame_missing_its_index(tmp_path):
    root = tmp_path / "s.b2nd"
    shutil.copytree(DATA / "blosc2" / "nd_f8_3d_sparse.b2nd", root)
    (root / "chunks.b2frame").unlink()
    with pytest.raises(CArrayError, match="chunks.b2frame"):
        b2frame.read_frame(root)


# -- metadata that disagrees with itself --------------------------------------------------------

def _bcolz(tmp_path: Path) -> Path:
    root = tmp_path / "b"
    ca.carray(np.arange(100, dtype="i8"), rootdir=str(root), mode="w", chunklen=32,
              format="bcolz").close()
    return root


@pytest.mark.parametrize("layout", ["superchunk", "bcolz"])
@pytest.mark.parametrize("dflt", [[1, 2], [], [[7]]])
def test_fill_value_that_is_not_one_item_is_refused_at_open(tmp_path, layout, dflt):
    root = _superchunk(tmp_path) if layout == "superchunk" else _bcolz(tmp_path)
    _edit_json(root / "meta" / "storage", dflt=dflt)
    with pytest.raises(FormatError, match="meta/storage: dflt .* is not one item"):
        ca.open(root, mode="r")


@pytest.mark.parametrize("layout", ["superchunk", "bcolz"])
@pytest.mark.parametrize("descr", ["2i8", "('<i8', (2,))"])
def test_sub_array_item_type_in_storage_is_refused(tmp_path, layout, descr):
    root = _superchunk(tmp_path) if layout == "superchunk" else _bcolz(tmp_path)
    _edit_json(root / "meta" / "storage", dtype=descr)
    with pytest.raises(FormatError, match="meta/storage: dtype .* is a sub-array type"):
        ca.open(root, mode="r")


def test_sub_array_item_type_in_a_b2nd_frame_is_refused(tmp_path):
    path = tmp_path / "z.b2nd"
    ca.carray(np.float64(3.5), rootdir=str(path), mode="w").close()
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"\xdb\x00\x00\x00\x03<f8", b"\xdb\x00\x00\x00\x031f8"))
    with pytest.raises(FormatError, match="z.b2nd .*sub-array type"):
        ca.open(path, mode="r")


# -- single-byte flips ----------------------------------------------------------------------------

# XOR masks of every flip: the lowest bit, every bit, and 0x0D (which turns a '<' into a
# '1', making a dtype text a sub-array type).
FLIPS = (0x01, 0x0D, 0xFF)


def _reads(path: Path) -> list:
    """Every kind of read of the dataset at ``path``, each a callable; the reads of the
    array share one handle, so an open that fails fails each of them (``a[:]`` of a 0-d
    array raises IndexingError, numpy's IndexError, whatever the file holds)."""
    opened: list = []

    def array():
        if not opened:
            try:
                opened.append(ca.open(path, mode="r"))
            except CArrayError as exc:
                opened.append(exc)
        if isinstance(opened[0], CArrayError):
            raise opened[0]
        return opened[0]

    return [lambda: array()[()], lambda: array()[:], lambda: np.asarray(array()),
            lambda: registry.guess(str(path), None).info(str(path), None)]


def _sweep(target: Path, dataset: Path, expect: np.ndarray | None) -> None:
    """Flip each byte of ``target`` (one at a time, with each mask) and read ``dataset``
    every way: each read returns ``expect`` (when given) or raises a carray error, never
    anything else."""
    orig = target.read_bytes()
    untyped, wrong = [], []
    try:
        for pos in range(len(orig)):
            for mask in FLIPS:
                raw = bytearray(orig)
                raw[pos] ^= mask
                target.write_bytes(raw)
                reads = _reads(dataset)
                for n, read in enumerate(reads):
                    try:
                        got = read()
                    except CArrayError:
                        continue
                    except Exception as exc:  # noqa: BLE001 - what the test looks for
                        untyped.append((pos, mask, n, repr(exc)[:120]))
                        continue
                    if expect is not None and n < len(reads) - 1 and not (
                            np.shape(got) == expect.shape and np.array_equal(got, expect)):
                        wrong.append((pos, mask, n))
    finally:
        target.write_bytes(orig)
    assert not untyped, f"{len(untyped)} reads raised untyped errors: {untyped[:5]}"
    assert not wrong, f"{len(wrong)} reads returned other values: {wrong[:5]}"


@pytest.mark.parametrize("zero_d", [True, False])
def test_every_byte_flip_of_a_b2nd_frame_reads_or_raises_a_carray_error(tmp_path, zero_d):
    path = tmp_path / "z.b2nd"
    if zero_d:
        ca.carray(np.float64(3.5), rootdir=str(path), mode="w").close()
    else:
        ca.carray(np.arange(10, dtype="i4"), rootdir=str(path), mode="w", chunks=(4,),
                  blocks=(2,)).close()
    # Frames carry no checksums: a flipped item (or shape, or byte order) reads as what
    # the file now says, so only the kind of error is checked.
    _sweep(path, path, None)


@pytest.mark.parametrize("layout, name", [
    ("superchunk", "meta/storage"), ("superchunk", "versions/0000000001.mf"),
    ("superchunk", "versions/0000000001-*.ix"), ("superchunk", "versions/HEAD"),
    ("legacy", "meta/storage"), ("legacy", "meta/sizes"),
    ("bcolz", "meta/storage"), ("bcolz", "meta/sizes")])
def test_every_byte_flip_of_metadata_reads_or_raises_a_carray_error(tmp_path, layout, name):
    if layout == "legacy":
        root = _legacy(tmp_path)
        expect = np.load(DATA / "carray_v2" / "a1d.expected.npy")
    else:
        root = _superchunk(tmp_path) if layout == "superchunk" else _bcolz(tmp_path)
        expect = np.arange(100, dtype="i8")
    _sweep(next(root.glob(name)), root, expect)  # a page file's name has a token
