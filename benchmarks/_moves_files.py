"""Issue 27, item 4, single files: 300 tiny ds files and a 100 MB Bloscpack file.

* 300 tiny ds files (one int64 each, as ``bench_ds.py`` writes them) by carray's
  ``ds.write`` with its defaults (no fsync: a ds file is written once, as ds-format
  writes it), with ``fsync=True`` and with ``fsync=False``, against the ds-format
  package, each contender into a new directory of its own; they take turns 10 files
  at a time, so that the file system's slow moments on a shared machine fall on all
  alike (``fsync=True`` runs alone).  A bare ``os.open``/``write``/``close`` of each
  file is timed beside them: what creating the files costs here, a floor for any
  writer.
* A Bloscpack pack of the issue's data (100 MB float64, ``np.linspace(0, 1000,
  12_500_000)`` plus normal noise of sd 0.01, seeded; lz4 level 5, byte shuffle, 1 MiB
  chunks, adler32 digests) by ``carray.bloscpack.pack_array`` with its defaults (no
  fsync: a file written once) and with ``fsync=True``, against bloscpack 0.16's
  ``pack_ndarray_to_file`` (which never syncs), each into a new file; and the unpack of the files both wrote, warm.

Every repetition runs every contender once, their order rotated; times of every run
are returned.  Run: ``PYTHONPATH=src python benchmarks/_moves_files.py [--quick]
[--repeat N]``.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

import carray
from carray.formats import bloscpack as ours_blp
from carray.formats import ds

for _name in ("MutableMapping", "Mapping", "Sequence", "Iterable"):  # bloscpack 0.16 on 3.10+
    if not hasattr(collections, _name):
        setattr(collections, _name, getattr(collections.abc, _name))
import bloscpack  # noqa: E402
import ds_format  # noqa: E402

TINY = np.array([1], dtype=np.int64)
NFILES = 300
BATCH = 10
CHUNK = 2**20
CPARAMS = carray.CParams(clevel=5, cname="lz4", shuffle=carray.SHUFFLE)


def issue_data(n: int = 12_500_000) -> np.ndarray:
    """The issue's 100 MB float64 array (a noisy ramp)."""
    rng = np.random.default_rng(27)
    return np.linspace(0, 1000, n) + rng.normal(0, 0.01, n)


def _dataset(data: np.ndarray) -> dict:
    return {"x": data, ".": {"x": {".dims": [f"x{i}" for i in range(data.ndim)]}}}


def _timed(fn: Callable[[], object]) -> float:
    os.sync()  # nobody pays for the write-back of the previous contender
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


_BARE = b"ds-1.0\n" + b"x" * 150


def _bare_write(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, _BARE)
    os.close(fd)


def _tiny_writes(root: str, repeat: int) -> dict[str, list[float]]:
    """Each repetition: every contender writes its 300 files into a new directory of its
    own, in batches of :data:`BATCH` files taken in turn (the order rotating), so that
    the file system's slow moments on this shared machine fall on all of them alike
    (carray with ``fsync=True`` runs alone, before them)."""
    writers: dict[str, Callable[[str], None]] = {
        "carray (defaults)": lambda p: ds.write(p, _dataset(TINY)),
        "carray fsync=False": lambda p: ds.write(p, _dataset(TINY), fsync=False),
        "ds-format": lambda p: ds_format.write(p, _dataset(TINY)),
        # The file system's own cost of a tiny file, what no writer can go below.
        "bare open/write/close": _bare_write,
    }
    times: dict[str, list[float]] = {name: [] for name in writers}
    times["carray fsync=True"] = []
    for rep in range(repeat):
        # Alone: its journal commits would stall the others' file creations.
        folder = os.path.join(root, f"tiny{rep}-fsync")
        os.mkdir(folder)
        synced = [os.path.join(folder, f"f{i}.ds") for i in range(NFILES)]
        times["carray fsync=True"].append(_timed(
            lambda: [ds.write(p, _dataset(TINY), fsync=True) for p in synced]))  # noqa: B023
        paths = {}
        for name in writers:
            folder = os.path.join(root, f"tiny{rep}-{''.join(c for c in name if c.isalnum())}")
            os.mkdir(folder)
            paths[name] = [os.path.join(folder, f"f{i}.ds") for i in range(NFILES)]
        spent = dict.fromkeys(writers, 0.0)
        os.sync()
        for batch, at in enumerate(range(0, NFILES, BATCH)):
            names = list(writers)
            turn = (rep + batch) % len(names)
            for name in names[turn:] + names[:turn]:
                write, todo = writers[name], paths[name][at:at + BATCH]
                start = time.perf_counter()
                for path in todo:
                    write(path)
                spent[name] += time.perf_counter() - start
        for name in writers:
            times[name].append(spent[name])
            if writers[name] is not _bare_write and not np.array_equal(
                    ds.read(paths[name][-1])["x"], TINY):
                raise AssertionError(f"{name} wrote a different file")
    return times


