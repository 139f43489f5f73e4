"""carray.core.dtypes: every dtype read from a file is parsed literally and checked."""

from __future__ import annotations

import numpy as np
import pytest

from carray.core.dtypes import MAX_DESCR_CHARS, MAX_ITEMSIZE, checked_dtype, parse_descr
from carray.errors import CArrayError, FormatError, UnsafeDataError


@pytest.mark.parametrize("descr, want", [
    ("int64", np.dtype("i8")),
    ("<f4", np.dtype("<f4")),
    (">i2", np.dtype(">i2")),
    ("|S10", np.dtype("S10")),
    ("<U5", np.dtype("<U5")),
    ("bool", np.dtype(bool)),
    ("<M8[s]", np.dtype("M8[s]")),
    ("complex128", np.dtype("c16")),
    ("'<f8'", np.dtype("<f8")),  # bloscpack stores the repr of dtype.str
    ("[('a', '<i4'), ('b', '<f8', (2, 3))]", np.dtype([("a", "<i4"), ("b", "<f8", (2, 3))])),
    ([["a", "<i4"], ["b", "|S3"]], np.dtype([("a", "<i4"), ("b", "S3")])),
    ([["a", [["x", "<u2"]]], ["s", "<f4", [4]]],
     np.dtype([("a", [("x", "<u2")]), ("s", "<f4", (4,))])),
    (b"<i8", np.dtype("<i8")),
    ("('<i4', (2, 2))", np.dtype(("<i4", (2, 2)))),
])
def test_plain_dtypes_pass(descr, want):
    assert checked_dtype(descr, source="f") == want


@pytest.mark.parametrize("descr", [
    "O", "|O", "object",
    "[('a', 'O'), ('b', '<i8')]",
    "[('a', [('x', '<i4'), ('y', 'O')])]",
    "('O', (3,))",
    "[('a', 'O', (2,))]",
    [["a", "|O"]],
    np.dtypes.StringDType(),
    np.dtype([("a", "i4"), ("b", "O")]),
])
def test_objects_and_variable_size_kinds_are_unsafe(descr):
    with pytest.raises(UnsafeDataError, match="src"):
        checked_dtype(descr, source="src")


def test_unsafe_is_value_error_and_carray_error():
    with pytest.raises(ValueError):
        checked_dtype("O", source="f")
    assert issubclass(UnsafeDataError, CArrayError)
    assert issubclass(UnsafeDataError, TypeError)  # callers of earlier releases


def test_object_opt_in():
    assert checked_dtype("O", source="f", allow_object=True) == np.dtype(object)
    dt = checked_dtype("[('a', 'O'), ('b', '<i8')]", source="f", allow_object=True)
    assert dt.hasobject
    # StringDType is never plain bytes, opt-in or not.
    with pytest.raises(UnsafeDataError):
        checked_dtype(np.dtypes.StringDType(), source="f", allow_object=True)


@pytest.mark.parametrize("descr", [
    "nonsense", "", "i4 i4", "[('a',", "__import__('os')", "{'names': 1}",
    3, None, 1.5, {"a": 1}, [1, 2],
    "(" * 1000 + "'i4'" + ")" * 1000,
    "[" + "('a', " * 40 + "'<i4'" + ")" * 40 + "]",
    "S" + "9" * 30,
    "(" + "1," * 40 + ")i4",
    "x" * (MAX_DESCR_CHARS + 1),
    b"\xff\xfe",
])
def test_malformed_descrs_are_format_errors_naming_the_file(descr):
    with pytest.raises(FormatError, match="the/file"):
        checked_dtype(descr, source="the/file")


def test_sizes_are_bounded():
    with pytest.raises(FormatError, match="0 bytes"):
        checked_dtype("S0", source="f")
    assert checked_dtype("S0", source="f", allow_empty=True).itemsize == 0
    with pytest.raises(FormatError, match="bytes"):
        checked_dtype(f"S{MAX_ITEMSIZE + 1}", source="f")
    with pytest.raises(FormatError, match="dimensions"):
        checked_dtype(np.dtype(("i1", (1,) * 33)), source="f")


def test_never_evaluates():
    with pytest.raises(FormatError):
        parse_descr("__import__('os').system('false')", "f")


def test_shapes_are_bounded():
    from carray.core.dtypes import checked_shape

    assert checked_shape([3, 4], itemsize=8, source="f") == (3, 4)
    assert checked_shape([], itemsize=8, source="f") == ()
    for bad in ([-1], [1.5], [True], "3", [2**63], [2**40, 2**30], [1] * 65, None):
        with pytest.raises(FormatError, match="the/sizes"):
            checked_shape(bad, itemsize=8, source="the/sizes")
