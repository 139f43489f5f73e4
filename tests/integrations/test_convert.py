"""Array conversion between carray directories, bcolz 1.x, .b2nd and .npy."""

from __future__ import annotations

import os
from pathlib import Path

import blosc2
import numpy as np
import pytest

import carray as ca
from carray.cli.main import main
from carray.errors import ContainerExistsError
from carray.integrations.convert import convert, convert_array

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture
def cube() -> np.ndarray:
    return (np.arange(30 * 17 * 11, dtype="f8").reshape(30, 17, 11) * 0.5) - 9


@pytest.mark.parametrize("route", [
    ["src.npy", "a.carray", "b.b2nd", "c.bcolz", "d.npy"],
    ["src.npy", "a.b2nd", "b", "c.npy"],
    ["src.npy", "a.bcolz", "b.b2nd", "c.carray", "d.npy"],
])
def test_round_trips_keep_the_values(tmp_path, cube, route):
    np.save(tmp_path / route[0], cube)
    for a, b in zip(route, route[1:], strict=False):
        convert(tmp_path / a, tmp_path / b)
    back = np.load(tmp_path / route[-1])
    assert back.dtype == cube.dtype
    np.testing.assert_array_equal(back, cube)


def test_chunk_and_block_shapes_follow_the_source(tmp_path, cube):
    src = ca.carray(cube, chunks=(8, 5, 11), blocks=(2, 5, 11), rootdir=tmp_path / "a")
    src.attrs["units"] = "m"
    src.close()
    convert(tmp_path / "a", tmp_path / "b.b2nd")
    b = ca.open(tmp_path / "b.b2nd", mode="r")
    assert b.chunks == (8, 5, 11) and b.blocks == (2, 5, 11)
    assert b.attrs["units"] == "m"
    np.testing.assert_array_equal(b[:], cube)
    # python-blosc2 reads the converted frame.
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "b.b2nd"))[:], cube)
    # bcolz holds rows only: N-d chunks become runs of rows.
    convert(tmp_path / "a", tmp_path / "c.bcolz")
    c = ca.open(tmp_path / "c.bcolz", mode="r")
    assert c.chunks[1:] == cube.shape[1:] and c.blocks is None
    np.testing.assert_array_equal(c[:], cube)


