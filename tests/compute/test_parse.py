"""The one expression parser (carray.compute.parse): normalisation and what it refuses."""

from __future__ import annotations

import ast

import pytest

from carray.compute.parse import Expression, literal
from carray.errors import ExpressionError


@pytest.mark.parametrize("text, normalised", [
    ("a and b or not c", "a & b | ~c"),
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
