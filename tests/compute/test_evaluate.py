"""Chunk-by-chunk evaluation on worker threads: results, memory, determinism."""

from __future__ import annotations

import gc
import tempfile
import tracemalloc

import numpy as np
import pytest
from compute_helpers import elements
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import carray as ca
from carray import registry
from carray.codecs.threads import get_nthreads, set_nthreads
from carray.compute import evaluate
from carray.engine.units import UnitWriter
from carray.errors import CArrayError, StorageError


def test_regions_cover_the_array_in_c_order():
    seen = np.zeros((5, 7), dtype=int)
    coords = []
    for c, region in evaluate.regions((5, 7), (2, 3)):
        seen[region] += 1
        coords.append(c)
    assert (seen == 1).all() and coords == sorted(coords)
    assert evaluate.grid_shape((5, 7), (2, 3)) == (3, 3)


def test_waves_keep_order_and_never_run_items_not_needed():
    old = get_nthreads()
    try:
        for n in (1, 2, 3):
            set_nthreads(n)
            ran = []

            def fn(i, ran=ran):
                ran.append(i)
                return i * i

            got = list(evaluate.waves(range(20), fn, needed=lambda i: i % 3 != 0 and i < 17,
                                      ahead=n))
            want = [(i, i * i if i % 3 != 0 and i < 17 else None) for i in range(20)]
            assert got == want
            assert sorted(ran) == [i for i in range(20) if i % 3 != 0 and i < 17]
            assert list(evaluate.waves([], fn)) == []
    finally:
        set_nthreads(old)


def test_plan_follows_the_operand_of_the_expression_shape():
    a = ca.carray(np.zeros((10, 20)), chunks=(3, 7))
    row = ca.carray(np.zeros(20), chunks=(5,))
    assert evaluate.plan_chunks(a + 1) == (3, 7)
    assert evaluate.plan_chunks(row + np.zeros((4, 20))) == (4, 5)


def test_threaded_chunks_give_numpy_results_whatever_the_thread_count(tmp_path):
    rng = np.random.default_rng(5)
    x, y = rng.random((96, 64, 64)), rng.random((96, 64, 64))
    a = ca.carray(x, chunks=(32, 32, 64), rootdir=tmp_path / "a")
    b = ca.carray(y, chunks=(32, 32, 64), rootdir=tmp_path / "b")
    old = get_nthreads()
    results = []
    try:
        for n in (1, 2, 4):
            set_nthreads(n)
            results.append(((a * b + 1).sum(), np.asarray(np.sin(a) - b),
                             ((a > 0.5) & (b < 0.5)).sum(axis=1), a.std(axis=(0, 2))))
    finally:
        set_nthreads(old)
    for r in results[1:]:  # bit for bit the same
        assert r[0] == results[0][0]
        for got, want in zip(r[1:], results[0][1:], strict=True):
            np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(results[0][0], (x * y + 1).sum(), rtol=1e-12)
    np.testing.assert_allclose(results[0][1], np.sin(x) - y, rtol=1e-15)
    np.testing.assert_array_equal(results[0][2], ((x > 0.5) & (y < 0.5)).sum(axis=1))
    np.testing.assert_allclose(results[0][3], x.std(axis=(0, 2)), rtol=1e-12)


def test_peak_memory_is_a_few_chunks(tmp_path):
    x = np.random.default_rng(6).random((256, 128, 128))  # 32 MiB, chunks of 512 KiB
    a = ca.carray(x, chunks=(32, 32, 64), rootdir=tmp_path / "a")
    a.flush()
    a = ca.open(tmp_path / "a", mode="r")
    del x
    for run in (lambda: a.sum(axis=0), lambda: (a * 2 + 1).max(axis=2), a.std,
                lambda: (a > 0.5).compute(rootdir=tmp_path / "m")):
        tracemalloc.start()
        try:
            run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 6 * 2**20, peak  # under a fifth of the array


# -- compute() to every layout ---------------------------------------------------------------

LAYOUTS = ("superchunk", "bcolz", "b2nd", "memory")


def _compute_to(expr, layout: str, root: str, **kwargs):
    if layout == "memory":
        return expr.compute(**kwargs)
    if layout == "b2nd":
        return expr.compute(rootdir=f"{root}/out.b2nd", mode="w", **kwargs)
    fmt = {"format": "bcolz"} if layout == "bcolz" else {}
    return expr.compute(rootdir=f"{root}/out", mode="w", **fmt, **kwargs)


