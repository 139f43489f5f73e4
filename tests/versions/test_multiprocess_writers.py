"""N writer processes x M commits on one dataset, on this machine (writers take turns
through the lock) and on an S3 endpoint (moto on 127.0.0.1: nothing is locked, manifests
are created only if absent, and the losers rebase): every commit that returned an id is
in ``versions()`` and reads back (docs/spec/commit.md [C1] [C6] [C9] [C10] [C11])."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid

import numpy as np
import pytest

import carray as ca
from carray.testing import s3_server

SOAK = os.environ.get("CARRAY_SOAK") == "1"
WRITERS, COMMITS = (4, 25) if SOAK else (3, 6)

_WRITER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import carray as ca
    from carray.errors import ConflictError, LockError

    kind, url, options, me, commits, hold = sys.argv[1:7]
    options = json.loads(options) or None
    me, commits, hold = int(me), int(commits), hold == "hold"
    done = []

    def open_it():
        while True:
            try:
                return ca.open(url, mode="a", storage_options=options)
            except LockError:  # another process writes it (this machine): wait
                time.sleep(0.01)

    h = open_it() if hold else None
    for i in range(commits):
        c = h if hold else open_it()
        value = me * 1000 + i
        if kind == "array":
            c.append([value, value])
        elif kind == "table":
            c.append({"w": [me], "i": [i]})
        elif kind == "edits":
            c[me * 8:(me + 1) * 8] = value  # a chunk of its own
        else:  # a group: appends to one shared array and one of its own
            c["shared"].append([value])
            c[f"own{me}"].append([value])
        while True:
            try:
                done.append(c.commit())
                break
            except ConflictError:
                c.refresh()
        if not hold:
            c.close()
    if hold:
        h.close()
    print(json.dumps(done))
""")


def _make(kind: str, url: str, options: dict | None) -> None:
    keep = {"versions": "all"}
    if kind == "array":
        ca.carray(np.zeros(0, dtype="i8"), chunklen=8, rootdir=url, mode="w",
                  storage=keep, storage_options=options).close()
    elif kind == "edits":
        ca.carray(np.zeros(8 * WRITERS, dtype="i8"), chunklen=8, rootdir=url, mode="w",
                  storage=keep, storage_options=options).close()
    elif kind == "table":
        ca.ctable({"w": np.zeros(0, "i8"), "i": np.zeros(0, "i8")}, rootdir=url, mode="w",
                  chunklen=8, storage=keep, storage_options=options).close()
    else:
        g = ca.group(url, mode="w", storage=keep, storage_options=options)
        g.create_array("shared", np.zeros(0, "i8"), chunks=(8,))
        for me in range(WRITERS):
            g.create_array(f"own{me}", np.zeros(0, "i8"), chunks=(8,))
        g.close()


def _run(kind: str, url: str, options: dict | None, hold: bool) -> list[list[str]]:
    import json

    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, kind, url, json.dumps(options),
                               str(me), str(COMMITS), "hold" if hold else "turns"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for me in range(WRITERS)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def _check(kind: str, url: str, options: dict | None, ids: list[list[str]]) -> None:
    opened = ca.open(url, mode="r", storage_options=options)
    kept = {v.id for v in opened.versions()}
    returned = [vid for mine in ids for vid in mine]
    assert len(set(returned)) == WRITERS * COMMITS  # every commit made a version
    assert set(returned) <= kept
    if kind == "array":
        values = opened[:]
        assert sorted(values.tolist()) == sorted(
            v for me in range(WRITERS) for i in range(COMMITS) for v in [me * 1000 + i] * 2)
    elif kind == "edits":
        got = opened[:].reshape(WRITERS, 8)
        assert got.tolist() == [[me * 1000 + COMMITS - 1] * 8 for me in range(WRITERS)]
    elif kind == "table":
        rows = sorted(zip(opened["w"][:].tolist(), opened["i"][:].tolist(), strict=True))
        assert rows == [(me, i) for me in range(WRITERS) for i in range(COMMITS)]
    else:
        shared = sorted(opened["shared"][:].tolist())
        assert shared == sorted(me * 1000 + i for me in range(WRITERS)
                                for i in range(COMMITS))
        for me in range(WRITERS):
            assert opened[f"own{me}"][:].tolist() == [me * 1000 + i for i in range(COMMITS)]
    # Each writer's versions read back with its own commits in order.
    if kind == "array":
        for mine in ids:
            seen = 0
            for vid in mine:
                at = ca.open(url, mode="r", version=vid, storage_options=options)
                assert len(at) > seen
                seen = len(at)


@pytest.fixture(scope="module")
def s3():
    with s3_server(process=True) as endpoint:
        yield endpoint


@pytest.mark.parametrize("kind", ["array", "edits", "table", "group"])
def test_writers_on_s3_never_lose_a_commit(s3, kind):
    url = f"s3://{s3.bucket}/writers-{kind}-{uuid.uuid4().hex[:8]}"
    _make(kind, url, s3.storage_options)
    ids = _run(kind, url, s3.storage_options, hold=True)
    _check(kind, url, s3.storage_options, ids)


@pytest.mark.parametrize("kind", ["array", "table", "group"])
def test_writers_on_this_machine_take_turns_and_never_lose_a_commit(tmp_path, kind):
    url = str(tmp_path / kind)
    _make(kind, url, None)
    ids = _run(kind, url, None, hold=False)
    _check(kind, url, None, ids)
