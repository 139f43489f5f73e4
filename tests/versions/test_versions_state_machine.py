"""A model of versions, and arrays, tables and groups driven against it step by step:
appends, edits, resizes, commits, transactions (some raising), tags, untags, prunes,
restores, copies of the directory and reopens, on disk, in ``memory://`` and on moto's
S3 server (fewer steps there; more under CARRAY_SOAK=1). After every step the handle shows the model's pending
state and every kept version reads back as it was committed
(docs/spec/commit.md [C10] [C12] [C15] [C16] [C17] [C18])."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import carray as ca
from carray.errors import TagExistsError

SOAK = os.environ.get("CARRAY_SOAK") == "1"
TAGS = ["t1", "t2", "t3"]


class Oops(Exception):
    """Raised inside a transaction that must leave nothing behind."""


class Model:
    """Kept versions (id, values), newest last; tags; what the handle shows."""

    def __init__(self, values: np.ndarray, vid: str) -> None:
        self.versions: list[tuple[str, np.ndarray]] = [(vid, values.copy())]
        self.tags: dict[str, str] = {}
        self.pending = values.copy()

    @property
    def head(self) -> np.ndarray:
        return self.versions[-1][1]

    def committed(self, vid: str) -> None:
        if vid != self.versions[-1][0]:
            self.versions.append((vid, self.pending.copy()))

    def prune(self, keep_last: int) -> int:
        tagged = set(self.tags.values())
        keep = {v for v, _ in self.versions[-keep_last:]} | tagged | {self.versions[-1][0]}
        before = len(self.versions)
        self.versions = [(v, x) for v, x in self.versions if v in keep]
        return before - len(self.versions)


class Versions(RuleBasedStateMachine):
    kind = "array"
    where = "disk"
    s3: Any = None  # the session's S3 endpoint, for where == "s3"

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp()
        name = f"sm-{uuid.uuid4().hex}"
        self.url = os.path.join(self.tmp, "d") if self.where == "disk" else \
            self.s3.url(name) if self.where == "s3" else f"memory://{name}"
        self.options = self.s3.storage_options if self.where == "s3" else None
        self.copies = 0

    def teardown(self) -> None:
        try:
            self.h.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the container, whatever its kind -------------------------------------------------

    def _create(self, values: np.ndarray) -> None:
        keep = {"versions": "all", **self._grace()}
        if self.kind == "array":
            ca.carray(values, chunklen=4, rootdir=self.url, mode="w", storage=keep,
                      storage_options=self.options).close()
        elif self.kind == "table":
            ca.ctable({"x": values}, rootdir=self.url, mode="w", chunklen=4,
                      storage=keep, storage_options=self.options).close()
        else:
            g = ca.group(self.url, mode="w", storage=keep, storage_options=self.options)
            g.create_array("x", values, chunks=(4,))
            g.close()

    def _grace(self) -> dict:
        # On object stores a replaced version stays for a grace period: none here, so
        # that prune drops what the model drops.
        return {} if self.where == "disk" else {"grace": 0}

    def _open(self, url: str | None = None, **at):
        options = None if url else self.options
        if self.kind == "group":
            return ca.open_group(url or self.url, mode="r" if at else "a",
                                 storage=self._grace(), storage_options=options, **at)
        return ca.open(url or self.url, mode="r" if at else "a", storage=self._grace(),
                       storage_options=options, **at)

    def _array(self, h):
        return h if self.kind == "array" else h["x"]

    def _values(self, h) -> np.ndarray:
        return self._array(h)[:]

    def _append(self, rows: list[int]) -> None:
        if self.kind == "table":
            self.h.append({"x": rows})
        else:
            self._array(self.h).append(rows)

    def _resize(self, n: int) -> None:
        if self.kind == "table":
            self.h.resize(n)
        else:
            self._array(self.h).resize(n)

    def _version(self) -> str:
        return self.h.version

    # -- rules ----------------------------------------------------------------------------

    @initialize(values=st.lists(st.integers(-9, 9), min_size=0, max_size=10))
    def start(self, values):
        arr = np.array(values, dtype="i8")
        self._create(arr)
        self.h = self._open()
        # Making it may take more than one version (an empty one, then the data).
        self.h.prune(keep_last=1)
        self.model = Model(arr, self._version())

    @rule(rows=st.lists(st.integers(-9, 9), min_size=1, max_size=6))
    def append(self, rows):
        self._append(rows)
        self.model.pending = np.r_[self.model.pending, np.array(rows, dtype="i8")]

    @precondition(lambda self: len(self.model.pending))
    @rule(data=st.data(), value=st.integers(-9, 9))
    def edit(self, data, value):
        i = data.draw(st.integers(0, len(self.model.pending) - 1))
        self._array(self.h)[i] = value
        self.model.pending[i] = value

    @rule(n=st.integers(0, 14))
    def resize(self, n):
        self._resize(n)
        old = self.model.pending
        self.model.pending = np.r_[old[:n], np.zeros(max(0, n - len(old)), "i8")]

    @rule()
    def commit(self):
        vid = self.h.commit()
        self.model.committed(vid)

    @rule(rows=st.lists(st.integers(-9, 9), min_size=1, max_size=3), fail=st.booleans())
    def transaction(self, rows, fail):
        target = self.h if self.kind != "group" else self.h
        try:
            if self.kind == "group":
                with self.h.transaction():
                    self._append(rows)
                    if fail:
                        raise Oops
            else:
                with ca.transaction(target):
                    self._append(rows)
                    if fail:
                        raise Oops
        except Oops:
            self.model.pending = self.model.head.copy()  # back to the newest version
            return
        self.model.pending = np.r_[self.model.pending, np.array(rows, dtype="i8")]
        self.model.committed(self._version())

    @rule(tag=st.sampled_from(TAGS), move=st.booleans())
    def snapshot(self, tag, move):
        held = self.model.tags.get(tag)
        try:
            vid = self.h.snapshot(tag, move=move)
        except TagExistsError:
            self.model.committed(self._version())  # the commit came first
            assert held is not None and held != self._version() and not move
            return
        self.model.committed(vid)
        self.model.tags[tag] = vid

    @precondition(lambda self: self.model.tags)
    @rule(data=st.data())
    def untag(self, data):
        tag = data.draw(st.sampled_from(sorted(self.model.tags)))
        self.h.untag(tag)
        del self.model.tags[tag]

    @rule(keep=st.integers(1, 4))
    def prune(self, keep):
        self.commit()
        dropped = self.h.prune(keep_last=keep)
        assert dropped == self.model.prune(keep)

    @rule(data=st.data())
    def restore(self, data):
        self.commit()
        vid, values = data.draw(st.sampled_from(self.model.versions))
        new = self.h.restore(vid)
        self.model.pending = values.copy()
        self.model.committed(new)

    @rule()
    def reopen(self):
        self.h.close()  # closing commits what is pending
        self.h = self._open()
        self.model.committed(self._version())

    @precondition(lambda self: self.where == "disk")
    @rule()
    def copy_directory(self):
        self.commit()
        self.copies += 1
        target = os.path.join(self.tmp, f"copy{self.copies}")
        shutil.copytree(self.url, target)
        copy = self._open(target, version=self.model.versions[-1][0])
        assert self._values(copy).tolist() == self.model.head.tolist()
        assert {v.id for v in copy.versions()} == {v for v, _ in self.model.versions}
        copy.close()

    # -- what must always hold ------------------------------------------------------------

    @invariant()
    def shows_pending(self):
        if hasattr(self, "h"):
            assert self._values(self.h).tolist() == self.model.pending.tolist()

    @invariant()
    def kept_versions_read_back(self):
        if not hasattr(self, "h"):
            return
        listed = [v.id for v in self.h.versions()]
        assert listed == [v for v, _ in reversed(self.model.versions)]
        for vid, values in self.model.versions[-3:]:
            at = self._open(version=vid)
            assert self._values(at).tolist() == values.tolist()
            at.close()


def _settings(where: str) -> settings:
    if where == "s3":  # every step is requests to a server: fewer of them
        return settings(max_examples=20 if SOAK else 2, stateful_step_count=20 if SOAK else 10,
                        deadline=None, suppress_health_check=list(HealthCheck))
    return settings(max_examples=100 if SOAK else 10, stateful_step_count=30 if SOAK else 15,
                    deadline=None, suppress_health_check=list(HealthCheck))


def _machine(kind: str, where: str, s3: Any = None) -> type[Versions]:
    return type(f"Versions_{kind}_{where}", (Versions,),
                {"kind": kind, "where": where, "s3": s3})


@pytest.mark.parametrize("where", ["disk", "memory", "s3"])
@pytest.mark.parametrize("kind", ["array", "table", "group"])
def test_versions_follow_the_model(kind, where, request):
    s3 = request.getfixturevalue("s3") if where == "s3" else None
    machine = _machine(kind, where, s3)
    machine.TestCase.settings = _settings(where)
    machine.TestCase().runTest()
