"""``carray demo``: build a sample dataset, append to it, query it, describe it."""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import carray
from carray.cli._ui import progress
from carray.cli.info import describe, format_description

#: Timed steps of the tour (the progress bar's length).
STEPS = 16


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("demo", help="run a short tour on built-in sample data")
    p.add_argument("--rows", type=int, default=5_000_000, help="rows of sample data")
    p.add_argument("--keep", metavar="DIR", help="write the dataset here and keep it")
    p.set_defaults(func=run)


class _Timer:
    """Runs a step of the tour, prints how long it took, and moves the progress bar."""

    def __init__(self, report: Callable[[int, int], None]) -> None:
        self.report, self.done = report, 0

    def __call__(self, label: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        print(f"  {label:<44} {1e3 * (time.perf_counter() - t0):8.1f} ms")
        self.done += 1
        self.report(self.done, max(STEPS, self.done))
        return result


def run(args: argparse.Namespace) -> int:
    if args.rows < 1:
        raise ValueError(f"--rows must be at least 1, got {args.rows}")
    with progress("carray demo", quiet=args.quiet, unit="steps") as report:
        _tour(args, _Timer(report))
    return 0


def _tour(args: argparse.Namespace, _timed: _Timer) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp) / "temperature.carray"
        rng = np.random.default_rng(42)
        n = args.rows
        # A slowly varying sensor signal: compressible, like real measurements.
        signal = (20 + np.cumsum(rng.normal(0, 0.01, n))).round(2)
        print(f"carray demo: {n:,} float64 readings -> {root}")
        a = _timed("create on disk (superchunk layout)", lambda: carray.carray(
            signal, rootdir=root, mode="w", cparams=carray.CParams(cname="zstd", clevel=5)))
        more = (signal[-1] + np.cumsum(rng.normal(0, 0.01, 100_000))).round(2)
        _timed("append 100,000 rows, 1,000 at a time",
               lambda: [a.append(more[i:i + 1000]) for i in range(0, len(more), 1000)])
        a.attrs["units"] = "degC"
        a.flush()
        b = _timed("reopen read-only", lambda: carray.open_array(root, mode="r"))
        i = min(123_456, len(b) - 1)
        print(f"  a[{i}] = {b[i]}, a[-1] = {b[-1]}")
        total = _timed("sum, chunk by chunk", b.sum)
        print(f"  mean = {total / len(b):.3f}")
        hot = _timed("count readings above 25 degC", lambda: sum(
            int((blk > 25).sum()) for blk in b.iterblocks()))
        print(f"  {hot:,} readings above 25 degC")
        _timed("1,000 random reads of 100 rows", lambda: [
            b[i:i + 100] for i in rng.integers(0, len(b) - 100, 1000)])
        full = _timed("read everything back to numpy", lambda: b[:])
        assert np.array_equal(full, np.concatenate([signal, more]))
        print()
        print(format_description(describe(b)))
        print()
        _table_tour(Path(tmp) / "readings.ctable" if not args.keep else
                    Path(args.keep).with_suffix(".ctable"), signal, rng, _timed)
        print()
        _cube_tour(Path(tmp) if not args.keep else Path(args.keep).parent, n, rng, _timed)


def _table_tour(root: Path, signal: np.ndarray, rng: np.random.Generator,
                _timed: _Timer) -> None:
    """The same readings as a table with a station name, queried with min/max pruning."""
    n = len(signal)
    names = np.array(["north", "south", "east", "west", "summit"], dtype=object)
    print(f"ctable: {n:,} rows (time, station, temperature) -> {root}")
    t = _timed("create a table on disk", lambda: carray.ctable(
        {"time": np.arange(n, dtype=np.int64), "station": names[np.arange(n) % 5],
         "temp": signal}, rootdir=root, mode="w"))
    t.close()
    t = carray.open_table(root, mode="r")
    hits = _timed("where (time < 50000) & (temp > 20), cold", lambda: t.fetchwhere(
        "(time < 50000) & (temp > 20)", outcols=["time", "station"]))
    print(f"  {len(hits):,} rows; first: {hits[0] if len(hits) else None}")
    _timed("same query without min/max pruning", lambda: t.fetchwhere(
        "(time < 50000) & (temp > 20)", outcols=["time", "station"], prune=False))
    mean = _timed("mean temperature, chunk by chunk", lambda: t.eval("temp").sum() / n)
    print(f"  mean = {mean:.3f}")


def _cube_tour(where: Path, rows: int, rng: np.random.Generator, _timed: _Timer) -> None:
    """An N-d array of frames: chunks and blocks along every axis, slices along each,
    then the same array as a python-blosc2 frame."""
    from carray.integrations.convert import convert

    frames = max(16, rows // 20_000)
    t, y, x = np.ogrid[:frames, :256, :256]
    cube = (np.sin(t / 7 + y / 23) * np.cos(x / 31) * 100).astype("f4")
    root = where / "frames.carray"
    print(f"N-d: {frames} frames of 256 x 256 float32 -> {root}")
    a = _timed("create (default chunks and blocks)", lambda: carray.carray(
        cube, rootdir=root, mode="w"))
    print(f"  chunks {a.chunks}, blocks {a.blocks}")
    for label, key in [("a[i] (one frame)", (frames // 2,)), ("a[:, j, :]", (slice(None), 100)),
                       ("a[:, :, k]", (slice(None), slice(None), 100))]:
        got = _timed(label, functools.partial(a.__getitem__, key))
        assert np.array_equal(got, cube[key])
    a.close()
    frame = where / "frames.b2nd"
    _timed("convert to a python-blosc2 .b2nd frame", lambda: convert(
        root, frame, overwrite=True))
    import blosc2

    assert np.array_equal(blosc2.open(str(frame))[frames // 2], cube[frames // 2])
    print("  python-blosc2 reads it back")
