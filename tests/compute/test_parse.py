"""The one expression parser (carray.compute.parse): normalisation and what it refuses."""

from __future__ import annotations

import ast

import pytest

from carray.compute.parse import Expression, Reduction, literal
from carray.errors import ExpressionError


@pytest.mark.parametrize("text, normalised", [
    ("a and b or not c", "a & b | ~c"),
    ("np.sin(x) + numpy.log(y) * da.exp(z)", "sin(x) + log(y) * exp(z)"),
    ("0 < x <= 3 < y", "(0 < x) & (x <= 3) & (3 < y)"),
    ("x in [1, -2] and y not in ('a', b'b')", "(x in [1, -2]) & (y not in ('a', b'b'))"),
    ("day >= '2013-06-01'", "day >= '2013-06-01'"),
])
def test_normalised_text(text, normalised):
    assert Expression.parse(text).numexpr_text == normalised


def test_names_exclude_function_names_unless_used_as_values():
    assert Expression.parse("contains(s, 'a') & (x in [1])").names == ("s", "x")
    assert Expression.parse("sin(sin)").names == ("sin",)
    assert Expression.parse("isnan(x)").calls_functions


@pytest.mark.parametrize("text, message", [
    ("x in y", "literal list"),
    ("x in [y, 1]", "only literals"),
    ("[1, 2] == x", "only after 'in'"),
    ("x is None", "unsupported comparison"),
    ("x.real", "not allowed"),
    ("x[0]", "not allowed"),
    ("open('f')", "unknown function"),
    ("np.open('f')", "unknown function"),
    ("pd.sin(x)", "unknown function"),
    ("sum(x) + 1", "unknown function"),
    ("where(x, y, z=1)", "unknown function"),
    ("lambda: 1", "not allowed"),
    ("", "expected an expression"),
    ("x <", "cannot parse"),
])
def test_refused(text, message):
    with pytest.raises(ExpressionError, match=message):
        Expression.parse(text)


def test_literal():
    assert literal(ast.parse("-3", mode="eval").body) == (True, -3)
    assert literal(ast.parse("b'x'", mode="eval").body) == (True, b"x")
    assert literal(ast.parse("-'x'", mode="eval").body) == (False, None)
    assert literal(ast.parse("y", mode="eval").body) == (False, None)


@pytest.mark.parametrize("text, op, inner, axis", [
    ("sum(x * y)", "sum", "x * y", None),
    ("np.sum(x, axis=1)", "sum", "x", 1),
    ("da.prod(x + 1, 0)", "prod", "x + 1", 0),
    ("prod(x, axis=-1)", "prod", "x", -1),
])
def test_an_expression_may_end_with_a_reduction(text, op, inner, axis):
    got = Reduction.parse(text)
    assert (got.op, got.inner.numexpr_text, got.axis) == (op, inner, axis)


@pytest.mark.parametrize("text", ["x * y", "sin(x)", "max(x)", "x.sum()", "sum(", ""])
def test_no_reduction(text):
    assert Reduction.parse(text) is None


@pytest.mark.parametrize("text, message", [
    ("sum(x, axis=1.5)", "integer"),
    ("sum(x, axis=True)", "integer"),
    ("sum(x, keepdims=True)", "an expression and an axis"),
    ("sum()", "an expression and an axis"),
    ("sum(x, 0, 1)", "an expression and an axis"),
    ("sum(x.real)", "not allowed"),
])
def test_bad_reductions_are_refused(text, message):
    with pytest.raises(ExpressionError, match=message):
        Reduction.parse(text)
