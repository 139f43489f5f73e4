"""The ``carray`` command: info and demo."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import carray as ca
from carray.cli.main import main

DATA = Path(__file__).parent.parent / "data" / "bcolz"


def test_info_describes_a_bcolz_directory(capsys):
    assert main(["info", str(DATA / "c_i4_lz4_c5_shuffle.bcolz")]) == 0
    out = capsys.readouterr().out
    assert "(5000,)" in out and "int32" in out and "lz4 clevel=5 shuffle=shuffle" in out
    assert "(512,) x 9 + 392 rows" in out
    assert 'attr units' in out and '"counts"' in out


def test_info_json(capsys, tmp_path):
    a = ca.carray(np.arange(100, dtype="f4"), rootdir=tmp_path / "a", chunklen=30)
    a.attrs["k"] = [1, 2]
    assert main(["info", "--json", str(tmp_path / "a")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["shape"] == [100] and info["dtype"] == "float32"
    assert info["chunks"] == [30] and info["nchunks"] == 3 and info["leftover"] == 10
    assert info["attrs"] == {"k": [1, 2]}
    assert info["nbytes"] == 400


def test_info_on_a_missing_path_is_a_clean_error(capsys, tmp_path):
    assert main(["info", str(tmp_path / "nope")]) == 1
    assert "no such dataset" in capsys.readouterr().err


def test_info_on_a_corrupt_dataset_is_a_clean_error(capsys, tmp_path):
    root = tmp_path / "bad"
    shutil.copytree(DATA / "c_i4_lz4_c5_shuffle.bcolz", root)
    (root / "meta" / "sizes").chmod(0o644)
    (root / "meta" / "sizes").write_text("{")
    assert main(["info", str(root)]) == 1
    err = capsys.readouterr().err
    assert "sizes" in err and "JSON" in err


def test_info_does_not_write(tmp_path):
    root = tmp_path / "r"
    shutil.copytree(DATA / "c_i8_appended.bcolz", root)
    before = sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*"))
    assert main(["info", str(root)]) == 0
    assert sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*")) == before


def test_demo_runs_and_keeps_its_dataset(tmp_path, capsys):
    keep = tmp_path / "demo.carray"
    assert main(["demo", "--rows", "200000", "--keep", str(keep)]) == 0
    out = capsys.readouterr().out
    assert "readings above 25 degC" in out and "shape" in out
    a = ca.open(keep, mode="r")
    assert len(a) == 300_000 and a.attrs["units"] == "degC"
    assert "python-blosc2 reads it back" in out
    cube = ca.open(tmp_path / "frames.b2nd", mode="r")
    assert cube.ndim == 3 and cube.blocks is not None


def test_console_script_entry_point():
    proc = subprocess.run([sys.executable, "-m", "carray.cli.main", "--help"],
                          capture_output=True, text=True, check=True)
    assert "info" in proc.stdout and "demo" in proc.stdout
