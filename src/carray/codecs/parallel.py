"""Chunks decoded on several threads at once, each with its own Blosc context.

Blosc's own threads split one chunk into blocks and meet at the end of every
chunk; for chunks of a few hundred KiB on a busy machine that meeting costs
more than it saves.  Decoding different chunks on different threads, each
single-threaded, keeps the cores busy without it.  ctypes releases the GIL
around the C call, so plain Python threads suffice.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from carray.codecs import blosc
from carray.codecs.threads import get_nthreads

_T = TypeVar("_T")
_R = TypeVar("_R")

_local = threading.local()
# Held while a layout fetches chunk bytes: layouts are not safe to call from two threads.
io_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}
_background: dict[str, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()
#: Chunks fetched at once from an object store: each fetch mostly waits on the network.
IO_THREADS = 16


def _forget_pools() -> None:
    """A forked child has none of its parent's worker threads: start new pools there."""
    global _pool_lock
    _pools.clear()
    _background.clear()
    _pool_lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_pools)


def decoder() -> blosc.Decoder:
    """This thread's single-threaded decompression context."""
    dec = getattr(_local, "decoder", None)
    if dec is None:
        dec = _local.decoder = blosc.Decoder()
    return dec


def scratch(nbytes: int, slot: str = "read") -> np.ndarray:
    """This thread's reusable byte buffer named ``slot``, at least ``nbytes`` long.

    Reading chunk files (slot "read") and decoding chunks (slot "decoded") into
    buffers kept per thread rather than into new objects saves an allocation and
    its page faults per chunk.
    """
    buffers = getattr(_local, "scratch", None)
    if buffers is None:
        buffers = _local.scratch = {}
    buf = buffers.get(slot)
    if buf is None or len(buf) < nbytes:
        buf = buffers[slot] = np.empty(max(nbytes, 1 << 16), dtype=np.uint8)
    return buf


def workers() -> int:
    """How many chunks may be decoded at once (1 when contexts are unavailable)."""
    return get_nthreads() if blosc.Decoder.available() else 1


def _executor(n: int) -> ThreadPoolExecutor:
    with _pool_lock:
        pool = _pools.get(n)
        if pool is None:
            pool = _pools[n] = ThreadPoolExecutor(n, thread_name_prefix="carray")
        return pool


def in_worker() -> bool:
    """Whether this thread is running a share of :func:`run` (nested runs go sequential)."""
    return getattr(_local, "inside", False)


@contextlib.contextmanager
def inline() -> Iterator[None]:
    """Within: :func:`run` and :func:`pipeline` on this thread do their work here, handing
    nothing to the pools.  For finalizers, which may run inside a call that holds a
    pool's own lock (``ThreadPoolExecutor.submit``): handing work over there would wait
    on that lock forever."""
    before = getattr(_local, "inside", False)
    _local.inside = True
    try:
        yield
    finally:
        _local.inside = before


def run(tasks: Sequence[Callable[[], None]], threads: bool = True,
        width: int | None = None) -> None:
    """Run every task; the caller's thread takes a share.  The first error is raised.

    ``threads=False`` runs them all on the caller's thread; ``width`` sets how
    many run at once (default: one per core, for decoding; more for fetches
    that wait on the network).
    """
    n = min(width or workers(), len(tasks)) if threads else 1
    if n <= 1 or in_worker():
        for task in tasks:
            task()
        return
    groups = [tasks[k::n] for k in range(n)]

    def run_group(group: Sequence[Callable[[], None]]) -> None:
        _local.inside = True
        try:
            for task in group:
                task()
        finally:
            _local.inside = False

    futures = [_executor(n - 1).submit(run_group, g) for g in groups[1:]]
    error: BaseException | None = None
    try:
        run_group(groups[0])
    except BaseException as exc:  # noqa: BLE001 - re-raised after the others finish
        error = exc
    for f in futures:
        try:
            f.result()
        except BaseException as exc:  # noqa: BLE001
            error = error or exc
    if error is not None:
        raise error


def pipeline(fn: Callable[[_T], _R], items: Iterable[_T], window: int | None = None
             ) -> Iterator[_R]:
    """``fn(item)`` for every item, in order, computed on worker threads ahead of the
    caller, which consumes each result (e.g. writes it) while later ones are computed.

    At most ``window`` items (default: two per worker) are in flight, so memory
    stays bounded however many items there are.  Runs inline when there are no
    contexts to spare or when called from a worker.  Leaving the loop early (or an
    error) waits for the items in flight before returning.
    """
    n = workers()
    if n <= 1 or in_worker():
        for item in items:
            yield fn(item)
        return
    pool = _executor(n)
    window = window or 2 * n
    pending: deque[Future[_R]] = deque()

    def task(item: _T) -> _R:
        _local.inside = True
        try:
            return fn(item)
        finally:
            _local.inside = False

    try:
        for item in items:
            pending.append(submit(pool, task, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for f in pending:  # nothing may still run once the caller moves on
            f.cancel()
        for f in pending:
            if not f.cancelled():
                f.exception()


def compressing_pool() -> ThreadPoolExecutor:
    """The worker threads that compress the chunks appends hand over (one per core)."""
    return _executor(workers())


#: Threads of the named background pools (one unless said here).  ``files`` has two, so
#: one file's final sync does not hold up the writing of the next; ``sync`` (a commit's
#: data syncs, which wait on ``files``) one per column a table commits at once.
_BACKGROUND_THREADS = {"files": 2, "sync": 4}


def background(name: str) -> ThreadPoolExecutor:
    """The background threads named ``name``, for work that overlaps the caller's
    (``files``: writing new files; ``sync``: a commit's data syncs; ``cleanup``:
    deleting a replaced dataset), taking
    tasks in the order they were handed over.  The interpreter lets queued work finish
    before exiting."""
    with _pool_lock:
        pool = _background.get(name)
        if pool is None:
            pool = _background[name] = ThreadPoolExecutor(
                _BACKGROUND_THREADS.get(name, 1), thread_name_prefix=f"carray-{name}")
        return pool


def submit(pool: ThreadPoolExecutor, fn: Callable[..., _R], *args: object) -> Future[_R]:
    """``pool.submit(fn, *args)``, or the call made here and now: inside :func:`inline`
    (a finalizer, which may run inside a pool's own ``submit``, must hand nothing to a
    pool) and once the interpreter is shutting down and starts no more threads
    (flushes at exit still complete)."""
    if not in_worker():
        try:
            return pool.submit(fn, *args)
        except RuntimeError:
            pass
    done: Future[_R] = Future()
    try:
        done.set_result(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - handed to the caller via the future
        done.set_exception(exc)
    return done


def in_background(fn: Callable[..., object], *args: object) -> None:
    """Run ``fn(*args)`` on the ``cleanup`` thread: work nobody waits for."""
    submit(background("cleanup"), fn, *args)
