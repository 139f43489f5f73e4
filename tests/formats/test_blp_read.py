"""Reading ``.blp`` chunks on every thread: the shared read without progress, and how
it stops at the first bad chunk."""

from __future__ import annotations

import numpy as np
import pytest

import carray
from carray.errors import ChecksumError
from carray.formats import bloscpack as bp
from carray.formats.bloscpack.read import BlpFile


@pytest.fixture
def two_threads():
    previous = carray.set_nthreads(2)
    yield
    carray.set_nthreads(previous)


def test_every_chunk_lands_in_its_place(tmp_path, two_threads):
    a = np.arange(1_000_000, dtype=np.int64) * 7 % 1013
    path = tmp_path / "a.blp"
    bp.pack_array(a, path, chunk_size="16K")  # 489 chunks
    np.testing.assert_array_equal(bp.unpack_array(path), a)
    out = np.zeros_like(a)
    assert bp.unpack_array(path, out=out) is out
    np.testing.assert_array_equal(out, a)


def test_progress_still_comes_in_order(tmp_path, two_threads):
    path = tmp_path / "a.blp"
    bp.pack_array(np.arange(100_000), path, chunk_size="64K")
    seen = []
    bp.unpack_array(path, progress=lambda done, total: seen.append(done))
    assert seen == sorted(seen) and seen[-1] == 800_000 and len(seen) == 14


def test_the_first_bad_chunk_stops_every_thread(tmp_path, two_threads, monkeypatch):
    path = tmp_path / "a.blp"
    bp.pack_array(np.arange(400_000), path, chunk_size="16K")  # 196 chunks
    calls = []
    real = BlpFile.fetch_decode

    def failing(self, lay, s, out, verify):
        calls.append(s.index)
        if s.index == 3:
            raise ChecksumError("chunk 3: adler32 checksum mismatch", self.path, s.offset)
        real(self, lay, s, out, verify)

    monkeypatch.setattr(BlpFile, "fetch_decode", failing)
    with pytest.raises(ChecksumError, match="chunk 3"):
        bp.unpack_array(path)
    assert len(calls) < 20  # the others stopped taking chunks


def test_a_corrupt_chunk_is_reported(tmp_path, two_threads):
    path = tmp_path / "a.blp"
    bp.pack_array(np.arange(400_000), path, chunk_size="16K")
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # inside the last chunk
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="a.blp.*chunk 195"):
        bp.unpack_array(path)
