"""An array's versions, as its engine and layout keep them: what
:class:`carray.versions.history.History` asks of an array.

Only carray's own layout keeps versions on disk (:mod:`carray.versions`), and an
array in memory keeps them in memory; asking another layout raises
:class:`carray.errors.VersionsUnsupportedError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from carray.versions.history import History

if TYPE_CHECKING:
    from carray.layouts.base import ArrayMeta, Layout


class Versioned(Protocol):
    """What an array's versions need of its engine."""

    @property
    def cbytes(self) -> int: ...

    def check_writable(self) -> None: ...
    def store_tail(self) -> None: ...
    def meta(self) -> ArrayMeta: ...
    def flush(self, message: str | None = None) -> None: ...
    def reload(self, meta: ArrayMeta, cbytes: int) -> None: ...
    def rebase(self, newer: Any) -> None: ...


class ArrayVersions:
    """The versions of one engine's array (a :class:`carray.versions.history.Versioned`)."""

    def __init__(self, engine: Versioned, layout: Layout) -> None:
        self._engine, self._layout = engine, layout

    def _require(self) -> None:
        if not self._layout.versioned:
            self._layout.versions()  # raises VersionsUnsupportedError, naming the layout

    @property
    def dataset(self) -> Any:
        """The versioned dataset the array commits to."""
        return self._layout.versioned_dataset()

    def commit_changes(self, message: str | None) -> str:
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

    def version_list(self) -> list[Any]:
        self._require()
        return self._layout.versions()

    def tag_version(self, tag: str, version_id: str, move: bool) -> None:
        self._layout.tag(tag, version_id, move=move)

    def untag_version(self, tag: str) -> None:
        self._require()
        self._layout.untag(tag)

    def restore_version(self, version_id: str) -> str:
        meta, cbytes = self._layout.restore(version_id)
        self._engine.reload(meta, cbytes)
        vid = self._layout.version_id
        assert vid is not None
        return vid

    def refresh_version(self) -> bool:
        if self._layout.in_memory or not self._layout.versioned:
            return False
        dataset = self.dataset
        if not dataset.readonly:  # a writer: its pending changes on top of the newest
            newest = dataset.repo.latest()
            if dataset.head is not None and newest.seq == dataset.head.seq:
                return False
            self._engine.rebase(newest)
            return True
        moved = self._layout.refresh()
        if moved is None:
            return False
        self._engine.reload(*moved)
        return True

    def prune_versions(self, keep_last: int | None, older_than: float | None) -> int:
        self._require()
        self._engine.check_writable()
        return self._layout.prune(keep_last, older_than)


def array_history(engine: Versioned, layout: Layout) -> History:
    """Commits, tags, restores and refreshes of an array's versions."""
    return History(ArrayVersions(engine, layout))


__all__ = ["ArrayVersions", "array_history"]
