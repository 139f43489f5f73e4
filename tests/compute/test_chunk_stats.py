"""Chunk statistics: kept through every write, saved in the zone-map segments, and whole-array
reductions answered from them equal to numpy's."""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.chunks.io import ChunkIO
from carray.compute import stats
from carray.compute.zonemap import _crc
from carray.engine import chunkstats
from carray.errors import VersionError, VersionsUnsupportedError

DTYPES = ["bool", "int8", "int32", "int64", "uint16", "uint64", "float32", "float64"]
OPS = ["sum", "mean", "var", "std", "min", "max", "count_nonzero", "any", "all"]


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
            special: bool) -> np.ndarray:
    """Random items of ``dtype``; big ints (sums wrap) and, with ``special``, NaN and
    infinities among the floats."""
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo = info.min if dtype.itemsize < 8 else info.min // 2
        if dtype == np.uint64:
            return rng.integers(2**63, 2**64 - 1, shape, dtype=np.uint64, endpoint=True)
        return rng.integers(lo, info.max, shape, dtype=dtype, endpoint=True)
    x = rng.normal(0, 1e3, shape).astype(dtype)
    if special and x.size:
        flat = x.reshape(-1)
        for value in (np.nan, np.inf, -np.inf):
            if rng.random() < 0.4:
                flat[rng.integers(0, flat.size)] = value
    return x


def _check(a: ca.carray, ref: np.ndarray, known: bool) -> None:
    """Every reduction of ``a`` equals numpy's on ``ref``; with ``known``, the statistics
    answer them (nothing decoded)."""
    assert a.shape == ref.shape
    if ref.size == 0:
        return
    if known:
        assert stats.whole(a) is not None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for op in OPS:
            want = np.count_nonzero(ref) if op == "count_nonzero" else getattr(np, op)(ref)
            got = getattr(a, op)() if op != "count_nonzero" else np.count_nonzero(a)
            if ref.dtype.kind in "biu" and op in ("sum", "min", "max", "count_nonzero", "any",
                                                  "all"):
                assert got == want and np.asarray(got).dtype == np.asarray(want).dtype, op
            else:
                assert np.asarray(got).dtype == np.asarray(want).dtype, op
                rtol, atol = 1e-12, 0.0
                if np.asarray(want).dtype != np.float64:
                    # Statistics work in float64, then cast; a float32 stream is worse, to
                    # float32's precision of the largest partial sums.
                    want = getattr(np, op)(ref.astype(np.float64))
                    finite = np.abs(ref[np.isfinite(ref)].astype(np.float64))
                    big = finite.max(initial=0) ** (2 if op == "var" else 1)
                    rtol, atol = 1e-6, 1e-5 * big * (ref.size if op == "sum" else 1)
                np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=op)


def _region(draw, shape: tuple[int, ...]) -> tuple[slice, ...]:
    out = []
    for n in shape:
        start = draw(st.integers(0, max(n - 1, 0)))
        out.append(slice(start, draw(st.integers(start, n))))
    return tuple(out)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_statistics_follow_every_write(data):
    draw = data.draw
    ndim = draw(st.integers(1, 3), "ndim")
    dtype = np.dtype(draw(st.sampled_from(DTYPES), "dtype"))
    chunks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    shape = (draw(st.integers(0, 14)), *(draw(st.integers(1, 5)) for _ in range(ndim - 1)))
    on_disk = draw(st.booleans(), "on disk")
    formats = ["superchunk", "b2nd"] + (["bcolz"] if ndim == 1 else [])  # bcolz: rows
    fmt = draw(st.sampled_from(formats), "format") if on_disk else None
    blocks = tuple(draw(st.integers(1, c)) for c in chunks) if draw(st.booleans()) and \
        fmt != "bcolz" else None
    grid = {"chunklen": chunks[0]} if fmt == "bcolz" else {"chunks": chunks, "blocks": blocks}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    special = draw(st.booleans(), "NaN/inf")
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "a") if on_disk else None
        ref = _values(rng, shape, dtype, special)
        a = ca.carray(ref, rootdir=root, format=fmt, **grid)
        known, saved = True, None
        _check(a, ref, known)
        for op in draw(st.lists(st.sampled_from(
                ["append", "setitem", "fill", "points", "grow", "shrink", "trailing", "fail", "flush",
                 "reopen", "commit", "restore"]), min_size=1, max_size=6), "ops"):
            if op == "append":
                more = _values(rng, (draw(st.integers(1, 9)), *ref.shape[1:]), dtype, special)
                a.append(more)
                ref = np.concatenate([ref, more])
            elif op in ("setitem", "fill") and ref.size:
                box = _region(draw, ref.shape)
                value = _values(rng, ref[box].shape, dtype, special) if op == "setitem" \
                    else np.zeros((), dtype)
                a[box] = value
                ref[box] = value
            elif op == "points" and ref.size and ndim == 1:  # N-d: main assigns the outer product
                flat = rng.choice(ref.size, size=min(ref.size, 3), replace=False)
                coords = np.unravel_index(flat, ref.shape)
                value = _values(rng, (len(flat),), dtype, special)
                a[coords] = value
                ref[coords] = value
            elif op == "grow" or op == "shrink":
                n = ref.shape[0] + draw(st.integers(1, 9)) if op == "grow" else \
                    draw(st.integers(0, ref.shape[0]))
                a.resize((n, *ref.shape[1:]))
                ref = np.concatenate([ref, np.zeros((n - len(ref), *ref.shape[1:]), dtype)]) \
                    if op == "grow" else ref[:n].copy()
            elif op == "trailing" and ndim > 1:
                new = (ref.shape[0], *(draw(st.integers(1, 5)) for _ in range(ndim - 1)))
                a.resize(new)
                grown = np.zeros(new, dtype)
                common = tuple(slice(0, min(o, n)) for o, n in zip(ref.shape, new, strict=True))
                grown[common] = ref[common]
                ref = grown
                known = False  # chunks renumbered: decoded (a few) or read next time
            elif op == "fail":
                more = _values(rng, (draw(st.integers(1, 9)), *ref.shape[1:]), dtype, special)
                with contextlib.suppress(RuntimeError), a.engine.transaction():
                    a.append(more)
                    if ref.size:
                        a[(slice(0, 1),) * ndim] = more.reshape(-1)[:1]
                    raise RuntimeError("the operation fails")
                known = False  # chunks put back are not trusted until written again
            elif op == "flush":
                a.flush()
            elif op == "reopen" and on_disk:
                a.close()
                a = ca.open(root)
                known = known and fmt != "b2nd"  # a Blosc2 frame keeps no sidecars
            elif op == "commit":
                with contextlib.suppress(VersionsUnsupportedError):
                    saved = (a.commit(), ref.copy())
            elif op == "restore" and saved is not None:
                try:
                    a.restore(saved[0])
                except VersionError:
                    continue
                ref = saved[1].copy()
                known = False  # the version's chunks: decoded (a few) or read next time
            _check(a, ref, known)
        if on_disk:
            a.close()


