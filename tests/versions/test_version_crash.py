"""kill -9 and failed writes at every step of commit, restore, prune, tag and untag.

Each scenario starts from a dataset with history (an array of several superchunk files,
or a table with a string column), keeping its newest three versions and a tagged older
one, and changes its versions: commits that drop the oldest kept version, shrinks and
rewrites that free, truncate and delete data files, restores, prunes by count and by
age, snapshots and untags, a dropped column.  The writer is killed (:mod:`kill_points`)
at a call of the ``os`` functions that write chunks and index pages, fsync, write
manifests, rename, write the HEAD hint and tags, delete versions and truncate or delete
data files (:func:`test_the_scenarios_reach_every_step` checks they do): every call
with ``CARRAY_SOAK=1``, one drawn at random per scenario in CI; or the call fails with
ENOSPC or EIO and the process goes on.

What the scenario commits is found by running it unkilled with no version ever
dropped (each new version then read back), and what it keeps by running it unkilled.
After the kill or failure:

* the dataset opens at the newest version published (the scenario's, or the one before
  it), the same for a reader before recovery as for the writer that recovers, reading as
  that version was committed;
* every kept version reads exactly as committed, every tag opens the version it names,
  and no version the scenario keeps in the end went missing early;
* ``carray verify`` finds no problem, and a failed write raises
  :class:`carray.errors.StorageError`;
* a writer goes on (a change and a commit), after which the kept versions still read
  the same and ``carray verify`` still finds nothing.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import shutil
import zlib

import numpy as np
import pytest
from kill_points import REAL, WRITERS, count_calls, in_child, points, run_driver

import carray as ca
from carray.cli.verify import verify_path
from carray.errors import StorageError
from carray.stores import LOCAL
from carray.stores.tempnames import parse
from carray.versions.repo import Repository

SOAK = os.environ.get("CARRAY_SOAK") == "1"
# Kill points per scenario (None: every call, the ways of :data:`kill_points.HOW` in turn),
# and calls that fail (None: every call), with ENOSPC or EIO by the call's parity.
POINTS = None if SOAK else 1
FAULT_POINTS = None if SOAK else 1


# -- datasets with history ------------------------------------------------------------------

def _strings(v: np.ndarray) -> np.ndarray:
    return np.array([f"s{'x' * (abs(int(k)) % 5)}{k}" for k in v], dtype=object)


def create(root: str, kind: str) -> None:
    """Four commits, the first tagged 'kept'; versions kept: the newest three and it."""
    if kind == "array":
        a = ca.carray(np.arange(2000), chunklen=100, rootdir=root,
                      storage={"versions": 3, "superchunksize": 4})
        a.snapshot("kept")
        a[0:450] = -1
        a.commit("edit")
        a.append(np.arange(500))
        a.commit("append")
        a.resize(1800)
        a.commit("shrink")
        a.close()
        return
    x = np.arange(300)
    t = ca.ctable({"x": x, "y": x * 0.5, "s": _strings(x)}, rootdir=root, chunklen=32,
                  storage={"versions": 3}, auto_flush=False)
    t.snapshot("kept")
    t[0:40] = (-1, -0.5, "edited")
    t.commit("edit")
    t.append({n: c for n, c in _table_rows(np.arange(100)).items() if n != "z"})
    t.commit("append")
    t.resize(350)
    t.commit("shrink")
    t.close()


def _writer(root: str, kind: str):
    return ca.open(root, mode="a") if kind == "array" else \
        ca.ctable(rootdir=root, mode="a", auto_flush=False)


def _kept_id(root: str) -> str:
    return ca.open(root, tag="kept").version


def _table_rows(v: np.ndarray) -> dict:
    """Rows of every column a scenario's table may have."""
    return {"x": v, "y": v * 0.5, "s": _strings(v), "z": v * 3}


