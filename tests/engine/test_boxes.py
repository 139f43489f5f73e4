"""The short path of boxes and planes (carray.engine.boxes) against numpy.

Planes of every orientation and boxes are read from arrays whose chunks are
stored block by block, on edge chunks and across chunk and block boundaries,
in memory and in every layout that stores blocks (superchunk, b2nd), and
through every branch of the path: runs of blocks decoded in memory or fetched
with one read, the masked decode of many runs, stretches copied one by one or
through the box in C order, fill-value chunks, the decoded-chunk cache, the
decoded tail, and threads.
"""

from __future__ import annotations

import pathlib
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.chunks.keys import orthogonal_key
from carray.codecs.blosc import Decoder
from carray.engine import boxes
from carray.engine import core as engine_core

WHERE = ["memory", "superchunk", "b2nd"]
SHAPE, CHUNKS, BLOCKS = (23, 19, 17), (8, 7, 6), (3, 4, 2)


def make(where, tmp_path, data, **kw):
    if where == "memory":
        return ca.carray(data, **kw)
    name = "a.b2nd" if where == "b2nd" else "a"
    ca.carray(data, rootdir=tmp_path / name, mode="w", format=where, **kw).close()
    return ca.open(tmp_path / name, mode="r")


@pytest.fixture
def data() -> np.ndarray:
    return np.random.default_rng(5).integers(-999, 999, SHAPE).astype("f8")


