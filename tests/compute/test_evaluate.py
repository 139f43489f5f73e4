"""Chunk-by-chunk evaluation on worker threads: results, memory, determinism."""

from __future__ import annotations

import tracemalloc

import numpy as np

import carray as ca
from carray.codecs.threads import get_nthreads, set_nthreads
from carray.compute import evaluate


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
