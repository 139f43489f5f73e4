"""Queries against pandas' nullable dtypes: comparisons, arithmetic, membership, string
functions and null tests joined by three-valued (Kleene) logic; a row matches where the
expression is known and true.  The same answers with indexes, and from every way of
asking (fetchwhere, where, whereblocks, eval, ``t[expr]``, skip and limit)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import carray as ca
from carray.errors import IndexUnsupportedError

from .tables import CATEGORIES, FIXED, FLOATS, INTS, SETTINGS, TIMEOUT, WORDS, each_place, tables

Reference = Any  # a function of the reference frame giving a pandas "boolean" Series

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
        "==": operator.eq, "!=": operator.ne}
_DAYS = ["2024-02-27", "2024-02-29", "2024-03-01", "2024-03-04"]
_TIMES = ["2024-03-30T23:30", "2024-03-31T01:00", "2024-03-31T02:30", "2024-03-31T08:00"]

pytestmark = TIMEOUT


def _known_where_present(result: pd.Series, column: pd.Series) -> pd.Series:
    """``result`` as a nullable boolean, unknown where ``column`` is missing."""
    return result.astype("boolean").mask(column.isna())


def _compare(name: str, op: str, literal: Any) -> tuple[str, Reference]:
    return (f"{name} {op} {literal!r}",
            lambda df: _known_where_present(_OPS[op](df[name], literal), df[name]))


def _timestamp(name: str, op: str, text: str, zoned: bool) -> tuple[str, Reference]:
    stamp = pd.Timestamp(text, tz="UTC" if zoned else None)  # literals are UTC instants
    return (f"{name} {op} {text!r}",
            lambda df: _known_where_present(_OPS[op](df[name], stamp), df[name]))


def _member(name: str, literals: list[Any], invert: bool, cast: Any = None
            ) -> tuple[str, Reference]:
    def ref(df: pd.DataFrame) -> pd.Series:
        values = [cast(v) for v in literals] if cast else literals
        hit = df[name].isin(values)
        return _known_where_present(~hit if invert else hit, df[name])

    return f"{name} {'not in' if invert else 'in'} {literals!r}", ref


def _text(func: str, name: str, pattern: str) -> tuple[str, Reference]:
    def ref(df: pd.DataFrame) -> pd.Series:
        s = df[name].astype(pd.StringDtype("python", na_value=pd.NA))
        out = s.str.contains(pattern, regex=False) if func == "contains" else \
            getattr(s.str, func)(pattern)
        return out.astype("boolean")

    return f"{func}({name}, {pattern!r})", ref


@st.composite
def atoms(draw: Any) -> tuple[str, Reference]:
    """One condition on one column (or two, for arithmetic)."""
    op = draw(st.sampled_from(list(_OPS)))
    choice = draw(st.sampled_from(
        ["int", "float", "int-in", "float-in", "bool", "not-bool", "string", "string-in",
         "text", "fixed", "category", "category-in", "day", "day-in", "time", "zoned",
         "null", "arith"]))
    if choice == "int":
        return _compare(draw(st.sampled_from(["i64", "i32"])), op,
                        draw(st.sampled_from(INTS[:-1] + [3])))
    if choice == "float":
        return _compare(draw(st.sampled_from(["f64", "f32"])), op,
                        draw(st.sampled_from(FLOATS + [0.75])))
    if choice in ("int-in", "float-in"):
        name = draw(st.sampled_from(["i64", "i32"] if choice == "int-in" else ["f64", "f32"]))
        pool = INTS[:-1] if choice == "int-in" else FLOATS
        return _member(name, draw(st.lists(st.sampled_from(pool), max_size=3)),
                       draw(st.booleans()))
    if choice == "bool":
        return "b", lambda df: df["b"].astype("boolean")
    if choice == "not-bool":
        return "~b", lambda df: ~df["b"].astype("boolean")
    if choice == "string":
        return _compare(draw(st.sampled_from(["s", "u"])), op,
                        draw(st.sampled_from(WORDS + ["zzz"])))
    if choice == "string-in":
        return _member("s", draw(st.lists(st.sampled_from(WORDS), max_size=3)),
                       draw(st.booleans()))
    if choice == "text":
        return _text(draw(st.sampled_from(["startswith", "endswith", "contains"])),
                     draw(st.sampled_from(["s", "u"])), draw(st.sampled_from(["N", "b", "", "é"])))
    if choice == "fixed":
        return _member("u", draw(st.lists(st.sampled_from(FIXED), max_size=3)), False)
    if choice == "category":
        return _compare("c", draw(st.sampled_from(["==", "!="])),
                        draw(st.sampled_from(CATEGORIES + ["ZZ"])))
    if choice == "category-in":
        return _member("c", draw(st.lists(st.sampled_from(CATEGORIES), max_size=3)),
                       draw(st.booleans()))
    if choice == "day":
        return _timestamp("d", op, draw(st.sampled_from(_DAYS)), zoned=False)
    if choice == "day-in":
        return _member("d", draw(st.lists(st.sampled_from(_DAYS), max_size=2)),
                       draw(st.booleans()), cast=pd.Timestamp)
    if choice in ("time", "zoned"):
        return _timestamp("t" if choice == "time" else "z", op,
                          draw(st.sampled_from(_TIMES)), zoned=choice == "zoned")
    if choice == "null":
        name = draw(st.sampled_from(["i64", "f32", "b", "s", "c", "d", "z"]))
        if draw(st.booleans()):
            return f"isnull({name})", lambda df: df[name].isna().astype("boolean")
        return f"notnull({name})", lambda df: df[name].notna().astype("boolean")
    return ("(i64 + i32 * 2) > 1",
            lambda df: ((df["i64"] + df["i32"].astype("Int64") * 2) > 1).astype("boolean"))


@st.composite
def conditions(draw: Any, depth: int = 2) -> tuple[str, Reference]:
    """Atoms joined by ``&``, ``|``, ``~`` (and their spelled forms)."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(atoms())
    how = draw(st.sampled_from(["and", "or", "not"]))
    left, lref = draw(conditions(depth - 1))
    if how == "not":
        word = draw(st.sampled_from(["~", "not "]))
        return f"{word}({left})", lambda df: ~lref(df)
    right, rref = draw(conditions(depth - 1))
    symbol = draw(st.sampled_from(["&", "and"] if how == "and" else ["|", "or"]))
    join = operator.and_ if how == "and" else operator.or_
    return f"({left}) {symbol} ({right})", lambda df: join(lref(df), rref(df))


