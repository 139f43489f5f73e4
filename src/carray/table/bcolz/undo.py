"""Table transactions: a table's columns change together or not at all.

Each column commits on its own (its layout's commits are crash-safe), so a
table-wide change -- rows appended to every column, an edit of some rows, a
resize -- needs one record saying what the table was before it.  That record,
``__txn__`` in the table directory, is written (and made durable) before the
first column changes, grows with each further change, and is deleted once
every column has been flushed: its deletion is the table's commit.

The record is *undo* information: the committed length, and the old values of
every row an edit changes (a string column keeps its old rows from the first
changed one, since such an edit rewrites them all).  A shrinking resize records
the new length instead, and is finished rather than undone (the rows it cuts
are gone from some columns already).  Opening the table for writing applies
a record it finds (rolls back, or finishes the shrink) and deletes it; opening
it read-only shows the recorded length, so a reader never sees columns of
different lengths, and puts the record's old values back in memory over the
columns an unfinished edit changed (:mod:`carray.table.bcolz.refresh`), so it shows
the last committed state without writing anything.

``__commits__`` holds a counter the writer raises after it saves a record, after
it deletes one and after it adds or deletes columns: columns only change after
the counter moved past what a reader saw with no record, or within the rows the
record it read (or a later one of the same change) names, so a read-only table
can tell whether what it read is one committed state.  It is a hint for live
readers, written without fsync.

The file is an ``.npz`` archive (never pickles) with a JSON header; a damaged
or incomplete one is the trace of a change that never touched a column, and
is ignored.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import io
import json
import os
import weakref
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from carray.errors import StorageError
from carray.stores import Store
from carray.table.columns.strings import StringColumn, encode

TXN_FILE = "__txn__"
COMMITS_FILE = "__commits__"
ROLLBACK, _FINISH = "rollback", "finish"


@dataclass
class Record:
    """What a table was before the changes not committed yet (see the module doc).

    ``edits`` holds, per edit in order, per column name, either ``("rows", rows,
    old_values)`` or, for string columns, ``("tail", start, old_rows)``.
    """

    kind: str
    length: int
    edits: list[dict[str, tuple[str, Any, Any]]] = field(default_factory=list)
    # Names one change (from begin to commit), so a reader can tell it goes on.
    change: str = field(default_factory=lambda: os.urandom(8).hex())

    def encode(self) -> bytes:
        arrays: dict[str, np.ndarray] = {}
        edits = []
        for i, edit in enumerate(self.edits):
            desc: dict[str, Any] = {}
            for name, (how, where, values) in edit.items():
                key = f"{i}_{len(desc)}"
                desc[name] = [how, key]
                if how == "rows":
                    arrays[key + "_rows"] = np.asarray(where, dtype=np.int64)
                    arrays[key + "_values"] = np.asarray(values)
                else:
                    lengths, data = encode(values) if len(values) else \
                        (np.zeros(0, np.int64), np.zeros(0, np.uint8))
                    arrays[key + "_rows"] = np.array([where], dtype=np.int64)
                    arrays[key + "_lengths"], arrays[key + "_bytes"] = lengths, data
            edits.append(desc)
        header = {"version": 1, "kind": self.kind, "length": self.length, "edits": edits,
                  "change": self.change}
        arrays["header"] = np.frombuffer(json.dumps(header).encode("ascii"), np.uint8)
        buf = io.BytesIO()
        np.savez(buf, allow_pickle=False, **arrays)
        return buf.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> Record | None:
        """The record in ``data``, or None when it is damaged or incomplete."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
            header = json.loads(arrays["header"].tobytes())
            kind, length = header["kind"], header["length"]
            if kind not in (ROLLBACK, _FINISH) or not isinstance(length, int) or length < 0:
                return None
            edits = []
            for desc in header["edits"]:
                edit: dict[str, tuple[str, Any, Any]] = {}
                for name, (how, key) in desc.items():
                    if how == "rows":
                        edit[name] = (how, arrays[key + "_rows"], arrays[key + "_values"])
                    else:
                        offsets = np.zeros(len(arrays[key + "_lengths"]) + 1, np.int64)
                        np.cumsum(arrays[key + "_lengths"], out=offsets[1:])
                        data_ = arrays[key + "_bytes"]
                        values = [bytes(data_[a:b]).decode("utf-8")
                                  for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
                        edit[name] = ("tail", int(arrays[key + "_rows"][0]), values)
                edits.append(edit)
            change = str(header.get("change", ""))
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError,
                zipfile.BadZipFile, EOFError):
            return None
        return cls(kind, length, edits, change)


# Tables with changes not committed yet, committed at interpreter exit (before the
# columns' own exit flush, which alone would leave the record and be rolled back).
_pending: weakref.WeakSet[Any] = weakref.WeakSet()


