"""Space stays bounded: after any sequence of edits and appends, a dataset takes at most
1.3x the bytes the same data takes written at once.

Every case runs a sequence of changes on a dataset on disk (one-cell and slice edits,
appends of one row and of many small blocks, shrinks and regrowth, edits across
reopens; N-d frames appended one at a time, with and without a flush each, and 40 at a
time, edits of edge chunks; string columns; tables edited through the table and
through their columns), closes it, and compares the bytes of every file under it with
those of the same final data written at once to another path (same layout, chunk shape
and compression parameters).  The data is checked too.

Layouts: carray's own (superchunk directories, the default), bcolz directories and
``.b2nd`` frames for arrays; versioned and bcolz tables.

CI sizes are small; ``CARRAY_SOAK=1`` runs the sizes the issue names (a 300,000-row
table, 256 frames of 512x512 float32).  Small N-d frames would keep the whole
decoded tail in memory between appends, so in CI the engine's tail budget is lowered to
reach the same path as big frames.  ``benchmarks/bench_space.py`` runs every case at
full size and records the ratios.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import carray as ca
from carray.engine import writer

SOAK = os.environ.get("CARRAY_SOAK") == "1"
BOUND = 1.3
ARRAY_LAYOUTS = ("superchunk", "bcolz", "b2nd")
TABLE_LAYOUTS = ("superchunk", "bcolz")

# Sizes: in CI, and at full size (CARRAY_SOAK=1, benchmarks/bench_space.py).
SIZES = {
    "ci": {"rows": 200_000, "edits": 60, "row_appends": 300, "table_rows": 40_000,
           "table_appends": 30,
           "frames": 48, "side": 128, "frame_chunks": (16, 32, 32), "tail_budget": 2**18,
           "edge_frames": 20, "edge_side": 100, "edge_chunks": (8, 32, 32)},
    "full": {"rows": 2_000_000, "edits": 200, "row_appends": 2000, "table_rows": 300_000,
             "table_appends": 300,
             "frames": 256, "side": 512, "frame_chunks": None, "tail_budget": None,
             "edge_frames": 64, "edge_side": 300, "edge_chunks": None},
}
CARRIERS = np.array(["AA", "UA", "DL", "B6", "EV", "MQ", "US", "WN", "VX", "FL", "AS", "9E",
                     "F9", "HA", "YV", "OO"], dtype=object)


# -- measuring ----------------------------------------------------------------------------

def disk_bytes(path: str | os.PathLike) -> int:
    """Bytes of every file under ``path`` (or of the file ``path``)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass
class Outcome:
    """A case's result: the dataset's bytes and those of its data written at once."""

    case: str
    layout: str
    nbytes: int
    at_once: int
    seconds: float

    @property
    def ratio(self) -> float:
        return self.nbytes / self.at_once


def _fmt(layout: str) -> str | None:
    return None if layout == "superchunk" else layout


def _path(tmp: Path, name: str, layout: str) -> str:
    return str(tmp / (name + (".b2nd" if layout == "b2nd" else "")))


@contextlib.contextmanager
def tail_budget(nbytes: int | None) -> Iterator[None]:
    """The engine's budget for a decoded tail (None: as it is)."""
    old = writer.TAIL_BUDGET
    if nbytes is not None:
        writer.TAIL_BUDGET = nbytes
    try:
        yield
    finally:
        writer.TAIL_BUDGET = old


def walk(n: int, seed: int = 5) -> np.ndarray:
    """A random walk of small steps (counters, as the benchmarks use)."""
    return np.cumsum(np.random.default_rng(seed).integers(-3, 4, n)).astype("i8")


