"""numpy's protocols on carrays: ufunc calls and reductions, array functions, fallback."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca


def test_ufunc_out_and_reduce_methods():
    x = np.arange(12.).reshape(3, 4)
    a = ca.carray(x, chunks=(2, 2))
    out = np.empty_like(x)
    assert np.multiply(a, 2, out=out) is out
    np.testing.assert_array_equal(out, x * 2)
    np.testing.assert_array_equal(np.add.reduce(a), np.add.reduce(x))
    np.testing.assert_array_equal(np.maximum.reduce(a, axis=1), x.max(axis=1))
    assert np.shape(a) == (3, 4) and np.ndim(a) == 2 and np.size(a) == 12
    assert hash(a) == hash(a)  # operators did not make carrays unhashable
    np.testing.assert_array_equal(np.clip(a, 2, 5), np.clip(x, 2, 5))  # small: numpy's


def test_large_unimplemented_function_raises(monkeypatch):
    from carray.compute import protocols

    monkeypatch.setattr(protocols, "FALLBACK_BYTES", 64)
    a = ca.carray(np.zeros(100))
    with pytest.raises(TypeError, match="FALLBACK_BYTES"):
        np.sort(a)
    assert np.sum(a) == 0  # implemented functions are unaffected


def test_operators_on_both_sides_and_numpy_on_the_left():
    x = np.arange(6.).reshape(2, 3)
    a = ca.carray(x, chunks=(1, 2))
    np.testing.assert_array_equal(np.asarray(x + a), x + x)
    np.testing.assert_array_equal(np.asarray(1 - a), 1 - x)
    np.testing.assert_array_equal(np.asarray(np.where(x > 2, a, -a)), np.where(x > 2, x, -x))
    assert isinstance(a == 1, ca.compute.LazyExpr)
    assert a in [a]  # identity first, as for numpy arrays
