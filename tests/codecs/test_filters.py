"""The Blosc2 filter pipeline of ``CParams(filters=[...])``: parameters and chunks."""

from __future__ import annotations

import blosc2
import numpy as np
import pytest

from carray.codecs import blosc
from carray.core.params import BITSHUFFLE, NOSHUFFLE, SHUFFLE, CParams
from carray.errors import CodecError

F = blosc2.Filter
PIPELINES = [
    ([], [F.NOFILTER], [0]),
    (["shuffle"], [F.SHUFFLE], [0]),
    (["bitshuffle"], [F.BITSHUFFLE], [0]),
    (["delta"], [F.DELTA], [0]),
    (["bytedelta"], [F.BYTEDELTA], [0]),
    (["shuffle", "bytedelta"], [F.SHUFFLE, F.BYTEDELTA], [0, 0]),
    (["delta", "shuffle"], [F.DELTA, F.SHUFFLE], [0, 0]),
    ([("trunc_prec", 12), "shuffle"], [F.TRUNC_PREC, F.SHUFFLE], [12, 0]),
    ([("trunc_prec", 30), "shuffle", "bytedelta"], [F.TRUNC_PREC, F.SHUFFLE, F.BYTEDELTA],
     [30, 0, 0]),
]


# -- parameters -----------------------------------------------------------------------------

def test_shuffle_is_the_one_filter_shorthand():
    assert CParams().filters == (("shuffle", 0),)
    assert CParams(shuffle=BITSHUFFLE).filters == (("bitshuffle", 0),)
    assert CParams(shuffle=NOSHUFFLE).filters == ()
    assert CParams(filters=["shuffle"]) == CParams()
    assert CParams(filters=[]) == CParams(shuffle=0)


def test_filters_are_ordered_and_show_their_last_shuffle():
    cp = CParams(filters=["bitshuffle", "bytedelta", "shuffle"])
    assert cp.filters == (("bitshuffle", 0), ("bytedelta", 0), ("shuffle", 0))
    assert cp.shuffle == SHUFFLE
    assert CParams(filters=["delta"]).shuffle == NOSHUFFLE
    assert CParams(filters=["shuffle", "delta"]) != CParams(filters=["delta", "shuffle"])


@pytest.mark.parametrize("bad", [["zfp"], [("trunc_prec", 0)], [("trunc_prec", 99)],
                                 [("delta", 300)], [("shuffle", -1)], ["shuffle"] * 7,
                                 "shuffle", [NOSHUFFLE], [("trunc_prec",)]])
def test_bad_filters_refused(bad):
    with pytest.raises(ValueError):
        CParams(filters=bad)


def test_shuffle_contradicting_filters_refused():
    with pytest.raises(ValueError, match="contradicts"):
        CParams(shuffle=BITSHUFFLE, filters=["shuffle"])
    assert CParams(shuffle=SHUFFLE, filters=["delta", "shuffle"]).shuffle == SHUFFLE


def test_replace_keeps_filters_and_shuffle_consistent():
    cp = CParams(filters=["delta", "shuffle"])
    assert cp.replace(shuffle=BITSHUFFLE).filters == (("bitshuffle", 0),)
    assert CParams().replace(filters=["bytedelta"]).shuffle == NOSHUFFLE
    assert cp.replace(clevel=1).filters == cp.filters


def test_to_dict_and_coerce_round_trip():
    cp = CParams(cname="zstd", filters=[("trunc_prec", 10), "shuffle"])
    d = cp.to_dict()
    assert d["filters"] == [["trunc_prec", 10], ["shuffle", 0]]
    assert CParams.coerce(d) == cp
    assert "filters" not in CParams().to_dict()  # bcolz's four keys for the plain case


def test_lossless_drops_only_lossy_steps():
    cp = CParams(filters=[("trunc_prec", 10), "bytedelta", "shuffle"], quantize=3)
    assert cp.lossless.filters == (("bytedelta", 0), ("shuffle", 0))
    assert cp.lossless.quantize == 0
    plain = CParams(filters=["delta", "shuffle"])
    assert plain.lossless is plain


def test_repr_names_the_pipeline():
    assert "shuffle=SHUFFLE" in repr(CParams())
    assert "trunc_prec" in repr(CParams(filters=[("trunc_prec", 8)]))


