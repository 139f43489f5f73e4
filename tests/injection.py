"""Storage failures injected below the stores, in the ``os`` calls that write, sync,
rename and delete: what a full or failing disk does. Shared by the fault, disk-full and
layout tests."""

from __future__ import annotations

import errno
import os

import pytest

from carray.layouts.memory import MemoryLayout

# os functions the stores write, sync, rename and delete through.
_WRITERS = ("write", "pwrite", "fsync", "fdatasync", "replace", "rename", "link", "unlink",
            "ftruncate")


class Faults:
    """Fails the ``at``-th call of the writing ``os`` functions (and of in-memory chunk
    writes) with ``err``; counts the calls either way."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int, err: int = errno.ENOSPC) -> None:
        self.at, self.count, self.err, self.fired = at, 0, err, False
        self._mp = monkeypatch
        for name in _WRITERS:
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))
        monkeypatch.setattr(MemoryLayout, "write_chunk", self._wrap(MemoryLayout.write_chunk))

    def _wrap(self, func):
        def call(*args, **kwargs):
            self.count += 1
            if self.count == self.at:
                self.fired = True
                raise OSError(self.err, os.strerror(self.err))
            return func(*args, **kwargs)
        return call

    def stop(self) -> None:
        self._mp.undo()


# What a full disk refuses; deleting and renaming still work.
SPACE_USERS = ("write", "writev", "pwrite", "fsync")


class DiskFull:
    """From the ``at``-th call of :data:`SPACE_USERS` on (None: never), each fails with
    ENOSPC until :meth:`space_returns`; counts the calls either way."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int | None) -> None:
        self.at, self.count = at, 0
        self._mp = monkeypatch
        for name in SPACE_USERS:
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, func):
        def call(*args, **kwargs):
            self.count += 1
            if self.at is not None and self.count >= self.at:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return func(*args, **kwargs)
        return call

    def space_returns(self) -> None:
        self._mp.undo()
