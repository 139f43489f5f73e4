"""A reader that keeps its handle open while another process edits the array in place
sees old or new values, never an error."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

import carray as ca

N, CHUNKLEN, ROUNDS = 4000, 500, 60

WRITER = """
import sys, numpy as np, carray as ca
a = ca.open(sys.argv[1], mode="a")
for k in range(1, {rounds} + 1):
    a[:] = np.full(len(a), k, dtype=a.dtype)   # every chunk rewritten in place
    a.flush()
    a.resize(len(a) - 777)                      # the partial last chunk rewritten,
    a.append(np.full(777, k, dtype=a.dtype))    # whole chunks dropped and written again
    a.flush()
a.close()
"""


@pytest.mark.parametrize("fmt", ["superchunk", "bcolz", "b2nd"])
def test_a_reader_sees_old_or_new_values_while_a_writer_edits(tmp_path, fmt):
    root = str(tmp_path / ("a.b2nd" if fmt == "b2nd" else "a"))
    ca.carray(np.zeros(N, dtype="i8"), chunklen=CHUNKLEN, rootdir=root, mode="w",
              format=fmt).close()
    reader = ca.open(root, mode="r")
    writer = subprocess.Popen([sys.executable, "-c", WRITER.format(rounds=ROUNDS), root])
    reads, seen = 0, set()
    deadline = time.monotonic() + 60
    try:
        while writer.poll() is None and time.monotonic() < deadline:
            reader.free_cachemem()
            values = reader[:]  # never raises
            assert len(values) in (N, N - 777)  # a committed state: before or after a resize
            assert ((values >= 0) & (values <= ROUNDS)).all()
            seen.update(np.unique(values).tolist())
            assert 0 <= int(reader[N // 3]) <= ROUNDS
            reads += 1
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0
    assert reads > 0
    # A fresh reader sees the last commit.
    np.testing.assert_array_equal(ca.open(root, mode="r")[:], np.full(N, ROUNDS))
