"""Every indexing path, set path, append and resize compared against numpy.

Each property runs in memory and on disk (a fresh directory per example, and the
result is read back after reopening), on arrays chunked by rows (bcolz's way)
and on N-d chunk grids split into blocks, with small chunks so chunk and block
boundaries, padding and the uncompressed tail are crossed all the time.
``a[key]`` is orthogonal (checked against a one-axis-at-a-time reference, and
against numpy itself wherever the two agree); ``a.vindex[key]`` and N-d masks
are numpy's advanced indexing, checked against numpy directly.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import keys, numpy_keys, reference

import carray as ca

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
WHERE = ["memory", "disk", "bcolz", "b2nd"]  # disk: the default (superchunk) layout


class Store:
    """Makes carrays in memory or in a throwaway directory, and reopens them."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._tmp = tempfile.TemporaryDirectory() if where != "memory" else None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def make(self, data: np.ndarray, grid: dict) -> ca.carray:
        if self._tmp is None:
            return ca.carray(data, **grid)
        name = "a.b2nd" if self.where == "b2nd" else "a"
        fmt = {"bcolz": "bcolz", "b2nd": "b2nd"}.get(self.where, "superchunk")
        return ca.carray(data, rootdir=f"{self._tmp.name}/{name}", mode="w", format=fmt, **grid)

    def reopen(self, a: ca.carray) -> ca.carray:
        if self._tmp is None:
            return a
        a.flush()
        return ca.open(a.rootdir, mode="r")


@st.composite
def arrays(draw, where: str, max_rows: int = 25, ndim: int | None = None):
    """(data, grid keywords): rows chunks for bcolz, rows or N-d chunks + blocks elsewhere."""
    nd = ndim or draw(st.integers(1, 3))
    shape = (draw(st.integers(0, max_rows)),
             *(draw(st.integers(0 if where != "b2nd" else 1, 6)) for _ in range(nd - 1)))
    data = (np.arange(int(np.prod(shape)), dtype="i8").reshape(shape) * 3 - 7)
    rows = where == "bcolz" or (where != "b2nd" and draw(st.booleans()))
    if rows:
        return data, {"chunklen": draw(st.integers(1, 9))}
    chunks = tuple(draw(st.integers(1, max(n, 1) + 2)) for n in shape)
    blocks = tuple(draw(st.integers(1, c)) for c in chunks)
    return data, {"chunks": chunks, "blocks": blocks}


def _numpy_or_error(fn):
    try:
        return fn(), None
    except (IndexError, ValueError, TypeError) as exc:
        return None, type(exc)