# Each scenario changes the dataset at ``root`` through the public API.
def _commit(root, kind):
    w = _writer(root, kind)
    if kind == "array":
        w[100:700] = -2  # chunks of two superchunk files rewritten
        w.append(np.arange(1000))
    else:
        w[10:200] = (-2, -1.0, "rewritten")
        w.append({n: c for n, c in _table_rows(np.arange(500, 700)).items() if n != "z"})
    w.commit("commit")  # the oldest kept version is dropped, its bytes freed
    w.close()


def _shrink_and_prune(root, kind):
    w = _writer(root, kind)
    w.untag("kept")
    w.resize(150)
    w.commit("shrunk")
    w.prune(keep_last=1)  # superchunk files nothing refers to any more are deleted
    w.close()


def _restore(root, kind):
    w = _writer(root, kind)
    w.restore(_kept_id(root))
    w.close()


def _restore_and_write(root, kind):
    w = _writer(root, kind)
    w.restore(_kept_id(root))
    if kind == "array":
        w[0:250] = 7
    else:
        w[0:50] = (7, 3.5, "after restore")
    w.commit("after restore")
    w.close()


def _prune(root, kind):
    ca.prune(root, keep_last=1)


def _prune_by_age(root, kind):
    ca.prune(root, older_than=dt.timedelta(0))


def _snapshot(root, kind):
    w = _writer(root, kind)
    w[5] = 55 if kind == "array" else (55, 27.5, "tagged")
    w.snapshot("new", "a tagged change")
    w.close()


def _untag(root, kind):
    w = _writer(root, kind)
    w.untag("kept")  # its version is dropped now
    w.close()


def _rewrites(root, kind):
    """Edits of the same chunks, each committed: free space grows until superchunks are
    compacted into new files and the old ones deleted."""
    w = _writer(root, kind)
    for k in range(4):
        if kind == "array":
            w[0:1200] = 100 + k
        else:
            w[0:300] = (100 + k, 0.5, f"round {k}")
        w.commit(f"round {k}")
    w.close()


def _drop_column(root, kind):
    w = _writer(root, kind)
    w.delcol("y")
    w.addcol(np.arange(len(w)) * 3, name="z")
    w.commit("y out, z in")
    w.prune(keep_last=1)  # only the tagged version needs y now
    w.untag("kept")
    w.prune(keep_last=1)  # and y's directory goes
    w.close()


SCENARIOS = {
    "commit": _commit, "shrink_and_prune": _shrink_and_prune, "restore": _restore,
    "restore_and_write": _restore_and_write, "prune": _prune, "prune_by_age": _prune_by_age,
    "snapshot": _snapshot, "untag": _untag, "rewrites": _rewrites,
    "drop_column": _drop_column,
}
CASES = [(kind, name) for kind in ("array", "table") for name in SCENARIOS
         if not (kind == "array" and name == "drop_column")]


# -- what a dataset reads as --------------------------------------------------------------

def _digest(obj) -> str:
    """A version's contents as one string: length, column names and a hash of values."""
    h = hashlib.sha1()
    if isinstance(obj, ca.ctable):
        h.update(repr(obj.names).encode())
        rows = obj[:] if len(obj) else None
        for name in obj.names:
            col = rows[name] if rows is not None else np.zeros(0)
            h.update(repr(col.tolist()).encode() if col.dtype == object else col.tobytes())
        return f"{len(obj)} rows {obj.names} {h.hexdigest()[:12]}"
    h.update(obj[:].tobytes())
    return f"{len(obj)} items {h.hexdigest()[:12]}"


def versions_read(root: str) -> dict:
    """seq -> digest of every kept version, each read by a reader of that version."""
    out = {}
    for v in ca.open(root, mode="r").versions():
        old = ca.open(root, version=v.id)
        out[str(int(v.id[:8], 16))] = _digest(old)
        old.close()
    return out


def _head_seq(root: str) -> str:
    return str(int(ca.open(root, mode="r").version[:8], 16))


# -- in forked children ----------------------------------------------------------------------

