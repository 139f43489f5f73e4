"""Verifying bcolz directories is bounded by the files on disk, not by what the header says."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import carray as ca
from carray.core.problems import tally
from carray.errors import ChecksumError
from carray.layouts.bcolz.verify import verify
from carray.stores import LOCAL


def _make(tmp_path, n=1000, chunklen=100):
    ca.carray(np.arange(n), rootdir=tmp_path / "b", chunklen=chunklen, format="bcolz").close()
    return tmp_path / "b"


def test_a_sound_directory(tmp_path):
    root = _make(tmp_path)
    assert tally(verify(LOCAL, str(root))) == ([], 10)


@pytest.mark.parametrize("rows", [2**40, 2**62])
def test_a_huge_claimed_length_does_not_loop(tmp_path, rows):
    root = _make(tmp_path)
    sizes = root / "meta" / "sizes"
    meta = json.loads(sizes.read_text())
    meta["shape"] = [rows]
    del meta["carray_check"]  # as another writer (bcolz) leaves it
    sizes.write_text(json.dumps(meta))
    start = time.perf_counter()
    problems, checked = tally(verify(LOCAL, str(root)))
    assert time.perf_counter() - start < 10
    assert len(problems) == 1 and str(rows) in problems[0].what
    assert checked <= 10


def test_a_length_changed_under_carrays_checksum_is_damage(tmp_path):
    root = _make(tmp_path)
    sizes = root / "meta" / "sizes"
    sizes.write_text(sizes.read_text().replace("[1000]", "[900]"))
    problems, checked = tally(verify(LOCAL, str(root)))
    assert len(problems) == 1 and "checksum" in problems[0].what and checked == 0
    with pytest.raises(ChecksumError, match="meta/sizes"):
        ca.open(root, mode="r")


def test_every_missing_or_damaged_chunk_is_listed(tmp_path):
    root = _make(tmp_path)
    (root / "data" / "__3.blp").unlink()
    (root / "data" / "__5.blp").write_bytes(b"nonsense" * 4)
    problems, checked = tally(verify(LOCAL, str(root)))
    assert checked == 8
    text = [str(p) for p in problems]
    assert len(text) == 2
    assert "__3.blp" in text[0] and "missing" in text[0]
    assert "__5.blp" in text[1]


def test_bad_attrs(tmp_path):
    root = _make(tmp_path)
    (root / "__attrs__").write_text("{")
    problems, checked = tally(verify(LOCAL, str(root)))
    assert checked == 10 and len(problems) == 1 and "__attrs__" in str(problems[0])

