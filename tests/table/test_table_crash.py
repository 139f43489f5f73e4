"""kill -9 in the middle of a versioned table's flushes and commits.

A writer runs seeded random steps on a table of numbers and variable-length strings:
appends (small ones, and ones of many chunks), edits through the table (row runs and
scattered rows), edits through one column (``t.cols[name][lo:hi] = v``, string columns
too), added and deleted columns, resizes and trims, each step followed by
``flush()``, with and without ``auto_flush``.  The writer is killed (SIGKILL) at a
random call of the ``os`` functions that write, sync, rename and delete
(:mod:`kill_points`): before the call, after it, or halfway through a write.

The same steps replayed in memory give every state the writer may have committed:
the state after the last step whose flush returned, and, within the step it was in,
the states it commits on the way (with ``auto_flush`` every change commits; without
it, only the changes that commit by themselves: added and deleted columns and
resizes).  After the kill:

* a reader (mode 'r') and then a writer (which recovers) see one of those states, the
  reader writing nothing, every column of the table's length;
* every kept version reads as a state the writer committed, and ``carray verify``
  finds no problem;
* the recovered table goes on: a further change and flush land, and the kept versions
  still read as before.

``CARRAY_SOAK=1`` runs ``CARRAY_SOAK_TRIALS`` (default 100) trials per ``auto_flush``
setting and prints the tally; CI runs a few.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from kill_points import HOW, count_calls, in_child, report, run_driver

import carray as ca
from carray.cli.verify import verify_path

SOAK = os.environ.get("CARRAY_SOAK") == "1"
TRIALS = int(os.environ.get("CARRAY_SOAK_TRIALS", "100")) if SOAK else 2
STEPS = 20 if SOAK else 8
CHUNKLEN = 16
BASE = ("i", "f", "s")
RETENTIONS = (1, 3, "all")
# Changes that commit whatever is pending first and then themselves, with or without
# auto_flush (see ctable.addcol, delcol, resize).
SELF_COMMITTING = ("addcol", "delcol", "resize", "trim")
CHANGES = ("append", "append", "set_rows", "set_points", "set_column", "set_column",
           "addcol", "delcol", "resize", "trim")


# -- the writer's steps, the same on disk and in memory ----------------------------------

def _values(name: str, v: np.ndarray) -> np.ndarray:
    """Column ``name``'s values for the numbers ``v``: by the name's first letter, ints
    (i, n), floats (f) or strings of varying length (s, t)."""
    if name[0] == "f":
        return v * 0.5
    if name[0] in "st":
        return np.array([f"{name}{'x' * (abs(int(k)) % 7)}{k}" for k in v], dtype=object)
    return v.astype(np.int64)


def _row(names: list[str], v: int) -> tuple:
    return tuple(_values(name, np.array([v]))[0] for name in names)


def _change(t, rng: np.random.Generator, step: int) -> str:
    """Apply one random change to ``t``; returns its kind."""
    n, names = len(t), t.names
    kind = CHANGES[int(rng.integers(0, len(CHANGES)))]
    extra = [c for c in names if c not in BASE]
    if (n < 10 and kind not in ("append", "resize")) or (kind == "addcol" and len(names) > 5) \
            or (kind == "delcol" and not extra):
        kind = "append"
    if kind == "append":
        size = int(rng.integers(1, 40)) if rng.random() < 0.8 else int(rng.integers(60, 300))
        v = rng.integers(0, 1000, size=size)
        t.append({name: _values(name, v) for name in names})
    elif kind == "set_rows":
        lo = int(rng.integers(0, n - 1))
        t[lo:lo + int(rng.integers(1, 50))] = _row(names, -int(rng.integers(1, 1000)))
    elif kind == "set_points":
        t[rng.integers(0, n, size=4)] = _row(names, -int(rng.integers(1, 1000)))
    elif kind == "set_column":
        name = names[int(rng.integers(0, len(names)))]
        lo = int(rng.integers(0, n - 1))
        t.cols[name][lo:lo + int(rng.integers(1, 40))] = \
            _values(name, np.array([-int(rng.integers(1, 1000))]))[0]
    elif kind == "addcol":
        # A name a dropped column may have had: its directory may still be kept.
        name = f"{'n' if rng.random() < 0.5 else 't'}{step}_{len(names)}"
        t.addcol(_values(name, rng.integers(0, 1000, size=n)), name=name)
    elif kind == "delcol":
        t.delcol(extra[int(rng.integers(0, len(extra)))])
    elif kind == "resize":
        t.resize(max(0, n + int(rng.integers(-40, 30))))
    else:
        t.trim(int(rng.integers(0, min(n, 30) + 1)))
    return kind


def _step(t, rng: np.random.Generator, step: int, boundary=None) -> None:
    """One step's changes (1 to 3); ``boundary(kind)`` is told each change made."""
    for _ in range(int(rng.integers(1, 4))):
        kind = _change(t, rng, step)
        if boundary is not None:
            boundary(kind)


