"""Transactions over several datasets: their changes commit as one version each, all or
none.

Each dataset's commit writes its index pages and its manifest as usual, but the
manifest names a *record*, ``.carray-transactions/ID`` in the directory the datasets
share: a version naming a record counts only once the record exists.  The record is
written (and made durable) after every manifest, so that one put is the commit point
of the whole transaction: a crash before it leaves every dataset at its version
before, after it every dataset at its new one.  Versions are only reclaimed after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator, Sequence

from carray.errors import StorageError
from carray.versions.dataset import VersionedDataset

TXN_DIR = ".carray-transactions"


def _common_root(roots: Sequence[str]) -> str:
    return os.path.commonpath([os.path.abspath(r) for r in roots]) if len(roots) > 1 \
        else os.path.dirname(os.path.abspath(roots[0]))


@contextlib.contextmanager
def transaction(datasets: Sequence[VersionedDataset], flush: Callable[[], None],
                message: str | None = None) -> Iterator[None]:
    """Changes to ``datasets`` inside commit together when the block ends (``flush()``
    stages what their containers hold); nothing commits when it raises."""
    unique = list({id(d): d for d in datasets}.values())
    for ds in unique:
        ds.check_writable()
        if ds.repo.store.remote:
            raise StorageError(0, "transactions over several datasets need them on this "
                               "machine's file system", ds.repo.store.url(ds.repo.root))
    stack = contextlib.ExitStack()
    with stack:
        for ds in unique:
            stack.enter_context(ds.held())
        yield
        flush()
        _commit(unique, message)


def _commit(datasets: list[VersionedDataset], message: str | None) -> None:
    if not any(ds.take_staged() for ds in datasets):
        return
    store = datasets[0].repo.store
    base = _common_root([ds.repo.root for ds in datasets])
    txn_id = secrets.token_hex(8)
    record = store.join(base, TXN_DIR, txn_id)
    published = []
    try:
        for ds in datasets:
            if not ds.take_staged():
                continue
            rel = os.path.relpath(record, ds.repo.root).replace(os.sep, "/")
            vid = ds.publish(txn=rel, reclaim=False, message=message)
            published.append({"dataset": os.path.relpath(ds.repo.root, base), "version": vid})
        store.makedirs(store.join(base, TXN_DIR))
        store.put(record, (json.dumps({"id": txn_id, "versions": published}) + "\n").encode(),
                  fsync=True)
        store.sync_dir(store.join(base, TXN_DIR))
    except BaseException:
        for ds in datasets:  # in memory they are past versions that never committed
            ds.broken = "a transaction over several datasets failed; reopen them"
        raise
    for ds in datasets:
        with contextlib.suppress(OSError):
            ds.reclaim()


