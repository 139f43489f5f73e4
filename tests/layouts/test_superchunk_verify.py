"""Verifying superchunk directories is bounded by the files on disk."""

from __future__ import annotations

import json
import time

import numpy as np

import carray as ca
from carray.problems import tally


def test_a_superchunk_shape_claiming_huge_lengths_does_not_loop(tmp_path):
    from carray import registry

    root = tmp_path / "s"
    ca.carray(np.arange(1000, dtype="i1"), rootdir=root, chunklen=100,
              storage={"superchunksize": 2}).close()
    sizes = root / "meta" / "sizes"
    meta = json.loads(sizes.read_text())
    meta["shape"], meta["length"], meta["nbytes"] = [2**40], 2**40, 2**40
    sizes.write_text(json.dumps(meta))
    start = time.perf_counter()
    problems, checked = tally(registry.verify(root))
    assert time.perf_counter() - start < 10
    assert checked == 10 and len(problems) == 1
    assert problems[0].path.endswith("sc_000005.blp")
    assert problems[0].what.startswith("missing, and the 5497558133 files after it")
