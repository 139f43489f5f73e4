"""True numbers: ``nbytes`` is what the items take in memory, ``cbytes`` what their chunks
take in the files (every container and layout), and ``carray info`` shows ratios the
files bear out."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.cli.main import main
from carray.formats import bloscpack

N = 200_003  # not a whole number of chunks: a partial last chunk is stored too


def _bytes_under(path: Path, part: str | None = None) -> int:
    """Total size of the files under ``path`` (only those in a ``part`` directory)."""
    total = 0
    for root, _, files in os.walk(path):
        if part is None or Path(root).name == part:
            total += sum(os.path.getsize(Path(root) / f) for f in files)
    return total


def _values(n: int = N) -> np.ndarray:
    return np.arange(n, dtype=np.int64) // 3


def test_nbytes_is_items_times_itemsize_in_every_layout(tmp_path):
    for fmt, name in (("superchunk", "a.carray"), ("bcolz", "a.bcolz"), ("b2nd", "a.b2nd")):
        a = ca.carray(_values(), rootdir=tmp_path / name, mode="w", format=fmt)
        a.append(np.arange(5))
        assert a.nbytes == (N + 5) * 8, fmt
        a.close()
        with ca.open(tmp_path / name, mode="r") as b:
            assert b.nbytes == (N + 5) * 8, fmt
    m = ca.carray(np.zeros((30, 20, 10), "f4"))
    assert m.nbytes == 30 * 20 * 10 * 4


def test_bcolz_cbytes_are_its_chunk_files(tmp_path):
    a = ca.carray(_values(), rootdir=tmp_path / "a", mode="w", format="bcolz")
    a.append(np.arange(7))  # into the stored partial chunk: rewritten, not counted twice
    a.flush()
    assert a.cbytes == _bytes_under(tmp_path / "a", "data")
    a.close()
    with ca.open(tmp_path / "a", mode="r") as b:
        assert b.cbytes == _bytes_under(tmp_path / "a", "data")


def test_superchunk_cbytes_are_the_chunks_in_its_files(tmp_path):
    # Blosc1 chunks and no spare room: each superchunk file is a plain Bloscpack file whose
    # chunks we can count with the Bloscpack reader.
    a = ca.carray(_values(), rootdir=tmp_path / "a", mode="w",
                  storage={"spare": 0, "checksum": "none", "blosc1": True})
    a.close()
    files = sorted((tmp_path / "a" / "data").iterdir())
    in_files = sum(bloscpack.info(f)["cbytes"] for f in files)
    with ca.open(tmp_path / "a", mode="r") as b:
        assert b.cbytes == in_files
        assert b.cbytes <= _bytes_under(tmp_path / "a", "data")


def test_superchunk_cbytes_after_appends_stay_within_the_files(tmp_path):
    a = ca.carray(_values(), rootdir=tmp_path / "a", mode="w")
    for _ in range(3):
        a.append(np.arange(1000))
        a.flush()
    data = _bytes_under(tmp_path / "a", "data")
    assert 0 < a.cbytes <= data
    a.close()


def test_b2nd_cbytes_are_the_frame_less_its_header_and_index(tmp_path):
    path = tmp_path / "a.b2nd"
    a = ca.carray(_values(), rootdir=path, mode="w")
    a.close()
    size = os.path.getsize(path)
    with ca.open(path, mode="r") as b:
        assert b.cbytes <= size
        assert size - b.cbytes < 4096 + size // 100  # header, offsets index, trailer


def test_in_memory_cbytes_count_the_decoded_tail_as_it_is_held(tmp_path):
    a = ca.carray(_values())
    chunk = a.chunks[0]
    full = len(a) // chunk * chunk
    b = ca.carray(_values()[:full])
    # The tail stays decoded in memory: it counts at its full size.
    assert a.cbytes == pytest.approx(b.cbytes + (len(a) - full) * 8, rel=0.05)


@pytest.fixture(params=["bcolz", None])
def table(request, tmp_path):
    """A table with a stored partial last chunk, in bcolz columns (chunk files only)
    and in the default layout (superchunk files: framing and spare room besides)."""
    n = 100_000
    rng = np.random.default_rng(0)
    t = ca.ctable({"id": np.arange(n), "x": rng.random(n),
                   "name": np.array([f"station {i % 50}" for i in range(n)], dtype=object)},
                  rootdir=tmp_path / "t.ctable", mode="w", format=request.param)
    t.append({"id": [n], "x": [0.5], "name": ["late"]})  # leaves a partial last chunk
    t.close()
    return tmp_path / "t.ctable", request.param


def _within_files(cbytes: int, data: int, fmt: str | None) -> bool:
    """bcolz chunk files are the chunks; superchunk files add a header, an offsets table,
    a checksum per chunk and up to 20% spare room."""
    if fmt == "bcolz":
        return cbytes == data
    return cbytes <= data <= cbytes * 1.25 + 8192


def test_table_cbytes_are_its_column_files(table):
    path, fmt = table
    with ca.open(path, mode="r") as t:
        for name in t.names:
            assert _within_files(t.cols[name].cbytes, _bytes_under(path / name, "data"),
                                 fmt), name
        assert t.cbytes == sum(t.cols[n].cbytes for n in t.names)
        assert t.nbytes == sum(t.cols[n].nbytes for n in t.names)


def test_info_table_ratios_match_the_files(table, capsys):
    path, fmt = table
    assert main(["info", "--json", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    for col in info["columns"]:
        assert _within_files(col["cbytes"], _bytes_under(path / col["name"], "data"), fmt)
        assert col["ratio"] == pytest.approx(col["nbytes"] / col["cbytes"], abs=1e-3)
        assert col["disk_bytes"] == _bytes_under(path / col["name"]), col["name"]
    assert info["disk_bytes"] == _bytes_under(path)
    # The id column (sorted integers) compresses well; nothing is called expanded.
    ids = next(c for c in info["columns"] if c["name"] == "id")
    assert ids["ratio"] > 10
    assert main(["info", str(path)]) == 0
    assert "on disk" in capsys.readouterr().out


def test_nothing_stored_has_no_ratio(tmp_path, capsys):
    from carray import registry

    assert registry.ratio(800, 100) == 8.0
    assert registry.ratio(0, 0) is None and registry.ratio(800, 0) is None
    ca.carray(np.zeros(0), rootdir=tmp_path / "empty", mode="w").close()
    assert main(["info", str(tmp_path / "empty")]) == 0
    assert re.search(r"^ratio +: - \(nothing stored\)$", capsys.readouterr().out, re.M)