def frames(n: int, side: int, seed: int = 6) -> np.ndarray:
    """``n`` float32 frames of ``side`` x ``side``: smooth waves, a little noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:side, 0:side].astype("f4")
    out = np.empty((n, side, side), "f4")
    for i in range(n):
        out[i] = np.sin(x / 17 + i / 5) * np.cos(y / 23) * 100
        out[i] += rng.normal(0, 1, (side, side)).astype("f4")
    return out.round(1)


def table_columns(n: int, seed: int = 9) -> dict[str, np.ndarray]:
    """A flights-like table: integers, floats and two string columns."""
    rng = np.random.default_rng(seed)
    return {"year": np.full(n, 2013, "i8"), "dep": rng.integers(0, 2400, n),
            "carrier": CARRIERS[rng.integers(0, len(CARRIERS), n)],
            "tailnum": np.array([f"N{v}" for v in rng.integers(100, 99_999, n)], dtype=object),
            "dist": rng.integers(80, 5000, n).astype("f8")}


# -- array cases: each changes an array at ``path`` and returns it open with the final data --

def one_cell_edits(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    x = walk(size["rows"])
    a = ca.carray(x, rootdir=path, mode="w", format=_fmt(layout), fsync=False)
    for i in np.random.default_rng(1).integers(0, len(x), size["edits"]).tolist():
        a[i] = x[i] = x[i] + 1000
        a.flush()
    return a, x


def slice_edits(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    x = walk(size["rows"])
    n = len(x)
    a = ca.carray(x, rootdir=path, mode="w", format=_fmt(layout), fsync=False)
    rng = np.random.default_rng(2)
    for _ in range(size["edits"] // 3):
        i, k = int(rng.integers(0, n - n // 10)), int(rng.integers(1, n // 10))
        a[i:i + k] = x[i:i + k] = rng.integers(-9, 9, k)
        a.flush()
    return a, x


def one_row_appends(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    n, m = size["rows"] // 2, size["row_appends"]
    x = walk(n + m)
    a = ca.carray(x[:n], rootdir=path, mode="w", format=_fmt(layout), fsync=False,
                  expectedlen=n + m)
    for i in range(n, n + m):
        a.append(x[i:i + 1])
        a.flush()
    return a, x


def one_row_appends_one_chunk(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    """A small array, one partial chunk: 9 appends of one row, each flushed."""
    x = walk(50_009)
    a = ca.carray(x[:50_000], rootdir=path, mode="w", format=_fmt(layout), fsync=False,
                  chunks=(65_536,))
    for i in range(50_000, len(x)):
        a.append(x[i:i + 1])
        a.flush()
    return a, x


def small_appends(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    x = walk(size["rows"])
    a = ca.carray(x[:0], rootdir=path, mode="w", format=_fmt(layout), fsync=False,
                  expectedlen=len(x))
    for k, i in enumerate(range(0, len(x), 997)):
        a.append(x[i:i + 997])
        if k % 10 == 9:
            a.flush()
    return a, x


def shrink_and_regrow(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    x = walk(size["rows"])
    n = len(x)
    a = ca.carray(x, rootdir=path, mode="w", format=_fmt(layout), fsync=False)
    for k in range(5):
        m = n // 2 - k * 1013
        a.resize(m)
        a.flush()
        a.append(x[m:])
        a.flush()
    a.resize(n + 5000)  # and grown past the end with the default
    x = np.concatenate([x, np.zeros(5000, x.dtype)])
    return a, x


def edits_across_reopens(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    x = walk(size["rows"])
    ca.carray(x, rootdir=path, mode="w", format=_fmt(layout), fsync=False).close()
    rng = np.random.default_rng(3)
    for i in rng.integers(0, len(x), size["edits"] // 2).tolist():
        a = ca.open(path, mode="a", fsync=False)
        a[i] = x[i] = -x[i]
        a.append(x[:100])
        x = np.concatenate([x, x[:100]])
        a.close()
    return ca.open(path, mode="a", fsync=False), x


def _frames_array(path: str, layout: str, size: dict, first: np.ndarray) -> Any:
    chunks = size["frame_chunks"]
    if layout == "bcolz" and chunks is not None:
        chunks = (chunks[0], *first.shape[1:])  # bcolz chunks are runs of rows
    return ca.carray(first, rootdir=path, mode="w", format=_fmt(layout), fsync=False,
                     chunks=chunks)


def frames_one_at_a_time(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    f = frames(size["frames"], size["side"])
    with tail_budget(size["tail_budget"]):
        a = _frames_array(path, layout, size, f[:0])
        for i in range(len(f)):
            a.append(f[i:i + 1])
        a.flush()
    return a, f


def frames_flushed_each(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    f = frames(size["frames"] // 2, size["side"])
    with tail_budget(size["tail_budget"]):
        a = _frames_array(path, layout, size, f[:0])
        for i in range(len(f)):
            a.append(f[i:i + 1])
            a.flush()
    return a, f


def frames_by_40(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    f = frames(size["frames"], size["side"])
    step = 40 if size["frames"] > 80 else 10
    with tail_budget(size["tail_budget"]):
        a = _frames_array(path, layout, size, f[:0])
        for i in range(0, len(f), step):
            a.append(f[i:i + step])
        a.flush()
    return a, f


def edge_chunk_edits(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    f = frames(size["edge_frames"], size["edge_side"], seed=8)
    chunks = size["edge_chunks"]
    if layout == "bcolz":
        chunks = (7, *f.shape[1:])  # rows only: the edge is the last, partial run
    a = ca.carray(f, rootdir=path, mode="w", format=_fmt(layout), fsync=False, chunks=chunks)
    rng = np.random.default_rng(4)
    for _ in range(size["edits"] // 4):
        i = int(rng.integers(0, len(f)))
        a[i, -1, :] = f[i, -1, :] = -f[i, -1, :]
        a[-1, :, -3:] = f[-1, :, -3:] = rng.integers(0, 9)
        a[-2:, -5:, :] = f[-2:, -5:, :] = rng.integers(0, 9)
        a.flush()
    return a, f


def nd_shrink_and_regrow(path: str, layout: str, size: dict) -> tuple[Any, np.ndarray]:
    f = frames(size["edge_frames"], size["edge_side"], seed=10)
    chunks = size["edge_chunks"]
    if layout == "bcolz":
        chunks = (7, *f.shape[1:])
    a = ca.carray(f, rootdir=path, mode="w", format=_fmt(layout), fsync=False, chunks=chunks)
    n = len(f)
    for m in (n // 2, n // 3, n - 3):
        a.resize(m)
        a.flush()
        for i in range(m, n):
            a.append(f[i:i + 1])
            a.flush()
    return a, f


ARRAY_CASES: dict[str, Callable[[str, str, dict], tuple[Any, np.ndarray]]] = {
    f.__name__: f for f in (one_cell_edits, slice_edits, one_row_appends,
                            one_row_appends_one_chunk, small_appends,
                            shrink_and_regrow, edits_across_reopens, frames_one_at_a_time,
                            frames_flushed_each, frames_by_40, edge_chunk_edits,
                            nd_shrink_and_regrow)
}


def measure_array(case: str, layout: str, tmp: Path, size: dict) -> Outcome:
    """Run an array case, then write its final data at once beside it; the bytes of both."""
    path = _path(tmp, case, layout)
    t0 = time.perf_counter()
    a, final = ARRAY_CASES[case](path, layout, size)
    chunks, cparams = a.chunks, a.cparams
    a.close()
    seconds = time.perf_counter() - t0
    ref = _path(tmp, case + "_at_once", layout)
    ca.carray(final, rootdir=ref, mode="w", format=_fmt(layout), chunks=chunks,
              cparams=cparams, fsync=False).close()
    b = ca.open(path, mode="r")
    try:
        assert b.chunks == chunks
        np.testing.assert_array_equal(b[:], final)
    finally:
        b.close()
    return Outcome(case, layout, disk_bytes(path), disk_bytes(ref), seconds)


# -- strings and tables ---------------------------------------------------------------------

def string_column_edits(path: str, layout: str, size: dict) -> tuple[Any, dict]:
    """A string column on its own: 10 one-cell edits."""
    values = table_columns(size["table_rows"])["tailnum"]
    col = ca.StringColumn(values, rootdir=path, mode="w", format=_fmt(layout), fsync=False)
    for i in np.random.default_rng(11).integers(0, len(values), 10).tolist():
        col[i] = values[i] = f"X{i}"
    return col, {"values": values}


def _table(path: str, layout: str, cols: dict, **kw: Any) -> Any:
    return ca.ctable(cols, rootdir=path, mode="w", format=_fmt(layout), fsync=False, **kw)


def table_string_edits(path: str, layout: str, size: dict) -> tuple[Any, dict]:
    """10 one-cell edits of a string column, through the table (``t[i] = row``)."""
    cols = table_columns(size["table_rows"])
    t = _table(path, layout, cols)
    rng = np.random.default_rng(12)
    for i in rng.integers(0, len(cols["year"]), 10).tolist():
        row = t[i]
        row["carrier"] = cols["carrier"][i] = CARRIERS[rng.integers(0, len(CARRIERS))]
        t[i] = row
    return t, cols


def column_string_edits(path: str, layout: str, size: dict) -> tuple[Any, dict]:
    """10 one-cell edits of a string column, through the column (``t.cols[name][i] = v``)."""
    cols = table_columns(size["table_rows"])
    t = _table(path, layout, cols)
    rng = np.random.default_rng(13)
    for i in rng.integers(0, len(cols["year"]), 10).tolist():
        t.cols["carrier"][i] = cols["carrier"][i] = CARRIERS[rng.integers(0, len(CARRIERS))]
    return t, cols


def table_edits(path: str, layout: str, size: dict) -> tuple[Any, dict]:
    """Edits of numeric columns through the table: single rows and slices of rows."""
    cols = table_columns(size["table_rows"])
    t = _table(path, layout, cols)
    n = len(cols["year"])
    rng = np.random.default_rng(14)
    for _ in range(size["edits"] // 4):
        i, k = int(rng.integers(0, n - 100)), int(rng.integers(1, 100))
        rows = t[i:i + k]
        rows["dep"] = rng.integers(0, 2400, k)
        rows["dist"] = rng.integers(80, 5000, k)
        t[i:i + k] = rows
        cols["dep"][i:i + k], cols["dist"][i:i + k] = rows["dep"], rows["dist"]
    return t, cols


def column_edits(path: str, layout: str, size: dict) -> tuple[Any, dict]:
    """Edits of numeric columns through the columns: single cells and slices."""
    cols = table_columns(size["table_rows"])
    t = _table(path, layout, cols)
    n = len(cols["year"])
    rng = np.random.default_rng(15)
    for _ in range(size["edits"] // 4):
        i, k = int(rng.integers(0, n - 1000)), int(rng.integers(1, 1000))
        v = rng.integers(0, 2400, k)
        t.cols["dep"][i:i + k] = cols["dep"][i:i + k] = v
        t.cols["dist"][i] = cols["dist"][i] = float(v[0])
        t.flush()
    return t, cols


def table_row_appends(path: str, layout: str, size: dict) -> tuple[Any, dict]:
    """Appends of one row at a time (each committed), then a shrink and regrowth."""
    n, m = size["table_rows"], size["table_appends"]
    cols = table_columns(n + m)
    start = {k: v[:n] for k, v in cols.items()}
    t = _table(path, layout, start, expectedlen=n + m)
    for i in range(n, n + m):
        t.append({k: v[i:i + 1] for k, v in cols.items()})
    t.resize(n)
    t.append({k: v[n:] for k, v in cols.items()})
    return t, cols


TABLE_CASES: dict[str, Callable[[str, str, dict], tuple[Any, dict]]] = {
    f.__name__: f for f in (table_string_edits, column_string_edits, table_edits,
                            column_edits, table_row_appends)
}


def measure_table(case: str, layout: str, tmp: Path, size: dict) -> Outcome:
    """Run a table (or string column) case, then write its final data at once beside it."""
    path = _path(tmp, case, layout)
    t0 = time.perf_counter()
    if case == "string_column_edits":
        col, final = string_column_edits(path, layout, size)
        col.close()
        seconds = time.perf_counter() - t0
        ref = _path(tmp, case + "_at_once", layout)
        ca.StringColumn(final["values"], rootdir=ref, mode="w", format=_fmt(layout),
                        fsync=False).close()
        got = ca.StringColumn(rootdir=path, mode="r")
        assert list(got[:]) == list(final["values"])
        got.close()
        return Outcome(case, layout, disk_bytes(path), disk_bytes(ref), seconds)
    t, final = TABLE_CASES[case](path, layout, size)
    expectedlen = len(t) if case != "table_row_appends" else len(final["year"])
    t.close()
    seconds = time.perf_counter() - t0
    ref = _path(tmp, case + "_at_once", layout)
    ca.ctable(final, rootdir=ref, mode="w", format=_fmt(layout), fsync=False,
              expectedlen=expectedlen).close()
    got, want = ca.open(path, mode="r"), ca.open(ref, mode="r")
    try:
        for name, values in final.items():
            assert list(got.cols[name][:]) == list(values), name
            assert got.cols[name].chunklen == want.cols[name].chunklen, name
    finally:
        got.close()
        want.close()
    return Outcome(case, layout, disk_bytes(path), disk_bytes(ref), seconds)


# -- every case, for the benchmark -----------------------------------------------------------

def all_cases() -> list[tuple[str, str, str]]:
    """``(kind, case, layout)`` of every case: kind 'array' or 'table'."""
    out = [("array", case, layout) for case in ARRAY_CASES for layout in ARRAY_LAYOUTS]
    out += [("table", "string_column_edits", layout) for layout in TABLE_LAYOUTS]
    out += [("table", case, layout) for case in TABLE_CASES for layout in TABLE_LAYOUTS]
    return out


def measure(kind: str, case: str, layout: str, tmp: Path, size: dict) -> Outcome:
    if kind == "array":
        return measure_array(case, layout, tmp, size)
    return measure_table(case, layout, tmp, size)


# -- the tests -------------------------------------------------------------------------------

SIZE = SIZES["full" if SOAK else "ci"]


@pytest.mark.parametrize(("kind", "case", "layout"), all_cases(),
                         ids=[f"{c}-{lay}" for _, c, lay in all_cases()])
def test_space_stays_bounded(kind, case, layout, tmp_path):
    out = measure(kind, case, layout, tmp_path, SIZE)
    assert out.ratio <= BOUND, (
        f"{case} ({layout}): {out.nbytes:,} bytes after the changes, {out.at_once:,} for "
        f"the same data written at once: {out.ratio:.2f}x > {BOUND}x")
