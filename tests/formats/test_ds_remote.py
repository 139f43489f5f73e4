"""ds files on remote stores (``memory://`` and S3 served by moto): the same bytes as a
local write, ranged reads, and errors that name the URL."""

from __future__ import annotations

import numpy as np
import pytest

from carray.errors import FormatError
from carray.formats import ds
from carray.formats.ds import header as _ds_header
from carray.stores import resolve

pytest.importorskip("fsspec", reason="fsspec is the 'remote' extra (CI has it)")


def dataset() -> dict:
    rng = np.random.default_rng(3)
    temp = np.ma.MaskedArray(rng.normal(size=(200, 30)), mask=rng.random((200, 30)) < 0.1)
    return {
        "big": np.arange(100_000, dtype=">f8"),  # larger than the first read by far
        "temp": temp,
        "flag": rng.random(200) < 0.5,
        "name": np.array([f"n{i}" for i in range(200)], dtype=object),
        ".": {"big": {".dims": ["i"], "units": "m"}, "temp": {".dims": ["t", "x"]},
              "flag": {".dims": ["t"]}, "name": {".dims": ["t"]}, ".": {"title": "remote"}},
    }


def remote_bytes(url: str, options) -> bytes:
    store, path = resolve(url, options)
    return store.get(path)


def test_write_is_byte_identical_to_local(remote_root, tmp_path):
    root, options = remote_root
    local = tmp_path / "a.ds"
    ds.write(local, dataset(), fsync=False)
    ds.write(f"{root}/a.ds", dataset(), storage_options=options)
    assert remote_bytes(f"{root}/a.ds", options) == local.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ds"]  # no temporary left


def test_round_trip(remote_root):
    root, options = remote_root
    url = f"{root}/sub/a.ds"
    d = dataset()
    ds.write(url, d, storage_options=options)
    got = ds.read(url, storage_options=options)
    np.testing.assert_array_equal(got["big"], d["big"])
    assert got["big"].dtype == np.dtype(">f8")
    np.testing.assert_array_equal(np.ma.getmaskarray(got["temp"]), d["temp"].mask)
    np.testing.assert_array_equal(got["temp"].compressed(), d["temp"].compressed())
    assert got["flag"].tolist() == d["flag"].tolist()
    assert got["name"].tolist() == d["name"].tolist()
    assert got["."]["."] == {"title": "remote"}
    assert ds.read_header(url, storage_options=options)["big"]["units"] == "m"


def test_selection_reads_only_its_ranges(remote_root, remote_fetches):
    root, options = remote_root
    url = f"{root}/a.ds"
    d = dataset()
    ds.write(url, d, storage_options=options)
    total = len(remote_bytes(url, options))
    remote_fetches.clear()
    part = ds.read_variable(url, "big", (slice(50_000, 50_010),), storage_options=options)
    np.testing.assert_array_equal(part, d["big"][50_000:50_010])
    assert sum(remote_fetches) <= _ds_header.PREFIX + 80
    assert len(remote_fetches) == 2  # the start of the file, then the ten values
    remote_fetches.clear()
    sel = ds.read(url, ["temp", "name"], {"t": slice(5, 8)}, storage_options=options)
    np.testing.assert_array_equal(sel["temp"], d["temp"][5:8])
    assert sel["name"].tolist() == d["name"][5:8].tolist()
    assert sel["."]["temp"][".size"] == [3, 30]
    assert sum(remote_fetches) < total // 4


def test_missing_file(remote_root):
    root, options = remote_root
    url = f"{root}/nothing.ds"
    for read in (ds.read, ds.read_header):
        with pytest.raises(FileNotFoundError, match="nothing.ds"):
            read(url, storage_options=options)
    with pytest.raises(FileNotFoundError, match="nothing.ds"):
        ds.read_variable(url, "x", storage_options=options)


def test_errors_name_the_url(remote_root):
    root, options = remote_root
    url = f"{root}/bad.ds"
    store, path = resolve(url, options)
    store.put(path, b"not a ds file\n")
    with pytest.raises(FormatError, match="not a ds file") as info:
        ds.read(url, storage_options=options)
    assert info.value.path == store.url(path)
    assert info.value.path.endswith("bad.ds") and "://" in info.value.path
    ds.write(url, {"x": np.arange(3)}, storage_options=options)
    with pytest.raises(KeyError, match="bad.ds"):
        ds.read(url, ["y"], storage_options=options)


def test_storage_options_need_a_url(tmp_path):
    with pytest.raises(ValueError, match="storage_options"):
        ds.write(tmp_path / "a.ds", {"x": np.arange(3)}, storage_options={"anon": True})
    with pytest.raises(ValueError, match="storage_options"):
        ds.read(tmp_path / "a.ds", storage_options={"anon": True})
