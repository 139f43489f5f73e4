"""A read-only table always shows one whole committed state.

A table commits as a whole through its undo record (:mod:`carray.table.bcolz.undo`), but
its columns are separate arrays that a writer changes one after another.  A table
opened in mode 'r' therefore

* reads *through* an undo record it finds (a writer at work, or one that died
  mid-change): a column the unfinished change edited is replaced, in memory
  only, by a copy with the record's old values put back, and every column is
  clipped to the recorded length -- nothing is ever written;
* checks the table's commit counter (``__commits__``) before and after every read:
  when a writer committed since this view was built, the view is built again from
  the files (columns reopened, record read again) and the read runs again, so the
  rows returned all belong to one committed state.  A read that fails while the
  counter moved (a file replaced under it) is retried the same way.

Reads that return everything at once (``t[key]``, ``len(t)``, ``names``, ``cols``,
queries) are redone whole, and ``where``/``whereblocks`` collect their matches
first; iteration (``iter``, ``iterblocks``) is redone block by block, so each
block, and every row, comes from one committed state (later blocks may come from
later states).  A read naming a column that a writer deletes meanwhile raises
KeyError, as it would on a table opened after the deletion.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import os
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from carray.array.array import carray
from carray.array.expression import caller_scope
from carray.errors import FormatError, StorageError
from carray.layouts import sniff_layout
from carray.layouts.bcolz.layout import read_json
from carray.stores import LOCAL, Store
from carray.table.bcolz.undo import (
    COMMITS_FILE,
    ROLLBACK,
    Record,
    commit_count,
    load_record,
    recover,
    visible_length,
)
from carray.table.columns.kinds import clip_column
from carray.table.columns.strings import StringColumn, is_string_column
from carray.table.store import ROOTDIRS, check_name, is_ctable

_T = TypeVar("_T")

# A read that overlaps a writer's changes this many times in a row gives up with a
# StorageError (EAGAIN) rather than return rows of two states: only a writer that
# changes the table faster than a read takes, without a pause, gets there.
MAX_ATTEMPTS = 100
# While a writer's undo record is out its columns change without the counter moving,
# so a read that fails then is tried again for this many seconds before the error is
# taken as the state's own.
QUIET_PATIENCE = 3.0


def is_nested_column(path: str | os.PathLike, store: Store = LOCAL) -> bool:
    """Whether ``path`` holds a nested column of a bcolz table (a directory of field
    columns)."""
    return is_ctable(path, store)


def open_columns(store: Store, root: str, mode: str, fsync: bool,
                 storage_options: dict | None, nested: Callable[..., Any]
                 ) -> tuple[dict[str, Any], str | None]:
    """Open the columns ``__rootdirs__`` names, each in ``mode``; also ``'bcolz'`` when
    one of them uses bcolz's layout (else None).  ``nested`` opens a nested column."""
    names_path = store.url(store.join(root, ROOTDIRS))
    if not is_ctable(root, store):
        raise FormatError(f"not a table directory (no {ROOTDIRS})", store.url(root))
    meta = read_json(store.join(root, ROOTDIRS), ROOTDIRS, store)
    names = meta.get("names") if isinstance(meta, dict) else None
    if not isinstance(names, list) or len(set(map(str, names))) != len(names):
        raise FormatError("must hold {\"names\": [unique column names]}", names_path)
    cols: dict[str, Any] = {}
    fmt = None
    args: dict[str, Any] = dict(mode=mode, fsync=fsync, storage_options=storage_options)
    try:
        for name in names:
            try:
                check_name(name)
            except (TypeError, ValueError) as exc:
                raise FormatError(f"bad column name: {exc}", names_path) from None
            key = store.join(root, name)
            path = store.url(key)
            if is_string_column(key, store):
                cols[name] = StringColumn(rootdir=path, **args)
            elif sniff_layout(key, store) is not None:
                cols[name] = carray(rootdir=path, **args)
                if cols[name].layout == "Bcolz":
                    fmt = "bcolz"
            elif is_ctable(key, store):  # a nested column: a directory of field columns
                cols[name] = nested(rootdir=path, **args)
            else:
                raise FormatError(f"column {name!r} has no carray directory", path)
    except BaseException:
        for col in cols.values():  # a failed open keeps no column locked
            with contextlib.suppress(Exception):
                col.close()
        raise
    return cols, fmt


def _memory_copy(col: Any, nitems: int) -> Any:
    """The first ``nitems`` rows of a column, as an in-memory column of the same kind."""
    n = min(nitems, len(col))
    if isinstance(col, StringColumn):
        return StringColumn(col.read_rows(range(n), as_object=True), cparams=col.cparams)
    if isinstance(col, carray):
        out = col.copy()
        if len(out) > n:
            out.resize(n)
        return out
    return type(col)(col[:n])  # a nested column


def committed_view(cols: dict[str, Any], record: Record | None
                   ) -> tuple[dict[str, Any], int]:
    """Columns and length as the last commit left them, read through ``record``.

    Columns an unfinished edit changed become in-memory copies with the record's
    old values put back; the others are clipped to the recorded length.  Nothing
    is written.
    """
    if record is not None and record.kind == ROLLBACK and record.edits:
        touched = _edited(record) & set(cols)
        copies = {name: _memory_copy(cols[name], record.length) for name in touched}
        recover(copies, record)  # on the copies: in memory
        cols = {name: copies.get(name, col) for name, col in cols.items()}
    length = visible_length(record, [len(c) for c in cols.values()])
    for col in cols.values():
        if len(col) > length:
            clip_column(col, length)
    return cols, length


