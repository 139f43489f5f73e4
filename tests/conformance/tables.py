"""Tables of every column kind with missing values, drawn by hypothesis, with their pandas
reference (nullable dtypes), and the places a table is built in.

A drawn table holds one column of each kind: ``i64``/``i32`` integers, ``f64``/``f32``
floats, ``b`` booleans, ``s`` variable-length strings, ``u`` fixed-width strings, ``c``
categories (a dictionary in a non-alphabetical order), ``d`` dates, ``t`` naive and
``z`` zoned timestamps (a zone with a daylight-saving change among the values), and
``n`` records (whose ``q`` field has missing values).  Each column is missing in a
drawn share of its rows (possibly none, possibly all).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import carray as ca

SOAK = os.environ.get("CARRAY_SOAK") == "1"
#: Examples per test: a few in CI, many under CARRAY_SOAK=1 (CARRAY_SOAK_EXAMPLES says how
#: many).
EXAMPLES = int(os.environ.get("CARRAY_SOAK_EXAMPLES", "300")) if SOAK else 5
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
PLACES = ["memory", "disk", "bcolz"]
#: The time a test may take (the suite's budget in CI; a soak takes its time).
TIMEOUT = pytest.mark.timeout(0 if SOAK else 300)

INTS = [-7, -1, 0, 1, 2, 5, 2**40]
FLOATS = [-2.5, -1.0, 0.0, 0.5, 1.0, 3.25, 1e10]
WORDS = ["", "a", "ab", "b", "é", "N1", "N22", "zz"]
FIXED = ["a", "ab", "b", "N1", "zz"]
CATEGORIES = ["UA", "AA", "DL", "WN"]  # the dictionary's order: not alphabetical
DAY0 = np.datetime64("2024-02-27", "D")
TIME0 = np.datetime64("2024-03-30T22:00", "us")  # Paris moves its clocks on 2024-03-31
ZONES = ["Europe/Paris", "UTC", "+05:30"]
KINDS = {"i64": "int", "i32": "int", "f64": "float", "f32": "float", "b": "bool",
         "s": "string", "u": "string", "c": "category", "d": "datetime", "t": "datetime",
         "z": "datetime-zoned"}
NUMERIC = ["i64", "i32", "f64", "f32", "b"]


@dataclass
class Drawn:
    """A drawn table: what carray is given, and pandas' reference of it."""

    columns: dict[str, Any]
    frame: pd.DataFrame
    nested: np.ma.MaskedArray
    values: dict[str, np.ndarray]
    missing: dict[str, np.ndarray]
    zone: str
    ordered: bool
    chunklen: int

    def __len__(self) -> int:
        return len(self.frame)

    def __repr__(self) -> str:  # what a failing example shows: the values, briefly
        columns = {k: v.tolist() for k, v in self.frame.astype(object).items()}
        return (f"Drawn({len(self)} rows, zone={self.zone!r}, ordered={self.ordered}, "
                f"chunklen={self.chunklen}, columns={columns}, n={self.nested.tolist()})")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis' printer
        printer.text(repr(self))

    @property
    def has_missing(self) -> bool:
        return any(m.any() for m in self.missing.values()) or \
            bool(np.ma.getmaskarray(self.nested["q"]).any())

    def filled(self) -> Drawn:
        """The same table with every missing value replaced by a value (for bcolz's
        layout, which holds none)."""
        n = len(self)
        return _build({k: np.zeros(n, bool) for k in self.missing}, self.values,
                      np.zeros(n, bool), np.ma.getdata(self.nested), self.zone,
                      self.ordered, self.chunklen)


@st.composite
def tables(draw: Any, max_rows: int = 60) -> Drawn:
    """A table of every column kind (see the module docstring)."""
    n = draw(st.integers(0, max_rows))
    values, missing = {}, {}
    for name in KINDS:
        share = draw(st.sampled_from(["none", "none", "some", "all"]))
        missing[name] = np.array(
            draw(st.lists(st.booleans(), min_size=n, max_size=n)) if share == "some"
            else [share == "all"] * n, dtype=bool)
        values[name] = _draw_values(draw, name, n)
    q_missing = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    nested = np.zeros(n, dtype=[("p", "i4"), ("q", "f8")])
    nested["p"] = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
    nested["q"] = draw(st.lists(st.sampled_from(FLOATS), min_size=n, max_size=n))
    return _build(missing, values, q_missing, nested, draw(st.sampled_from(ZONES)),
                  draw(st.booleans()), draw(st.sampled_from([3, 8, 64])))


