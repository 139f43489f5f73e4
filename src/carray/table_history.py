"""A versioned table's versions as the table offers them: commit, tag, restore, refresh,
prune (see :mod:`carray.table_store`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from carray.engine.history import when
from carray.versions.repo import check_tag

if TYPE_CHECKING:
    from carray.table_store import VersionedTable


class TableHistory:
    """The versions of one table (the same methods as an array's)."""

    def __init__(self, table: Any, storage: VersionedTable) -> None:
        self._table, self._storage = table, storage
        self._dataset = storage.dataset

    @property
    def dataset(self) -> Any:
        return self._dataset

    def commit(self, message: str | None = None) -> str:
        self._dataset.check_writable()
        self._storage.commit(self._table, message)
        head = self._dataset.head
        assert head is not None
        return head.id

    def versions(self) -> list[Any]:
        return self._dataset.versions()

    def snapshot(self, tag: str, message: str | None = None) -> str:
        check_tag(tag)
        vid = self.commit(message)
        self._dataset.tag(tag, vid)
        return vid

    def untag(self, tag: str) -> None:
        self._dataset.untag(tag)

    def restore(self, version: str) -> str:
        """Commit what is pending, then publish ``version`` again as the newest."""
        self.commit()
        old = self._dataset.repo.find(version)
        self._table.close_columns()
        vid = self._dataset.publish_version(old, f"restore {version}")
        self._table.open_columns()
        return vid

    def refresh(self) -> bool:
        if not self._dataset.readonly or not self._dataset.refresh():
            return False
        self._table.close_columns()
        self._table.open_columns()
        return True

    def prune(self, keep_last: int | None = None, older_than: Any = None) -> int:
        self.commit()
        return self._dataset.reclaim(keep_last, when(older_than))
