"""One operator and function table: every operator and function against numpy, on table
columns, 1-d and N-d carrays and through dask; literals (lists, bytes, dates)."""

from __future__ import annotations

import ast
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.compute import ops
from carray.compute.parse import Expression
from carray.errors import ExpressionError

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# (expression, what numpy says) over the columns of ``columns``.
CASES = [
    ("a + b", lambda c: c["a"] + c["b"]), ("a - f", lambda c: c["a"] - c["f"]),
    ("a * 3", lambda c: c["a"] * 3), ("f / g", lambda c: c["f"] / c["g"]),
    ("a / b", lambda c: c["a"] / c["b"]), ("a // b", lambda c: c["a"] // c["b"]),
    ("a % b", lambda c: c["a"] % c["b"]), ("f % 1.5", lambda c: c["f"] % 1.5),
    ("f // 0.7", lambda c: c["f"] // 0.7), ("g ** 2", lambda c: c["g"] ** 2),
    ("a ** 2", lambda c: c["a"] ** 2), ("-f", lambda c: -c["f"]), ("+a", lambda c: c["a"]),
    ("a & b", lambda c: c["a"] & c["b"]), ("a | 6", lambda c: c["a"] | 6),
    ("a ^ b", lambda c: c["a"] ^ c["b"]), ("~a", lambda c: ~c["a"]),
    ("a << 2", lambda c: c["a"] << 2), ("a >> 1", lambda c: c["a"] >> 1),
    ("p & q", lambda c: c["p"] & c["q"]), ("p | q", lambda c: c["p"] | c["q"]),
    ("p ^ q", lambda c: c["p"] ^ c["q"]), ("~p", lambda c: ~c["p"]),
    ("p and not q", lambda c: c["p"] & ~c["q"]), ("p or q", lambda c: c["p"] | c["q"]),
    ("a < b", lambda c: c["a"] < c["b"]), ("f <= g", lambda c: c["f"] <= c["g"]),
    ("f > 0.5", lambda c: c["f"] > 0.5), ("a >= 2", lambda c: c["a"] >= 2),
    ("f == f", lambda c: c["f"] == c["f"]), ("f != g", lambda c: c["f"] != c["g"]),
    ("-1 < a <= 3", lambda c: (-1 < c["a"]) & (c["a"] <= 3)),
    ("(a & 1) == 0", lambda c: (c["a"] & 1) == 0),
    ("a in [1, -2, 3]", lambda c: np.isin(c["a"], [1, -2, 3])),
    ("a not in (0, 1)", lambda c: ~np.isin(c["a"], [0, 1])),
    ("f in [0.5, -1.5]", lambda c: np.isin(c["f"], [0.5, -1.5])),
    ("s == 'ab'", lambda c: c["s"] == "ab"), ("s < 'b'", lambda c: c["s"] < "b"),
    ("s in ['a', 'bc']", lambda c: np.isin(c["s"], ["a", "bc"])),
    ("contains(s, 'b')", lambda c: np.strings.find(c["s"], "b") >= 0),
    ("startswith(s, 'a')", lambda c: np.strings.startswith(c["s"], "a")),
    ("endswith(s, 'c')", lambda c: np.strings.endswith(c["s"], "c")),
    ("where(p, a, b)", lambda c: np.where(c["p"], c["a"], c["b"])),
    ("where(f > 0, f, g)", lambda c: np.where(c["f"] > 0, c["f"], c["g"])),
    ("abs(a)", lambda c: np.abs(c["a"])), ("abs(f)", lambda c: np.abs(c["f"])),
    ("isnan(f)", lambda c: np.isnan(c["f"])), ("isfinite(f)", lambda c: np.isfinite(c["f"])),
    ("isinf(f)", lambda c: np.isinf(c["f"])),
    ("minimum(f, g)", lambda c: np.minimum(c["f"], c["g"])),
    ("maximum(a, b)", lambda c: np.maximum(c["a"], c["b"])),
    ("arctan2(f, g)", lambda c: np.arctan2(c["f"], c["g"])),
    ("floor(f) + ceil(g)", lambda c: np.floor(c["f"]) + np.ceil(c["g"])),
    ("real(f) + imag(g) + conj(f)", lambda c: c["f"] + 0 + c["f"]),
] + [(f"{name}(g)", lambda c, fn=fn: fn(c["g"]))
     for name, fn in ops.FUNCTIONS.items()
     if name in ("sqrt", "exp", "expm1", "log", "log10", "log1p", "sin", "cos", "tan",
                 "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
                 "arccosh", "arctanh")]


def columns(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = rng.choice([-1.5, 0.0, 0.5, 2.25, np.nan, np.inf, -np.inf], n)
    b = rng.integers(-4, 5, n)
    b[b == 0] = 1  # numpy's integer // and % by zero warn and give 0; numexpr's may crash
    return {"a": rng.integers(-4, 5, n), "b": b, "f": f, "g": rng.random(n) * 0.9 + 0.05,
            "p": rng.random(n) < 0.5, "q": rng.random(n) < 0.5,
            "s": rng.choice(["a", "ab", "bc", "abc", ""], n)}


def same(got, want, text):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, text
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True, err_msg=text)
    else:
        np.testing.assert_array_equal(got, want, err_msg=text)


def inputs(text: str, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in cols.items() if k in Expression.parse(text).names}


# Every case, a few data each: the cases, not the data, are what varies most.
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@settings(SETTINGS, max_examples=5)
@given(n=st.integers(1, 40), seed=st.integers(0, 99))
def test_every_operator_and_function_is_numpy_s_everywhere(case, n, seed):
    text, numpy_says = case
    cols = columns(n, seed)
    used = inputs(text, cols)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        want = numpy_says(cols)
        t = ca.ctable(used, chunklen=8)
        for vm in ("python", "numexpr"):
            same(t.eval(text, vm=vm, out_flavor="numpy"), want, f"table {vm}: {text}")
        one_d = {k: ca.carray(v, chunklen=8) for k, v in used.items() if v.dtype.kind != "U"}
        if len(one_d) == len(used):
            same(ca.eval(text, user_dict=one_d, out_flavor="numpy"), want, f"1-d: {text}")
        if n % 2 == 0 and len(one_d) == len(used):  # the N-d path: (2, n/2) carrays build a lazy expression
            nd = {k: ca.carray(v.reshape(2, -1), chunks=(1, 4)) for k, v in used.items()}
            same(np.ravel(ca.eval(text, user_dict=nd, out_flavor="numpy")), want,
                 f"N-d: {text}")


def test_bitwise_and_on_integers_is_bitwise_on_both_paths():
    x = np.arange(12)
    want = x & 5
    np.testing.assert_array_equal(ca.ctable({"x": x}).eval("x & 5", out_flavor="numpy"), want)
    lazy = ca.eval("x & 5", user_dict={"x": ca.carray(x.reshape(3, 4))}, out_flavor="numpy")
    np.testing.assert_array_equal(lazy.ravel(), want)
    np.testing.assert_array_equal(
        ca.eval("x and 5", user_dict={"x": x}, out_flavor="numpy"), want)


def test_numexpr_text_only_where_numexpr_is_numpy():
    i8, f8, b = np.dtype("i8"), np.dtype("f8"), np.dtype("?")
    text = ops.numexpr_text
    assert text(Expression.parse("(x < 1) & y").tree, {"x": f8, "y": b}) is not None
    assert text(Expression.parse("sin(x) + 1").tree, {"x": f8}) == "sin(x) + 1"
    for bad, dtypes in [("x ** y", {"x": i8, "y": i8}), ("abs(x)", {"x": i8}),
                        ("x % 2.5", {"x": f8}), ("x in [1, 2]", {"x": i8}),
                        ("x == 'a'", {"x": np.dtype("U1")}), ("x < 1", {"x": np.dtype("f4")}),
                        ("isnan(x)", {"x": f8}), ("x & 1.5", {"x": f8})]:
        assert text(Expression.parse(bad).tree, dtypes) is None, bad


# -- literals ---------------------------------------------------------------------------------


def flights(n=90):
    rng = np.random.default_rng(1)
    return {"day": np.datetime64("2013-05-20") + np.arange(n).astype("m8[D]"),
            "t": np.datetime64("2013-06-01T00:00") + (np.arange(n) * 37).astype("m8[m]"),
            "carrier": rng.choice(["UA", "AA", "DL", "B6"], n),
            "name": rng.choice([b"abc", b"xy", b"abd"], n), "dep": rng.random(n) * 100}


@pytest.mark.parametrize("expr, want", [
    ("day >= '2013-06-01'", lambda c: c["day"] >= np.datetime64("2013-06-01")),
    ("day > '2013-06-01T12:00'", lambda c: c["day"] > np.datetime64("2013-06-01T12:00")),
    ("'2013-06-03' == day", lambda c: c["day"] == np.datetime64("2013-06-03")),
    ("t > '2013-06-01T12:00'", lambda c: c["t"] > np.datetime64("2013-06-01T12:00")),
    ("day in ['2013-06-01', '2013-06-05']",
     lambda c: np.isin(c["day"], np.array(["2013-06-01", "2013-06-05"], "M8[D]"))),
    ("carrier in ['UA', 'AA']", lambda c: np.isin(c["carrier"], ["UA", "AA"])),
    ("carrier not in ['UA', 'AA'] and dep < 50",
     lambda c: ~np.isin(c["carrier"], ["UA", "AA"]) & (c["dep"] < 50)),
    ("name == b'abc'", lambda c: c["name"] == b"abc"),
    ("name != 'xy'", lambda c: c["name"] != b"xy"),
    ("name in [b'xy', b'abd']", lambda c: np.isin(c["name"], [b"xy", b"abd"])),
    ("contains(name, b'b')", lambda c: np.strings.find(c["name"], b"b") >= 0),
])
def test_literals_in_table_queries(expr, want):
    cols = flights()
    t = ca.ctable(cols, chunklen=16)
    mask = want(cols)
    np.testing.assert_array_equal(t.fetchwhere(expr, outcols=["dep"])["dep"],
                                  cols["dep"][mask], expr)
    names = Expression.parse(expr).names
    if all(cols[n].dtype.kind not in "US" for n in names):
        nd = {n: ca.carray(cols[n].reshape(9, 10), chunks=(3, 5)) for n in names}
        np.testing.assert_array_equal(ca.eval(expr, user_dict=nd, out_flavor="numpy"),
                                      mask.reshape(9, 10), expr)


def test_a_string_against_a_number_names_the_column():
    t = ca.ctable(flights(10))
    with pytest.raises(ExpressionError, match="'dep' is numeric"):
        t.fetchwhere("dep > '2013-06-01'")
    with pytest.raises(ExpressionError, match="'dep'"):
        t.fetchwhere("dep in ['a', 'b']")
    with pytest.raises(ExpressionError, match="not a date"):
        t.fetchwhere("day > 'yesterday'")
    with pytest.raises(ExpressionError, match="'x' is numeric"):
        ca.eval("x == 'a'", user_dict={"x": ca.carray(np.zeros((2, 2)))})


def test_coerce_keeps_a_finer_date_finer():
    day = np.dtype("M8[D]")
    assert ops.coerce("2013-06-01", day, "d").dtype == day
    noon = ops.coerce("2013-06-01T12:00", day, "d")
    assert noon == np.datetime64("2013-06-01T12:00") and noon.dtype != day
    assert ops.coerce("ab", np.dtype("S2"), "s") == b"ab"
    assert ops.coerce(3, np.dtype("i8"), "x") == 3


# -- vm="dask" ----------------------------------------------------------------------------------


def test_vm_dask_evaluates_through_dask(monkeypatch):
    pytest.importorskip("dask.array", reason="dask is the 'dask' extra (CI has it)")
    from carray.integrations import dask_read

    x = np.arange(24.0).reshape(4, 6)
    a = ca.carray(x, chunks=(2, 3))
    y = ca.carray(np.arange(24) % 5, chunks=(8,))
    read = []
    real = dask_read.to_dask
    monkeypatch.setattr(dask_read, "to_dask", lambda arr, *k: read.append(arr) or real(arr))
    out = ca.eval("where(a > 5, sin(a), -a) + 1", user_dict={"a": a}, vm="dask")
    assert isinstance(out, ca.carray) and len(read) == 1 and read[0] is a
    np.testing.assert_allclose(out[:], np.where(x > 5, np.sin(x), -x) + 1)
    got = ca.eval("(y & 3) + (y in [1, 4])", user_dict={"y": y}, vm="dask", out_flavor="numpy")
    want = (np.arange(24) % 5 & 3) + np.isin(np.arange(24) % 5, [1, 4])
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, want)
    assert ca.eval("2 * 3", vm="dask") == 6


def test_vm_dask_without_dask_says_so(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.startswith("dask"):
            raise ImportError("No module named 'dask'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(ImportError, match="vm='dask' needs dask"):
        ca.eval("a + 1", user_dict={"a": np.arange(3)}, vm="dask")


def test_walk_applies_through_the_callers_apply():
    calls = []

    def apply(func, *args):
        calls.append(getattr(func, "__name__", func))
        return func(*args)

    tree = Expression.parse("x in [1, 2] or -x > 1").tree
    got = ops.walk(tree, {"x": np.arange(4)}.__getitem__, apply)
    np.testing.assert_array_equal(got, [False, True, True, False])
    assert calls == ["isin", "negative", "greater", "bitwise_or"]
    with pytest.raises(ExpressionError):
        ops.walk(ast.parse("x[0]", mode="eval"), {"x": np.arange(2)}.__getitem__)
