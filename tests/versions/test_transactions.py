"""Transactions over several datasets are all or nothing, in memory and on disk, and
leave every dataset deciding its versions alone (docs/spec/commit.md [C13]-[C16])."""

from __future__ import annotations

import errno
import gc
import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest
from kill_points import REAL, count_calls, in_child, points, run_driver

import carray as ca
from carray.cli.verify import verify_path
from carray.errors import StorageError, TransactionAbortedError
from carray.stores import LOCAL
from carray.stores.fsspec import FsspecStore
from carray.versions import Repository
from carray.versions.outcomes import TXN_DIR

SOAK = os.environ.get("CARRAY_SOAK") == "1"


def _make(root: str) -> None:
    ca.carray(np.arange(10), chunklen=4, rootdir=f"{root}/a", mode="w").close()
    ca.ctable({"x": np.arange(10), "s": np.array([f"s{i}" for i in range(10)], "U3")},
              rootdir=f"{root}/t", mode="w", chunklen=4).close()


def _state(root: str) -> tuple[list, list]:
    a = ca.open(f"{root}/a", mode="r")
    t = ca.open(f"{root}/t", mode="r")
    out = (a[:].tolist(), t["x"][:].tolist())
    a.close()
    t.close()
    return out


OLD = (list(range(10)), list(range(10)))
NEW = ([*range(10), 100, 101], [99, *range(1, 10), 7])


def _change(a, t) -> None:
    a.append([100, 101])
    t.append({"x": [7], "s": ["new"]})
    t["x"][0] = 99


def test_a_transaction_that_raises_puts_every_handle_back_C16(tmp_path):
    root = str(tmp_path)
    _make(root)
    a, t = ca.open(f"{root}/a", mode="a"), ca.open(f"{root}/t", mode="a")
    with pytest.raises(RuntimeError):
        with ca.transaction(a, t):
            _change(a, t)
            raise RuntimeError("stop")
    assert (a[:].tolist(), t["x"][:].tolist()) == OLD  # in memory
    assert len(a) == 10 and len(t) == 10
    with ca.transaction(a, t, message="other"):  # nothing of the failed one comes along
        a[0] = -1
    a.close()
    t.close()
    del a, t
    gc.collect()
    assert _state(root) == ([-1, *range(1, 10)], list(range(10)))


