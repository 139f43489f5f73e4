"""Copies and conversions that move stored chunks as bytes (carray.array.transfer): every pair of
formats round-trips, the chunks that can move do (and are checked on the way), the
others are decoded, and a failure leaves no destination and the source as it was."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

import carray as ca
from carray.array import transfer
from carray.cli.main import main
from carray.engine.moves import StoredChunks
from carray.errors import ChecksumError
from carray.integrations.convert import convert, convert_array

FORMATS = {"superchunk": "", "bcolz": ".bcolz", "b2nd": ".b2nd"}
CP = ca.CParams(cname="zstd", clevel=5)
N = 50_003  # not a multiple of the chunk length: a partial last chunk


@pytest.fixture
def data() -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.linspace(0, 100, N) + rng.normal(0, 0.01, N)


def _source(tmp_path: Path, fmt: str, data: np.ndarray) -> str:
    path = str(tmp_path / f"src{FORMATS[fmt]}")
    kw = {"chunklen": 4096} if fmt == "bcolz" else {"chunks": (4096,)}
    if fmt == "b2nd":
        kw["blocks"] = (1024,)
    ca.carray(data, rootdir=path, mode="w", format=fmt, cparams=CP, **kw).close()
    return path


@pytest.fixture
def no_decoding(monkeypatch):
    """Fails any decode of a source chunk: what passes moved every chunk as bytes."""
    def refuse(self, nchunk):
        raise AssertionError(f"chunk {nchunk} decoded")
    monkeypatch.setattr(StoredChunks, "region", refuse)


def _expected_moves(src: str, dst: str, nchunks: int) -> int:
    """Chunks that move between formats: none across Blosc1/Blosc2, all but the partial
    last chunk between the padding .b2nd and the truncating carray layout."""
    if (src == "bcolz") != (dst == "bcolz"):
        return 0
    if "b2nd" in (src, dst) and src != dst:
        return nchunks - 1
    return nchunks


@pytest.mark.parametrize("dst", FORMATS)
@pytest.mark.parametrize("src", FORMATS)
def test_copy_between_formats_moves_what_it_can(tmp_path, data, src, dst):
    a = ca.open(_source(tmp_path, src, data), mode="r")
    out, stats = transfer.copy_of(a, rootdir=str(tmp_path / f"dst{FORMATS[dst]}"), mode="w",
                                  format=dst)
    nchunks = -(-N // 4096)
    assert stats.moved + stats.decoded == nchunks
    assert stats.moved == _expected_moves(src, dst, nchunks), stats.summary()
    np.testing.assert_array_equal(out[:], data)
    out.close()
    with ca.open(str(tmp_path / f"dst{FORMATS[dst]}"), mode="r") as back:
        np.testing.assert_array_equal(back[:], data)
        assert back.cparams.cname == "zstd"
    # a.copy() is the same path
    again = a.copy(rootdir=str(tmp_path / f"again{FORMATS[dst]}"), mode="w", format=dst)
    np.testing.assert_array_equal(again[:], data)


@pytest.mark.parametrize("dst", [*FORMATS, "zarr", "blp", "npy"])
@pytest.mark.parametrize("src", [*FORMATS, "zarr", "blp", "npy"])
def test_convert_every_pair_round_trips(tmp_path, data, src, dst):
    if "zarr" in (src, dst):
        pytest.importorskip("zarr", reason="zarr is a test dependency")
    if src in FORMATS:
        spath = _source(tmp_path, src, data)
    elif src == "zarr":
        spath = str(tmp_path / "src.zarr")
        convert(_source(tmp_path, "bcolz", data), spath)
    elif src == "blp":
        spath = str(tmp_path / "src.blp")
        ca.bloscpack.pack_array(data, spath, cparams=CP, chunk_size=4096 * 8)
    else:
        spath = str(tmp_path / "src.npy")
        np.save(spath, data)
    dpath = str(tmp_path / ("dst" + {"zarr": ".zarr", "npy": ".npy", "blp": ".blp"}.get(
        dst, FORMATS.get(dst, ""))))
    stats = convert_array(spath, dpath, to={"superchunk": "carray", "blp": "bloscpack"}.get(dst, dst))
    if dst == "npy":
        back = np.load(dpath)
    elif dst == "blp":
        back = ca.bloscpack.unpack_array(dpath)
    elif dst == "zarr":
        import zarr
        back = zarr.open_array(dpath, mode="r")[:]
    else:
        back = np.asarray(ca.open(dpath, mode="r")[:])
    np.testing.assert_array_equal(back, data)
    nchunks = -(-N // 4096)
    if dst == "npy" or (dst == "zarr" and src != "bcolz"):
        assert stats is None  # written through numpy or Zarr itself
    elif "zarr" in (src, dst):
        # Zarr's Blosc chunks are Blosc1, as bcolz's: all move but the padded edge chunk
        moves = nchunks - 1 if {src, dst} == {"bcolz", "zarr"} else 0
        assert stats.moved == moves, stats.summary()
    elif "blp" in (src, dst):
        # Bloscpack chunks of whole rows are bcolz chunks, the last one truncated too
        assert stats.moved == (nchunks if {src, dst} == {"bcolz", "blp"} else 0), \
            stats.summary()
    elif src in FORMATS:
        assert stats.moved == _expected_moves(src, dst, nchunks), stats.summary()
    else:
        assert stats.moved == 0 and stats.decoded > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_format_moves_every_chunk_without_decoding(tmp_path, data, fmt, no_decoding):
    a = ca.open(_source(tmp_path, fmt, data), mode="r")
    out, stats = transfer.copy_of(a, rootdir=str(tmp_path / f"d{FORMATS[fmt]}"), mode="w",
                                  format=fmt)
    assert stats.decoded == 0
    np.testing.assert_array_equal(out[:], data)


def _flip_inside_chunk(a, path: str, nchunk: int) -> None:
    """Flip a byte in the middle of chunk ``nchunk``'s stored bytes, wherever its file is."""
    chunk = a.engine.read_stored(nchunk)
    files = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] \
        if os.path.isdir(path) else [path]
    for name in files:
        blob = bytearray(Path(name).read_bytes())
        at = blob.find(chunk[:256])
        if at >= 0:
            blob[at + len(chunk) // 2] ^= 0x40
            Path(name).write_bytes(bytes(blob))
            return
    raise AssertionError("chunk not found in any file")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_flipped_byte_is_caught_not_copied(tmp_path, data, fmt, no_decoding):
    spath = _source(tmp_path, fmt, data)
    with ca.open(spath, mode="r") as a:
        _flip_inside_chunk(a, spath, 3)
    dst = str(tmp_path / f"d{FORMATS[fmt]}")
    with pytest.raises(ChecksumError) as info:
        convert_array(spath, dst)
    assert spath in str(info.value)
    assert not os.path.exists(dst)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".d")]  # no temporary
    with ca.open(spath, mode="r") as a, pytest.raises(ChecksumError):
        a.copy(rootdir=str(tmp_path / f"e{FORMATS[fmt]}"), mode="w", format=fmt)
    assert not os.path.exists(tmp_path / f"e{FORMATS[fmt]}")


