"""A table writer's pending changes put on top of a version another writer published
(object stores; see :mod:`carray.versions.rebase` for arrays, and
docs/spec/commit.md, "Rebasing").

Rows appended by this writer go after the other writer's rows; rows it edited in
place are written again, unless the other writer changed a chunk holding them in
the same column (:class:`carray.errors.ConflictError` names the columns and rows).
A writer or winner that added, dropped or reordered columns, or shrank the table,
conflicts with any change of the other.  What is replayed is read through the
table's own API, so every column kind (missing values, categories, strings, nested
fields) is written again as a user's change would be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from carray.errors import ConflictError
from carray.versions import rebase as rebasing


def _row_spans(engine: Any, state: Any, chunks: set[int]) -> list[tuple[int, int]]:
    """Rows (first axis) of ``chunks`` of a column's array at ``state``."""
    grid = engine.grid.resized(tuple(state.shape))
    spans = []
    for n in sorted(chunks):
        first = grid.chunk_slices(grid.chunk_coords(n))[0]
        spans.append((first.start, first.stop))
    return spans


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(max(x0, y0), min(x1, y1)) for x0, x1 in a for y0, y1 in b if x0 < y1 and y0 < x1]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def _column_of(table: Any) -> dict[str, str]:
    """Member name -> the table column it belongs to."""
    owners = {}
    for name, col in table.column_dict().items():
        for engine in _engines(col):
            owners[engine.member_name] = name
    return owners


def _engines(col: Any) -> list[Any]:
    from carray.table.columns.kinds import column_engines

    return list(column_engines(col))


@dataclass
class TableReplay:
    """What a table's writer puts on top of ``newer``: edited rows by column, appended
    rows, the merged attributes (see :func:`capture`)."""

    newer: Any
    edits: list[tuple[str, int, int, Any]]
    rows: Any
    attrs: Any

    def apply(self, table: Any, storage: Any) -> None:
        """Reopen ``table`` at ``newer`` and write the changes again (a failure part way
        leaves the replay to be applied again, from the start)."""
        storage.dataset.adopt_newer(self.newer)
        table.reopen_at_head()
        for column, lo, hi, values in self.edits:
            table.cols[column][lo:hi] = values
        if self.rows is not None and len(self.rows):
            table.append(self.rows)
        storage.take_attrs(self.attrs)


def capture(table: Any, storage: Any, newer: Any) -> TableReplay:
    """``table``'s changes since its last commit, to put on top of ``newer`` (a manifest
    of its dataset, in ``storage``, that another writer published); ConflictError when
    they overlap."""
    dataset = storage.dataset
    base = dataset.head
    where = str(table.rootdir)
    base_meta, their_meta = base.meta, newer.meta
    mine_len, old_len = len(table), int(base_meta.get("length", 0))
    their_len = int(their_meta.get("length", 0))
    storage.columns_changed(table)  # what this writer's next version would describe
    mine_meta = dataset.meta
    if their_meta.get("columns") != base_meta.get("columns") or \
            mine_meta.get("columns") != base_meta.get("columns"):
        if their_meta.get("columns") != base_meta.get("columns"):
            raise ConflictError(f"{where}: another writer changed the table's columns",
                                [f"{where}: columns"])
        raise ConflictError(f"{where}: this writer changed the table's columns while "
                            "another writer changed the table", [f"{where}: columns"])
    if their_len < old_len or mine_len < old_len:
        raise ConflictError(f"{where}: a writer shrank the table while the other changed it",
                            [f"{where}: length"])
    attrs = rebasing.merge_attrs(base_meta.get("attrs", {}), mine_meta.get("attrs", {}),
                                 their_meta.get("attrs", {}), f"{where} (attributes)")
    owners = _column_of(table)
    edited: dict[str, list[tuple[int, int]]] = {}
    clashes: list[str] = []
    for engine in table.engines():
        name = engine.member_name
        try:
            old, theirs = base.member(name), newer.member(name)
        except KeyError:
            raise ConflictError(f"{where}: array {name!r} is in one version only",
                                [name]) from None
        log = engine.pending_edits
        if log is None or log.reshaped:
            raise ConflictError(f"{where}: column array {name!r} was reshaped", [name])
        if not old.shape or old.shape[0] != old_len:
            continue  # not row by row (a string column's bytes): its rows' arrays say
        spans = _merge([(b[0][0], min(b[0][1], old_len)) for b in log.boxes
                        if b[0][0] < old_len])
        if not spans:
            continue
        column = owners.get(name, name)
        changed = engine.chunks_between(old, theirs)
        both = _overlap(spans, _row_spans(engine, theirs, changed))
        if both:
            clashes.append(f"{column}: rows {both[0][0]}..{both[-1][1] - 1}")
        edited.setdefault(column, []).extend(spans)
    if clashes:
        raise ConflictError(f"{where}: another writer changed rows this writer changed too "
                            f"({'; '.join(clashes)}); refresh and apply the change again, "
                            "or discard it", clashes)
    edits = [(column, lo, hi, table.cols[column][lo:hi])
             for column, spans in edited.items() for lo, hi in _merge(spans)]
    rows = table[old_len:mine_len] if mine_len > old_len else None
    return TableReplay(newer, edits, rows, attrs)


__all__ = ["TableReplay", "capture"]
