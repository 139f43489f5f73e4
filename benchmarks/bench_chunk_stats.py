"""What keeping chunk statistics costs a write, and what it saves a whole-array reduction.

Times ``carray(np.random.random(N))`` in memory and to disk (superchunk layout,
flushed) with the statistics worked out on the compressing threads, and with
them switched off (no listener summarises anything), best of a few runs; then
``sum``/``std`` answered from the statistics against the streamed reduction.

    PYTHONPATH=src python benchmarks/bench_chunk_stats.py [N]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

import carray as ca
from carray.compute import stats
from carray.engine.writer import Writer


def best(run: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times)


def write_times(x: np.ndarray, tmp: str) -> tuple[float, float]:
    counter = iter(range(1000))

    def to_disk() -> None:
        root = f"{tmp}/a{next(counter)}"
        ca.carray(x, rootdir=root).close()
        shutil.rmtree(root)

    return best(lambda: ca.carray(x)), best(to_disk)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000_000
    x = np.random.default_rng(0).random(n)
    with tempfile.TemporaryDirectory() as tmp:
        with_mem, with_disk = write_times(x, tmp)
        summarises = Writer._summarises
        Writer._summarises = lambda self: False  # type: ignore[method-assign]
        try:
            without_mem, without_disk = write_times(x, tmp)
        finally:
            Writer._summarises = summarises  # type: ignore[method-assign]
    print(f"carray(np.random.random({n:_})), best of 3")
    for where, w, wo in (("memory", with_mem, without_mem), ("disk", with_disk, without_disk)):
        print(f"  {where:6s}: {wo:.3f} s without statistics, {w:.3f} s with "
              f"({100 * (w / wo - 1):+.1f}%)")
    a = ca.carray(x)
    quick = best(lambda: (a.sum(), a.std()))
    stats.USE_STATS = False
    try:
        slow = best(lambda: (a.sum(), a.std()))
    finally:
        stats.USE_STATS = True
    print(f"  sum() + std(): {quick * 1e3:.2f} ms from statistics, {slow * 1e3:.1f} ms streamed")


if __name__ == "__main__":
    main()
