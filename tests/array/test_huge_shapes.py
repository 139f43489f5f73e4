"""Arrays of absurd shapes: lazy at once or refused at once, never a hang or a
MemoryError (shapes, chunk counts and sizes are checked before anything is allocated
or written; chunks of the fill value are stored nowhere in carray's own layout)."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import carray as ca
from carray import registry
from carray.chunks.shapes import MAX_FILLED_CHUNKS, MAX_VISITED_CHUNKS
from carray.core.problems import tally
from carray.errors import CArrayError, ShapeError

#: Seconds an operation that needs nothing per chunk may take (a slow CI machine).
QUICK = 2.0
#: Layouts that record chunks of the fill value without storing them.
LAZY = (None, "superchunk")
EXAMPLES = 300 if os.environ.get("CARRAY_SOAK") == "1" else 20


def _make(tmp_path, fmt, shape, dtype="f8", **kw):
    where = {} if fmt is None else {
        "rootdir": str(tmp_path / ("a.b2nd" if fmt == "b2nd" else f"a.{fmt}")), "mode": "w",
        **({"format": fmt} if fmt in ("bcolz", "b2nd") else {})}
    return ca.zeros(shape, dtype=dtype, **where, **kw)


def _timed(func):
    start = time.monotonic()
    try:
        return func(), time.monotonic() - start
    except MemoryError:  # numpy's: never let through
        pytest.fail("MemoryError")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", LAZY)
@pytest.mark.parametrize("shape", [(10**15,), (10**12, 10**6), (2**62 // 8,)])
def test_lazy_arrays_of_any_length_are_made_read_and_grown_at_once(tmp_path, fmt, shape):
    a, took = _timed(lambda: _make(tmp_path, fmt, shape))
    assert took < QUICK and a.shape == shape and len(a) == shape[0]
    last, took = _timed(lambda: a[-2:, :3] if len(shape) > 1 else a[-2:])
    assert took < QUICK and not last.any()
    with pytest.raises(ShapeError, match="memory"):
        a[:]  # more than any machine holds: refused, not numpy's MemoryError
    _, took = _timed(lambda: pytest.raises(ShapeError, a.sum))  # or answered at once
    assert took < QUICK
    row = np.ones((1, *shape[1:3]), "f8") if len(shape) == 1 else None
    if row is not None:
        a.append(np.ones(3))
        assert a.shape == (shape[0] + 3,) and a[-4:].tolist() == [0, 1, 1, 1]
    a.close()
    if fmt is None:
        return
    path = str(tmp_path / f"a.{fmt}")
    (b, took) = _timed(lambda: ca.open(path, mode="r"))
    assert took < QUICK and len(b) == shape[0] + (3 if row is not None else 0)
    info, took = _timed(lambda: registry.describe_array(b))
    assert took < QUICK and info["shape"][0] == len(b)
    (problems, _), took = _timed(lambda: tally(registry.verify(path)))
    assert took < QUICK and problems == []
    b.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt", [None, "superchunk", "bcolz", "b2nd"])
def test_past_64_bit_sizes_is_a_shape_error_at_once(tmp_path, fmt):
    for shape in [(10**19,), (2**62, 4), (10**10, 10**10)]:
        with pytest.raises(ShapeError, match="64-bit"):
            _timed(lambda shape=shape: _make(tmp_path, fmt, shape))
    assert issubclass(ShapeError, ValueError)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt", ["bcolz", "b2nd"])
def test_layouts_storing_every_chunk_refuse_huge_fills_at_once(tmp_path, fmt):
    a, took = _timed(lambda: pytest.raises(ShapeError, _make, tmp_path, fmt, (10**15,)))
    assert took < QUICK and "stores every chunk" in str(a.value)


def _shapes():
    side = st.one_of(st.integers(0, 5), st.integers(10**3, 10**7), st.integers(10**9, 10**13),
                     st.sampled_from([2**31, 2**40, 10**15, 2**61, 2**63, 10**19, 10**30]))
    return st.lists(side, min_size=1, max_size=3).map(tuple)


@pytest.mark.timeout(600)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=_shapes(), fmt=st.sampled_from([None, "superchunk", "bcolz", "b2nd"]),
       dtype=st.sampled_from(["i1", "f8", "c16"]), data=st.data())
def test_absurd_shapes_and_chunks_never_hang_or_run_out_of_memory(tmp_path_factory, shape,
                                                                  fmt, dtype, data):
    chunks = data.draw(st.none() | st.tuples(*(st.integers(1, 2**20) for _ in shape)))
    if fmt == "bcolz" and chunks is not None:
        chunks = (chunks[0], *shape[1:])  # bcolz chunks are whole rows
    grid = chunks or (1,) * len(shape)
    nchunks = math.prod(-(-max(n, 1) // max(c, 1)) for n, c in zip(shape, grid, strict=True))
    # Layouts storing every chunk fill below the limit one chunk at a time: keep those short.
    assume(fmt in LAZY or chunks is None or nchunks <= 2**10 or nchunks > MAX_FILLED_CHUNKS)
    tmp = tmp_path_factory.mktemp("absurd")
    kw = {"chunks": chunks} if chunks is not None else {}
    try:
        a, took = _timed(lambda: _make(tmp, fmt, shape, dtype, **kw))
    except CArrayError as exc:
        assert isinstance(exc, ShapeError | ValueError | TypeError), exc
        return
    assert len(a) == shape[0]
    if fmt in LAZY:
        assert took < QUICK
    # A sum of up to MAX_VISITED_CHUNKS chunks decodes each: only the quick ones here.
    # The array's own chunks (its defaults when none were given) say how many a sum visits.
    real = math.prod(-(-max(n, 1) // c) for n, c in zip(a.shape, a.chunks, strict=True))
    summed = real <= 2**12 or real > MAX_VISITED_CHUNKS
    for step in (lambda: a[-1:], lambda: a.sum() if summed else None,
                 lambda: a.append(a[-1:]) if len(a) else None, lambda: a.flush()):
        try:
            _timed(step)
        except CArrayError as exc:
            assert isinstance(exc, ShapeError), exc
    a.close()