def _draw_values(draw: Any, name: str, n: int) -> np.ndarray:
    def pick(pool: list[Any]) -> list[Any]:
        return draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))

    if name in ("i64", "i32"):
        ints = pick(INTS if name == "i64" else INTS[:-1])
        return np.array(ints, dtype=np.int64 if name == "i64" else np.int32)
    if name in ("f64", "f32"):
        return np.array(pick(FLOATS), dtype=np.float64 if name == "f64" else np.float32)
    if name == "b":
        return np.array(pick([True, False]), dtype=bool)
    if name == "s":
        return np.array(pick(WORDS), dtype=object)
    if name == "u":
        return np.array(pick(FIXED), dtype="U2")
    if name == "c":
        return np.array(pick(CATEGORIES), dtype=object)
    if name == "d":
        return DAY0 + np.array(pick(list(range(6))), dtype="m8[D]")
    return TIME0 + np.array(pick([0, 90, 180, 240, 600]), dtype="m8[m]").astype("m8[us]")


def _build(missing: dict[str, np.ndarray], values: dict[str, np.ndarray],
           q_missing: np.ndarray, nested: np.ndarray, zone: str, ordered: bool,
           chunklen: int) -> Drawn:
    columns: dict[str, Any] = {}
    frame: dict[str, Any] = {}
    for name, kind in KINDS.items():
        v, m = values[name], missing[name]
        if kind == "string" and name == "s":
            columns[name] = np.where(m, None, v).astype(object)
        elif kind == "category":
            columns[name] = pd.Categorical(np.where(m, None, v), categories=CATEGORIES,
                                           ordered=ordered)
        elif kind == "datetime-zoned":
            utc = pd.DatetimeIndex(np.where(m, np.datetime64("NaT"), v)).tz_localize("UTC")
            columns[name] = pd.Series(utc.tz_convert(zone))
        else:
            columns[name] = np.ma.MaskedArray(v, mask=m)
        frame[name] = reference_series(name, v, m, zone, ordered)
    masked_nested = np.ma.MaskedArray(nested.copy())
    masked_nested["q"][q_missing] = np.ma.masked
    columns["n"] = masked_nested
    return Drawn(columns, pd.DataFrame(frame), masked_nested, values, dict(missing), zone,
                 ordered, chunklen)


def reference_series(name: str, values: np.ndarray, missing: np.ndarray, zone: str,
                     ordered: bool) -> pd.Series:
    """pandas' nullable reference of one column."""
    kind = KINDS[name]
    objects = [None if m else v for v, m in zip(values.tolist(), missing.tolist(),
                                                 strict=True)]
    if kind == "int":
        return pd.Series(pd.array(objects, dtype="Int64" if name == "i64" else "Int32"))
    if kind == "float":
        return pd.Series(pd.array(objects, dtype="Float64" if name == "f64" else "Float32"))
    if kind == "bool":
        return pd.Series(pd.array(objects, dtype="boolean"))
    if kind == "string":
        return pd.Series(pd.array(objects, dtype=pd.StringDtype("python", na_value=pd.NA)))
    if kind == "category":
        return pd.Series(pd.Categorical(objects, categories=CATEGORIES, ordered=ordered))
    stamps = pd.Series(pd.DatetimeIndex(np.where(missing, np.datetime64("NaT"), values)))
    if kind == "datetime-zoned":
        return stamps.dt.tz_localize("UTC").dt.tz_convert(zone)
    return stamps


# -- places ------------------------------------------------------------------------------