def reference(root: str, kind: str, scenario: str, keep: bool) -> dict:
    """Run the scenario unkilled: with ``keep``, no version is ever dropped (the drop
    always finds it held), to read every version it publishes; else as it is, to see
    what it keeps and count its storage calls."""
    if keep:
        Repository.drop = lambda self, seq, superseded: False
    count = count_calls()
    SCENARIOS[scenario](root, kind)
    calls = count[0]
    return {"versions": versions_read(root), "head": _head_seq(root), "calls": calls}


class _Faults:
    """The ``at``-th call of the writing ``os`` functions fails with ``err``."""

    def __init__(self, at: int, err: int) -> None:
        self.count, self.fired = 0, False
        for name in WRITERS:
            setattr(os, name, self._wrap(REAL[name], at, err))

    def _wrap(self, func, at, err):
        def call(*args, **kwargs):
            self.count += 1
            if self.count == at:
                self.fired = True
                raise OSError(err, os.strerror(err))
            return func(*args, **kwargs)
        return call

    @staticmethod
    def stop() -> None:
        for name in WRITERS:
            setattr(os, name, REAL[name])


def with_fault(root: str, kind: str, scenario: str, at: int, err: int) -> str:
    """Run the scenario with its ``at``-th write failing; what it raised ('' if
    nothing)."""
    faults = _Faults(at, err)
    try:
        SCENARIOS[scenario](root, kind)
    except StorageError as exc:
        return f"StorageError {exc.errno}"
    except Exception as exc:  # noqa: BLE001 - the check reports it
        return f"raised {exc!r}"
    finally:
        faults.stop()
    return ""


def check(root: str, kind: str, before: dict, published: dict, kept: dict) -> str:
    """'ok' or what is wrong with ``root`` after a kill or a failure (see the module
    doc).  ``before``: the dataset's versions before the scenario; ``published``: what
    the scenario publishes, no version dropped; ``kept``: what it keeps, unkilled."""
    committed = {**before["versions"], **published["versions"]}
    newest = str(max(Repository(LOCAL, root).seqs()))  # published: renamed into place
    reader = ca.open(root, mode="r")
    seen = _digest(reader)
    reader.close()
    writer = _writer(root, kind)  # recovers
    head = str(int(writer.version[:8], 16))
    now = _digest(writer)
    writer.close()
    if head not in committed or int(head) < int(before["head"]):
        return f"opens at version seq {head}, which was never committed"
    if head != newest:
        return f"opens at version seq {head}, not at the newest published, {newest}"
    if seen != now:
        return f"a reader before recovery read {seen}, the writer after it {now}"
    if committed[head] != now:
        return f"the newest version (seq {head}) reads {now}, committed as {committed[head]}"
    found = versions_read(root)
    for seq, digest in found.items():
        if committed.get(seq) != digest:
            return f"kept version seq {seq} reads {digest}, committed as {committed.get(seq)}"
    missing = [s for s in kept["versions"] if int(s) <= int(head) and s not in found]
    if missing:
        return f"versions {missing} went missing (the scenario keeps them)"
    for name, vid in Repository(LOCAL, root).tags().items():
        try:
            tagged = _digest(ca.open(root, tag=name))
        except Exception as exc:  # noqa: BLE001 - the finding
            return f"tag {name!r} ({vid}) does not open: {exc!r}"
        if tagged != committed.get(str(int(vid[:8], 16))):
            return f"tag {name!r} reads {tagged}"
    problems, _ = verify_path(root)
    if problems:
        return f"carray verify: {problems[:3]}"
    # A writer goes on; what is kept stays as it was.
    writer = _writer(root, kind)
    if kind == "array":
        writer[0:300] = -9
        writer.append(np.arange(150))
    else:
        writer[0:20] = tuple(_table_rows(np.array([-9]))[n][0] for n in writer.names)
        writer.append({n: _table_rows(np.arange(60))[n] for n in writer.names})
    expected = _digest(writer)
    writer.commit("after recovery")
    writer.close()
    if _digest(ca.open(root, mode="r")) != expected:
        return "the commit after recovery did not land as made"
    again = versions_read(root)
    for seq in set(found) & set(again):
        if found[seq] != again[seq]:
            return f"kept version seq {seq} changed after recovery: {again[seq]}"
    problems, _ = verify_path(root)
    return f"carray verify after recovery: {problems[:3]}" if problems else "ok"


