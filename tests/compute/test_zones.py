"""Chunk summaries spare reads: min/max of 1-d arrays, constant comparisons in filters."""

from __future__ import annotations

import numpy as np
import pytest

import carray as ca

N, CHUNK = 400_000, 10_000


@pytest.fixture
def sorted_on_disk(tmp_path):
    x = np.sort(np.random.default_rng(3).normal(size=N))
    a = ca.carray(x, chunks=(CHUNK,), rootdir=tmp_path / "s")
    a.append(x[:1234] - 10)  # a partial last chunk: not summarised, so read
    a.flush()
    return ca.open(tmp_path / "s", mode="r"), np.concatenate([x, x[:1234] - 10])


def test_max_and_min_of_sorted_array_read_almost_nothing(sorted_on_disk, count_reads):
    a, x = sorted_on_disk
    count_reads["bytes"] = 0
    assert a.max() == x.max() and a.min() == x.min() and np.max(a) == x.max()
    with_summaries = count_reads["bytes"]
    count_reads["bytes"] = 0
    assert a.max(axis=0, keepdims=True) == x.max()  # the same path with keepdims
    assert (a + 0).sum() == pytest.approx(x.sum())  # an expression: every chunk decoded
    assert with_summaries * 20 < count_reads["bytes"]


def test_nan_in_a_summarised_chunk_gives_nan():
    x = np.arange(50_000, dtype=np.float64)
    x[12_345] = np.nan
    a = ca.carray(x, chunks=(10_000,))
    assert np.isnan(a.max()) and np.isnan(a.min())
    assert a.argmax() == 12_345


def test_comparison_filters_skip_chunks(sorted_on_disk, count_reads):
    a, x = sorted_on_disk
    count_reads["bytes"] = 0
    assert ((a > 1.0) & (a < 1.5)).sum() == ((x > 1.0) & (x < 1.5)).sum()
    assert np.count_nonzero(a >= 2.0) == np.count_nonzero(x >= 2.0)
    assert a.sum(where=a > 2.5) == pytest.approx(x.sum(where=x > 2.5))
    assert (~(a <= 0.5)).sum() == (x > 0.5).sum()
    assert (a > 1.0).any() and not (a > 100).any() and (a > -100).all()
    assert not (a < 0).all()
    filtered = count_reads["bytes"]
    count_reads["bytes"] = 0
    assert (a * 1.0 > 1.0).sum() == (x > 1.0).sum()  # arithmetic first: no summaries apply
    assert filtered < count_reads["bytes"]


def test_changed_chunks_are_not_trusted(tmp_path):
    x = np.arange(100_000, dtype=np.int64)
    a = ca.carray(x, chunks=(10_000,), rootdir=tmp_path / "a")
    a.close()
    b = ca.open(tmp_path / "a")
    b[5] = 10**9  # rewrites chunk 0; its summary follows
    b.flush()
    c = ca.open(tmp_path / "a", mode="r")
    assert c.max() == 10**9 and (c > 10**8).sum() == 1
