"""Table indexes: made, kept correct under every change, dropped, listed.

:class:`TableIndexes` is the part of a table that owns its indexes (``t.index``; the
table's ``create_index``, ``drop_index``, ``indexes``... call it, and its
changes call the hooks :meth:`TableIndexes.watch`, :meth:`~TableIndexes.before_commit`
and :meth:`~TableIndexes.column_dropped`); it uses the table's public API.  Queries use
the indexes through :mod:`carray.table.index.planner`.

An index describes rows ``[0, covered)`` of its column, except the ``dirty`` row ranges:
the chunks written since it was built.  Its column's engine tells a listener of this
handle about every full chunk it stores (an edit through the table or through the
column itself, an append completing a chunk); the partial last chunk, whose writes
it tells nobody of, is compared with its digest at each commit (and checked by the
writer's own queries meanwhile).  A query checks the dirty ranges and the rows past
``covered`` (the tail: appends, growth by a resize) itself.  So an append changes
nothing, an edit dirties its chunks and a shrink lowers ``covered``; when the tail or
the dirty rows grow past a share of the table, the commit rebuilds the index.

Where the state lives: in a versioned table each version records its indexes (their
kind, build, ``covered``, ``dirty`` and ``partial``) with its columns, so a version opened later
(``as_of``, ``version=``) reads the index as it was for that version, never one of
another state.  A build is a directory under ``__indexes__/`` that is never changed
once written, made before any version names it (a crash while building leaves the
table and its last version's index as they were) and deleted once no kept version
names it.  An in-memory table keeps its indexes on the handle.  bcolz-format tables
keep none (:class:`~carray.errors.IndexUnsupportedError`).  The layout:
docs/formats/table.md, "Indexes".
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
import weakref
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.errors import FormatError, IndexUnsupportedError
from carray.table.columns.kinds import categories_of, column_engines, read_valid
from carray.table.index.build import INDEX_CHUNKLEN
from carray.table.index.kinds import KINDS, BloomIndex, union
from carray.table.store import INDEX_DIR, MemoryTable, VersionedTable

#: Default memory of a build (bytes): runs of about 2 M int64 rows.
DEFAULT_MEMORY = 64 << 20
#: A tail this long (and an eighth of the indexed rows) is merged into the index at the
#: next commit; so are dirty rows past an eighth of them.
MERGE_ROWS, MERGE_SHARE = 1 << 16, 8


class _ChunkWatch:
    """Told by an indexed column's engine about every chunk it stores: the chunks a query
    must check until the next build (kept per handle until its next commit)."""

    def __init__(self, dirty: dict[str, set[int]], name: str) -> None:
        self.dirty, self.name = dirty, name

    def chunk_written(self, nchunk: int, stats: Any, stamp: Any) -> None:
        self.dirty.setdefault(self.name, set()).add(int(nchunk))

    def chunks_absent(self, first: int, count: int) -> None:
        pass  # rows past the indexed ones: a query checks them anyway

    def chunks_dropped(self, first: int) -> None:
        pass  # rows cut off: the table's length says so

    def chunks_restored(self, nchunks: list[int]) -> None:
        pass  # put back as they were: still marked, which only costs a check

    def committing(self, engine: Any, final: bool) -> None:
        pass


def _state_ok(state: dict[str, Any]) -> bool:
    """Whether a recorded state has the fields a query reads, of the right types."""
    dirty, partial = state.get("dirty"), state.get("partial")
    return isinstance(state.get("covered"), int) and isinstance(dirty, list) and all(
        isinstance(r, list) and len(r) == 2 and all(isinstance(v, int) for v in r)
        for r in dirty) and isinstance(partial, list) and len(partial) == 2 and \
        isinstance(partial[0], int) and isinstance(partial[1], str)


def _fixed_width(col: Any) -> bool:
    """Whether ``col`` holds fixed-width values an index can sort: a carray, or a column
    with missing values whose values are one (its validity says which rows count)."""
    return isinstance(col, carray) or \
        (hasattr(col, "valid") and isinstance(getattr(col, "data", None), carray))


def _digest(col: Any, lo: int, hi: int) -> str:
    """A digest of rows ``[lo, hi)`` of ``col`` (values and validity): the partial last
    chunk, whose writes its engine tells nobody of."""
    if hi <= lo:
        return ""
    h = hashlib.blake2b(np.ascontiguousarray(col.read_rows(range(lo, hi))).tobytes(),
                        digest_size=16)
    valid = read_valid(col, range(lo, hi))
    if valid is not None:
        h.update(np.packbits(valid).tobytes())
    return h.hexdigest()


class TableIndexes:
    """The indexes of ``table`` (module doc): each handle of a table has one, which keeps
    what that handle changed since its last commit."""

    def __init__(self, table: Any) -> None:
        self._table = weakref.ref(table)  # the table owns this part, not the other way
        self._memory: dict[str, dict[str, Any]] = {}  # an in-memory table's states
        self._opened: dict[str, Any] = {}  # readers of builds, by build
        self._dirty: dict[str, set[int]] = {}  # chunks written since the last commit
        self._watched: dict[str, Any] = {}  # column -> the engine listened to

    @property
    def table(self) -> Any:
        table = self._table()
        if table is None:
            raise ReferenceError("the table of these indexes is gone")
        return table

    def _where(self) -> str:
        return self.table.rootdir or "ctable"

    # -- where the state lives ------------------------------------------------------------

    def _index_states(self) -> dict[str, dict[str, Any]]:
        storage = self.table.storage
        if isinstance(storage, VersionedTable):
            return {k: dict(v) for k, v in storage.index_state().items() if isinstance(v, dict)}
        return {k: dict(v) for k, v in self._memory.items()}

    def _save_index_states(self, states: dict[str, dict[str, Any]]) -> None:
        storage = self.table.storage
        if isinstance(storage, VersionedTable):
            storage.save_index_state(states)
        else:
            self._memory = states

    def _build_dir(self, build: str) -> tuple[Any, str]:
        storage = self.table.storage
        return storage.store, storage.store.join(storage.root, INDEX_DIR, build)

    # -- building ---------------------------------------------------------------------------

    def _indexable(self, name: str) -> Any:
        storage = self.table.storage
        where = self._where()
        if not isinstance(storage, (VersionedTable, MemoryTable)):
            raise IndexUnsupportedError(f"{where}: a bcolz-format table keeps no indexes "
                                        "(open it without format='bcolz' to upgrade it)")
        col = self.table.column_dict().get(name)
        if col is None:
            raise KeyError(f"{where}: no column {name!r}")
        if not _fixed_width(col):
            raise IndexUnsupportedError(f"{where}: column {name!r} is not a column of "
                                        "fixed-width values (string and nested columns "
                                        "cannot be indexed yet)")
        if categories_of(col) is not None:
            raise IndexUnsupportedError(f"{where}: column {name!r} is categorical: its "
                                        "codes cannot be indexed yet")
        return col

    def _build(self, name: str, kind: str, memory: int) -> dict[str, Any]:
        """Build a ``kind`` index of column ``name`` over every row; its state."""
        col = self._indexable(name)
        length = len(self.table)
        build = f"{kind}-{uuid.uuid4().hex[:16]}"
        on_disk = isinstance(self.table.storage, VersionedTable)
        store, where = self._build_dir(build) if on_disk else (None, "")
        scratch: list[carray] = []

        def new_array(part: str, empty: np.ndarray) -> carray:
            rootdir = store.url(store.join(where, part)) if store is not None else None
            arr = carray(empty, rootdir=rootdir, mode="w", chunklen=INDEX_CHUNKLEN,
                         expectedlen=max(length, 1),
                         fsync=self.table.fsync)
            if part.startswith("run"):
                scratch.append(arr)
            return arr

        try:
            arrays = KINDS[kind].build(col, length, memory, new_array)
        finally:
            for arr in scratch:
                rootdir = arr.rootdir
                arr.close()
                if rootdir is not None and store is not None:
                    with contextlib.suppress(OSError):
                        store.rmtree(store.join(where, rootdir.rstrip("/").rsplit("/", 1)[-1]))
        for arr in arrays.values():
            arr.flush()
        self._opened[build] = self._reader(kind, arrays, col)
        self._dirty.pop(name, None)  # the build has them
        partial = length - length % col.chunklen
        return {"kind": kind, "build": build, "covered": length, "dirty": [],
                "partial": [partial, _digest(col, partial, length)], "memory": int(memory),
                "dtype": col.dtype.str}

    @staticmethod
    def _reader(kind: str, arrays: dict[str, Any], col: Any) -> Any:
        index = KINDS[kind](arrays)
        if isinstance(index, BloomIndex):
            index.dtype = col.dtype
        return index

    def create(self, col: str, kind: str = "sorted", *, memory: int = DEFAULT_MEMORY
                     ) -> None:
        """Index column ``col``; queries then use it by themselves where it is cheaper
        than a scan (:meth:`explain` says which).

        Parameters
        ----------
        col : str
            A column of fixed-width values (numbers, dates, booleans, fixed strings;
            ``bloom``: not strings).
        kind : {'sorted', 'bloom'}
            ``sorted``: the values sorted with their row numbers (equality, ``in``,
            ranges).  ``bloom``: per-block Bloom filters (equality and ``in`` on
            unsorted columns of many distinct values; small and quick to build).
        memory : int
            Bytes the build may hold decoded at once (the sort goes in runs).

        Raises
        ------
        IndexUnsupportedError
            A bcolz-format table, a string or nested column, or an unknown kind.
        """
        self.table.check_writable()
        if kind not in KINDS:
            raise IndexUnsupportedError(f"unknown index kind {kind!r} (known: {sorted(KINDS)})")
        if memory < 1 << 16:
            raise ValueError(f"memory must be at least 64 KiB, got {memory}")
        state = self._build(col, kind, memory)
        states = self._index_states()
        states[col] = state
        self._save_index_states(states)
        self.watch()
        self.table.flush(f"create index on {col!r}")

    def drop(self, col: str) -> None:
        """Drop the index of column ``col`` (its files go once no kept version uses them).

        Raises
        ------
        IndexUnsupportedError
            ``col`` has no index.
        """
        self.table.check_writable()
        states = self._index_states()
        if col not in states:
            raise IndexUnsupportedError(f"{self._where()}: column {col!r} has "
                                        f"no index (indexes: {sorted(states)})")
        self._opened.pop(str(states.pop(col).get("build")), None)
        self._save_index_states(states)
        self.table.flush(f"drop index on {col!r}")

    def facts(self) -> dict[str, dict[str, Any]]:
        """The indexes by column: ``kind``, ``rows`` (indexed), ``tail`` (rows past them,
        scanned), ``dirty`` (rows of chunks written since the build, checked), ``usable`` (False:
        its build cannot be read, queries scan) and ``cbytes``."""
        out = {}
        n = len(self.table)
        for name, state in self._index_states().items():
            found = self.lookup(name)
            state = self._with_pending(name, state) if found is not None else state
            covered = min(int(state.get("covered", 0)), n)
            arrays = found[1].arrays.values() if found is not None else ()
            out[name] = {"kind": state.get("kind"), "rows": covered, "tail": n - covered,
                         "dirty": sum(hi - lo for lo, hi in state.get("dirty", [])),
                         "usable": found is not None,
                         "cbytes": sum(int(a.cbytes) for a in arrays)}
        return out

    def has_any(self) -> bool:
        """Whether any column has an index (a query asks before planning)."""
        storage = self.table.storage
        if isinstance(storage, VersionedTable):
            return bool(storage.index_state())
        return bool(self._memory)

    def lookup(self, name: str) -> tuple[dict[str, Any], Any] | None:
        """The state and reader of column ``name``'s index, or None when it has none
        usable (not indexed, or its build cannot be read: then queries scan)."""
        state = self._index_states().get(name)
        col = self.table.column_dict().get(name)
        if state is None or col is None or not _fixed_width(col) or \
                categories_of(col) is not None:
            return None
        kind, build = state.get("kind"), state.get("build")
        if kind not in KINDS or not isinstance(build, str) or \
                not _state_ok(state) or state.get("dtype") != col.dtype.str:
            return None
        state = self._with_pending(name, state, query=True)
        index = self._opened.get(build)
        if index is None:
            if not isinstance(self.table.storage, VersionedTable):
                return None
            store, where = self._build_dir(build)
            try:
                arrays = {part: carray(rootdir=store.url(store.join(where, part)), mode="r")
                          for part in KINDS[kind].names}
                index = self._opened[build] = self._reader(kind, arrays, col)
            except (OSError, FormatError, KeyError, ValueError):
                return None  # a build that is gone or damaged: scan
        return state, index

    # -- kept correct: the hooks the table's changes call ---------------------------------------

    def watch(self) -> None:
        """Listen to the engines of the indexed columns (called whenever columns open)."""
        states = self._index_states()
        if not states:
            return
        dirty, watched = self._dirty, self._watched
        for name in states:
            col = self.table.column_dict().get(name)
            engines = list(column_engines(col)) if _fixed_width(col) else []
            if engines and watched.get(name) is not engines[0]:
                for engine in engines:  # a nullable column's validity too
                    engine.add_listener(_ChunkWatch(dirty, name))
                watched[name] = engines[0]

    def _with_pending(self, name: str, state: dict[str, Any], query: bool = False
                      ) -> dict[str, Any]:
        """``state`` with the chunks this handle wrote since its last commit dirty too; for
        a ``query`` of a writable handle, the partial last chunk too when its rows no
        longer match their digest (its writes are told to nobody)."""
        chunks = self._dirty.get(name)
        t = self.table
        covered = int(state["covered"])
        partial, digest = int(state["partial"][0]), state["partial"][1]
        changed = query and t.mode != "r" and partial < covered and \
            digest != _digest(t.column_dict()[name], partial, min(covered, len(t)))
        extra = [(partial, covered)] if changed else []
        if not chunks and not extra:
            return state
        cl = t.column_dict()[name].chunklen
        extra += [(c * cl, min((c + 1) * cl, covered)) for c in chunks or () if c * cl < covered]
        return {**state, "dirty": [list(r) for r in union(
            [(int(lo), int(hi)) for lo, hi in state["dirty"]] + extra)]}

    def _settled(self, col: Any, state: dict[str, Any], n: int) -> dict[str, Any]:
        """``state`` as the commit of a table of ``n`` rows records it: the pending chunks
        dirty, what a shrink cut off forgotten, the partial last chunk dirty unless its
        digest says it is unchanged."""
        covered = int(state["covered"])
        partial, digest = int(state["partial"][0]), state["partial"][1]
        dirty = [(int(lo), int(hi)) for lo, hi in state["dirty"]]
        if partial < covered and (n < covered or digest != _digest(col, partial, covered)):
            dirty.append((partial, min(covered, n)))
            partial, digest = min(covered, n), ""
        covered = min(covered, n)
        aligned = covered - covered % col.chunklen
        if partial > aligned:
            # A shrink made a full chunk partial: digest its rows now, and check them
            # until the next build (edits since the last commit reached its decoded
            # tail, which tells nobody: the digest cannot vouch for them).
            dirty.append((aligned, covered))
            partial, digest = aligned, _digest(col, aligned, covered)
        dirty = [(lo, min(hi, covered)) for lo, hi in dirty if lo < covered]
        return {**state, "covered": covered, "partial": [min(partial, covered), digest],
                "dirty": [list(r) for r in union(dirty)]}

    def before_commit(self) -> None:
        """Make every index's state fit the table about to be committed (:meth:`_settled`),
        drop indexes of dropped columns, and rebuild those whose tail or dirty rows grew
        too long."""
        states = self._index_states()
        pending = self._dirty
        if not states:
            pending.clear()
            return
        n, changed = len(self.table), False
        for name, state in list(states.items()):
            col = self.table.column_dict().get(name)
            if not _fixed_width(col) or not _state_ok(state):
                del states[name]
                changed = True
                continue
            new = self._settled(col, self._with_pending(name, state), n)
            if new != state:
                states[name] = state = new
                changed = True
            covered = state["covered"]
            tail = n - covered
            stale = sum(hi - lo for lo, hi in state["dirty"])
            if (tail > 0 and (tail > MERGE_ROWS or not covered) and tail * MERGE_SHARE > covered) \
                    or stale * MERGE_SHARE > covered:
                # A failed rebuild (disk full) must not fail the commit of the columns: the
                # old state stays true, its tail and dirty rows checked by every query.
                with contextlib.suppress(OSError, MemoryError):
                    states[name] = self._build(name, state["kind"],
                                               int(state.get("memory", DEFAULT_MEMORY)))
                    changed = True
        pending.clear()
        if changed:
            self._save_index_states(states)

    def column_dropped(self, name: str) -> None:
        """Forget the index of column ``name``, which the table dropped."""
        states = self._index_states()
        if name in states:
            del states[name]
            self._save_index_states(states)