def _state(t) -> tuple:
    """A table's names and rows, comparable with ==."""
    return tuple(t.names), [tuple(r) for r in t[:].tolist()] if len(t) else []


def _table_of(state: tuple):
    """An in-memory table holding ``state``."""
    names, rows = state
    cols = {}
    for j, name in enumerate(names):
        empty = _values(name, np.zeros(0, dtype=np.int64))
        cols[name] = np.array([r[j] for r in rows], dtype=empty.dtype) if rows else empty
    return ca.ctable(cols, chunklen=CHUNKLEN)


def _initial() -> dict:
    v = np.arange(60)
    return {name: _values(name, v) for name in BASE}


def create(root: str, versions) -> None:
    ca.ctable(_initial(), rootdir=root, mode="w", chunklen=CHUNKLEN,
              storage={"versions": versions}).close()


def model(seed: int, auto_flush: bool, steps: int) -> list[list[tuple]]:
    """For each step (0: the start), the states the writer may have committed while in it,
    its last the state its flush commits."""
    t = ca.ctable(_initial(), chunklen=CHUNKLEN, auto_flush=auto_flush)
    rng = np.random.default_rng(seed)
    out = [[_state(t)]]
    for k in range(1, steps + 1):
        states: list[tuple] = []
        before = _state(t)

        def boundary(kind: str, states=states) -> None:
            nonlocal before
            after = _state(t)
            if auto_flush or kind in SELF_COMMITTING:
                states.extend([before, after])
            before = after

        _step(t, rng, k, boundary)
        states.append(_state(t))
        out.append(states)
    return out


# -- in forked children ----------------------------------------------------------------------

def write(root: str, seed: int, auto_flush: bool, steps: int) -> None:
    """The writer: reports each step whose flush returned."""
    t = ca.ctable(rootdir=root, mode="a", auto_flush=auto_flush)
    rng = np.random.default_rng(seed)
    for k in range(1, steps + 1):
        _step(t, rng, k)
        t.flush()
        report(k)


def count_writes(root: str, seed: int, auto_flush: bool, steps: int) -> int:
    count = count_calls()
    write(root, seed, auto_flush, steps)
    return count[0]


def _files(root: str) -> dict:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                out[os.path.join(dirpath, name)] = f.read()
    return out


def _kept(root: str) -> dict:
    """Each kept version's id and state, read as a reader of that version."""
    out = {}
    for v in ca.open(root, mode="r").versions():
        old = ca.open(root, version=v.id)
        out[v.id] = _state(old)
        if v.shape != (len(old),):
            raise AssertionError(f"version {v.id} lists shape {v.shape}, reads {len(old)} rows")
        old.close()
    return out


