"""Every indexing path, set path, append and resize compared against numpy.

Each property runs in memory and on disk (a fresh directory per example, and the
result is read back after reopening), with small chunk lengths so chunk
boundaries and the uncompressed tail are crossed all the time.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import carray as ca

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
WHERE = ["memory", "disk", "bcolz"]  # disk: the default (superchunk) layout


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

    def make(self, data: np.ndarray, chunklen: int) -> ca.carray:
        root = None if self._tmp is None else f"{self._tmp.name}/a"
        fmt = "bcolz" if self.where == "bcolz" else "superchunk"
        return ca.carray(data, chunklen=chunklen, rootdir=root, mode="w", format=fmt)

    def reopen(self, a: ca.carray) -> ca.carray:
        if self._tmp is None:
            return a
        a.flush()
        return ca.open(a.rootdir, mode="r")


chunklens = st.integers(1, 9)
rows = st.integers(0, 40)


@st.composite
def arrays(draw, max_rows=40, atom=None):
    n = draw(st.integers(0, max_rows))
    atomshape = draw(st.sampled_from([(), (2,), (3, 2)])) if atom is None else atom
    data = np.arange(n * int(np.prod(atomshape)), dtype="i8").reshape((n, *atomshape))
    return data * 3 - 7


def _index_1d(n: int):
    ints = st.integers(-n, n - 1) if n else st.nothing()
    bounds = st.none() | st.integers(-n - 3, n + 3)
    steps = st.none() | st.integers(-5, 5).filter(lambda s: s != 0)
    slices = st.builds(slice, bounds, bounds, steps)
    lists = st.lists(st.integers(-n, n - 1), max_size=12) if n else st.just([])
    masks = hnp.arrays(bool, n)
    return ints | slices | lists.map(np.array) | masks


@st.composite
def keys(draw, shape):
    n = shape[0]
    k0 = draw(_index_1d(n))
    rest = []
    for dim in shape[1:]:
        kind = draw(st.sampled_from(["none", "slice", "int", "array"]))
        if kind == "none":
            break
        if kind == "slice":
            rest.append(slice(draw(st.none() | st.integers(-dim, dim)), None,
                              draw(st.sampled_from([None, 1, 2, -1]))))
        elif kind == "int":
            rest.append(draw(st.integers(-dim, dim - 1)))
        else:
            rest.append(np.array(draw(st.lists(st.integers(-dim, dim - 1), min_size=1,
                                               max_size=3))))
    key = (k0, *rest)
    form = draw(st.sampled_from(["tuple", "ellipsis", "newaxis", "bare"]))
    if form == "bare" and not rest:
        return k0
    if form == "ellipsis":
        return (*key, Ellipsis)
    if form == "newaxis":
        return (None, *key)
    return key


def _numpy_or_error(fn):
    try:
        return fn(), None
    except (IndexError, ValueError) as exc:
        return None, type(exc)


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(data=arrays(), chunklen=chunklens, key_data=st.data())
def test_getitem_matches_numpy(where, data, chunklen, key_data):
    key = key_data.draw(keys(data.shape))
    expected, error = _numpy_or_error(lambda: data[key])
    with Store(where) as store:
        a = store.reopen(store.make(data, chunklen))
        if error is not None:
            with pytest.raises(error):
                a[key]
            return
        got = a[key]
        assert np.shape(got) == np.shape(expected)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(data=arrays(), chunklen=chunklens, key_data=st.data(), scalar=st.booleans())
def test_setitem_matches_numpy(where, data, chunklen, key_data, scalar):
    key = key_data.draw(keys(data.shape))
    expected = data.copy()
    probe, error = _numpy_or_error(lambda: expected[key])
    if error is not None:
        return
    value = -1 if scalar else np.arange(np.size(probe), dtype="i8").reshape(np.shape(probe)) + 1000
    expected[key] = value
    with Store(where) as store:
        a = store.make(data, chunklen)
        a[key] = value
        np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(store.reopen(a)[:], expected)


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(chunklen=chunklens, sizes=st.lists(st.integers(0, 13), max_size=12),
       atom=st.sampled_from([(), (2,)]), single=st.booleans())
def test_appends_match_numpy(where, chunklen, sizes, atom, single):
    pieces, start = [], 0
    for size in sizes:
        pieces.append(np.arange(start, start + size * int(np.prod(atom))).reshape((size, *atom)))
        start += size * int(np.prod(atom))
    expected = np.concatenate(pieces) if pieces else np.empty((0, *atom), dtype=np.int64)
    with Store(where) as store:
        a = store.make(np.empty((0, *atom), dtype=np.int64), chunklen)
        for piece in pieces:
            if single:
                for row in piece:
                    a.append(row)
            else:
                a.append(piece)
        assert len(a) == len(expected)
        assert a.nchunks == len(expected) // chunklen
        assert a.leftover == len(expected) % chunklen
        np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(store.reopen(a)[:], expected)


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(data=arrays(atom=()), chunklen=chunklens,
       ops=st.lists(st.tuples(st.sampled_from(["resize", "trim", "append"]),
                              st.integers(0, 30)), max_size=6))
def test_resize_trim_append_sequences(where, data, chunklen, ops):
    expected = data.copy()
    with Store(where) as store:
        a = store.make(data, chunklen)
        a_dflt = a.dflt
        for op, n in ops:
            if op == "resize":
                a.resize(n)
                grown = np.full(max(0, n - len(expected)), a_dflt, dtype=expected.dtype)
                expected = np.concatenate([expected[:n], grown])
            elif op == "trim":
                n = min(n, len(expected))
                a.trim(n)
                expected = expected[:len(expected) - n]
            else:
                piece = np.arange(n) + 500
                a.append(piece)
                expected = np.concatenate([expected, piece])
            np.testing.assert_array_equal(a[:], expected)
        np.testing.assert_array_equal(store.reopen(a)[:], expected)


def test_toplevel_iterblocks_covers_the_range():
    a = ca.carray(np.arange(100), chunklen=7)
    blocks = list(ca.iterblocks(a, blen=30, start=5, stop=95))
    assert [len(b) for b in blocks] == [30, 30, 30]
    np.testing.assert_array_equal(np.concatenate(blocks), np.arange(5, 95))


@pytest.mark.parametrize("where", WHERE)
@SETTINGS
@given(n=st.integers(0, 60), chunklen=chunklens, skip=st.integers(0, 70),
       limit=st.none() | st.integers(0, 70), step=st.integers(1, 4))
def test_iterators_skip_and_limit_match_numpy(where, n, chunklen, skip, limit, step):
    data = np.arange(n) * 2 - 5
    mask = data % 3 == 0
    stop = None if limit is None else skip + limit
    with Store(where) as store:
        a = store.reopen(store.make(data, chunklen))
        assert list(a.iter(1, None, step, limit=limit, skip=skip)) == \
            data[1::step][skip:stop].tolist()
        assert list(a.where(mask, limit=limit, skip=skip)) == data[mask][skip:stop].tolist()
        flags = store.make(mask, chunklen) if where == "memory" else ca.carray(mask,
                                                                               chunklen=chunklen)
        assert list(flags.wheretrue(limit=limit, skip=skip)) == \
            np.flatnonzero(mask)[skip:stop].tolist()
