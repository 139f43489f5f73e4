"""Frames python-blosc2 writes with plugin codecs and filters: decoded through libblosc2's
plugins when it has them, else a CodecUnavailableError naming the codec."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import blosc2
import numpy as np
import pytest

import carray as ca
from carray.codecs import blosc
from carray.codecs.pipeline import plugin_names
from carray.errors import CodecUnavailableError, FormatError
from carray.layouts.b2nd.frame import Frame

DATA = np.linspace(0, 1, 20_000).reshape(100, 200)
PLUGINS = {
    "zfp_acc": blosc2.CParams(codec=blosc2.Codec.ZFP_ACC, codec_meta=(-10) & 0xFF,
                              filters=[], filters_meta=[]),
    "zfp_prec": blosc2.CParams(codec=blosc2.Codec.ZFP_PREC, codec_meta=20, filters=[],
                               filters_meta=[]),
    "zfp_rate": blosc2.CParams(codec=blosc2.Codec.ZFP_RATE, codec_meta=30, filters=[],
                               filters_meta=[]),
    "ndcell": blosc2.CParams(filters=[blosc2.Filter.NDCELL], filters_meta=[4]),
    "ndmean": blosc2.CParams(filters=[blosc2.Filter.NDMEAN], filters_meta=[4]),
}


def _write(tmp_path, name, contiguous=True):
    path = str(tmp_path / f"{name}.b2nd")
    blosc2.asarray(DATA, urlpath=path, mode="w", chunks=(50, 100), blocks=(10, 20),
                   cparams=PLUGINS[name], contiguous=contiguous)
    return path, blosc2.open(path)[:]


@pytest.mark.parametrize("name", list(PLUGINS))
def test_plugin_frames_read_as_python_blosc2_reads_them(tmp_path, name):
    path, want = _write(tmp_path, name)
    a = ca.open(path, mode="r")
    np.testing.assert_array_equal(a[:], want)
    np.testing.assert_array_equal(a[3, 5:9], want[3, 5:9])  # partial reads too
    np.testing.assert_array_equal(a[::7, 150:], want[::7, 150:])


def test_plugin_sparse_frame(tmp_path):
    path, want = _write(tmp_path, "zfp_rate", contiguous=False)
    a = ca.open(path, mode="r")
    np.testing.assert_array_equal(a[:], want)
    np.testing.assert_array_equal(a[7, 3:50], want[7, 3:50])


def test_writing_into_a_plugin_frame(tmp_path):
    path, want = _write(tmp_path, "ndcell")
    a = ca.open(path)
    a[0] = 5.0
    a.flush()
    want[0] = 5.0
    np.testing.assert_array_equal(blosc2.open(path)[:], want)
    np.testing.assert_array_equal(ca.open(path, mode="r")[:], want)


@pytest.mark.parametrize("name,label", [("zfp_acc", "codec zfp_acc"), ("ndmean", "filter ndmean")])
def test_a_plugin_chunk_alone_is_codec_unavailable(tmp_path, name, label):
    path, _ = _write(tmp_path, name)
    with Frame(path) as frame:  # the stored bytes, without the frame around them
        chunk = frame.read_chunk(0)
    assert label in plugin_names(chunk)
    assert plugin_names(blosc.compress2(DATA, 8, ca.CParams())) == []
    out = np.empty(blosc.read_header(chunk).nbytes, np.uint8)
    with pytest.raises(CodecUnavailableError, match=label):
        blosc.decompress_into(chunk, out, path)


def test_format_reader_names_the_plugin(tmp_path):
    path, _ = _write(tmp_path, "zfp_prec")
    with Frame(path) as frame, pytest.raises(CodecUnavailableError, match="zfp_prec"):
        frame.read()


_USER_CODEC = textwrap.dedent("""
    import sys, zlib, numpy as np, blosc2

    def encoder(inp, out, meta, schunk):
        z = zlib.compress(inp.tobytes())
        if len(z) > out.size:
            return 0
        out[:len(z)] = np.frombuffer(z, np.uint8)
        return len(z)

    def decoder(inp, out, meta, schunk):
        d = zlib.decompress(inp.tobytes())
        out[:len(d)] = np.frombuffer(d, np.uint8)
        return len(d)

    blosc2.register_codec("zlibpy", 200, encoder, decoder)
    a = np.arange(10_000, dtype="i4").reshape(100, 100)
    cp = blosc2.CParams(codec=200, filters=[], filters_meta=[], nthreads=1)
    blosc2.asarray(a, urlpath=sys.argv[1], mode="w", chunks=(50, 50), blocks=(10, 50),
                   cparams=cp, dparams=blosc2.DParams(nthreads=1))
""")


def test_user_codec_not_registered_here_is_codec_unavailable(tmp_path):
    path = str(tmp_path / "user.b2nd")
    script = tmp_path / "make.py"
    script.write_text(_USER_CODEC)
    subprocess.run([sys.executable, str(script), path], check=True, capture_output=True)
    a = ca.open(path, mode="r")
    assert a.shape == (100, 100)
    for key in (slice(None), (3, slice(4, 7))):
        with pytest.raises(CodecUnavailableError, match="codec id 200") as info:
            a[key]
        assert not isinstance(info.value, FormatError)  # never called corruption
