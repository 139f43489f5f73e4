"""CSV in and out of tables, streamed: against pandas, in bounded memory, all or nothing."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.errors import ContainerExistsError, FormatError, UnsupportedDTypeError
from carray.table.columns import kinds as table_columns


def frame(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({
        "id": np.arange(n, dtype=np.int64),
        "price": np.round(rng.normal(100, 20, n), 3),
        "carrier": rng.choice(["UA", "AA", "DL, Inc", 'say "hi"', "élan"], n),
        "day": pd.to_datetime("2024-01-01") + pd.to_timedelta(np.arange(n) % 40, unit="D"),
        "ok": np.arange(n) % 3 == 0,
    })


def as_pandas(t: ca.ctable) -> pd.DataFrame:
    return t.todataframe()


def check_same(t: ca.ctable, df: pd.DataFrame) -> None:
    got = as_pandas(t)
    assert list(got.columns) == list(df.columns)
    for name in df.columns:
        want = df[name]
        if want.dtype.kind == "M":
            np.testing.assert_array_equal(got[name].to_numpy().astype("M8[s]"),
                                          want.to_numpy().astype("M8[s]"))
        elif want.dtype.kind == "f":
            np.testing.assert_array_equal(got[name].to_numpy(), want.to_numpy())
        else:
            assert list(got[name]) == list(want), name


@pytest.mark.parametrize("where", ["memory", "disk"])
def test_read_what_pandas_wrote_as_pandas_reads_it(tmp_path, where):
    df = frame()
    path = tmp_path / "in.csv"
    df.to_csv(path, index=False)
    root = None if where == "memory" else str(tmp_path / "t")
    t = ca.ctable.from_csv(path, rootdir=root, block_size=1 << 12)
    assert t.rootdir == root and len(t) == len(df)
    assert t.dtype["day"] == np.dtype("M8[D]") and t.dtype["ok"] == np.dtype("?")
    check_same(t, pd.read_csv(path, parse_dates=["day"]))
    if root is not None:
        assert len(t.versions()) == 1
        t.close()
        check_same(ca.open(root), df)


def test_written_csv_reads_back_in_pandas_and_here(tmp_path):
    df = frame()
    t = ca.ctable.fromdataframe(df, chunklen=16)
    path = tmp_path / "out.csv"
    t.to_csv(path, rows=37)
    back = pd.read_csv(path, parse_dates=["day"])
    check_same(t, back)
    check_same(ca.ctable.from_csv(path), df)
    assert os.listdir(tmp_path) == ["out.csv"]  # the temporary name is gone


def test_to_csv_options(tmp_path):
    t = ca.ctable({"a": np.arange(3), "b": np.array(["x", "y", "z"], dtype=object),
                   "c": np.array([b"p", b"q", b"r"])})
    path = tmp_path / "o.tsv"
    t.to_csv(path, columns=["b", "a", "c"], delimiter="\t", header=False)
    back = pd.read_csv(path, sep="\t", header=None)
    assert back.values.tolist() == [["x", 0, "p"], ["y", 1, "q"], ["z", 2, "r"]]
    empty = tmp_path / "e.csv"
    t.head(0).to_csv(empty)
    assert pd.read_csv(empty).columns.tolist() == ["a", "b", "c"]
    t.to_csv(empty)  # replaces the file
    assert len(pd.read_csv(empty)) == 3


def test_read_options(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("1;2.5;x;9\n3;4.5;y;8\n")
    t = ca.ctable.from_csv(path, delimiter=";", header=False, names=["a", "b", "c", "d"],
                           usecols=["c", "a"], dtypes={"a": np.int16})
    assert t.names == ["c", "a"] and t.dtype["a"] == np.int16
    assert list(t["c"][:]) == ["x", "y"] and list(t["a"][:]) == [1, 3]
    auto = ca.ctable.from_csv(path, delimiter=";", header=False)
    assert auto.names == ["f0", "f1", "f2", "f3"]
    renamed = tmp_path / "h.csv"
    renamed.write_text("x,y\n1,2\n")
    t = ca.ctable.from_csv(renamed, names=["p", "q"], dtypes={"q": "f4"})
    assert t.names == ["p", "q"] and t.dtype["q"] == np.float32 and len(t) == 1


def test_header_only_gives_an_empty_table(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a,b\n")
    t = ca.ctable.from_csv(path, dtypes={"a": "i8", "b": "f8"}, rootdir=str(tmp_path / "t"))
    assert t.names == ["a", "b"] and len(t) == 0 and t.dtype["b"] == np.float64


def test_types_change_after_the_first_block(tmp_path):
    path = tmp_path / "late.csv"
    path.write_text("x,y\n" + "1,a\n" * 2000 + "1.5,b\n")
    root = tmp_path / "t"
    with pytest.raises(FormatError, match=r"late\.csv.*'x'.*dtypes="):
        ca.ctable.from_csv(path, rootdir=str(root), block_size=1024)
    assert sorted(os.listdir(tmp_path)) == ["late.csv"]  # nothing half-made left
    t = ca.ctable.from_csv(path, rootdir=str(root), block_size=1024, dtypes={"x": "f8"})
    assert len(t) == 2001 and t["x"][-1] == 1.5


@pytest.mark.parametrize("text", ["a,b\n1,2\n3,4,5\n", "a,b\n1,2\n3\n", "a,a\n1,2\n",
                                  "a,b\n1,2\n", "a,t\n1,10:00:00\n"])
def test_bad_csv_names_the_file(tmp_path, text):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    # The 4th: a column the options name that the file has not.
    usecols = ["a", "zz"] if text == "a,b\n1,2\n" else None
    with pytest.raises(FormatError, match=r"bad\.csv"):
        ca.ctable.from_csv(path, rootdir=str(tmp_path / "t"), usecols=usecols)
    assert sorted(os.listdir(tmp_path)) == ["bad.csv"]


def test_existing_tables_are_kept_unless_replaced(tmp_path):
    path = tmp_path / "in.csv"
    frame(10).to_csv(path, index=False)
    root = str(tmp_path / "t")
    ca.ctable({"z": np.arange(3)}, rootdir=root).close()
    with pytest.raises(ContainerExistsError):
        ca.ctable.from_csv(path, rootdir=root)
    assert ca.open(root).names == ["z"]
    t = ca.ctable.from_csv(path, rootdir=root, mode="w")
    assert t.names == list(frame(1).columns) and len(t) == 10
    with pytest.raises(FileNotFoundError, match="nope"):
        ca.ctable.from_csv(tmp_path / "nope.csv")


def test_a_failed_write_leaves_nothing(tmp_path):
    t = ca.ctable({"a": np.arange(4), "v": np.zeros((4, 2))})
    path = tmp_path / "o.csv"
    path.write_text("old\n")
    with pytest.raises(UnsupportedDTypeError, match="'v'"):
        t.to_csv(path)
    assert os.listdir(tmp_path) == ["o.csv"] and path.read_text() == "old\n"


def test_bcolz_format_tables_from_csv(tmp_path):
    bcolz = pytest.importorskip("bcolz", reason="bcolz 1.x checks the bcolz format")
    path = tmp_path / "n.csv"
    frame(50)[["id", "price"]].to_csv(path, index=False)
    t = ca.ctable.from_csv(path, rootdir=str(tmp_path / "t"), format="bcolz", block_size=256)
    t.close()
    b = bcolz.open(str(tmp_path / "t"))
    np.testing.assert_array_equal(b["price"][:], frame(50)["price"].to_numpy())


def test_missing_floats_and_times_come_back_missing(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("f,t\n1.5,2024-01-01 00:00:00\n,\n2.5,2024-01-02 10:00:00\n")
    t = ca.ctable.from_csv(path)
    f, when = t["f"][:], t["t"][:]
    for values, hole in ((f, np.isnan(f)), (when, np.isnat(when))):
        name = "f" if values is f else "t"
        valid = table_columns.read_valid(t.cols[name], range(3))
        # Missing: as NaN/NaT, or flagged by the missing-values contract.
        assert hole[1] or (valid is not None and not valid[1])
    assert f[0] == 1.5 and f[2] == 2.5
    t.to_csv(tmp_path / "back.csv")
    assert pd.read_csv(tmp_path / "back.csv").isna().sum().tolist() == [1, 1]


# -- bounded memory ------------------------------------------------------------------------------


def _big_csv(path: os.PathLike, rows: int) -> int:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    rng = np.random.default_rng(3)
    words = np.array(["alpha", "beta", "gamma", "delta"], dtype=object)
    pcsv.write_csv(pa.table({"i": np.arange(rows), "x": rng.random(rows),
                             "s": words[np.arange(rows) % 4]}), path)
    return os.path.getsize(path)


def _peaks(tmp_path, rows: int, block: int) -> tuple[int, int, int]:
    """(file size, peak traced bytes reading it into a stored table, writing it back)."""
    big = tmp_path / f"big{rows}.csv"
    size = _big_csv(big, rows)
    gc.collect()
    tracemalloc.start()
    try:
        t = ca.ctable.from_csv(big, rootdir=str(tmp_path / f"t{rows}"), block_size=block)
        _, read_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        t.to_csv(tmp_path / f"out{rows}.csv", rows=8192)
        _, write_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(t) == rows
    assert os.path.getsize(tmp_path / f"out{rows}.csv") > size * 0.9
    return size, read_peak, write_peak


def test_reading_and_writing_take_memory_of_a_block_not_the_file(tmp_path):
    block = 1 << 16
    _peaks(tmp_path, 2_000, block)  # what is built once (caches, lazy imports) is not measured
    small = _peaks(tmp_path, 25_000, block)
    big = _peaks(tmp_path, 200_000, block)
    assert big[0] > 7 * small[0] and big[0] > 80 * block
    # Eight times the file, little more memory: a block's decoded columns and the columns'
    # open chunks (and what indexes the chunks written, a few bytes each), never the file.
    for k in (1, 2):
        assert big[k] < small[k] + (big[0] - small[0]) / 3, (small, big)
        assert big[k] < 0.75 * big[0], (small, big)


_RSS_SCRIPT = """
import resource, sys
import carray as ca
peaks = []
for name in sys.argv[1:3]:
    ca.ctable.from_csv(name, rootdir=name + ".t", block_size=1 << 16).close()
    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
