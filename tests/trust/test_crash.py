"""kill -9: a writer process killed at random moments during appends, edits, resizes and
flushes leaves every layout, and tables, readable at a flushed state, losing nothing
flushed.

Each step of the writer is one change followed by a flush, and the writer prints the
step's number once its flush has returned.  The parent replays the same seeded steps
in memory, kills the writer at a random moment, reopens the data set for writing
(which recovers) and checks it holds the state after the last reported step, or
after the step that was being flushed.

A few trials run in CI; ``CARRAY_SOAK=1`` runs ``CARRAY_SOAK_TRIALS`` (default 100)
per kind and prints the tally.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import carray as ca

# "superchunk-files": a new superchunk file every 4 chunks, sent to disk a few records at a
# time on the background threads (carray.layouts.superchunk.filling) while the writer goes on.
KINDS = ["superchunk", "superchunk-files", "bcolz", "b2nd", "table", "table-bcolz"]
SPILL_BYTES = 300
SOAK = os.environ.get("CARRAY_SOAK") == "1"
STEPS = 60 if SOAK else 30
TRIALS = int(os.environ.get("CARRAY_SOAK_TRIALS", "100")) if SOAK else 2


# -- the writer's steps, replayed the same way in memory -----------------------------------

def _array_step(a, rng: np.random.Generator) -> None:
    n = len(a)
    kind = rng.integers(0, 5)
    if kind <= 1 or n < 10:
        a.append(rng.integers(0, 1000, size=int(rng.integers(1, 90))))
    elif kind == 2:
        lo = int(rng.integers(0, n - 1))
        a[lo:min(n, lo + int(rng.integers(1, 70)))] = int(rng.integers(-999, 0))
    elif kind == 3:
        a[rng.integers(0, n, size=5)] = int(rng.integers(-999, 0))
    else:
        a.resize(max(0, n + int(rng.integers(-60, 40))))


#: Wide enough for every value a step writes (a longer one is refused, never cut).
TEXT = "U8"


def _table_step(t, rng: np.random.Generator) -> None:
    n = len(t)
    kind = rng.integers(0, 4)
    if kind <= 1 or n < 10:
        k = int(rng.integers(1, 60))
        v = rng.integers(0, 1000, size=k)
        t.append({"i": v, "f": v * 0.5, "s": [f"s{x}" for x in v]})
    elif kind == 2:
        lo = int(rng.integers(0, n - 1))
        x = int(rng.integers(-999, 0))
        t[lo:min(n, lo + int(rng.integers(1, 50)))] = (x, x * 0.5, f"e{x}")
    else:
        t.resize(max(0, n + int(rng.integers(-50, 30))))


def _path(root: str, kind: str) -> str:
    return root + ".b2nd" if kind == "b2nd" else root


def create(root: str, kind: str) -> None:
    """The data set every trial starts from (flushed: step 0)."""
    init = np.arange(100, dtype=np.int64)
    if kind.startswith("table"):
        ca.ctable({"i": init, "f": init * 0.5, "s": np.array([f"s{x}" for x in init], dtype=TEXT)},
                  rootdir=root, mode="w", chunklen=32,
                  format="bcolz" if kind == "table-bcolz" else None).close()
    else:
        ca.carray(init, rootdir=_path(root, kind), mode="w", chunklen=32,
                  format="bcolz" if kind == "bcolz" else None,
                  storage={"superchunksize": 4} if kind == "superchunk-files" else None
                  ).close()


def run_steps(root: str, kind: str, seed: int, report=None, steps: int = STEPS) -> list:
    """Run the writer's steps on ``root`` (or, with ``root=None``, in memory, returning the
    state after each step)."""
    rng = np.random.default_rng(seed)
    table = kind.startswith("table")
    if root is None:
        init = np.arange(100, dtype=np.int64)
        obj = ca.ctable({"i": init, "f": init * 0.5, "s": np.array([f"s{x}" for x in init], dtype=TEXT)},
                        chunklen=32) if table else ca.carray(init, chunklen=32)
    else:
        obj = ca.ctable(rootdir=root, mode="a") if table else \
            ca.open(_path(root, kind), mode="a")
    states = [_state(obj, table)] if root is None else []
    for k in range(1, steps + 1):
        (_table_step if table else _array_step)(obj, rng)
        obj.flush()
        if root is None:
            states.append(_state(obj, table))
        elif report is not None:
            report(k)
    return states


def _state(obj, table: bool):
    if not table:
        return obj[:].copy()
    return [tuple(r) for r in obj[:].tolist()] if len(obj) else []


def _equal(a, b, table: bool) -> bool:
    return a == b if table else (len(a) == len(b) and bool((a == b).all()))


_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    from test_crash import SPILL_BYTES, run_steps
    import carray.layouts.superchunk.filling as filling
    filling.SPILL_BYTES = SPILL_BYTES  # files written a few records at a time
    print("start", flush=True)
    run_steps(sys.argv[1], sys.argv[2], int(sys.argv[3]), lambda k: print(k, flush=True))
    print("done", flush=True)
""")


def trial(tmp_root: str, kind: str, seed: int, delay: float, states: list) -> str:
    """One writer killed after ``delay`` seconds; returns 'ok', or what went wrong."""
    create(tmp_root, kind)
    child = _CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", child, tmp_root, kind, str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "start", proc.stderr.read()
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    reported = [int(x) for x in out.split() if x.isdigit()]
    if "done" not in out and proc.returncode != -signal.SIGKILL:
        return f"writer failed: {err[-500:]}"
    last = max(reported, default=0)
    table = kind.startswith("table")
    try:
        obj = ca.ctable(rootdir=tmp_root, mode="a") if table else \
            ca.open(_path(tmp_root, kind), mode="a")  # recovers
        got = _state(obj, table)
        if table:
            lengths = {len(c) for c in obj.cols.values()}
            if len(lengths) != 1:
                return f"columns of different lengths {sorted(lengths)}"
        obj.close()
        again = ca.ctable(rootdir=tmp_root, mode="r") if table else \
            ca.open(_path(tmp_root, kind), mode="r")
        if not _equal(_state(again, table), got, table):
            return "a second open reads something else"
    except Exception as exc:  # noqa: BLE001 - any error is the finding
        return f"unreadable: {exc!r}"
    for k in (last, last + 1):
        if k < len(states) and _equal(states[k], got, table):
            return "ok"
    if any(_equal(s, got, table) for s in states[:last]):
        return f"flushed rows lost: an older state than step {last}"
    return f"not a flushed state (after step {last})"


def _timing(tmp_path, kind: str) -> float:
    """How long the whole writer takes, so kills land anywhere in it."""
    root = str(tmp_path / "timing")
    create(root, kind)
    t0 = time.perf_counter()
    run_steps(root, kind, 0)
    return time.perf_counter() - t0


@pytest.mark.parametrize("kind", KINDS)
def test_kill9_leaves_a_flushed_state(tmp_path, kind):
    duration = _timing(tmp_path, kind)
    rng = np.random.default_rng(7 if not SOAK else None)
    tally: dict[str, int] = {}
    for i in range(TRIALS):
        seed = int(rng.integers(0, 2**31))
        states = run_steps(None, kind, seed)
        result = trial(str(tmp_path / f"k{i}"), kind, seed, float(rng.random()) * duration,
                       states)
        tally[result] = tally.get(result, 0) + 1
        if result != "ok" and not SOAK:
            pytest.fail(f"trial {i} (seed {seed}): {result}")
    if SOAK:
        print(f"\nkill -9 soak, {kind}: {TRIALS} trials: {tally}")
    assert tally == {"ok": TRIALS}, tally
