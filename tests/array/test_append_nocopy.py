"""Appends: the rows that fill whole chunks are compressed straight from the caller's
array (no copy into the tail); only the rows before them (completing the partial last
chunk) and after them (the new partial chunk) go through the tail.

Every append is compared with numpy, in memory and on disk (after a flush and a
reopen), over append sizes drawn around the chunk length: empty appends, appends
inside one chunk, appends completing the tail exactly, and appends of many chunks,
for 1-d and N-d rows.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.chunks.io import ChunkIO

C0 = 16
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@contextmanager
def _encoded():
    """Every array ``ChunkIO.encode`` compresses meanwhile (from any thread)."""
    seen: list[np.ndarray] = []
    lock = threading.Lock()
    real = ChunkIO.encode

    def encode(self, raw, *args, **kwargs):
        with lock:
            seen.append(raw)
        return real(self, raw, *args, **kwargs)

    ChunkIO.encode = encode  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        ChunkIO.encode = real  # type: ignore[method-assign]


def _whole_chunks(before: int, n: int) -> int:
    """Chunks an append of ``n`` rows to ``before`` rows fills from its own rows alone."""
    take = min(-before % C0, n)
    return (n - take) // C0


sizes = st.one_of(st.integers(0, 3 * C0 + 3),
                  st.sampled_from([0, 1, C0 - 1, C0, C0 + 1, 2 * C0, 5 * C0 + 7]))
row_shapes = st.sampled_from([(), (3,), (2, 5)])


@SETTINGS
@given(appends=st.lists(sizes, min_size=1, max_size=6), row=row_shapes,
       trailing_chunks=st.booleans(), on_disk=st.booleans(),
       dtype=st.sampled_from(["i8", "f8", "i2"]))
def test_appends_match_numpy_and_whole_chunks_come_from_the_callers_rows(
        tmp_path_factory, appends, row, trailing_chunks, on_disk, dtype):
    rng = np.random.default_rng(len(appends))
    # Chunks splitting a trailing axis take a copy (a chunk is contiguous); others none.
    chunks = (C0, *row) if not trailing_chunks or not row else (C0, *[max(1, r - 1)
                                                                     for r in row])
    contiguous = tuple(chunks[1:]) == row
    rootdir = str(tmp_path_factory.mktemp("a") / "a") if on_disk else None
    a = ca.carray(np.zeros((0, *row), dtype=dtype), chunks=chunks, rootdir=rootdir,
                  mode="w")
    expected = np.zeros((0, *row), dtype=dtype)
    for n in appends:
        rows = (rng.integers(1, 1000, size=(n, *row))).astype(dtype)
        with _encoded() as seen:
            a.append(rows)
            a.engine.settle()  # chunks handed to the compressing threads are stored
        from_caller = [r for r in seen if np.shares_memory(r, rows)]
        if contiguous:
            assert len(from_caller) == _whole_chunks(len(expected), n), \
                (len(expected), n, len(from_caller))
        expected = np.concatenate([expected, rows])
        np.testing.assert_array_equal(a[:], expected)
    a.flush()
    if rootdir is not None:
        a.close()
        a = ca.open(rootdir, mode="r")
    np.testing.assert_array_equal(a[:], expected)
    assert a.shape == expected.shape


def test_a_multi_chunk_append_to_a_partial_tail(tmp_path):
    """The rows completing the tail are copied; the whole chunks after them are not."""
    for rootdir in (None, str(tmp_path / "a")):
        a = ca.carray(np.arange(5, dtype="f8"), chunks=(C0,), rootdir=rootdir, mode="w")
        rows = np.arange(100, 100 + 4 * C0 + 3, dtype="f8")
        with _encoded() as seen:
            a.append(rows)
        assert sum(np.shares_memory(r, rows) for r in seen) == 3  # 11 to the tail, 3 x 16
        a.flush()
        np.testing.assert_array_equal(a[:], np.concatenate([np.arange(5.0), rows]))
