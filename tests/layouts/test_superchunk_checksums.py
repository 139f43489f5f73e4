"""Every checksum is checked on every read that decodes a whole stored chunk: a flipped
byte anywhere in a superchunk file is an error or harmless, never a silently wrong value
(the partial last chunk and N-d edge chunks included)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import carray as ca
from carray.errors import CArrayError, ChecksumError

SOAK = os.environ.get("CARRAY_SOAK") == "1"


def _files(root) -> list[str]:
    data = os.path.join(root, "data")
    return [os.path.join(data, n) for n in sorted(os.listdir(data))]


def _positions(n: int) -> range | list[int]:
    """Bytes to flip: every one under ``CARRAY_SOAK=1``; in CI every byte of a file's
    first 256 (prefix, headers, offsets) and every fifth after."""
    return range(n) if SOAK else [*range(min(n, 256)), *range(256, n, 5)]


def _flips(root, expected: np.ndarray, read) -> tuple[int, int, int]:
    """Flip the bytes of every superchunk file in turn (see _positions): (caught, harmless, wrong)."""
    caught = harmless = wrong = 0
    for path in _files(root):
        good = open(path, "rb").read()
        for pos in _positions(len(good)):
            bad = bytearray(good)
            bad[pos] ^= 0x5A
            with open(path, "wb") as f:
                f.write(bad)
            try:
                got = read()
            except CArrayError:
                caught += 1
                continue
            if got.shape == expected.shape and (got == expected).all():
                harmless += 1
            else:
                wrong += 1
        with open(path, "wb") as f:
            f.write(good)
    return caught, harmless, wrong


# Small superchunks: a file's offsets table has a slot per chunk it may hold.
@pytest.mark.parametrize("storage", [{"superchunksize": 4},
                                     {"superchunksize": 8, "checksum": "crc32", "spare": 0}])
def test_every_flip_of_a_1d_dataset_with_a_partial_last_chunk(tmp_path, storage):
    root = str(tmp_path / "a")
    expected = np.arange(130, dtype=np.int64) * 7  # 4 chunks of 32, then 2 rows
    ca.carray(expected, rootdir=root, chunklen=32, storage=storage).close()
    caught, harmless, wrong = _flips(root, expected, lambda: ca.open(root, mode="r")[:])
    assert wrong == 0 and caught > 0
    print(f"1-d flips: {caught} caught, {harmless} harmless, {wrong} wrong")


def test_every_flip_of_an_nd_dataset_with_edge_chunks(tmp_path):
    root = str(tmp_path / "n")
    expected = np.arange(10 * 13, dtype=np.float32).reshape(10, 13)
    ca.carray(expected, rootdir=root, chunks=(4, 5), blocks=(2, 5),
              storage={"superchunksize": 6}).close()
    caught, harmless, wrong = _flips(root, expected, lambda: ca.open(root, mode="r")[:])
    assert wrong == 0 and caught > 0
    print(f"n-d flips: {caught} caught, {harmless} harmless, {wrong} wrong")


def test_verify_full_checks_ranged_reads_too(tmp_path):
    root = str(tmp_path / "v")
    expected = np.arange(4096, dtype=np.int64)
    ca.carray(expected, rootdir=root, chunklen=1024, cparams=ca.CParams(clevel=0)).close()
    (path,) = _files(root)
    data = bytearray(open(path, "rb").read())
    # A byte of chunk 1's items, well inside its data (uncompressed: item 1100 is there).
    at = bytes(data).find(np.int64(1100).tobytes())
    data[at] ^= 0xFF
    open(path, "wb").write(bytes(data))
    a = ca.open(root, mode="r")
    with pytest.raises(ChecksumError, match="page"):
        a[1100]  # a ranged read checks the digests of the pages it fetches
    with pytest.raises(ChecksumError):
        a[1024:2048]  # a whole chunk: its digest is checked
    full = ca.open(root, mode="r", storage={"verify": "full"})
    with pytest.raises(ChecksumError):
        full[1100]
    assert full[5] == 5  # other chunks read as before
