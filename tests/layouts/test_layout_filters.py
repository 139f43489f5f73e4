"""Filter pipelines stored by each layout: b2nd frames (read by python-blosc2 too),
the superchunk layout's ``meta/storage``, and the Blosc1 layouts that refuse them."""

from __future__ import annotations

import json

import blosc2
import numpy as np
import pytest
from metafiles import read_meta, write_meta

import carray as ca
from carray.core.params import CParams
from carray.errors import CodecError, FormatError

F = blosc2.Filter
# (carray's pipeline, python-blosc2's filters, filters_meta)
PIPELINES = [
    ([("trunc_prec", 12), "shuffle"], [F.TRUNC_PREC, F.SHUFFLE], [12, 0]),
    (["delta", "shuffle"], [F.DELTA, F.SHUFFLE], [0, 0]),
    (["shuffle", "bytedelta"], [F.SHUFFLE, F.BYTEDELTA], [0, 0]),
    (["bitshuffle"], [F.BITSHUFFLE], [0]),
    ([("trunc_prec", 20), "bitshuffle", "bytedelta"], [F.TRUNC_PREC, F.BITSHUFFLE, F.BYTEDELTA],
     [20, 0, 0]),
]
IDS = ["trunc_shuffle", "delta_shuffle", "shuffle_bytedelta", "bitshuffle", "trunc_bit_bd"]


def _data():
    return np.cumsum(np.random.default_rng(7).normal(size=(120, 250)), axis=1)


def _pipeline(arr) -> list[tuple[int, int]]:
    """The used slots of a python-blosc2 array's filters, with their meta values."""
    cp = arr.cparams
    return [(f.value, m) for f, m in zip(cp.filters, cp.filters_meta, strict=True) if f.value]


def _reference(data, chunks, blocks, codes, metas):
    """What python-blosc2 stores for ``data`` with this pipeline (its lossy steps included)."""
    cp = blosc2.CParams(codec=blosc2.Codec.ZSTD, clevel=5, filters=codes, filters_meta=metas)
    return blosc2.asarray(data.copy(), chunks=chunks, blocks=blocks, cparams=cp)[:]


@pytest.mark.parametrize("filters,codes,metas", PIPELINES, ids=IDS)
def test_b2nd_written_by_carray_reads_the_same_in_python_blosc2(tmp_path, filters, codes, metas):
    data = _data()
    path = str(tmp_path / "f.b2nd")
    a = ca.carray(data, rootdir=path, chunks=(60, 125), blocks=(20, 125),
                  cparams=CParams(cname="zstd", filters=filters))
    a.flush()
    theirs = blosc2.open(path)
    ref_path = str(tmp_path / "ref.b2nd")
    blosc2.asarray(data.copy(), urlpath=ref_path, mode="w", chunks=(60, 125), blocks=(20, 125),
                   cparams=blosc2.CParams(codec=blosc2.Codec.ZSTD, filters=codes,
                                          filters_meta=metas))
    ref = blosc2.open(ref_path)
    assert _pipeline(theirs) == _pipeline(ref)  # bytedelta's meta: the typesize, as theirs
    want = ref[:]
    np.testing.assert_array_equal(theirs[:], want)  # lossy, but the same loss as theirs
    np.testing.assert_array_equal(a[:], want)
    again = ca.open(path, mode="r")
    assert again.cparams.filters == CParams(filters=filters).filters
    np.testing.assert_array_equal(again[:], want)


@pytest.mark.parametrize("filters,codes,metas", PIPELINES, ids=IDS)
def test_b2nd_written_by_python_blosc2_reads_and_grows_in_carray(tmp_path, filters, codes,
                                                                  metas):
    data = _data()
    path = str(tmp_path / "p.b2nd")
    cp = blosc2.CParams(codec=blosc2.Codec.ZSTD, filters=codes, filters_meta=metas)
    blosc2.asarray(data.copy(), urlpath=path, mode="w", chunks=(60, 125), blocks=(20, 125),
                   cparams=cp)
    want = blosc2.open(path)[:]
    a = ca.open(path)
    assert a.cparams.filters == CParams(filters=filters).filters
    np.testing.assert_array_equal(a[:], want)
    a[3] = -1.0  # new chunks take the frame's pipeline
    a.flush()
    got = blosc2.open(path)[:]  # whole reads: python-blosc2's slices mis-read DELTA blocks
    np.testing.assert_array_equal(got[3], _reference(np.full((1, 250), -1.0), (1, 125),
                                                     (1, 125), codes, metas)[0])
    np.testing.assert_array_equal(np.delete(got, 3, axis=0), np.delete(want, 3, axis=0))