def _numpy_agrees(key, ints) -> bool:
    """numpy's own meaning is the orthogonal one: at most one index array, no ints beside it."""
    arrays = sum(isinstance(k, (list, np.ndarray)) for k in key)
    return arrays == 0 or (arrays == 1 and not ints)


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(st.data())
def test_getitem_matches_reference(where, data):
    arr, grid = data.draw(arrays(where))
    key, wants, ints = data.draw(keys(arr.shape))
    expected = reference(arr, wants, ints, key)
    with Store(where) as store:
        a = store.reopen(store.make(arr, grid))
        got = a[key]
        assert np.shape(got) == expected.shape
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(a.oindex[key], expected)
        if _numpy_agrees(key, ints):
            np.testing.assert_array_equal(got, arr[key])


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(st.data())
def test_vindex_matches_numpy(where, data):
    arr, grid = data.draw(arrays(where))
    key = data.draw(numpy_keys(arr.shape))
    expected, error = _numpy_or_error(lambda: arr[key])
    with Store(where) as store:
        a = store.reopen(store.make(arr, grid))
        if error is not None:
            with pytest.raises(error):
                a.vindex[key]
            return
        got = a.vindex[key]
        assert np.shape(got) == np.shape(expected)
        np.testing.assert_array_equal(got, expected)
        if any(isinstance(k, np.ndarray) and k.dtype == bool and k.ndim > 1 for k in key):
            np.testing.assert_array_equal(a[key], expected)  # N-d masks keep numpy's meaning


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(st.data(), st.booleans())
def test_setitem_matches_reference(where, data, scalar):
    arr, grid = data.draw(arrays(where))
    key, wants, ints = data.draw(keys(arr.shape))
    # Values derived from the target item, so repeated indices agree.
    src = arr * 10 + 5000
    value = -1 if scalar else reference(src, wants, ints, key)
    expected = arr.copy()
    expected[np.ix_(*wants)] = -1 if scalar else src[np.ix_(*wants)]
    with Store(where) as store:
        a = store.make(arr, grid)
        a[key] = value
        np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(store.reopen(a)[:], expected)


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(st.data())
def test_vindex_setitem_matches_numpy(where, data):
    arr, grid = data.draw(arrays(where))
    key = data.draw(numpy_keys(arr.shape))
    src = arr * 10 + 5000
    value, error = _numpy_or_error(lambda: src[key])
    if error is not None:
        return
    expected = arr.copy()
    expected[key] = value
    with Store(where) as store:
        a = store.make(arr, grid)
        a.vindex[key] = value
        np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(store.reopen(a)[:], expected)


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(st.data(), st.lists(st.integers(0, 13), max_size=10), st.booleans())
def test_appends_match_numpy(where, data, sizes, single):
    empty, grid = data.draw(arrays(where, max_rows=0))
    atom = empty.shape[1:]
    pieces, start = [], 0
    for size in sizes:
        n = size * int(np.prod(atom))
        pieces.append(np.arange(start, start + n).reshape((size, *atom)))
        start += n
    expected = np.concatenate(pieces) if pieces else empty
    with Store(where) as store:
        a = store.make(empty, grid)
        for piece in pieces:
            if single:
                for row in piece:
                    a.append(row)
            else:
                a.append(piece)
        assert a.shape == expected.shape
        c0 = a.chunks[0]
        assert a.leftover == len(expected) % c0
        assert a.nchunks == len(expected) // c0 * int(np.prod(
            [-(-n // c) for n, c in zip(atom, a.chunks[1:], strict=True)]))
        np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(store.reopen(a)[:], expected)


def _resized(expected: np.ndarray, shape: tuple[int, ...], dflt) -> np.ndarray:
    out = np.full(shape, dflt, dtype=expected.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(expected.shape, shape, strict=True))
    out[common] = expected[common]
    return out


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(st.data(), st.lists(st.tuples(st.sampled_from(["resize", "reshape", "trim", "append",
                                                       "write"]),
                                     st.integers(0, 30)), max_size=6))
def test_resize_trim_append_sequences(where, data, ops):
    arr, grid = data.draw(arrays(where))
    expected = arr.copy()
    with Store(where) as store:
        a = store.make(arr, grid)
        for op, n in ops:
            if op == "resize":
                a.resize(n)
                expected = _resized(expected, (n, *expected.shape[1:]), a.dflt)
            elif op == "reshape" and where != "bcolz" and expected.ndim > 1:
                shape = (n, *(data.draw(st.integers(1 if where == "b2nd" else 0, 7))
                              for _ in expected.shape[1:]))
                a.resize(shape)
                expected = _resized(expected, shape, a.dflt)
            elif op == "trim":
                n = min(n, len(expected))
                a.trim(n)
                expected = expected[:len(expected) - n]
            elif op == "append":
                piece = np.arange(n * int(np.prod(expected.shape[1:]))).reshape(
                    (n, *expected.shape[1:])) + 500
                a.append(piece)
                expected = np.concatenate([expected, piece])
            elif op == "write" and expected.size:
                i = n % len(expected)
                a[i] = -n
                expected[i] = -n
            assert a.shape == expected.shape
            np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(store.reopen(a)[:], expected)


def test_toplevel_iterblocks_covers_the_range():
    a = ca.carray(np.arange(100), chunklen=7)
    blocks = list(ca.iterblocks(a, blen=30, start=5, stop=95))
    assert [len(b) for b in blocks] == [30, 30, 30]
    np.testing.assert_array_equal(np.concatenate(blocks), np.arange(5, 95))


@pytest.mark.parametrize("where", ["memory", "disk", "bcolz"])
@SETTINGS
@given(n=st.integers(0, 60), chunklen=st.integers(1, 9), skip=st.integers(0, 70),
       limit=st.none() | st.integers(0, 70), step=st.integers(1, 4))
def test_iterators_skip_and_limit_match_numpy(where, n, chunklen, skip, limit, step):
    data = np.arange(n) * 2 - 5
    mask = data % 3 == 0
    stop = None if limit is None else skip + limit
    with Store(where) as store:
        a = store.reopen(store.make(data, {"chunklen": chunklen}))
        assert list(a.iter(1, None, step, limit=limit, skip=skip)) == \
            data[1::step][skip:stop].tolist()
        assert list(a.where(mask, limit=limit, skip=skip)) == data[mask][skip:stop].tolist()
        flags = store.make(mask, {"chunklen": chunklen}) if where == "memory" else \
            ca.carray(mask, chunklen=chunklen)
        assert list(flags.wheretrue(limit=limit, skip=skip)) == \
            np.flatnonzero(mask)[skip:stop].tolist()