@st.composite
def _operands(draw):
    """Two arrays of one shape, chunks and maybe blocks, and how the output is chunked."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim)))
    chunks = tuple(draw(st.integers(1, n + 1)) for n in shape)
    blocks = tuple(draw(st.integers(1, c)) for c in chunks) if draw(st.booleans()) else None
    dtype = np.dtype(draw(st.sampled_from([np.float64, np.float32, np.int32, np.uint8])))
    x, y = (draw(hnp.arrays(dtype, shape, elements=elements(dtype))) for _ in "xy")
    # The output chunked as the operands (stored order), or otherwise (boxes in C order).
    out_chunks = None if draw(st.booleans()) else \
        tuple(draw(st.integers(1, n + 1)) for n in shape)
    return x, y, chunks, blocks, out_chunks


@settings(max_examples=25, deadline=None)
@given(_operands(), st.sampled_from(LAYOUTS))
def test_compute_to_every_layout_equals_numpy(case, layout):
    x, y, chunks, blocks, out_chunks = case
    with tempfile.TemporaryDirectory() as tmp:
        a = ca.carray(x, chunks=chunks, blocks=blocks, rootdir=f"{tmp}/a")
        b = ca.carray(y, chunks=chunks, blocks=blocks)
        kwargs = {"chunks": out_chunks} if out_chunks and layout != "bcolz" else {}
        for expr, want in ((a * b + 1, x * y + 1), (a - 2 * b, x - 2 * y),
                           (np.where(a > b, a, b + np.ones(x.shape[-1:], x.dtype)),
                            np.where(x > y, x, y + np.ones(x.shape[-1:], x.dtype)))):
            out = _compute_to(expr, layout, tmp, **kwargs)
            assert out.dtype == want.dtype and out.shape == want.shape
            np.testing.assert_array_equal(out[:], want)
            if layout != "memory":
                path = out.rootdir
                out.close()
                again = ca.open(path, mode="r")
                np.testing.assert_array_equal(again[:], want)
                assert not [f for f in registry.verify(path) if hasattr(f, "what")]
                again.close()


def _smooth_pair(tmp_path, shape, chunks, blocks):
    """Two float64 arrays on disk of smooth values (they compress as data does)."""
    grid = np.indices(shape[1:], dtype=np.float64).sum(axis=0)
    made = []
    for name, phase in (("a", 0.0), ("b", 1.0)):
        arr = ca.carray(np.empty((0, *shape[1:])), chunks=chunks, blocks=blocks,
                        rootdir=tmp_path / name)
        for i in range(0, shape[0], chunks[0]):
            rows = np.arange(i, min(i + chunks[0], shape[0]), dtype=np.float64)
            arr.append(np.round(np.sin(rows[:, None, None] / 7 + grid / 50 + phase) * 256)
                       / 256)
        arr.close()
        made.append(ca.open(tmp_path / name, mode="r"))
    return made


def test_compute_to_disk_holds_a_few_compressed_chunks(tmp_path):
    """Writing a 48 MB expression to disk: beyond the worker threads' scratch buffers
    (kept between calls), only compressed chunks wait to be written (before: about
    seven decoded chunks)."""
    shape, chunks, blocks = (96, 256, 256), (32, 64, 256), (4, 32, 256)  # chunks of 4 MiB
    chunk_nbytes = 8 * int(np.prod(chunks))
    old = get_nthreads()
    set_nthreads(2)
    try:
        a, b = _smooth_pair(tmp_path, shape, chunks, blocks)
        (a * b + 1).compute(rootdir=tmp_path / "warm")  # the threads' buffers are made
        tracemalloc.start()
        try:
            out = (a * b + 1).compute(rootdir=tmp_path / "out")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        set_nthreads(old)
    assert peak < chunk_nbytes, peak
    np.testing.assert_array_equal(out[:], a[:] * b[:] + 1)


# -- failures while writing ------------------------------------------------------------------


def _fail_at_unit(monkeypatch, at: int) -> None:
    real = UnitWriter.write_encoded
    seen = [0]

    def write_encoded(self, unit, chunks):
        seen[0] += 1
        if seen[0] == at:
            raise RuntimeError("injected")
        return real(self, unit, chunks)

    monkeypatch.setattr(UnitWriter, "write_encoded", write_encoded)


@pytest.mark.parametrize("layout", ["superchunk", "bcolz"])
def test_a_failure_mid_compute_leaves_the_new_array_empty(tmp_path, monkeypatch, layout):
    x = np.arange(40 * 30 * 20, dtype=np.float64).reshape(40, 30, 20)
    a = ca.carray(x, chunks=(8, 16, 20), rootdir=tmp_path / "a")
    kwargs = {"format": "bcolz", "chunklen": 8} if layout == "bcolz" else \
        {"storage": {"superchunksize": 2}}
    with monkeypatch.context() as mp:
        _fail_at_unit(mp, 3)
        with pytest.raises(RuntimeError, match="injected"):
            (a + 1).compute(rootdir=tmp_path / "out", **kwargs)
    gc.collect()  # the failed handle's finalizer records nothing
    out = ca.open(tmp_path / "out", mode="a")
    assert out.shape == (0, 30, 20)
    out.append(x[:5])  # the files of the failed run are not in the way
    out.close()
    np.testing.assert_array_equal(ca.open(tmp_path / "out", mode="r")[:], x[:5])
    assert not [f for f in registry.verify(tmp_path / "out") if hasattr(f, "what")]
    np.testing.assert_array_equal((a + 1).compute(rootdir=tmp_path / "out", mode="w",
                                                  **kwargs)[:], x + 1)


def test_a_full_disk_mid_compute_leaves_no_partial_array(tmp_path, monkeypatch):
    from injection import DiskFull

    x = np.arange(24 * 30 * 20, dtype=np.float64).reshape(24, 30, 20)
    a = ca.carray(x, chunks=(8, 16, 20), blocks=(4, 8, 20), rootdir=tmp_path / "a")
    with monkeypatch.context() as mp:
        counter = DiskFull(mp, None)
        (a * 2).compute(rootdir=tmp_path / "count", storage={"superchunksize": 2})
        total = counter.count
    for at in sorted({1, 2, total // 3, total // 2, total - 2, total - 1, total}):
        path = tmp_path / f"full{at}"
        with monkeypatch.context() as mp:
            disk = DiskFull(mp, at)
            try:
                (a * 2).compute(rootdir=path, storage={"superchunksize": 2})
            except StorageError:
                pass
            else:  # the last writes may be cleanup on another thread, which nobody waits for
                assert at > total // 2, at
            disk.space_returns()
        gc.collect()
        try:
            out = ca.open(path, mode="r")
        except (CArrayError, OSError):
            continue  # not even created: nothing looks like an array
        if out.shape[0]:  # failed after the shape was recorded: complete, never partial
            np.testing.assert_array_equal(out[:], x * 2)
        out.close()
        assert not [f for f in registry.verify(path) if hasattr(f, "what")], at
