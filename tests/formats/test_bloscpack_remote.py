"""Bloscpack files on remote stores (``memory://`` and S3 served by moto): the same bytes
as a local write, reads by ranges, append, and errors that name the URL."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from carray.errors import ChecksumError, FormatError
from carray.formats import bloscpack as bp
from carray.stores import resolve

DATA = Path(__file__).parent.parent / "data" / "bloscpack"


def remote_bytes(url: str, options) -> bytes:
    store, path = resolve(url, options)
    return store.get(path)


def put_remote(url: str, options, data: bytes) -> None:
    store, path = resolve(url, options)
    store.put(path, data)


ARRAY = np.arange(200_000, dtype="<i4").reshape(2000, 100) % 977


@pytest.mark.parametrize("kw", [{}, {"offsets": False}, {"checksum": "sha256"},
                                {"checksum": None, "max_app_chunks": 0}])
def test_pack_array_is_byte_identical_to_local(remote_root, tmp_path, kw):
    root, options = remote_root
    local = tmp_path / "a.blp"
    bp.pack_array(ARRAY, local, chunk_size="64K", **kw)
    bp.pack_array(ARRAY, f"{root}/a.blp", chunk_size="64K", storage_options=options, **kw)
    assert remote_bytes(f"{root}/a.blp", options) == local.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.blp"]  # no temporary left
    got = bp.unpack_array(f"{root}/a.blp", storage_options=options)
    assert got.dtype == ARRAY.dtype and got.shape == ARRAY.shape
    np.testing.assert_array_equal(got, ARRAY)


def test_pack_bytes_round_trip(remote_root, tmp_path):
    root, options = remote_root
    data = os.urandom(5000) + bytes(20_000)
    url = f"{root}/sub/b.blp"
    bp.pack_bytes(data, url, chunk_size="4K", metadata={"name": "x"}, storage_options=options)
    bp.pack_bytes(data, tmp_path / "b.blp", chunk_size="4K", metadata={"name": "x"})
    assert remote_bytes(url, options) == (tmp_path / "b.blp").read_bytes()
    assert bp.unpack_bytes(url, storage_options=options) == data
    d = bp.info(url, storage_options=options)
    assert d["metadata"] == {"name": "x"} and d["chunks"] == 7 and d["nbytes"] == len(data)
    assert d["path"] == resolve(url, options)[0].url(resolve(url, options)[1])


def test_reads_a_file_bloscpack_wrote(remote_root):
    root, options = remote_root
    url = f"{root}/fixture.blp"
    for name in ("nd_single_chunk.blp", "by_adler32_meta.blp"):
        local = DATA / name
        put_remote(url, options, local.read_bytes())
        assert bp.unpack_bytes(url, storage_options=options) == bp.unpack_bytes(local)
        remote_info = bp.info(url, storage_options=options)
        local_info = bp.info(local)
        for key in ("header", "metadata", "offsets", "nbytes", "cbytes", "first_chunk"):
            assert remote_info[key] == local_info[key]


def test_info_reads_only_the_headers(remote_root, remote_fetches):
    root, options = remote_root
    url = f"{root}/big.blp"
    rng = np.random.default_rng(5)
    bp.pack_bytes(rng.integers(0, 256, 2_000_000, np.uint8).tobytes(), url,
                  chunk_size="128K", checksum=None, storage_options=options)
    size = len(remote_bytes(url, options))
    remote_fetches.clear()
    d = bp.info(url, storage_options=options)
    assert d["chunks"] == 16 and d["file_size"] == size
    # The start of the file, then every chunk header but the first (concurrently).
    assert len(remote_fetches) == 16
    assert sum(remote_fetches) <= 64 * 2**10 + 15 * 16
    remote_fetches.clear()
    bp.unpack_bytes(url, storage_options=options)
    assert sum(remote_fetches) <= 2 * size  # each chunk read once more, nothing else


def test_append(remote_root, tmp_path):
    root, options = remote_root
    url = f"{root}/a.blp"
    local = tmp_path / "a.blp"
    first, more = ARRAY[:700], ARRAY[700:]
    bp.pack_array(first, local, chunk_size=40_000)
    bp.pack_array(first, url, chunk_size=40_000, storage_options=options)
    assert bp.append(local, more) == bp.append(url, more, storage_options=options) > 0
    assert remote_bytes(url, options) == local.read_bytes()
    np.testing.assert_array_equal(bp.unpack_array(url, storage_options=options), ARRAY)


def test_missing_file(remote_root):
    root, options = remote_root
    url = f"{root}/nothing.blp"
    for call in (bp.unpack_array, bp.unpack_bytes, bp.info):
        with pytest.raises(FileNotFoundError, match="nothing.blp"):
            call(url, storage_options=options)
    with pytest.raises(FileNotFoundError, match="nothing.blp"):
        bp.append(url, b"more", storage_options=options)


def test_errors_name_the_url(remote_root):
    root, options = remote_root
    url = f"{root}/bad.blp"
    put_remote(url, options, b"definitely not bloscpack, but long enough")
    with pytest.raises(FormatError, match="not a Bloscpack file") as info:
        bp.unpack_bytes(url, storage_options=options)
    assert "://" in info.value.path and info.value.path.endswith("bad.blp")
    good = bytearray((DATA / "nd_single_chunk.blp").read_bytes())
    good[-10] ^= 0xFF  # inside the last chunk's bytes or digest
    put_remote(url, options, bytes(good))
    with pytest.raises(ChecksumError) as info:
        bp.unpack_array(url, storage_options=options)
    assert info.value.path.endswith("bad.blp")
    put_remote(url, options, bytes(good[:100]))
    with pytest.raises(FormatError, match="bad.blp"):
        bp.unpack_array(url, storage_options=options)


def test_storage_options_need_a_url(tmp_path):
    with pytest.raises(ValueError, match="storage_options"):
        bp.pack_bytes(b"abc", tmp_path / "a.blp", storage_options={"anon": True})
    with pytest.raises(ValueError, match="storage_options"):
        bp.unpack_bytes(tmp_path / "a.blp", storage_options={"anon": True})
