"""Variable-length UTF-8 string columns, alone and in tables."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import carray as ca
from carray.errors import HandleClosedError
from carray.table.columns import strings as vlstring
from carray.table.columns.strings import STRING_DTYPE, StringColumn

TEXT = ["", "a", "héllo wörld", "日本語", "x\x00", "\x00", "tab\tnewline\n", "z" * 300,
        "emoji 🎉"]


@pytest.fixture(params=["pyarrow", "numpy"])
def codec_path(request, monkeypatch):
    """Run with pyarrow doing the UTF-8 work, and with the numpy-only path."""
    if request.param == "numpy":
        monkeypatch.setattr(vlstring, "_pyarrow", lambda: None)
    return request.param


@pytest.fixture(params=["memory", "disk"])
def root(request, tmp_path):
    return None if request.param == "memory" else str(tmp_path / "s")


def test_round_trip(codec_path, root):
    values = np.array(TEXT * 7, dtype=object)
    col = StringColumn(values, rootdir=root)
    if root:
        col = StringColumn(rootdir=root, mode="r")
    got = col[:]
    assert got.dtype == STRING_DTYPE
    assert list(got) == list(values)
    assert list(col.read(as_object=True)) == list(values)
    assert col[2] == "héllo wörld"
    assert list(col[[8, 0, 8]]) == [TEXT[8], TEXT[0], TEXT[8]]
    assert list(col[::-5]) == list(values[::-5])
    assert list(col[values == "a"]) == ["a"] * 7
    assert len(col) == 63 and col.nbytes > 0 and col.cbytes > 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(), max_size=60), st.data())
def test_any_text_round_trips(texts, draw):
    values = np.array(texts, dtype=object)
    col = StringColumn(values)
    assert list(col[:]) == texts
    if texts:
        idx = draw.draw(st.lists(st.integers(0, len(texts) - 1), max_size=10))
        assert list(col[np.array(idx, dtype=int)]) == [texts[i] for i in idx]


def test_sparse_reads_gather_only_wanted_bytes():
    values = np.array([f"row {i}" * (i % 5) for i in range(5000)], dtype=object)
    col = StringColumn(values)
    idx = np.array([4999, 0, 2500, 17])
    assert list(col[idx]) == list(values[idx])


def test_append_forms_and_arrow(root):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    col = StringColumn(["a"], rootdir=root)
    col.append("b")
    col.append(np.array(["c", "dé"], dtype=STRING_DTYPE))
    col.append(pa.array(["e", None])[:1])
    col.append(pa.chunked_array([["f"], ["g", "h"]]))
    col.flush()
    want = ["a", "b", "c", "dé", "e", "f", "g", "h"]
    assert list(col[:]) == want
    arr = col.to_arrow()
    assert arr.type == pa.large_string() and arr.to_pylist() == want
    with pytest.raises(ValueError, match="nulls"):
        col.append(pa.array(["x", None]))
    with pytest.raises(TypeError, match="str"):
        col.append(np.array([1, 2], dtype=object))
    with pytest.raises(TypeError, match="str"):
        col.append(np.array([1.5, 2.5]))
    assert list(col[:]) == want


def test_setitem_and_resize(root):
    col = StringColumn(["a", "bb", "ccc", "dddd"], rootdir=root)
    col[1] = "BBBBBB"
    col[[0, 3]] = ["", "é"]
    assert list(col[:]) == ["", "BBBBBB", "ccc", "é"]
    col.resize(2)
    col.resize(3)
    assert list(col[:]) == ["", "BBBBBB", ""]
    if root:
        assert list(StringColumn(rootdir=root, mode="r")[:]) == ["", "BBBBBB", ""]


SETITEM_CASES = [
    (0, "a"), (0, "new"), (-1, "z" * 300), (-1, ""), (2, ""), (2, "filled"), (np.int64(1), "bb"),
    (slice(None, None, 2), ["a", "", "é"]), (slice(None, None, 2), ["1", "2", "3"]),
    (slice(None, None, -1), ["f", "é", "dddd", "", "bb", "a"]),
    (slice(None, None, -2), ["p", "q", "r"]), (slice(-2, None), ["", ""]),
    ([1, 3], ["bb", "dddd"]), ([3, -5], ["Z", "Y"]), (np.array([True, False] * 3), "m"),
    (slice(1, 1), []), ([], []), (slice(None), ["a", "bb", "", "dddd", "é", "f"]),
    (slice(None), ""), (slice(None), "same"),
]


@pytest.mark.parametrize(("key", "value"), SETITEM_CASES)
def test_setitem_follows_numpy(codec_path, root, key, value):
    values = ["a", "bb", "", "dddd", "é", "f"]
    want = np.array(values, dtype=object)
    want[key] = value
    col = StringColumn(values, rootdir=root)
    col[key] = value
    assert list(col.read(as_object=True)) == list(want)
    if root:
        col.close()
        assert list(StringColumn(rootdir=root, mode="r").read(as_object=True)) == list(want)


def test_appending_no_strings_or_empty_ones(codec_path, root):
    col = StringColumn(["a"], rootdir=root)
    for nothing in ([], (), np.array([], dtype=object), np.array([], dtype=STRING_DTYPE)):
        col.append(nothing)
    col.append("")
    col.append(["", ""])
    col.resize(5)
    assert list(col[:]) == ["a", "", "", "", ""]


def _stored(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                out[os.path.join(dirpath, name)] = f.read()
    return out


def test_writing_the_values_already_there_writes_nothing(tmp_path):
    root = str(tmp_path / "s")
    col = StringColumn(["a", "", "ccc", "é"], rootdir=root)
    before = _stored(root)
    col[0] = col[0]
    col[-1] = "é"
    col[1] = ""
    col[::-2] = col[::-2]
    col[:] = col[:]
    col[[2, 2]] = "ccc"
    assert _stored(root) == before
    assert list(col[:]) == ["a", "", "ccc", "é"]


@pytest.mark.parametrize("bad", [5, None, ["a", 1]])
def test_a_value_that_is_not_a_str_changes_nothing(codec_path, root, bad):
    col = StringColumn(["a", "bb", "ccc"], rootdir=root)
    with pytest.raises(TypeError, match="str values"):
        col[slice(1, 3) if isinstance(bad, list) else 0] = bad
    assert list(col[:]) == ["a", "bb", "ccc"]
    if root:
        col.close()
        assert list(StringColumn(rootdir=root, mode="r")[:]) == ["a", "bb", "ccc"]


def test_readonly_and_interrupted_append(tmp_path):
    root = str(tmp_path / "s")
    StringColumn(["a", "b"], rootdir=root).close()
    r = StringColumn(rootdir=root, mode="r")
    with pytest.raises(ca.ReadOnlyError):
        r.append(["c"])
    # Bytes of an append whose offsets never landed are ignored, then cut.
    values = ca.open(os.path.join(root, "values"))
    values.append(np.frombuffer(b"junk", np.uint8))
    values.close()
    assert list(StringColumn(rootdir=root, mode="r")[:]) == ["a", "b"]
    w = StringColumn(rootdir=root)
    w.append(["c"])
    w.close()
    assert list(StringColumn(rootdir=root, mode="r")[:]) == ["a", "b", "c"]
    assert len(ca.open(os.path.join(root, "values"), mode="r")) == 3


def test_mode_w_takes_a_column_over_from_this_process_older_handle(tmp_path):
    root = str(tmp_path / "s")
    old = StringColumn(["a", "b"], rootdir=root)
    old.append(["not flushed"])
    with pytest.raises(ca.CArrayError, match="already open for writing"):
        StringColumn(rootdir=root, mode="a")
    new = StringColumn(["c"], rootdir=root, mode="w")
    for use in (lambda: old[:], lambda: old.append(["d"]), old.flush,
                lambda: old.attrs["x"]):
        with pytest.raises(HandleClosedError, match="later mode='w' open"):
            use()
    old.close()
    again = StringColumn(rootdir=root, mode="w")  # opening it with mode 'w' empties it
    with pytest.raises(HandleClosedError):
        new.append(["e"])
    again.append(["f"])
    with pytest.raises(ValueError, match="cannot be replaced by data read from"):
        StringColumn(again, rootdir=root, mode="w")
    with pytest.raises(ValueError, match="cannot be replaced by data read from"):
        again.copy(rootdir=root, mode="w")
    again.close()
    assert list(StringColumn(rootdir=root, mode="r")[:]) == ["f"]


def test_corrupt_columns_raise_format_errors(tmp_path):
    root = str(tmp_path / "s")
    StringColumn(["ab", "cd"], rootdir=root).close()
    offsets = ca.open(os.path.join(root, "offsets"))
    offsets[2] = 100  # past the stored bytes
    offsets.close()
    with pytest.raises(ca.FormatError, match="offsets end"):
        StringColumn(rootdir=root, mode="r")
    StringColumn(["ab"], rootdir=root, mode="w").close()
    values = ca.open(os.path.join(root, "values"))
    values[0] = 0xFF  # not UTF-8
    values.close()
    with pytest.raises(ca.FormatError, match="UTF-8"):
        StringColumn(rootdir=root, mode="r")[:]
    with open(os.path.join(root, "__vlstring__"), "w") as f:
        f.write('{"version": 9}')
    with pytest.raises(ca.FormatError, match="unsupported"):
        StringColumn(rootdir=root, mode="r")


def test_in_tables(tmp_path):
    root = str(tmp_path / "t")
    names = np.array([f"name {i} ✓" for i in range(100)], dtype=object)
    t = ca.ctable({"i": np.arange(100), "name": names}, rootdir=root, chunklen=16)
    assert t.dtype["name"] == np.dtype(object)
    t.append({"i": [100], "name": ["last"]})
    t.close()
    r = ca.open(root, mode="r")
    assert isinstance(r["name"], StringColumn)
    assert r[5]["name"] == "name 5 ✓"
    assert list(r[[100, 0]]["name"]) == ["last", "name 0 ✓"]
    got = r.fetchwhere("i > 97", outcols=["name"])
    assert list(got["name"]) == ["name 98 ✓", "name 99 ✓", "last"]
    assert list(r.where("i == 3", outcols="name")) == [("name 3 ✓",)]
    assert [row.name for row in r.iter(0, 2)] == ["name 0 ✓", "name 1 ✓"]
    c = r.copy()
    assert list(c["name"][:3]) == list(names[:3])


def test_arrow_rows_are_a_slice_of_the_stored_bytes():
    pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    words = ["", "a", "bé", "ccc", "", "dddd"] * 1000
    col = StringColumn(np.array(words, dtype=object))
    assert col.arrow_rows(2, 9).to_pylist() == words[2:9]
    assert col.arrow_rows(5990, 7000).to_pylist() == words[5990:]
    assert col.arrow_rows(3, 3).to_pylist() == []
