"""String expressions over N-d carrays (carray.eval) built as lazy expressions."""

from __future__ import annotations

import ast

import numpy as np
import pytest

import carray as ca
from carray.compute.strings import expression, wants_lazy
from carray.errors import BroadcastError, ExpressionError


def test_string_expressions_on_nd_arrays():
    x = np.arange(24.).reshape(2, 3, 4)
    a = ca.carray(x, chunks=(1, 2, 2))
    y = np.arange(4.)
    out = ca.eval("a * y + 1 > 5", user_dict={"a": a, "y": y})
    np.testing.assert_array_equal(out[:], x * y + 1 > 5)
    np.testing.assert_allclose(ca.eval("where(a < 10, sin(a), -a)", out_flavor="numpy",
                                       user_dict={"a": a}),
                               np.where(x < 10, np.sin(x), -x))
    with pytest.raises(ca.errors.ExpressionError):
        ca.eval("a * nothing_here")


def test_one_dimensional_operands_keep_the_block_evaluator():
    a = ca.carray(np.arange(10.))
    assert not wants_lazy(["a"], {"a": a})
    assert wants_lazy(["a", "e"], {"a": a, "e": a + 1})
    out = ca.eval("a * 2", user_dict={"a": a})
    np.testing.assert_array_equal(out[:], np.arange(10.) * 2)


def test_expression_from_a_tree():
    a = ca.carray(np.arange(12.).reshape(3, 4))
    tree = ast.parse("-a + abs(b) ** 2 < 3", mode="eval")
    got = expression(tree, {"a": a, "b": np.arange(4.)})
    x = np.arange(12.).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(got), -x + np.abs(np.arange(4.)) ** 2 < 3)
    assert expression(ast.parse("2 * 3", mode="eval"), {}) == 6
    with pytest.raises(ExpressionError):
        expression(ast.parse("a.b", mode="eval"), {"a": a})
    with pytest.raises(BroadcastError):
        ca.eval("a + b", user_dict={"a": a, "b": np.zeros(5)})
