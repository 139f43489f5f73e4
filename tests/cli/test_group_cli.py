"""The ``carray`` command on groups: info, verify, head and convert."""

from __future__ import annotations

import json
import os

import netCDF4
import numpy as np
import pytest

import carray as ca
from carray.cli.main import main


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def grp(tmp_path):
    path = tmp_path / "run.cagroup"
    with ca.group(path, mode="w") as g, g.transaction(message="first"):
        g.attrs["title"] = "demo"
        g.create_array("time", np.arange(40), dims="time", chunks=(8,))
        g.create_array("temp", np.random.default_rng(1).random((40, 3)), dims=("time", "x"),
                       chunks=(8, 3))
        g.create_array("sub/names", np.array(["ab", "c"]), dims="n")
        g.create_table("sub/log", {"k": np.arange(5),
                                   "s": np.array(list("vwxyz"), dtype=object)})
    return path


def test_info_prints_the_tree_and_the_version(grp, capsys):
    code, out, err = _run(capsys, "info", grp)
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0] == "/"
    assert any("temp" in line and "(time: 40, x: 3) float64" in line for line in lines)
    assert any("── log" in line and "table 5 rows" in line for line in lines)
    fields = dict(line.split(" : ", 1) for line in lines if " : " in line)
    fields = {k.strip(): v for k, v in fields.items()}
    with ca.open_group(grp) as g:
        assert fields["version"] == g.version
    assert fields["members"] == "3 arrays, 1 table, 1 group"
    assert fields["attr title"] == '"demo"'
    code, out, _ = _run(capsys, "info", "--json", grp)
    info = json.loads(out)
    assert info["type"] == "group" and info["attrs"] == {"title": "demo"}


def test_verify_checks_every_member(grp, capsys):
    code, out, _ = _run(capsys, "verify", grp)
    assert code == 0, out
    assert out.splitlines()[-1].startswith(f"{grp}: OK (")


def test_a_flipped_byte_in_a_member_fails_verify_naming_it(grp, capsys):
    with ca.open_group(grp) as g:
        where = grp / g.member_location("temp") / "data"
    chunk = where / sorted(os.listdir(where))[0]
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    code, out, _ = _run(capsys, "verify", grp)
    assert code == 1
    problems = out.splitlines()[:-1]
    assert problems and all("group member 'temp'" in line for line in problems)
    assert out.splitlines()[-1].startswith(f"{grp}: {len(problems)} problem")


def test_verify_of_a_group_with_a_missing_member_directory(grp, capsys):
    import shutil

    with ca.open_group(grp) as g:
        shutil.rmtree(grp / g.member_location("sub/names"))
    code, out, _ = _run(capsys, "verify", grp)
    assert code == 1 and "group member 'sub/names'" in out


def test_head_shows_every_array_and_table(grp, capsys):
    code, out, err = _run(capsys, "head", "-n", "2", grp)
    assert code == 0 and not err
    headers = [line for line in out.splitlines() if line.startswith("== ")]
    assert headers == ["== sub/log: table ==", "== sub/names: array (2,) <U2 (n) ==",
                       "== temp: array (40, 3) float64 (time, x) ==",
                       "== time: array (40,) int64 (time) =="]
    assert "k  s" in out and "0  v" in out and "1  w" in out and "2  x" not in out


def test_head_of_one_member(grp, capsys):
    code, out, _ = _run(capsys, "head", "-n", "3", grp / "time")
    assert code == 0
    assert out.split() == ["==", "time:", "array", "(40,)", "int64", "(time)", "==",
                           "value", "0", "1", "2"]
    code, out, _ = _run(capsys, "head", grp / "sub")
    assert code == 0 and "sub/log" in out and "sub/names" in out and "temp" not in out
    code, _, err = _run(capsys, "head", grp / "nope")
    assert code == 1 and "no member 'nope'" in err


def test_convert_round_trip_through_the_command(grp, tmp_path, capsys):
    for ext in ("nc", "zarr", "h5"):
        code, out, err = _run(capsys, "convert", "--no-progress", grp, tmp_path / f"o.{ext}")
        assert code == 0 and not err, err
        code, _, err = _run(capsys, "convert", tmp_path / f"o.{ext}", tmp_path / f"b_{ext}")
        assert code == 0, err
        with ca.open_group(tmp_path / f"b_{ext}") as b:
            assert b["sub/log"].cols["s"][:].tolist() == list("vwxyz")
            assert b.dims_of("temp") == ("time", "x")
    code, _, err = _run(capsys, "convert", grp, tmp_path / "o.nc")
    assert code == 1 and "already exists" in err
    code, _, err = _run(capsys, "convert", "--force", grp, tmp_path / "o.nc")
    assert code == 0, err
    code, _, err = _run(capsys, "convert", grp, tmp_path / "copy", "--to", "group")
    assert code == 0, err
    code, out, _ = _run(capsys, "verify", tmp_path / "copy")
    assert code == 0, out


def test_convert_refuses_array_options_for_a_group(grp, tmp_path, capsys):
    code, _, err = _run(capsys, "convert", "--chunks", "4", grp, tmp_path / "o.nc")
    assert code == 1 and "--chunks" in err and not (tmp_path / "o.nc").exists()


def test_convert_errors_are_one_clear_line(grp, tmp_path, capsys):
    (tmp_path / "bad.h5").write_text("plain text")
    cases = [
        (("convert", tmp_path / "bad.h5", tmp_path / "g"), "not an HDF5 file"),
        (("convert", tmp_path / "missing.nc", tmp_path / "g"), "no such"),
        (("convert", grp, tmp_path / "a.b2nd"), "convert one member"),
        (("convert", grp, tmp_path / "g.ds"), "a ds file is flat"),
    ]
    for argv, needle in cases:
        code, out, err = _run(capsys, *argv)
        assert code == 1 and needle in err, (argv, err)
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "one is a dataset" not in err
    assert sorted(os.listdir(tmp_path)) == ["bad.h5", "run.cagroup"]


def test_a_netcdf_file_with_groups_converts_to_a_group_directory(tmp_path, capsys):
    with netCDF4.Dataset(tmp_path / "in.nc", "w") as f:
        f.createDimension("t", 3)
        f.createVariable("t", "f8", ("t",))[:] = [1, 2, 3]
        inner = f.createGroup("inner")
        inner.createVariable("v", "i4", ("t",))[:] = [4, 5, 6]
    code, _, err = _run(capsys, "convert", tmp_path / "in.nc", tmp_path / "out")
    assert code == 0, err
    code, out, _ = _run(capsys, "head", tmp_path / "out" / "inner" / "v")
    assert code == 0 and out.split()[-3:] == ["4", "5", "6"]
