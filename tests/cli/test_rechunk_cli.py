"""``carray convert --chunks ... --max-mem ...``: a rechunk within a memory budget, with
a progress bar on a terminal."""

from __future__ import annotations

import io
import os
import sys

import numpy as np
import pytest

import carray as ca
from carray.cli.main import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def cube(tmp_path):
    values = np.random.default_rng(3).normal(size=(300, 32, 32))
    a = ca.carray(values, chunks=(1, 32, 32), rootdir=str(tmp_path / "cube"), fsync=False)
    a.attrs["title"] = "frames"
    a.close()
    return tmp_path, values


@pytest.mark.parametrize("name", ["columns", "columns.b2nd"])
def test_convert_rechunks_within_max_mem_and_draws_a_bar(cube, monkeypatch, name):
    tmp_path, values = cube
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "160")
    dst = str(tmp_path / name)
    assert main(["convert", str(tmp_path / "cube"), dst, "--chunks", "300,8,8",
                 "--max-mem", "2MiB", "--progress"]) == 0
    assert "100.0%" in terminal.getvalue() and name in terminal.getvalue()
    out = ca.carray(rootdir=dst, mode="r")
    assert out.chunks == (300, 8, 8) and dict(out.attrs.items()) == {"title": "frames"}
    np.testing.assert_array_equal(out[:], values)
    assert sorted(os.listdir(tmp_path)) == sorted(["cube", name])


def test_a_max_mem_too_small_fails_cleanly(cube, capsys):
    tmp_path, _ = cube
    assert main(["convert", str(tmp_path / "cube"), str(tmp_path / "c"), "--chunks",
                 "300,8,8", "--max-mem", "10KiB", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "too small" in err and "one target chunk" in err
    assert os.listdir(tmp_path) == ["cube"]


def test_max_mem_needs_chunks(cube, capsys):
    tmp_path, _ = cube
    assert main(["convert", str(tmp_path / "cube"), str(tmp_path / "c"),
                 "--max-mem", "1MiB"]) == 1
    assert "--chunks" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "cube"), str(tmp_path / "c"), "--chunks",
                 "300,8,8", "--max-mem", "lots"]) == 1
    assert "max_mem" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["cube"]


def test_a_npy_source_is_rechunked_too(tmp_path):
    values = np.arange(4000.0).reshape(100, 40)
    np.save(tmp_path / "a.npy", values)
    assert main(["convert", str(tmp_path / "a.npy"), str(tmp_path / "b"), "--chunks", "7,9",
                 "--max-mem", "2MiB", "--no-progress"]) == 0
    out = ca.carray(rootdir=str(tmp_path / "b"), mode="r")
    assert out.chunks == (7, 9)
    np.testing.assert_array_equal(out[:], values)