def box_keys(shape):
    """Planes along every axis at the first, a middle and the last position (edge
    chunks), and boxes crossing chunk and block boundaries."""
    for ax, n in enumerate(shape):
        for i in (0, n // 2, n - 1):
            yield tuple(i if a == ax else slice(None) for a in range(len(shape)))
    yield (slice(1, 22), slice(3, 18), slice(5, 16))  # partial blocks on every side
    yield (slice(7, 9), 6, slice(11, 13))  # across chunk boundaries
    yield (slice(None), slice(None), slice(None))
    yield (22, 18, 16)  # the last item, in the padded edge chunk
    yield (slice(20, 23), slice(14, 19), slice(12, 17))  # the edge chunk's corner


@pytest.mark.parametrize("where", WHERE)
def test_planes_and_boxes_match_numpy(where, tmp_path, data, monkeypatch):
    a = make(where, tmp_path, data, chunks=CHUNKS, blocks=BLOCKS)
    a.free_cachemem()  # the last run of chunks is read as stored, not as kept decoded
    taken = []
    real = boxes.BoxReader.read
    monkeypatch.setattr(boxes.BoxReader, "read",
                        lambda self, *args: taken.append(1) or real(self, *args))
    for key in box_keys(SHAPE):
        np.testing.assert_array_equal(a[key], data[key], err_msg=str(key))
    assert len(taken) == len(list(box_keys(SHAPE))) - 1  # a[i, j, k] takes read_item


@pytest.mark.parametrize("where", ["memory", "superchunk"])
def test_each_branch_of_the_short_path(where, tmp_path, data, monkeypatch):
    key = (slice(1, 22), slice(3, 18), slice(5, 16))
    # Many stretches per chunk: the box goes through C order first.  (Plans are kept
    # per array, so each setting gets an array of its own.)
    monkeypatch.setattr(boxes, "_MAX_COPIES", 1)
    a = make(where, tmp_path / "copies", data, chunks=CHUNKS, blocks=BLOCKS)
    np.testing.assert_array_equal(a[key], data[key])
    # Every read of blocks as a masked decode of the whole chunk's blocks.
    monkeypatch.setattr(boxes, "_MASK_RUNS", 1)
    a = make(where, tmp_path / "mask", data, chunks=CHUNKS, blocks=BLOCKS)
    np.testing.assert_array_equal(a[key], data[key])
    np.testing.assert_array_equal(a[:, 4], data[:, 4])
    # Chunks spread over threads.
    monkeypatch.setattr(engine_core, "_THREADED_BYTES", 1)
    np.testing.assert_array_equal(a[key], data[key])
    np.testing.assert_array_equal(a[5], data[5])


def test_fill_chunks_cache_and_tail(tmp_path, data):
    a = ca.zeros(SHAPE, dtype="f8", chunks=CHUNKS, blocks=BLOCKS, rootdir=tmp_path / "z")
    want = np.zeros(SHAPE)
    np.testing.assert_array_equal(a[4], want[4])  # special chunks: nothing stored
    a[3:5, 2:9, 1:4] = 7.0  # leaves chunk (0, 1, 0) in the decoded-chunk cache
    want[3:5, 2:9, 1:4] = 7.0
    for key in box_keys(SHAPE):
        np.testing.assert_array_equal(a[key], want[key], err_msg=str(key))
    # A partial last run of chunk rows, held decoded: planes reaching it, and not.
    b = ca.carray(data[:20], chunks=CHUNKS, blocks=BLOCKS, rootdir=tmp_path / "t")
    b.append(data[20:])
    for key in box_keys(SHAPE):
        np.testing.assert_array_equal(b[key], data[key], err_msg=str(key))


@pytest.mark.parametrize("where", ["memory", "superchunk"])
def test_one_run_of_blocks_is_one_fetch(where, tmp_path, data, monkeypatch):
    a = make(where, tmp_path, data, chunks=CHUNKS, blocks=(1, 4, 3))
    calls = []
    name = "decode_runs" if where == "memory" else "fetch_runs"
    real = getattr(Decoder, name)

    def spy(self, *args, **kwargs):
        got = real(self, *args, **kwargs)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(Decoder, name, spy)
    np.testing.assert_array_equal(a[9], data[9])
    # One call per chunk of the plane (3 x 3 chunks), each one run of blocks.
    assert calls == [True] * 9


def test_other_layouts_and_keys_take_the_general_path(tmp_path, data, monkeypatch):
    used = []
    monkeypatch.setattr(boxes.BoxReader, "read", lambda *args: used.append(args))
    rows = ca.carray(data, chunklen=5, rootdir=tmp_path / "b", format="bcolz")
    np.testing.assert_array_equal(rows[3, 2:9], data[3, 2:9])  # chunks in C order
    a = ca.carray(data, chunks=CHUNKS, blocks=BLOCKS)
    np.testing.assert_array_equal(a[::2, 3], data[::2, 3])  # a step
    np.testing.assert_array_equal(a[::-1, 3], data[::-1, 3])  # descending
    np.testing.assert_array_equal(a[[1, 5], 3], data[[1, 5], 3])  # an index array
    assert not used
    assert boxes.is_box(orthogonal_key((3, slice(2, 9), slice(None)), SHAPE))
    assert not boxes.is_box(orthogonal_key((slice(None, None, 2), 1, 1), SHAPE))


def test_frames_written_by_python_blosc2(tmp_path):
    import blosc2

    data = np.arange(np.prod(SHAPE), dtype="f8").reshape(SHAPE)
    path = str(tmp_path / "x.b2nd")
    blosc2.asarray(data, chunks=CHUNKS, blocks=BLOCKS, urlpath=path, mode="w")
    a = ca.open(path, mode="r")
    for key in box_keys(SHAPE):
        np.testing.assert_array_equal(a[key], data[key], err_msg=str(key))


@st.composite
def box_cases(draw):
    nd = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 12)) for _ in range(nd))
    chunks = tuple(draw(st.integers(1, n + 2)) for n in shape)
    blocks = tuple(draw(st.integers(1, c)) for c in chunks)
    key = []
    for n in shape:
        lo = draw(st.integers(0, n - 1))
        key.append(lo if draw(st.booleans()) else slice(lo, draw(st.integers(lo + 1, n))))
    return shape, chunks, blocks, tuple(key)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(box_cases(), st.sampled_from(["memory", "superchunk"]))
def test_any_box_matches_numpy(case, where):
    shape, chunks, blocks, key = case
    data = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape) * 3 - 7
    with tempfile.TemporaryDirectory() as tmp:
        a = make(where, pathlib.Path(tmp), data, chunks=chunks, blocks=blocks)
        np.testing.assert_array_equal(a[key], data[key])
        # And the plane along every axis through the key's first item.
        first = [k if isinstance(k, int) else k.start for k in key]
        for ax in range(len(shape)):
            plane = tuple(first[ax] if x == ax else slice(None) for x in range(len(shape)))
            np.testing.assert_array_equal(a[plane], data[plane], err_msg=str(plane))
