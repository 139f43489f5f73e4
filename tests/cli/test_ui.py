"""What the command shows: values summarised on one line, missing values as ``--``."""

from __future__ import annotations

import numpy as np

from carray.cli._ui import MISSING, cell, summary


def test_summary_of_an_unmasked_array_is_numpys():
    assert summary(np.arange(4.0)) == "[0., 1., 2., 3.]"
    assert summary(np.arange(100)) == "[0, 1, 2, ..., 97, 98, 99]"


def test_summary_shows_masked_items_as_missing():
    a = np.ma.MaskedArray([1.5, 2.0, 3.25], mask=[False, True, False])
    assert summary(a) == "[1.5, --, 3.25]"
    assert summary(np.ma.MaskedArray([1, 2], mask=[False, False])) == "[1, 2]"
    assert summary(np.ma.MaskedArray(np.float32(3), mask=True)) == MISSING == "--"


def test_summary_of_a_large_masked_array_formats_only_its_edges():
    data = np.arange(300.0).reshape(20, 15)
    a = np.ma.MaskedArray(data, mask=data % 7 == 0)
    text = summary(a)
    assert text.startswith("[[--, 1., 2., ..., 12., 13., --], [15., 16., 17., ..., 27., --, 29.]")
    assert text.endswith("[285., 286., --, ..., 297., 298., 299.]]")
    assert text.count("...") == 7  # six rows shown cut in the middle, and the rows between


def test_cell_of_a_masked_value():
    assert cell(np.ma.masked) == "--"
    assert cell(b"a\xff") == "a\\xff" and cell(np.int64(3)) == "3"
