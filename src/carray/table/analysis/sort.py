"""Out-of-core, stable sort of a table by one or several key columns.

1. Runs: ``run`` whole rows at a time, with their keys and row numbers, are sorted in
   memory and, unless the whole table is one run, spilled to a temporary directory
   as compressed columns.
2. Merge: a block of every run is held; everything up to the smallest of the blocks'
   last keys is surely next in the output, so it is taken from every block at once
   and ordered by one vectorised sort (no per-row heap).
   The rows travel with their keys, so every value is read, spilled and merged once
   (no random reads of the source), and the merged batches are appended to the result.

Row numbers are the last key, so equal keys keep their order (stable).  A missing
key (read through :func:`carray.table.columns.kinds.read_valid`; NaN and NaT too) sorts
last, or first with ``na_position='first'``, whatever the direction.  Categorical
keys sort in their dictionary's order (their codes), as pandas does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from carray.array.array import carray
from carray.errors import ContainerExistsError
from carray.table.analysis import groupby_kernels as kern
from carray.table.analysis.groupby_kernels import GroupByError
from carray.table.columns.kinds import (
    empty_like,
    like_column,
    read_any,
    read_codes,
    read_valid,
)
from carray.table.columns.strings import StringColumn, decode, encode

_DEFAULT_MEMORY = 256 << 20
# Working copies per byte of a row: the rows read, their sorted copy and the sort keys
# and order are alive together while a run is sorted.
_COPIES = 3
# Rows a run or a run's block holds at least, however small the memory given.
_MIN_ROWS = 16
# Rows a merge reads from each run at a time, when the memory allows.
_MERGE_ROWS = 4096

Batch = dict[str, np.ndarray]


class _Keys:
    """How the key columns turn into sortable arrays and compare."""

    def __init__(self, table: Any, by: list[str], ascending: list[bool], na_last: bool
                 ) -> None:
        self.table, self.by, self.ascending, self.na_last = table, by, ascending, na_last
        self.cols = [table.cols[k] for k in by]

    def row_bytes(self) -> int:
        """Bytes one row takes in memory: its keys, flags and number, and every column's
        value (strings: their average, plus a pointer and a Python object's header)."""
        total = 8 + len(self.by)
        for col in [*self.cols, *(self.table.cols[n] for n in self.table.names)]:
            total += _value_bytes(col)
        return total

    def read(self, rows: range) -> Batch:
        """The keys of ``rows``: ``f<i>`` (0 sorts first) and ``k<i>`` per key, ``row``."""
        batch: Batch = {"row": np.arange(rows.start, rows.stop, dtype=np.int64)}
        for i, col in enumerate(self.cols):
            codes = read_codes(col, rows)
            valid = read_valid(col, rows)
            values = np.asarray(codes) if codes is not None else read_any(col, rows)
            missing = kern.missing_of(values, valid) if codes is None else \
                (None if valid is None else ~valid)
            if missing is None:
                missing = np.zeros(len(values), bool)
            elif missing.any():  # one filler, so missing keys tie until the row number
                values = values.copy()
                values[missing] = "" if values.dtype == object else np.zeros((), values.dtype)
            batch[f"f{i}"] = (missing if self.na_last else ~missing).astype(np.uint8)
            batch[f"k{i}"] = values
        for name in self.table.names:  # the rows travel with their keys
            col = self.table.cols[name]
            codes = read_codes(col, rows)  # a categorical column travels as its codes
            batch[f"c:{name}"] = np.asarray(codes) if codes is not None else read_any(col, rows)
            valid = read_valid(col, rows) if codes is None else None
            if valid is not None:  # and a column with missing values with its validity
                batch[f"v:{name}"] = valid
        return batch

    def output(self, batch: Batch) -> dict[str, Any]:
        """The table's columns of a sorted batch, as the result table takes them: missing
        values masked, categorical columns as codes of the source's dictionary."""
        return {name: like_column(self.table.cols[name], batch[f"c:{name}"],
                                  batch.get(f"v:{name}")) for name in self.table.names}

    def order(self, batch: Batch) -> np.ndarray:
        """The stable order of a batch of keys."""
        sort_keys: list[np.ndarray] = [batch["row"]]
        for i in reversed(range(len(self.by))):
            sort_keys.append(_sortable(batch[f"k{i}"], self.ascending[i]))
            sort_keys.append(batch[f"f{i}"])
        return np.lexsort(sort_keys)

    def up_to(self, batch: Batch, bound: Batch) -> np.ndarray:
        """Booleans: which rows of ``batch`` sort at or before row 0 of ``bound``."""
        res = batch["row"] <= bound["row"][0]
        for i in reversed(range(len(self.by))):
            # A one-row array, not a scalar: numpy would turn a str into its own string
            # type, which drops trailing NULs ('a\x00' would equal 'a').
            k, b = batch[f"k{i}"], bound[f"k{i}"][:1]
            before = np.asarray(k < b if self.ascending[i] else k > b, dtype=bool)
            res = before | (np.asarray(k == b, dtype=bool) & res)
            f, bf = batch[f"f{i}"], bound[f"f{i}"][0]
            res = (f < bf) | ((f == bf) & res)
        return res


def _sortable(values: np.ndarray, ascending: bool) -> np.ndarray:
    """Numbers that sort as ``values`` do (descending: reversed)."""
    if values.dtype.kind in "mM":
        values = values.view(np.int64)
    elif values.dtype.kind == "b":
        values = values.view(np.uint8)
    elif values.dtype.kind not in "iuf":  # strings: their rank among the batch's values
        values, _ = kern.factorize(values)
    if ascending:
        return values
    return -values if values.dtype.kind == "f" else ~values


def _take(batch: Batch, sel: Any) -> Batch:
    return {k: v[sel] for k, v in batch.items()}


def _concat(batches: Sequence[Batch]) -> Batch:
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


class _Spill:
    """A sorted run on disk: the fixed-size fields packed in one record array, with the
    start and end of every string in the UTF-8 bytes of its field, kept in an array of
    its own.  Chunks of about the ``blen`` rows the merge reads at a time, so that a
    read decodes no more than it uses.  Scratch: bcolz layout (no versions to keep),
    nothing synced."""

    def __init__(self, where: str, blen: int) -> None:
        self.where, self.blen, self.length = where, max(blen, 1), 0
        self.fixed: Any = None
        self.strings: dict[str, Any] = {}  # field -> its bytes
        self.names: list[str] = []

    def append(self, batch: Batch) -> None:
        if not self.names:
            self.names = list(batch)
        fields: dict[str, np.ndarray] = {}
        for i, n in enumerate(self.names):
            if batch[n].dtype != object:
                fields[n] = batch[n]
                continue
            lengths, data = encode(batch[n])
            if n not in self.strings:
                self.strings[n] = carray(np.zeros(0, np.uint8), chunklen=1 << 16,
                                         rootdir=os.path.join(self.where, f"s{i}"),
                                         mode="w", fsync=False, format="bcolz")
            ends = len(self.strings[n]) + np.cumsum(lengths)
            fields[f"{n}:start"], fields[f"{n}:end"] = ends - lengths, ends
            self.strings[n].append(data)
        rec = np.empty(len(batch["row"]), dtype=[(n, v.dtype, v.shape[1:])
                                                 for n, v in fields.items()])
        for n, v in fields.items():
            rec[n] = v
        if self.fixed is None:
            self.fixed = carray(rec, rootdir=os.path.join(self.where, "fixed"), mode="w",
                                fsync=False, format="bcolz", chunklen=self.blen)
        else:
            self.fixed.append(rec)
        self.length += len(rec)

    def read(self, rows: range) -> Batch:
        rec = self.fixed.read_rows(rows)
        out = {}
        for n in self.names:
            if n not in self.strings:
                out[n] = rec[n]
                continue
            if len(rec) == 0:
                out[n] = np.zeros(0, dtype=object)
                continue
            first, ends = int(rec[f"{n}:start"][0]), rec[f"{n}:end"]
            data = self.strings[n].read_rows(range(first, int(ends[-1])))
            out[n] = decode(np.concatenate([[first], ends]), data, as_object=True)
        return out

    def drop(self) -> None:
        """Close the run and delete its files."""
        for col in [self.fixed, *self.strings.values()]:
            if col is not None:
                col.close()
        shutil.rmtree(self.where, ignore_errors=True)


class _Run:
    """A cursor over one sorted run on disk, a block of ``blen`` rows at a time."""

    def __init__(self, run: _Spill, blen: int) -> None:
        self.run, self.blen, self.next = run, blen, 0
        self.length = run.length
        self.buf: Batch = {}
        self.refill()

    def refill(self) -> None:
        stop = min(self.next + self.blen, self.length)
        self.buf = self.run.read(range(self.next, stop))
        self.next = stop

    @property
    def more(self) -> bool:
        """Whether rows remain on disk beyond the block held."""
        return self.next < self.length

    def size(self) -> int:
        return len(self.buf["row"])


def _merge(keys: _Keys, runs: list[_Spill], blen: int) -> Iterator[Batch]:
    """The rows in sorted order, batch by batch, from sorted runs."""
    cursors = [_Run(r, blen) for r in runs]
    while cursors:
        # Whatever sorts before the smallest last key of a block whose run goes on
        # beyond it cannot be preceded by a row not yet read.
        bound: Batch | None = None
        for c in cursors:
            if c.more:
                last = _take(c.buf, slice(c.size() - 1, c.size()))
                if bound is None or keys.up_to(last, bound)[0]:
                    bound = last
        taken = []
        for c in cursors:
            count = c.size() if bound is None else int(keys.up_to(c.buf, bound).sum())
            if count:
                taken.append(_take(c.buf, slice(0, count)))
                c.buf = _take(c.buf, slice(count, None))
        if not taken and bound is not None:  # the bound's own block is always taken
            raise RuntimeError("sort merge made no progress: keys do not compare as sorted")
        if taken:
            batch = _concat(taken)
            yield _take(batch, keys.order(batch))
        for c in cursors:
            if c.size() == 0 and c.more:
                c.refill()
        cursors = [c for c in cursors if c.size() or c.more]


def _runs(keys: _Keys, run_rows: int, blen: int, spill: str) -> list[_Spill]:
    """The table as sorted runs of ``run_rows`` rows, spilled under ``spill``."""
    runs = []
    n = len(keys.table)
    for i, lo in enumerate(range(0, n, run_rows)):
        batch = keys.read(range(lo, min(lo + run_rows, n)))
        run = _Spill(os.path.join(spill, f"run{i}"), blen)
        run.append(_take(batch, keys.order(batch)))
        runs.append(run)
    return runs


def sorted_rows(keys: _Keys, memory: int, spill: str) -> Iterator[Batch]:
    """Every row of the table in sorted order, in batches.

    At most ``fan`` runs are merged at once, each read ``blen`` rows at a time; more
    runs are first merged ``fan`` by ``fan`` into longer ones (each level rewrites the
    rows once: reads of a few thousand rows keep the merge's per-read cost small)."""
    n = len(keys.table)
    row = keys.row_bytes()
    run_rows = max(_MIN_ROWS, memory // (_COPIES * row))
    if n <= run_rows:
        batch = keys.read(range(0, n))
        yield _take(batch, keys.order(batch))
        return
    fan = max(2, memory // (_COPIES * row * _MERGE_ROWS))
    blen = max(_MIN_ROWS, memory // (_COPIES * row * fan))
    runs = _runs(keys, run_rows, blen, spill)
    try:
        level = 0
        while len(runs) > fan:
            level += 1
            longer = []
            for g in range(0, len(runs), fan):
                if g + 1 == len(runs):  # a run left alone goes on as it is
                    longer.append(runs[g])
                    continue
                run = _Spill(os.path.join(spill, f"level{level}-{g // fan}"), blen)
                longer.append(run)
                for batch in _merge(keys, runs[g:g + fan], blen):
                    run.append(batch)
                for done in runs[g:g + fan]:
                    done.drop()
            runs = longer
        yield from _merge(keys, runs, blen)
    finally:
        for r in runs:
            r.drop()


def _value_bytes(col: Any) -> int:
    """Bytes one row of a column takes in memory (strings: their average, as objects)."""
    if isinstance(col, StringColumn):
        return 64 + col.nbytes // max(len(col), 1)
    return max(1, col.dtype.itemsize * int(np.prod(col.shape[1:], dtype=np.int64)))


def _check(table: Any, by: str | Sequence[str], ascending: bool | Sequence[bool],
           na_position: str) -> tuple[list[str], list[bool]]:
    keys = kern.key_columns(table, by, "sort")
    asc = [bool(ascending)] * len(keys) if isinstance(ascending, (bool, np.bool_)) else \
        [bool(a) for a in ascending]
    if len(asc) != len(keys):
        raise GroupByError(f"{len(asc)} directions in 'ascending' for {len(keys)} keys")
    if na_position not in ("last", "first"):
        raise GroupByError(f"na_position is 'last' or 'first', not {na_position!r}")
    return keys, asc


def _sync_tree(path: str) -> None:
    """Flush every file under ``path`` (and the directories) to the disk."""
    for root, _, files in os.walk(path):
        for name in [*files, "."]:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def sort_table(table: Any, by: str | Sequence[str], ascending: bool | Sequence[bool],
               na_position: str, memory: int | None, make: Callable[..., Any],
               rootdir: Any = None, mode: str = "w") -> Any:
    """``table`` sorted (see :meth:`carray.table.analysis.methods.TableAnalysis.sort`).

    A local ``rootdir`` is written beside its place and renamed into it once whole, so a
    failure leaves nothing there (and a table it replaces untouched)."""
    names, asc = _check(table, by, ascending, na_position)
    keys = _Keys(table, names, asc, na_position == "last")
    memory = memory or _DEFAULT_MEMORY
    final = os.fspath(rootdir) if rootdir is not None else None
    if final is None or "://" in final:  # in memory, or a store without renames
        spill = tempfile.mkdtemp(prefix="carray-sort-")
        try:
            return _sort_into(table, keys, memory, make, final, spill, durable=True)
        finally:
            shutil.rmtree(spill, ignore_errors=True)
    if os.path.exists(final) and mode != "w":
        raise ContainerExistsError(f"{final}: already exists; pass mode='w' to replace it")
    spill = tempfile.mkdtemp(prefix=".carray-sort-",
                             dir=os.path.dirname(os.path.abspath(final)))
    try:
        target = os.path.join(spill, "result")
        _sort_into(table, keys, memory, make, target, spill, durable=False).close()
        _sync_tree(target)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.replace(target, final)
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    return make(None, rootdir=final, mode="a")


def _sort_into(table: Any, keys: _Keys, memory: int, make: Callable[..., Any],
               target: str | None, spill: str, durable: bool) -> Any:
    """The sorted table, built at ``target`` (or in memory), runs spilled under
    ``spill``; one commit at the end (one version)."""
    # The source's chunk length, not one sized for a table of unknown length: what the
    # result holds unwritten is a chunk per column.
    chunklen = min((getattr(table.cols[n], "chunklen", 0) or 1 << 15 for n in table.names),
                   default=1 << 15)
    out = make({n: empty_like(table.cols[n]) for n in table.names}, rootdir=target,
               mode="w", auto_flush=False, fsync=durable, chunklen=chunklen)
    try:
        for batch in sorted_rows(keys, memory, spill):
            out.append(keys.output(batch))
        out.flush()
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to report
            out.close()
        raise
    return out
