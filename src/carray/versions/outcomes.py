"""Which versions count: the outcome of the transactions that published them.

A version published alone counts as soon as its manifest exists.  A version that a
transaction over several datasets published (a group commit, :func:`carray.transaction`)
names the transaction's *record* (``manifest.txn``, a path relative to the dataset's
root) and counts only once that transaction committed (docs/spec/commit.md):

* the record, ``.carray-transactions/ID`` in a directory the datasets share, is
  created once, holding ``{"outcome": "commit"}`` or ``{"outcome": "abort"}``: the
  create-if-absent write of it decides the transaction, so a writer that gives up on
  an unfinished transaction (its owner died) and the owner finishing it late cannot
  both win;
* once the record says commit, each dataset keeps the outcome itself in a
  *marker*, ``versions/NNNNNNNNNN.ok`` (rolled forward), and the record is deleted
  when every member holds one: after that, nothing outside the dataset decides
  what it reads;
* a version whose record is absent and has no marker is undecided: readers do not
  count it; a writer decides it (abort) when its owner cannot be alive any more.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import secrets
import threading
from collections.abc import Sequence
from typing import Any

from carray.errors import FormatError
from carray.stores import Store
from carray.versions import notes
from carray.versions.manifest import Manifest
from carray.versions.notes import ABORT, COMMIT

#: The directory holding transactions' records.
TXN_DIR = ".carray-transactions"
#: What a record names of each member: its directory (relative to the record's
#: directory), and the version and seq the transaction published there.
_MEMBER_KEYS = ("dataset", "version", "seq")


def new_txn_id() -> str:
    return secrets.token_hex(8)


def resolve(store: Store, root: str, rel: str) -> str:
    """The path ``rel`` (POSIX, relative to dataset ``root``) names in ``store``."""
    path = root
    for part in [p for p in rel.split("/") if p and p != "."]:
        path = store.dirname(path) if part == ".." else store.join(path, part)
    return path


def relative(store: Store, path: str, start: str) -> str:
    """``path`` relative to ``start`` (POSIX separators), both in ``store``."""
    if store.remote:
        return posixpath.relpath(path, start)
    return os.path.relpath(path, start).replace(os.sep, "/")


class Record:
    """The record of one transaction: its path, and what it holds once decided."""

    def __init__(self, store: Store, path: str) -> None:
        self.store, self.path = store, path

    @property
    def url(self) -> str:
        return self.store.url(self.path)

    def read(self) -> dict[str, Any] | None:
        """The record's content (None: absent, the transaction is undecided)."""
        try:
            data = self.store.get(self.path)
        except FileNotFoundError:
            return None
        if data[:8] != notes.RECORD_MAGIC and data[:1] == b"{":
            # Written before records held an outcome: only commits wrote one.
            with contextlib.suppress(ValueError):
                if isinstance(json.loads(data), dict):
                    return {"outcome": COMMIT, "members": []}
        body = notes.decode(notes.RECORD_MAGIC, data, self.url,
                            {"id": str, "outcome": str}, {"members": list})
        if body["outcome"] not in (COMMIT, ABORT):
            raise FormatError(f"record: unknown outcome {body['outcome']!r}", self.url)
        members = body.get("members", [])
        if not all(isinstance(m, dict) and set(m) == set(_MEMBER_KEYS) and
                   isinstance(m["dataset"], str) and isinstance(m["version"], str) and
                   isinstance(m["seq"], int) for m in members):
            raise FormatError("record: members must name a dataset, version and seq",
                              self.url)
        return body

    def outcome(self) -> str | None:
        body = self.read()
        return None if body is None else str(body["outcome"])

    def claim(self, outcome: str, members: Sequence[dict[str, Any]] = (),
              fsync: bool = True) -> str:
        """Decide the transaction as ``outcome`` unless it is decided already; returns
        the outcome that holds."""
        store = self.store
        txn_id = store.basename(self.path)
        body: dict[str, Any] = {"id": txn_id, "outcome": outcome}
        if members:
            body["members"] = list(members)
        directory = store.dirname(self.path)
        store.makedirs(directory)
        if store.put_if_absent(self.path, notes.encode(notes.RECORD_MAGIC, body), fsync=fsync):
            if fsync:
                store.sync_dir(directory)
            return outcome
        found = self.outcome()
        if found is None:  # deleted after every member rolled forward: it committed
            return COMMIT
        return found

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.store.delete(self.path)


