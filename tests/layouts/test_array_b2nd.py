"""carray on Blosc2 frames: every N-d fixture opens as a carray, and python-blosc2 reads
what a carray writes to a ``.b2nd`` frame after appends, edits and resizes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import blosc2
import numpy as np
import pytest

import carray as ca

DATA = Path(__file__).parents[1] / "data"


def _nd_fixtures():
    out = []
    for fmt in ("blosc2", "caterva"):
        for fx in json.loads((DATA / fmt / "MANIFEST.json").read_text())["fixtures"]:
            if fx["expected"].endswith(".npy"):
                out.append(pytest.param(fmt, fx, id=fx["name"]))
    return out


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize(("fmt", "fx"), _nd_fixtures())
def test_every_nd_fixture_opens_as_a_carray(fmt, fx, tmp_path):
    want = np.load(DATA / fmt / fx["expected"])
    path = DATA / fmt / fx["path"]
    if want.ndim == 0:  # a 0-d frame is a 0-d carray
        a = ca.open(path, mode="r")
        assert a.shape == () and _same(np.asarray(a[()]), want)
        return
    a = ca.open(path, mode="r")
    got = a[:]
    if fmt == "caterva":  # caterva stores no dtype: items come back as raw bytes
        got = got.view(want.dtype).reshape(want.shape) if got.dtype != want.dtype else got
    assert _same(got, want)
    # Partial reads decode only the blocks they touch and agree with numpy.
    rng = np.random.default_rng(len(fx["name"]))
    for _ in range(8):
        key = tuple(slice(*sorted(rng.integers(0, n + 1, 2))) if n else slice(None)
                    for n in want.shape)
        part = a[key]
        if fmt == "caterva" and part.dtype != want.dtype:
            part = part.view(want.dtype).reshape(want[key].shape)
        assert _same(part, want[key])


@pytest.mark.parametrize("contiguous", [True, False])
def test_python_blosc2_reads_what_a_carray_writes(tmp_path, contiguous):
    path = tmp_path / "a.b2nd"
    data = np.arange(30 * 14 * 9, dtype="i4").reshape(30, 14, 9)
    a = ca.carray(data, rootdir=path, chunks=(8, 5, 9), blocks=(2, 5, 3),
                  storage={"contiguous": contiguous}, cparams=ca.CParams(cname="zstd"))
    a.attrs["units"] = "K"
    a.append(np.full((5, 14, 9), -1, dtype="i4"))
    a[3, 2:9, :] = 77
    a.close()
    want = np.concatenate([data, np.full((5, 14, 9), -1, dtype="i4")])
    want[3, 2:9, :] = 77
    b = blosc2.open(str(path))
    assert b.shape == want.shape and b.chunks == (8, 5, 9) and b.blocks == (2, 5, 3)
    np.testing.assert_array_equal(b[:], want)
    assert b.schunk.vlmeta["units"] == "K"
    # Any axis resized; python-blosc2 still agrees.
    a = ca.open(path)
    a.resize((20, 17, 4))
    a.close()
    grown = np.zeros((20, 17, 4), dtype="i4")
    grown[:, :14, :] = want[:20, :, :4]
    np.testing.assert_array_equal(blosc2.open(str(path))[:], grown)
    np.testing.assert_array_equal(ca.open(path, mode="r")[:], grown)


def test_a_carray_continues_a_frame_python_blosc2_wrote(tmp_path):
    path = tmp_path / "b.b2nd"
    data = np.linspace(0, 1, 40 * 30).reshape(40, 30)
    blosc2.asarray(data, urlpath=str(path), chunks=(16, 10), blocks=(4, 5), mode="w")
    a = ca.open(path)
    assert a.chunks == (16, 10) and a.blocks == (4, 5)
    np.testing.assert_array_equal(a[:], data)
    a.append(data[:7] + 10)
    a[[0, 39], 3] = -5.0
    a.close()
    want = np.concatenate([data, data[:7] + 10])
    want[[0, 39], 3] = -5.0
    np.testing.assert_array_equal(blosc2.open(str(path))[:], want)


def test_read_only_frames_stay_untouched(tmp_path):
    src = DATA / "blosc2" / "nd_i4_2d_zstd_shuffle.b2nd"
    path = tmp_path / "c.b2nd"
    shutil.copy(src, path)
    before = path.read_bytes()
    a = ca.open(path, mode="r")
    a[:]
    with pytest.raises(ca.ReadOnlyError):
        a[0, 0] = 1
    with pytest.raises(ca.ReadOnlyError):
        a.attrs["x"] = 1
    assert path.read_bytes() == before


def test_verify_checks_frames(tmp_path, capsys):
    from carray.cli.main import main

    good = DATA / "blosc2" / "nd_i8_2d_sparse.b2nd"
    assert main(["verify", str(good)]) == 0
    assert "OK (9 chunks checked)" in capsys.readouterr().out
    broken = tmp_path / "sparse.b2nd"
    shutil.copytree(good, broken)
    (broken / "00000004.chunk").unlink()
    assert main(["verify", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "chunk 4" in out and "1 problem" in out
    cut = tmp_path / "cut.b2nd"
    data = (DATA / "blosc2" / "nd_i4_2d_zstd_shuffle.b2nd").read_bytes()
    cut.write_bytes(data[:len(data) // 2])
    assert main(["verify", str(cut)]) == 1
    assert "cut.b2nd" in capsys.readouterr().out
