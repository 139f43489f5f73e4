"""Chunks decoded on several threads at once, each with its own Blosc context.

Blosc's own threads split one chunk into blocks and meet at the end of every
chunk; for chunks of a few hundred KiB on a busy machine that meeting costs
more than it saves.  Decoding different chunks on different threads, each
single-threaded, keeps the cores busy without it.  ctypes releases the GIL
around the C call, so plain Python threads suffice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from carray.codecs import blosc
from carray.codecs.threads import get_nthreads

_local = threading.local()
# Held while a layout fetches chunk bytes: layouts are not safe to call from two threads.
io_lock = threading.Lock()
_pools: dict[int, ThreadPoolExecutor] = {}
_pool_lock = threading.Lock()
#: Chunks fetched at once from an object store: each fetch mostly waits on the network.
IO_THREADS = 16


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

    def run_group(group) -> None:
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
