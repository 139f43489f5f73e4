"""A damaged byte anywhere in a bcolz directory or a ``.b2nd`` frame carray wrote never
reads back as a wrong value: every read gives the right values or raises a carray error,
and ``carray verify`` agrees with what reading finds.

CI flips every byte of every header, table and trailer and a sample of chunk bytes
(``SAMPLE`` per layout); ``CARRAY_SOAK=1`` flips every byte of every file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from flips import Tally, expected, sweep

import carray as ca
from carray.layouts.b2nd.frame import read_frame, write_array
from carray.layouts.bcolz.layout import CHUNK_HEADER_SIZE

SOAK = os.environ.get("CARRAY_SOAK") == "1"
# Every byte of a dataset takes minutes: the per-test timeout is for CI's sample.
pytestmark = [pytest.mark.timeout(0)] if SOAK else []
# Bytes flipped per dataset in CI, spread evenly over each kind: headers, tables,
# trailers and JSON metadata; chunk data.
META_SAMPLE, DATA_SAMPLE = 100, 30

_RNG = np.random.default_rng(5)
# (name, data, carray keywords): 1-d with a partial last chunk, N-d with edge chunks,
# default and explicit chunk (and block) shapes.
BCOLZ = [
    ("1d", _RNG.integers(0, 40, 1000).astype("i8"), dict(chunklen=128)),
    ("rows", _RNG.integers(0, 9, (300, 6)).astype("f4"), dict(chunklen=64)),
    ("default", np.arange(5000, dtype="i8") // 7, {}),
]
B2ND = [
    ("1d", _RNG.integers(0, 40, 3000).astype("i8"), dict(chunks=(512,), blocks=(64,))),
    ("1d-default", np.arange(5000, dtype="i4") // 3, {}),
    ("3d", _RNG.integers(0, 9, (23, 30, 17)).astype("f8"),
     dict(chunks=(10, 12, 9), blocks=(4, 5, 3))),
    ("3d-default", (np.arange(20 * 40 * 30, dtype="i2") // 11).reshape(20, 40, 30), {}),
    ("sparse", _RNG.integers(0, 9, (23, 30, 17)).astype("f8"),
     dict(chunks=(10, 12, 9), blocks=(4, 5, 3), storage={"contiguous": False})),
]


def _pick(targets: list[tuple[Path, int]], n: int) -> list[tuple[Path, int]]:
    """``n`` of ``targets`` spread evenly over them (all of them with ``SOAK``)."""
    if SOAK or len(targets) <= n:
        return targets
    return [targets[int(i)] for i in np.unique(np.linspace(0, len(targets) - 1, n).round())]


def _targets(meta: list[tuple[Path, int]], data: list[tuple[Path, int]], share: float = 1
             ) -> list[tuple[Path, int]]:
    return _pick(meta, int(META_SAMPLE * share)) + _pick(data, int(DATA_SAMPLE * share))


def _bcolz_targets(root: Path) -> list[tuple[Path, int]]:
    meta, data = [], []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        size = f.stat().st_size
        if f.parent.name != "data":  # JSON metadata, sidecars
            meta += [(f, i) for i in range(size)]
            continue
        raw = f.read_bytes()
        cbytes = int.from_bytes(raw[CHUNK_HEADER_SIZE + 12:CHUNK_HEADER_SIZE + 16], "little")
        end = CHUNK_HEADER_SIZE + cbytes
        # The prefix, the Blosc header and block table, the trailer: metadata.
        head = min(end, CHUNK_HEADER_SIZE + 64)
        meta += [(f, i) for i in [*range(head), *range(end, size)]]
        data += [(f, i) for i in range(head, end)]
    return _targets(meta, data)


def _b2nd_targets(path: Path) -> list[tuple[Path, int]]:
    if path.is_dir():  # sparse: the index file; chunk files' headers and data
        index = path / "chunks.b2frame"
        meta = [(index, i) for i in range(index.stat().st_size)]
        data = []
        for f in sorted(path.glob("*.chunk")):
            size = f.stat().st_size
            meta += [(f, i) for i in range(min(size, 64))]
            data += [(f, i) for i in range(64, size)]
        return _targets(meta, data, share=0.5)  # (reads of sparse frames open more files)
    with read_frame(path) as f:
        header_len, index_start = f.header.header_len, f.index_start
    size = path.stat().st_size
    return _targets([(path, i) for i in [*range(header_len), *range(index_start, size)]],
                    [(path, i) for i in range(header_len, index_start)])


def _run(tmp_path: Path, path: str, targets) -> Tally:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    want = expected(path, scratch)
    t = Tally()
    start = time.perf_counter()
    sweep(path, targets, want, scratch, t)
    print(f"\n{Path(path).name}: {t} in {time.perf_counter() - start:.1f} s")
    assert not t.silent, t.silent[:10]
    assert not t.untyped, t.untyped[:10]
    assert not t.disagree, t.disagree[:10]
    assert t.errors and t.right  # damage was seen, and some reads did not need the byte
    return t


@pytest.mark.parametrize("name,data,kw", BCOLZ, ids=[d[0] for d in BCOLZ])
def test_bcolz_flips(tmp_path, name, data, kw):
    root = tmp_path / f"{name}.bcolz"
    a = ca.carray(data, rootdir=str(root), format="bcolz", mode="w", **kw)
    a.close()
    np.testing.assert_array_equal(ca.open(str(root), mode="r")[:], data)
    _run(tmp_path, str(root), _bcolz_targets(root))


@pytest.mark.parametrize("name,data,kw", B2ND, ids=[d[0] for d in B2ND])
def test_b2nd_flips(tmp_path, name, data, kw):
    path = tmp_path / f"{name}.b2nd"
    ca.carray(data, rootdir=str(path), mode="w", **kw).close()
    np.testing.assert_array_equal(ca.open(str(path), mode="r")[:], data)
    _run(tmp_path, str(path), _b2nd_targets(path))


@pytest.mark.parametrize("contiguous", [True, False], ids=["file", "sparse"])
def test_write_array_flips(tmp_path, contiguous):
    """Frames ``carray.layouts.b2nd.frame.write_array`` writes carry the same record."""
    data = _RNG.integers(0, 9, (23, 30, 17)).astype("f4")
    path = tmp_path / "w.b2nd"
    write_array(data, path, chunks=(10, 12, 9), blocks=(4, 5, 3), contiguous=contiguous,
                vlmeta={"units": "K"})
    with read_frame(path) as f:
        assert f.digests is not None
    np.testing.assert_array_equal(ca.open(str(path), mode="r")[:], data)
    targets = _b2nd_targets(path)
    _run(tmp_path, str(path), targets if SOAK else targets[::3])
