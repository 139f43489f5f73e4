"""Rechunking within a memory budget: plans, results against numpy, measured memory,
failures that leave nothing behind."""

from __future__ import annotations

import errno
import functools
import math
import os
import tempfile
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import carray as ca
from carray.array import rechunk as rechunking
from carray.array.rechunk_plan import parse_size, pass_memory, plan
from carray.errors import (
    ChecksumError,
    ContainerExistsError,
    RechunkMemoryError,
    UnsupportedDTypeError,
    UnsupportedOptionError,
)
from carray.stores import local as local_store

DTYPES = ["f8", "f4", "i4", "u1", "i8", "c8", "?", "M8[s]"]


def _values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=shape) * 100).astype("i8" if dtype == "M8[s]" else dtype) \
        .astype(dtype)


def _leftovers(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if "rechunk" in n)


# -- sizes and plans ------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("256MiB", 256 * 2**20), ("1GB", 10**9), ("1.5 KiB", 1536), ("512k", 512_000),
    ("100", 100), ("2gib", 2 * 2**30), (4096, 4096), ("3 MB", 3_000_000),
])
def test_sizes_read_as_bytes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "MiB", "12 parsecs", "-5", 0, -1, True, 1.5, None])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="max_mem"):
        parse_size(bad)


@st.composite
def plan_cases(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 300)) for _ in range(ndim))
    src = tuple(draw(st.integers(1, n)) for n in shape)
    dst = tuple(draw(st.integers(1, n)) for n in shape)
    grain = tuple(draw(st.integers(1, s)) for s in src)
    itemsize = draw(st.sampled_from([1, 4, 8]))
    budget = draw(st.integers(64 << 10, 64 << 20))
    workers = draw(st.integers(1, 4))
    return shape, src, dst, grain, itemsize, budget, workers


def _is_tiling(box, chunks, shape):
    return all(b == n or (b % c == 0 and b <= n) for b, c, n in zip(box, chunks, shape,
                                                                    strict=True))