def test_bcolz_fixture_to_npy_and_b2nd(tmp_path):
    src = DATA / "bcolz" / "c_md_f8_4d.bcolz"
    expected = np.load(DATA / "bcolz" / "c_md_f8_4d.expected.npy")
    convert(src, tmp_path / "x.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), expected)
    convert(src, tmp_path / "x.b2nd")
    np.testing.assert_array_equal(blosc2.open(str(tmp_path / "x.b2nd"))[:], expected)


def test_existing_destination_is_kept_unless_forced(tmp_path, cube):
    np.save(tmp_path / "s.npy", cube)
    np.save(tmp_path / "d.npy", cube[:2])
    with pytest.raises(ContainerExistsError):
        convert(tmp_path / "s.npy", tmp_path / "d.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "d.npy"), cube[:2])
    convert_array(tmp_path / "s.npy", tmp_path / "d.npy", overwrite=True)
    np.testing.assert_array_equal(np.load(tmp_path / "d.npy"), cube)


def test_a_failed_copy_leaves_nothing_behind(tmp_path, cube, monkeypatch):
    np.save(tmp_path / "s.npy", cube)
    calls = []

    def fail(done, total):
        calls.append(done)
        raise KeyboardInterrupt

    for dst in ("d.b2nd", "d.carray", "d.npy"):
        with pytest.raises(KeyboardInterrupt):
            convert_array(tmp_path / "s.npy", tmp_path / dst, progress=fail)
        assert not (tmp_path / dst).exists()
    assert sorted(os.listdir(tmp_path)) == ["s.npy"]  # no temporary left either


def test_progress_reports_every_block(tmp_path):
    big = np.arange(3 * 2**20, dtype="i8").reshape(-1, 8)  # 24 MiB
    np.save(tmp_path / "s.npy", big)
    seen = []
    convert_array(tmp_path / "s.npy", tmp_path / "d", progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (big.nbytes, big.nbytes)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    np.testing.assert_array_equal(ca.open(tmp_path / "d")[:], big)


def test_cli_convert_with_options_and_bar(tmp_path, cube, capsys):
    np.save(tmp_path / "s.npy", cube)
    argv = ["convert", str(tmp_path / "s.npy"), str(tmp_path / "d.b2nd"), "--chunks", "10,17,11",
            "--blocks", "5,17,11", "--codec", "zstd", "--clevel", "3", "--progress"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "100.0%" in err and "43.8/43.8 KiB" in err  # sizes in binary units
    d = ca.open(tmp_path / "d.b2nd", mode="r")
    assert d.chunks == (10, 17, 11) and d.blocks == (5, 17, 11)
    assert d.cparams.cname == "zstd" and d.cparams.clevel == 3
    np.testing.assert_array_equal(d[:], cube)
    assert main(argv) == 1
    assert "already exists" in capsys.readouterr().err
    # A .npy file has no chunks, blocks or codec: refused, not ignored.
    assert main([*argv, "--force", "--to", "npy"]) == 1
    assert "neither chunked nor compressed" in capsys.readouterr().err
    assert main([*argv[:3], "--force", "--to", "npy"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "d.b2nd"), cube)


@pytest.mark.parametrize(("dst", "options", "message"), [
    ("x.npy", ["--chunks", "10,17,11"], "a .npy file is neither chunked nor compressed"),
    ("x.npy", ["--clevel", "3"], "a .npy file is neither chunked nor compressed"),
    ("x.carray", ["--chunks", "10,10"], "chunks (10, 10) is for a 2-d array, but the array is "
                                        "3-d (shape (30, 17, 11))"),
    ("x.b2nd", ["--blocks", "5"], "blocks (5,) is for a 1-d array"),
    ("x.zarr", ["--chunks", "10"], "chunks (10,) is for a 1-d array"),
    ("x.carray", ["--chunks", "10,0,11"], "every size must be at least 1"),
    ("x.bcolz", ["--chunks", "10,5,11"], "chunk by whole rows: chunks (10, 5, 11) must be "
                                         "N,17,11"),
    ("x.bcolz", ["--blocks", "5,17,11"], "bcolz directories have no blocks"),
    ("x.zarr", ["--blocks", "5,17,11"], "Zarr arrays have no blocks"),
    ("x.carray", ["--unlimited", "t"], "--unlimited: only a dataset converted to NetCDF"),
])
def test_cli_convert_refuses_options_the_output_cannot_take(tmp_path, cube, capsys, dst,
                                                             options, message):
    if dst.endswith(".zarr"):
        pytest.importorskip("zarr", reason="zarr is a test dependency")
    np.save(tmp_path / "s.npy", cube)
    assert main(["convert", str(tmp_path / "s.npy"), str(tmp_path / dst), *options]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / dst).exists()
    assert [p.name for p in tmp_path.iterdir()] == ["s.npy"]  # no temporary left either


def test_bcolz_chunks_of_whole_rows_are_its_chunklen(tmp_path, cube):
    np.save(tmp_path / "s.npy", cube)
    convert(tmp_path / "s.npy", tmp_path / "x.bcolz", chunks=(4, 17, 11))
    with ca.open(tmp_path / "x.bcolz", mode="r") as x:
        assert x.chunklen == 4 and x.chunks == (4, 17, 11)
        np.testing.assert_array_equal(x[:], cube)


@pytest.mark.parametrize("kind", ["dataset", "table"])
def test_cli_convert_refuses_array_options_for_datasets_and_tables(tmp_path, capsys, kind):
    if kind == "table":
        pytest.importorskip("pyarrow", reason="pyarrow is a test dependency")
        src, dst = DATA / "bcolz" / "t_basic.bcolz", tmp_path / "t.parquet"
    else:
        src, dst = DATA / "ds" / "medium.ds", tmp_path / "m.ds"
    assert main(["convert", str(src), str(dst), "--chunks", "10", "--codec", "zstd"]) == 1
    assert f"--chunks, --codec: only array conversions take these; this one converts a " \
           f"{kind}" in capsys.readouterr().err
    assert not dst.exists()


def test_cli_convert_keeps_an_existing_dataset_unless_forced(tmp_path, capsys):
    (tmp_path / "m.ds").write_bytes(b"old")
    assert main(["convert", str(DATA / "ds" / "medium.ds"), str(tmp_path / "m.ds")]) == 1
    assert "already exists (pass --force)" in capsys.readouterr().err
    assert (tmp_path / "m.ds").read_bytes() == b"old"
    assert main(["convert", "--force", str(DATA / "ds" / "medium.ds"), str(tmp_path / "m.ds")]) == 0
    assert ca.ds.read_header(tmp_path / "m.ds") == ca.ds.read_header(DATA / "ds" / "medium.ds")


def test_a_bloscpack_source_keeps_its_codec_and_shuffle(tmp_path, cube):
    ca.bloscpack.pack_array(cube, tmp_path / "s.blp",
                            cparams=ca.CParams(cname="zstd", clevel=8, shuffle=ca.BITSHUFFLE))
    convert(tmp_path / "s.blp", tmp_path / "d.carray")
    with ca.open(tmp_path / "d.carray", mode="r") as d:
        # Blosc headers do not record the level: Blosc's default stands for it.
        assert (d.cparams.cname, d.cparams.shuffle, d.cparams.clevel) == \
            ("zstd", ca.BITSHUFFLE, 5)
        np.testing.assert_array_equal(d[:], cube)


def test_a_blosc2_frame_source_keeps_its_codec(tmp_path, capsys):
    data = np.arange(1000, dtype="u8")
    blosc2.SChunk(chunksize=800, data=data, urlpath=str(tmp_path / "s.b2frame"), mode="w",
                  cparams=blosc2.CParams(codec=blosc2.Codec.ZLIB, clevel=3, typesize=8,
                                         filters=[blosc2.Filter.BITSHUFFLE]))
    assert main(["info", str(tmp_path / "s.b2frame")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert {"codec   : zlib", "clevel  : 3", "shuffle : bitshuffle"} <= set(out)
    convert(tmp_path / "s.b2frame", tmp_path / "d.carray")
    with ca.open(tmp_path / "d.carray", mode="r") as d:
        assert (d.cparams.cname, d.cparams.clevel, d.cparams.shuffle) == \
            ("zlib", 3, ca.BITSHUFFLE)
        np.testing.assert_array_equal(d[:], data)


@pytest.mark.parametrize(("argv", "message"), [
    (["{tmp}/missing.npy", "{tmp}/x.npy"], "no such"),
    (["{tmp}/s.npy", "{tmp}/x.ds"], "one is a dataset"),
    (["{tmp}/s.npy", "{tmp}/x", "--chunks", "a,b"], "comma-separated ints"),
    (["{table}", "{tmp}/x.npy"], "a table"),
])
def test_cli_convert_errors(tmp_path, cube, capsys, argv, message):
    np.save(tmp_path / "s.npy", cube)
    table = DATA / "bcolz" / "t_basic.bcolz"
    args = [a.format(tmp=tmp_path, table=table) for a in argv]
    assert main(["convert", *args]) == 1
    assert message in capsys.readouterr().err.lower()


# -- URLs ---------------------------------------------------------------------------------------


def _remote(url: str, options):
    from carray.stores import resolve

    store, path = resolve(url, options)
    store.invalidate()
    return store, path


@pytest.mark.parametrize("name", ["a.carray", "a.b2nd", "a.bcolz", "a"])
def test_round_trip_through_a_url_keeps_the_values(tmp_path, remote_root, cube, name):
    root, options = remote_root
    np.save(tmp_path / "src.npy", cube)
    url = f"{root}/{name}"
    convert(tmp_path / "src.npy", url, storage_options=options)
    on_url = ca.open(url, mode="r", storage_options=options)
    np.testing.assert_array_equal(on_url[:], cube)
    on_url.close()
    convert(url, f"{root}/copy.b2nd", storage_options=options)  # URL to URL
    convert(f"{root}/copy.b2nd", tmp_path / "back.npy", storage_options=options)
    back = np.load(tmp_path / "back.npy")
    assert back.dtype == cube.dtype
    np.testing.assert_array_equal(back, cube)
    store, path = _remote(root, options)
    assert sorted(store.listdir(path)) == sorted([name, "copy.b2nd"])  # no temporary left


def test_b2nd_on_a_url_is_a_frame_python_blosc2_reads(tmp_path, remote_root, cube):
    root, options = remote_root
    src = ca.carray(cube, chunks=(8, 5, 11), blocks=(2, 5, 11), rootdir=tmp_path / "a")
    src.attrs["units"] = "m"
    src.close()
    convert(tmp_path / "a", f"{root}/b.b2nd", storage_options=options)
    store, path = _remote(f"{root}/b.b2nd", options)
    (tmp_path / "b.b2nd").write_bytes(store.get(path))
    b = blosc2.open(str(tmp_path / "b.b2nd"))
    assert b.chunks == (8, 5, 11) and b.blocks == (2, 5, 11)
    np.testing.assert_array_equal(b[:], cube)


def test_existing_destination_at_a_url_is_kept_unless_forced(tmp_path, remote_root, cube):
    root, options = remote_root
    np.save(tmp_path / "s.npy", cube)
    url = f"{root}/d.b2nd"
    convert(tmp_path / "s.npy", url, storage_options=options, to="b2nd")
    np.save(tmp_path / "s.npy", cube[:3])
    with pytest.raises(ContainerExistsError, match="already exists"):
        convert(tmp_path / "s.npy", url, storage_options=options)
    np.testing.assert_array_equal(ca.open(url, mode="r", storage_options=options)[:], cube)
    convert_array(tmp_path / "s.npy", url, storage_options=options, overwrite=True)
    np.testing.assert_array_equal(ca.open(url, mode="r", storage_options=options)[:],
                                  cube[:3])


@pytest.mark.parametrize("dst", ["d.b2nd", "d.carray", "d.bcolz"])
def test_a_failed_copy_to_a_url_leaves_nothing_behind(tmp_path, remote_root, cube, dst):
    root, options = remote_root
    np.save(tmp_path / "s.npy", cube)

    def fail(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        convert_array(tmp_path / "s.npy", f"{root}/{dst}", progress=fail,
                      storage_options=options)
    store, path = _remote(root, options)
    assert store.listdir(path) == []


def test_a_failed_rename_on_an_object_store_leaves_nothing_behind(tmp_path, remote_root,
                                                                  cube, monkeypatch):
    from carray.stores.fsspec import FsspecStore

    root, options = remote_root
    np.save(tmp_path / "s.npy", cube)
    url = f"{root}/d.carray"
    convert(tmp_path / "s.npy", url, storage_options=options)
    real = FsspecStore.rename

    def copy_then_fail(self, src, dst):  # as a prefix copy cut off half way would
        real(self, src, dst)
        raise OSError("connection reset")

    monkeypatch.setattr(FsspecStore, "rename", copy_then_fail)
    with pytest.raises(OSError, match="connection reset"):
        convert_array(tmp_path / "s.npy", url, overwrite=True, storage_options=options)
    store, path = _remote(root, options)
    assert store.listdir(path) == []


def test_npy_urls_are_refused_by_name(tmp_path, cube):
    np.save(tmp_path / "s.npy", cube)
    with pytest.raises(ValueError, match=r"memory://x/d\.npy: \.npy files .* local"):
        convert(tmp_path / "s.npy", "memory://x/d.npy")
    with pytest.raises(ValueError, match=r"memory://x/s\.npy: \.npy files .* local"):
        convert("memory://x/s.npy", tmp_path / "d.b2nd")
    assert sorted(os.listdir(tmp_path)) == ["s.npy"]


def test_a_missing_url_source_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="memory:///nowhere/x"):
        convert("memory://nowhere/x.b2nd", tmp_path / "d.carray")
    assert os.listdir(tmp_path) == []


def test_ds_datasets_convert_to_and_from_urls_netcdf_stays_local(tmp_path, remote_root):
    from carray.formats import ds

    root, options = remote_root
    d = {"x": np.arange(12.0).reshape(3, 4), ".": {"x": {".dims": ["a", "b"], "units": "m"}}}
    ds.write(tmp_path / "a.ds", d)
    convert(tmp_path / "a.ds", f"{root}/a.ds", storage_options=options)
    convert(f"{root}/a.ds", tmp_path / "b.ds", storage_options=options)
    back = ds.read(tmp_path / "b.ds")
    np.testing.assert_array_equal(back["x"], d["x"])
    assert back["."]["x"]["units"] == "m"
    with pytest.raises(ValueError, match=r"/a\.nc: netcdf files .* local"):
        convert(tmp_path / "a.ds", f"{root}/a.nc", storage_options=options)
