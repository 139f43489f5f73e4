"""Verifying superchunk directories is bounded by the files on disk."""

from __future__ import annotations

import json
import pathlib
import time

import numpy as np

import carray as ca
from carray.core.problems import tally

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"


def test_a_superchunk_shape_claiming_huge_lengths_does_not_loop(tmp_path):
    import shutil

    from carray import registry
    from carray.versions import Manifest

    # A directory of format 2 whose meta/sizes claims 2**40 items.
    root = tmp_path / "s"
    shutil.copytree(DATA / "carray_v2" / "a1d.carray", root)
    sizes = root / "meta" / "sizes"
    meta = json.loads(sizes.read_text())
    meta["shape"], meta["length"], meta["nbytes"] = [2**40], 2**40, 2**43
    sizes.write_text(json.dumps(meta))
    start = time.perf_counter()
    problems, checked = tally(registry.verify(root))
    assert time.perf_counter() - start < 10
    assert checked == 0 and len(problems) == 1 and "is missing" in problems[0].what
    # A version claiming it: its index holds as many chunks as were written.
    root = tmp_path / "v"
    ca.carray(np.arange(1000, dtype="i1"), rootdir=root, chunklen=100,
              storage={"superchunksize": 2}).close()
    newest = sorted((root / "versions").glob("*.mf"))[-1]
    m = Manifest.decode(newest.read_bytes())
    newest.write_bytes(m.replace(members=(m.members[0].replace(shape=(2**40,)),)).encode())
    start = time.perf_counter()
    problems, checked = tally(registry.verify(root))
    assert time.perf_counter() - start < 10
    assert len(problems) == 1 and "chunks for shape" in problems[0].what