class Outcomes:
    """The outcomes of the versions of one dataset (``versions/`` at ``vdir``), cached
    once decided: a decided outcome never changes."""

    def __init__(self, store: Store, root: str, vdir: str, fsync: bool) -> None:
        self.store, self.root, self.vdir, self.fsync = store, root, vdir, fsync
        self._decided: dict[int, tuple[str, str]] = {}  # seq -> (version id, outcome)
        self._marked: set[str] = set()  # ids of versions whose marker is known to exist
        self._lock = threading.Lock()

    def marker_path(self, seq: int) -> str:
        return self.store.join(self.vdir, f"{seq:010d}.ok")

    def record_of(self, manifest: Manifest) -> Record:
        assert manifest.txn is not None
        return Record(self.store, resolve(self.store, self.root, manifest.txn))

    def forget(self, seq: int) -> None:
        with self._lock:
            self._decided.pop(seq, None)

    def outcome(self, manifest: Manifest) -> str | None:
        """COMMIT, ABORT or None (undecided) for ``manifest``'s version."""
        if manifest.txn is None:
            return COMMIT
        with self._lock:
            known = self._decided.get(manifest.seq)
        if known is not None and known[0] == manifest.id:
            return known[1]
        # The marker is written before the record is deleted: a record found missing
        # after a marker was, means look at the marker again.
        found = COMMIT if self.has_marker(manifest) else self.record_of(manifest).outcome()
        if found is None and self.has_marker(manifest):
            found = COMMIT
        if found is not None:
            with self._lock:
                self._decided[manifest.seq] = (manifest.id, found)
        return found

    def has_marker(self, manifest: Manifest) -> bool:
        if manifest.id in self._marked:
            return True
        path = self.marker_path(manifest.seq)
        try:
            data = self.store.get(path)
        except FileNotFoundError:
            return False
        body = notes.decode(notes.MARKER_MAGIC, data, self.store.url(path),
                            {"version": str, "txn": str, "outcome": str})
        found = bool(body["version"] == manifest.id and body["outcome"] == COMMIT)
        if found:
            with self._lock:
                self._marked.add(manifest.id)
        return found

    def roll_forward(self, manifest: Manifest) -> None:
        """Keep the commit of ``manifest``'s transaction in this dataset (its marker),
        then delete the transaction's record if every member keeps it now."""
        if manifest.txn is None or self.has_marker(manifest):
            return
        body = {"version": manifest.id, "txn": manifest.txn, "outcome": COMMIT}
        self.store.put_if_absent(self.marker_path(manifest.seq),
                                 notes.encode(notes.MARKER_MAGIC, body), fsync=self.fsync)
        if self.fsync:
            self.store.sync_dir(self.vdir)
        with self._lock:
            self._decided[manifest.seq] = (manifest.id, COMMIT)
            self._marked.add(manifest.id)
        collect(self.record_of(manifest))

    def delete_marker(self, seq: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.store.delete(self.marker_path(seq))
        self.forget(seq)


def collect(record: Record) -> bool:
    """Delete a commit record once every member it names keeps the outcome (its marker
    for the version named); True when it is gone."""
    body = record.read()
    if body is None:
        return True
    if body["outcome"] != COMMIT or not body.get("members"):
        return False
    store, base = record.store, record.store.dirname(record.store.dirname(record.path))
    for member in body["members"]:
        root = resolve(store, base, member["dataset"])
        marker = store.join(root, "versions", f"{member['seq']:010d}.ok")
        try:
            data = store.get(marker)
        except FileNotFoundError:
            return False
        with contextlib.suppress(FormatError):
            got = notes.decode(notes.MARKER_MAGIC, data, store.url(marker),
                               {"version": str, "txn": str, "outcome": str})
            if got["version"] == member["version"]:
                continue
        return False
    record.delete()
    return True


__all__ = ["ABORT", "COMMIT", "TXN_DIR", "Outcomes", "Record", "collect", "new_txn_id",
           "relative", "resolve"]
