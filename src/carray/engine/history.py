"""An array's versions as its engine offers them: commit, tag, restore, refresh, prune.

Only carray's own layout keeps versions (:mod:`carray.versions`); asking another
layout raises :class:`carray.errors.VersionsUnsupportedError`.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from carray.versions.repo import check_tag

if TYPE_CHECKING:
    from carray.engine.core import ArrayEngine
    from carray.layouts.base import Layout


def when(older_than: Any) -> float | None:
    if older_than is None:
        return None
    if isinstance(older_than, _dt.datetime):
        if older_than.tzinfo is None:
            older_than = older_than.astimezone()
        return float(older_than.timestamp())
    if isinstance(older_than, _dt.timedelta):
        return (_dt.datetime.now(_dt.UTC) - older_than).timestamp()
    raise TypeError(f"older_than must be a datetime or a timedelta, got {older_than!r}")


class History:
    """The versions of one engine's array (see the module doc)."""

    def __init__(self, engine: ArrayEngine, layout: Layout) -> None:
        self._engine, self._layout = engine, layout

    def _require(self) -> None:
        if not self._layout.versioned:
            self._layout.versions()  # raises VersionsUnsupportedError, naming the layout

    @property
    def dataset(self) -> Any:
        """The versioned dataset the array commits to."""
        return self._layout.versioned_dataset()

    def commit(self, message: str | None = None) -> str:
        """Flush and return the id of the newest version (a new one when anything
        changed)."""
        self._require()
        self._engine.check_writable()
        if self._layout.in_memory:  # a version in memory: the chunks as they are now
            self._engine.store_tail()
            return str(self._layout.record_version(  # type: ignore[attr-defined]
                self._engine.meta(), self._engine.cbytes, message))
        self._engine.flush(message)
        vid = self._layout.version_id
        assert vid is not None
        return vid

    def versions(self) -> list[Any]:
        self._require()
        return self._layout.versions()

    def snapshot(self, tag: str, message: str | None = None) -> str:
        """Commit, then name the newest version ``tag``; returns its id."""
        check_tag(tag)
        vid = self.commit(message)
        self._layout.tag(tag, vid)
        return vid

    def untag(self, tag: str) -> None:
        self._require()
        self._layout.untag(tag)

    def restore(self, version: str) -> str:
        """Commit what is pending, then make ``version`` the newest again (a new version);
        returns the new version's id."""
        self.commit()
        meta, cbytes = self._layout.restore(version)
        self._engine.reload(meta, cbytes)
        vid = self._layout.version_id
        assert vid is not None
        return vid

    def refresh(self) -> bool:
        """A reader moves to the newest version; False when it had it already."""
        moved = self._layout.refresh()
        if moved is None:
            return False
        self._engine.reload(*moved)
        return True

    def prune(self, keep_last: int | None = None, older_than: Any = None) -> int:
        """Drop versions past the newest ``keep_last`` or made before ``older_than`` (a
        datetime, or a timedelta back from now), except tagged and held ones; returns
        how many were dropped."""
        self._require()
        self._engine.check_writable()
        if not self._layout.in_memory:
            self._engine.flush()
        return self._layout.prune(keep_last, when(older_than))
