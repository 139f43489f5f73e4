"""Lazy expressions against numpy: values, keys, compute(), errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from compute_helpers import stored
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import keys, reference

import carray as ca
from carray.compute import ComputeMixin, LazyExpr
from carray.errors import BroadcastError, UnsupportedDTypeError

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

_BINARY = [np.add, np.subtract, np.multiply, np.true_divide, np.maximum, np.less,
           np.greater_equal, np.equal]
_UNARY = [np.negative, np.sin, np.sqrt, np.absolute, np.exp]


@st.composite
def operands(draw):
    """(shape, chunks, values of a carray, a broadcastable numpy array, a scalar)."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, n + 1)) for n in shape)
    floats = st.floats(-10, 10, allow_nan=False)
    x = draw(hnp.arrays(np.float64, shape, elements=floats))
    yshape = tuple(1 if draw(st.booleans()) else n for n in shape)[draw(st.integers(0, ndim)):]
    y = draw(hnp.arrays(np.float64, yshape, elements=floats))
    return shape, chunks, x, y, draw(floats)


def both(f, lazy_args, np_args):
    """``f`` on the lazy and the numpy operands; where numpy refuses the dtypes the lazy
    side must refuse them too (typed), and the first operands are used instead."""
    try:
        want = f(*np_args)
    except TypeError:
        lazy = any(isinstance(x, ComputeMixin) for x in lazy_args)
        with pytest.raises(UnsupportedDTypeError if lazy else TypeError):
            f(*lazy_args)
        return lazy_args[0], np_args[0]
    return f(*lazy_args), want


def build(draw, lazy_leaves, np_leaves, depth=0):
    """The same random expression tree twice: over the lazy leaves and the numpy ones."""
    if depth > 2 or draw(st.integers(0, 3)) == 0:
        i = draw(st.integers(0, len(lazy_leaves) - 1))
        return lazy_leaves[i], np_leaves[i]
    kind = draw(st.sampled_from(["binary", "unary", "where", "operator"]))
    la, na = build(draw, lazy_leaves, np_leaves, depth + 1)
    if kind == "unary":
        return both(draw(st.sampled_from(_UNARY)), (la,), (na,))
    lb, nb = build(draw, lazy_leaves, np_leaves, depth + 1)
    if kind == "binary":
        return both(draw(st.sampled_from(_BINARY)), (la, lb), (na, nb))
    if kind == "operator":
        op = draw(st.sampled_from(["+", "-", "*", "<", "&"]))
        if op == "&":
            return (la > 0) & (lb < 1), (na > 0) & (nb < 1)
        f = {"+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q,
             "<": lambda p, q: p < q}[op]
        return both(f, (la, lb), (na, nb))
    return np.where(la > lb, la, lb), np.where(na > nb, na, nb)


@SETTINGS
@given(ops=operands(), data=st.data(), disk=st.booleans())
def test_expressions_match_numpy(ops, data, disk):
    shape, chunks, x, y, s = ops
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        with stored(x, chunks, disk) as a:
            lazy, want = build(data.draw, [a, y, s, a], [x, y, s, x])
            if not isinstance(lazy, LazyExpr):
                lazy, want = a + lazy, x + want
            assert lazy.shape == want.shape and lazy.dtype == want.dtype
            assert lazy.ndim == want.ndim
            np.testing.assert_allclose(np.asarray(lazy), want, rtol=1e-12, equal_nan=True)
            key, wants, ints = data.draw(keys(shape))
            np.testing.assert_allclose(lazy[key], reference(want, wants, ints, key),
                                       rtol=1e-12, equal_nan=True)
            out = lazy.compute()
            np.testing.assert_allclose(out[:], want, rtol=1e-12, equal_nan=True)
            if want.dtype.kind in "fc":
                tol = 1e-2 if want.dtype == np.float16 else 1e-9  # sqrt(bool) is float16
                np.testing.assert_allclose(lazy.sum(axis=0), want.sum(axis=0), rtol=tol,
                                           atol=tol, equal_nan=True)
            else:
                np.testing.assert_array_equal(lazy.sum(axis=0), want.sum(axis=0))


def test_integer_and_bool_dtypes_follow_numpy():
    x = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    a = ca.carray(x, chunks=(2, 3))
    for lazy, want in [(a + 1, x + 1), (a * np.int16(3), x * np.int16(3)), (a // 3, x // 3),
                       (a % 4, x % 4), (a ** 2, x ** 2), (a / 2, x / 2), (~a, ~x),
                       (a << 1, x << 1), (-a, -x), (abs(a), abs(x)), (a != 0, x != 0),
                       ((a > 0) | (a < -3), (x > 0) | (x < -3)), (a ^ 5, x ^ 5),
                       (2 - a, 2 - x), (np.float32(1.5) * a, np.float32(1.5) * x)]:
        assert lazy.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(lazy), want)


def test_compute_on_disk_keeps_chunks(tmp_path):
    x = np.random.default_rng(0).random((20, 9, 7))
    a = ca.carray(x, chunks=(6, 4, 7), rootdir=tmp_path / "a")
    b = ca.carray(x[::-1].copy(), chunks=(6, 4, 7), rootdir=tmp_path / "b")
    out = (a * b + 1).compute(rootdir=tmp_path / "c")
    assert out.chunks == (6, 4, 7)
    np.testing.assert_allclose(ca.open(tmp_path / "c", mode="r")[:], x * x[::-1] + 1)
    row = (a[:] * 2)  # a numpy result stays numpy
    assert isinstance(row, np.ndarray)


def test_key_reads_only_touched_chunks(tmp_path, count_reads):
    x = np.arange(400_000, dtype=np.float64)
    a = ca.carray(x, chunks=(10_000,), rootdir=tmp_path / "a")
    a.flush()
    a = ca.open(tmp_path / "a", mode="r")
    count_reads["bytes"] = 0
    np.testing.assert_array_equal((a * 2 + 1)[12_345:12_350], x[12_345:12_350] * 2 + 1)
    assert count_reads["bytes"] < 2 * 80_000  # one chunk at most, not 40


def test_errors_are_typed():
    a = ca.carray(np.zeros((3, 4)))
    with pytest.raises(BroadcastError):
        a + np.zeros(5)
    with pytest.raises(BroadcastError):
        np.where(a > 0, a, np.zeros((2, 4)))
    with pytest.raises(UnsupportedDTypeError):
        a + np.array(["x"])
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a > 0)
    assert bool((a > 0)[0, 0]) is False
