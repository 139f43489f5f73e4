"""Worker threads: decoding pools, the ordered compression pipeline, background work."""

from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np
import pytest

from carray.codecs import parallel as _parallel


def test_pipeline_keeps_order_and_uses_workers():
    names = set()

    def work(i):
        names.add(threading.current_thread().name)
        time.sleep(0.001 * (i % 3))  # finish out of order
        return i * i

    assert list(_parallel.pipeline(work, range(40))) == [i * i for i in range(40)]
    if _parallel.workers() > 1:
        assert any(n.startswith("carray") for n in names)


def test_pipeline_keeps_a_bounded_number_in_flight():
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "started": 0}

    def work(i):
        with lock:
            state["now"] += 1
            state["started"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.002)
        with lock:
            state["now"] -= 1
        return i

    consumed = 0
    for _ in _parallel.pipeline(work, range(30), window=3):
        consumed += 1
        # never more than the window ahead of the consumer
        assert state["started"] <= consumed + 3
    assert consumed == 30
    assert state["most"] <= 3


def test_pipeline_raises_the_first_error_and_leaves_nothing_running():
    done = []

    def work(i):
        time.sleep(0.001)
        if i == 5:
            raise ValueError("boom")
        done.append(i)
        return i

    got = []
    with pytest.raises(ValueError, match="boom"):
        for x in _parallel.pipeline(work, range(100), window=4):
            got.append(x)
    assert got == [0, 1, 2, 3, 4]
    settled = len(done)
    time.sleep(0.05)
    assert len(done) == settled  # nothing still running after the error


def test_pipeline_stopped_early_waits_for_what_it_started():
    running = []

    def work(i):
        running.append(i)
        time.sleep(0.005)
        running.remove(i)
        return i

    gen = _parallel.pipeline(work, range(50), window=4)
    assert next(gen) == 0
    gen.close()
    assert running == []


def test_nested_pipelines_run_inline():
    def inner(i):
        assert _parallel.in_worker() or _parallel.workers() == 1
        return sum(_parallel.pipeline(lambda j: j, range(i)))

    assert list(_parallel.pipeline(inner, range(6))) == [sum(range(i)) for i in range(6)]


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="needs fork() on Linux")
def test_a_forked_child_gets_new_worker_threads():
    list(_parallel.pipeline(lambda i: i, range(10)))  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: its parent's pool threads do not exist here
        code = 0
        try:
            if list(_parallel.pipeline(lambda i: i + 1, range(10))) != list(range(1, 11)):
                code = 1
        except BaseException:  # noqa: BLE001
            code = 2
        os._exit(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    pytest.fail("the forked child hung on its parent's worker threads")


def test_in_background_runs_the_work():
    seen = threading.Event()
    _parallel.in_background(seen.set)
    assert seen.wait(10)
    assert _parallel.background("cleanup") is _parallel.background("cleanup")


def test_submit_runs_here_once_a_pool_takes_no_more_work():
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    assert _parallel.submit(pool, lambda x: x + 1, 41).result() == 42
    failing = _parallel.submit(pool, lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result()


def test_a_finalizer_inside_a_pool_submit_flushes_without_waiting_on_the_pool(tmp_path):
    """Garbage collection can run an array's finalizer inside ``ThreadPoolExecutor.submit``,
    which holds the pool's lock: the finalizer's flush must not hand work to a pool."""
    import gc
    from concurrent.futures import ThreadPoolExecutor

    import carray as ca

    values = np.arange(50 * 4000.0).reshape(50, 4000)
    # Rows of four 800 KB chunks wait in the tail: a flush compresses them on the pool.
    victim = [ca.carray(np.empty((0, 4000)), chunks=(100, 1000), rootdir=tmp_path / "a")]
    victim[0].append(values)
    real = ThreadPoolExecutor.submit

    def submit(self, fn, *args, **kwargs):
        with self._shutdown_lock:  # held as the real submit holds it
            if victim:
                victim.pop()  # the last reference; the collector runs the finalizer here
                gc.collect()
        return real(self, fn, *args, **kwargs)

    def scenario():
        ThreadPoolExecutor.submit = submit
        try:  # another array's flush hands its chunks to the pool
            other = ca.carray(np.empty((0, 4000)), chunks=(100, 1000), rootdir=tmp_path / "b")
            other.append(values)
            other.flush()
        finally:
            ThreadPoolExecutor.submit = real

    worker = threading.Thread(target=scenario, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the finalizer waited on the pool's lock"
    np.testing.assert_array_equal(ca.open(tmp_path / "a", mode="r")[:], values)