def _decodes(monkeypatch) -> list[str]:
    """The names of the chunk decoders called from now on."""
    calls: list[str] = []
    for name in ("decode_whole", "decode_range", "decode_blocks", "read_piece", "decoded",
                 "open"):
        original = getattr(ChunkIO, name)

        def counting(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(ChunkIO, name, counting)
    return calls


@pytest.mark.parametrize("shape,chunks", [((200_003,), (10_000,)),
                                          ((3001, 7, 5), (100, 4, 2))])
def test_whole_array_reductions_decode_no_chunk(tmp_path, monkeypatch, shape, chunks):
    x = np.random.default_rng(1).normal(size=shape)
    ca.carray(x, chunks=chunks, rootdir=tmp_path / "a").close()
    a = ca.open(tmp_path / "a", mode="r")
    calls = _decodes(monkeypatch)
    assert a.sum() == pytest.approx(x.sum(), rel=1e-12)
    np.testing.assert_allclose([a.mean(), a.var(), a.std(ddof=1)],
                               [x.mean(), x.var(), x.std(ddof=1)], rtol=1e-12)
    assert a.min() == x.min() and a.max() == x.max() and a.any() and a.all()
    assert np.count_nonzero(a) == np.count_nonzero(x)
    if len(shape) == 1:  # a 1-d tail is kept decoded; an N-d one is read when not kept
        assert calls == []
    assert (a + 0).sum() == pytest.approx(x.sum(), rel=1e-12)  # an expression decodes
    assert calls


def test_dtype_argument_follows_numpy():
    x = np.arange(-500, 1500, dtype=np.int32)
    a = ca.carray(x, chunks=(64,))
    for kw in ({}, {"dtype": np.int16}, {"dtype": np.uint64}, {"dtype": np.float32}):
        got, want = a.sum(**kw), x.sum(**kw)
        assert got == want and np.asarray(got).dtype == want.dtype
    assert np.asarray(a.mean(dtype=np.float32)).dtype == np.float32
    b = ca.carray(np.ones(1000, np.float32), chunks=(64,))
    assert np.asarray(b.sum()).dtype == np.float32 and b.sum() == 1000
    big = ca.carray(np.full(1000, 2**62, np.int64), chunks=(64,))
    assert big.sum() == np.full(1000, 2**62, np.int64).sum()  # wraps as numpy's does


def test_nan_aware_numbers_are_public():
    x = np.arange(1000.0)
    x[[3, 500]] = np.nan
    s = stats.whole(ca.carray(x, chunks=(64,)))
    assert s is not None and s.nnan == 2 and s.count == 1000
    assert s.total == pytest.approx(np.nansum(x)) and s.lo == 0 and s.hi == 999
    assert s.m2 / (s.count - s.nnan) == pytest.approx(np.nanvar(x))


def _segment(root) -> str:
    return os.path.join(root, "meta", "zonemap_000000.npy")


def test_a_damaged_segment_is_not_trusted(tmp_path):
    root = str(tmp_path / "a")
    x = np.arange(10_000, dtype=np.int64)
    ca.carray(x, chunks=(100,), rootdir=root).close()
    raw = bytearray(open(_segment(root), "rb").read())
    raw[-20] ^= 0x01  # in the last row's statistics
    with open(_segment(root), "wb") as f:
        f.write(raw)
    a = ca.open(root, mode="r")
    assert stats.whole(a) is None and not a.chunk_stats().known.any()
    assert a.sum() == x.sum() and a.var() == x.var()


def test_a_segment_of_format_1_loads_as_min_max_only(tmp_path):
    root = str(tmp_path / "a")
    x = np.arange(1000.0)
    ca.carray(x, chunks=(100,), rootdir=root).close()
    new = np.load(_segment(root))
    old = np.empty(len(new), dtype=[(n, new.dtype[n]) for n in
                                    ("lo", "hi", "nan", "known", "size", "mtime", "crc")])
    for name in old.dtype.names:
        old[name] = new[name]
    old["crc"] = _crc(old)
    np.save(_segment(root), old, allow_pickle=False)
    a = ca.open(root)
    zm = a.zone_map()
    assert zm.known.all() and not zm.full.any() and zm.hi[3] == 399
    assert stats.whole(a) is None and a.sum() == x.sum()
    a.close()  # saved again with statistics? only chunks summarised again are
    assert ca.open(root, mode="r").max() == 999


def test_rollback_forgets_what_it_undid(tmp_path):
    a = ca.carray(np.arange(1000.0), chunks=(100,))
    with contextlib.suppress(RuntimeError), a.engine.transaction():
        a[150:250] = -1.0
        raise RuntimeError("fails")
    zm = a.chunk_stats()
    assert zm.has_stats(0, 1) and zm.has_stats(3, 10)
    assert not zm.has_stats(1, 2) and not zm.has_stats(2, 3)  # put back: not trusted
    assert a.sum() == np.arange(1000.0).sum()  # the two decoded and summarised again
    assert zm.has_stats(0, 10) and stats.whole(a).total == np.arange(1000.0).sum()


def test_versions_show_their_own_statistics(tmp_path):
    root = str(tmp_path / "a")
    x = np.arange(1000)
    a = ca.carray(x, chunks=(100,), rootdir=root, storage={"versions": "all"})
    first = a.commit()
    a[:] = 7  # every chunk rewritten, the new statistics saved beside the array
    a.commit()
    a.close()
    old = ca.open(root, version=first)  # the saved statistics are the newer version's
    assert old.sum() == x.sum() and old.var() == x.var() and old.max() == 999
    old.close()
    a = ca.open(root)
    assert a.sum() == 7000
    a.restore(first)
    assert a.sum() == x.sum() and a.min() == 0
    a.close()
    assert ca.open(root, mode="r").sum() == x.sum()


@pytest.mark.parametrize("values", [
    np.array([1.0, np.inf, 2.0]), np.array([np.inf, -np.inf, 1.0]),
    np.array([np.nan, np.nan]), np.array([np.nan, -np.inf, 0.0, -0.0]),
    np.array([2**63, 2**64 - 1, 5], dtype=np.uint64),
    np.array([2**62, 2**62, 2**62, -7], dtype=np.int64),
    np.array([True, False, True]), np.arange(-5, 5, dtype=np.int8),
])
def test_one_chunk_gives_numpy_answers(values):
    s = chunkstats.of_values(values)
    numbers = values[~np.isnan(values)] if values.dtype.kind == "f" else values
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert s.count == values.size and s.nonzero == np.count_nonzero(values)
        assert s.nnan == values.size - numbers.size
        assert s.total == np.sum(numbers) or np.isnan(s.total) and np.isnan(np.sum(numbers))
        assert np.sum(values).dtype == np.asarray(s.total).dtype or values.dtype.kind == "f"
        if numbers.size:
            np.testing.assert_allclose(s.m2, np.var(numbers.astype(np.float64)) * numbers.size)
            assert s.lo == numbers.min() and s.hi == numbers.max()
        else:
            assert np.isnan(s.lo) and np.isnan(s.hi)


@pytest.mark.parametrize("value", [np.float64(0.5), np.float32(np.inf), np.float64(np.nan),
                                   np.int64(2**62), np.uint64(2**64 - 3), np.bool_(True),
                                   np.int16(-3)])
def test_a_fill_chunk_has_the_statistics_of_its_items(value):
    stored = chunkstats.of_values(np.full(1000, value))
    fill = chunkstats.constant(value, 1000)
    for field in ("count", "nnan", "nonzero", "total", "lo", "hi", "m2"):
        got, want = getattr(fill, field), getattr(stored, field)
        assert got == want or np.isnan(got) and np.isnan(want) or \
            np.isclose(got, want, rtol=1e-13), field