# -- the driver ------------------------------------------------------------------------------


def drive(work: str, kind: str) -> dict:
    """Every scenario of ``kind``: the tally of each, and each failure's kill or fault."""
    out = {}
    for scenario in SCENARIOS:
        if (kind, scenario) in CASES:
            out[scenario] = _drive_one(os.path.join(work, scenario), kind, scenario)
    return out


def _drive_one(work: str, kind: str, scenario: str) -> dict:
    rng = np.random.default_rng(zlib.crc32(f"{kind} {scenario}".encode()))
    pristine = os.path.join(work, "pristine")
    made = in_child(create, pristine, kind)
    assert made.error is None, made.error
    before = in_child(lambda: {"versions": versions_read(pristine),
                               "head": _head_seq(pristine)})
    assert before.error is None, before.error

    def unkilled(keep: bool) -> dict:
        root = os.path.join(work, "reference")
        shutil.copytree(pristine, root)
        out = in_child(reference, root, kind, scenario, keep)
        shutil.rmtree(root)
        assert out.error is None, out.error
        return out.result

    published, kept = unkilled(True), unkilled(False)
    total = kept["calls"]
    tally: dict[str, int] = {}
    failures = []

    def judge(root: str, what: dict) -> None:
        checked = in_child(check, root, kind, before.result, published, kept)
        result = checked.result if checked.error is None else \
            f"check raised {checked.error.strip().splitlines()[-1]}"
        tally[result] = tally.get(result, 0) + 1
        if result != "ok":
            failures.append({**what, "of": total, "result": result})
        else:
            shutil.rmtree(root)

    for at, how in points(total, POINTS, rng):
        root = os.path.join(work, f"k{at}{how}")
        shutil.copytree(pristine, root)
        killed = in_child(SCENARIOS[scenario], root, kind, at=at, how=how)
        if killed.error is not None:
            tally["the scenario failed"] = tally.get("the scenario failed", 0) + 1
            failures.append({"at": at, "how": how, "result": killed.error[-300:]})
            continue
        judge(root, {"kill at": at, "how": how})
    for at, _ in points(total, FAULT_POINTS, rng):
        for err in (errno.ENOSPC, errno.EIO)[at % 2:at % 2 + 1]:
            root = os.path.join(work, f"f{at}{err}")
            shutil.copytree(pristine, root)
            faulted = in_child(with_fault, root, kind, scenario, at, err)
            if faulted.error is not None or faulted.result.startswith("raised"):
                what = faulted.error or faulted.result
                tally["not a StorageError"] = tally.get("not a StorageError", 0) + 1
                failures.append({"fault at": at, "errno": err, "result": what[-300:]})
                continue
            judge(root, {"fault at": at, "errno": err})
    shutil.rmtree(pristine)
    return {"tally": tally, "failures": failures, "calls": total}


@pytest.mark.parametrize("kind", ["array", "table"])
def test_a_crash_in_a_version_change_keeps_every_committed_version(tmp_path, kind):
    # docs/spec/commit.md [C8] [C10]
    out = run_driver("test_version_crash", "drive", str(tmp_path), kind)
    if SOAK:
        for scenario, got in out.items():
            print(f"\nversion crash soak, {kind} {scenario}: {got['calls']} calls: "
                  f"{got['tally']}")
    failed = {scenario: got["failures"][:3] for scenario, got in out.items()
              if got["failures"]}
    assert failed == {}, failed


# -- without a crash ---------------------------------------------------------------------

def test_a_column_name_used_again_leaves_kept_versions_whole(tmp_path):
    """A dropped column's directory stays while a kept version has it: a new column of
    the same name must not write over it."""
    root = str(tmp_path / "t")
    x = np.arange(100)
    t = ca.ctable({"x": x, "n": x * 10}, rootdir=root, chunklen=16, storage={"versions": 3})
    old = t.snapshot("first-n")
    t.delcol("n")
    t.flush()
    t.addcol(-x, name="n")
    t.flush()
    t.close()
    assert verify_path(root)[0] == []
    assert ca.open(root, version=old)["n"][:].tolist() == (x * 10).tolist()
    assert ca.open(root, mode="r")["n"][:].tolist() == (-x).tolist()