def test_a_transaction_that_raises_reaches_no_disk_at_exit_C16(tmp_path):
    root = str(tmp_path)
    _make(root)
    script = textwrap.dedent(f"""
        import carray as ca
        a, t = ca.open({root!r} + "/a", mode="a"), ca.open({root!r} + "/t", mode="a")
        try:
            with ca.transaction(a, t):
                a.append([100, 101]); t.append({{"x": [7], "s": ["new"]}})
                raise RuntimeError("stop")
        except RuntimeError:
            pass
        # no close: the interpreter exits with the handles open
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert _state(root) == OLD


def test_a_commit_that_fails_puts_every_handle_back(tmp_path, monkeypatch):
    root = str(tmp_path)
    _make(root)
    a, t = ca.open(f"{root}/a", mode="a"), ca.open(f"{root}/t", mode="a")
    real = os.link

    def refuse(*args, **kwargs):  # the table's manifest cannot be created
        if "/t/versions/" in str(args[1]):
            raise OSError(errno.ENOSPC, "no space left")
        return real(*args, **kwargs)

    monkeypatch.setattr(os, "link", refuse)
    with pytest.raises(StorageError):
        with ca.transaction(a, t):
            _change(a, t)
    monkeypatch.undo()
    assert (a[:].tolist(), t["x"][:].tolist()) == OLD
    a.close()
    t.close()
    assert _state(root) == OLD
    assert not os.listdir(f"{root}/{TXN_DIR}") or all(  # only abort records stay
        b"abort" in open(f"{root}/{TXN_DIR}/{n}", "rb").read()
        for n in os.listdir(f"{root}/{TXN_DIR}"))


def test_every_dataset_decides_its_versions_alone_after_a_transaction_C15(tmp_path):
    root = str(tmp_path)
    _make(root)
    a, t = ca.open(f"{root}/a", mode="a"), ca.open(f"{root}/t", mode="a")
    with ca.transaction(a, t, message="both"):
        _change(a, t)
    a.close()
    t.close()
    assert _state(root) == NEW
    assert os.listdir(f"{root}/{TXN_DIR}") == []  # every member keeps the outcome
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copytree(f"{root}/a", copy / "a")
    shutil.copytree(f"{root}/t", copy / "t")
    assert _state(str(copy)) == NEW
    shutil.rmtree(f"{root}/{TXN_DIR}")
    assert _state(root) == NEW
    for name in ("a", "t"):
        assert verify_path(f"{root}/{name}")[0] == []


def test_a_lost_answer_to_a_conditional_put_is_read_back(monkeypatch):
    """A put that took effect though its answer was lost (an object store's timeout):
    the writer finds its own manifest and record there and goes on."""
    url = f"memory://lost-{uuid.uuid4().hex}"
    ca.carray(np.arange(4), rootdir=f"{url}/a", mode="w").close()
    ca.carray(np.arange(4), rootdir=f"{url}/b", mode="w").close()
    real = FsspecStore.put_if_absent
    lost = []

    def lossy(self, path, data, *, fsync=True):
        done = real(self, path, data, fsync=fsync)
        if path.endswith((".mf", ".ok")) or f"/{TXN_DIR}/" in path:
            lost.append(path)
            raise ConnectionError(errno.ETIMEDOUT, "the answer was lost", path)
        return done

    monkeypatch.setattr(FsspecStore, "put_if_absent", lossy)
    a, b = ca.open(f"{url}/a", mode="a"), ca.open(f"{url}/b", mode="a")
    with ca.transaction(a, b):
        a.append([4])
        b.append([5])
    monkeypatch.undo()
    assert any(p.endswith(".mf") for p in lost) and any(TXN_DIR in p for p in lost)
    assert ca.open(f"{url}/a")[:].tolist() == [0, 1, 2, 3, 4]
    assert ca.open(f"{url}/b")[:].tolist() == [0, 1, 2, 3, 5]


def test_a_transaction_another_writer_aborted_fails_C14(tmp_path, monkeypatch):
    root = str(tmp_path)
    _make(root)
    a, t = ca.open(f"{root}/a", mode="a"), ca.open(f"{root}/t", mode="a")
    from carray.versions import outcomes

    real = outcomes.Record.claim

    def aborted_first(self, outcome, members=(), fsync=True):
        if outcome == outcomes.COMMIT:  # another writer gave up on it just before
            real(self, outcomes.ABORT, fsync=fsync)
        return real(self, outcome, members, fsync)

    monkeypatch.setattr(outcomes.Record, "claim", aborted_first)
    with pytest.raises(TransactionAbortedError):
        with ca.transaction(a, t):
            _change(a, t)
    monkeypatch.undo()
    assert (a[:].tolist(), t["x"][:].tolist()) == OLD
    a.close()
    t.close()
    assert _state(root) == OLD


# -- kill -9 and failures at every storage call -------------------------------------------


def _transaction(root: str) -> None:
    a, t = ca.open(f"{root}/a", mode="a"), ca.open(f"{root}/t", mode="a")
    with ca.transaction(a, t, message="both"):
        _change(a, t)
    a.close()
    t.close()


def _recover(root: str) -> dict:
    """Open each dataset for writing (deciding and rolling forward what a kill left),
    then read them, and copies of them."""
    for name in ("a", "t"):
        ca.open(f"{root}/{name}", mode="a").close()
    state = _state(root)
    copy = root + "-copy"
    os.makedirs(copy)
    for name in ("a", "t"):
        shutil.copytree(f"{root}/{name}", f"{copy}/{name}")
    return {"state": state, "copy": _state(copy),
            "records": sorted(os.listdir(f"{root}/{TXN_DIR}"))
            if os.path.isdir(f"{root}/{TXN_DIR}") else []}


def _total_calls(root: str) -> int:
    count = count_calls()
    _transaction(root)
    return count[0]


def drive_kills(work: str) -> dict:
    """Kill the transaction at (a sample of) its storage calls: every dataset at the old
    state or every one at the new, the same in copies."""
    pristine = os.path.join(work, "pristine")
    os.makedirs(pristine)
    in_child(_make, pristine)
    probe = os.path.join(work, "probe")
    shutil.copytree(pristine, probe)
    total = in_child(_total_calls, probe).result
    rng = np.random.default_rng(5)
    seen = {"old": 0, "new": 0}
    bad = []
    for at, how in points(total, None if SOAK else 40, rng):
        root = os.path.join(work, f"k{at}{how}")
        shutil.copytree(pristine, root)
        killed = in_child(_transaction, root, at=at, how=how)
        got = in_child(_recover, root)
        if got.error:
            bad.append((at, how, got.error[-300:]))
            continue
        state, copy = tuple(map(tuple, got.result["state"])), \
            tuple(map(tuple, got.result["copy"]))
        want = {tuple(map(tuple, OLD)): "old", tuple(map(tuple, NEW)): "new"}
        if state not in want or copy != state or (not killed.killed and state != NEW):
            bad.append((at, how, state, copy))
        else:
            seen[want[state]] += 1
    return {"total": total, "seen": seen, "bad": bad}


def test_a_transaction_killed_at_any_storage_call_is_all_or_nothing_C13_C16(tmp_path):
    out = run_driver("test_transactions", "drive_kills", str(tmp_path))
    assert out["bad"] == []
    assert out["seen"]["old"] and out["seen"]["new"]


def _failing_transaction(root: str, at: int, err: int) -> dict:
    count = [0]

    def wrap(name, func):
        def call(*args, **kwargs):
            count[0] += 1
            if count[0] == at:
                raise OSError(err, os.strerror(err))
            return func(*args, **kwargs)
        return call

    for name in ("write", "pwrite", "fsync", "link", "replace", "rename", "unlink"):
        setattr(os, name, wrap(name, REAL[name]))
    a, t = ca.open(f"{root}/a", mode="a"), ca.open(f"{root}/t", mode="a")
    raised = None
    try:
        with ca.transaction(a, t, message="both"):
            _change(a, t)
    except OSError as exc:
        raised = type(exc).__name__
    for name in ("write", "pwrite", "fsync", "link", "replace", "rename", "unlink"):
        setattr(os, name, REAL[name])
    shown = (a[:].tolist(), t["x"][:].tolist())
    with_error = count[0] >= at
    a.close()
    t.close()
    return {"raised": raised, "shown": shown, "fired": with_error}


def drive_failures(work: str) -> dict:
    pristine = os.path.join(work, "pristine")
    os.makedirs(pristine)
    in_child(_make, pristine)
    probe = os.path.join(work, "probe")
    shutil.copytree(pristine, probe)
    total = in_child(_total_calls, probe).result
    bad = []
    step = 1 if SOAK else 3
    for err in (errno.ENOSPC, errno.EIO):
        for at in range(1, total + 1, step):
            root = os.path.join(work, f"f{err}-{at}")
            shutil.copytree(pristine, root)
            got = in_child(_failing_transaction, root, at, err)
            if got.error:
                bad.append((err, at, got.error[-300:]))
                continue
            after = in_child(_recover, root).result
            shown = tuple(map(tuple, got.result["shown"]))
            state = tuple(map(tuple, after["state"]))
            ok = {tuple(map(tuple, OLD)), tuple(map(tuple, NEW))}
            if state not in ok or shown != state or \
                    (got.result["raised"] is not None and state != tuple(map(tuple, OLD))):
                bad.append((err, at, got.result, after))
    return {"total": total, "bad": bad}


def test_a_transaction_failing_at_any_storage_call_is_all_or_nothing_C16(tmp_path):
    out = run_driver("test_transactions", "drive_failures", str(tmp_path))
    assert out["bad"] == []


def test_undecided_versions_never_count_and_the_next_writer_decides_them_C13(tmp_path):
    """A transaction killed after its manifests but before its record: nothing counts,
    in the datasets or in copies of them, and their next writer drops those manifests."""
    root = str(tmp_path / "d")
    os.makedirs(root)
    _make(root)
    child = in_child(_transaction_until_record, root)
    assert child.killed
    assert _state(root) == OLD
    a_versions = os.listdir(f"{root}/a/versions")
    assert any(n.endswith(".mf") and Repository(LOCAL, f"{root}/a").load(
        int(n[:10])).txn for n in a_versions)  # the undecided manifest is there
    for name in ("a", "t"):
        ca.open(f"{root}/{name}", mode="a").close()
    assert _state(root) == OLD
    assert not any(Repository(LOCAL, f"{root}/a").load(int(n[:10])).txn
                   for n in os.listdir(f"{root}/a/versions") if n.endswith(".mf"))


def _transaction_until_record(root: str) -> None:
    real = os.link

    def die_at_record(src, dst, *args, **kwargs):
        if f"/{TXN_DIR}/" in str(dst):
            os.kill(os.getpid(), 9)
        return real(src, dst, *args, **kwargs)

    os.link = die_at_record
    _transaction(root)


def test_verify_names_a_version_whose_outcome_is_recorded_nowhere_C13(tmp_path):
    root = str(tmp_path / "d")
    os.makedirs(root)
    _make(root)
    assert in_child(_transaction_until_record, root).killed
    problems = [str(p) for p in verify_path(f"{root}/a")[0]]
    assert any("outcome is recorded nowhere" in p for p in problems), problems
    ca.open(f"{root}/a", mode="a").close()  # its next writer decides it: aborted
    assert verify_path(f"{root}/a")[0] == []


def test_a_transaction_that_raises_undoes_an_append_to_an_array_of_fill_values(tmp_path):
    a = ca.carray(np.zeros(10), rootdir=str(tmp_path / "a"), mode="w")
    with pytest.raises(RuntimeError):
        with ca.transaction(a):
            a.append([1.0, 1.0])
            raise RuntimeError("stop")
    assert len(a) == 10
    a.flush()
    assert len(ca.open(str(tmp_path / "a"), mode="r")) == 10
