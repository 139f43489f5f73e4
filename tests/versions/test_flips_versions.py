"""Damage to a dataset with kept versions: a read at any version gives the right values
or a carray error, never another version's; ``carray verify`` reports exactly what
reads fail on.

The sweep flips single bytes of every file of an array, an N-d array with blocks, a
table (string, category and nullable columns) and a group (two members), each with
``versions="all"`` and a few commits, and reads every kept version through every read
path (:mod:`flips_versions`).  CI flips a seeded sample of the bytes of every file;
``CARRAY_SOAK=1`` flips every byte.
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
from pathlib import Path

import flips_versions as fv
import numpy as np
import pytest
from metafiles import edit_meta, read_meta, write_meta

import carray as ca
from carray.cli.verify import verify_path
from carray.core.checkedjson import dumps_checked, load_checked
from carray.errors import CArrayError, ChecksumError, FormatError

SOAK = os.environ.get("CARRAY_SOAK") == "1"
pytestmark = [pytest.mark.timeout(0)] if SOAK else []  # every byte takes an hour
#: XORed into the damaged byte, in turn: every bit, a low, a high and middle ones.
MASKS = (0xFF, 0x01, 0x80, 0x10, 0x08, 0x20)
#: Bytes flipped per file in CI (every byte with CARRAY_SOAK=1), by kind of dataset:
#: what a table or a group read costs (a dozen read paths at every version) bounds it.
SAMPLE = {"array": 24, "nd": 16, "table": 7, "group": 5}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each kind of dataset, pristine, with what every read of every version gives."""
    root = tmp_path_factory.mktemp("pristine")
    out = {}
    for kind, build in fv.BUILDERS.items():
        build(root / kind)
        plan = fv.read_plan(kind, str(root / kind))
        good = fv.read_all(plan)
        for read, got in good.items():
            bad = {k: v for k, v in got.items() if isinstance(v, Exception)}
            assert not bad, (read, bad)
        assert verify_path(root / kind) == ([], verify_path(root / kind)[1])
        out[kind] = (root / kind, plan, good)
    return out


def _offsets(kind: str, rel: str, size: int) -> list[int]:
    """The bytes of a file to flip: all of them in a soak run, else a seeded sample
    (always the first and the last byte)."""
    if SOAK or size <= SAMPLE[kind]:
        return list(range(size))
    rng = random.Random(f"{kind}/{rel}")
    return sorted({0, size - 1, *rng.sample(range(size), SAMPLE[kind] - 2)})


def _flip_outcome(plan, good, path: Path) -> tuple[list, list, int, list[str]]:
    """Read everything and verify: (wrong reads, non-carray errors, carray errors, what
    verify reports)."""
    wrong, other, typed = [], [], 0
    for read, got in fv.read_all(plan).items():
        for name, value in got.items():
            if isinstance(value, CArrayError):
                typed += 1
            elif isinstance(value, Exception):
                other.append((read[1:], name, repr(value)[:200]))
            elif not fv.same(value, good[read][name]):
                wrong.append((read[1:], name))
    return wrong, other, typed, verify_path(path)[0]


