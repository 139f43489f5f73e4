"""ca.concatenate and a.append(other_carray) against numpy: whole chunks move where the grids
line up, everything else is decoded; in memory and on disk; a failure changes nothing."""

from __future__ import annotations

import errno
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.array import transfer
from carray.engine.moves import StoredChunks
from carray.layouts.superchunk.layout import SuperchunkLayout

DTYPES = ["i1", "u2", "i4", "f4", "f8", "c8", "?"]
_names = itertools.count()


@st.composite
def concatenations(draw):
    ndim = draw(st.integers(1, 3))
    axis = draw(st.integers(0, ndim - 1))
    base = [draw(st.integers(1, 12)) for _ in range(ndim)]
    chunks = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    narrays = draw(st.integers(1, 3))
    arrays = []
    for i in range(narrays):
        shape = list(base)
        shape[axis] = draw(st.integers(0, 14))
        own = chunks if draw(st.booleans()) else \
            tuple(draw(st.integers(1, 6)) for _ in range(ndim))
        values = (np.arange(np.prod(shape), dtype="i8") * 7 + i * 1000).reshape(shape)
        arrays.append((values.astype(dtype), own))
    where = draw(st.sampled_from(["memory", "superchunk", "b2nd"]))
    return arrays, axis, where


def _make(values, chunks, where, tmp):
    if where == "memory":
        return ca.carray(values, chunks=chunks)
    path = f"{tmp}/a{next(_names)}" + (".b2nd" if where == "b2nd" else "")
    return ca.carray(values, chunks=chunks, rootdir=path, mode="w")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=concatenations())
def test_concatenate_matches_numpy(tmp_path, case):
    arrays, axis, where = case
    inputs = [_make(v, c, where, tmp_path) for v, c in arrays]
    root = None if where == "memory" else \
        f"{tmp_path}/r{next(_names)}" + (".b2nd" if where == "b2nd" else "")
    out = ca.concatenate(inputs, axis=axis, rootdir=root, mode="w")
    expected = np.concatenate([v for v, _ in arrays], axis=axis)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out[:], expected)
    if root is not None:
        out.close()
        np.testing.assert_array_equal(ca.open(root, mode="r")[:], expected)


