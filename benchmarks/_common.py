"""Timing helpers shared by the benchmark scripts (run as scripts: this folder is on sys.path)."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeat: int) -> float:
    """Median wall time of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