def _tag_write_call(root: str) -> int:
    """The storage call (counting from 1) that writes the tag of :func:`_snapshot`."""
    count, found = [0], []

    def wrap(name, func):
        def call(*args, **kwargs):
            count[0] += 1
            if not found and name == "write" and \
                    f"{os.sep}tags{os.sep}" in os.readlink(f"/proc/self/fd/{args[0]}"):
                found.append(count[0])
            return func(*args, **kwargs)
        return call

    for name in WRITERS:
        setattr(os, name, wrap(name, REAL[name]))
    _snapshot(root, "array")
    return found[0]


def _tags_after_recovery(root: str) -> dict:
    _writer(root, "array").close()  # recovers
    return {"tags": sorted(Repository(LOCAL, root).tags()), "problems": verify_path(root)[0]}


def kill_while_tagging(work: str) -> dict:
    """A snapshot killed as it writes its tag: the tags and problems after recovery."""
    pristine, probe, root = (os.path.join(work, n) for n in ("pristine", "probe", "killed"))
    in_child(create, pristine, "array")
    shutil.copytree(pristine, probe)
    at = in_child(_tag_write_call, probe).result
    shutil.copytree(pristine, root)
    killed = in_child(_snapshot, root, "array", at=at, how="before")
    assert killed.killed, killed.error
    return in_child(_tags_after_recovery, root).result


def test_a_kill_while_tagging_leaves_no_false_tag(tmp_path):
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc (Linux) to name the file behind a descriptor")
    out = run_driver("test_version_crash", "kill_while_tagging", str(tmp_path))
    assert out == {"tags": ["kept"], "problems": []}


# -- the scenarios reach every step --------------------------------------------------------

def _step_of(name: str, args: tuple) -> str | None:
    """What a storage call does, named by the file it touches."""
    target = args[0]
    if isinstance(target, int):
        try:
            target = os.readlink(f"/proc/self/fd/{target}")
        except OSError:
            return None
    target = os.fspath(target)
    base = os.path.basename(target)
    if name in ("replace", "rename", "link"):
        return "rename into place"
    if name == "rmdir":
        return "rmdir directory"
    found = parse(os.path.basename(target))  # a file written whole, before its rename
    if found is not None:
        target = os.path.join(os.path.dirname(target), found.target)
    base = os.path.basename(target)
    where = "chunks" if f"{os.sep}data{os.sep}" in target else \
        "index pages" if base.endswith(".ix") else "manifest" if base.endswith(".mf") else \
        "HEAD" if base == "HEAD" else "tag" if f"{os.sep}tags{os.sep}" in target else \
        "directory" if os.path.isdir(target) else "other"
    return f"{name} {where}"


STEPS = {"pwrite chunks", "fsync chunks", "write index pages", "write manifest",
         "fsync manifest", "rename into place", "pwrite HEAD", "write tag", "unlink manifest",
         "unlink index pages", "ftruncate chunks", "unlink chunks", "rmdir directory",
         "fsync directory", "unlink tag"}


def test_the_scenarios_reach_every_step(tmp_path, monkeypatch):
    """The kill points above land in every step of a version change (local files)."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc (Linux) to name the file behind a descriptor")
    seen: set[str] = set()

    def wrap(name, func):
        def call(*args, **kwargs):
            step = _step_of(name, args)
            if step:
                seen.add(step)
            return func(*args, **kwargs)
        return call

    for kind, scenario in CASES:
        root = str(tmp_path / f"{kind}-{scenario}")
        create(root, kind)
        for name in WRITERS:
            monkeypatch.setattr(os, name, wrap(name, REAL[name]))
        SCENARIOS[scenario](root, kind)
        monkeypatch.undo()
    assert STEPS <= seen, sorted(STEPS - seen)