class _FailingWrites:
    """ENOSPC from the ``at``-th chunk write of a layout on."""

    def __init__(self, monkeypatch, layout_cls, at: int) -> None:
        self.calls = 0
        original = layout_cls.write_chunk

        def write_chunk(layout, nchunk, data, digest=None):
            self.calls += 1
            if self.calls >= at:
                raise OSError(errno.ENOSPC, "No space left on device")
            return original(layout, nchunk, data, digest)
        monkeypatch.setattr(layout_cls, "write_chunk", write_chunk)


def _layout_class(fmt: str):
    from carray.layouts.b2nd.layout import B2ndLayout
    from carray.layouts.bcolz.layout import BcolzLayout
    from carray.layouts.superchunk.layout import SuperchunkLayout
    return {"superchunk": SuperchunkLayout, "bcolz": BcolzLayout, "b2nd": B2ndLayout}[fmt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_disk_full_mid_copy_leaves_no_destination(tmp_path, data, fmt, monkeypatch):
    spath = _source(tmp_path, fmt, data)
    before = _files(spath)
    _FailingWrites(monkeypatch, _layout_class(fmt), at=5)
    dst = str(tmp_path / f"d{FORMATS[fmt]}")
    with pytest.raises(OSError):
        convert_array(spath, dst)
    assert not os.path.exists(dst)
    assert sorted(os.listdir(tmp_path)) == [Path(spath).name]
    with pytest.raises(OSError):
        ca.open(spath, mode="r").copy(rootdir=dst, mode="w", format=fmt)
    assert not os.path.exists(dst)
    monkeypatch.undo()
    with ca.open(spath, mode="r") as a:
        np.testing.assert_array_equal(a[:], data)
    assert _files(spath) == before


def _files(path: str) -> dict[str, bytes]:
    """Every file of a dataset (a directory or one file), by name, with its bytes."""
    if not os.path.isdir(path):
        return {path: Path(path).read_bytes()}
    return {os.path.join(d, f): Path(d, f).read_bytes() for d, _, fs in os.walk(path)
            for f in fs}


@pytest.mark.parametrize("at", [1, 3])
@pytest.mark.parametrize("fmt", FORMATS)
def test_enospc_from_the_disk_mid_move(tmp_path, data, fmt, at, monkeypatch):
    spath = _source(tmp_path, fmt, data)
    before = _files(spath)
    calls = [0]

    def failing(func):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] >= at:
                raise OSError(errno.ENOSPC, "No space left on device")
            return func(*args, **kwargs)
        return call
    for name in ("write", "pwrite", "fsync"):
        monkeypatch.setattr(os, name, failing(getattr(os, name)))
    dst = str(tmp_path / f"d{FORMATS[fmt]}")
    with pytest.raises(OSError) as info:
        convert_array(spath, dst)
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == [Path(spath).name]
    assert _files(spath) == before


