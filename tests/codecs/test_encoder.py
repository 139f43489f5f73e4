"""Compressing on a context of one's own (carray.codecs._encoder): the same chunks as
python-blosc2's, for the codecs and filters libblosc2 has built in."""

from __future__ import annotations

import blosc2
import numpy as np
import pytest

import carray as ca
from carray.codecs import _encoder
from carray.codecs import blosc as codec

CODECS = [blosc2.Codec.BLOSCLZ, blosc2.Codec.LZ4, blosc2.Codec.LZ4HC, blosc2.Codec.ZLIB,
          blosc2.Codec.ZSTD]
PIPELINES = [([blosc2.Filter.NOFILTER], [0]), ([blosc2.Filter.SHUFFLE], [0]),
             ([blosc2.Filter.BITSHUFFLE], [0]),
             ([blosc2.Filter.DELTA, blosc2.Filter.SHUFFLE], [0, 0])]


def test_the_wheel_s_library_is_used():
    assert _encoder.available(), "blosc2.h or the library changed: compression is serial"


@pytest.mark.parametrize("cname", CODECS)
@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("dtype", ["i8", "f4", "u2"])
def test_chunks_are_python_blosc2_s_byte_for_byte(cname, pipeline, dtype):
    rng = np.random.default_rng(3)
    data = np.cumsum(rng.integers(-3, 4, 30_001)).astype(dtype)
    filters, metas = pipeline
    ours = _encoder.compress(data, data.itemsize, cname, 5, filters, metas, 8192)
    theirs = blosc2.compress2(data, typesize=data.itemsize, clevel=5, codec=cname,
                              filters=filters, filters_meta=metas, blocksize=8192,
                              nthreads=1)
    assert ours == bytes(theirs)
    np.testing.assert_array_equal(np.frombuffer(blosc2.decompress2(ours), dtype=dtype), data)


def test_plugins_are_left_to_python_blosc2():
    assert not _encoder.handles(blosc2.Codec.LZ4, [blosc2.Filter.SHUFFLE, 35])  # bytedelta
    assert not _encoder.handles(32, [blosc2.Filter.SHUFFLE])  # a plugin codec (ndlz)
    assert _encoder.handles(blosc2.Codec.ZSTD, [blosc2.Filter.BITSHUFFLE])


def test_worker_compression_falls_back_when_unusable(monkeypatch):
    data = np.arange(50_000, dtype="i8")
    cp = ca.CParams(cname="lz4", clevel=5)
    with_ctx = codec.compress2(data, 8, cp, nthreads=1)
    monkeypatch.setattr(_encoder, "_usable", False)
    assert codec.compress2(data, 8, cp, nthreads=1) == with_ctx


def test_an_empty_chunk():
    empty = np.empty(0, dtype="i8")
    assert blosc2.decompress2(_encoder.compress(empty, 8, blosc2.Codec.LZ4, 5, [1], [0], 0)) \
        == b""
