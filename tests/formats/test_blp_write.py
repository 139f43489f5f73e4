"""Putting ``.blp`` files in place as their chunks arrive: local files and object stores
get the same bytes, and a replaced file is replaced whole."""

from __future__ import annotations

import numpy as np
import pytest

from carray.formats import bloscpack as bp
from carray.formats import local_write as _local_write
from carray.formats.bloscpack import write as _blp_write
from carray.formats.bloscpack.frame import OFFSET_SIZE
from carray.stores import LOCAL, resolve

CHUNKS = [(b"A" * 10, b"1234"), (b"B" * 7, b"5678"), (b"C" * 3, b"90ab")]


def _stored(store, key) -> bytes:
    return store.get(key)


@pytest.mark.parametrize("slots", [0, 5])
@pytest.mark.parametrize("kept", [False, True])
def test_local_and_object_store_get_the_same_bytes(tmp_path, slots, kept):
    memory, key = resolve(f"memory://blp-write-{slots}-{kept}/f.blp")
    local = str(tmp_path / "f.blp")
    extra = {"kept": [40 + slots * OFFSET_SIZE], "copied": [b"old chunk"]} if kept else {}
    for store, where in ((LOCAL, local), (memory, key)):
        _blp_write.put_blp(store, where, [b"front---", b"meta"], slots, iter(CHUNKS), False,
                           **({k: list(v) for k, v in extra.items()}))
    data = _stored(LOCAL, local)
    assert data == _stored(memory, key)
    table_at, start = 12, 12 + slots * OFFSET_SIZE
    body = (b"old chunk" if kept else b"") + b"".join(p + d for p, d in CHUNKS)
    assert data[:table_at] == b"front---meta" and data[start:] == body
    if slots:
        starts = np.frombuffer(data[table_at:start], "<i8")
        first = start + (9 if kept else 0)
        expected = ([40 + slots * OFFSET_SIZE] if kept else []) + \
            [first, first + 14, first + 25]
        assert starts[:len(expected)].tolist() == expected
        assert (starts[len(expected):] == -1).all()


def test_put_stream_writes_the_parts_in_order(tmp_path):
    memory, key = resolve("memory://blp-write-stream/f.raw")
    local = str(tmp_path / "f.raw")
    for store, where in ((LOCAL, local), (memory, key)):
        _blp_write.put_stream(store, where, iter([b"ab", np.arange(3, dtype=np.uint8), b""]),
                              False)
        assert _stored(store, where) == b"ab\x00\x01\x02"


def test_pack_replaces_a_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "a.blp"
    bp.pack_array(np.arange(100_000), path, chunk_size="64K", fsync=False)
    replaced = []
    real = _local_write.replace
    monkeypatch.setattr(_local_write, "replace", lambda a, b, **kw: replaced.append(b) or real(a, b, **kw))
    with open(path, "rb") as old:
        before = old.read()
        old.seek(0)
        bp.pack_array(np.arange(50_000.0), path, chunk_size="64K", fsync=False)
        assert old.read() == before  # a reader that opened the old file keeps it
    assert replaced == [str(path)]
    np.testing.assert_array_equal(bp.unpack_array(path), np.arange(50_000.0))
    assert [p.name for p in tmp_path.iterdir()] == ["a.blp"]


def test_unpack_file_replaces_its_destination(tmp_path):
    blp, out = tmp_path / "a.blp", tmp_path / "a.npy"
    a = np.arange(300_000, dtype=np.int32)
    bp.pack_array(a, blp, chunk_size="128K")
    out.write_bytes(b"an older, longer file than the one about to replace it" * 100_000)
    assert bp.unpack_file(blp, out, fsync=False) == "npy"
    np.testing.assert_array_equal(np.load(out), a)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.blp", "a.npy"]


def test_the_reader_accepts_the_table_put_blp_filled_in(tmp_path):
    path = tmp_path / "a.blp"
    bp.pack_array(np.arange(40_000), path, chunk_size="64K", max_app_chunks=3)
    info = bp.info(path)
    assert len(info["offsets"]) == info["chunks"] == 5 and info["free_offset_slots"] == 3
    assert info["offsets"][0] == info["file_size"] - info["cbytes"]