print(*peaks)
"""


def test_native_memory_is_bounded_by_the_block_too(tmp_path):
    # Arrow's buffers are not traced by tracemalloc: the process's peak resident size
    # after a file, then after one eight times larger, grows by much less than the file.
    small, big = tmp_path / "small.csv", tmp_path / "big.csv"
    small_size, big_size = _big_csv(small, 20_000), _big_csv(big, 160_000)
    out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(small), str(big)],
                         capture_output=True, text=True, check=True, env=os.environ.copy())
    first, second = (int(x) for x in out.stdout.split())
    assert second - first < (big_size - small_size) / 3, (first, second, big_size)


# -- against pandas, drawn ----------------------------------------------------------------------

_text = st.text(st.sampled_from("ab ,\"'\nxé;"), min_size=0, max_size=6).map(lambda s: "s" + s)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.integers(-2**40, 2**40),
                               st.floats(allow_nan=False, allow_infinity=False, width=64),
                               _text), min_size=1, max_size=25),
       block=st.integers(1 << 10, 1 << 14))
def test_round_trips_match_pandas(tmp_path_factory, rows, block):
    d = tmp_path_factory.mktemp("rt")
    df = pd.DataFrame(rows, columns=["i", "f", "s"])
    df.to_csv(d / "p.csv", index=False)
    ours = ca.ctable.from_csv(d / "p.csv", block_size=block)
    check_same(ours, pd.read_csv(d / "p.csv"))
    ours.to_csv(d / "o.csv")
    check_same(ours, pd.read_csv(d / "o.csv"))


def test_missing_values_are_written_as_empty_fields(tmp_path, monkeypatch):
    from carray.table import csv as table_csv

    t = ca.ctable({"n": np.array([1, 0, 3]), "s": np.array(["a", "", "c"], dtype=object)})
    valid = {"n": np.array([True, False, True]), "s": np.array([True, False, True])}
    cols = {id(t.cols[k]): k for k in t.names}
    monkeypatch.setattr(table_csv, "read_valid", lambda col, rows: (
        valid[cols[id(col)]][np.asarray(rows)] if id(col) in cols else None))
    t.to_csv(tmp_path / "m.csv")
    assert (tmp_path / "m.csv").read_text().splitlines()[1:] == ['1,"a"', ",", '3,"c"']
    back = pd.read_csv(tmp_path / "m.csv")
    assert back["n"].isna().tolist() == [False, True, False]


# -- round trips keep kinds, missing values and zones (as pandas reads them) -----------------


def test_empty_text_fields_are_missing_as_pandas_reads_them(tmp_path):
    path = tmp_path / "f.csv"
    path.write_text('tailnum,x\nN1,1\n,2\n"",3\nNA,4\nN2,5\n')
    t = ca.ctable.from_csv(path)
    want = pd.read_csv(path)
    assert t["tailnum"].null_count() == int(want["tailnum"].isna().sum()) == 3
    assert t.todataframe()["tailnum"].isna().tolist() == want["tailnum"].isna().tolist()


def test_floats_dates_and_zones_round_trip(tmp_path):
    n = 40
    ts = pd.Series(pd.date_range("2024-03-30", periods=n, freq="5h", tz="Europe/Paris"))
    ts[2] = pd.NaT
    df = pd.DataFrame({
        "f": np.where(np.arange(n) % 7 == 3, np.nan, np.arange(n) * 0.5),  # 1.0 is a float
        "g": np.arange(n, dtype=np.float64),  # every value integral
        "ts": ts,
    })
    t = ca.ctable({**{k: df[k] for k in ("f", "g", "ts")},
                   "d": (np.datetime64("2024-02-27") + np.arange(n)).astype("M8[D]")})
    path = tmp_path / "r.csv"
    t.to_csv(path)
    back = ca.ctable.from_csv(path)
    assert back.dtype["f"] == back.dtype["g"] == np.float64
    assert back.dtype["d"] == t.dtype["d"] == np.dtype("M8[D]")
    assert back["f"].null_count() == 6
    np.testing.assert_array_equal(np.asarray(back["g"]), df["g"].to_numpy())
    got = back.todataframe()
    assert str(got["ts"].dt.tz) == "UTC"  # a CSV file holds offsets, not zone names
    pd.testing.assert_series_equal(got["ts"].dt.tz_convert("Europe/Paris").dt.as_unit("us"),
                                   ts.dt.as_unit("us"), check_names=False)
    named = ca.ctable.from_csv(path, dtypes={"ts": "datetime64[us, Europe/Paris]"})
    pd.testing.assert_series_equal(named.todataframe()["ts"], ts.dt.as_unit("us"),
                                   check_names=False)
    theirs = pd.read_csv(path)  # pandas reads the same values
    assert theirs["f"].dtype == theirs["g"].dtype == np.float64
    np.testing.assert_array_equal(theirs["f"].to_numpy(), df["f"].to_numpy())
