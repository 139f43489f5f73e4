"""A versioned table's versions, as its dataset keeps them: what
:class:`carray.versions.history.History` asks of a table (see
:mod:`carray.table.store`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from carray.versions.history import History

if TYPE_CHECKING:
    from carray.table.store import VersionedTable


class TableVersions:
    """The versions of one table (a :class:`carray.versions.history.Versioned`)."""

    def __init__(self, table: Any, storage: VersionedTable) -> None:
        self._table, self._storage = table, storage
        self._dataset = storage.dataset

    @property
    def dataset(self) -> Any:
        return self._dataset

    def commit_changes(self, message: str | None) -> str:
        self._dataset.check_writable()
        self._storage.commit(self._table, message)
        head = self._dataset.head
        assert head is not None
        return str(head.id)

    def version_list(self) -> list[Any]:
        return self._dataset.versions()

    def tag_version(self, tag: str, version_id: str, move: bool) -> None:
        self._dataset.tag(tag, version_id, move=move)

    def untag_version(self, tag: str) -> None:
        self._dataset.untag(tag)

    def restore_version(self, version_id: str) -> str:
        old = self._dataset.repo.find(version_id)
        self._table.close_columns()
        vid = self._dataset.publish_version(old, f"restore {version_id}")
        self._table.open_columns()
        return str(vid)

    def refresh_version(self) -> bool:
        dataset = self._dataset
        if not dataset.readonly:  # a writer: its pending changes on top of the newest
            newest = dataset.repo.latest()
            if dataset.head is not None and newest.seq == dataset.head.seq:
                return False
            self._table.rebase(newest)
            return True
        if not dataset.refresh():
            return False
        self._table.close_columns()
        self._table.open_columns()
        return True

    def prune_versions(self, keep_last: int | None, older_than: float | None) -> int:
        return int(self._dataset.reclaim(keep_last, older_than))


def table_history(table: Any, storage: VersionedTable) -> History:
    """Commits, tags, restores and refreshes of a table's versions."""
    return History(TableVersions(table, storage))


__all__ = ["TableVersions", "table_history"]
