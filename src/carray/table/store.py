"""The table directory: how a ctable is found, opened, changed and committed.

A table is a set of equal-length columns; *where* and *how* they are kept is a
:class:`TableStorage`, one per kind (docs/formats/table.md):

* :class:`MemoryTable`: columns in memory.
* :class:`VersionedTable` (carray's own directory, the default): ``__table__`` marks
  it; each column is a directory of superchunk arrays (a string column ``offsets/``
  and ``values/``; a nested column one per field), every array a *member* of the
  table's one versioned dataset (``versions/`` at the table's root).  A table change
  is one version: a manifest naming every member's index pages and the table's
  columns, length and attributes.  Readers hold the version they opened.
* :class:`carray.table.bcolz.table.BcolzTable`: bcolz 1.x tables, and tables carray wrote
  before versions.  ``__rootdirs__`` names the columns, each an array directory of
  its own; a table-wide change is made safe by an undo record.

The ctable holds a storage and calls it around every change: :meth:`guard` (all or
nothing), :meth:`commit` (durable, as one step), :meth:`columns_changed`.
"""

from __future__ import annotations

import abc
import contextlib
import os
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from carray.attrs import values as attrvalues
from carray.core.checkedjson import dumps_checked, load_marker
from carray.errors import (
    ColumnNameError,
    ConflictError,
    ContainerNotFoundError,
    FormatError,
    NewerVersionError,
    VersionsUnsupportedError,
)
from carray.layouts.bcolz.attrs import TYPED_FILE as TYPED_ATTRS_FILE
from carray.layouts.memory import MemoryLayout
from carray.stores import LOCAL, Store
from carray.stores.lock import WriteLock
from carray.table.rebase import TableReplay, capture
from carray.versions import Manifest, Repository
from carray.versions.dataset import (
    Membership,
    VersionedDataset,
    open_dataset,
    retention_of,
)

# Times a commit is put on top of another writer's newer version before giving up.
_MAX_REBASES = 50

TABLE_FILE = "__table__"
#: A bcolz table's list of column names, and its attributes file.
ROOTDIRS = "__rootdirs__"
ATTRS_FILE = "__attrs__"
#: The directory of a table's index builds (:mod:`carray.table.index.methods`).
INDEX_DIR = "__indexes__"
_RESERVED = {ROOTDIRS, ATTRS_FILE, TYPED_ATTRS_FILE, TABLE_FILE, "versions", INDEX_DIR}
#: The marker: format version 4 carries a checksum; tables of version 3 read as before.
_MARKER = dumps_checked({"format": "carray-table", "format_version": 4})
#: What a column is, as a version records it (a nullable column: its values and
#: validity, described as a nested column's fields are).
ARRAY, STRING, NESTED, NULLABLE, CATEGORY = "array", "string", "nested", "nullable", "category"

_T = TypeVar("_T")


def check_name(name: Any) -> str:
    """A column name that is safe as a directory name under the table's root."""
    if not isinstance(name, str):
        raise TypeError(f"column names must be str, got {name!r}")
    if name in ("", ".", "..") or any(c in name for c in "/\\\x00") or name in _RESERVED \
            or (os.altsep and os.altsep in name):
        raise ColumnNameError(f"column name {name!r} is not allowed: names become directory "
                              "names, so they cannot be empty, '.', '..', reserved, or contain "
                              "'/', '\\' or NUL")
    return name


def check_table_marker(store: Store, root: str) -> None:
    """Raise FormatError unless ``root/__table__`` is a table marker this build reads
    (ChecksumError: a damaged one)."""
    key = store.join(root, TABLE_FILE)
    marker = load_marker(store.get(key), store.url(key), TABLE_FILE,
                         version_key="format_version", readable=(3, 4), checked_from=4,
                         known=("format",))
    if marker.get("format") != "carray-table":
        raise FormatError(f"unsupported table directory {marker!r:.80}", store.url(key))


