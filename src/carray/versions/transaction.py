"""Transactions over several datasets: their changes commit as one version each, all or
none (docs/spec/commit.md, "Transactions").

Each dataset's commit writes its index pages and its manifest as usual, but the
manifest names a *record*, ``.carray-transactions/ID`` in a directory the datasets
share, and counts only once the record says the transaction committed
(:mod:`.outcomes`).  The record is created after every manifest: that one
create-if-absent write is the commit point of the whole transaction.  Then each
dataset keeps the outcome itself (its marker) and the record goes, so that a
dataset's directory alone decides its versions again.

A transaction that fails before its commit point decides itself aborted and deletes
the manifests it published; the containers it touched are put back to their last
version by their caller.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from carray.errors import NewerVersionError, TransactionAbortedError
from carray.versions.dataset import VersionedDataset
from carray.versions.outcomes import ABORT, COMMIT, TXN_DIR, Record, new_txn_id, relative


class Rebasing(Protocol):
    """What a transaction asks of a container whose dataset another writer moved on."""

    def rebase(self, newer: Any) -> None:
        """Apply the container's pending changes on top of version ``newer`` (raising
        :class:`carray.errors.ConflictError` when they overlap its changes) and stage
        them again."""


def rebase_and_stage(dataset: VersionedDataset, container: Any, newer: Any) -> None:
    """Put ``container``'s pending changes on top of ``newer`` and stage them again for
    ``dataset``'s next publish (held: nothing is published from here)."""
    container.rebase(newer)
    with dataset.held():
        container.flush()


def common_root(datasets: Sequence[VersionedDataset]) -> str:
    """The directory the datasets share (their parent, for one)."""
    store = datasets[0].repo.store
    roots = [ds.repo.root for ds in datasets]
    if store.remote:
        return posixpath.commonpath(roots) if len(roots) > 1 else store.dirname(roots[0])
    absolute = [os.path.abspath(r) for r in roots]
    return os.path.commonpath(absolute) if len(roots) > 1 else os.path.dirname(absolute[0])


def publish_together(datasets: Sequence[VersionedDataset], message: str | None,
                     base: str, rebase: Callable[[VersionedDataset, Any], None],
                     kind: str = "commit", fsync: bool = True,
                     before_last: Callable[[], None] | None = None) -> bool:
    """Publish what ``datasets`` staged as one transaction recorded under ``base``;
    False when none changed.  ``rebase(dataset, newer)`` puts a dataset's changes on top
    of a newer version another writer published.  With ``before_last``, the last of
    ``datasets`` (a group, whose versions name its members') publishes whenever any
    other does, after them: ``before_last()`` runs first (it describes their new
    versions).

    Raises whatever failed before the commit point, after deciding the transaction
    aborted and deleting the manifests it published; a failure after it (keeping the
    outcome in each dataset) is not raised: the record still says commit, and the next
    writer of each dataset rolls it forward.
    """
    changed = [ds for ds in datasets if ds.take_staged()]
    if before_last is not None and changed and changed[-1] is not datasets[-1]:
        changed.append(datasets[-1])
    if not changed:
        return False
    if len(changed) == 1 and len(datasets) > 1:
        # One dataset changed: its own commit is all or nothing already.
        for _ in range(100):
            if before_last is not None:
                before_last()
            try:
                changed[0].publish(message=message, kind=kind, force=True)
                return True
            except NewerVersionError as newer:
                rebase(changed[0], newer.newer)
    store = changed[0].repo.store
    record = Record(store, store.join(base, TXN_DIR, new_txn_id()))
    published: list[VersionedDataset] = []
    try:
        for i, ds in enumerate(changed):
            if i == len(changed) - 1 and before_last is not None:
                before_last()
            rel = relative(store, record.path, ds.repo.root)
            _publish_one(ds, rel, message, kind, rebase, before_last if ds is changed[-1]
                         else None)
            published.append(ds)
        members = [{"dataset": relative(store, ds.repo.root, base), "version": ds.head.id,
                    "seq": ds.head.seq} for ds in published if ds.head is not None]
        outcome = _claim(record, COMMIT, members, fsync)
    except BaseException:
        _abort(record, published, fsync)
        raise
    if outcome != COMMIT:
        _abort(record, published, fsync)
        raise TransactionAbortedError(f"{record.url}: another writer decided this "
                                      "transaction aborted before it could commit (it took "
                                      "longer than the stores' lock_timeout)")
    for ds in published:  # the outcome kept in each dataset; the record then goes
        with contextlib.suppress(OSError):
            assert ds.head is not None
            ds.repo.outcomes.roll_forward(ds.head)
    for ds in published:
        with contextlib.suppress(OSError):
            ds.reclaim()
    return True


def _publish_one(ds: VersionedDataset, rel: str, message: str | None, kind: str,
                 rebase: Callable[[VersionedDataset, Any], None],
                 describe: Callable[[], None] | None) -> None:
    for _ in range(100):
        try:
            ds.publish(txn=rel, reclaim=False, message=message, kind=kind, force=True)
            return
        except NewerVersionError as newer:
            rebase(ds, newer.newer)
            if describe is not None:
                describe()
    raise TransactionAbortedError(f"{ds.repo.store.url(ds.repo.root)}: other writers kept "
                                  "committing; the transaction gave up")


def _claim(record: Record, outcome: str, members: list[dict[str, Any]], fsync: bool) -> str:
    try:
        return record.claim(outcome, members, fsync=fsync)
    except OSError:
        found = record.outcome()  # a put that took effect though its answer was lost
        if found is None:
            raise
        return found


def _abort(record: Record, published: list[VersionedDataset], fsync: bool) -> None:
    """Decide the transaction aborted (unless its commit is recorded after all) and
    delete the manifests it published, so no writer waits on them."""
    try:
        outcome = _claim(record, ABORT, [], fsync)
    except OSError:
        return  # undecided: the next writer of each dataset decides it
    if outcome != ABORT:
        return
    for ds in published:
        head = ds.head
        if head is not None and head.txn is not None:
            with contextlib.suppress(OSError):
                ds.repo.drop_aborted(head)
        with contextlib.suppress(Exception):
            ds.reset_head()


__all__ = ["common_root", "publish_together", "rebase_and_stage"]