@settings(max_examples=150, deadline=None)
@given(plan_cases())
def test_every_plan_keeps_within_its_budget(case):
    shape, src, dst, grain, itemsize, budget, workers = case
    try:
        p = plan(shape, itemsize, src, dst, budget, grain=grain, workers=workers)
    except RechunkMemoryError as exc:
        # Refused only when not even one target chunk and one source chunk fit.
        one = pass_memory(dst, src, dst, itemsize, workers, 1, 16 << 20,
                          math.prod(-(-n // c) for n, c in zip(shape, dst, strict=True)))
        assert one > budget
        assert str(budget) in str(exc)
        return
    assert 1 <= len(p.passes) <= 2
    assert p.passes[0].source_chunks == src and p.passes[0].grain == grain
    assert p.passes[-1].chunks == dst
    for before, after in zip(p.passes, p.passes[1:], strict=False):
        assert after.source_chunks == before.chunks == after.grain
    for k, step in enumerate(p.passes):
        indexed = [step.chunks] + ([step.source_chunks] if k else [])
        assert step.memory <= budget
        assert step.memory == pass_memory(
            step.box, step.source_chunks, step.chunks, itemsize, workers, step.threads,
            16 << 20, sum(math.prod(-(-n // c) for n, c in zip(shape, chunks, strict=True))
                          for chunks in indexed), step.buffers)
        assert step.buffers in (1, 2)
        assert 1 <= step.threads <= workers
        assert _is_tiling(step.box, step.chunks, shape)
        # Whatever the box, every item is decoded at least once.
        assert step.decoded >= math.prod(shape) * itemsize
    assert p.memory <= budget


def test_frames_to_columns_go_through_an_intermediate():
    """Columns of all time from frames: one pass would decode every frame once per
    column, so the plan reads frames into an intermediate and columns out of it."""
    p = plan((2000, 512, 512), 4, (1, 512, 512), (2000, 64, 64), "256MiB")
    assert len(p.passes) == 2
    first, second = p.passes
    assert first.box[1:] == (512, 512)  # whole frames read
    assert all(i <= t for i, t in zip(first.chunks, (2000, 64, 64), strict=True))
    assert second.decoded == first.decoded == 2000 * 512 * 512 * 4
    assert p.memory <= 256 * 2**20


def test_a_budget_too_small_for_one_chunk_each_is_refused():
    with pytest.raises(RechunkMemoryError, match="one target chunk") as info:
        plan((2000, 512, 512), 4, (1, 512, 512), (2000, 64, 64), "64MiB")
    assert isinstance(info.value, ValueError)


# -- results against numpy ------------------------------------------------------------------


@st.composite
def rechunk_cases(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 9 if ndim < 4 else 5)) for _ in range(ndim))
    src = tuple(draw(st.integers(1, n + 1)) for n in shape)
    src_blocks = draw(st.none() | st.tuples(*(st.integers(1, c) for c in src)))
    dst = tuple(draw(st.integers(1, n + 1)) for n in shape)
    dst_blocks = draw(st.none() | st.tuples(*(st.integers(1, c) for c in dst)))
    dtype = draw(st.sampled_from(DTYPES))
    return shape, src, src_blocks, dst, dst_blocks, dtype


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=rechunk_cases(), on_disk=st.booleans(), passes=st.sampled_from([1, 2]),
       budget=st.sampled_from(["tight", "roomy"]))
def test_rechunk_matches_numpy(monkeypatch, case, on_disk, passes, budget):
    shape, src, src_blocks, dst, dst_blocks, dtype = case
    values = _values(shape, dtype)
    monkeypatch.setattr(rechunking, "plan", functools.partial(plan, min_passes=passes))
    with tempfile.TemporaryDirectory() as tmp:
        a = ca.carray(values, chunks=src, blocks=src_blocks, fsync=False,
                      rootdir=os.path.join(tmp, "a") if on_disk else None)
        a.attrs["units"] = "K"
        itemsize = np.dtype(dtype).itemsize
        # Tight: little more than one target chunk and one source chunk.
        least = pass_memory(dst, src, dst, itemsize, 4, 1, 16 << 20, 4096)
        max_mem = least + 3 * itemsize * math.prod(dst) if budget == "tight" else "64MiB"
        where = os.path.join(tmp, "r") if on_disk else None
        r = a.rechunk(dst, blocks=dst_blocks, rootdir=where, max_mem=max_mem, fsync=False)
        np.testing.assert_array_equal(r[:], values)
        assert r.chunks == dst and r.dtype == values.dtype
        if dst_blocks is not None:
            assert r.blocks == dst_blocks
        assert r.cparams == a.cparams and dict(r.attrs.items()) == {"units": "K"}
        assert r.rootdir == where
        if on_disk:
            r.close()
            np.testing.assert_array_equal(ca.carray(rootdir=where, mode="r")[:], values)
            assert sorted(os.listdir(tmp)) == ["a", "r"]
        np.testing.assert_array_equal(a[:], values)  # the source is as it was


def test_two_passes_are_planned_and_run(tmp_path):
    """A tight budget on frames to columns: the planner picks an intermediate, which is
    gone afterwards."""
    values = _values((200, 64, 64), "f8")
    a = ca.carray(values, chunks=(1, 64, 64), rootdir=str(tmp_path / "a"), fsync=False)
    layout = plan(values.shape, 8, a.chunks, (200, 8, 8), "1MiB", grain=a.chunks,
                  workers=rechunking._parallel.workers())
    assert len(layout.passes) == 2
    seen = []
    r = a.rechunk((200, 8, 8), rootdir=str(tmp_path / "r"), max_mem="1MiB",
                  progress=lambda done, total: seen.append((done, total)))
    np.testing.assert_array_equal(r[:], values)
    assert sorted(os.listdir(tmp_path)) == ["a", "r"]
    assert seen[-1] == (values.nbytes, values.nbytes)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_in_memory_result_through_an_intermediate_leaves_no_temporary(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    values = _values((100, 32, 32), "f4")
    a = ca.carray(values, chunks=(1, 32, 32))
    monkeypatch.setattr(rechunking, "plan", functools.partial(plan, min_passes=2))
    r = a.rechunk((100, 4, 4), max_mem="1MiB")
    assert r.rootdir is None
    np.testing.assert_array_equal(r[:], values)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name, layout", [("r.b2nd", "B2nd"), ("r", "Superchunk")])
def test_the_format_follows_the_destination(tmp_path, name, layout):
    values = _values((40, 12), "i4")
    a = ca.carray(values, chunks=(3, 12))
    r = a.rechunk((16, 5), rootdir=str(tmp_path / name), max_mem="4MiB")
    assert r.layout == layout
    np.testing.assert_array_equal(r[:], values)


def test_bcolz_and_numpy_sources(tmp_path):
    values = _values((50, 6), "f8")
    r = ca.carray(values, chunks=(7, 6)).rechunk((20, 6), rootdir=str(tmp_path / "b"),
                                                 format="bcolz")
    assert r.layout == "Bcolz" and r.chunks == (20, 6)
    np.testing.assert_array_equal(r[:], values)
    r = rechunking.rechunk(values, (9, 2))
    np.testing.assert_array_equal(r[:], values)
    assert r.chunks == (9, 2)


def test_refusals(tmp_path):
    a = ca.carray(_values((10, 4), "f8"), chunks=(2, 4), rootdir=str(tmp_path / "a"))
    with pytest.raises(UnsupportedOptionError, match="2-d"):
        a.rechunk((5,))
    with pytest.raises(UnsupportedOptionError, match="positive"):
        a.rechunk((0, 4))
    with pytest.raises(ValueError, match="cannot be replaced"):
        a.rechunk((5, 4), rootdir=str(tmp_path / "a"))
    os.mkdir(tmp_path / "taken")
    with pytest.raises(ContainerExistsError):
        a.rechunk((5, 4), rootdir=str(tmp_path / "taken"))
    with pytest.raises(RechunkMemoryError):
        a.rechunk((5, 4), rootdir=str(tmp_path / "b"), max_mem=1000)
    with pytest.raises(ValueError, match="0-d"):
        ca.carray(3.0).rechunk(())
    assert sorted(os.listdir(tmp_path)) == ["a", "taken"]
    r = a.rechunk((-1, 1), expectedlen=1000)
    assert r.chunks == (10, 1)
    objects = ca.carray(np.array(["a", 1], dtype=object), dtype=object, allow_pickle=True)
    with pytest.raises(UnsupportedDTypeError):
        objects.rechunk((1,))


def test_empty_arrays(tmp_path):
    a = ca.carray(np.empty((0, 5)), chunks=(4, 5))
    r = a.rechunk((2, 2), rootdir=str(tmp_path / "r"))
    assert r.shape == (0, 5) and r.chunks == (2, 2)


# -- memory ---------------------------------------------------------------------------------


@pytest.mark.parametrize("on_disk", [True, False])
def test_measured_peak_memory_stays_within_max_mem(tmp_path, on_disk):
    """The peak of what numpy and Python allocate while rechunking 16 MB (frames to
    columns, two passes) stays under max_mem; an in-memory result adds its own
    compressed bytes (it is what was asked for)."""
    shape = (256, 128, 64)
    values = (np.linspace(0, 1, math.prod(shape)).reshape(shape) +
              np.random.default_rng(1).normal(0, 0.01, shape))
    a = ca.carray(values, chunks=(1, 128, 64), rootdir=str(tmp_path / "a"), fsync=False)
    del values
    a = ca.carray(rootdir=str(tmp_path / "a"), mode="r")
    max_mem = 5 * 2**20
    assert len(plan(a.shape, 8, a.chunks, (256, 16, 16), max_mem,
                    workers=rechunking._parallel.workers()).passes) == 2
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        r = a.rechunk((256, 16, 16), rootdir=str(tmp_path / "r") if on_disk else None,
                      max_mem=max_mem)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    kept = 0 if on_disk else r.cbytes
    assert peak - kept <= max_mem, (peak, kept)
    assert peak - kept > max_mem / 20  # it measured the rechunk, not nothing
    np.testing.assert_array_equal(r[:], a[:])


# -- failures -------------------------------------------------------------------------------


def _failing_after(monkeypatch, module, name, calls, error):
    real = getattr(module, name)
    count = {"n": 0}

    def failing(*args, **kwargs):
        count["n"] += 1
        if count["n"] > calls:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)
    return count


@pytest.mark.parametrize("at", [0.0, 0.3, 0.6, 0.99])
@pytest.mark.parametrize("on_disk", [True, False])
def test_a_failure_mid_rechunk_leaves_no_target_and_no_intermediate(tmp_path, monkeypatch,
                                                                    at, on_disk):
    """An error at the first box, in the first pass, in the second, at the last box."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    values = _values((200, 32, 32), "f8")
    a = ca.carray(values, chunks=(1, 32, 32), rootdir=str(tmp_path / "a"), fsync=False)
    monkeypatch.setattr(rechunking, "plan", functools.partial(plan, min_passes=2))
    where = str(tmp_path / "r") if on_disk else None
    count = _failing_after(monkeypatch, rechunking, "_read_box", 10**9, RuntimeError())
    a.rechunk((200, 4, 4), max_mem="512KiB").discard()
    boxes = count["n"]
    assert boxes >= 4
    _failing_after(monkeypatch, rechunking, "_read_box", int(at * boxes),
                   RuntimeError("injected"))
    with pytest.raises(RuntimeError, match="injected"):
        a.rechunk((200, 4, 4), rootdir=where, max_mem="512KiB")
    assert sorted(os.listdir(tmp_path)) == ["a"]
    np.testing.assert_array_equal(a[:], values)


@pytest.mark.parametrize("calls", [0, 2, 8])
def test_a_full_disk_mid_rechunk_leaves_nothing(tmp_path, monkeypatch, calls):
    values = _values((200, 32, 32), "f8")
    a = ca.carray(values, chunks=(1, 32, 32), rootdir=str(tmp_path / "a"), fsync=False)
    monkeypatch.setattr(rechunking, "plan", functools.partial(plan, min_passes=2))
    full = OSError(errno.ENOSPC, "No space left on device")
    _failing_after(monkeypatch, local_store, "atomic_write", calls, full)
    with pytest.raises(OSError) as info:
        a.rechunk((200, 4, 4), rootdir=str(tmp_path / "r"), max_mem="512KiB")
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert _leftovers(tmp_path) == [] and sorted(os.listdir(tmp_path)) == ["a"]
    np.testing.assert_array_equal(ca.carray(rootdir=str(tmp_path / "a"), mode="r")[:],
                                  values)


def test_a_corrupt_source_chunk_fails_the_rechunk_and_leaves_nothing(tmp_path):
    values = _values((40, 16, 16), "f8")
    a = ca.carray(values, chunks=(1, 16, 16), rootdir=str(tmp_path / "a"))
    a.close()
    data = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "a") for f in fs
            if os.path.getsize(os.path.join(d, f)) > 20_000]
    with open(data[0], "r+b") as f:  # a byte of the first chunk's compressed data
        f.seek(4096)
        byte = f.read(1)
        f.seek(4096)
        f.write(bytes([byte[0] ^ 0xFF]))
    a = ca.carray(rootdir=str(tmp_path / "a"), mode="r")
    with pytest.raises(ChecksumError):
        a.rechunk((40, 4, 4), rootdir=str(tmp_path / "r"))
    assert sorted(os.listdir(tmp_path)) == ["a"]


_KILLED_MID_RECHUNK = """
import os, sys, time
import numpy as np
import carray as ca
a = ca.carray(rootdir=sys.argv[1], mode="r")
calls = []
def progress(done, total):
    calls.append(done)
    if len(calls) == int(sys.argv[3]):
        open(sys.argv[2] + ".ready", "w").close()
        time.sleep(60)
a.rechunk((200, 4, 4), rootdir=sys.argv[2], max_mem="512KiB", progress=progress)
"""


@pytest.mark.parametrize("in_pass", [0, 1])
def test_a_rechunk_killed_midway_leaves_no_target(tmp_path, in_pass):
    """kill -9 in the first pass, and in the second: nothing at the target path, the
    source intact, and the same rechunk then succeeds."""
    import signal
    import subprocess
    import sys
    import time

    values = _values((200, 32, 32), "f8")
    ca.carray(values, chunks=(1, 32, 32), rootdir=str(tmp_path / "a")).close()
    target = str(tmp_path / "r")
    layout = plan(values.shape, 8, (1, 32, 32), (200, 4, 4), "512KiB",
                  workers=rechunking._parallel.workers())
    assert len(layout.passes) == 2
    first = math.prod(-(-n // b) for n, b in zip(values.shape, layout.passes[0].box,
                                                 strict=True))
    after = 2 if in_pass == 0 else first + 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(ca.__file__)), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_MID_RECHUNK, str(tmp_path / "a"),
                             target, str(after)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(target + ".ready"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert not os.path.exists(target)
    a = ca.carray(rootdir=str(tmp_path / "a"), mode="r")
    np.testing.assert_array_equal(a[:], values)
    r = a.rechunk((200, 4, 4), rootdir=target, max_mem="512KiB")
    np.testing.assert_array_equal(r[:], values)