# -- chunks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("filters,codes,metas", PIPELINES, ids=lambda p: str(p))
def test_chunk_decodes_as_python_blosc2_makes_it(filters, codes, metas):
    rng = np.random.default_rng(1)
    data = np.cumsum(rng.normal(size=40_000)).astype("f8")
    cp = CParams(cname="zstd", clevel=5, filters=filters)
    ours = blosc.compress2(data, 8, cp)
    # python-blosc2 may scribble on its input with long pipelines: hand it a copy.
    theirs = blosc2.compress2(data.copy(), typesize=8, codec=blosc2.Codec.ZSTD, clevel=5,
                              filters=codes, filters_meta=metas)
    got = np.empty_like(data)
    blosc.decompress_into(ours, got)
    want = np.frombuffer(blosc2.decompress2(theirs), "f8")
    np.testing.assert_array_equal(got, want)  # trunc_prec: lossy, but the same loss
    assert np.frombuffer(blosc2.decompress2(ours), "f8").tobytes() == got.tobytes()
    header_filters = list(ours[16:16 + len(codes)])
    assert header_filters == [c.value for c in codes]


def test_compress_never_changes_the_callers_array():
    data = np.cumsum(np.random.default_rng(2).normal(size=20_000))
    keep = data.copy()
    for filters in ([("trunc_prec", 30), "shuffle", "bytedelta"],
                    ["shuffle", "bytedelta", "bitshuffle"]):
        blosc.compress2(data, 8, CParams(filters=filters))
        np.testing.assert_array_equal(data, keep)


def test_delta_in_a_long_pipeline_refused():
    with pytest.raises(ValueError, match="delta"):
        CParams(filters=["shuffle", "delta", "bytedelta"])


@pytest.mark.parametrize("filters", [["shuffle", "bytedelta", "bitshuffle"],
                                     [("trunc_prec", 40), "bitshuffle", "shuffle", "bytedelta"]])
def test_long_pipelines_round_trip(filters):
    data = np.cumsum(np.random.default_rng(3).normal(size=30_000))
    out = np.empty_like(data)
    blosc.decompress_into(blosc.compress2(data, 8, CParams(filters=filters)), out)
    np.testing.assert_allclose(out, data, rtol=1e-9, atol=0)


def test_trunc_prec_is_lossy_within_its_bits():
    data = np.linspace(0, 1, 10_000)
    out = np.empty_like(data)
    blosc.decompress_into(blosc.compress2(data, 8, CParams(filters=[("trunc_prec", 10)])), out)
    assert not np.array_equal(out, data)
    np.testing.assert_allclose(out, data, rtol=2.0**-10)


def test_lossless_pipelines_are_exact():
    data = np.arange(50_000, dtype="i4") * 3
    for filters in (["delta"], ["bytedelta"], ["shuffle", "bytedelta"], ["delta", "bitshuffle"]):
        out = np.empty_like(data)
        blosc.decompress_into(blosc.compress2(data, 4, CParams(filters=filters)), out)
        np.testing.assert_array_equal(out, data)


def test_partial_decode_with_pipelines():
    data = np.arange(200_000, dtype="i8")
    for filters in (["delta", "shuffle"], ["shuffle", "bytedelta"]):
        chunk = blosc.compress2(data, 8, CParams(filters=filters), blocksize=16384)
        out = np.empty(1000, "i8")
        blosc.getitem_into(chunk, 150_000 * 8, out)
        np.testing.assert_array_equal(out, data[150_000:151_000])


def test_trunc_prec_on_integers_is_a_codec_error():
    with pytest.raises(CodecError, match="trunc_prec"):
        blosc.compress2(np.arange(100, dtype="i2"), 2, CParams(filters=[("trunc_prec", 3)]))


@pytest.mark.parametrize("filters", [["delta"], ["shuffle", "bytedelta"],
                                     [("trunc_prec", 10)]])
def test_blosc1_refuses_a_pipeline(filters):
    with pytest.raises(CodecError, match="single shuffle"):
        blosc.compress1(np.arange(100.0), 8, CParams(filters=filters))


@pytest.mark.parametrize("filters", [[], ["shuffle"], ["bitshuffle"]])
def test_blosc1_takes_a_single_shuffle(filters):
    data = np.arange(1000.0)
    chunk = blosc.compress1(data, 8, CParams(filters=filters))
    out = np.empty_like(data)
    blosc.decompress_into(chunk, out)
    np.testing.assert_array_equal(out, data)
