"""The digests carray adds to bcolz directories and Blosc2 frames: what they catch, when
they apply, and that bcolz and python-blosc2 read and change what carray writes (and
carray then reads their changes right, with no false alarm)."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import carray as ca
from carray import registry
from carray.core.problems import tally
from carray.errors import CArrayError, ChecksumError, FormatError
from carray.layouts.b2nd.digests import RECORD_NAME, is_marked
from carray.layouts.b2nd.frame import read_frame
from carray.layouts.bcolz.check import SIZES_KEY, TRAILER_MAGIC
from carray.layouts.bcolz.layout import CHUNK_HEADER_SIZE

bcolz = pytest.importorskip("bcolz", reason="bcolz-zipline 1.13.0 has wheels only for "
                            "Python < 3.13")
blosc2 = pytest.importorskip("blosc2", reason="blosc2 is a test dependency")


def _clean(path) -> bool:
    problems, checked = tally(registry.verify(str(path)))
    assert not problems, problems
    return checked > 0


def _flip(path, offset: int, mask: int = 0x01) -> None:
    raw = bytearray(open(path, "rb").read())
    raw[offset] ^= mask
    with open(path, "wb") as f:
        f.write(bytes(raw))


# -- bcolz --------------------------------------------------------------------------------

def _bcolz(tmp_path, n=1000, chunklen=100):
    root = str(tmp_path / "a.bcolz")
    data = np.random.default_rng(3).integers(0, 50, n).astype("i8")
    ca.carray(data, rootdir=root, format="bcolz", chunklen=chunklen).close()
    return root, data


def test_bcolz_chunk_files_end_in_a_trailer_bcolz_ignores(tmp_path):
    root, data = _bcolz(tmp_path)
    raw = open(os.path.join(root, "data", "__3.blp"), "rb").read()
    cbytes = struct.unpack_from("<i", raw, CHUNK_HEADER_SIZE + 12)[0]
    assert len(raw) > CHUNK_HEADER_SIZE + cbytes and raw.endswith(TRAILER_MAGIC)
    sizes = json.loads(open(os.path.join(root, "meta", "sizes")).read())
    assert list(sizes)[-1] == SIZES_KEY
    assert np.array_equal(bcolz.open(root, mode="r")[:], data)
    assert _clean(root)


def test_bcolz_damage_is_found_by_whole_and_ranged_reads(tmp_path):
    root, _ = _bcolz(tmp_path)
    path = os.path.join(root, "data", "__4.blp")
    _flip(path, CHUNK_HEADER_SIZE + 40)
    a = ca.open(root, mode="r")
    with pytest.raises(ChecksumError, match="__4.blp"):
        a[:]
    with pytest.raises(ChecksumError, match="__4.blp"):
        a[450]  # a ranged read of the damaged page
    assert a[12] is not None  # other chunks still read
    assert "checksum" in str(tally(registry.verify(root))[0][0])
    # verify=False reads what is there (here the damage breaks decoding, or not).
    ca.open(root, mode="r", storage={"verify": False})


@pytest.mark.parametrize("tail", [b"x", b"\0" * 40, TRAILER_MAGIC])
def test_bcolz_bytes_after_a_chunk_must_be_a_trailer(tmp_path, tail):
    root, _ = _bcolz(tmp_path)
    path = os.path.join(root, "data", "__2.blp")
    raw = open(path, "rb").read()
    cbytes = struct.unpack_from("<i", raw, CHUNK_HEADER_SIZE + 12)[0]
    with open(path, "wb") as f:
        f.write(raw[:CHUNK_HEADER_SIZE + cbytes] + tail)
    with pytest.raises(FormatError, match="__2.blp"):
        ca.open(root, mode="r")[:]


def test_bcolz_sizes_changed_under_the_checksum_is_damage(tmp_path):
    root, _ = _bcolz(tmp_path)
    sizes = os.path.join(root, "meta", "sizes")
    text = open(sizes).read()
    open(sizes, "w").write(text.replace("[1000]", "[990]"))
    with pytest.raises(ChecksumError, match="meta/sizes"):
        ca.open(root, mode="r")
    open(sizes, "w").write(text)
    storage = os.path.join(root, "meta", "storage")
    open(storage, "a").write(" ")
    with pytest.raises(ChecksumError, match="meta/storage"):
        ca.open(root, mode="r")


def test_bcolz_changes_to_our_directory_read_back_right(tmp_path):
    root, data = _bcolz(tmp_path, n=1037)
    theirs = bcolz.open(root, mode="a")
    theirs.append(np.arange(250, dtype="i8"))
    theirs[5:15] = -1
    theirs[700] = -2  # rewrites chunk 7 without a trailer, in place
    theirs.flush()
    want = np.concatenate([data, np.arange(250)])
    want[5:15], want[700] = -1, -2
    a = ca.open(root, mode="r")
    np.testing.assert_array_equal(a[:], want)
    assert [a[i] for i in (5, 700, 1100)] == [want[5], want[700], want[1100]]
    assert _clean(root)
    # bcolz shrinks it; we append; bcolz reads it.
    theirs = bcolz.open(root, mode="a")
    theirs.trim(300)
    theirs.flush()
    want = want[:-300]
    b = ca.open(root, mode="a")
    np.testing.assert_array_equal(b[:], want)
    b.append(np.full(77, 9, "i8"))
    b.close()
    want = np.concatenate([want, np.full(77, 9)])
    np.testing.assert_array_equal(bcolz.open(root, mode="r")[:], want)
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], want)
    assert _clean(root)


def test_bcolz_written_directories_read_as_before(tmp_path):
    root = str(tmp_path / "theirs")
    data = np.arange(3000, dtype="f8")
    bcolz.carray(data, rootdir=root, chunklen=256, mode="w").flush()
    a = ca.open(root, mode="r")
    np.testing.assert_array_equal(a[:], data)
    assert a[2999] == 2999.0
    assert _clean(root)


# -- Blosc2 frames ------------------------------------------------------------------------

def _frame(tmp_path, data=None, **kw):
    path = str(tmp_path / "a.b2nd")
    if data is None:
        data = np.random.default_rng(4).integers(0, 50, (30, 40)).astype("i4")
    kw.setdefault("chunks", (10, 16))
    kw.setdefault("blocks", (5, 4))
    ca.carray(data, rootdir=path, mode="w", **kw).close()
    return path, data


def test_frames_carry_the_mark_and_the_record_python_blosc2_never_shows(tmp_path):
    path, data = _frame(tmp_path)
    with ca.open(path, mode="a") as a:
        a.attrs["units"] = "K"
    with read_frame(path) as f:
        assert is_marked(f.header_bytes) and f.digests is not None and f.record_len
        assert list(f.vlmeta_raw) == ["units"]
        assert os.path.getsize(path) == f.header.frame_len + f.record_len  # after the frame
    theirs = blosc2.open(path, mode="r")
    assert np.array_equal(theirs[:], data)
    assert list(theirs.vlmeta) == ["units"]  # the user's attributes only
    assert _clean(path)


def test_frame_damage_is_found_by_whole_and_ranged_reads(tmp_path):
    path, _ = _frame(tmp_path)
    with read_frame(path) as f:
        start = f.header.header_len + int(f.offsets_array()[4])
    _flip(path, start + 100)
    a = ca.open(path, mode="r")
    with pytest.raises(ChecksumError):
        a[:]
    with pytest.raises(ChecksumError):
        a[12, 20]  # in chunk 4
    assert a[0, 0] is not None
    problems, _ = tally(registry.verify(path))
    assert problems and "chunk 4" in str(problems[0])


@pytest.mark.parametrize("where", ["header", "index", "trailer"])
def test_frame_metadata_damage_fails_at_open(tmp_path, where):
    path, _ = _frame(tmp_path)
    with read_frame(path) as f:
        at = {"header": 45, "index": f.index_start + 40, "trailer": f.trailer_start + 10}
    _flip(path, at[where])
    with pytest.raises(CArrayError):  # a parse or decode error, or the digest's
        ca.open(path, mode="r")[:]
    assert tally(registry.verify(path))[0]


def test_a_marked_frame_without_its_record_is_damage(tmp_path):
    path, _ = _frame(tmp_path)
    with read_frame(path) as f:
        end = f.header.frame_len
    _flip(path, end + 1)  # the record's magic no longer says what it is
    with pytest.raises(FormatError, match=RECORD_NAME):
        ca.open(path, mode="r")
    with open(path, "r+b") as fh:
        fh.truncate(end)  # or it is gone
    with pytest.raises(FormatError, match=RECORD_NAME):
        ca.open(path, mode="r")


def test_python_blosc2_changes_in_place_are_no_false_alarm(tmp_path):
    # Incompressible items: every chunk is stored raw, so a rewritten chunk keeps its
    # size and python-blosc2 writes it over the old one, at the same offset.
    rng = np.random.default_rng(9)
    path, data = _frame(tmp_path, rng.random((30, 40)), chunks=(10, 20), blocks=(5, 10),
                        cparams=ca.CParams(clevel=0))
    theirs = blosc2.open(path, mode="a")
    new = rng.random((10, 20))
    theirs[0:10, 0:20] = new
    del theirs
    with read_frame(path) as f:
        assert not is_marked(f.header_bytes) and f.digests is None
    data[0:10, 0:20] = new
    a = ca.open(path, mode="r")
    np.testing.assert_array_equal(a[:], data)
    assert a[3, 4] == data[3, 4]
    assert _clean(path)


@pytest.mark.parametrize("contiguous", [True, False])
def test_python_blosc2_changes_read_back_right(tmp_path, contiguous):
    path, data = _frame(tmp_path, storage={"contiguous": contiguous})
    theirs = blosc2.open(path, mode="a")
    theirs[3:7, 5:30] = -1
    theirs.resize((37, 40))
    theirs[30:] = 8
    theirs.vlmeta["k"] = "v"
    del theirs
    want = np.concatenate([data, np.full((7, 40), 8, "i4")])
    want[3:7, 5:30] = -1
    a = ca.open(path, mode="a")
    np.testing.assert_array_equal(a[:], want)
    assert a.attrs["k"] == "v"
    assert _clean(path)
    # carray writes again: its digests apply from this commit on, the chunks python-blosc2
    # wrote stay unchecked but read right.
    a[20:25] = 5
    a.append(np.full((4, 40), 6, "i4"))
    a.close()
    want[20:25] = 5
    want = np.concatenate([want, np.full((4, 40), 6, "i4")])
    with read_frame(path) as f:
        assert is_marked(f.header_bytes) and f.digests is not None
    np.testing.assert_array_equal(ca.open(path, mode="r")[:], want)
    theirs = blosc2.open(path, mode="r")  # (its vlmeta needs it alive)
    np.testing.assert_array_equal(theirs[:], want)
    assert theirs.vlmeta["k"] == "v"
    assert _clean(path)


def test_python_blosc2_written_frames_read_as_before(tmp_path):
    path = str(tmp_path / "theirs.b2nd")
    data = np.arange(600, dtype="f8").reshape(20, 30)
    blosc2.asarray(data, urlpath=path, mode="w", chunks=(8, 10), blocks=(4, 5))
    with read_frame(path) as f:
        assert f.digests is None
    np.testing.assert_array_equal(ca.open(path, mode="r")[:], data)
    assert _clean(path)


def test_sixteen_attributes_keep_the_record(tmp_path):
    path, data = _frame(tmp_path)
    a = ca.open(path, mode="a")
    for i in range(16):
        a.attrs[f"k{i}"] = i
    a.close()
    with read_frame(path) as f:  # the record is no vlmeta entry: it fits whatever they take
        assert is_marked(f.header_bytes) and f.digests is not None
    theirs = blosc2.open(path, mode="a")  # python-blosc2 can still rewrite its trailer
    theirs[0, 0] = 77
    del theirs
    a = ca.open(path, mode="a")
    assert a[0, 0] == 77 and len(a.attrs.getall()) == 16
    del a.attrs["k0"]
    a.close()
    with read_frame(path) as f:
        assert is_marked(f.header_bytes) and f.digests is not None


@pytest.mark.parametrize("verify", [True, "full", False])
def test_verify_options_reach_the_foreign_layouts(tmp_path, verify):
    path, data = _frame(tmp_path)
    root, data1 = _bcolz(tmp_path)
    for p, want in ((path, data), (root, data1)):
        a = ca.open(p, mode="r", storage={"verify": verify})
        np.testing.assert_array_equal(a[:], want)
        assert a[(1,) * a.ndim] == want[(1,) * a.ndim]
