"""Missing values, property-based: queries follow pandas' three-valued logic for random
expressions, and pandas' nullable columns and Arrow nulls round-trip through tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca

pd = pytest.importorskip("pandas", reason="pandas is a test dependency")
pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")

FAST = settings(max_examples=30, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

_values = st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=1, max_size=40)


@st.composite
def frames(draw):
    x = draw(_values)
    n = len(x)
    y = draw(st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=n, max_size=n))
    a = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    return pd.DataFrame({"x": pd.array(x, dtype="Float64"), "y": pd.array(y, dtype="Int64"),
                         "a": np.array(a, dtype=np.int64), "k": np.arange(n)})


# An expression as (carray text, pandas evaluation of a DataFrame to a nullable boolean).
_OPS = {"<": lambda s, c: s < c, ">=": lambda s, c: s >= c, "==": lambda s, c: s == c,
        "!=": lambda s, c: s != c}


@st.composite
def leaves(draw):
    kind = draw(st.sampled_from(["cmp", "cols", "null"]))
    name = draw(st.sampled_from(["x", "y", "a"]))
    if kind == "cmp":
        op, c = draw(st.sampled_from(sorted(_OPS))), draw(st.integers(-4, 4))
        return f"({name} {op} {c})", lambda df: _OPS[op](df[name], c)
    if kind == "cols":
        return "(x < y)", lambda df: df["x"] < df["y"]
    test = draw(st.sampled_from(["isnull", "notnull"]))
    return (f"{test}({name})",
            lambda df: pd.array(getattr(df[name], test)().to_numpy(), dtype="boolean"))


def _combine(children):
    def build(parts):
        op, (lt, lf), (rt, rf) = parts
        if op == "&":
            return f"({lt} & {rt})", lambda df: pd.array(lf(df), dtype="boolean") & \
                pd.array(rf(df), dtype="boolean")
        return f"({lt} | {rt})", lambda df: pd.array(lf(df), dtype="boolean") | \
            pd.array(rf(df), dtype="boolean")

    def negate(child):
        text, f = child
        return f"~{text}", lambda df: ~pd.array(f(df), dtype="boolean")

    return st.one_of(st.tuples(st.sampled_from("&|"), children, children).map(build),
                     children.map(negate))


expressions = st.recursive(leaves(), _combine, max_leaves=6)


@FAST
@given(frames(), expressions)
def test_queries_match_pandas_three_valued_logic(df, expression):
    text, pandas_eval = expression
    t = ca.ctable.fromdataframe(df)
    expected = np.flatnonzero(pd.array(pandas_eval(df), dtype="boolean").fillna(False)
                              .to_numpy(dtype=bool)).tolist()
    assert t.fetchwhere(text)["k"].tolist() == expected, text
    assert [r.k for r in t.where(text)] == expected


_nullable_series = st.one_of(
    st.lists(st.one_of(st.none(), st.integers(-2**40, 2**40)), max_size=30)
    .map(lambda v: pd.array(v, dtype="Int64")),
    st.lists(st.one_of(st.none(), st.floats(allow_nan=False, width=64)), max_size=30)
    .map(lambda v: pd.array(v, dtype="Float64")),
    st.lists(st.one_of(st.none(), st.booleans()), max_size=30)
    .map(lambda v: pd.array(v, dtype="boolean")),
    st.lists(st.one_of(st.none(), st.text(max_size=5)), max_size=30)
    .map(lambda v: pd.Series(v, dtype=object).to_numpy()),
)


@FAST
@given(st.lists(_nullable_series, min_size=1, max_size=4))
def test_pandas_and_arrow_round_trips(columns):
    n = min(len(c) for c in columns)
    df = pd.DataFrame({f"c{i}": c[:n] for i, c in enumerate(columns)})
    t = ca.ctable.fromdataframe(df)
    assert t.null_counts() == {k: int(v) for k, v in df.isna().sum().items()}
    out = t.todataframe()
    assert out.isna().equals(df.isna())
    for name in df.columns:
        assert list(out[name].dropna()) == list(df[name].dropna()), name
    arrow = pa.Table.from_pandas(df, preserve_index=False)
    back = ca.ctable.from_arrow(arrow).to_arrow()
    for name in df.columns:
        assert back.column(name).to_pylist() == arrow.column(name).to_pylist(), name


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_nullable_series, min_size=1, max_size=3))
def test_parquet_round_trips(tmp_path_factory, columns):
    from carray.integrations.convert import convert

    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow.parquet is a test dependency")
    n = min(len(c) for c in columns)
    df = pd.DataFrame({f"c{i}": c[:n] for i, c in enumerate(columns)})
    work = tmp_path_factory.mktemp("pq")
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), work / "in.parquet")
    convert(work / "in.parquet", work / "t.ctable")
    with ca.open(work / "t.ctable", mode="r") as t:
        assert t.todataframe().isna().equals(df.isna())
    convert(work / "t.ctable", work / "out.parquet")
    back = pq.read_table(work / "out.parquet")
    for name in df.columns:
        assert back.column(name).to_pylist() == \
            pa.Table.from_pandas(df, preserve_index=False).column(name).to_pylist(), name
