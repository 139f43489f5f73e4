"""Space: after any sequence of edits and appends, a ``.b2nd`` frame or a bcolz directory
takes at most 1.3 times the space of the same data (and attributes) written at once.

Contiguous frames are compacted once dead space passes a quarter of what the last commit
uses; a sparse frame deletes the chunk files no commit uses (some after a grace period
for readers, all at close); bcolz replaces whole chunk files.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import carray as ca

BOUND = 1.3


def _size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def _sequences(nd: bool):
    """Named lists of edits, each followed by a flush."""
    rng = np.random.default_rng(1)

    def rows(k):
        return rng.integers(0, 100, (k, 30) if nd else k)

    base = [("append", rows(3000))]
    yield "small appends", [("append", rows(7)) for _ in range(120)]
    yield "large appends", [("append", rows(900)) for _ in range(8)]
    yield "items", base + [("item", int(rng.integers(0, 3000))) for _ in range(80)]
    yield "slices", base + [("slice", int(rng.integers(0, 2950))) for _ in range(80)]
    yield "rewrite all", base + [("all", None) for _ in range(8)]
    yield "shrink and grow", base + [op for _ in range(30) for op in (
        ("resize", -int(rng.integers(1, 300))), ("append", rows(int(rng.integers(1, 300)))))]
    yield "attributes", base + [op for k in range(40) for op in (
        ("attrs", k), ("item", int(rng.integers(0, 3000))))]
    yield "mixed", base + [op for _ in range(40) for op in (
        ("append", rows(11)), ("slice", int(rng.integers(0, 2950))))]


def _apply(a, op, rng) -> None:
    kind, arg = op
    if kind == "append":
        a.append(arg)
    elif kind == "item":
        a[arg] = -1
    elif kind == "slice":
        a[arg:arg + 50] = -2
    elif kind == "all":
        a[:] = rng.integers(0, 100, a.shape)
    elif kind == "resize":
        a.resize(max(0, len(a) + arg))
    else:
        a.attrs["k"] = arg


def _at_once(a, path: str, fmt: str, kw: dict) -> int:
    """The space the array's items and attributes take written at once."""
    b = ca.carray(a[:], rootdir=path, mode="w", format=fmt, **kw)
    for k, v in a.attrs.getall().items():
        b.attrs[k] = v
    b.close()
    return _size(path)


CASES = [("b2nd", True, False), ("b2nd", True, True), ("b2nd", False, False),
         ("b2nd", False, True), ("bcolz", True, False)]


@pytest.mark.parametrize("fmt,contiguous,nd", CASES,
                         ids=[f"{f}-{'file' if c else 'sparse'}-{'2d' if n else '1d'}"
                              for f, c, n in CASES])
def test_edits_and_appends_stay_within_the_bound(tmp_path, fmt, contiguous, nd):
    ext = ".b2nd" if fmt == "b2nd" else ""
    if fmt == "bcolz":
        kw: dict = dict(chunklen=1024)
    else:
        kw = dict(chunks=(1024, 30) if nd else (1024,), blocks=(128, 30) if nd else (128,))
        if not contiguous:
            kw["storage"] = {"contiguous": False}
    rng = np.random.default_rng(2)
    worst = {}
    for name, ops in _sequences(nd):
        root = str(tmp_path / f"x{ext}")
        a = ca.carray(np.zeros((0, 30) if nd else 0, "i8"), rootdir=root, mode="w",
                      format=fmt, **kw)
        ratios = []
        for k, op in enumerate(ops):
            _apply(a, op, rng)
            a.flush()
            # Sparse frames keep a little more for readers while the writer is open.
            if contiguous and k % 7 == 0:
                ratios.append(_size(root) / _at_once(a, str(tmp_path / f"y{ext}"), fmt, kw))
        a.close()
        b = ca.open(root, mode="r")
        ratios.append(_size(root) / _at_once(b, str(tmp_path / f"y{ext}"), fmt, kw))
        worst[name] = round(max(ratios), 3)
    print(f"\n{fmt} {'file' if contiguous else 'sparse'} {'2d' if nd else '1d'}: {worst}")
    assert max(worst.values()) <= BOUND, worst
