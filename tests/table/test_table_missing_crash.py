"""kill -9 while a table with missing values changes: appends of missing values (columns
gaining validity on the way), a missing value set, a resize.  After the kill a reader and
then a writer see one of the states the writer committed, and ``carray verify`` finds
no problem (``CARRAY_SOAK=1``: every storage call, each way; CI: a few at random)."""

from __future__ import annotations

import os
import shutil

import numpy as np
from kill_points import count_calls, in_child, points, run_driver

import carray as ca

SOAK = os.environ.get("CARRAY_SOAK") == "1"
LIMIT = None if SOAK else 3


def _create(root: str) -> ca.ctable:
    return ca.ctable({"a": np.arange(4), "x": np.ma.masked_array([1.0, 2, 3, 4], mask=[0, 1, 0, 0]),
                      "s": np.array(["p", "q", "r", "s"], dtype=object)}, rootdir=root)


def _steps(t: ca.ctable) -> None:
    t.append((10, None, "n"))
    t.flush()
    t.append((None, 1.5, None))  # 'a' and 's' gain validity first
    t.flush()
    t.cols["x"][0] = None
    t.flush()
    t.resize(9)
    t.append({"a": [1, 2], "x": [None, 2.0], "s": ["u", None]})
    t.flush()


def _rows(t: ca.ctable) -> list:
    return [list(r) for r in t]


def _states() -> list:
    """Every state the writer commits, replayed in memory."""
    t = ca.ctable({"a": np.arange(4), "x": np.ma.masked_array([1.0, 2, 3, 4], mask=[0, 1, 0, 0]),
                   "s": np.array(["p", "q", "r", "s"], dtype=object)})
    states = [_rows(t)]
    real_flush = t.flush

    def flush(*args, **kwargs):
        real_flush(*args, **kwargs)
        states.append(_rows(t))

    t.flush = flush  # type: ignore[method-assign]
    _steps(t)
    states.append(_rows(t))
    return states


def _write(root: str, counting: bool = False) -> int:
    t = ca.ctable(rootdir=root, mode="a")
    count = count_calls() if counting else [0]
    _steps(t)
    t.close()
    return count[0]


def _kill_and_check(root: str) -> dict:
    from carray.core.problems import Problem
    from carray.registry import verify

    with ca.ctable(rootdir=root, mode="r") as r:
        seen = _rows(r)
        lengths = {len(c) for c in r.cols.values()} | {len(r)}
    with ca.ctable(rootdir=root, mode="a") as w:
        recovered = _rows(w)
    problems = [str(f) for f in verify(root) if isinstance(f, Problem)]
    return {"seen": seen, "recovered": recovered, "lengths": len(lengths),
            "problems": problems}


def driver(base: str, seed: int) -> list:
    template = os.path.join(base, "template")
    made = in_child(lambda: _create(template).close())
    assert made.error is None, made.error
    counted = os.path.join(base, "counted")
    shutil.copytree(template, counted)
    total = in_child(_write, counted, True)
    assert total.error is None, total.error
    out = []
    rng = np.random.default_rng(seed)
    for k, (at, how) in enumerate(points(total.result, LIMIT, rng)):
        root = os.path.join(base, f"trial{k}")
        shutil.copytree(template, root)
        killed = in_child(_write, root, at=at, how=how)
        checked = in_child(_kill_and_check, root)
        out.append({"at": at, "how": how, "killed": killed.killed, "error": checked.error,
                    "result": checked.result})
        shutil.rmtree(root)
    return out


def test_killed_writer_of_missing_values_leaves_a_committed_state(tmp_path):
    states = [[[None if v is None else v for v in row] for row in s] for s in _states()]
    trials = run_driver("test_table_missing_crash", "driver", str(tmp_path), 26)
    assert trials and any(t["killed"] for t in trials)
    for trial in trials:
        assert trial["error"] is None, trial
        result = trial["result"]
        assert result["seen"] in states, trial
        assert result["recovered"] in states and result["lengths"] == 1, trial
        assert not result["problems"], trial
