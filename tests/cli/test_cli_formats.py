"""Every verb on every format the registry knows; errors are one line, exit codes right."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.cli.main import main

DATA = Path(__file__).parent.parent / "data"

SAMPLES = {
    "ctable": DATA / "bcolz" / "t_basic.bcolz",
    "bcolz": DATA / "bcolz" / "c_i4_lz4_c5_shuffle.bcolz",
    "b2nd": DATA / "blosc2" / "nd_i8_2d_sparse.b2nd",
    "caterva": DATA / "caterva" / "cat_f8_2d_zstd.caterva",
    "bloscpack": DATA / "bloscpack" / "nd_structured.blp",
    "b2frame": DATA / "blosc2" / "schunk_f8_partial_last.b2frame",
    "ds": DATA / "ds" / "all_types.ds",
    "netcdf": DATA / "ds" / "all_types.nc",
}


@pytest.fixture
def samples(tmp_path) -> dict[str, Path]:
    out = dict(SAMPLES)
    ca.carray(np.arange(1000).reshape(100, 10), rootdir=tmp_path / "a.carray").close()
    np.save(tmp_path / "a.npy", np.arange(60).reshape(20, 3))
    out["carray"], out["npy"] = tmp_path / "a.carray", tmp_path / "a.npy"
    return out


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", [*SAMPLES, "carray", "npy"])
def test_info_head_and_verify_work_on_every_format(name, samples, capsys):
    path = samples[name]
    code, out, err = _run(capsys, "info", path)
    assert code == 0 and out and not err, err
    code, out, err = _run(capsys, "info", "--json", path)
    assert code == 0 and isinstance(json.loads(out), dict)
    code, out, err = _run(capsys, "head", "-n", "3", path)
    assert code == 0 and out and not err, err
    assert len(out.splitlines()) <= 40
    code, out, err = _run(capsys, "verify", path)
    assert code == 0, out
    assert out.splitlines()[-1].startswith(f"{path}: OK (")


def test_head_summarises_wide_rows(tmp_path, capsys):
    ca.carray(np.arange(300_000).reshape(1000, 300), rootdir=tmp_path / "w").close()
    code, out, _ = _run(capsys, "head", tmp_path / "w")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 11 and lines[0].strip() == "value"
    assert lines[1].strip() == "[0, 1, 2, ..., 297, 298, 299]"


@pytest.mark.parametrize(("src", "dst"), [
    ("npy", "x.carray"), ("npy", "x.bcolz"), ("npy", "x.b2nd"), ("carray", "x.npy"),
    ("caterva", "x.npy"), ("bloscpack", "x.carray"), ("b2nd", "x"),
    ("ds", "x.nc"), ("netcdf", "x.ds"),
])
def test_convert_from_every_readable_format(src, dst, samples, tmp_path, capsys):
    code, _, err = _run(capsys, "convert", samples[src], tmp_path / dst)
    assert code == 0, err
    code, out, err = _run(capsys, "verify", tmp_path / dst)
    assert code == 0, out + err


def test_convert_refuses_unknown_targets(samples, tmp_path, capsys):
    code, _, err = _run(capsys, "convert", samples["npy"], tmp_path / "x.h9")
    assert code == 1 and "no array writer for '.h9'" in err
    assert not (tmp_path / "x.h9").exists()


@pytest.mark.parametrize("verb", ["info", "head", "verify", "convert"])
@pytest.mark.parametrize("target", ["foo://x", "{tmp}/missing", "{tmp}/junk.txt"])
def test_bad_input_is_one_line_without_a_traceback(verb, target, tmp_path, capsys):
    (tmp_path / "junk.txt").write_text("not data")
    path = target.format(tmp=tmp_path)
    argv = [verb, path] + ([str(tmp_path / "out")] if verb == "convert" else [])
    code, out, err = _run(capsys, *argv)
    assert code == 1
    text = err if verb != "verify" else out
    assert "Traceback" not in err
    assert path in text
    if verb != "verify":
        assert len(err.strip().splitlines()) == 1 and err.startswith("carray: error:")
    assert not (tmp_path / "out").exists()


def test_missing_and_unknown_are_told_apart(tmp_path, capsys):
    (tmp_path / "junk.txt").write_text("not data")
    assert "no such" in _run(capsys, "info", tmp_path / "missing")[2]
    assert "not in any format" in _run(capsys, "info", tmp_path / "junk.txt")[2]


def test_debug_shows_the_traceback(tmp_path, capsys):
    code, _, err = _run(capsys, "--debug", "info", tmp_path / "missing")
    assert code == 1 and "Traceback" in err
    code, _, err = _run(capsys, "info", tmp_path / "missing", "--debug")
    assert code == 1 and "Traceback" in err


def test_ctrl_c_exits_130_leaving_nothing(samples, tmp_path, capsys, monkeypatch):
    import carray.integrations.convert as conv

    def interrupted(source, progress):
        raise KeyboardInterrupt
        yield  # pragma: no cover

    monkeypatch.setattr(conv, "_row_blocks", interrupted)
    code, out, err = _run(capsys, "convert", samples["npy"], tmp_path / "x.b2nd")
    assert code == 130 and err.strip() == "carray: interrupted" and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.carray", "a.npy"]


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("carray ")


def test_demo_with_no_rows_is_a_clear_error(capsys):
    code, _, err = _run(capsys, "demo", "--rows", "0")
    assert code == 1 and "--rows must be at least 1" in err


def test_quiet_is_accepted_before_and_after_the_verb(samples, capsys):
    assert _run(capsys, "--quiet", "verify", samples["npy"])[0] == 0
    assert _run(capsys, "verify", "-q", samples["npy"])[0] == 0


def test_verify_counts_problems_and_chunks(tmp_path, capsys):
    a = ca.carray(np.arange(100, dtype="i8"), rootdir=tmp_path / "one", chunklen=100,
                  format="bcolz")
    a.close()
    chunk = tmp_path / "one" / "data" / "__0.blp"
    raw = bytearray(chunk.read_bytes())
    raw[20:] = bytes(len(raw) - 20)
    chunk.write_bytes(bytes(raw))
    code, out, _ = _run(capsys, "verify", tmp_path / "one")
    assert code == 1
    assert out.splitlines()[-1] == f"{tmp_path / 'one'}: 1 problem; 0 chunks OK"


def test_console_script_errors_have_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "carray.cli.main", "info", "foo://x"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "foo://x" in proc.stderr


def test_a_broken_copy_verifies_with_problems(tmp_path, capsys):
    broken = tmp_path / "t.bcolz"
    shutil.copytree(SAMPLES["ctable"], broken)
    (broken / "__rootdirs__").chmod(0o644)
    (broken / "__rootdirs__").write_text("{")
    code, out, _ = _run(capsys, "verify", broken)
    assert code == 1 and "__rootdirs__" in out