class TableTxn:
    """The transaction record of one stored table (see the module doc)."""

    def __init__(self, store: Store, root: str, fsync: bool, owner: Any) -> None:
        self._store, self._fsync = store, fsync
        self._key = store.join(root, TXN_FILE)
        self._record: Record | None = None
        self._owner = weakref.ref(owner)
        self._broken = False

        self._count_key = store.join(root, COMMITS_FILE)
        self._count: int | None = None

    @property
    def active(self) -> bool:
        return self._record is not None

    def bump(self) -> None:
        """Tell live readers the table changes (see the module doc)."""
        if self._count is None:
            self._count = commit_count(self._store, self._count_key)
        self._count += 1
        self._store.put(self._count_key, b"%d\n" % self._count, fsync=False)

    def begin(self, length: int) -> None:
        """Changes follow that a crash must undo back to ``length`` rows."""
        if self._record is None:
            self._save(Record(ROLLBACK, length))

    def note_edit(self, cols: dict[str, Any], rows: np.ndarray, length: int) -> None:
        """Keep the old values of ``rows`` of ``cols`` before an edit changes them."""
        assert self._record is not None, "begin() first"
        record = self._record
        keep = rows[rows < record.length] if len(rows) else rows
        if not len(keep):
            return
        edit: dict[str, tuple[str, Any, Any]] = {}
        for name, col in cols.items():
            if isinstance(col, StringColumn):
                start = int(keep.min())
                edit[name] = ("tail", start, col.read_rows(range(start, record.length),
                                                           as_object=True))
            else:
                edit[name] = ("rows", keep, col[keep])
        record.edits.append(edit)
        self._save(record)

    def begin_shrink(self, length: int) -> None:
        """A shrink to ``length`` rows follows; a crash finishes it."""
        assert self._record is None, "commit() pending changes first"
        self._save(Record(_FINISH, length))

    def commit(self) -> None:
        """Every column has flushed: the changes are the table's now."""
        if self._record is None:
            return
        if self._broken:
            raise StorageError(errno.EIO, "a failed change could not be undone; reopen the "
                               "table to roll it back", self._store.url(self._key))
        try:
            self._store.delete(self._key)
        except FileNotFoundError:
            pass
        self._record = None  # only now: a failed delete is retried by the next flush
        _pending.discard(self)
        if self._fsync:
            self._store.sync_dir(self._store.dirname(self._key))
        # After the commit: a reader that saw the record moves on to the new state.  Only
        # a hint, so a failure here leaves the commit as it is (readers catch up later).
        with contextlib.suppress(OSError):
            self.bump()

    @contextlib.contextmanager
    def guard(self, cols: dict[str, Any], set_length: Callable[[int], None]) -> Iterator[None]:
        """Run a change of the table; when it fails, put the columns back to the last
        commit (dropping changes not flushed yet) and the length with ``set_length``."""
        try:
            yield
        except BaseException:
            record = self._record
            if record is not None and not self._broken:
                try:
                    recover(cols, record)
                    set_length(record.length)
                    self.discard()
                except Exception:  # noqa: BLE001 - the first error is the one to report
                    self._broken = True  # the record stays: reopening undoes the change
            raise

    def recover_columns(self, cols: dict[str, Any]) -> int:
        """Undo a change a writer left unfinished (a record on disk) and cut rows that did
        not reach every column; the table's length.  (A writable open.)"""
        record = load_record(self._store, self._store.dirname(self._key))
        if record is not None:
            recover(cols, record)
            self.discard()
        length = min((len(c) for c in cols.values()), default=0)
        for col in cols.values():
            if len(col) > length:
                col.resize(length)
        return length

    def discard(self) -> None:
        """Forget the record (after :func:`recover` applied it)."""
        self._record = Record(ROLLBACK, 0)
        self.commit()

    def _save(self, record: Record) -> None:
        self._store.put(self._key, record.encode(), fsync=self._fsync)
        # On disk now, durable or not: it is what a later flush must delete.
        self._record = record
        _pending.add(self)
        if self._fsync:
            self._store.sync_dir(self._store.dirname(self._key))
        self.bump()  # after the record, before any column changes

    def flush_owner(self) -> None:
        owner = self._owner()
        if owner is not None:
            owner.flush()


def load_record(store: Store, root: str) -> Record | None:
    """The record a writer left in table ``root`` (None when there is none or it is
    damaged)."""
    try:
        data = store.get(store.join(root, TXN_FILE))
    except FileNotFoundError:
        return None
    return Record.decode(data)


def commit_count(store: Store, key: str) -> int:
    """The counter in ``key`` (``__commits__``; 0 when missing or unreadable)."""
    store.invalidate(key)  # a fresh value, never a cached one
    try:
        text = store.get(key)
    except FileNotFoundError:
        return 0
    try:
        return int(text)
    except ValueError:
        return 0


def recover(cols: dict[str, Any], record: Record) -> None:
    """Put the columns back to what ``record`` says the table was (or finish its shrink),
    then flush them.  The caller deletes the record afterwards."""
    if record.kind == ROLLBACK:
        for edit in reversed(record.edits):
            for name, (how, where, values) in edit.items():
                col = cols.get(name)
                if col is None:
                    continue
                if how == "tail":
                    if len(col) > where:
                        col.resize(where)
                    if len(col) == where and len(values):
                        col.append(np.asarray(values, dtype=object))
                else:
                    ok = where < len(col)
                    if ok.any():
                        col[where[ok]] = values[ok]
    for col in cols.values():
        if len(col) > record.length:
            col.resize(record.length)
        col.flush()


def visible_length(record: Record | None, lengths: list[int]) -> int:
    """The rows a reader shows: every column's, and no more than the record allows."""
    n = min(lengths) if lengths else 0
    return min(n, record.length) if record is not None else n


def flush_pending() -> None:
    """Commit every table with changes not committed yet (run at interpreter exit)."""
    for txn in list(_pending):
        try:
            txn.flush_owner()
        except Exception:  # noqa: BLE001 - nothing can be reported at exit
            pass


atexit.register(flush_pending)