def _edited(record: Record | None) -> set[str]:
    """The columns a record's edits name."""
    if record is None or record.kind != ROLLBACK:
        return set()
    return {name for edit in record.edits for name in edit}


class TableReader:
    """Keeps a read-only table at one committed state (see the module doc).

    Parameters
    ----------
    store, root
        Where the table lives.
    open_cols
        Opens the table's columns read-only, as they are on disk now.
    """

    def __init__(self, store: Store, root: str,
                 open_cols: Callable[[], dict[str, Any]]) -> None:
        self._store, self._root, self._open_cols = store, root, open_cols
        self._key = store.join(root, COMMITS_FILE)
        self._seen = -1
        self._record: Record | None = None  # the record the view reads through
        self._copies: dict[str, Any] = {}  # its columns held in memory
        self._busy = False

    def load(self) -> tuple[dict[str, Any], int]:
        """The columns and length of the last committed state (they may mix states if a
        writer commits meanwhile: :meth:`run` checks)."""
        self._seen = commit_count(self._store, self._key)  # first: what the view is of
        self._record = record = load_record(self._store, self._root)
        cols, length = committed_view(self._open_cols(), record)
        self._copies = {n: cols[n] for n in _edited(record) if n in cols}
        return cols, length

    def _catch_up(self) -> bool:
        """After a writer's change during a read: when it only went on with the change
        the view reads through, editing only columns the view holds in memory, put the
        old values of its new edits back there (the state shown is the same) and say
        True; the read runs again without reopening anything."""
        count = commit_count(self._store, self._key)
        record, seen = load_record(self._store, self._root), self._record
        if record is None or seen is None or record.kind != ROLLBACK or \
                (record.change, record.length) != (seen.change, seen.length) or \
                not _edited(record) <= set(self._copies):
            return False
        recover(self._copies, record)  # in memory
        self._seen, self._record = count, record
        return True

    def _writer_at_work(self) -> bool:
        """Whether an undo record is out: a writer changing columns (or one that died
        doing so, whose record stays until the next writer recovers)."""
        return self._record is not None or load_record(self._store, self._root) is not None

    def outdated(self) -> bool:
        """Whether a writer changed the table since the last :meth:`load`."""
        return commit_count(self._store, self._key) != self._seen

    def _next_change(self, timeout: float = 0.05) -> None:
        """Wait for a busy writer's next change (``timeout`` seconds at most): a read
        that starts right after one has the most time before the one after it."""
        now = commit_count(self._store, self._key)
        end = time.monotonic() + timeout
        while commit_count(self._store, self._key) == now and time.monotonic() < end:
            time.sleep(0.0002)

    def run(self, read: Callable[[], _T],
            adopt: Callable[[dict[str, Any], int], None]) -> _T:
        """``read()`` over one committed state; ``adopt(cols, length)`` installs a
        state loaded again.  Reads inside a read run as they are."""
        if self._busy:
            return read()
        self._busy = True
        last, quiet_until = MAX_ATTEMPTS - 1, None
        reload = self.outdated() and not self._catch_up()
        try:
            for attempt in range(MAX_ATTEMPTS):
                try:
                    if reload:
                        if attempt > 1:  # a busy writer: start as it starts a step
                            self._next_change()
                        adopt(*self.load())
                    result = read()
                except Exception:
                    # Files a writer is replacing can fail to read (while the counter
                    # moves, or between its moves while a record is out); an error that
                    # stays with the state is the caller's.
                    reload = True
                    if attempt == last:
                        raise
                    if self.outdated():
                        continue
                    if quiet_until is None:
                        quiet_until = time.monotonic() + QUIET_PATIENCE
                    if time.monotonic() > quiet_until or not self._writer_at_work():
                        raise
                    continue
                if not self.outdated():
                    return result
                reload = not self._catch_up()
            raise StorageError(errno.EAGAIN, f"a writer changed the table during each of "
                               f"{MAX_ATTEMPTS} tries of a read; read again",
                               self._store.url(self._root))
        finally:
            self._busy = False


def fresh(method: Callable[..., _T]) -> Callable[..., _T]:
    """A table read that a read-only table runs over one committed state."""
    @functools.wraps(method)
    def read(self: Any, *args: Any, **kwargs: Any) -> _T:
        return self.read_committed(lambda: method(self, *args, **kwargs))
    return read


def query(method: Callable[..., Any]) -> Callable[..., Any]:
    """A query (``where``, ``fetchwhere``, ``eval`` ...): a read-only table runs it whole
    over one committed state (results it yields are collected first).

    Names the expression uses that are not columns are taken where the user called,
    as the query itself would (it looks a fixed number of frames up): they reach it
    as ``user_dict``, whose own entries win.
    """
    signature = inspect.signature(method)

    @functools.wraps(method)
    def run_query(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        depth = bound.arguments.get("_depth", 0)
        bound.arguments["user_dict"] = {**caller_scope(1 + depth),
                                        **(bound.arguments.get("user_dict") or {})}
        call = functools.partial(method, *bound.args, **bound.kwargs)
        if self.mode != "r":
            return call()

        def whole() -> Any:
            result = call()
            return list(result) if isinstance(result, Iterator) else result

        result = self.read_committed(whole)
        return iter(result) if isinstance(result, list) else result

    return run_query


def blockwise(read_committed: Callable[[Callable[[], Any]], Any],
              block: Callable[[int], Any]) -> Iterator[Any]:
    """``block(0)``, ``block(1)``, ... each read over one committed state, until one is
    None."""
    i = 0
    while True:
        got = read_committed(lambda: block(i))  # noqa: B023 - called at once
        if got is None:
            return
        yield got
        i += 1
