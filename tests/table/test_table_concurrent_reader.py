"""A reader that keeps a table open while another process appends, edits, trims, grows
and adds or deletes columns in place sees whole committed states, never an error.

The writer keeps ``y == 2 * x`` and ``s == f"s{x}"`` (``""`` in rows a resize added,
where ``x == 0``), and ``z == 3 * x`` while ``z`` exists, in every state it commits,
so a row read from two different states, or columns of different lengths, break an
invariant the reader checks on every read.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

import carray as ca

N, ROUNDS = 300, 40

WRITER = """
import sys, time, numpy as np, carray as ca
root, rounds, auto_flush = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
t = ca.ctable(rootdir=root, mode="a", auto_flush=auto_flush, fsync=False)
rng = np.random.default_rng(7)

def rows(x):
    x = np.asarray(x, dtype=np.int64)
    out = {"x": x, "y": x * 2.0, "s": [f"s{v}" for v in x]}
    if "z" in t.names:
        out["z"] = x * 3
    return out

def row(v):
    return (v, v * 2.0, f"s{v}", v * 3) if "z" in t.names else (v, v * 2.0, f"s{v}")

for k in range(1, rounds + 1):
    t.append(rows(rng.integers(0, 1000, size=int(rng.integers(1, 90)))))
    lo = int(rng.integers(0, len(t) - 1))
    t[lo:lo + int(rng.integers(1, 120))] = row(k)           # every column, a run of rows
    t[rng.integers(0, len(t), size=4)] = row(1000 + k)      # every column, scattered rows
    t.trim(int(rng.integers(0, 70)))
    if k % 7 == 3:
        t.resize(len(t) + 15)                                # rows of zeros and ""
    if k % 10 == 4:
        t.flush()
        t.addcol(t["x"][:] * 3, name="z")
    if k % 10 == 8:
        t.flush()
        t.delcol("z")
    t.flush()
    time.sleep(0.01)  # a pause between steps, as any writer has now and then
t.close()
"""


def _check(rec: np.ndarray) -> None:
    """The writer's invariants, on rows read together."""
    x, y = rec["x"], rec["y"]
    assert (y == 2 * x).all(), "a row mixes two states"
    s = rec["s"].tolist()
    assert all(v == f"s{a}" or (v == "" and a == 0) for a, v in zip(x.tolist(), s, strict=True))
    if "z" in rec.dtype.names:
        assert (rec["z"] == 3 * x).all()


def _read_all(t) -> int:
    """Every kind of read; the length seen."""
    n = len(t)
    rec = t[:]
    _check(rec)
    if len(rec):
        _check(t[0:1])
        first = t[0]
        assert first["y"] == 2 * first["x"]
    assert list(t.where("y != 2 * x")) == []
    assert not t.eval("y - 2 * x", out_flavor="numpy").any()
    # Queries and iteration name their columns: one deleted meanwhile is a KeyError.
    _check(t.fetchwhere("x >= 0", outcols="x, y, s"))
    for r in t.iter(outcols="x, y"):
        assert r.y == 2 * r.x
    for block in t.iterblocks(64, outcols=["x", "y", "s"]):
        _check(block)
    assert len(t["x"][:]) >= 0  # a column read on its own: old or new values, no error
    return n


@pytest.mark.parametrize("auto_flush", [True, False])
@pytest.mark.parametrize("fmt", [None, "bcolz"])
def test_a_table_reader_sees_whole_states_while_a_writer_edits(tmp_path, fmt, auto_flush):
    root = str(tmp_path / "t")
    x = np.arange(N)
    # A variable-length string column; bcolz's is fixed-width, as wide as the writes.
    s = np.array([f"s{v}" for v in x], dtype=object if fmt is None else "U12")
    ca.ctable({"x": x, "y": x * 2.0, "s": s}, rootdir=root,
              chunklen=32, format=fmt).close()
    reader = ca.ctable(rootdir=root, mode="r")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, root, str(ROUNDS),
                               "1" if auto_flush else "0"], stderr=subprocess.PIPE)
    reads, lengths, names = 0, set(), set()
    deadline = time.monotonic() + 120
    try:
        while writer.poll() is None and time.monotonic() < deadline:
            if fmt is None:  # a versioned table's reader holds its version until refresh()
                reader.refresh()
            lengths.add(_read_all(reader))
            names.add(tuple(reader.names))
            reads += 1
    finally:
        _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err.decode()
    assert reads > 0
    assert len(lengths) > 1  # the reader followed the writer's commits
    # Once the writer is gone the long-lived reader and a new one agree.
    if fmt is None:
        reader.refresh()
    fresh = ca.ctable(rootdir=root, mode="r")
    assert reader.names == fresh.names
    np.testing.assert_array_equal(reader[:], fresh[:])
    _read_all(reader)