@pytest.mark.parametrize("kind", list(fv.BUILDERS))
def test_every_flip_reads_right_or_raises_and_verify_agrees(built, tmp_path, kind):
    # docs/spec/commit.md [C4] [C20]
    pristine, plan, good = built[kind]
    # Reads of a copy (the pristine dataset stays as it was for the next kind).
    path = tmp_path / kind
    shutil.copytree(pristine, path)
    plan = [(k, p.replace(str(pristine), str(path)), v) for k, p, v in plan]
    good = {(k, p.replace(str(pristine), str(path)), v): got
            for (k, p, v), got in good.items()}
    flips = failing = 0
    problems: list[str] = []
    for rel in fv.files_of(str(path)):
        target = path / rel
        data = target.read_bytes()
        for off in _offsets(kind, rel, len(data)):
            damaged = bytearray(data)
            damaged[off] ^= MASKS[off % len(MASKS)]
            target.write_bytes(damaged)
            try:
                wrong, other, typed, reported = _flip_outcome(plan, good, path)
            finally:
                target.write_bytes(data)
            flips += 1
            failing += bool(typed or other)
            where = f"{rel} byte {off}"
            if wrong:
                problems.append(f"{where}: wrong values from {wrong[:3]}")
            if other:
                problems.append(f"{where}: not a carray error: {other[:2]}")
            if (typed > 0) != bool(reported):
                problems.append(f"{where}: reads fail {typed} times, verify reports "
                                f"{reported[:2]}")
            elif reported and not any(rel.rsplit("/", 1)[-1] in p or
                                      str(path / os.path.dirname(rel)) in p
                                      for p in reported):
                problems.append(f"{where}: verify names other files: {reported[:2]}")
    assert not problems, f"{len(problems)} of {flips} flips: " + "\n".join(problems[:20])
    print(f"{kind}: {flips} flips, {failing} failed reads with a carray error (and verify "
          f"reported them), the rest read right")
    assert failing > flips // 3  # the sweep reached damage that matters


# -- a pinned version is pinned -----------------------------------------------------------