def _expected(ref: Reference, df: pd.DataFrame) -> list[int]:
    return np.flatnonzero(ref(df).fillna(False).to_numpy(bool)).tolist()


def _every_way(t: ca.ctable, text: str) -> list[int]:
    """The matching rows, checked to be the same whichever way they are asked for."""
    rows = t.fetchwhere(text, outcols=["nrow__"])["nrow__"].tolist()
    assert [r.nrow__ for r in t.where(text, outcols="nrow__")] == rows, text
    blocks = [b["nrow__"] for b in t.whereblocks(text, blen=5, outcols=["nrow__"])]
    assert (np.concatenate(blocks).tolist() if blocks else []) == rows, text
    if text not in t.names:  # t[name] is the column
        assert len(t[text]) == len(rows), text
    assert t.fetchwhere(text, outcols=["nrow__"], skip=1, limit=3)["nrow__"].tolist() == \
        rows[1:4], text
    mask = t.eval(text, out_flavor="numpy")
    assert np.flatnonzero(np.ma.filled(mask, False)).tolist() == rows, text
    return rows


@SETTINGS
@given(drawn=tables(), asked=st.lists(conditions(), min_size=1, max_size=6))
def test_queries_match_pandas(drawn, asked, tmp_path):
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            for text, condition in asked:
                want = _expected(condition, ref.frame)
                assert _every_way(t, text) == want, (place, text)


@SETTINGS
@given(drawn=tables(max_rows=200), asked=st.lists(conditions(), min_size=1, max_size=6),
       kind=st.sampled_from(["sorted", "bloom"]))
def test_indexes_give_the_scans_answers(drawn, asked, kind, tmp_path):
    probes = [("i64 == 1", None), ("i64 in [-7, 5]", None), ("(f64 > 0.5) & (i64 >= 0)", None),
              ("d == '2024-02-29'", None), ("(i64 == 0) | isnull(i64)", None)]
    with each_place(drawn, tmp_path) as built:
        for place, t, ref in built:
            if place == "bcolz":
                with pytest.raises(IndexUnsupportedError):
                    t.create_index("i64", kind=kind)
                continue
            scans = {text: _every_way(t, text) for text, _ in asked + probes}
            for name in ("i64", "f64", "d"):
                t.create_index(name, kind=kind)
            for text, condition in asked + probes:
                plan = t.explain(text)
                assert plan.startswith(f"query: {text}"), plan
                got = _every_way(t, text)
                assert got == scans[text], (place, text, plan)
                if condition is not None:
                    assert got == _expected(condition, ref.frame), (place, text)
            if len(t):
                assert "+0 rows written since the build" in t.explain("i64 == 1")
