"""``carray pack|unpack|append`` and ``carray info X.blp``."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from carray.cli.main import main
from carray.formats import bloscpack as bp

DATA = Path(__file__).parent.parent / "data" / "bloscpack"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def peer(bloscpack_peer):
    return bloscpack_peer


def test_pack_unpack_npy_round_trip(capsys, tmp_path, peer):
    a = np.asfortranarray(np.arange(24000, dtype=">i4").reshape(40, 600))
    np.save(tmp_path / "a.npy", a)
    code, _, err = run(capsys, "pack", tmp_path / "a.npy", tmp_path / "a.blp", "--codec", "zstd",
                       "--clevel", "3", "--chunk-size", "16K", "--checksum", "sha256",
                       "--metadata", '{"units": "m"}')
    assert code == 0, err
    d = bp.info(tmp_path / "a.blp")
    assert d["metadata"]["units"] == "m" and d["metadata"]["order"] == "F"
    assert d["header"]["chunk_size"] == 16384 and d["checksum"] == "sha256"
    assert d["first_chunk"]["codec"] == "zstd"
    b = peer.unpack_ndarray_from_file(str(tmp_path / "a.blp"))
    assert b.dtype == a.dtype and np.array_equal(a, b) and np.isfortran(b)
    code, _, err = run(capsys, "unpack", tmp_path / "a.blp", tmp_path / "out.npy")
    assert code == 0, err
    c = np.load(tmp_path / "out.npy")
    assert c.dtype == a.dtype and np.array_equal(a, c) and np.isfortran(c)


def test_pack_any_file_as_bytes(capsys, tmp_path, peer):
    data = os.urandom(10_000) + bytes(50_000)
    (tmp_path / "x.bin").write_bytes(data)
    code, _, err = run(capsys, "pack", tmp_path / "x.bin", tmp_path / "x.blp", "--typesize", "4",
                       "--no-offsets", "--checksum", "None", "--shuffle", "bitshuffle")
    assert code == 0, err
    h = bp.info(tmp_path / "x.blp")["header"]
    assert (h["typesize"], h["offsets"], h["checksum"], h["metadata"]) == (4, False, "None", False)
    assert peer.unpack_bytes_from_file(str(tmp_path / "x.blp"))[0] == data
    code, _, _ = run(capsys, "unpack", tmp_path / "x.blp", tmp_path / "x.out")
    assert code == 0 and (tmp_path / "x.out").read_bytes() == data
    # append needs offsets
    code, _, err = run(capsys, "append", tmp_path / "x.blp", tmp_path / "x.bin")
    assert code == 1 and "no offsets table" in err


def test_pack_empty_file_and_npy_as_bytes(capsys, tmp_path):
    (tmp_path / "e").write_bytes(b"")
    assert run(capsys, "pack", tmp_path / "e", tmp_path / "e.blp")[0] == 0
    assert bp.unpack_bytes(tmp_path / "e.blp") == b""
    np.save(tmp_path / "a.npy", np.arange(5))
    assert run(capsys, "pack", "--bytes", tmp_path / "a.npy", tmp_path / "r.blp")[0] == 0
    assert bp.unpack_bytes(tmp_path / "r.blp") == (tmp_path / "a.npy").read_bytes()


def test_append_verb(capsys, tmp_path):
    (tmp_path / "a").write_bytes(b"a" * 5000)
    (tmp_path / "b").write_bytes(b"b" * 7000)
    run(capsys, "pack", tmp_path / "a", tmp_path / "a.blp", "--chunk-size", "2048",
        "--max-app-chunks", "4")
    code, out, err = run(capsys, "append", tmp_path / "a.blp", tmp_path / "b", "--clevel", "1")
    assert code == 0, err
    assert "3 new chunks" in out
    assert bp.unpack_bytes(tmp_path / "a.blp") == b"a" * 5000 + b"b" * 7000
    assert bp.info(tmp_path / "a.blp")["header"]["max_app_chunks"] == 1
    code, _, err = run(capsys, "append", tmp_path / "a.blp", tmp_path / "b")
    assert code == 1 and "offset slots" in err


def test_append_npy_to_array_file(capsys, tmp_path):
    np.save(tmp_path / "a.npy", np.arange(100.0).reshape(50, 2))
    np.save(tmp_path / "b.npy", np.ones((5, 2)))
    run(capsys, "pack", tmp_path / "a.npy", tmp_path / "a.blp")
    assert run(capsys, "append", tmp_path / "a.blp", tmp_path / "b.npy")[0] == 0
    got = bp.unpack_array(tmp_path / "a.blp")
    assert got.shape == (55, 2) and got[-1].tolist() == [1.0, 1.0]


def test_info_blp(capsys):
    code, out, err = run(capsys, "info", DATA / "nd_structured.blp")
    assert code == 0, err
    assert "typesize        : 15" in out
    assert "first offsets   : 1772, 2055, 2320, 2550, 2768, ..." in out
    assert "zlib level 6, adler32, 100 B (stored 91 of 1000)" in out
    code, out, _ = run(capsys, "info", "--json", DATA / "by_appended.blp")
    d = json.loads(out)
    assert d["header"]["nchunks"] == 7 and d["offsets"][:2] == [216, 520]


def test_errors_are_one_line(capsys, tmp_path):
    (tmp_path / "a").write_bytes(b"abc")
    code, _, err = run(capsys, "pack", tmp_path / "a", tmp_path / "a.blp", "--metadata", "{bad")
    assert code == 1 and "not valid JSON" in err
    assert run(capsys, "pack", tmp_path / "a", tmp_path / "a.blp")[0] == 0
    code, _, err = run(capsys, "pack", tmp_path / "a", tmp_path / "a.blp")
    assert code == 1 and "--force" in err
    assert run(capsys, "pack", "-f", tmp_path / "a", tmp_path / "a.blp")[0] == 0
    code, _, err = run(capsys, "pack", "-f", tmp_path / "a", tmp_path / "a.blp",
                       "--chunk-size", "huge")
    assert code == 1 and "not a size" in err
    (tmp_path / "bad.blp").write_bytes(b"blpk\x02" + bytes(40))
    code, _, err = run(capsys, "unpack", tmp_path / "bad.blp", tmp_path / "o")
    assert code == 1 and "format version 2" in err and not (tmp_path / "o").exists()
    code, _, err = run(capsys, "info", tmp_path / "bad.blp")
    assert code == 1 and "format version 2" in err
    raw = bytearray((DATA / "by_crc32_nometa.blp").read_bytes())
    raw[-1] ^= 1
    (tmp_path / "c.blp").write_bytes(raw)
    code, _, err = run(capsys, "unpack", tmp_path / "c.blp", tmp_path / "o")
    assert code == 1 and "checksum mismatch" in err
    assert run(capsys, "unpack", "--no-verify", tmp_path / "c.blp", tmp_path / "o")[0] == 0


def test_verbs_are_registered():
    importlib.import_module("carray.cli.pack")
    from carray.cli.main import VERB_MODULES, build_parser
    assert "carray.cli.pack" in VERB_MODULES
    help_text = build_parser().format_help()
    assert "pack" in help_text and "unpack" in help_text and "append" in help_text