def test_overrides_force_decoding_only_where_they_change_bytes(tmp_path, data):
    a = ca.open(_source(tmp_path, "superchunk", data), mode="r")
    _, same = transfer.copy_of(a, cparams=CP)
    assert same.decoded == 0
    _, other = transfer.copy_of(a, cparams=ca.CParams(cname="lz4", clevel=5))
    assert other.moved == 0 and "compression parameters differ" in other.reasons
    _, rechunked = transfer.copy_of(a, chunks=(2048,))
    assert rechunked.moved == 0 and any("chunks" in r for r in rechunked.reasons)
    out, cast = transfer.copy_of(a, dtype="f4")
    assert cast.moved == 0
    np.testing.assert_allclose(out[:], data.astype("f4"))


def test_copy_in_memory_and_of_a_tail(data):
    a = ca.carray(data, chunks=(4096,), cparams=CP)  # its last rows stay decoded in memory
    out, stats = transfer.copy_of(a)
    assert stats.moved == len(range(0, N, 4096)) - 1 and stats.decoded == 1
    np.testing.assert_array_equal(out[:], data)
    out.append(data[:10])
    np.testing.assert_array_equal(out[:], np.concatenate([data, data[:10]]))


def test_group_copy_moves_chunks(tmp_path, data):
    g = ca.group(str(tmp_path / "g"), mode="w")
    g.create_array("x", data, chunks=(4096,), cparams=CP)
    g.create_group("sub").create_array("y", data.reshape(-1, 1)[:50000].reshape(500, 100),
                                       chunks=(64, 50))
    g.create_table("t", {"a": np.arange(10)})
    stats = ca.copy_group(g, str(tmp_path / "h"))
    assert stats["x"].decoded == 0 and stats["x"].moved == -(-N // 4096)
    assert stats["sub/y"].decoded == 0
    g.close()
    with ca.open_group(str(tmp_path / "h"), mode="r") as h:
        np.testing.assert_array_equal(h["x"][:], data)
        np.testing.assert_array_equal(h["sub/y"][:], data[:50000].reshape(500, 100))
        assert list(h["t"]["a"][:]) == list(range(10))


def test_cli_convert_verbose_says_what_moved(tmp_path, data, capsys):
    spath = _source(tmp_path, "superchunk", data)
    assert main(["convert", "-v", spath, str(tmp_path / "d.b2nd")]) == 0
    out = capsys.readouterr().out
    nchunks = -(-N // 4096)
    assert f"{nchunks - 1} chunks moved as bytes, 1 decoded (1 last partial chunk" in out
    assert main(["convert", "-v", spath, str(tmp_path / "d.bcolz")]) == 0
    assert f"0 chunks moved as bytes, {nchunks} decoded ({nchunks} chunk format Blosc2 -> " \
        "Blosc1)" in capsys.readouterr().out
    assert main(["convert", spath, str(tmp_path / "q")]) == 0
    assert "moved" not in capsys.readouterr().out


def test_zarr_chunks_move_to_bcolz_and_back_n_d(tmp_path, no_decoding):
    zarr = pytest.importorskip("zarr", reason="zarr is a test dependency")
    y = np.arange(64 * 7, dtype="i4").reshape(64, 7)
    ca.carray(y, rootdir=str(tmp_path / "a.bcolz"), format="bcolz", chunklen=8,
              mode="w", cparams=CP).close()
    there = convert_array(str(tmp_path / "a.bcolz"), str(tmp_path / "a.zarr"))
    assert (there.moved, there.decoded) == (8, 0)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"), mode="r")[:], y)
    back = convert_array(str(tmp_path / "a.zarr"), str(tmp_path / "b.bcolz"))
    assert (back.moved, back.decoded) == (8, 0)
    np.testing.assert_array_equal(ca.open(str(tmp_path / "b.bcolz"), mode="r")[:], y)


def test_a_damaged_zarr_chunk_header_is_refused(tmp_path):
    pytest.importorskip("zarr", reason="zarr is a test dependency")
    y = np.arange(4096 * 3, dtype="f8")
    ca.carray(y, rootdir=str(tmp_path / "a.bcolz"), format="bcolz", chunklen=4096,
              mode="w").close()
    convert_array(str(tmp_path / "a.bcolz"), str(tmp_path / "a.zarr"))
    chunk = tmp_path / "a.zarr" / "c" / "1"
    blob = bytearray(chunk.read_bytes())
    blob[4:8] = (10**9).to_bytes(4, "little")  # a decoded size no chunk of the grid has
    chunk.write_bytes(bytes(blob))
    with pytest.raises(ca.FormatError) as info:
        convert_array(str(tmp_path / "a.zarr"), str(tmp_path / "b.bcolz"))
    assert "c/1" in str(info.value)
    assert not (tmp_path / "b.bcolz").exists()


def test_a_flipped_byte_in_a_bloscpack_chunk_is_caught(tmp_path, data, no_decoding):
    spath = str(tmp_path / "s.blp")
    ca.bloscpack.pack_array(data, spath, cparams=CP, chunk_size=4096 * 8)
    dst = str(tmp_path / "d.bcolz")
    assert convert_array(spath, dst).decoded == 0
    blob = bytearray(Path(spath).read_bytes())
    blob[len(blob) // 2] ^= 0x01
    Path(spath).write_bytes(bytes(blob))
    with pytest.raises((ChecksumError, ca.FormatError)) as info:
        convert_array(spath, str(tmp_path / "e.bcolz"))
    assert spath in str(info.value)
    assert not (tmp_path / "e.bcolz").exists()


def test_bcolz_chunks_moved_into_a_bloscpack_file_read_by_bloscpack(tmp_path, bloscpack_peer,
                                                                    no_decoding):
    y = np.arange(50 * 3 * 4, dtype="i2").reshape(50, 3, 4)
    ca.carray(y, rootdir=str(tmp_path / "y.bcolz"), format="bcolz", chunklen=8, mode="w",
              cparams=CP).close()
    stats = convert_array(str(tmp_path / "y.bcolz"), str(tmp_path / "y.blp"))
    assert (stats.moved, stats.decoded) == (7, 0)
    np.testing.assert_array_equal(
        bloscpack_peer.unpack_ndarray_from_file(str(tmp_path / "y.blp")), y)


def test_cli_convert_verbose_of_a_group_says_it_per_array(tmp_path, data, capsys):
    with ca.group(str(tmp_path / "g"), mode="w") as g:
        g.create_array("x", data, chunks=(4096,), cparams=CP)
    assert main(["convert", "-v", str(tmp_path / "g"), str(tmp_path / "h")]) == 0
    out = capsys.readouterr().out
    assert f"h/x: {-(-N // 4096)} chunks moved as bytes, 0 decoded" in out


def test_chunks_a_frame_pads_to_whole_blocks_are_decoded(tmp_path):
    """A ``.b2nd`` chunk is padded to whole blocks: a chunk of 10,000 float64 whose Blosc
    blocks are 2,048 items stores 10,240 there, so it cannot move as it is."""
    a = ca.carray(np.arange(100_000.0), chunklen=10_000, rootdir=str(tmp_path / "a"),
                  mode="w")
    out, stats = transfer.copy_of(a, rootdir=str(tmp_path / "a.b2nd"))
    np.testing.assert_array_equal(out[:], a[:])
    assert stats.moved == 0 and stats.decoded == 10
    assert "padded to whole blocks" in stats.summary()
    out.close()
    back, stats = transfer.copy_of(ca.open(str(tmp_path / "a.b2nd")),
                                   rootdir=str(tmp_path / "back"))
    np.testing.assert_array_equal(back[:], a[:])
