"""The ds format: fixtures written by ds-format 5.0.2, round trips, ds-format reading our
files, partial reads, and bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from carray.errors import FormatError, UnsupportedDTypeError
from carray.formats import ds
from carray.formats import local_write as _local_write
from carray.formats.ds import header as _ds_header
from carray.formats.ds.reader import Reader

DATA = Path(__file__).parent.parent / "data" / "ds"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
FIXTURES = {f["name"]: f for f in MANIFEST["fixtures"]}

NUMERIC = ["float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "uint16", "uint32", "uint64"]


def ds_format():
    return pytest.importorskip("ds_format", reason="ds-format is a test dependency (CI has it)")


def assert_values(actual, expected, mask=None):
    """``actual`` holds ``expected`` (where not masked) and exactly the mask ``mask``."""
    got_mask = np.ma.getmaskarray(actual)
    if mask is None:
        assert not isinstance(actual, np.ma.MaskedArray) or not got_mask.any()
        mask = np.zeros(np.shape(expected), bool)
    np.testing.assert_array_equal(got_mask, mask)
    data = np.asarray(np.ma.getdata(actual))
    expected = np.asarray(expected)
    assert data.shape == expected.shape
    if expected.dtype.kind in "SUO":
        assert data[~mask].tolist() == expected[~mask].tolist()
    else:
        # numpy scalars are always in native byte order; arrays keep the file's.
        assert data.dtype == expected.dtype if data.ndim else \
            data.dtype.name == expected.dtype.name
        np.testing.assert_array_equal(data[~mask], expected[~mask])


def expected_of(name):
    meta = json.loads((DATA / f"{name}.expected.json").read_text())
    with np.load(DATA / f"{name}.expected.npz") as z:
        values = {k: z[k] for k in z.files}
    return meta, values


# -- the fixtures ds-format wrote -------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_reads_to_expected_values(name):
    fixture = FIXTURES[name]
    meta, values = expected_of(name)
    d = ds.read(DATA / fixture["path"])
    assert sorted(k for k in d if k != ".") == sorted(fixture["variables"])
    for var, kind in meta["var_kinds"].items():
        data = d[var]
        entry = meta["header"][var]
        if kind == "none":
            # ds-format returns None for empty variables too; we keep their shape and type.
            if entry[".size"] is None:
                assert data is None
            else:
                assert isinstance(data, np.ndarray) and data.shape == tuple(entry[".size"])
                assert data.dtype == np.dtype(entry[".type"])
            continue
        if kind == "scalar":
            assert np.ndim(data) == 0 and not isinstance(data, np.ndarray)
        elif kind == "masked":
            assert isinstance(data, np.ma.MaskedArray)
        else:
            assert isinstance(data, np.ndarray) and not isinstance(data, np.ma.MaskedArray)
        assert_values(data, values[var], values.get(f"{var}.mask"))
    assert d["."]["."] == meta["header"]["."]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_header_and_metadata(name):
    meta, _ = expected_of(name)
    path = DATA / FIXTURES[name]["path"]
    assert ds.read_header(path) == meta["header"]
    assert ds.meta is ds.read_header
    d = ds.read(path)
    if not FIXTURES[name].get("optional"):
        # What ds-format's own reader returns as d['.'] (for the optional fixtures it
        # cannot read, read_meta is the writer's input instead).
        assert d["."] == meta["read_meta"]


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_partial_reads_match_full_read(name):
    path = DATA / FIXTURES[name]["path"]
    full = ds.read(path)
    for key, data in full.items():
        if key == "." or np.ndim(data) == 0 or np.size(data) == 0:
            continue
        dims = full["."][key][".dims"]
        for sel in ({dims[0]: slice(1, None, 2)}, {dims[0]: [-1, 0]}, {dims[-1]: 1}):
            part = ds.read(path, [key], sel)[key]
            index = tuple(sel.get(dim, slice(None)) for dim in dims)
            want = data
            for axis in range(len(index) - 1, -1, -1):  # outer indexing, one axis at a time
                want = want[(slice(None),) * axis + (index[axis],)] \
                    if not isinstance(index[axis], list) else want.take(index[axis], axis=axis)
            if np.ndim(want) == 0:  # one element of a 1-d variable
                assert bool(np.ma.getmaskarray(part)) == (want is np.ma.masked)
                if want is not np.ma.masked:
                    assert part == want
                continue
            assert_values(part, np.ma.getdata(want),
                          np.ma.getmaskarray(want) if isinstance(want, np.ma.MaskedArray)
                          else None)


def test_string_offset_bug_is_repaired_for_partial_reads_too():
    path = DATA / "masked_string_offset_bug.ds"
    _, values = expected_of("masked_string_offset_bug")
    d = ds.read(path, ["b_after"], {"m": slice(1, 3)})
    np.testing.assert_array_equal(d["b_after"], values["b_after"][1:3])


def test_string_offset_bug_repair_applies_within_the_file_too(tmp_path):
    """ds-format's over-counted .len moves a later offset *inside* the file: the reader
    must still find the right bytes (ds-format itself reads garbage here)."""
    dsf = ds_format()
    label = np.ma.array(np.array(["a", "bb", "c", "d"], dtype=object), mask=[1, 0, 1, 0])
    data = {"a_label": label, "b_mid": np.arange(3.0), "c_end": np.arange(10.0),
            ".": {"a_label": {".dims": ["n"]}, "b_mid": {".dims": ["m"]},
                  "c_end": {".dims": ["k"]}}}
    path = tmp_path / "bug.ds"
    dsf.write(str(path), data)
    header = ds.read_header(path)
    assert header["b_mid"][".offset"] == header["a_label"][".len"]  # over-counted by 4
    d = ds.read(path)
    np.testing.assert_array_equal(d["b_mid"], np.arange(3.0))
    np.testing.assert_array_equal(d["c_end"], np.arange(10.0))
    assert d["a_label"].tolist() == [None, "bb", None, "d"]


# -- round trips ------------------------------------------------------------------------------

def roundtrip(tmp_path, d, name="x.ds"):
    path = tmp_path / name
    ds.write(path, d)
    return ds.read(path), path


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("type_", NUMERIC)
def test_roundtrip_numeric_types_both_byte_orders(tmp_path, type_, order):
    dt = np.dtype(type_).newbyteorder(order)
    info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)
    values = np.array([info.min, 0, 1, info.max] * 3, dtype=dt).reshape(3, 4)
    d, path = roundtrip(tmp_path, {"v": values, ".": {"v": {".dims": ["a", "b"]}}})
    assert d["v"].dtype == dt and d["v"].shape == (3, 4)
    np.testing.assert_array_equal(d["v"], values)
    entry = ds.read_header(path)["v"]
    assert entry[".type"] == type_
    assert entry[".endian"] == ("b" if dt.itemsize == 1 or order == ">" else "l")
    assert entry[".len"] == values.nbytes


def test_roundtrip_bool_strings_scalars_empty_none(tmp_path):
    d = {
        "b13": np.array([True, False, True] * 4 + [True]),
        "s": np.array([b"", b"a\x00b", b"\xff" * 10], dtype=object),
        "sfixed": np.array([b"ab", b"c"]),
        "u": np.array(["", "é中😀", "x" * 100]),
        "i0": np.int16(-3),
        "f0": 2.5,
        "u0": "word",
        "s0": b"\x00",
        "b0": np.bool_(True),
        "empty": np.zeros((0, 4), "u2"),
        "nodata": None,
        ".": {"nodata": {".type": "int32", ".dims": [], "note": "none"}},
    }
    r, path = roundtrip(tmp_path, d)
    np.testing.assert_array_equal(r["b13"], d["b13"])
    assert r["s"].tolist() == d["s"].tolist()
    assert r["sfixed"].tolist() == [b"ab", b"c"]
    assert r["u"].tolist() == d["u"].tolist()
    assert r["i0"] == -3 and r["i0"].dtype == np.int16 and np.ndim(r["i0"]) == 0
    assert r["f0"] == 2.5 and r["f0"].dtype == np.float64
    assert r["u0"] == "word" and r["s0"] == b"\x00" and r["b0"] is np.True_
    assert r["empty"].shape == (0, 4) and r["empty"].dtype == np.uint16
    assert r["nodata"] is None
    header = ds.read_header(path)
    assert header["nodata"] == {".type": "int32", ".dims": [], "note": "none", ".size": None,
                                ".offset": header["nodata"][".offset"], ".len": 0,
                                ".missing": False}
    assert ".endian" not in header["b13"] and header["b13"][".len"] == 2


@pytest.mark.parametrize("type_", [*NUMERIC, "bool", "str", "unicode"])
def test_roundtrip_masked_every_type(tmp_path, type_):
    mask = np.array([[1, 0, 0, 1, 0], [0, 0, 1, 1, 1]], bool)
    if type_ == "str":
        values = np.array([[b"a", b"", b"ccc", b"d", b"e"]] * 2, dtype=object)
    elif type_ == "unicode":
        values = np.array([["α", "", "γγ", "d", "e"]] * 2, dtype=object)
    else:
        values = (np.arange(10) % 2).astype(type_).reshape(2, 5)
    d, path = roundtrip(tmp_path, {"m": np.ma.MaskedArray(values, mask=mask), "z": [1, 2]})
    assert_values(d["m"], values, mask)
    assert d["z"].tolist() == [1, 2]
    entry = ds.read_header(path)["m"]
    assert entry[".missing"] is True
    # .len is exact: bitmask, then only the unmasked values.
    kept = values[~mask]
    if type_ in ("str", "unicode"):
        payload = 8 * kept.size + sum(len(x if isinstance(x, bytes) else x.encode())
                                      for x in kept)
    elif type_ == "bool":
        payload = (kept.size + 7) // 8
    else:
        payload = kept.nbytes
    assert entry[".len"] == 2 + payload
    assert ds.read_header(path)["z"][".offset"] == entry[".len"]


def test_mask_without_masked_values_is_not_stored(tmp_path):
    d, path = roundtrip(tmp_path, {"x": np.ma.MaskedArray([1.0, 2.0], mask=[False, False])})
    assert ds.read_header(path)["x"][".missing"] is False
    assert not isinstance(d["x"], np.ma.MaskedArray)


def test_lists_with_none_become_masked(tmp_path):
    d, _ = roundtrip(tmp_path, {"x": [1, None, 3], "s": ["a", None]})
    assert_values(d["x"], np.array([1, 0, 3]), np.array([0, 1, 0], bool))
    assert d["s"][0] == "a" and d["s"].mask.tolist() == [False, True]


def test_masked_scalar_keeps_its_type(tmp_path):
    d, _ = roundtrip(tmp_path, {"x": np.ma.masked_array(np.float32(1), mask=True)})
    assert isinstance(d["x"], np.ma.MaskedArray) and d["x"].dtype == np.float32
    assert d["x"].mask.all()


def test_escaped_and_hidden_names(tmp_path):
    d = {"\\.dot": np.arange(2), "\\\\back": np.arange(3), ".hidden": np.arange(4),
         "plain": np.arange(1), ".": {"\\.dot": {".dims": ["n"], "units": "m"}}}
    r, path = roundtrip(tmp_path, d)
    assert sorted(k for k in r if k != ".") == ["\\.dot", "\\\\back", "plain"]
    assert list(ds.read_header(path)) == ["\\.dot", "\\\\back", "plain", "."]
    assert r["."]["\\.dot"]["units"] == "m"
    assert ds.unescape("\\.dot") == ".dot" and ds.escape(".dot") == "\\.dot"
    assert ds.escape("\\x") == "\\\\x" and ds.unescape("\\\\x") == "\\x"
    # Unescaped names are accepted when reading.
    np.testing.assert_array_equal(ds.read(path, [".dot"])["\\.dot"], np.arange(2))
    # Made-up dims use the unescaped name, as ds-format's do.
    assert ds.read_header(path)["\\\\back"][".dims"] == ["\\back_1"]


def test_attributes_round_trip(tmp_path):
    attrs = {"s": "é", "i": 1, "f": 2.5, "l": [1, "a"], "d": {"k": [1]}, "b": False,
             "n": None, "np": np.float32(1.5), "arr": np.arange(3), "nan": float("nan")}
    d, path = roundtrip(tmp_path, {"x": np.arange(2), ".": {"x": dict(attrs), ".": {"t": 1}}})
    got = d["."]["x"]
    # As ds-format writes and reads them: numpy values as Python values, NaN as NaN.
    assert type(got["np"]) is float and got["np"] == 1.5
    assert got["arr"] == [0, 1, 2]
    assert type(got["nan"]) is float and np.isnan(got["nan"])
    for key in ("s", "i", "f", "l", "d", "b", "n"):
        assert got[key] == attrs[key]
    assert d["."]["."] == {"t": 1}
    assert b"\\u00e9" in path.read_bytes()  # ASCII header, as ds-format writes it
    header = ds.read_header(path)["x"]
    assert header["f"] == 2.5 and header["l"] == [1, "a"] and header["d"] == {"k": [1]}
    assert header["np"] == 1.5 and b"NaN" in path.read_bytes().split(b"\n")[1]
    theirs = ds_format().read(str(path))["."]["x"]
    assert theirs["np"] == 1.5 and theirs["arr"] == [0, 1, 2] and np.isnan(theirs["nan"])


def test_header_format_matches_ds_format_byte_for_byte(tmp_path):
    dsf = ds_format()
    d = {"t": np.arange(5, dtype=">i4"), "x": np.linspace(0, 1, 6).reshape(2, 3),
         "m": np.ma.MaskedArray(np.arange(8.0), mask=[1, 0] * 4), "k": np.uint8(7),
         "b": np.array([True, False] * 8), "u": np.array(["a", "bc"], dtype=object),
         ".": {"t": {".dims": ["t"], "units": "s"}, "x": {".dims": ["r", "c"]},
               "m": {".dims": ["q"]}, "k": {".dims": []}, "b": {".dims": ["p"]},
               "u": {".dims": ["w"]}, ".": {"title": "same"}}}
    ds.write(tmp_path / "ours.ds", d)
    dsf.write(str(tmp_path / "theirs.ds"), d)
    assert (tmp_path / "ours.ds").read_bytes() == (tmp_path / "theirs.ds").read_bytes()


# -- ds-format reads what we write ------------------------------------------------------------

def test_ds_format_reads_our_files(tmp_path):
    dsf = ds_format()
    mask = np.array([1, 0, 0, 0, 0] * 4, bool)  # 16 kept: ds-format reads such bools
    d = {f"n_{t}": np.arange(20).astype(t) for t in NUMERIC}
    d.update({
        "be": np.arange(6, dtype=">f8").reshape(2, 3),
        "b16": np.array([True, False, True, True] * 4),
        "mb": np.ma.MaskedArray(np.arange(20) % 3 == 0, mask=mask),
        "mf": np.ma.MaskedArray(np.arange(20.0), mask=mask),
        # A masked string before other variables: ds-format's own files get the later
        # offsets wrong here; ours are exact, so ds-format reads them.
        "a_label": np.ma.MaskedArray(np.array(["x", "yy"] * 10, dtype=object), mask=mask),
        "s": np.array([b"\x00\xff", b"", b"abc"], dtype=object),
        "u": np.array(["é", "中文", ""], dtype=object),
        "scalar": np.float32(1.25),
        "empty": np.zeros((0,)),
        "\\.esc": np.arange(2),
    })
    ds.write(tmp_path / "ours.ds", d)
    theirs = dsf.read(str(tmp_path / "ours.ds"))
    ours = ds.read(tmp_path / "ours.ds")
    for key, data in ours.items():
        if key == ".":
            continue
        if key == "empty":
            assert theirs[key] is None  # ds-format's reading of empty variables
            continue
        want = theirs[key]
        if isinstance(data, np.ma.MaskedArray):
            assert isinstance(want, np.ma.MaskedArray)
            np.testing.assert_array_equal(np.ma.getmaskarray(want), np.ma.getmaskarray(data))
            assert data.compressed().tolist() == want.compressed().tolist()
        else:
            assert np.asarray(want).tolist() == np.asarray(data).tolist(), key
            assert np.asarray(want).dtype == np.asarray(data).dtype


def test_we_read_what_ds_format_writes(tmp_path):
    dsf = ds_format()
    mask = np.array([0, 1] * 8, bool)
    d = {f"n_{t}": np.ma.MaskedArray(np.arange(16).astype(t), mask=mask) for t in NUMERIC}
    d.update({"b": np.ma.MaskedArray(np.arange(16) % 3 == 0, mask=mask),
              "grid": np.arange(24.0).reshape(2, 3, 4), "s": np.array([b"q", b"\x00"]),
              "z_u": np.ma.MaskedArray(np.array(["a", "b", "c"], dtype=object),
                                       mask=[0, 1, 0])})
    dsf.write(str(tmp_path / "theirs.ds"), d)
    ours = ds.read(tmp_path / "theirs.ds")
    for key, data in d.items():
        assert_values(ours[key], np.ma.getdata(data),
                      np.ma.getmaskarray(data) if isinstance(data, np.ma.MaskedArray) else None)


# -- partial reads read only what they need ---------------------------------------------------



def test_partial_reads_touch_only_the_needed_bytes(tmp_path, count_reads):
    big = np.arange(400 * 1000, dtype="f8").reshape(400, 1000)  # 3.2 MB
    mask = np.zeros(big.shape, bool)
    mask[::7, ::3] = True
    labels = np.array([f"label {i}" for i in range(5000)], dtype=object)
    d = {"a_big": big, "b_masked": np.ma.MaskedArray(big, mask=mask), "c_labels": labels,
         "d_small": np.arange(3), ".": {"a_big": {".dims": ["t", "x"]},
                                         "b_masked": {".dims": ["t", "x"]},
                                         "c_labels": {".dims": ["l"]}}}
    path = tmp_path / "big.ds"
    ds.write(path, d)
    size = path.stat().st_size
    prefix = _ds_header.PREFIX

    count_reads["bytes"] = 0
    assert ds.read_header(path)["d_small"][".size"] == [3]
    assert count_reads["bytes"] <= prefix

    count_reads["bytes"] = 0
    np.testing.assert_array_equal(ds.read(path, ["d_small"])["d_small"], np.arange(3))
    assert count_reads["bytes"] <= prefix + 24

    count_reads["bytes"] = 0
    part = ds.read(path, ["a_big"], {"t": slice(100, 110)})["a_big"]
    np.testing.assert_array_equal(part, big[100:110])
    assert count_reads["bytes"] <= prefix + 10 * 8000

    # Masked: the whole mask (50 kB), then only the selected rows' stored values.
    count_reads["bytes"] = 0
    part = ds.read(path, ["b_masked"], {"t": slice(200, 210), "x": [5, 3]})["b_masked"]
    assert_values(part, big[200:210][:, [5, 3]], mask[200:210][:, [5, 3]])
    assert count_reads["bytes"] <= prefix + (big.size + 7) // 8 + 10 * 8000

    # Strings: the length table up to the selection, then only the selected strings.
    count_reads["bytes"] = 0
    part = ds.read(path, ["c_labels"], {"l": slice(10, 13)})["c_labels"]
    assert part.tolist() == ["label 10", "label 11", "label 12"]
    assert count_reads["bytes"] <= prefix + 13 * 8 + 30

    count_reads["bytes"] = 0
    ds.read(path)
    assert count_reads["bytes"] >= size - prefix  # the counter sees full reads too


def test_a_corrupt_byte_outside_the_selection_does_not_matter(tmp_path):
    labels = np.array(["aa", "bb", "cc", "dd"], dtype=object)
    path = tmp_path / "x.ds"
    ds.write(path, {"u": labels})
    raw = bytearray(path.read_bytes())
    raw[-1] = 0xFF  # "dd" -> invalid UTF-8
    path.write_bytes(bytes(raw))
    assert ds.read(path, sel={"u_1": slice(0, 2)})["u"].tolist() == ["aa", "bb"]
    with pytest.raises(FormatError, match="x.ds.*'u'.*UTF-8"):
        ds.read(path)


def test_selection_keys(tmp_path):
    grid = np.arange(60).reshape(3, 4, 5)
    path = tmp_path / "g.ds"
    ds.write(path, {"g": grid, "t": np.arange(3), ".": {"g": {".dims": ["t", "y", "x"]},
                                                         "t": {".dims": ["t"]}}})
    d = ds.read(path, sel={"t": -1, "x": np.array([True, False, True, False, False]),
                           "y": slice(None, None, -2)})
    np.testing.assert_array_equal(d["g"], grid[-1][::-2][:, [0, 2]])
    assert d["."]["g"][".dims"] == ["y", "x"] and d["."]["g"][".size"] == [2, 2]
    assert d["t"] == 2 and d["."]["t"][".dims"] == []
    assert ds.read(path, sel={"t": []})["g"].shape == (0, 4, 5)
    with pytest.raises(KeyError, match="no dimension 'nope'"):
        ds.read(path, sel={"nope": 1})
    with pytest.raises(KeyError, match="no variable 'q'"):
        ds.read(path, ["q"])
    with pytest.raises(IndexError):
        ds.read(path, sel={"t": 3})
    np.testing.assert_array_equal(ds.read_variable(path, "g", (1, slice(0, 2))), grid[1, :2])


def test_one_masked_element_keeps_its_type():
    path = DATA / "missing_values.ds"
    count = ds.read_variable(path, "count", (1,))
    assert isinstance(count, np.ma.MaskedArray) and count.dtype == np.int64 and count.mask
    assert ds.read_variable(path, "count", (2,)) == 2
    label = ds.read_variable(path, "zlabel", (0,))
    assert label.dtype == object and label.mask


def test_select_and_merge_in_memory(tmp_path):
    a = {"x": np.ma.MaskedArray([1, 2], mask=[0, 1]), "c": np.float32(5), "s": ["a", "b"],
         ".": {"x": {".dims": ["t"]}, "s": {".dims": ["t"]}, ".": {"title": "a"}}}
    b = {"x": np.array([3]), "c": np.float32(6), "s": ["z"],
         ".": {"x": {".dims": ["t"]}, "s": {".dims": ["t"]}}}
    m = ds.merge([a, b], "t")
    assert m["x"].tolist() == [1, None, 3] and m["c"] == 5
    assert m["s"].tolist() == ["a", "b", "z"] and m["."]["x"][".size"] == [3]
    assert m["."]["."] == {"title": "a"}
    assert ds.dims(m) == {"t": 3} and ds.dims(m, "c") == []
    s = ds.select(m, ["x"], {"t": slice(1, None)})
    assert s["x"].tolist() == [None, 3] and list(s) == [".", "x"]
    with pytest.raises(ValueError, match="dataset 1 has no variable 's'"):
        ds.merge([a, {"c": 1}], "t")


def test_merge_takes_paths_as_well_as_datasets(tmp_path):
    for i in range(2):
        ds.write(tmp_path / f"p{i}.ds", {"t": np.arange(2) + 2 * i, "x": np.ma.MaskedArray(
            [i, i], mask=[i, 0]), ".": {"t": {".dims": ["t"]}, "x": {".dims": ["t"]}}})
    m = ds.merge([tmp_path / "p0.ds", str(tmp_path / "p1.ds")], "t")
    assert m["t"].tolist() == [0, 1, 2, 3] and m["x"].tolist() == [0, 0, None, 1]
    mixed = ds.merge([ds.read(tmp_path / "p0.ds"), tmp_path / "p1.ds"], "t")
    assert mixed["t"].tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="a sequence of datasets or paths"):
        ds.merge(str(tmp_path / "p0.ds"), "t")
    with pytest.raises(FileNotFoundError):
        ds.merge([tmp_path / "missing.ds"], "t")


def test_iter_rows_reads_a_block_at_a_time_what_read_reads():
    for name in ("missing_values", "all_types", "objects_empty_none", "endianness",
                 "masked_string_offset_bug", "multidim_scalars", "bool_not_multiple_of_8"):
        path = DATA / f"{name}.ds"
        full = ds.read(path)
        with Reader(path) as reader:
            for key, v in reader.header.layouts.items():
                for step in (1, 3, 1000):
                    blocks = list(reader.iter_rows(v, step))
                    if v.shape is None or not v.shape or not v.shape[0]:
                        assert len(blocks) == (v.shape is not None and not v.shape)
                        continue
                    assert [len(b) for b in blocks[:-1]] == [step] * (len(blocks) - 1)
                    assert {b.dtype for b in blocks} == {full[key].dtype}
                    assert {isinstance(b, np.ma.MaskedArray) for b in blocks} == {v.missing}
                    joined = np.ma.concatenate(blocks)
                    np.testing.assert_array_equal(np.ma.getmaskarray(joined),
                                                  np.ma.getmaskarray(full[key]))
                    assert joined.compressed().tolist() == \
                        np.ma.asarray(full[key]).compressed().tolist()


# -- writing: errors and atomicity ------------------------------------------------------------

def test_write_rejects_what_ds_cannot_hold(tmp_path):
    path = tmp_path / "x.ds"
    ds.write(path, {"ok": np.arange(3)})
    before = path.read_bytes()
    for bad in (np.zeros(2, "f2"), np.zeros(2, complex), np.zeros(2, "M8[s]"),
                np.array([1, "a"], dtype=object)):
        with pytest.raises(UnsupportedDTypeError, match="'v'"):
            ds.write(path, {"v": bad})
    with pytest.raises(ValueError, match="2 dims"):
        ds.write(path, {"v": np.zeros(3), ".": {"v": {".dims": ["a", "b"]}}})
    with pytest.raises(ValueError, match="dimension 'n'"):
        ds.write(path, {"a": np.zeros(3), "b": np.zeros(4),
                        ".": {"a": {".dims": ["n"]}, "b": {".dims": ["n"]}}})
    for bad in (object(), 1j, b"raw", np.datetime64("2020-01-01")):
        with pytest.raises(TypeError, match="attribute 'bad'"):
            ds.write(path, {"a": np.zeros(1), ".": {"a": {"bad": bad}}})
    with pytest.raises(TypeError, match="variable names"):
        ds.write(path, {1: np.zeros(1)})
    assert path.read_bytes() == before  # failed writes leave the old file alone
    assert os.listdir(tmp_path) == ["x.ds"]  # and no temporary files


# -- bad input --------------------------------------------------------------------------------

def _file(tmp_path, header: dict | str | bytes, body: bytes = b"", first=b"ds-1.0\n"):
    if isinstance(header, dict):
        header = json.dumps(header)
    if isinstance(header, str):
        header = header.encode()
    path = tmp_path / "bad.ds"
    path.write_bytes(first + header + b"\n" + body)
    return path


def _var(**kw):
    entry = {".dims": ["n"], ".size": [4], ".offset": 0, ".len": 32, ".type": "float64",
             ".missing": False, ".endian": "l"}
    entry.update(kw)
    return {"v": {k: v for k, v in entry.items() if v is not None}, ".": {}}


BAD = {
    "not ds": ({}, b"", b"CDF\x01\n", "not a ds file"),
    "version": ({}, b"", b"ds-2.0\n", "unsupported ds version"),
    "no newline": (None, b"", b"ds-1.0\n", "not terminated"),
    "json": ('{"v": ', b"", None, "header is not valid JSON"),
    "utf8": (b'{"\xff": 1}', b"", None, "header is not UTF-8"),
    "not object": ("[1, 2]", b"", None, "not a JSON object"),
    "entry": ({"v": 3}, b"", None, "'v': header entry"),
    "attrs": ({".": [1]}, b"", None, "dataset attributes"),
    "type": (_var(**{".type": "float16"}), bytes(32), None, "'v': unknown .type 'float16'"),
    "size": (_var(**{".size": [-1]}), bytes(32), None, "'v': .size entries"),
    "size type": (_var(**{".size": "4"}), bytes(32), None, "'v': .size must be"),
    "offset": (_var(**{".offset": -2}), bytes(32), None, "'v': .offset must be"),
    "len": (_var(**{".len": 31}), bytes(32), None, "'v': .len 31 disagrees"),
    "len bool": (_var(**{".len": True}), bytes(32), None, "'v': .len must be"),
    "missing": (_var(**{".missing": 1}), bytes(32), None, "'v': .missing"),
    "endian": (_var(**{".endian": "x"}), bytes(32), None, "'v': .endian"),
    "dims": (_var(**{".dims": ["a", "b"]}), bytes(32), None, "'v': .dims"),
    "dims type": (_var(**{".dims": "n"}), bytes(32), None, "'v': .dims must be"),
    "past end": (_var(), bytes(31), None, "'v': data (32 bytes) runs past the end"),
    "offset past end": (_var(**{".offset": 8}), bytes(32), None, "'v': data"),
    "huge": (_var(**{".size": [2**40, 2**40], ".dims": ["a", "b"], ".len": None}), b"", None,
             "runs past the end"),
    "huge masked": (_var(**{".size": [2**62], ".missing": True, ".len": None}), bytes(9),
                    None, "runs past the end"),
    "strings past end": (_var(**{".type": "unicode", ".size": [1], ".len": None}),
                         (100).to_bytes(8, "little") + b"abc", None, "string lengths"),
    "string len small": (_var(**{".type": "str", ".size": [1], ".len": 9}),
                         (2).to_bytes(8, "little") + b"ab", None, ".len 9 is smaller"),
    "masked len": (_var(**{".missing": True, ".len": 25}), b"\x00" + bytes(32), None,
                   "'v': .len 25 disagrees with its mask"),
    "empty len": (_var(**{".size": [0], ".len": 8}), b"", None, "holds no values"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_format_error_naming_the_file(tmp_path, case):
    header, body, first, message = BAD[case]
    if header is None:
        path = tmp_path / "bad.ds"
        path.write_bytes(first + b'{"v": {}}')
    else:
        path = _file(tmp_path, header, body, first or b"ds-1.0\n")
    with pytest.raises(FormatError, match="bad.ds") as info:
        ds.read(path)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_inconsistent_dimension_sizes(tmp_path):
    header = {"a": {".dims": ["n"], ".size": [1], ".type": "int8", ".offset": 0},
              "b": {".dims": ["n"], ".size": [2], ".type": "int8", ".offset": 1}, ".": {}}
    with pytest.raises(FormatError, match="bad.ds.*'b': dimension 'n' has size 2"):
        ds.read_header(_file(tmp_path, header, b"abc"))


def test_truncated_body_and_header_cap(tmp_path, monkeypatch):
    path = tmp_path / "t.ds"
    ds.write(path, {"x": np.arange(100_000.0)})
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(FormatError, match="t.ds.*'x'.*past the end"):
        ds.read(path)
    monkeypatch.setattr(_ds_header, "MAX_HEADER", 10)
    monkeypatch.setattr(_ds_header, "PREFIX", 16)
    path.write_bytes(b"ds-1.0\n" + b" " * 100 + b"{}\n")
    with pytest.raises(FormatError, match="header longer than 10 bytes"):
        ds.read(path)


def test_long_header_beyond_the_first_read(tmp_path):
    attrs = {f"a{i}": "x" * 100 for i in range(2000)}  # a 200 kB header
    d, _ = roundtrip(tmp_path, {"x": np.arange(3), ".": {".": attrs}})
    assert d["."]["."] == attrs and d["x"].tolist() == [0, 1, 2]


# -- property test ----------------------------------------------------------------------------

DTYPES = [np.dtype(t).newbyteorder(o) for t in NUMERIC for o in "<>"] + \
         [np.dtype(bool), np.dtype("U"), np.dtype("S")]


@st.composite
def variables(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    n = int(np.prod(shape))
    if dtype.kind == "U":
        values = np.array(draw(st.lists(st.text(max_size=4), min_size=n, max_size=n)),
                          dtype=object)
    elif dtype.kind == "S":
        values = np.array(draw(st.lists(st.binary(max_size=4), min_size=n, max_size=n)),
                          dtype=object)
    else:
        raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
        values = np.frombuffer(raw, dtype.newbyteorder("=") if dtype.kind == "b"
                               else dtype).copy()
        if dtype.kind == "b":
            values = np.frombuffer(raw, np.uint8) % 2 == 1
    values = values.reshape(shape)
    if draw(st.booleans()):
        mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                        dtype=bool).reshape(shape)
        values = np.ma.MaskedArray(values, mask=mask)
    return values


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(variables(), min_size=1, max_size=4), st.integers(0, 5))
def test_property_write_read_round_trip(tmp_path, data, start):
    d = {f"v{i}": v for i, v in enumerate(data)}
    path = tmp_path / "p.ds"
    ds.write(path, d, fsync=False)
    r = ds.read(path)
    for key, values in d.items():
        got = r[key]
        mask = np.ma.getmaskarray(values) if np.ma.is_masked(values) else None
        if values.ndim == 0 and mask is None:
            # (as an object array: numpy's bytes dtype would drop a trailing NUL)
            got = np.asarray(got, dtype=object if values.dtype == object else None)
        assert_values(got, np.ma.getdata(values), mask)
        if values.ndim and values.dtype.kind not in "OSU":
            assert np.asarray(np.ma.getdata(got)).dtype == values.dtype
        if values.ndim:
            dim = ds.dims(r, key)[0]
            part = ds.read(path, [key], {dim: slice(start, None)})[key]
            assert_values(part, np.ma.getdata(values)[start:],
                          None if mask is None else mask[start:])


def test_name_with_leading_backslash_comes_back_unchanged(tmp_path):
    # A key starting with a backslash not followed by '.' or '\' is not an escaped name:
    # it is written, and read back, as it is.
    d, path = roundtrip(tmp_path, {"\\a": np.arange(3), "\\\\b": np.arange(2)})
    assert sorted(k for k in d if k != ".") == ["\\\\b", "\\a"]
    assert "\\a" in ds.read_header(path)


def test_a_small_file_is_one_write_and_a_rename(tmp_path, monkeypatch):
    calls = []
    real_write, real_replace = os.write, _local_write.replace
    monkeypatch.setattr(os, "write", lambda fd, b: calls.append("write") or real_write(fd, b))
    monkeypatch.setattr(_local_write, "replace", lambda a, b, **kw: calls.append("rename") or
                        real_replace(a, b, **kw))
    path = tmp_path / "t.ds"
    ds.write(path, {"x": np.arange(10.0), "y": np.arange(3)}, fsync=False)
    monkeypatch.undo()
    assert calls == ["write", "rename"]
    np.testing.assert_array_equal(ds.read(path)["x"], np.arange(10.0))


def test_a_large_dataset_of_many_variables_round_trips(tmp_path):
    # More parts than one writev call takes (1024 on Linux), over 1 MiB so not joined.
    d = {f"v{i:04d}": np.full(200, i, dtype=np.int64) for i in range(1100)}
    path = tmp_path / "many.ds"
    ds.write(path, d, fsync=False)
    ds.write(path, d, fsync=False)  # and replacing the file
    back = ds.read(path)
    assert all(back[k].tolist() == v.tolist() for k, v in d.items())
    assert [p.name for p in tmp_path.iterdir()] == ["many.ds"]
