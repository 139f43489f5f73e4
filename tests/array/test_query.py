"""Queries: where/whereblocks/fetchwhere/eval against numpy, and zone-map pruning."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.array.expression import Expression, evaluate_numpy
from carray.table import query as table_query

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@pytest.fixture(params=["memory", "disk"])
def where(request, tmp_path):
    return {} if request.param == "memory" else {"rootdir": str(tmp_path / "t")}


def data(n=2000, seed=0, sort=False):
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    if sort:
        x.sort()
    return {"id": np.arange(n), "x": x, "y": rng.random(n),
            "cat": rng.integers(0, 10, n).astype("i4"), "flag": rng.random(n) < 0.3}


def reopened(cols, where, **kw):
    t = ca.ctable(cols, chunklen=kw.pop("chunklen", 128), **where, **kw)
    if t.rootdir:
        t.close()
        t = ca.open(t.rootdir, mode="r")
    return t


EXPRESSIONS = [
    "(x < 0.1) & (y > 0.5)",
    "(x <= 0.3) | ~(cat != 3)",
    "0.2 < x < 0.4",
    "flag & (cat >= 7)",
    "~flag",
    "(x * 2 + y > 1.5) & (id % 3 == 0)",
    "x > 2",
    "where(cat > 4, x, y) < 0.2",
    "sin(x) > 0.5",
    "not (x < 0.5) and y < 0.5",
]


def numpy_eval(expr, cols):
    return np.asarray(evaluate_numpy(Expression.parse(expr).tree, cols))


@pytest.mark.parametrize("expr", EXPRESSIONS)
@pytest.mark.parametrize("vm", [None, "python", "numexpr"])
def test_fetchwhere_matches_numpy(where, expr, vm):
    cols = data(sort=True)
    t = reopened(cols, where)
    mask = numpy_eval(expr, cols)
    got = t.fetchwhere(expr, outcols=["id", "x"], vm=vm)
    np.testing.assert_array_equal(got["id"], cols["id"][mask])
    np.testing.assert_array_equal(got["x"], cols["x"][mask])
    np.testing.assert_array_equal(t[expr]["y"], cols["y"][mask])


def test_where_rows_skip_limit_and_nrow(where):
    cols = data()
    t = reopened(cols, where)
    ids = np.flatnonzero((cols["x"] < 0.3) & (cols["cat"] > 2))
    rows = list(t.where("(x < 0.3) & (cat > 2)", outcols=["nrow__", "cat"], skip=5, limit=17))
    assert [r.nrow__ for r in rows] == list(ids[5:22])
    assert [r.cat for r in rows] == list(cols["cat"][ids[5:22]])
    tuples = list(t.where("x < 0.01", outcols="id", out_flavor=tuple))
    assert tuples == [(int(i),) for i in np.flatnonzero(cols["x"] < 0.01)]
    full = next(t.where("id == 7"))
    assert full.id == 7 and full.flag == bool(cols["flag"][7])


def test_whereblocks_sizes(where):
    cols = data()
    t = reopened(cols, where)
    blocks = list(t.whereblocks("cat < 5", blen=100, outcols=["id"]))
    want = np.flatnonzero(cols["cat"] < 5)
    assert all(len(b) == 100 for b in blocks[:-1]) and 0 < len(blocks[-1]) <= 100
    np.testing.assert_array_equal(np.concatenate(blocks)["id"], want)


def test_eval_on_tables_and_carrays(where):
    cols = data()
    t = reopened(cols, where)
    out = t.eval("x * 2 + y")
    assert isinstance(out, ca.carray)
    np.testing.assert_allclose(out[:], cols["x"] * 2 + cols["y"])
    np.testing.assert_array_equal(t.eval("cat > k", user_dict={"k": 4}, out_flavor="numpy"),
                                  cols["cat"] > 4)
    k = 6  # noqa: F841 - found in the caller's scope, as bcolz does
    np.testing.assert_array_equal(t.eval("cat > k", out_flavor="numpy"), cols["cat"] > 6)
    a = ca.carray(cols["x"], chunklen=100)  # noqa: F841 - used by name in the expression
    b = cols["y"]  # noqa: F841
    np.testing.assert_allclose(ca.eval("a - b * 2")[:], cols["x"] - cols["y"] * 2)
    np.testing.assert_allclose(ca.eval("exp(a)", out_flavor="numpy"), np.exp(cols["x"]))
    assert ca.eval("2 * 3 + 1") == 7


def test_expression_errors():
    t = ca.ctable(data(100))
    with pytest.raises(ca.ExpressionError, match="neither a column"):
        t.fetchwhere("nosuchcolumn > 1")
    with pytest.raises(ca.ExpressionError):
        t.fetchwhere("x <")
    with pytest.raises(ca.ExpressionError, match="not allowed"):
        t.fetchwhere("x.__class__")
    with pytest.raises(ca.ExpressionError, match="unknown function"):
        t.fetchwhere("__import__('os')")
    with pytest.raises(ca.ExpressionError, match="not allowed"):
        t.fetchwhere("[x for x in y]")
    with pytest.raises(TypeError, match="not a boolean"):
        t.fetchwhere("x + 1")
    with pytest.raises(ValueError, match="different lengths"):
        a, b = ca.carray(np.arange(3)), np.arange(4)  # noqa: F841
        ca.eval("a + b")


def test_string_columns_in_expressions(where):
    s = np.array([b"ab", b"cd", b"ab"] * 20)
    u = np.array(["é", "x", "y"] * 20)
    t = reopened({"s": s, "u": u, "i": np.arange(60)}, where, chunklen=16)
    np.testing.assert_array_equal(t.fetchwhere("s == b'ab'")["i"], np.flatnonzero(s == b"ab"))
    np.testing.assert_array_equal(t.fetchwhere("u == 'é'")["i"], np.flatnonzero(u == "é"))


# -- pruning --------------------------------------------------------------------------------


def test_sorted_data_skips_chunks_and_reads_fewer(where):
    cols = data(20000, sort=True)
    t = reopened(cols, where, chunklen=1000)
    ev = table_query.evaluator(t, "(x < 0.1) & (y > 0.5)", None, None, 0)
    results = list(ev.blocks())
    assert ev.skipped >= 17 and len(results) <= 3
    ev2 = table_query.evaluator(t, "(x < 0.1) & (y > 0.5)", None, None, 0, prune=False)
    assert len(list(ev2.blocks())) == 20 and ev2.skipped == 0
    ev3 = table_query.evaluator(t, "~(x >= 0.1)", None, None, 0)
    list(ev3.blocks())
    assert ev3.skipped >= 17


def test_zone_maps_are_persisted_and_survive_reopen(tmp_path):
    cols = data(5000, sort=True)
    t = ca.ctable(cols, chunklen=500, rootdir=str(tmp_path / "t"))
    t.close()
    assert os.path.exists(tmp_path / "t" / "x" / "meta" / "zonemap_000000.npy")
    r = ca.open(str(tmp_path / "t"), mode="r")
    ev = table_query.evaluator(r, "x > 0.95", None, None, 0)
    list(ev.blocks())
    assert ev.skipped >= 8


def test_zone_maps_follow_writes(where):
    cols = data(3000, sort=True)
    t = ca.ctable(cols, chunklen=300, **where)
    t["x"][5] = 0.99  # now chunk 0 holds a large value
    cols["x"][5] = 0.99
    t.resize(2900)
    t.append({k: v[:50] for k, v in cols.items()})
    exp = {k: np.concatenate([v[:2900], v[:50]]) for k, v in cols.items()}
    if t.rootdir:
        t.close()
        t = ca.open(t.rootdir, mode="r")
    np.testing.assert_array_equal(t.fetchwhere("x > 0.98")["id"], exp["id"][exp["x"] > 0.98])


def test_stale_zone_map_from_another_writer_is_ignored(tmp_path):
    """A chunk rewritten by someone who does not know the zone map (bcolz) is re-read."""
    bcolz = pytest.importorskip(
        "bcolz", reason="bcolz-zipline 1.13.0, the real bcolz, has wheels only for Python < 3.13")
    root = str(tmp_path / "t")
    cols = data(3000, sort=True)
    ca.ctable(cols, chunklen=300, rootdir=root, format="bcolz").close()
    other = bcolz.open(root, mode="a")
    other["x"][10] = 5.0  # chunk 0 now holds a value its old max rules out
    other.flush()
    r = ca.open(root, mode="r")
    assert list(r.fetchwhere("x > 4")["id"]) == [10]


def test_nan_values_are_pruned_correctly(where):
    x = np.full(1000, np.nan)
    x[500:600] = np.linspace(0, 1, 100)
    t = reopened({"x": x, "i": np.arange(1000)}, where, chunklen=100)
    for expr in ["x < 0.5", "x != 0.5", "~(x < 0.5)", "x == x", "~(x == x)", "x > -1"]:
        mask = numpy_eval(expr, {"x": x})
        np.testing.assert_array_equal(t.fetchwhere(expr)["i"], np.flatnonzero(mask), expr)


_ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
_consts = st.sampled_from([-1, 0, 0.25, 0.5, 3, 7, 1e9]) | st.floats(-2, 12, width=32)


@st.composite
def predicates(draw, depth=0):
    if depth < 2 and draw(st.booleans()):
        left, right = draw(predicates(depth + 1)), draw(predicates(depth + 1))
        op = draw(st.sampled_from(["&", "|"]))
        expr = f"({left}) {op} ({right})"
    else:
        col = draw(st.sampled_from(["a", "b", "c"]))
        const = draw(_consts)
        expr = f"{col} {draw(_ops)} {const!r}" if draw(st.booleans()) else \
            f"{const!r} {draw(_ops)} {col}"
    return f"~({expr})" if draw(st.integers(0, 4)) == 0 else expr


@SETTINGS
@given(pred=predicates(), n=st.integers(0, 300), chunklen=st.integers(1, 40),
       sort=st.booleans(), seed=st.integers(0, 1000))
def test_pruning_never_loses_a_match(pred, n, chunklen, sort, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 10, n)
    b = rng.random(n) * 10
    b[rng.random(n) < 0.1] = np.nan
    c = rng.integers(0, 3, n).astype(np.uint8)
    if sort:
        a.sort()
    cols = {"a": a, "b": b, "c": c}
    t = ca.ctable(cols, chunklen=chunklen)
    want = np.flatnonzero(numpy_eval(pred, cols)) if n else np.zeros(0, int)
    got = t.fetchwhere(pred, outcols=["nrow__"])["nrow__"]
    np.testing.assert_array_equal(got, want)


def test_blocks_are_decoded_in_groups_of_consecutive_runs():
    from carray.array.expression import _runs

    assert _runs([0, 1, 2, 3, 4, 7, 8, 10], 2) == [[0, 1], [2, 3], [4], [7, 8], [10]]
    assert _runs([], 4) == []


def test_a_query_over_many_pruned_and_kept_blocks_matches_numpy():
    rng = np.random.default_rng(4)
    x = np.sort(rng.random(300_000))
    y = rng.random(300_000)
    t = ca.ctable({"x": x, "y": y}, chunklen=5000)
    got = t.fetchwhere("(x > 0.2) & (x < 0.7) & (y < 0.3)", outcols=["y"])["y"]
    np.testing.assert_array_equal(got, y[(x > 0.2) & (x < 0.7) & (y < 0.3)])


@settings(SETTINGS, max_examples=60)
@given(n=st.integers(0, 3000), chunklen=st.integers(1, 1000),
       cut=st.floats(0, 1) | st.floats(0, 0.03),
       seed=st.integers(0, 1000), names=st.permutations(["nrow__", "a", "b", "c"]),
       k=st.integers(1, 4))
def test_selection_on_the_workers_matches_numpy(n, chunklen, cut, seed, names, k):
    # ``cut`` sweeps from no match through sparse blocks (single rows read, positions)
    # to dense ones (whole blocks, masks); outputs in and out of the expression.
    rng = np.random.default_rng(seed)
    cols = {"a": rng.random(n), "b": rng.integers(-5, 5, n), "c": rng.random(n) < 0.5}
    t = ca.ctable(cols, chunklen=chunklen)
    want = np.flatnonzero((cols["a"] < cut) & ~cols["c"])
    got = t.fetchwhere("(a < cut) & ~c", outcols=names[:k], user_dict={"cut": cut})
    for name in names[:k]:
        np.testing.assert_array_equal(got[name], want if name == "nrow__" else
                                      cols[name][want], name)


def test_selection_with_array_operands_and_many_groups(where):
    # Enough chunks for several groups per worker; an operand that is a plain array.
    rng = np.random.default_rng(9)
    n = 200_000
    cols = {"id": np.arange(n), "x": rng.random(n), "y": rng.random(n)}
    t = reopened(cols, where, chunklen=1000)
    w = rng.random(n)
    mask = (cols["x"] < 0.5) & (w > 0.9)
    got = t.fetchwhere("(x < 0.5) & (w > 0.9)", outcols=["y", "x", "nrow__"],
                       user_dict={"w": w})
    np.testing.assert_array_equal(got["y"], cols["y"][mask])
    np.testing.assert_array_equal(got["x"], cols["x"][mask])
    np.testing.assert_array_equal(got["nrow__"], np.flatnonzero(mask))
    np.testing.assert_array_equal(np.concatenate(list(t.whereblocks("x > 0.999")))["id"],
                                  np.flatnonzero(cols["x"] > 0.999))


def test_selection_needs_one_dimensional_numeric_columns(where):
    t = reopened({"x": np.arange(50.0), "v": np.arange(100).reshape(50, 2),
                  "s": np.array([f"s{i}" for i in range(50)], dtype=object)}, where)
    ev = table_query.evaluator(t, "x > 10", None, None, 0)
    assert ev.can_select({"x": t.cols["x"], "nrow__": None})
    assert not ev.can_select({"v": t.cols["v"]})
    assert not ev.can_select({"s": t.cols["s"]})
    got = t.fetchwhere("x > 45", outcols=["v", "s", "x"])
    np.testing.assert_array_equal(got["v"], np.arange(92, 100).reshape(4, 2))
    assert list(got["s"]) == ["s46", "s47", "s48", "s49"]
    with pytest.raises(TypeError, match="not a boolean"):
        t.fetchwhere("x * 2", outcols=["x"])
