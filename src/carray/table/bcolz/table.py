"""bcolz table directories: columns that commit one by one, made whole by an undo record.

A bcolz 1.x table (and a table carray wrote before versions) is ``__rootdirs__``
(``{"names": [...]}``, the column order), the table's ``__attrs__`` and one array
directory per column directly under the root.  Its columns commit one after another,
so a table-wide change records how to undo it first (``__txn__``,
:mod:`carray.table.bcolz.undo`), and a reader in mode 'r' reads through such a record at
one committed state (:mod:`carray.table.bcolz.refresh`).  ``__rootdirs__`` is written
last when a table is made and replaced atomically when columns change.
"""

from __future__ import annotations

import contextlib
import json
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from carray.errors import UnsupportedDTypeError
from carray.layouts.bcolz.layout import BcolzLayout
from carray.stores import Store
from carray.stores.lock import WriteLock
from carray.table.bcolz import refresh
from carray.table.bcolz.undo import TableTxn
from carray.table.columns.missing_values import wants_nullable
from carray.table.columns.strings import wants_string_column
from carray.table.store import ROOTDIRS, TableStorage

_T = TypeVar("_T")


def bcolz_text(values: Any, where: Any) -> Any:
    """A new column's values as a bcolz 1.x table stores them: variable-length text
    (objects, numpy or Arrow strings, a string column) as fixed-width unicode as wide
    as its longest value, as bcolz's ``fromdataframe`` stores text, so that bcolz opens
    the table; any other values as they are.

    Raises
    ------
    UnsupportedDTypeError
        An object column holding other things than text, which bcolz would pickle.
    """
    if not wants_string_column(values) or wants_nullable(values):
        return values  # text with missing values: refused where missing values are
    items = np.asarray(values, dtype=object).ravel().tolist()
    odd = sorted({type(x).__name__ for x in items if not isinstance(x, str)})
    if odd:
        raise UnsupportedDTypeError(f"{where}: a bcolz 1.x table holds text as fixed-width "
                                    f"strings, not {', '.join(odd)} objects; use carray's "
                                    "own format for such columns")
    width = max((len(x) for x in items), default=1)
    return np.array(items, dtype=f"U{max(width, 1)}")


class BcolzTable(TableStorage):
    """The storage of a bcolz table directory (see the module doc).

    Parameters
    ----------
    store, root
        Where the table lives.
    mode : {'r', 'a'}
        'r' reads one committed state and writes nothing.
    fsync : bool
        Make commits durable.
    owner
        The ctable (its ``_adopt(cols, length)`` installs a state a reader loaded again;
        it is flushed at exit when a change is pending).
    nested
        Opens a nested column (the table class of nested columns).
    lock : WriteLock, optional
        The writer's lock on the table, held until :meth:`release`.
    """

    def __init__(self, store: Store, root: str, mode: str, fsync: bool, owner: Any,
                 nested: Callable[..., Any], lock: WriteLock | None = None,
                 storage_options: dict | None = None) -> None:
        self.store, self.root, self.fsync = store, root, fsync
        self.readonly = mode == "r"
        self._owner = weakref.ref(owner)  # the table owns this storage: no cycle
        self._lock = lock
        self._storage_options = storage_options
        self._nested = nested
        self._txn = None if self.readonly else TableTxn(store, root, fsync, owner)
        self._reader: refresh.TableReader | None = None
        self.format: str | None = None  # 'bcolz' when a column is in bcolz's own layout

    undo_records = True

    def column_args(self, name: str) -> dict[str, Any]:
        return {"rootdir": self.store.url(self.store.join(self.root, name))}

    def open_columns(self, opener: Callable[[str, Any], Any]) -> tuple[dict[str, Any], int]:
        store, root = self.store, self.root
        mode = "r" if self.readonly else "a"

        def columns() -> dict[str, Any]:
            cols, fmt = refresh.open_columns(store, root, mode, self.fsync,
                                             self._storage_options, self._nested)
            self.format = self.format or fmt  # new columns stay readable by bcolz too
            return cols

        if self.readonly:  # the last commit, through the record of a change under way
            self._reader = refresh.TableReader(store, root, columns)
            cols, length = self._reader.load()
            return cols, length
        cols = columns()
        assert self._txn is not None
        return cols, self._txn.recover_columns(cols)

    def read_committed(self, read: Callable[[], _T]) -> _T:
        if self._reader is None:
            return read()
        owner = self._owner()
        assert owner is not None  # a read of the table that owns this storage
        return self._reader.run(read, owner._adopt)

    # -- changes ------------------------------------------------------------------------------

    def guard(self, table: Any) -> contextlib.AbstractContextManager[None]:
        if self._txn is None:
            return contextlib.nullcontext()
        return self._txn.guard(table.column_dict(), table._set_length)

    def begin(self, length: int) -> None:
        if self._txn is not None:
            self._txn.begin(length)

    def note_edit(self, cols: dict[str, Any], rows: Any, length: int) -> None:
        if self._txn is not None:
            self._txn.begin(length)
            self._txn.note_edit(cols, rows, length)

    def begin_shrink(self, length: int) -> None:
        if self._txn is not None:
            self._txn.begin_shrink(length)  # finished, not undone, after a crash

    def pending(self) -> bool:
        return self._txn is not None and self._txn.active

    def commit(self, table: Any, message: str | None = None) -> None:
        for col in table.column_objects():
            col.flush()
        if self._txn is not None:
            self._txn.commit()

    def columns_changed(self, table: Any) -> None:
        data = (json.dumps({"names": list(table.column_dict())}, ensure_ascii=True)
                + "\n").encode()
        self.store.put(self.store.join(self.root, ROOTDIRS), data, fsync=self.fsync)
        if self._txn is not None:
            self._txn.bump()  # live readers reopen the columns

    def column_dropped(self, table: Any, name: str, col: Any, keep: bool) -> None:
        self.columns_changed(table)  # first: the table no longer refers to it
        col.close()
        if not keep:
            self.store.rmtree(self.store.join(self.root, name))

    def attrs_layout(self) -> Any:
        return BcolzLayout(self.root, readonly=self.readonly, fsync=self.fsync,
                           store=self.store)

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def on_handover(self, yield_writing: Callable[[str], None]) -> None:
        """Have ``yield_writing(reason)`` (the table's) called when a later writable open
        of this process takes writing over (see :mod:`carray.stores.lock`)."""
        if self._lock is not None:
            self._lock.on_handover(yield_writing)

    def reader(self) -> BcolzTable:
        """This directory's storage for a reader (mode 'r'), which replaces this one: its
        lock (passed on to another handle by then) is no longer this storage's."""
        owner = self._owner()
        assert owner is not None  # the table asks, and so is alive
        self.release()
        return BcolzTable(self.store, self.root, "r", self.fsync, owner, self._nested,
                          storage_options=self._storage_options)
