"""``ctable``: equal-length columns, each a carray (or a variable-length string column).

Where the columns live and how a change of them is made whole is the table's
storage (:mod:`carray.table.store`): in memory; a versioned table directory
(carray's own, the default: every change of the table is one version, and readers
hold the version they opened); or a bcolz 1.x table directory (``format="bcolz"``,
and tables written before versions), whose changes an undo record makes whole.
A writable open takes the table's writer's lock.

Queries: :mod:`carray.table.query`; conversions: :mod:`carray.table.interop`.  The
table is composed of parts that use its public API: its indexes (``t.index``,
:mod:`carray.table.index.methods`), analysis (:mod:`carray.table.analysis.methods`),
``head``/``tail``/CSV (:mod:`carray.table.day`), missing values
(:mod:`carray.table.columns.missing_table`) and categories
(:mod:`carray.table.columns.category_methods`); its methods of those names delegate."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import weakref
from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from carray.array.array import carray
from carray.array.container import (
    TableBase,
    check_mode,
    pinned_mode,
    refuse_own_source,
    version_asked,
)
from carray.array.expression import collect_result
from carray.attrs.mapping import Attrs
from carray.chunks.keys import select
from carray.core.defaults import defaults, resolve_cparams
from carray.core.params import CParams
from carray.core.util import delegate, whole_count
from carray.errors import (
    ColumnNotFoundError,
    ContainerExistsError,
    ContainerNotFoundError,
    FormatError,
    ReadOnlyError,
    VersionsUnsupportedError,
)
from carray.stores import LOCAL, Store, resolve
from carray.stores.lock import WriteLock, timeout_of
from carray.table import day as table_day
from carray.table import hdf5 as table_hdf5
from carray.table import interop
from carray.table import portable as table_portable
from carray.table import query as table_query
from carray.table import rows as table_rows
from carray.table.analysis.methods import TableAnalysis
from carray.table.bcolz import refresh
from carray.table.bcolz.table import BcolzTable, bcolz_text
from carray.table.columns import category as cat
from carray.table.columns.category_methods import CategoryMethods, result_columns
from carray.table.columns.kinds import (
    Cols,
    as_rows,
    column_class,
    column_engines,
    field_dtype,
    python_values,
    read_any,
    wants_nested_column,
)
from carray.table.columns.missing_table import (
    MissingTable,
    conform_column,
    conform_record,
    conform_rows,
    masked_rows,
)
from carray.table.columns.missing_values import bcolz_values, wants_nullable
from carray.table.columns.strings import wants_string_column
from carray.table.columns.timezones import keep_zone
from carray.table.day import TableDay
from carray.table.directory import create_storage, open_storage
from carray.table.history import table_history
from carray.table.index import planner as index_planner
from carray.table.index.methods import TableIndexes
from carray.table.interop import (
    ROW_NUMBER,
    column_values,
    new_column_name,
    normalise_columns,
)
from carray.table.store import (
    ARRAY,
    NESTED,
    NULLABLE,
    MemoryTable,
    TableStorage,
    VersionedTable,
)

_T = TypeVar("_T")

# Tables with changes their columns staged, committed at interpreter exit (before the
# engines: a versioned table's columns wait for its commit).
_open_tables: weakref.WeakSet[ctable] = weakref.WeakSet()


@atexit.register
def _commit_all() -> None:
    for table in list(_open_tables):
        with contextlib.suppress(Exception):  # nothing can be reported at exit
            table.flush()


class ctable(TableBase):  # noqa: N801
    """A table of equal-length compressed columns, in memory or on disk.

    Parameters
    ----------
    columns : optional
        A list of columns (arrays, carrays, lists), a structured array, a dict of
        columns, a pandas DataFrame, a pyarrow Table or another ctable.  Without
        it, open ``rootdir`` (or start with no columns).
    names : list of str, optional
        Column names (default: the source's, else ``f0, f1, ...``).
    cparams, expectedlen, chunklen, fsync
        As for :class:`carray`, applied to every new column.
    rootdir : str or path, optional
        Table directory (bcolz 1.x layout), or any fsspec URL (``s3://...``);
        ``None`` keeps the table in memory.
    mode : {'a', 'r', 'w'}, optional
        Default: 'a' for an existing ``rootdir``, else 'w' ('r' never writes).  'w' replaces
        the table, closing this process's older handles of it (unflushed changes dropped).
    auto_flush : bool, optional
        Make every change a version at once (commit after each append, edit, resize
        and attribute change). By default changes become a version at ``commit()``,
        ``flush()`` or ``close()``, as for arrays; tables in bcolz's format (which keep
        no versions) flush after every change by default, as bcolz does.
    storage_options : dict, optional
        Passed to the fsspec file system of a URL ``rootdir``.
    format : {'superchunk', 'bcolz'}, optional
        The layout of new columns (default superchunk: crash-safe and checksummed;
        'bcolz' keeps the table readable by bcolz 1.x).
    storage : dict, optional
        ``versions`` (commits kept, or 'all') and ``lock_timeout`` (seconds a writer
        waits for another process's writer to close, see :mod:`carray.stores.lock`).
    version, tag, as_of : optional
        Open an earlier version, read-only (as for :class:`carray`); a writable
        ``mode`` with one of them raises :class:`carray.errors.ModeError`.
    """

    def __init__(self, columns: Any = None, names: list[str] | None = None, *,
                 cparams: CParams | dict | None = None, expectedlen: int | None = None,
                 chunklen: int | None = None, rootdir: str | os.PathLike | None = None,
                 mode: str | None = None, auto_flush: bool | None = None, fsync: bool = True,
                 storage_options: dict | None = None, format: str | None = None,  # noqa: A002
                 storage: dict | None = None, version: str | None = None,
                 tag: str | None = None, as_of: Any = None,
                 _storage: TableStorage | None = None) -> None:
        self.index = TableIndexes(self)  # the table's indexes (this handle's part)
        self._format = format  # None: versioned, or 'bcolz'
        self._readonly_reason: str | None = None  # why mode 'r', when not asked for
        self._options = dict(storage or {})  # {"versions": N}: commits kept
        self._given = _storage  # a nested column's: a view of its table's storage
        self._storage: TableStorage = MemoryTable()
        at = version_asked(version, tag, as_of)
        mode = pinned_mode(mode, at)  # an earlier version: read-only
        self._rootdir = os.fspath(rootdir) if rootdir is not None else None
        self._storage_options = storage_options
        self._store: Store = LOCAL
        self._path = ""  # in memory
        if self._rootdir is not None:
            self._store, self._path = resolve(self._rootdir, storage_options)
        exists = self._rootdir is not None and self._store.exists(self._path)
        mode = check_mode(mode or ("a" if exists else "w"))
        self._mode, self._auto_flush, self._fsync = mode, auto_flush, fsync
        self._new_kwargs: dict[str, Any] = dict(cparams=resolve_cparams(cparams), expectedlen=expectedlen,
                                chunklen=chunklen)
        self._cols: dict[str, Any] = {}
        if exists and columns is None:
            if mode == "w":
                raise ValueError(f"{self._rootdir}: mode 'w' replaces a table, so it needs "
                                 "columns")
            try:
                self._open(at)
            except BaseException:
                # Hold no lock: a traceback (an interactive session's last one) keeps this.
                with contextlib.suppress(Exception):
                    self._release()
                raise
            return
        if mode == "r":
            raise ContainerNotFoundError(f"{self._rootdir}: no such table") if \
                self._rootdir else ValueError("mode 'r' needs an existing rootdir")
        if exists and mode == "a":
            raise ContainerExistsError(f"{self._rootdir}: already exists; open it without "
                                       "columns, or pass mode='w' to replace it")
        if self._format is None and self._rootdir is not None and self._given is None:
            self._format = defaults.format  # a new stored table: the process-wide default
        try:
            self._create(columns, names)
        except BaseException:
            # Hold no lock or file: a traceback may keep this half-made table.
            with contextlib.suppress(Exception):
                self.discard()
            raise

    # -- construction ---------------------------------------------------------------------

    def _create(self, columns: Any, names: list[str] | None) -> None:
        pairs = normalise_columns(columns, names, into=self._rootdir)
        lengths = {len(values) for _, values in pairs}
        if len(lengths) > 1:
            raise ValueError(f"columns have different lengths: {sorted(lengths)}")
        if self._rootdir is not None:
            self._storage = self._new_storage()
            if isinstance(self._storage, VersionedTable):
                self._storage.own(self)
            elif isinstance(self._storage, BcolzTable) and self._given is None:
                self._storage.on_handover(self._yield_writing)
        # A new table is its first version (or, in bcolz's format, __rootdirs__ is written
        # last); a column of a table (nested, nullable) is part of its table's next one.
        with self._storage.batch(publish=self._given is None):
            for name, values in pairs:
                self._cols[name] = self._new_column(name, values)
            self._len = lengths.pop() if lengths else 0
            self._attrs = Attrs(self._storage.attrs_layout(), self._mode)
            if self._rootdir is not None:
                self._storage.attrs_layout().save_attrs({})
                self._storage.columns_changed(self)  # last: the table exists from here on
        if isinstance(self._storage, VersionedTable) and self._given is None:
            _open_tables.add(self)
        elif self._given is None:
            self._flush_as_bcolz()

    def _flush_as_bcolz(self) -> None:
        """A bcolz table with ``auto_flush`` flushes after every change, its columns' too
        (a versioned table published that change as a version already)."""
        if self.auto_flush and isinstance(self._storage, BcolzTable):
            self.flush()

    def _new_storage(self) -> TableStorage:
        """The storage of a new table at ``rootdir`` (replacing what is there: mode 'w')."""
        if self._given is not None:  # a nested column: inside its table's directory
            self._store.makedirs(self._path)
            return self._given
        storage = create_storage(self._store, self._path, self._mode, self._fsync,
                                 self._format == "bcolz", self._options.get("versions"),
                                 self, column_class(NESTED), self._storage_options, self.abandon,
                                 timeout_of(self._options))
        self._storage = storage
        self._take_grace()
        return storage

    def _take_grace(self) -> None:
        """``storage={"grace": seconds}``: how long a replaced version stays readable on
        object stores (as for arrays)."""
        if "grace" in self._options and isinstance(self._storage, VersionedTable):
            self._storage.dataset.repo.grace = float(self._options["grace"])

    def _new_column(self, name: str, values: Any, **kwargs: Any) -> Any:
        where = self._storage.column_args(name) if self._rootdir is not None else {}
        args = {**self._new_kwargs, **kwargs}
        common: dict[str, Any] = dict(rootdir=where.get("rootdir"), mode="w",
                                      fsync=self._fsync, storage_options=self._storage_options)
        values = cat.storable(values, self._format)  # bcolz's tables: decoded
        if self._format == "bcolz":  # plain values, or refused (missing ones)
            values = bcolz_text(bcolz_values(values, name, where.get("rootdir")),
                                where.get("rootdir", name))
        if cat.column_class(values) is cat.CategoryColumn:
            return cat.CategoryColumn(values, **cat.text_options(values, args), **common,
                                      format=self._format, membership=where.get("membership"))
        if wants_nested_column(values) and self._format == "bcolz" and \
                not wants_nullable(values):  # bcolz: a column of records is one carray
            return carray(values, format=self._format, **common, **args)
        if wants_nested_column(values) or wants_nullable(values):
            cls = column_class(NULLABLE if wants_nullable(values) else NESTED)
            return keep_zone(values, cls(values, format=self._format, _storage=where.get(
                "storage_sub", lambda n: None)(name), **common, **args))
        if wants_string_column(values):
            return cat.column_class(values)(values, **cat.text_options(values, args), **common,
                                            format=self._format, membership=where.get("membership"))
        member = where.get("membership")
        return keep_zone(values, carray(values, format=self._format, **common, **args,
                         storage={"member": member} if member is not None else None))

    def _open_column(self, name: str, kind: str) -> Any:
        """Column ``name`` of a versioned table, of ``kind`` (see :mod:`.table_store`)."""
        where = self._storage.column_args(name)
        if isinstance(self._storage, BcolzTable) and \
                not self._store.isdir(self._store.join(self._path, name)):
            raise FormatError(f"column {name!r} has no directory", where["rootdir"])
        common: dict[str, Any] = dict(rootdir=where["rootdir"],
                                      mode="r" if self._mode == "r" else "a",
                                      fsync=self._fsync, storage_options=self._storage_options)
        if kind in cat.OPENERS:  # string and categorical columns
            return cat.OPENERS[kind](membership=where["membership"], **common)
        if kind != ARRAY:  # a table of its own: nested, nullable (table_columns.column_class)
            cls = column_class(kind, self._rootdir)
            return cls(_storage=where["storage_sub"](name), **common)
        return carray(storage={"member": where["membership"]}, **common)

    def _set_length(self, length: int) -> None:
        self._len = length

    def _moved_in(self, source: carray, name: str) -> Any:
        """Column ``name`` made of the stored array ``source``, whose directory is moved
        into the table (a bcolz table: renamed; a versioned one: copied as a member,
        then the source removed)."""
        source.flush()
        assert source.rootdir is not None
        src_store, src = resolve(source.rootdir, source.reopen_args()["storage_options"])
        if type(src_store) is not type(self._store):
            raise ValueError("move=True moves a column within one store; copy it instead")
        if not isinstance(self._storage, BcolzTable):
            col = self._new_column(name, source)
            source.close()
            src_store.rmtree(src)
            return col
        source.close()
        self._store.rename(src, self._store.join(self._path, name))
        return carray(**self._storage.column_args(name), mode="a", fsync=self._fsync,
                      storage_options=self._storage_options)

    def _open(self, at: dict[str, Any]) -> None:
        readonly = self._mode == "r"
        if self._given is not None:
            self._storage = self._given
        else:
            self._storage, lock = open_storage(
                self._store, self._path, self._mode, self._fsync, at,
                self._options.get("versions"), self, column_class(NESTED), self._storage_options,
                self.abandon, timeout_of(self._options))
            if not readonly and isinstance(self._storage, BcolzTable):
                if self._upgrade(lock):
                    return
                self._storage.on_handover(self._yield_writing)
        self._attrs = Attrs(self._storage.attrs_layout(), self._mode)
        if isinstance(self._storage, VersionedTable):
            self._storage.own(self)
            self._take_grace()
        self.open_columns()
        if not readonly and isinstance(self._storage, VersionedTable):
            _open_tables.add(self)

    def _upgrade(self, lock: WriteLock | None) -> bool:
        """A table carray wrote before versions, opened for writing: its columns become the
        members of one versioned dataset, published as its first version (bcolz's own
        tables, and one with a change left unfinished, stay as they are); True if done."""
        store, root = self._store, self._path
        storage = self._storage
        assert isinstance(storage, BcolzTable)
        if store.isfile(store.join(root, "__txn__")):
            return False
        attrs = storage.attrs_layout().load_attrs()
        cols, length = storage.open_columns(self._open_column)
        fmt = storage.format
        kinds = VersionedTable.describe(cols)
        for col in cols.values():
            col.discard()  # nothing to flush: nothing was changed
        if fmt == "bcolz":
            self._format = "bcolz"
            return False
        self._storage = VersionedTable.upgrading(store, root, self._fsync, lock, kinds, length,
                                                 attrs)
        self._storage.own(self)
        self._attrs = Attrs(self._storage.attrs_layout(), self._mode)
        self.open_columns()
        self.flush("upgraded")  # every array's index published as the first version
        self._storage.finish_upgrade()
        _open_tables.add(self)
        return True

    def open_columns(self) -> None:
        """(Re)open the stored columns: the table's state is its storage's."""
        self._cols, self._len = self._storage.open_columns(self._open_column)
        self.index.watch()  # indexes learn of every chunk their columns write
        if isinstance(self._storage, BcolzTable):
            self._format = self._format or self._storage.format

    def close_columns(self, flush: bool = True) -> None:
        """Close every column (the storage is about to change under them); without
        ``flush``, what they did not commit is dropped."""
        for col in self._cols.values():
            if flush:
                col.close()
            else:
                col.discard()
        self._cols = {}

    def discard(self) -> None:
        self.close_columns(flush=False)
        self._storage.release()

    def reset(self) -> None:
        """Drop every change not committed: the table shows its newest version again (what
        a failed :func:`carray.transaction` does to each table it touched)."""
        self.check_writable()
        if not isinstance(self._storage, VersionedTable):
            raise VersionsUnsupportedError(f"{self._rootdir or 'ctable'}: only tables in "
                                           "carray's own format go back to a version")
        self._storage.forget_replay()
        self._storage.dataset.reset_head()
        self.reopen_at_head()

    def rebase(self, newer: Any) -> None:
        """Put the changes not committed on top of version ``newer`` (a manifest another
        writer published); :class:`carray.errors.ConflictError` when they overlap."""
        assert isinstance(self._storage, VersionedTable)
        self._storage.rebase(self, newer)

    def reopen_at_head(self) -> None:
        """Reopen the columns at the version the table's dataset holds, dropping what
        they did not commit."""
        if isinstance(self._storage, VersionedTable):
            self._storage.dataset.abandon()
        self.close_columns(flush=False)
        self.open_columns()
        self._attrs.forget()

    def read_committed(self, read: Callable[[], _T]) -> _T:
        """``read()`` over one committed state (in mode 'r' a bcolz table reads again
        when a writer committed meanwhile: :mod:`carray.table.bcolz.refresh`)."""
        return self._storage.read_committed(read)

    def _adopt(self, cols: dict[str, Any], length: int) -> None:
        self._cols, self._len = cols, length

    # -- what the storage asks of the table ----------------------------------------------------

    def column_dict(self) -> dict[str, Any]:
        return self._cols

    def column_objects(self) -> list[Any]:
        return list(self._cols.values())

    def engines(self) -> Iterator[Any]:
        """The engines of every array of every column."""
        for col in self._cols.values():
            yield from column_engines(col)

    def storage_kind(self) -> str:
        return NESTED

    def _history(self) -> Any:
        self._storage.refuse_versions()
        assert isinstance(self._storage, VersionedTable)
        return table_history(self, self._storage)

    @property
    def version(self) -> str | None:
        """The id of the version this table shows (None where there are no versions)."""
        head = getattr(getattr(self._storage, "dataset", None), "head", None)
        return None if head is None else head.id

    @classmethod
    def over_columns(cls, cols: dict[str, Any], length: int) -> ctable:
        """An in-memory table over existing column objects (no copy)."""
        t = cls.__new__(cls)
        t._init_view(cols, length)
        return t

    def _init_view(self, cols: dict[str, Any], length: int) -> None:
        self.index = TableIndexes(self)
        self._rootdir, self._mode, self._auto_flush, self._fsync = None, "a", False, True
        self._storage_options, self._storage, self._given = None, MemoryTable(), None
        self._format, self._options = None, {}
        self._new_kwargs = dict(cparams=CParams(), expectedlen=None, chunklen=None)
        self._cols, self._len = dict(cols), length
        self._attrs = Attrs(self._storage.attrs_layout(), "a")

    # -- leaving this process -------------------------------------------------------------

    def __reduce__(self) -> tuple:
        return table_portable.pickled(self)

    def memory_state(self) -> dict[str, Any]:
        """What rebuilds this in-memory table elsewhere (see :meth:`from_memory_state`)."""
        return dict(cols=table_portable.portable_columns(self), length=self._len,
                    new_kwargs=self._new_kwargs, auto_flush=self._auto_flush,
                    attrs=self._attrs.getall())

    @classmethod
    def from_memory_state(cls, state: dict[str, Any]) -> Any:
        cols = table_portable.columns_from_portable(state["cols"],
                                                    state["new_kwargs"]["cparams"])
        t = cls.over_columns(cols, state["length"])
        t._new_kwargs, t._auto_flush = state["new_kwargs"], state["auto_flush"]
        t._attrs.update(state["attrs"])
        return t

    to_dask = table_portable.to_dask

    # -- conversions: pandas, Arrow (its C stream too), HDF5, HTML (carray.table.interop) ----

    fromdataframe = classmethod(interop.fromdataframe)
    from_arrow = classmethod(interop.table_from_arrow)
    fromhdf5 = classmethod(table_hdf5.fromhdf5)
    todataframe = interop.todataframe
    pandas_columns = interop.pandas_columns
    to_arrow = interop.to_arrow
    tohdf5 = table_hdf5.tohdf5
    __arrow_c_stream__ = interop.arrow_c_stream
    __dataframe__ = interop.dataframe_interchange
    _repr_html_ = interop.table_html

    def reopen_args(self) -> dict[str, Any]:
        """Keyword arguments that open this stored table again (mode 'a' or 'r')."""
        args = dict(rootdir=self._rootdir, mode="r" if self._mode == "r" else "a",
                    auto_flush=self._auto_flush, fsync=self._fsync,
                    storage_options=self._storage_options)
        if self._mode == "r" and self.version is not None:
            args["version"] = self.version  # the version it holds, not whatever is newest
        return args

    def file_rows(self) -> int:
        """Rows of one stored file (a run of chunks) of the first fixed-width column."""
        for col in self._cols.values():
            if isinstance(col, carray):
                unit = col.engine.unit_chunks or 1
                return col.chunklen * max(1, unit // col.engine.per_row)
        return 2**16

    # -- properties -----------------------------------------------------------------------

    @property
    @refresh.fresh
    def names(self) -> list[str]:
        return list(self._cols)

    @property
    @refresh.fresh
    def cols(self) -> Cols:
        return Cols(self._cols)

    @property
    @refresh.fresh
    def dtype(self) -> np.dtype:
        """The row dtype (variable-length string columns appear as ``object``)."""
        return np.dtype([(n, field_dtype(c)) for n, c in self._cols.items()])

    @property
    @refresh.fresh
    def shape(self) -> tuple[int]:
        return (self._len,)

    @refresh.fresh
    def __len__(self) -> int:
        return self._len

    @property
    def cparams(self) -> CParams:
        return self._new_kwargs["cparams"]

    @property
    def storage(self) -> TableStorage:
        """Where the columns live and how a change of them is made whole
        (:mod:`carray.table.store`)."""
        return self._storage

    @property
    def fsync(self) -> bool:
        """Whether what is written is synced to disk before a commit completes."""
        return self._fsync

    @property
    def format(self) -> str | None:
        """'bcolz' for a table in bcolz 1.x's layout, else None (carray's own)."""
        return self._format

    @property
    def auto_flush(self) -> bool:
        """Whether every change becomes a version (is flushed) at once (never in memory,
        where nothing is flushed)."""
        if self._rootdir is None:
            return False
        if self._auto_flush is not None:
            return self._auto_flush
        return self._format == "bcolz"

    # -- reading --------------------------------------------------------------------------

    def column_names(self, outcols: Any = None) -> list[str]:
        """Names picked by ``outcols`` (None: all; a list or a comma/space-separated str;
        ``'nrow__'`` names the row number)."""
        if outcols is None:
            return self.names
        if isinstance(outcols, str):
            outcols = outcols.replace(",", " ").split()
        names = list(outcols)
        for name in names:
            if name not in self._cols and name != ROW_NUMBER:
                raise ColumnNotFoundError(f"no column {name!r} (columns: {self.names}; "
                                          f"{ROW_NUMBER!r} is the row number)")
        return names

    def read_column(self, name: str, rows: Any) -> np.ndarray:
        """Rows (a range or int positions) of column ``name``; strings as ``str`` objects."""
        return read_any(self._cols[name], rows)

    def records(self, key: Any, names: list[str]) -> Any:
        """Rows ``key`` of columns ``names`` as a structured array (or one record)."""
        dtype = np.dtype([(n, field_dtype(self._cols[n])) for n in names])
        sel = select(key, self.shape)
        if isinstance(sel.rows, int):
            out = np.empty(1, dtype=dtype)
            for n in names:
                out[n][0] = read_any(self._cols[n], range(sel.rows, sel.rows + 1))[0]
            return masked_rows(self._cols, names, range(sel.rows, sel.rows + 1), out)[0]
        nrows = len(sel.rows)
        out = np.empty(nrows, dtype=dtype)
        for n in names:
            out[n] = read_any(self._cols[n], sel.rows)
        out = masked_rows(self._cols, names, sel.rows, out)  # a masked array, if missing
        return out if sel.post is None else out[sel.post]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            if key in (cols := self.cols):
                return cols[key]
            return self.fetchwhere(key, out_flavor="numpy", _depth=1)
        if isinstance(key, (list, tuple)) and key and all(isinstance(k, str) for k in key):
            return self.read_committed(lambda: ctable.over_columns(
                {k: self._cols[k] for k in self.column_names(key)}, self._len))
        if isinstance(key, carray):
            key = key[:]
        return self.read_committed(lambda: self.records(key, self.names))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def __iter__(self) -> Iterator[Any]:
        return self.iter()

    def iter(self, start: int = 0, stop: int | None = None, step: int = 1,
             outcols: Any = None, limit: int | None = None, skip: int = 0,
             out_flavor: Any = namedtuple) -> Iterator[Any]:
        """Rows ``start:stop:step`` as namedtuples (``out_flavor=tuple`` for tuples)."""
        return table_rows.iter_rows(self, lambda: range(self._len)[start:stop:step],
                                    self.column_names(outcols), limit, skip, out_flavor)

    def iterblocks(self, blen: int | None = None, start: int = 0, stop: int | None = None,
                   outcols: Any = None) -> Iterator[np.ndarray]:
        """Consecutive blocks of ``blen`` rows as structured arrays."""
        names = [n for n in self.column_names(outcols) if n != "nrow__"]
        return table_rows.iter_blocks(self, lambda: range(self._len)[start:stop], names, blen)

    # -- queries --------------------------------------------------------------------------

    @refresh.query
    def where(self, expression: str, outcols: Any = None, limit: int | None = None,
              skip: int = 0, out_flavor: Any = namedtuple, user_dict: Mapping | None = None,
              vm: str | None = None, prune: bool = True) -> Iterator[Any]:
        """Iterate over the rows where ``expression`` is true, as namedtuples.

        ``outcols`` picks and orders the columns (``'nrow__'`` is the row number).
        Only the columns the expression names are decoded for blocks that may
        match; the others only for blocks with matches.
        """
        names = self.column_names(outcols)
        ev = table_query.evaluator(self, expression, user_dict, vm, 1, prune=prune)
        cols = {n: self._cols.get(n) for n in names}
        rows = itertools.chain.from_iterable(
            zip(*(python_values(cols[n], b[n]) for n in names), strict=True)
            for b in table_query.matches(self, ev, names, skip, limit))
        return as_rows(rows, names, out_flavor)

    @refresh.query
    def whereblocks(self, expression: str, blen: int | None = None, outcols: Any = None,
                    limit: int | None = None, skip: int = 0, user_dict: Mapping | None = None,
                    vm: str | None = None, prune: bool = True) -> Iterator[np.ndarray]:
        """Structured arrays of up to ``blen`` matching rows each."""
        names = self.column_names(outcols)
        ev = table_query.evaluator(self, expression, user_dict, vm, 1, prune=prune)
        return table_query.match_blocks(self, ev, names, blen or ev.blen, skip, limit)

    @refresh.query
    def fetchwhere(self, expression: str, outcols: Any = None, limit: int | None = None,
                   skip: int = 0, out_flavor: str = "numpy", user_dict: Mapping | None = None,
                   vm: str | None = None, prune: bool = True, _depth: int = 0,
                   **kwargs: Any) -> Any:
        """All matching rows at once: a structured array, or a ctable (``out_flavor='ctable'``)."""
        names = self.column_names(outcols)
        ev = table_query.evaluator(self, expression, user_dict, vm, 1 + _depth, prune=prune)
        if out_flavor not in ("numpy", "ctable", "bcolz", "carray"):
            raise ValueError(f"out_flavor must be 'numpy' or 'ctable', got {out_flavor!r}")
        out = table_query.fetch(self, ev, names, skip, limit)
        if out_flavor != "numpy":
            return ctable(result_columns(self, out, names), **kwargs)
        return out

    @refresh.query
    def eval(self, expression: str, user_dict: Mapping | None = None, vm: str | None = None,
             out_flavor: str = "carray", blen: int | None = None, **kwargs: Any) -> Any:
        """Evaluate ``expression`` over the columns (and caller variables), block by block."""
        ev = table_query.evaluator(self, expression, user_dict, vm, 1, blen=blen, prune=False)
        return collect_result(ev, out_flavor, kwargs)

    def explain(self, expression: str, user_dict: Mapping | None = None) -> str:
        """How a query of ``expression`` would run: which index, or a scan with zone
        maps, the rows or blocks it expects to read, and why.

        Parameters
        ----------
        expression : str
            As for :meth:`where` (variables from ``user_dict``, then the caller's).
        user_dict : mapping, optional

        Returns
        -------
        str
            Lines ``query:``, ``rows:``, ``plan:`` and ``why:``.
        """
        ev = table_query.evaluator(self, expression, user_dict, None, 1)
        return index_planner.explain(self, ev)

    # -- writing --------------------------------------------------------------------------

    def check_writable(self) -> None:
        """Raise :class:`carray.errors.ReadOnlyError` unless the table may change (and
        :class:`carray.errors.HandleClosedError` once another handle took it over)."""
        self._check_open()
        if self._mode == "r":
            raise ReadOnlyError(self._readonly_reason or
                                f"{self._rootdir or 'ctable'}: opened in mode 'r'")

    def _yield_writing(self, reason: str) -> None:
        """Flush, then go on reading only: a later writable open of this process took
        writing over (bcolz tables: see :mod:`carray.stores.lock`)."""
        assert isinstance(self._storage, BcolzTable)
        self.flush()
        self.close_columns(flush=False)  # flushed just now
        self._storage = self._storage.reader()
        self._mode, self._readonly_reason = "r", reason
        self._attrs = Attrs(self._storage.attrs_layout(), self._mode)
        self.open_columns()

    def append(self, rows: Any) -> None:
        """Append rows: a structured array or record, a list of columns (arrays or scalars),
        a dict of columns, a DataFrame, an Arrow table or another ctable."""
        self.check_writable()
        cols = conform_rows(self, rows)
        n = len(next(iter(cols.values()))) if cols else 0
        if n == 0:
            return
        old = self._len
        self._storage.begin(self._len)
        with self._storage.guard(self):
            try:
                for name, col in self._cols.items():
                    col.append(cols[name])
            except BaseException:
                if isinstance(self._storage, MemoryTable):
                    self._cut_back(old)
                raise
            self._len = old + n
            if self.auto_flush:
                try:
                    self.flush()
                except BaseException:
                    self._len = old  # the columns' changes are undone with it
                    raise

    def _note_edit(self, key: Any, cols: dict[str, Any]) -> None:
        """Record the old values of the rows ``key`` selects, before an edit changes them
        (storages that undo with records of old values)."""
        if self._storage.undo_records:
            rows = np.atleast_1d(np.arange(self._len, dtype=np.int64)[key])
            self._storage.note_edit(cols, rows, self._len)

    def _commit_pending(self) -> None:
        """Flush first when changes are not committed yet (before a change of columns)."""
        if self._storage.pending():
            self.flush()

    def _cut_back(self, length: int) -> None:
        for col in self._cols.values():
            if len(col) > length:
                col.resize(length)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.check_writable()
        if isinstance(key, str) and (key in self._cols or key.isidentifier()):
            if key in self._cols:
                value = conform_column(self, key, value)  # None in it: gains validity
                with self._storage.guard(self):
                    self._note_edit(slice(None), {key: self._cols[key]})
                    self._cols[key][:] = value
                    if self.auto_flush:
                        self.flush()
            else:
                self.addcol(value, name=key)
            return
        if isinstance(key, str):  # an expression: the rows where it holds
            key = self.eval(key, out_flavor="numpy")
        if isinstance(key, carray):
            key = key[:]
        value = conform_record(self, value)  # a row with None: a masked record
        if isinstance(value, tuple) or (isinstance(value, np.void) and value.dtype.names):
            value = np.array(value if isinstance(value, np.void) else [value],
                             dtype=self.dtype)[0] if isinstance(value, tuple) else value
        arr = np.asanyarray(value)  # masked rows: missing values
        if arr.dtype.names is None:
            arr = np.asarray(value, dtype=self.dtype)
        with self._storage.guard(self):
            self._note_edit(key, self._cols)
            for name, col in self._cols.items():
                col[key] = arr[name]
            if self.auto_flush:
                self.flush()

    def addcol(self, newcol: Any, name: str | None = None, pos: int | None = None,
               move: bool = False, **kwargs: Any) -> None:
        """Add a column at position ``pos`` (default last), persisted at once."""
        self.check_writable()
        self._commit_pending()
        pos = len(self._cols) if pos is None else pos
        if not 0 <= pos <= len(self._cols):
            raise ValueError(f"pos must be in 0..{len(self._cols)}, got {pos}")
        name = new_column_name(name if name is not None else getattr(newcol, "name", None)
                               if isinstance(getattr(newcol, "name", None), str) else f"f{pos}")
        if name in self._cols:
            raise ValueError(f"a column named {name!r} already exists")
        if self._cols and len(newcol) != self._len:
            raise ValueError(f"the new column has {len(newcol)} rows, the table {self._len}")
        if hasattr(newcol, "to_numpy") and not isinstance(newcol, np.ndarray):
            newcol = column_values(newcol)
        with self._storage.batch(publish=self.auto_flush):
            if move and isinstance(newcol, carray) and newcol.rootdir and self._rootdir:
                col = self._moved_in(newcol, name)
            else:
                if isinstance(newcol, carray):
                    newcol = newcol.copy(rootdir=None) if self._rootdir is None else newcol
                col = self._new_column(name, newcol, **kwargs)
            items = list(self._cols.items())
            items.insert(pos, (name, col))
            self._cols = dict(items)
            if not self._len:
                self._len = len(col)
            if self._rootdir is not None:
                self._storage.columns_changed(self)
        self._flush_as_bcolz()

    def delcol(self, name: str | None = None, pos: int | None = None,
               keep: bool = False) -> None:
        """Remove a column by name or position (exactly one); its directory too unless ``keep``."""
        self.check_writable()
        self._commit_pending()
        if (name is None) == (pos is None):
            raise ValueError("pass exactly one of name and pos")
        if name is None:
            assert pos is not None
            if not -len(self._cols) <= pos < len(self._cols):
                raise IndexError(f"no column at position {pos}")
            name = self.names[pos]
        if name not in self._cols:
            raise ColumnNotFoundError(f"no column {name!r} (columns: {self.names})")
        with self._storage.batch(publish=self.auto_flush):
            col = self._cols.pop(name)
            self.index.column_dropped(name)
            if self._rootdir is not None:
                self._storage.column_dropped(self, name, col, keep)
            if not self._cols:
                self._len = 0
        self._flush_as_bcolz()

    def replace_column(self, name: str, values: Any) -> None:
        """Store column ``name`` anew from ``values`` (one value per row), at its
        position and with its attributes, as one change (one version); the old column's
        directory stays for the versions that read it."""
        self.check_writable()
        if name not in self._cols:
            raise ColumnNotFoundError(f"no column {name!r} (columns: {self.names})")
        if len(values) != self._len:
            raise ValueError(f"column {name!r}: {len(values)} values for {self._len} rows")
        self._commit_pending()
        col = self._cols[name]
        attrs = col.attrs.checked() if hasattr(col, "attrs") else {}
        with self._storage.batch(publish=self.auto_flush):
            items = list(self._cols.items())
            pos = [n for n, _ in items].index(name)
            self._cols.pop(name)
            if self._rootdir is not None:
                # The old directory stays for the versions that read it; the new column
                # takes a directory of its own.
                self._storage.column_dropped(self, name, col, True)
            items[pos] = (name, self._new_column(name, values))
            items[pos][1].attrs.update(attrs)  # the column's attributes go with it
            self._cols = dict(items)
            if self._rootdir is not None:
                self._storage.columns_changed(self)

    def resize(self, nitems: int) -> None:
        """Grow (with each column's default) or shrink every column to ``nitems`` rows."""
        self.check_writable()
        if nitems < 0:
            raise ValueError("nitems must be >= 0")
        if nitems < self._len:
            self._commit_pending()
            self._storage.begin_shrink(nitems)  # a bcolz table's: finished after a crash
        else:
            self._storage.begin(self._len)
        old = self._len
        with self._storage.guard(self):
            for col in self._cols.values():
                col.resize(nitems)
            self._len = nitems
            if self.auto_flush or not isinstance(self._storage, VersionedTable):
                try:
                    self.flush()  # formats without versions record sizes as they change
                except BaseException:
                    if isinstance(self._storage, VersionedTable):
                        self._len = old  # the columns' changes are undone with it
                    raise

    def trim(self, nitems: int) -> None:
        """Remove the last ``nitems`` rows."""
        nitems = whole_count(nitems, "nitems")
        if nitems > self._len:
            raise ValueError(f"cannot trim {nitems} rows from a table of {self._len}")
        self.resize(self._len - nitems)

    def flush(self, message: str | None = None) -> None:
        """Flush every column and commit the table as one step (one version of a
        versioned table, with ``message``)."""
        if self._mode == "r":
            return
        self._check_open()
        self.index.before_commit()  # indexes fit the state committed: part of its version
        self._storage.commit(self, message)

    def _release(self) -> None:
        _open_tables.discard(self)
        for col in self._cols.values():
            col.close()
        self._storage.release()

    def free_cachemem(self) -> None:
        for col in self._cols.values():
            col.free_cachemem()

    def copy(self, **kwargs: Any) -> ctable:
        """A copy, attributes included (keyword arguments as for the constructor, ``rootdir``)."""
        refuse_own_source(kwargs.get("rootdir"), [self])
        return table_rows.copy_table(self, ctable, kwargs)

    # -- parts: what the table is composed of, and its methods that call them ------------

    @property
    def _analysis(self) -> TableAnalysis:
        return TableAnalysis(self, ctable)

    create_index = delegate("index", TableIndexes.create)
    drop_index = delegate("index", TableIndexes.drop)
    indexes = property(delegate("index", TableIndexes.facts))
    has_indexes = delegate("index", TableIndexes.has_any)
    lookup_index = delegate("index", TableIndexes.lookup)

    @property
    def _missing(self) -> MissingTable:
        return MissingTable(self)

    @property
    def _categories(self) -> CategoryMethods:
        return CategoryMethods(self)

    @property
    def _day(self) -> TableDay:
        return TableDay(self)

    head = delegate("_day", TableDay.head)
    tail = delegate("_day", TableDay.tail)
    to_csv = delegate("_day", TableDay.to_csv)
    from_csv = classmethod(table_day.from_csv)
    make_nullable = delegate("_missing", MissingTable.make_nullable)
    null_counts = delegate("_missing", MissingTable.null_counts)
    categorize = delegate("_categories", CategoryMethods.categorize)
    decategorize = delegate("_categories", CategoryMethods.decategorize)
    groupby = delegate("_analysis", TableAnalysis.groupby)
    sort = delegate("_analysis", TableAnalysis.sort)
    unique = delegate("_analysis", TableAnalysis.unique)
    value_counts = delegate("_analysis", TableAnalysis.value_counts)

    def __repr__(self) -> str:
        return table_rows.described(self)

    def __str__(self) -> str:
        return table_rows.printed(self)
