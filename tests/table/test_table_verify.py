"""Verifying tables: ``__rootdirs__``, ``__attrs__`` and every column, strings included."""

from __future__ import annotations

import json

import numpy as np
import pytest

import carray as ca
from carray import registry
from carray.core.problems import tally
from carray.table import table as table_module


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A bcolz table (the tests damage bcolz chunk files) with a variable-length string
    column, as carray wrote text into bcolz tables before it stored it fixed-width as
    bcolz does: such tables are still read and verified."""
    monkeypatch.setattr(table_module, "bcolz_text", lambda values, where: values)
    root = tmp_path / "t"
    t = ca.ctable({"a": np.arange(10), "s": np.array(["x", "yy"] * 5, dtype=object)},
                  rootdir=root, format="bcolz")
    t.attrs["k"] = 1
    t.close()
    monkeypatch.undo()
    assert (root / "s" / "__vlstring__").exists()
    return root


def test_a_bcolz_table_of_text_today_checks_its_fixed_width_column(tmp_path):
    root = tmp_path / "t"
    ca.ctable({"a": np.arange(10), "s": np.array(["x", "yy"] * 5, dtype=object)},
              rootdir=root, format="bcolz").close()
    assert not (root / "s" / "__vlstring__").exists()
    assert _verify(root) == ([], 2)


def _verify(root):
    problems, checked = tally(registry.verify(root))
    return [str(p) for p in problems], checked


def test_a_sound_table_checks_every_column(table):
    assert _verify(table) == ([], 3)  # a, and the string column's offsets and values


def test_bad_rootdirs(table):
    (table / "__rootdirs__").write_text("{")
    problems, _ = _verify(table)
    assert len(problems) == 1 and "__rootdirs__" in problems[0] and "JSON" in problems[0]
    (table / "__rootdirs__").write_text(json.dumps({"names": ["a", "a"]}))
    assert "unique column names" in _verify(table)[0][0]


def test_a_listed_column_that_is_missing(table):
    (table / "__rootdirs__").write_text(json.dumps({"names": ["a", "s", "zz"]}))
    problems, checked = _verify(table)
    assert problems == [f"{table / 'zz'}: column 'zz' has no carray directory"]
    assert checked == 3


def test_bad_attrs(table):
    (table / "__attrs__").write_text("[1, 2")
    problems, checked = _verify(table)
    assert len(problems) == 1 and "__attrs__" in problems[0] and checked == 3


def test_broken_string_column_marker(table):
    (table / "s" / "__vlstring__").write_text("{nope")
    problems, checked = _verify(table)
    assert len(problems) == 1 and "__vlstring__" in problems[0] and checked == 1


def test_broken_string_column_values(table):
    chunk = table / "s" / "values" / "data" / "__0.blp"
    chunk.write_bytes(chunk.read_bytes()[:24])  # cut inside the Blosc header
    problems, checked = _verify(table)
    assert problems and all(str(table / "s" / "values") in p for p in problems)
    assert checked == 2


def test_string_offsets_past_the_values(table):
    # Shrink the values array on disk: the offsets then point past its end.
    sizes = table / "s" / "values" / "meta" / "sizes"
    meta = json.loads(sizes.read_text())
    meta["shape"] = [1]
    del meta["carray_check"]  # as bcolz would write it (else: a checksum mismatch)
    sizes.write_text(json.dumps(meta))
    problems, _ = _verify(table)
    assert any("offsets end at byte" in p or "holds" in p for p in problems)


def test_a_damaged_numeric_column(table):
    (table / "a" / "data" / "__0.blp").write_bytes(b"blpk\x01\x00\x00\x00" + bytes(8))
    problems, checked = _verify(table)
    assert len(problems) == 1 and "__0.blp" in problems[0] and checked == 2
