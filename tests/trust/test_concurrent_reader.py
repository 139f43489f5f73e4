"""A reader that keeps its handle open while another process edits the array in place
sees old or new values, never an error."""

from __future__ import annotations

import os
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


# -- readers opening a dataset again and again while a writer appends ------------------------

SOAK = os.environ.get("CARRAY_SOAK") == "1"
APPEND_SECONDS = 60.0 if SOAK else 2.0
N0, ROWS = 300, 37

APPENDER = """
import sys, time, numpy as np, carray as ca
a = ca.open(sys.argv[1], mode="a")
end, k = time.monotonic() + float(sys.argv[2]), 0
while time.monotonic() < end:
    k += 1
    a.append(np.full((%(rows)d, *a.shape[1:]), k, dtype=a.dtype))
    a[:10] = k                      # chunk 0 rewritten by every commit
    a.flush()
a.close()
print(k)
"""


def _committed(values: np.ndarray) -> bool:
    """Whether ``values`` is a state the appender committed: rows of round j at
    ``N0 + (j-1)*ROWS`` and on, and the first rows from that round or a later one."""
    n = len(values)
    if n < N0 or (n - N0) % ROWS:
        return False
    rounds = (n - N0) // ROWS
    tail = values[N0:].reshape(rounds, ROWS)
    head = np.unique(values[:10])
    return bool((tail == np.arange(1, rounds + 1)[:, None]).all()) and len(head) == 1 \
        and head[0] >= rounds and (values[10:N0] == 0).all()


@pytest.mark.parametrize("fmt", ["bcolz", "b2nd", "b2nd-sparse", "superchunk"])
def test_readers_reopening_while_a_writer_appends(tmp_path, fmt):
    """Readers in mode 'r' opening and reading the whole array again and again, and one
    keeping its handle, while another process appends and flushes: every read is a
    committed state, never an error (a frame's header rewritten under a reader's open,
    a compaction renaming a new file over it, chunk files replaced and deleted)."""
    sparse = fmt == "b2nd-sparse"
    root = str(tmp_path / ("a.b2nd" if fmt.startswith("b2nd") else "a"))
    shape = (N0,) if fmt == "bcolz" else (N0, 3)
    kw = dict(chunklen=64) if fmt == "bcolz" else dict(chunks=(64, 3), blocks=(16, 3))
    if sparse:
        kw["storage"] = {"contiguous": False}
    ca.carray(np.zeros(shape, dtype="i8"), rootdir=root, mode="w",
              format=None if fmt.startswith("b2nd") else fmt, **kw).close()
    kept = ca.open(root, mode="r")
    writer = subprocess.Popen([sys.executable, "-c", APPENDER % {"rows": ROWS}, root,
                               str(APPEND_SECONDS)], stdout=subprocess.PIPE, text=True)
    reads, errors, mixed = 0, [], 0
    try:
        while writer.poll() is None:
            for reader in (None, kept):
                try:
                    a = ca.open(root, mode="r") if reader is None else reader
                    a.free_cachemem()
                    values = a[:]
                    values = values if values.ndim == 1 else values[:, 1]
                    mixed += not _committed(values)
                    reads += 1
                except Exception as exc:  # noqa: BLE001 - what this test looks for
                    errors.append(repr(exc))
    finally:
        out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0
    assert not errors, (len(errors), errors[:3])
    assert not mixed and reads > 10 and int(out) > 3, (reads, mixed, out)
    final = ca.open(root, mode="r")[:]
    assert _committed(final if final.ndim == 1 else final[:, 1])
