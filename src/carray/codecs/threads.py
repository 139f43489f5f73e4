"""How many threads the Blosc libraries use: one process-wide setting.

The count is kept here, in the codec layer that applies it, so the parameter
dataclasses in ``carray.core.params`` stay plain data.
"""

from __future__ import annotations

import os

from carray.codecs import blosc


def detect_number_of_cores() -> int:
    """Cores this process may run on.

    Returns
    -------
    int
        The size of the process's CPU affinity set where the OS reports one,
        else the machine's core count.
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


_nthreads = detect_number_of_cores()


def set_nthreads(nthreads: int) -> int:
    """Set how many threads Blosc uses to (de)compress.

    Parameters
    ----------
    nthreads : int
        A positive thread count.

    Returns
    -------
    int
        The previous count.
    """
    global _nthreads
    if not isinstance(nthreads, int) or nthreads < 1:
        raise ValueError(f"nthreads must be a positive int, got {nthreads!r}")
    previous, _nthreads = _nthreads, nthreads
    blosc.set_library_threads(nthreads)
    return previous


def get_nthreads() -> int:
    """How many threads Blosc uses."""
    return _nthreads


blosc.set_library_threads(_nthreads)