def is_versioned_table(path: str | os.PathLike, store: Store = LOCAL) -> bool:
    """A versioned table: its marker, or (a creation or upgrade interrupted after its first
    version was published) versions at the root of a table directory."""
    path = os.fspath(path)
    return store.isfile(store.join(path, TABLE_FILE)) or (
        store.isfile(store.join(path, ROOTDIRS)) and Repository.exists_at(store, path))


def is_bcolz_table(path: str | os.PathLike, store: Store = LOCAL) -> bool:
    return store.isfile(store.join(os.fspath(path), ROOTDIRS)) and \
        not is_versioned_table(path, store)


def is_ctable(path: str | os.PathLike, store: Store = LOCAL) -> bool:
    """Whether ``path`` holds a table directory of either kind."""
    path = os.fspath(path)
    return store.isfile(store.join(path, TABLE_FILE)) or \
        store.isfile(store.join(path, ROOTDIRS))


def column_dir(name: str, desc: Any) -> str:
    """The directory (under its table's) of column ``name`` as ``desc`` describes it: its
    name, unless the name was taken by a dropped column whose directory kept versions
    still read.

    Raises
    ------
    ValueError
        The description names a directory that is not a plain name.
    """
    return check_name(desc.get("dir", name) if isinstance(desc, dict) else name)