def _blp(root: str, a: np.ndarray, repeat: int) -> dict[str, dict[str, list[float]]]:
    peer_args = bloscpack.BloscArgs(clevel=5, shuffle=True, cname="lz4")
    packs: dict[str, Callable[[str], None]] = {
        "carray (defaults)": lambda p: ours_blp.pack_array(a, p, cparams=CPARAMS,
                                                           chunk_size=CHUNK),
        "carray fsync=True": lambda p: ours_blp.pack_array(a, p, cparams=CPARAMS,
                                                           chunk_size=CHUNK, fsync=True),
        "bloscpack": lambda p: bloscpack.pack_ndarray_to_file(a, p, chunk_size=CHUNK,
                                                              blosc_args=peer_args),
    }
    times: dict[str, dict[str, list[float]]] = {"pack": {n: [] for n in packs},
                                                "unpack": {"carray": [], "bloscpack": []}}
    for rep in range(repeat):
        names = list(packs)
        names = names[rep % len(names):] + names[:rep % len(names)]
        for name in names:
            path = os.path.join(root, f"p{rep}-{''.join(c for c in name if c.isalnum())}.blp")
            times["pack"][name].append(_timed(lambda: packs[name](path)))  # noqa: B023
        ours_file = os.path.join(root, f"p{rep}-carraydefaults.blp")
        peer_file = os.path.join(root, f"p{rep}-bloscpack.blp")
        unpacks = {"carray": lambda: ours_blp.unpack_array(ours_file),  # noqa: B023
                   "bloscpack": lambda: bloscpack.unpack_ndarray_from_file(peer_file)}  # noqa: B023
        for name in (["carray", "bloscpack"] if rep % 2 == 0 else ["bloscpack", "carray"]):
            times["unpack"][name].append(_timed(unpacks[name]))
        if rep == 0:  # each reads what the other wrote: the same format
            assert np.array_equal(ours_blp.unpack_array(peer_file), a)
            assert np.array_equal(bloscpack.unpack_ndarray_from_file(ours_file), a)
        for name in packs:
            os.unlink(os.path.join(root, f"p{rep}-{''.join(c for c in name if c.isalnum())}.blp"))
    return times


def _case(name: str, ours: list[float], peer: str, theirs: list[float], target: str,
          note: str) -> dict:
    return {"name": name, "carray_s": ours, "peer": peer, "peer_s": theirs, "target": target,
            "note": note}


def run(repeat: int = 5, quick: bool = False) -> dict:
    """The cases of this part (see the module docstring); ``quick``: a 25 MB array."""
    repeat = max(repeat, 3)
    root = tempfile.mkdtemp(prefix="moves_files_")
    try:
        tiny = _tiny_writes(root, repeat)
        a = issue_data(12_500_000 // 4 if quick else 12_500_000)
        blp = _blp(root, a, repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    mb = f"{a.nbytes / 1e6:.0f} MB"
    tiny_note = (f"{NFILES} files of one int64, each contender in a new directory; "
                 "ds-format never syncs")
    cases = [
        _case(f"{NFILES} tiny ds writes (defaults: no fsync)", tiny["carray (defaults)"],
              "ds-format", tiny["ds-format"], ">= 3x", tiny_note),
        _case(f"{NFILES} tiny ds writes, fsync=True", tiny["carray fsync=True"], "ds-format",
              tiny["ds-format"], "(reported)", tiny_note + "; carray syncs file and directory"),
        _case(f"{NFILES} tiny ds writes, fsync=False", tiny["carray fsync=False"],
              "ds-format", tiny["ds-format"], "(reported)", tiny_note),
        _case(f"{NFILES} tiny files, bare os.open/write/close (context: the file system's "
              "floor)", tiny["bare open/write/close"], "ds-format", tiny["ds-format"],
              "(context)", "what creating the files costs here; carray adds a rename"),
        _case(f"Bloscpack pack {mb} (defaults: no fsync)", blp["pack"]["carray (defaults)"],
              "bloscpack 0.16", blp["pack"]["bloscpack"], ">= 1.5x",
              "lz4 5, shuffle, 1 MiB chunks, adler32; bloscpack never syncs"),
        _case(f"Bloscpack pack {mb}, fsync=True", blp["pack"]["carray fsync=True"],
              "bloscpack 0.16", blp["pack"]["bloscpack"], "(reported)",
              "lz4 5, shuffle, 1 MiB chunks, adler32"),
        _case(f"Bloscpack unpack {mb}", blp["unpack"]["carray"], "bloscpack 0.16",
              blp["unpack"]["bloscpack"], ">= today's",
              "warm page cache; carray verifies every digest, as bloscpack does"),
    ]
    return {"part": "files", "repeat": repeat, "quick": quick, "cases": cases,
            "machine": {"cpus": os.cpu_count(), "nthreads": carray.get_nthreads(),
                        "bloscpack": bloscpack.__version__}}


def summary(result: dict) -> str:
    lines = []
    for c in result["cases"]:
        ours, theirs = statistics.median(c["carray_s"]), statistics.median(c["peer_s"])
        lines.append(f"{c['name']}: carray {ours * 1e3:.1f} ms "
                     f"[{min(c['carray_s']) * 1e3:.1f}-{max(c['carray_s']) * 1e3:.1f}], "
                     f"{c['peer']} {theirs * 1e3:.1f} ms "
                     f"[{min(c['peer_s']) * 1e3:.1f}-{max(c['peer_s']) * 1e3:.1f}]: "
                     f"{theirs / ours:.2f}x (target {c['target']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args(argv)
    result = run(args.repeat, args.quick)
    print(summary(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
