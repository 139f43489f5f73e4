"""Damage one byte of a dataset carray wrote, read it every way there is, and tell apart
the right values, a carray error, a wrong value (silent) and any other exception.

Used by ``test_foreign_flips.py``; the sweep there picks the bytes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import carray as ca
from carray import registry
from carray.core.problems import tally
from carray.errors import CArrayError
from carray.integrations.convert import convert

#: XORed into the damaged byte, one after the other over the bytes of a sweep: every
#: bit, a low one, a high one, a middle one.
MASKS = (0xFF, 0x01, 0x80, 0x10)
#: Reads that write a new dataset (slower): every this-many damaged bytes (every one
#: with CARRAY_SOAK=1).
WRITING_EVERY = 1 if os.environ.get("CARRAY_SOAK") == "1" else 8


def _items(a) -> np.ndarray:
    """Single items: first, middle, last and one inside the last chunk of every axis."""
    shape = a.shape
    picks = [tuple(0 for _ in shape), tuple(n // 2 for n in shape),
             tuple(n - 1 for n in shape), tuple(max(n - 3, 0) for n in shape)]
    return np.array([a[p if len(p) > 1 else p[0]] for p in picks])


def _plane(a) -> np.ndarray:
    if a.ndim == 1:
        return a[17:len(a) - 5]
    return np.concatenate([a[:, 3].reshape(-1), a[5].reshape(-1)])


def _box(a) -> np.ndarray:
    return a[tuple(slice(n // 5, max(n // 5 + 1, n - n // 4)) for n in a.shape)]


def _strided(a) -> np.ndarray:
    return a[tuple(slice(i % 2, None, 2 + i) for i in range(a.ndim))]


def _iter(a) -> np.ndarray:
    return np.array(list(a))


def _blocks(a) -> np.ndarray:
    return np.concatenate(list(ca.iterblocks(a, blen=37)))


READS: dict[str, Callable] = {
    "all": lambda a: a[:],
    "items": _items,
    "plane": _plane,
    "box": _box,
    "strided": _strided,
    "asarray": np.asarray,
    "iter": _iter,
    "iterblocks": _blocks,
    "sum": lambda a: np.asarray(a.sum()),
}


def _copy(path: str, scratch: Path) -> np.ndarray:
    dst = scratch / "copy"
    shutil.rmtree(dst, ignore_errors=True)
    with ca.open(path, mode="r") as a:
        out = a.copy(rootdir=str(dst), mode="w", fsync=False)
    try:
        return out[:]
    finally:
        out.close()


def _convert(path: str, scratch: Path) -> np.ndarray:
    dst = scratch / ("conv" if path.endswith(".b2nd") else "conv.b2nd")
    shutil.rmtree(dst, ignore_errors=True) if dst.is_dir() else dst.unlink(missing_ok=True)
    convert(path, str(dst))  # what `carray convert SRC DST` runs
    with ca.open(str(dst), mode="r") as a:
        return a[:]


WRITING: dict[str, Callable[[str, Path], np.ndarray]] = {"copy": _copy, "convert": _convert}


@dataclass
class Tally:
    """What the damaged reads did: counts by outcome, and the first examples of the bad."""

    flips: int = 0
    reads: int = 0
    right: int = 0
    errors: int = 0
    silent: list[str] = field(default_factory=list)
    untyped: list[str] = field(default_factory=list)
    disagree: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.flips} flips, {self.reads} reads: {self.right} right, {self.errors} "
                f"carray errors, {len(self.silent)} silent, {len(self.untyped)} untyped, "
                f"{len(self.disagree)} verify/read disagreements")


def expected(path: str, scratch: Path) -> dict[str, np.ndarray]:
    """What every read gives on the undamaged dataset."""
    want = {}
    for name, read in READS.items():
        with ca.open(path, mode="r") as a:
            want[name] = np.asarray(read(a))
    for name, run in WRITING.items():
        want[name] = run(path, scratch)
    return want


def _outcome(run: Callable[[], np.ndarray], want: np.ndarray) -> str:
    try:
        got = run()
    except CArrayError:
        return "error"
    except Exception as exc:  # noqa: BLE001 - what the sweep looks for
        return f"untyped {type(exc).__name__}: {exc}"
    same = got.shape == want.shape and got.dtype == want.dtype and \
        np.array_equal(got, want, equal_nan=want.dtype.kind in "fc")
    return "right" if same else "silent"


def _read_once(path: str, read: Callable) -> np.ndarray:
    with ca.open(path, mode="r") as a:
        return np.asarray(read(a))


def damage(file: Path, offset: int, mask: int) -> bytes:
    """XOR ``mask`` into byte ``offset`` of ``file``; returns the old contents."""
    data = file.read_bytes()
    bad = bytearray(data)
    bad[offset] ^= mask
    file.write_bytes(bytes(bad))
    return data


def sweep(path: str, targets: Iterable[tuple[Path, int]], want: dict[str, np.ndarray],
          scratch: Path, tally_: Tally) -> None:
    """Damage each ``(file, offset)`` in turn, read, restore."""
    for k, (file, offset) in enumerate(targets):
        mask = MASKS[k % len(MASKS)]
        old = damage(file, offset, mask)
        where = f"{file.name}@{offset}^{mask:02x}"
        try:
            _read_all(path, want, scratch, tally_, where, writing=k % WRITING_EVERY == 0)
        finally:
            file.write_bytes(old)
            os.utime(file)
        tally_.flips += 1


def _read_all(path: str, want: dict[str, np.ndarray], scratch: Path, t: Tally, where: str,
              writing: bool) -> None:
    outcomes = {name: _outcome(lambda r=read: _read_once(path, r), want[name])
                for name, read in READS.items()}
    if writing:
        for name, run in WRITING.items():
            outcomes[name] = _outcome(lambda r=run: r(path, scratch), want[name])
    for name, result in outcomes.items():
        t.reads += 1
        if result == "right":
            t.right += 1
        elif result == "error":
            t.errors += 1
        elif result == "silent":
            t.silent.append(f"{where} {name}")
        else:
            t.untyped.append(f"{where} {name}: {result}")
    # carray verify agrees with reading: clean means every read is right; damaged means
    # reading the whole array (or its attributes) fails.
    problems, _ = tally(registry.verify(path))
    whole = outcomes["all"] == "right" and _attrs_read(path)
    if problems and whole:
        t.disagree.append(f"{where}: verify says {problems[0]}, reads are right")
    if not problems and any(r != "right" for r in outcomes.values()):
        t.disagree.append(f"{where}: verify says clean, a read failed")


def _attrs_read(path: str) -> bool:
    try:
        with ca.open(path, mode="r") as a:
            a.attrs.getall()
    except CArrayError:
        return False
    return True
