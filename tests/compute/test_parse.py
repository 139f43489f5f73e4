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


def test_thousands_of_alternatives_evaluate():
    import time

    import numpy as np

    import carray as ca

    t = ca.ctable({"x": np.arange(20_000)})
    t.create_index("x")
    for joiner, n in ((" or ", 5000), (" | ", 2000), (" and ", 5000)):
        text = joiner.join(f"(x == {i})" for i in range(n))
        expr = Expression.parse(text)
        depth, stack = 0, [(expr.tree, 1)]
        while stack:
            node, d = stack.pop()
            depth = max(depth, d)
            stack += [(c, d + 1) for c in ast.iter_child_nodes(node)]
        assert depth < 40  # a balanced tree, not a chain as deep as it is long
        start = time.perf_counter()
        got = t.fetchwhere(text)["x"].tolist()
        assert got == (list(range(n)) if joiner != " and " else [])
        assert time.perf_counter() - start < 30
    assert "x" in t.explain(" or ".join(f"(x == {i})" for i in range(5000)))


@pytest.mark.parametrize("text", [" | ".join(f"(x == {i})" for i in range(5000)),
                                  " + ".join(["x"] * 500) + " > 0"])
def test_expressions_too_deep_are_refused_quickly(text):
    import time

    start = time.perf_counter()
    with pytest.raises(ExpressionError, match="deep"):
        Expression.parse(text)
    assert time.perf_counter() - start < 2