def test_concatenate_mixes_numpy_and_casts():
    a = ca.carray(np.arange(10, dtype="i2"), chunks=(4,))
    out = ca.concatenate([a, np.arange(5, dtype="f4")])
    np.testing.assert_array_equal(out[:], np.concatenate([np.arange(10), np.arange(5)]))
    assert out.dtype == np.dtype("f4")
    with pytest.raises(ValueError, match="differ off axis"):
        ca.concatenate([np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(ValueError):
        ca.concatenate([])
    with pytest.raises(ValueError):
        ca.concatenate([np.zeros(3)], axis=1)


@pytest.fixture
def no_decoding(monkeypatch):
    def refuse(self, nchunk):
        raise AssertionError(f"chunk {nchunk} decoded")
    monkeypatch.setattr(StoredChunks, "region", refuse)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_aligned_grids_move_every_chunk(tmp_path, axis, no_decoding):
    x = np.arange(8 * 6 * 10, dtype="f8").reshape(8, 6, 10)
    a = ca.carray(x, chunks=(4, 3, 5), rootdir=str(tmp_path / "a"), mode="w")
    b = ca.carray(x + 1, chunks=(4, 3, 5), rootdir=str(tmp_path / "b"), mode="w")
    out = ca.concatenate([a, b], axis=axis, rootdir=str(tmp_path / "c"), mode="w")
    np.testing.assert_array_equal(out[:], np.concatenate([x, x + 1], axis=axis))


def test_misaligned_grids_decode_only_where_needed():
    x = np.arange(30.0)
    c = ca.carray(x[:8], chunks=(4,))
    a = ca.carray(x[8:18], chunks=(4,))  # 10 rows: what follows starts mid-chunk
    e = ca.carray(x[18:26], chunks=(4,))
    target = ca.carray(np.empty(0), chunks=(4,), cparams=a.cparams)
    stats = transfer.append_from(target, [c, a, e])
    assert (stats.moved, stats.decoded) == (4, 3), stats.summary()
    assert stats.reasons == {"grids do not line up": 3}
    np.testing.assert_array_equal(target[:], x[:26])


@pytest.mark.parametrize("where", ["memory", "superchunk", "bcolz", "b2nd"])
def test_append_carray_moves_whole_chunks(tmp_path, where, monkeypatch):
    x = np.linspace(0, 1, 1000)
    kw = {} if where == "memory" else {"rootdir": str(tmp_path / ("a.b2nd" if where == "b2nd"
                                                                 else "a")), "mode": "w"}
    if where == "bcolz":
        kw["format"] = "bcolz"
    a = ca.carray(x[:512], chunklen=128, **kw)
    b = a.copy()
    calls = []
    monkeypatch.setattr(transfer, "append_from",
                        lambda *args, _f=transfer.append_from, **kws: calls.append(1) or
                        _f(*args, **kws))
    a.append(b)  # 512 rows: whole chunks
    a.append(x[:100])  # a partial tail
    a.append(b)  # after the tail: the ordinary decode path
    assert len(calls) == 1
    expected = np.concatenate([x[:512], x[:512], x[:100], x[:512]])
    np.testing.assert_array_equal(a[:], expected)
    if where != "memory":
        a.close()
        np.testing.assert_array_equal(ca.open(kw["rootdir"], mode="r")[:], expected)


def test_append_of_itself_and_of_an_n_d_carray():
    a = ca.carray(np.arange(64).reshape(16, 4), chunks=(8, 2))
    a.append(a)
    np.testing.assert_array_equal(a[:], np.tile(np.arange(64).reshape(16, 4), (2, 1)))


def test_failed_append_leaves_the_target_as_it_was(tmp_path, monkeypatch):
    x = np.arange(4096.0)
    a = ca.carray(x, chunks=(256,), rootdir=str(tmp_path / "a"), mode="w")
    b = ca.carray(x + 1, chunks=(256,), rootdir=str(tmp_path / "b"), mode="w")
    a.flush()
    original = SuperchunkLayout.write_chunk
    count = [0]

    def write_chunk(layout, nchunk, data, digest=None):
        count[0] += 1
        if count[0] == 6:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(layout, nchunk, data, digest)
    monkeypatch.setattr(SuperchunkLayout, "write_chunk", write_chunk)
    with pytest.raises(OSError):
        a.append(b)
    monkeypatch.undo()
    assert len(a) == 4096
    np.testing.assert_array_equal(a[:], x)
    a.append(b)  # the same append works once the disk has room
    a.close()
    np.testing.assert_array_equal(ca.open(str(tmp_path / "a"), mode="r")[:],
                                  np.concatenate([x, x + 1]))


def test_other_chunk_shapes_are_read_by_box_not_by_chunk_number():
    # Chunk 1 of a (3,)-chunked 7-item array and of a (4,)-chunked one both hold 3 items,
    # from different places: the copy must not take one for the other.
    x = np.arange(7.0)
    a = ca.carray(x, chunks=(4,))
    out, stats = transfer.copy_of(a, chunks=(3,))
    assert stats.moved == 0
    np.testing.assert_array_equal(out[:], x)
    y = np.arange(4 * 7.0).reshape(4, 7)
    b = ca.carray(y, chunks=(2, 4))
    out = ca.concatenate([b, b], axis=0, chunks=(2, 3))
    np.testing.assert_array_equal(out[:], np.concatenate([y, y]))


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 12), min_size=1, max_size=3), data=st.data())
def test_copy_to_any_chunk_shape_matches_numpy(shape, data):
    chunks = st.tuples(*(st.integers(1, 6) for _ in shape))
    src, dst = data.draw(chunks), data.draw(chunks)
    x = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
    out, stats = transfer.copy_of(ca.carray(x, chunks=src), chunks=dst)
    np.testing.assert_array_equal(out[:], x)
    assert stats.moved == 0 or src == dst