def check(root: str, seed: int, auto_flush: bool, steps: int, last: int) -> str:
    """'ok', or what is wrong with ``root`` after a writer reported step ``last`` and
    was killed."""
    states = model(seed, auto_flush, steps)
    allowed = [states[last][-1], *(states[last + 1] if last < steps else [])]
    committed = [s for step in states[:last + 2] for s in step]
    files = _files(root)
    reader = ca.ctable(rootdir=root, mode="r")
    seen = _state(reader)
    reader.close()
    if _files(root) != files:
        return "a reader (mode 'r') changed files"
    writer = ca.ctable(rootdir=root, mode="a")  # recovers
    got = _state(writer)
    lengths = {len(c) for c in writer.cols.values()}
    if lengths - {len(writer)}:
        return f"columns of lengths {sorted(lengths)} in a table of {len(writer)} rows"
    writer.close()
    if got != seen:
        return "the reader saw another state than the recovered writer"
    if got not in allowed:
        if any(got == s for step in states[:last] for s in step):
            return f"flushed rows lost: an older state than step {last}'s"
        return f"not a committed state (after step {last})"
    kept = _kept(root)
    for vid, state in kept.items():
        if state not in committed:
            return f"kept version {vid} reads as no committed state"
    problems, _ = verify_path(root)
    if problems:
        return f"carray verify: {problems[:3]}"
    # The recovered table goes on, and what is kept stays as it was.
    names = got[0]
    more = {name: _values(name, np.arange(500, 540)) for name in names}
    expected = _table_of(got)
    for t in (ca.ctable(rootdir=root, mode="a"), expected):
        t.append(more)
        t[0:5] = _row(list(names), -7)
        t.flush()
    t_disk = ca.ctable(rootdir=root, mode="r")
    if _state(t_disk) != _state(expected):
        return "the change after recovery did not land as made"
    t_disk.close()
    still = _kept(root)
    for vid in set(kept) & set(still):
        if kept[vid] != still[vid]:
            return f"kept version {vid} changed after recovery"
    problems, _ = verify_path(root)
    return f"carray verify after recovery: {problems[:3]}" if problems else "ok"


# -- the driver (see kill_points) ---------------------------------------------------------

def drive(work: str, trials: int, steps: int, auto_flush: bool, base_seed: int) -> dict:
    """Run ``trials`` kills; returns the tally and each failure's seed and kill point."""
    tally: dict[str, int] = {}
    failures = []
    rng = np.random.default_rng(base_seed)
    for trial in range(trials):
        seed = int(rng.integers(0, 2**31))
        versions = RETENTIONS[trial % len(RETENTIONS)]
        pristine = os.path.join(work, f"pristine{trial}")
        made = in_child(create, pristine, versions)
        assert made.error is None, made.error
        counting = os.path.join(work, f"count{trial}")
        shutil.copytree(pristine, counting)
        counted = in_child(count_writes, counting, seed, auto_flush, steps)
        shutil.rmtree(counting)
        if counted.error is not None:  # the writer fails without any kill
            result = f"the writer failed unkilled: {counted.error.strip().splitlines()[-1]}"
            tally[result] = tally.get(result, 0) + 1
            failures.append({"seed": seed, "versions": versions, "result": result})
            continue
        at = int(rng.integers(1, counted.result + 1))
        how = HOW[int(rng.integers(0, len(HOW)))]
        root = os.path.join(work, f"t{trial}")
        shutil.copytree(pristine, root)
        shutil.rmtree(pristine)
        killed = in_child(write, root, seed, auto_flush, steps, at=at, how=how)
        last = max(killed.reports, default=0)
        if killed.error is not None:
            result = f"the writer failed: {killed.error.strip().splitlines()[-1]}"
        else:
            checked = in_child(check, root, seed, auto_flush, steps, last)
            result = checked.result if checked.error is None else \
                f"check raised {checked.error.strip().splitlines()[-1]}"
        tally[result] = tally.get(result, 0) + 1
        if result != "ok":
            failures.append({"seed": seed, "versions": versions, "at": at, "how": how,
                             "of": counted.result, "last_step": last, "result": result})
        else:
            shutil.rmtree(root)
    return {"tally": tally, "failures": failures}


@pytest.mark.parametrize("auto_flush", [True, False])
def test_kill9_in_table_flushes_leaves_a_committed_state(tmp_path, auto_flush):
    out = run_driver("test_table_crash", "drive", str(tmp_path), TRIALS, STEPS, auto_flush,
                     11 if not SOAK else int.from_bytes(os.urandom(4), "little"))
    if SOAK:
        print(f"\ntable kill -9 soak, auto_flush={auto_flush}: {TRIALS} trials: "
              f"{out['tally']}")
    assert out["failures"] == [], out["failures"][:5]