def test_superchunk_persists_the_pipeline(tmp_path):
    data = _data()
    cp = CParams(cname="zstd", filters=[("trunc_prec", 16), "shuffle", "bytedelta"])
    a = ca.carray(data, rootdir=str(tmp_path / "s"), cparams=cp)
    a.flush()
    storage = json.loads((tmp_path / "s" / "meta" / "storage").read_text())
    assert storage["filters"] == ["trunc_prec:16", "shuffle", "bytedelta"]
    b = ca.open(str(tmp_path / "s"), mode="r")
    assert b.cparams == cp
    np.testing.assert_allclose(b[:], data, rtol=2.0**-15)
    assert not np.array_equal(b[:], data)


def test_superchunk_plain_shuffle_meta_unchanged(tmp_path):
    ca.carray(np.arange(100.0), rootdir=str(tmp_path / "s")).flush()
    storage = json.loads((tmp_path / "s" / "meta" / "storage").read_text())
    assert storage["filters"] == ["shuffle"]


def test_superchunk_old_meta_without_filters_reads(tmp_path):
    ca.carray(np.arange(1000.0), rootdir=str(tmp_path / "s"),
              cparams=CParams(shuffle=2, quantize=3)).flush()
    path = tmp_path / "s" / "meta" / "storage"
    storage = read_meta(path)
    assert storage["filters"] == ["quantize:3", "bitshuffle"]
    del storage["filters"]  # as written before filters were recorded at all
    write_meta(path, storage)
    b = ca.open(str(tmp_path / "s"), mode="r")
    assert b.cparams.filters == () and b.cparams.quantize == 0
    np.testing.assert_allclose(b[:], np.arange(1000.0), atol=0.01)


@pytest.mark.parametrize("bad", [["zfp"], ["trunc_prec:x"], ["quantize:-1"], [7]])
def test_superchunk_unknown_filter_is_a_format_error(tmp_path, bad):
    ca.carray(np.arange(10.0), rootdir=str(tmp_path / "s")).flush()
    path = tmp_path / "s" / "meta" / "storage"
    storage = read_meta(path)
    storage["filters"] = bad
    write_meta(path, storage)
    with pytest.raises(FormatError, match="storage"):
        ca.open(str(tmp_path / "s"))


@pytest.mark.parametrize("kwargs", [{"format": "bcolz"},
                                    {"format": "superchunk", "storage": {"blosc1": True}}])
def test_blosc1_layouts_refuse_a_pipeline(tmp_path, kwargs):
    root = tmp_path / "b"
    with pytest.raises(CodecError, match="single shuffle"):
        ca.carray(np.arange(10.0), rootdir=str(root), mode="w",
                  cparams=CParams(filters=["delta", "shuffle"]), **kwargs)
    assert not (root / "meta" / "storage").exists()


def test_bcolz_takes_a_single_shuffle_from_filters(tmp_path):
    a = ca.carray(np.arange(10.0), rootdir=str(tmp_path / "b"), format="bcolz",
                  cparams=CParams(filters=["bitshuffle"]))
    a.flush()
    storage = json.loads((tmp_path / "b" / "meta" / "storage").read_text())
    assert storage["cparams"] == {"clevel": 5, "shuffle": 2, "cname": "lz4", "quantize": 0}


def test_superchunk_blosc1_meta_with_a_pipeline_is_a_format_error(tmp_path):
    ca.carray(np.arange(10.0), rootdir=str(tmp_path / "s"), storage={"blosc1": True}).flush()
    path = tmp_path / "s" / "meta" / "storage"
    storage = read_meta(path)
    assert storage["codec"]["library"] == "blosc1"
    storage["filters"] = ["delta"]
    write_meta(path, storage)
    with pytest.raises(FormatError, match="Blosc1"):
        ca.open(str(tmp_path / "s"))