def member_names(columns: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The member (array) names a column description holds (named by directory)."""
    for name, desc in columns.items():
        kind = desc["kind"] if isinstance(desc, dict) else desc
        where = prefix + column_dir(name, desc)
        if kind == ARRAY:
            yield where
        elif kind == STRING:
            yield f"{where}/offsets"
            yield f"{where}/values"
        elif kind == CATEGORY:  # codes, and a dictionary of strings or of numbers
            yield f"{where}/codes"
            if isinstance(desc, dict) and desc.get("dictionary") == STRING:
                yield from (f"{where}/dictionary/offsets", f"{where}/dictionary/values")
            else:
                yield f"{where}/dictionary"
        else:
            yield from member_names(desc["columns"], f"{where}/")


class TableStorage(abc.ABC):
    """Where a table's columns live and how its changes are made whole (module doc)."""

    readonly: bool = False
    #: True when edits record the old values of the rows they change first.
    undo_records: bool = False

    def batch(self, publish: bool = True) -> contextlib.AbstractContextManager[None]:
        """Changes inside are committed as one (a versioned table's one version, published
        at the end with ``publish``; without, by the next commit)."""
        return contextlib.nullcontext()

    def column_args(self, name: str) -> dict[str, Any]:
        """Keyword arguments that put a column named ``name`` in this storage (created or
        opened): ``rootdir`` and what links it to the table."""
        return {}

    @abc.abstractmethod
    def open_columns(self, opener: Callable[[str, Any], Any]) -> tuple[dict[str, Any], int]:
        """The stored columns, opened with ``opener(name, kind)``, and the length."""

    def guard(self, table: Any) -> contextlib.AbstractContextManager[None]:
        """A change of the columns: when it raises, they go back to the last commit."""
        return contextlib.nullcontext()

    def begin(self, length: int) -> None:  # noqa: B027 - only undo records need it
        """A change of the columns follows (undo records start here)."""

    def note_edit(self, cols: dict[str, Any], rows: Any, length: int) -> None:  # noqa: B027
        """Rows ``rows`` of ``cols`` are about to change."""

    def begin_shrink(self, length: int) -> None:  # noqa: B027 - only undo records need it
        """A shrink to ``length`` rows follows (the last commit comes first)."""

    def pending(self) -> bool:
        """Whether changes wait for a commit (a column change commits them first)."""
        return False

    @abc.abstractmethod
    def commit(self, table: Any, message: str | None = None) -> None:
        """Flush every column and make the table's state durable as one step."""

    def columns_changed(self, table: Any) -> None:  # noqa: B027 - nothing to record in memory
        """Columns were added, dropped or reordered (recorded by the next commit, or now)."""

    def column_dropped(self, table: Any, name: str, col: Any, keep: bool) -> None:  # noqa: B027
        """Column ``name`` left the table (its files go unless ``keep``)."""

    def read_committed(self, read: Callable[[], _T]) -> _T:
        """``read()`` over one committed state."""
        return read()

    @abc.abstractmethod
    def attrs_layout(self) -> Any:
        """What keeps the table's attributes (``load_attrs``/``save_attrs``)."""

    def refuse_versions(self) -> None:
        """Raise VersionsUnsupportedError unless the table keeps versions."""
        if isinstance(self, VersionedTable):
            return
        raise VersionsUnsupportedError("this table keeps no versions (only tables stored in "
                                       "carray's own format do)")

    def release(self) -> None:  # noqa: B027 - nothing held in memory
        """Let locks and held versions go."""


@contextlib.contextmanager
def _all_of(engines: Iterator[Any]) -> Iterator[None]:
    """One transaction over several engines: when the body raises, each rolls back."""
    with contextlib.ExitStack() as stack:
        for engine in engines:
            stack.enter_context(engine.transaction())
        yield


class MemoryTable(TableStorage):
    """Columns in memory."""

    def __init__(self) -> None:
        self._attrs = MemoryLayout()

    def open_columns(self, opener: Callable[[str, Any], Any]) -> tuple[dict[str, Any], int]:
        return {}, 0

    def commit(self, table: Any, message: str | None = None) -> None:
        for col in table.column_objects():
            col.flush()

    def attrs_layout(self) -> Any:
        return self._attrs


class _TableAttrs:
    """A versioned table's attributes: part of each version (a change is one)."""

    def __init__(self, storage: VersionedTable) -> None:
        self._storage = storage

    def load_attrs(self) -> dict[str, Any]:
        return self._storage.attrs()

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        self._storage.save_attrs(attrs)


class VersionedTable(TableStorage):
    """A versioned table directory (see the module doc).

    Use :meth:`create` or :meth:`open`.  A nested column is a table too: its storage is
    a :meth:`sub` view of its table's, naming its fields' members under its name.
    """

    def __init__(self, store: Store, root: str, dataset: VersionedDataset,
                 lock: WriteLock | None = None, prefix: str = "",
                 top: VersionedTable | None = None) -> None:
        self.store = store
        self.root = root
        self.dataset = dataset
        self.readonly = dataset.readonly
        self._lock = lock
        self._prefix = prefix
        self._top = top
        self._owner: weakref.ref[Any] | None = None  # the table (see own)
        self._replay: TableReplay | None = None  # a rebase not applied whole yet
        meta = dataset.meta if isinstance(dataset.meta, dict) else {}
        if top is None:
            if meta.get("kind", "table") != "table" or \
                    not isinstance(meta.get("columns", {}), dict):
                raise FormatError("the version does not describe a table", store.url(root))
            dataset.on_reclaim = self._remove_unreferenced_columns

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def create(cls, store: Store, root: str, fsync: bool, lock: WriteLock | None,
               versions: Any = None) -> VersionedTable:
        """A new table directory at ``root`` (made, and locked, by the caller): its marker
        and dataset; the first commit publishes it."""
        store.put(store.join(root, TABLE_FILE), _MARKER, fsync=fsync)
        dataset = VersionedDataset(Repository(store, root, fsync), False, None,
                                   keep=retention_of(versions))
        dataset.meta = {"kind": "table", "columns": {}, "length": 0, "attrs": {}}
        return cls(store, root, dataset, lock)

    @classmethod
    def upgrading(cls, store: Store, root: str, fsync: bool, lock: WriteLock | None,
                  columns: dict[str, Any], length: int, attrs: dict[str, Any]
                  ) -> VersionedTable:
        """A table carray wrote before versions, about to become versioned: a dataset with
        no version yet whose description is ``columns`` (the columns' arrays join it as
        they are opened; the first commit publishes them all)."""
        dataset = VersionedDataset(Repository(store, root, fsync), False, None)
        dataset.meta = {"kind": "table", "columns": columns, "length": length,
                        "names": list(columns),
                        "attrs": {attrvalues.check_name(k): attrvalues.encode_typed(v)
                                  for k, v in attrs.items()}}
        return cls(store, root, dataset, lock)

    def finish_upgrade(self) -> None:
        """The first version is published: mark the directory, drop the old records."""
        fsync = self.dataset.repo.fsync
        self.store.put(self.store.join(self.root, TABLE_FILE), _MARKER, fsync=fsync)
        for name in (ROOTDIRS, "__txn__", "__commits__", ATTRS_FILE, TYPED_ATTRS_FILE):
            with contextlib.suppress(FileNotFoundError):
                self.store.delete(self.store.join(self.root, name))

    @classmethod
    def open(cls, store: Store, root: str, readonly: bool, fsync: bool,
             lock: WriteLock | None, at: dict[str, Any] | None = None,
             versions: Any = None) -> VersionedTable:
        """The table at ``root``: a reader holds the version asked for (the newest by
        default), a writer works on the newest."""
        if store.isfile(store.join(root, TABLE_FILE)):
            check_table_marker(store, root)
        if not Repository.exists_at(store, root):
            raise ContainerNotFoundError(f"{store.url(root)}: a table whose first version "
                                         "was never published (its creation was interrupted)")
        dataset = open_dataset(Repository(store, root, fsync), readonly, **(at or {}),
                               keep=versions)
        table = cls(store, root, dataset, lock)
        if not readonly and dataset.head is not None and (lock is not None or store.remote):
            dataset.repo.remove_leftovers(dataset.head.seq, owner_gone=not store.remote)
        if not readonly and store.isfile(store.join(root, ROOTDIRS)):
            table.finish_upgrade()  # an upgrade published, its last steps interrupted
        return table

    def sub(self, name: str) -> VersionedTable:
        """The storage of nested column ``name`` (its fields are members of this table)."""
        return VersionedTable(self.store, self.store.join(self.root, name), self.dataset,
                              prefix=f"{self._prefix}{name}/", top=self._top or self)

    # -- columns ------------------------------------------------------------------------------

    def _description(self) -> dict[str, Any]:
        columns: dict[str, Any] = self.dataset.meta.get("columns", {})
        for part in self._prefix.strip("/").split("/") if self._prefix else ():
            found = [d for n, d in columns.items() if column_dir(n, d) == part]
            if not found:
                raise KeyError(part)
            columns = found[0]["columns"]
        return columns

    def _dir_for(self, name: str) -> str:
        """The directory of column ``name``: the one the version describes, or for a new
        column its name, unless a directory of that name stays for kept versions (a
        column dropped earlier): then the first free ``name~k``."""
        try:
            described = self._description()
        except (KeyError, TypeError):  # a nested column being made: not described yet
            described = {}
        if name in described:
            return column_dir(name, described[name])
        taken = {column_dir(n, d) for n, d in described.items()}
        candidate, k = name, 0
        while candidate in taken or self.store.exists(self.store.join(self.root, candidate)):
            k += 1
            candidate = f"{name}~{k}"
        return candidate

    def column_args(self, name: str) -> dict[str, Any]:
        where = self._dir_for(name)
        member = Membership(self.dataset, self._prefix + where)
        return {"rootdir": self.store.url(self.store.join(self.root, where)),
                "membership": member, "storage_sub": lambda _: self.sub(where)}

    def open_columns(self, opener: Callable[[str, Any], Any]) -> tuple[dict[str, Any], int]:
        try:
            described = self._description()
        except (KeyError, TypeError):
            raise FormatError(f"the version does not describe nested column "
                              f"{self._prefix!r}", self.store.url(self.root)) from None
        where = self.store.url(self.root)
        if not isinstance(described, dict):
            raise FormatError("the version's column description is not a JSON object", where)
        cols: dict[str, Any] = {}
        try:
            for name, desc in described.items():
                try:
                    check_name(name)
                    kind = desc["kind"] if isinstance(desc, dict) else desc
                    path = self.store.join(self.root, column_dir(name, desc))
                except (TypeError, ValueError, KeyError) as exc:
                    raise FormatError(f"bad column in the version: {exc}", where) from None
                if not self.store.isdir(path):
                    raise FormatError(f"column {name!r} has no directory", self.store.url(path))
                cols[name] = opener(name, kind)
        except BaseException:
            for col in cols.values():
                with contextlib.suppress(Exception):
                    col.close()
            raise
        return cols, int(self.dataset.meta.get("length", 0))

    @staticmethod
    def describe(cols: dict[str, Any]) -> dict[str, Any]:
        """The description a version records of ``cols`` (what each column is, and where
        when its directory is not its name)."""
        out: dict[str, Any] = {}
        for name, col in cols.items():
            kind = col.storage_kind()
            where = str(col.rootdir).rstrip("/").rsplit("/", 1)[-1] if col.rootdir else name
            desc: dict[str, Any] = {"kind": kind, **getattr(col, "kind_details", dict)()}
            if kind in (NESTED, NULLABLE):
                desc["columns"] = VersionedTable.describe(col.column_dict())
            if where != name:
                desc["dir"] = where
            out[name] = desc if len(desc) > 1 else kind
        return out

    def _record(self, table: Any) -> None:
        """Write what the next version says of the table into the dataset's meta (a nested
        column's fields are recorded by its table)."""
        if self._top is not None:
            return
        meta = dict(self.dataset.meta) if isinstance(self.dataset.meta, dict) else {}
        cols = table.column_dict()
        meta.update(kind="table", columns=self.describe(cols), length=len(table),
                    names=list(cols))
        self.dataset.meta = meta

    # -- changes ------------------------------------------------------------------------------

    def batch(self, publish: bool = True) -> contextlib.AbstractContextManager[None]:
        if self.readonly or not publish:
            return contextlib.nullcontext()
        return self.dataset.transaction()

    def guard(self, table: Any) -> contextlib.AbstractContextManager[None]:
        """Every column's engine in one transaction: a failure puts them all back."""
        return _all_of(table.engines())

    def own(self, table: Any) -> None:
        """Every version of the dataset is published by ``table``'s commit (a column's own
        flush only stages it)."""
        if self._top is None and not self.readonly:
            ref = weakref.ref(table)
            self._owner = ref

            def commit(message: str | None) -> None:
                owner = ref()
                if owner is not None:
                    owner.flush(message)

            self.dataset.owner = commit

    def commit(self, table: Any, message: str | None = None) -> None:
        if self.readonly:
            return
        if self._top is not None:  # a nested column: within its table's commit
            for col in table.column_objects():
                col.flush()
            return
        head = self.dataset.head
        try:
            self.replay_pending(table)
            for _ in range(_MAX_REBASES):
                try:
                    with self.dataset.committing(message):
                        for col in table.column_objects():
                            col.flush()
                        self._record(table)
                    return
                except NewerVersionError as newer:
                    head = newer.newer
                    self.rebase(table, newer.newer)
            raise ConflictError(f"{self.store.url(self.root)}: other writers kept "
                                f"committing first ({_MAX_REBASES} times); try again")
        except ConflictError:
            raise  # nothing was published: the changes stay pending
        except BaseException:
            if self.dataset.head is head:
                # Nothing was published: the changes stay pending (each column keeps
                # what it wrote until a commit publishes it), and the next commit stages
                # them all again.
                self.dataset.abandon()
                raise
            # Published, then a later step failed: show this version (the columns'
            # own undo would go back past it).
            table.close_columns(flush=False)
            table.open_columns()
            raise

    def columns_changed(self, table: Any) -> None:
        self._record(table)

    def rebase(self, table: Any, newer: Any) -> None:
        """Put ``table``'s pending changes on top of ``newer`` (see
        :mod:`carray.table.rebase`)."""
        self._record(table)
        self._replay = capture(table, self, newer)
        self.replay_pending(table)

    def forget_replay(self) -> None:
        """Drop a rebase not applied yet (the table goes back to its newest version)."""
        self._replay = None

    def replay_pending(self, table: Any) -> None:
        """Apply a rebase not applied whole yet (its failure part way is retried here, at
        the next commit, from the start)."""
        if self._replay is not None:
            self._replay.apply(table, self)
            self._replay = None

    def take_attrs(self, stored: dict[str, Any]) -> None:
        """Make ``stored`` (typed JSON) the attributes the next commit records."""
        self.dataset.meta = {**self.dataset.meta, "attrs": stored}

    def column_dropped(self, table: Any, name: str, col: Any, keep: bool) -> None:
        """The column's members leave the next version; its directory goes once no kept
        version refers to it (readers of earlier versions may still read it)."""
        kinds = self.describe({name: col})
        for member in member_names(kinds, self._prefix):
            self.dataset.drop_member(member)
        col.close()
        self._record(table)

    def _remove_unreferenced_columns(self, kept: list[Manifest]) -> None:
        """Delete the directories of dropped columns no kept version refers to."""
        referenced = {m.path.split("/")[0] for mf in kept for m in mf.members}
        referenced |= {column_dir(n, d) for n, d in self.dataset.meta.get("columns", {}).items()}
        for name in self.store.listdir(self.root):
            key = self.store.join(self.root, name)
            if name in referenced or name in _RESERVED or name.startswith(".") or \
                    not self.store.isdir(key):
                continue
            if self.store.isfile(self.store.join(key, "meta", "member")) or \
                    self.store.isfile(self.store.join(key, "__vlstring__")) or \
                    self.store.isfile(self.store.join(key, "__category__")) or \
                    self.store.isdir(self.store.join(key, "data")):
                with contextlib.suppress(OSError):
                    self.store.rmtree(key)
        self._remove_unreferenced_indexes([mf.meta for mf in kept])

    def _remove_unreferenced_indexes(self, metas: list[Any]) -> None:
        """Delete the index builds no kept version (nor the next one) refers to: those
        of dropped indexes, replaced builds, and builds a crash interrupted."""
        referenced = set()
        for meta in [*metas, self.dataset.meta]:
            state = meta.get("indexes", {}) if isinstance(meta, dict) else {}
            for desc in state.values() if isinstance(state, dict) else ():
                if isinstance(desc, dict) and isinstance(desc.get("build"), str):
                    referenced.add(desc["build"])
        where = self.store.join(self.root, INDEX_DIR)
        if not self.store.isdir(where):
            return
        for name in self.store.listdir(where):
            if name not in referenced:
                with contextlib.suppress(OSError):
                    self.store.rmtree(self.store.join(where, name))

    def index_state(self) -> dict[str, Any]:
        """The table's indexes as the version held describes them (what
        :mod:`carray.table.index.methods` recorded; not checked here).  A nested column has
        none: the indexes are its table's."""
        if self._top is not None:
            return {}
        meta = self.dataset.meta if isinstance(self.dataset.meta, dict) else {}
        state = meta.get("indexes", {})
        return state if isinstance(state, dict) else {}

    def save_index_state(self, state: dict[str, Any]) -> None:
        """The indexes the next version describes (published by the table's next
        commit)."""
        if self._top is not None:
            raise ValueError("a nested column keeps no indexes of its own")
        self.dataset.check_writable()
        self.dataset.meta = {**self.dataset.meta, "indexes": state}

    # -- attributes and versions --------------------------------------------------------------

    def attrs_layout(self) -> Any:
        if self._top is not None:
            return MemoryLayout()  # a nested column's attributes are not stored
        return _TableAttrs(self)

    def attrs(self) -> dict[str, Any]:
        stored = self.dataset.meta.get("attrs", {}) if isinstance(self.dataset.meta, dict) \
            else {}
        return attrvalues.load_typed(stored, self.store.url(self.root))

    def save_attrs(self, attrs: dict[str, Any]) -> None:
        """New attributes: part of the open transaction's version, or a version now."""
        self.dataset.check_writable()
        meta = dict(self.dataset.meta)
        meta["attrs"] = {attrvalues.check_name(k): attrvalues.encode_typed(v)
                         for k, v in attrs.items()}
        self.dataset.meta = meta
        owner = self._owner() if self._owner is not None else None
        if owner is not None and owner.auto_flush and not self.dataset.in_transaction:
            owner.flush()

    def release(self) -> None:
        if self._top is not None:
            return
        if self._lock is not None:
            self.dataset.tidy()
        self.dataset.release()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
