"""``carray info`` on tables and ``carray head``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.cli.main import main

DATA = Path(__file__).parent.parent / "data" / "bcolz"


def test_info_shows_columns_as_an_aligned_table(capsys):
    assert main(["info", str(DATA / "t_basic.bcolz")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ctable: 57 rows x 3 columns"
    header = lines[1].split()
    assert header == ["column", "dtype", "nbytes", "cbytes", "ratio", "on", "disk"]
    body = [line.split() for line in lines[3:6]]
    assert [r[0] for r in body] == ["i", "s", "f"]
    assert [r[1] for r in body] == ["int64", "|S5", "float64"]
    # every ratio column ends at the same position: the table is aligned
    assert len({len(line) for line in lines[1:7]}) == 1
    assert any(line.startswith("attr title") for line in lines)


def test_info_json_for_tables(capsys, tmp_path):
    t = ca.ctable({"a": np.arange(10), "s": np.array(["x", "yy"] * 5, dtype=object)},
                  rootdir=str(tmp_path / "t"))
    t.close()
    assert main(["info", "--json", str(tmp_path / "t")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["rows"] == 10 and [c["name"] for c in info["columns"]] == ["a", "s"]
    assert info["columns"][1]["dtype"] == "StringDType()"


def test_head_prints_first_rows(capsys):
    assert main(["head", str(DATA / "t_basic.bcolz"), "-n", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["i", "s", "f"]
    assert len(out) == 4
    expected = np.load(DATA / "t_basic.expected.npy")
    assert out[1].split()[0] == str(expected["i"][0])
    assert out[2].split()[1] == expected["s"][1].decode()


def test_head_on_a_carray_and_errors(capsys, tmp_path):
    ca.carray(np.arange(5), rootdir=str(tmp_path / "a")).close()
    assert main(["head", str(tmp_path / "a"), "-n", "2"]) == 0
    assert capsys.readouterr().out.split() == ["value", "0", "1"]
    assert main(["head", str(tmp_path / "missing")]) == 1
    assert "no such dataset" in capsys.readouterr().err


DS = Path(__file__).parent.parent / "data" / "ds"


def test_head_shows_missing_values_of_a_ds_file_as_missing(capsys):
    assert main(["head", str(DS / "missing_values.ds")]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["count"] == "[0, --, 2, 3, 4, --, 6, 7, 8, --]"
    assert lines["temp"] == "[[0., --, 2., 3.], [--, --, 6., 7.], [8., 9., 10., --]]"
    assert lines["zlabel"] == "[--, 'bb', 'ccc', --, '', 'f', --, 'h', 'i', --]"
    assert lines["nomask"] == "[0., 1., 2., 3., 4., 5., 6., 7., 8., 9.]"


def test_head_shows_missing_values_of_a_netcdf_file_as_missing(capsys):
    pytest.importorskip("netCDF4", reason="netCDF4 is the 'netcdf' extra (CI has it)")
    assert main(["head", "-n", "2", str(DS / "missing_values.nc")]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    # Not the fill values (-999, -2**63 + 2) the file stores in their place.
    assert lines["temp"] == "[[0., --, 2., 3.], [--, --, 6., 7.]]"
    assert lines["count"] == "[0, --]"


def test_head_shows_nulls_of_a_parquet_file_as_missing(capsys, tmp_path):
    pa = pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow.parquet is a test dependency")
    pq.write_table(pa.table({"i": pa.array([7, None, 9], pa.int32()),
                             "f": pa.array([1.5, None, float("nan")]),
                             "s": pa.array(["a", None, "c"])}), tmp_path / "n.parquet")
    assert main(["head", str(tmp_path / "n.parquet")]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    # Integers stay integers; a null is missing, a NaN stays a NaN.
    assert rows == [["i", "f", "s"], ["7", "1.5", "a"], ["--", "--", "--"], ["9", "nan", "c"]]
