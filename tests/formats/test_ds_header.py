"""The ds header: the first read of a file, and the memo of headers already checked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from carray.errors import FormatError
from carray.formats import ds
from carray.formats.ds import header as _ds_header


@pytest.fixture(autouse=True)
def empty_memo(monkeypatch):
    monkeypatch.setattr(_ds_header, "_CHECKED", {})


def _tiny(path, value: int = 1):
    ds.write(path, {"x": np.array([value], dtype=np.int64), ".": {"x": {".dims": ["n"]}}},
             fsync=False)
    return path


def test_a_small_file_is_read_with_one_read_of_its_size(tmp_path, count_reads):
    path = _tiny(tmp_path / "t.ds")
    count_reads["reads"].clear()
    assert ds.read(path)["x"].tolist() == [1]
    assert count_reads["reads"] == [path.stat().st_size]


def test_a_file_longer_than_the_first_read(tmp_path, count_reads):
    big = np.arange(_ds_header.PREFIX, dtype=np.int64)
    path = tmp_path / "big.ds"
    ds.write(path, {"x": big}, fsync=False)
    count_reads["reads"].clear()
    np.testing.assert_array_equal(ds.read(path)["x"], big)
    assert count_reads["reads"][0] == _ds_header.PREFIX


def test_an_empty_file_is_not_a_ds_file(tmp_path):
    path = tmp_path / "empty.ds"
    path.write_bytes(b"")
    with pytest.raises(FormatError, match="empty.ds.*not a ds file"):
        ds.read(path)


def test_files_sharing_a_header_are_checked_once(tmp_path, monkeypatch):
    paths = [_tiny(tmp_path / f"f{i}.ds", i) for i in range(5)]
    calls = []
    check = _ds_header.check_meta
    monkeypatch.setattr(_ds_header, "check_meta", lambda *a: calls.append(1) or check(*a))
    assert [int(ds.read(p)["x"][0]) for p in paths] == [0, 1, 2, 3, 4]
    assert len(calls) == 1


def test_the_memo_is_keyed_by_file_size_too(tmp_path):
    good = _tiny(tmp_path / "good.ds")
    ds.read(good)
    short = tmp_path / "short.ds"
    short.write_bytes(good.read_bytes()[:-1])  # the same header, one byte of data missing
    with pytest.raises(FormatError, match="short.ds.*'x'.*past the end"):
        ds.read(short)


def test_headers_that_fail_are_not_remembered(tmp_path):
    header = {"x": {".size": [1], ".type": "int64", ".offset": 0, ".len": 8, ".endian": "l"}}
    bad = tmp_path / "bad.ds"
    bad.write_bytes(b"ds-1.0\n" + json.dumps(header).encode() + b"\n" + bytes(4))
    for _ in range(2):
        with pytest.raises(FormatError, match="past the end"):
            ds.read(bad)
    assert _ds_header._CHECKED == {}


def test_the_memo_stays_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(_ds_header, "_CHECKED_COUNT", 3)
    for i in range(6):
        path = tmp_path / f"f{i}.ds"
        ds.write(path, {f"v{i}": np.arange(3)}, fsync=False)
        assert ds.read(path)[f"v{i}"].tolist() == [0, 1, 2]
        assert len(_ds_header._CHECKED) <= 3
    # The oldest were dropped first: the last three headers are kept.
    assert [json.loads(text) for text, _ in _ds_header._CHECKED] == [
        json.loads(ds.encode({f"v{i}": np.arange(3)})[0].split(b"\n")[1]) for i in (3, 4, 5)]


def test_long_headers_are_not_remembered(tmp_path):
    path = tmp_path / "long.ds"
    attrs = {f"a{i}": "x" * 100 for i in range(100)}  # a 10 kB header
    ds.write(path, {"x": np.arange(3), ".": {".": attrs}}, fsync=False)
    assert ds.read(path)["."]["."] == attrs
    assert _ds_header._CHECKED == {}


def test_results_do_not_share_metadata(tmp_path):
    a, b = _tiny(tmp_path / "a.ds"), _tiny(tmp_path / "b.ds")
    first = ds.read(a)
    first["."]["x"][".dims"].append("changed")
    assert ds.read(b)["."]["x"][".dims"] == ["n"]



def test_threads_reading_many_headers_keep_the_memo_bounded(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(_ds_header, "_CHECKED_COUNT", 2)
    paths = []
    for i in range(8):
        paths.append(tmp_path / f"f{i}.ds")
        ds.write(paths[-1], {f"v{i}": np.arange(i + 1)}, fsync=False)

    def first_value_count(path):
        d = ds.read(path)
        return len(d[next(k for k in d if k != ".")])

    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(first_value_count, paths * 25))
    assert counts == [i + 1 for i in range(8)] * 25
    assert len(_ds_header._CHECKED) <= 2
