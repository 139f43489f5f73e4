"""The ``carray`` command: info and demo."""

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
    a.flush()  # attributes are part of the next version
    assert main(["info", "--json", str(tmp_path / "a")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["shape"] == [100] and info["dtype"] == "float32"
    assert info["chunks"] == [30] and info["nchunks"] == 3 and info["leftover"] == 10
    assert info["attrs"] == {"k": [1, 2]}
    assert info["nbytes"] == 400


@pytest.mark.parametrize("fmt", ["superchunk", "bcolz", "b2nd"])
def test_info_prints_numpy_attribute_values(capsys, tmp_path, fmt):
    path = tmp_path / ("a.b2nd" if fmt == "b2nd" else "a")
    with ca.carray(np.arange(3.0), rootdir=path, mode="w", format=fmt) as a:
        a.attrs["_FillValue"] = np.float64("nan")
        a.attrs["scale"] = np.float32(0.5)
        if fmt != "bcolz":  # bcolz's JSON has no form for these
            a.attrs["z"] = np.complex128(1 + 2j)
            a.attrs["when"] = np.datetime64("2020-01-01T00:00")
        a.attrs["units"] = "K"
    assert main(["info", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    attrs = dict(line.split(" : ", 1) for line in lines if line.startswith("attr "))
    others = {} if fmt == "bcolz" else {"attr z": "(1+2j)", "attr when": "2020-01-01T00:00"}
    assert {k.strip(): v for k, v in attrs.items()} == {
        "attr _FillValue": "nan", "attr scale": "0.5", **others, "attr units": '"K"'}
    assert main(["info", "--json", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)  # valid JSON: no NaN token
    assert info["attrs"]["_FillValue"] == {
        "__carray__": {"type": "scalar", "dtype": "<f8", "value": "NaN"}}
    assert info["attrs"]["units"] == "K"


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


# -- URLs and --storage-option ------------------------------------------------------------------


def _option_args(options: dict | None, prefix: str = "") -> list[str]:
    """``options`` as repeated ``--storage-option KEY=VALUE`` (dotted keys, JSON values)."""
    args: list[str] = []
    for key, value in (options or {}).items():
        if isinstance(value, dict):
            args += _option_args(value, f"{prefix}{key}.")
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            args += ["--storage-option", f"{prefix}{key}={text}"]
    return args


def test_storage_options_nest_and_parse_json():
    from carray.cli.main import build_parser

    args = build_parser().parse_args([
        "info", "s3://b/x", "--storage-option", "key=abc", "--storage-option", "anon=true",
        "--storage-option", "client_kwargs.endpoint_url=http://127.0.0.1:9000",
        "--storage-option", "client_kwargs.region_name=us-west-2",
        "--storage-option", "config_kwargs.retries.max_attempts=2",
        "--storage-option", "token=null", "--storage-option", "key=def"])
    assert args.storage_options == {
        "key": "def", "anon": True, "token": None,
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "us-west-2"},
        "config_kwargs": {"retries": {"max_attempts": 2}}}
    assert build_parser().parse_args(["verify", "x"]).storage_options is None


@pytest.mark.parametrize("bad", ["novalue", "a..b=1", "=1"])
def test_storage_option_needs_key_equals_value(bad, capsys):
    with pytest.raises(SystemExit):
        main(["convert", "a", "b", "--storage-option", bad])
    assert "KEY=VALUE" in capsys.readouterr().err


def test_storage_option_cannot_be_a_value_and_a_dict(capsys):
    with pytest.raises(SystemExit):
        main(["info", "x", "--storage-option", "a=1", "--storage-option", "a.b=2"])
    assert "both a value and nested keys" in capsys.readouterr().err


def test_convert_info_and_verify_on_urls(tmp_path, remote_root, capsys):
    root, options = remote_root
    opts = _option_args(options)
    cube = np.arange(40 * 6, dtype="i4").reshape(40, 6)
    np.save(tmp_path / "s.npy", cube)
    for name in ("a.carray", "a.b2nd", "a.bcolz"):
        url = f"{root}/{name}"
        assert main(["convert", str(tmp_path / "s.npy"), url, "--no-progress", *opts]) == 0
        assert main(["info", "--json", url, *opts]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["shape"] == [40, 6] and info["dtype"] == "int32"
        assert main(["verify", url, *opts]) == 0
        assert capsys.readouterr().out.strip().endswith(("chunk checked)", "chunks checked)"))
        back = tmp_path / f"{name}.npy"
        assert main(["convert", url, str(back), *opts]) == 0
        np.testing.assert_array_equal(np.load(back), cube)
    # A local path beside a URL takes no storage options.
    assert main(["verify", str(tmp_path / "missing"), f"{root}/a.b2nd", *opts]) == 1
    assert "no such dataset" in capsys.readouterr().out


def test_verify_names_the_url_of_a_damaged_chunk(capsys):
    import uuid

    from carray.layouts.superchunk import opening as superchunk_open
    from carray.stores import resolve

    url = f"memory://cli-{uuid.uuid4().hex}/d"
    ca.carray(np.arange(5000, dtype="i8"), chunklen=500, rootdir=url,
              storage={"superchunksize": 4}).close()
    store, path = resolve(url)
    data = store.join(path, "data")
    first, _, last = sorted(store.listdir(data))
    layout = superchunk_open.open_dir(path, readonly=True, store=store)[0]
    off = layout.chunk_location(1)[1]
    layout.close()
    raw = bytearray(store.get(store.join(data, first)))
    raw[off + 30] ^= 0xFF
    store.put(store.join(data, first), bytes(raw))
    store.delete(store.join(data, last))
    assert main(["verify", url]) == 1
    out = capsys.readouterr().out
    assert f"{store.url(store.join(data, first))} at offset" in out
    assert "chunk 1: adler32 checksum mismatch" in out
    assert f"{store.url(store.join(data, last))}: " in out and "is missing" in out
    assert "2 problems; 7 chunks OK" in out
    store.rmtree(path)


def test_convert_to_a_url_failing_leaves_nothing(tmp_path, capsys):
    import uuid

    from carray.stores import resolve

    root = f"memory://cli-{uuid.uuid4().hex}"
    assert main(["convert", str(DATA / "t_basic.bcolz"), f"{root}/x.b2nd"]) == 1
    assert "a table" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "nope.bcolz"), f"{root}/x.b2nd"]) == 1
    assert "no such" in capsys.readouterr().err
    store, path = resolve(root)
    assert not store.exists(path)


def test_info_on_a_bloscpack_file_at_a_url(remote_root, capsys):
    from carray.formats import bloscpack

    root, options = remote_root
    bloscpack.pack_array(np.arange(1000), f"{root}/a.blp", storage_options=options)
    assert main(["info", "--json", f"{root}/a.blp", *_option_args(options)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["nbytes"] == 8000 and info["chunks"] == 1
