"""The versions API every container offers, written once: commit, snapshot (tag),
untag, versions, restore, refresh, prune (docs/spec/commit.md).

Arrays, tables and groups keep their versions differently (an array's layout, a
table's dataset of columns, a group's dataset naming its members' versions); each
hands :class:`History` a :class:`Versioned` that does the storage work, and
:class:`History` keeps the rules the same for all of them:

* a change becomes a version at ``commit()`` (or ``flush()``/``close()``, or at once
  with ``auto_flush=True``), never otherwise;
* ``snapshot(tag)`` commits and names the newest version; a tag never moves unless
  asked (``move=True``), and no retention rule drops a version a tag names;
* ``restore(version)`` commits what is pending, then publishes ``version`` again as
  the newest;
* ``refresh()`` moves a reader to the newest version, and a writer's pending changes
  on top of it (only ``refresh`` moves a handle);
* ``prune`` commits, then drops versions past ``keep_last`` or older than
  ``older_than``, never the newest, a tagged or a held one.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Protocol

from carray.versions.repo import check_tag


class Versioned(Protocol):
    """What a container's versions do in storage (see the module doc)."""

    @property
    def dataset(self) -> Any:
        """The :class:`carray.versions.dataset.VersionedDataset` committed to."""

    def commit_changes(self, message: str | None) -> str:
        """Make the pending changes a version (none when nothing changed); the newest
        version's id."""

    def version_list(self) -> list[Any]:
        """Kept versions, newest first."""

    def tag_version(self, tag: str, version_id: str, move: bool) -> None: ...

    def untag_version(self, tag: str) -> None: ...

    def restore_version(self, version_id: str) -> str:
        """Publish ``version_id`` again as the newest; its new id."""

    def refresh_version(self) -> bool:
        """Move to the newest version (a writer: its pending changes on top); False when
        this handle had it."""

    def prune_versions(self, keep_last: int | None, older_than: float | None) -> int: ...


def when(older_than: Any) -> float | None:
    """``older_than`` (a datetime, naive meaning local time, or a timedelta back from
    now) as seconds since the epoch."""
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
    """The versions API over one container's :class:`Versioned` (see the module doc)."""

    def __init__(self, versioned: Versioned) -> None:
        self._v = versioned

    @property
    def dataset(self) -> Any:
        """The versioned dataset the container commits to (what transactions over several
        containers, and groups, coordinate)."""
        return self._v.dataset

    def commit(self, message: str | None = None) -> str:
        """Make every pending change a version; the newest version's id."""
        return self._v.commit_changes(message)

    def versions(self) -> list[Any]:
        return self._v.version_list()

    def snapshot(self, tag: str, message: str | None = None, move: bool = False) -> str:
        """Commit, then name the newest version ``tag``; returns its id.  A tag naming
        another version raises :class:`carray.errors.TagExistsError` unless ``move``."""
        check_tag(tag)
        vid = self.commit(message)
        self._v.tag_version(tag, vid, move)
        return vid

    def untag(self, tag: str) -> None:
        self._v.untag_version(tag)

    def restore(self, version: str) -> str:
        """Commit what is pending, then make ``version`` the newest again (a new version);
        returns the new version's id."""
        self.commit()
        return self._v.restore_version(version)

    def refresh(self) -> bool:
        return self._v.refresh_version()

    def prune(self, keep_last: int | None = None, older_than: Any = None) -> int:
        """Commit, then drop versions past the newest ``keep_last`` or made before
        ``older_than``, except tagged and held ones; returns how many were dropped."""
        seconds = when(older_than)
        self.commit()
        return self._v.prune_versions(keep_last, seconds)


__all__ = ["History", "Versioned", "when"]