def placed(drawn: Drawn, place: str, root: str) -> tuple[ca.ctable, Drawn]:
    """The table of ``drawn`` built in ``place`` (a new directory under ``root`` on disk),
    closed and opened again on disk; and the reference it must equal.  bcolz's layout
    holds no missing values: a table that has some is refused (the typed error), and
    the same table with them filled is built instead."""
    if place == "memory":
        return ca.ctable(drawn.columns, chunklen=drawn.chunklen), drawn
    rootdir = tempfile.mkdtemp(dir=root)
    fmt = "bcolz" if place == "bcolz" else None
    if place == "bcolz" and drawn.has_missing:
        with pytest.raises(ca.UnsupportedDTypeError, match="missing values"):
            ca.ctable(drawn.columns, rootdir=rootdir, mode="w", format=fmt,
                      chunklen=drawn.chunklen)
        assert not os.path.exists(os.path.join(rootdir, "__rootdirs__"))
        drawn = drawn.filled()
    # Without fsync: what is checked here is what reads back, not durability.
    t = ca.ctable(drawn.columns, rootdir=rootdir, mode="w", format=fmt,
                  chunklen=drawn.chunklen, fsync=False)
    t.close()
    t = ca.ctable(rootdir=rootdir, mode="a", fsync=False)
    if place == "bcolz":  # categories are stored decoded there
        frame = drawn.frame.copy()
        frame["c"] = frame["c"].astype(object).astype(pd.StringDtype("python", na_value=pd.NA))
        drawn = dataclasses.replace(drawn, frame=frame)
    return t, drawn


@contextlib.contextmanager
def each_place(drawn: Drawn, root: Any) -> Iterator[list[tuple[str, ca.ctable, Drawn]]]:
    """The table of ``drawn`` in every place; closed afterwards."""
    built = [(place, *placed(drawn, place, str(root))) for place in PLACES]
    try:
        yield built
    finally:
        for _, t, _ in built:
            t.close()


# -- comparing with pandas ---------------------------------------------------------------


def family(dtype: Any) -> str:
    """What kind of values a pandas dtype holds (widths and nullability aside)."""
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if isinstance(dtype, pd.DatetimeTZDtype):
        return "datetime-zoned"
    if isinstance(dtype, pd.StringDtype) or dtype == np.dtype(object):
        return "string"
    kind = np.dtype(getattr(dtype, "numpy_dtype", dtype)).kind
    return {"i": "int", "u": "int", "f": "float", "b": "bool", "M": "datetime"}[kind]


def zone_name(zone: Any) -> str:
    """A zone's name as pandas spells it (``'+05:30'`` and ``UTC+05:30`` are one zone)."""
    return str(pd.Timestamp(0, tz=zone if isinstance(zone, str) else zone).tz)


def canon(values: Any) -> list[Any]:
    """Values as comparable Python objects: None where missing, an instant as its UTC
    nanoseconds and zone, numbers as Python numbers."""
    s = pd.Series(values) if not isinstance(values, pd.Series) else values
    out = []
    for v in s.astype(object).tolist():
        if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and np.isnan(v)):
            out.append(None)
        elif isinstance(v, (pd.Timestamp, np.datetime64, datetime.date)):
            ts = pd.Timestamp(v)
            out.append((ts.as_unit("ns").value, zone_name(ts.tz) if ts.tz else None))
        elif isinstance(v, (np.generic,)):
            out.append(v.item())
        else:
            out.append(v)
    return out


def assert_frame_like(got: pd.DataFrame, want: pd.DataFrame, what: str = "") -> None:
    """``got`` (a carray result as a DataFrame) holds what ``want`` (pandas' answer)
    holds: the same columns, kinds of values, zones, values and missing values."""
    assert list(got.columns) == list(want.columns), what
    assert len(got) == len(want), what
    for name in want.columns:
        assert family(got[name].dtype) == family(want[name].dtype), (what, name, got[name].dtype)
        if isinstance(want[name].dtype, pd.DatetimeTZDtype):
            assert str(got[name].dt.tz) == str(want[name].dt.tz), (what, name)
        g, w = canon(got[name]), canon(want[name])
        if family(want[name].dtype) == "float":
            assert [x is None for x in g] == [x is None for x in w], (what, name)
            np.testing.assert_allclose([x for x in g if x is not None],
                                       [x for x in w if x is not None], rtol=1e-9,
                                       atol=1e-9, err_msg=f"{what} {name}")
        else:
            assert g == w, (what, name)