def _damage_replaced_record(root: Path, version: str) -> None:
    """Flip a byte of the record of chunk 0 of ``version``, which the newest version
    replaced (so only ``version`` reads it)."""
    with ca.open(root, mode="r", version=version) as old:
        file, off, cbytes, _ = old.engine._layout.chunk_location(0)
    data = bytearray(Path(file).read_bytes())
    data[off + cbytes // 2] ^= 0xFF
    Path(file).write_bytes(data)


def test_a_reader_of_an_old_version_raises_on_its_damage(tmp_path):
    # docs/spec/commit.md [C20]
    root = tmp_path / "a"
    a = ca.carray(np.arange(100), rootdir=str(root), chunklen=32, storage=fv.KEEP_ALL)
    v0 = a.version
    a[:5] = -1
    a.append(np.arange(100, 150))
    a.commit()
    a.close()
    _damage_replaced_record(root, v0)
    old = ca.open(root, mode="r", version=v0)
    for read in (lambda: old[:], lambda: old[3], lambda: old[0:10], lambda: old.sum(),
                 lambda: list(old)):
        with pytest.raises(ChecksumError):
            read()
        assert old.version == v0 and len(old) == 100
    assert verify_path(root)[0]
    newest = ca.open(root, mode="r")
    np.testing.assert_array_equal(newest[:], np.r_[[-1] * 5, np.arange(5, 150)])


def test_a_reader_at_the_newest_does_not_jump_to_a_writers_commit(tmp_path):
    # docs/spec/commit.md [C20]
    root = tmp_path / "a"
    w = ca.carray(np.arange(100), rootdir=str(root), chunklen=32, storage=fv.KEEP_ALL)
    reader = ca.open(root, mode="r")
    held = reader.version
    w[:5] = -1
    w.append(np.arange(100, 150))
    w.commit()
    _damage_replaced_record(root, held)
    with pytest.raises(ChecksumError):
        reader[:]
    assert reader.version == held and len(reader) == 100
    assert reader.refresh()  # only refresh() moves a reader
    np.testing.assert_array_equal(reader[:], np.r_[[-1] * 5, np.arange(5, 150)])
    w.close()


def test_a_reader_reopened_or_pickled_keeps_its_version(tmp_path):
    root = tmp_path / "a"
    w = ca.carray(np.arange(10), rootdir=str(root), storage=fv.KEEP_ALL)
    reader = ca.open(root, mode="r")
    w.append(np.arange(5))
    w.commit()
    assert reader.reopen_args()["version"] == reader.version
    reader.reopen()
    assert len(reader) == 10
    again = pickle.loads(pickle.dumps(reader))
    assert again.version == reader.version and len(again) == 10
    pytest.importorskip("dask")
    np.testing.assert_array_equal(reader.to_dask().compute(), np.arange(10))
    w.close()


def test_the_xarray_backend_reads_the_version_it_described(tmp_path):
    xr = pytest.importorskip("xarray")
    root = tmp_path / "a"
    w = ca.carray(np.arange(10.0), rootdir=str(root), storage=fv.KEEP_ALL)
    ds = xr.open_dataset(root, engine="carray")
    w[:] = -1.0
    w.commit()
    np.testing.assert_array_equal(next(iter(ds.data_vars.values())).values, np.arange(10.0))
    w.close()


# -- metadata files: checksums, unknown keys --------------------------------------------


def test_a_flip_that_renames_a_key_of_meta_storage_is_caught(tmp_path):
    # docs/spec/commit.md [C4]
    root = tmp_path / "nd"
    ca.carray(np.zeros((20, 20)), rootdir=str(root), chunks=(8, 8), blocks=(4, 4)).close()
    storage = root / "meta" / "storage"
    text = storage.read_bytes()
    storage.write_bytes(text.replace(b'"blockshape"', b'"bdockshape"'))
    with pytest.raises(ChecksumError, match="meta/storage"):
        ca.open(root, mode="r")
    assert "checksum mismatch" in verify_path(root)[0][0]


def _as_written_before_checksums(path: Path, **older) -> None:
    """Rewrite a metadata file as carray wrote it before checksums (no crc32; a key
    given as None is left out)."""
    obj = read_meta(path)
    obj.update(older)
    write_meta(path, {k: v for k, v in obj.items() if k not in older or v is not None},
               checked=False)


def test_unknown_and_misspelt_keys_of_an_old_meta_storage_are_refused(tmp_path):
    root = tmp_path / "a"
    ca.carray(np.arange(10), rootdir=str(root)).close()
    storage = root / "meta" / "storage"
    _as_written_before_checksums(storage, format_version=3)
    assert ca.open(root, mode="r")[:].tolist() == list(range(10))  # as before checksums
    good = storage.read_bytes()
    for old, new in ((b'"blockshape"', b'"bdockshape"'), (b'"page_size"', b'"pade_size"'),
                     (b'"typesize"', b'"typesizf"')):
        storage.write_bytes(good.replace(old, new))
        with pytest.raises(FormatError, match=r"meta/storage.*(unknown key|no 'page_size')"):
            ca.open(root, mode="r")
        assert verify_path(root)[0]
    for key, value in (("chunklen", 7), ("endianness", "big"), ("expectedlen", -1),
                       ("page_size", 4097)):
        storage.write_bytes(good)
        edit_meta(storage, **{key: value})
        with pytest.raises(FormatError, match=key):
            ca.open(root, mode="r")


def test_a_checksum_in_an_old_version_or_none_in_a_new_one_is_refused(tmp_path):
    root = tmp_path / "a"
    ca.carray(np.arange(10), rootdir=str(root)).close()
    storage = root / "meta" / "storage"
    edit_meta(storage, format_version=3)  # keeps a (valid) checksum
    with pytest.raises(FormatError, match="format version that has none"):
        ca.open(root, mode="r")
    edit_meta(storage, format_version=4)
    write_meta(storage, read_meta(storage), checked=False)
    with pytest.raises(FormatError, match="requires"):
        ca.open(root, mode="r")


def test_markers_written_before_checksums_still_read(tmp_path):
    root = tmp_path / "t"
    fv.build_table(root)
    expected = ca.open(root, mode="r")[:]
    for marker in root.rglob("*"):
        if marker.name == "__table__":
            _as_written_before_checksums(marker, format_version=3)
        elif marker.name in ("__vlstring__", "__category__"):
            _as_written_before_checksums(marker, version=1)
        elif marker.name == "member":
            _as_written_before_checksums(marker, format_version=None)
        elif marker.name == "storage":
            _as_written_before_checksums(marker, format_version=3)
    assert b"crc32" not in b"".join(p.read_bytes() for p in root.rglob("*")
                                    if p.is_file() and "versions" not in p.parts)
    assert fv.same(ca.open(root, mode="r")[:], expected)
    assert verify_path(root)[0] == []


@pytest.mark.parametrize("marker", ["__table__", "s/__vlstring__", "c/__category__",
                                    "i/meta/member", "i/meta/storage"])
def test_a_damaged_table_marker_fails_reads_and_verify(tmp_path, marker):
    root = tmp_path / "t"
    fv.build_table(root)
    path = root / marker
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(data)
    # A table reads its arrays' notes only when one is opened alone.
    opened = root / "i" if marker == "i/meta/member" else root
    with pytest.raises(FormatError, match=marker.rsplit("/", 1)[-1]):
        ca.open(opened, mode="r")[:]
    assert any(marker in p for p in verify_path(root)[0])


def test_a_member_note_naming_another_directory_is_refused(tmp_path):
    root = tmp_path / "t"
    ca.ctable({"a": np.arange(3), "b": np.arange(3.0)}, rootdir=str(root)).close()
    note = root / "a" / "meta" / "member"
    for change in ({"name": "b"}, {"dataset": "../../.."}, {"dataset": "elsewhere"}):
        good = note.read_bytes()
        edit_meta(note, **change)
        with pytest.raises(FormatError, match="meta/member"):
            ca.open(root / "a", mode="r")
        assert verify_path(root / "a")[0]
        note.write_bytes(good)


def test_a_group_marker_and_older_group_versions_are_verified(tmp_path):
    root = tmp_path / "g"
    fv.build_group(root)
    oldest = sorted((root / "versions").glob("*.mf"))[1]
    data = bytearray(oldest.read_bytes())
    data[-1] ^= 0x01
    oldest.write_bytes(data)
    assert any(oldest.name in p for p in verify_path(root)[0])
    oldest.write_bytes(bytes(data[:-1]) + bytes([data[-1] ^ 0x01]))
    marker = root / "__group__"
    marker.write_bytes(marker.read_bytes().replace(b"group", b"groUp"))
    with pytest.raises(ChecksumError, match="__group__"):
        ca.open_group(root)
    assert verify_path(root)[0]


def test_checked_json_round_trips_and_catches_every_single_byte_change():
    for obj in ({}, {"a": 1}, {"format": "x", "nested": {"k": [1, 2.5, None]}}):
        raw = dumps_checked(obj)
        assert load_checked(raw, "f", "f") == (obj, True)
        for i in range(len(raw)):
            damaged = bytearray(raw)
            damaged[i] ^= 0x04
            try:
                got = load_checked(bytes(damaged), "f", "f")
            except FormatError:
                continue
            assert got[1] is False  # the member itself damaged: its key is unknown then
            assert "crc32" not in got[0] and got[0] != obj or i >= raw.index(b'"crc32"') - 2


def test_a_crafted_index_entry_is_an_error_not_an_allocation(tmp_path):
    from carray.versions.index import decode_page, encode_page
    from carray.versions.manifest import Manifest
    from carray.versions.repo import page_file_name

    root = tmp_path / "a"
    ca.carray(np.arange(5000), rootdir=str(root), chunklen=500).close()
    mf_path = sorted((root / "versions").glob("*.mf"))[-1]
    mf = Manifest.decode(mf_path.read_bytes(), str(mf_path))
    member = mf.members[0]
    ref = member.pages[0]
    ix_path = root / "versions" / page_file_name(int(ref["seq"]))
    raw = ix_path.read_bytes()
    entries = decode_page(raw[ref["off"]:ref["off"] + ref["len"]], member.nchunks).copy()
    entries[1]["cbytes"] = 2_000_000_000  # a well-formed page (valid CRC) that lies
    page = encode_page(entries)
    ix_path.write_bytes(raw + page)
    pages = member.pages.copy()
    pages[0]["off"], pages[0]["len"] = len(raw), len(page)
    mf_path.write_bytes(mf.replace(members=[member.replace(pages=pages)]).encode())
    a = ca.open(root, mode="r")
    for read in (lambda: a[:], lambda: a[600], lambda: a[550:560]):
        with pytest.raises(FormatError, match="more than a chunk"):
            read()
    assert "more than a chunk" in verify_path(root)[0][0]
