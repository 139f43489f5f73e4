"""``carray info`` on missing values, categories and indexes; CSV through ``carray convert``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import carray as ca
from carray.cli.main import main


@pytest.fixture
def stored(tmp_path):
    root = str(tmp_path / "t")
    ca.ctable({"x": np.arange(10), "s": np.array(list("abcabcabca"), dtype=object)},
              rootdir=root).close()
    return root


def test_info_shows_no_value_columns_for_plain_tables(stored, capsys):
    assert main(["info", stored]) == 0
    header = capsys.readouterr().out.splitlines()[1].split()
    assert "missing" not in header and "categories" not in header


def test_info_shows_missing_counts_and_categories(tmp_path, capsys):
    root = str(tmp_path / "t")
    x = np.ma.MaskedArray(np.arange(10), mask=[1, 0, 0, 1, 0, 0, 1, 0, 0, 0])
    s = ca.categorical(list("abcdefgabc"))
    ca.ctable({"x": x, "s": s}, rootdir=root).close()
    assert main(["info", root]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-2:] == ["missing", "categories"]
    xs, ss, total = (lines[i].split() for i in (3, 4, 5))
    assert xs[0] == "x" and xs[-1] == "3"
    assert ss[0] == "s" and " ".join(ss[-8:]) == "0 7: a, b, c, d, e, ..."
    assert total[0] == "(total)" and total[-1] == "3"
    assert main(["info", "--json", root]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [c["missing"] for c in info["columns"]] == [3, 0]
    assert info["columns"][1]["categories"] == {"count": 7, "first": list("abcde")}
    assert "categories" not in info["columns"][0]


def test_info_shows_indexes(stored, capsys):
    assert main(["info", "--json", stored]) == 0
    assert json.loads(capsys.readouterr().out)["indexes"] == []
    t = ca.ctable(rootdir=stored, mode="a")
    t.create_index("x")
    t.close()
    assert main(["info", stored]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("index")]
    assert len(lines) == 1 and lines[0].split(":", 1)[1].strip().startswith(
        "x: sorted, 10 rows indexed, 0 appended since, 0 edited since")
    assert main(["info", "--json", stored]) == 0
    assert json.loads(capsys.readouterr().out)["indexes"][0].startswith("x: sorted")


# -- CSV ---------------------------------------------------------------------------------------


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "in.csv"
    pd.DataFrame({"a": np.arange(6), "s": list("abcdef"), "f": np.linspace(0, 1, 6),
                  "d": pd.date_range("2024-02-28", periods=6)}).to_csv(path, index=False)
    return path


def test_convert_csv_to_a_table_and_back(csv_file, tmp_path, capsys):
    out = str(tmp_path / "out.ctable")
    assert main(["convert", str(csv_file), out]) == 0
    t = ca.open(out)
    assert t.names == ["a", "s", "f", "d"] and t.dtype["d"] == np.dtype("M8[D]")
    assert list(t["s"][:]) == list("abcdef")
    t.close()
    back = tmp_path / "back.csv"
    assert main(["convert", out, str(back)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(back), pd.read_csv(csv_file))
    assert main(["convert", out, str(back)]) == 1  # exists
    assert "already exists" in capsys.readouterr().err
    assert main(["convert", "--force", str(csv_file), str(tmp_path / "p.parquet")]) == 0
    assert pd.read_parquet(tmp_path / "p.parquet")["a"].tolist() == list(range(6))


def test_info_head_and_verify_of_csv(csv_file, tmp_path, capsys):
    assert main(["info", str(csv_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("csv: 6 rows x 4 columns")
    assert [line.split()[:2] for line in lines[3:7]] == [
        ["a", "int64"], ["s", "str"], ["f", "float64"], ["d", "datetime64[D]"]]
    assert main(["head", str(csv_file), "-n", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[:2] == ["1", "b"]
    assert main(["verify", str(csv_file)]) == 0
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3\n")
    assert main(["verify", str(bad)]) == 1
    assert "bad.csv" in capsys.readouterr().out + capsys.readouterr().err


def test_a_table_csv_cannot_hold_is_refused(tmp_path, capsys):
    root = str(tmp_path / "t")
    ca.ctable({"v": np.zeros((3, 2))}, rootdir=root).close()
    assert main(["convert", root, str(tmp_path / "o.csv")]) == 1
    assert "one value per row" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_info_and_head_of_csv_with_zoned_timestamps(tmp_path, capsys):
    path = tmp_path / "z.csv"
    path.write_text("a,t\n1,2024-01-01T00:00:00+00:00\n2,2024-01-02T00:00:00+00:00\n")
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "datetime64[s, UTC]" in out
    assert main(["head", str(path)]) == 0
    assert "2024-01-02" in capsys.readouterr().out
