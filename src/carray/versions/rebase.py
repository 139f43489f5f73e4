"""Putting a writer's pending changes on top of a version another writer published.

Two writers of one dataset on an object store (where nothing is locked) may both
work from version N; the first to publish N+1 wins.  The other re-reads the newest
version and, when their changes do not overlap, applies its own on top of it
(docs/spec/commit.md, "Rebasing"):

* its appended rows go after the winner's rows (several processes appending to one
  array, the common ingestion case, all get their rows in);
* its edits (the boxes it wrote, as :class:`EditLog` recorded them) are written again,
  unless a chunk they touch was changed by the winner: then
  :class:`carray.errors.ConflictError` names the array and the chunks, and the
  writer's changes stay pending (it may retry after a refresh, or discard them);
* attributes merge key by key (both changing one key differently is a conflict);
* a writer that reshaped the array (shrank it, or resized another axis) rebases only
  onto versions that changed no chunk, and a winner that did so conflicts with any
  change.

What is replayed is read from the writer's own state before it moves on, so the
memory a rebase takes is that of the changes it replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from carray.chunks.grid import NDGrid
from carray.chunks.keys import CoordKey, OrthoKey
from carray.errors import ConflictError

Box = tuple[tuple[int, int], ...]  # per axis: [lo, hi) in items


@dataclass
class EditLog:
    """What a writer changed in place since its last commit: the boxes it wrote (per
    axis, the span of positions, as a bound of the items changed) and whether it
    reshaped the array (a shrink, or another axis resized)."""

    boxes: list[Box] = field(default_factory=list)
    reshaped: bool = False

    def clear(self) -> None:
        self.boxes.clear()
        self.reshaped = False

    def note_key(self, key: OrthoKey | CoordKey) -> None:
        spans = []
        parts: Sequence[Any] = key.axes if isinstance(key, OrthoKey) else key.coords
        for positions in parts:
            if isinstance(positions, range):
                if not len(positions):
                    return
                lo, hi = min(positions[0], positions[-1]), max(positions[0], positions[-1])
            else:
                arr = np.asarray(positions)
                if not arr.size:
                    return
                lo, hi = int(arr.min()), int(arr.max())
            spans.append((int(lo), int(hi) + 1))
        self.boxes.append(tuple(spans))

    @property
    def empty(self) -> bool:
        return not self.boxes and not self.reshaped


def merge_attrs(base: Any, mine: Any, theirs: Any, what: str) -> Any:
    """Three-way merge of stored attributes (typed JSON objects): each key takes the side
    that changed it; both changing it differently is a conflict."""
    if not all(isinstance(x, dict) for x in (base, mine, theirs)):
        if mine == base:
            return theirs
        if theirs in (base, mine):
            return mine
        raise ConflictError(f"{what}: both writers changed the attributes", [what])
    out: dict[str, Any] = {}
    clashes = []
    for key in dict.fromkeys([*theirs, *mine]):
        b, m, t = base.get(key, _ABSENT), mine.get(key, _ABSENT), theirs.get(key, _ABSENT)
        value = t if m == b else m if t in (b, m) else _CLASH
        if value is _CLASH:
            clashes.append(key)
        elif value is not _ABSENT:
            out[key] = value
    if clashes:
        raise ConflictError(f"{what}: both writers changed attribute(s) "
                            f"{', '.join(map(repr, clashes))}", [f"{what}: attrs {clashes}"])
    return out


_ABSENT = object()
_CLASH = object()


@dataclass
class Replay:
    """A writer's changes, read out before it moves to the newer version: the boxes it
    edited with their values, and the rows it appended."""

    edits: list[tuple[OrthoKey, np.ndarray]]
    rows: np.ndarray | None
    attrs: Any


def overlapping(grid: NDGrid, chunks: set[int], boxes: Sequence[Box]) -> list[int]:
    """The chunks of ``chunks`` (numbers in ``grid``) that a box of ``boxes`` touches."""
    hit = []
    for n in sorted(chunks):
        region = grid.chunk_slices(grid.chunk_coords(n))
        for box in boxes:
            if all(lo < s.stop and s.start < hi for (lo, hi), s in zip(box, region,
                                                                         strict=True)):
                hit.append(n)
                break
    return hit


def plan(name: str, grid: NDGrid, base_shape: tuple[int, ...], mine_shape: tuple[int, ...],
         their_shape: tuple[int, ...], theirs_changed: set[int], log: EditLog
         ) -> list[Box]:
    """The boxes of edits to replay (clipped to the rows both sides had), after checking
    that the writer's changes and the winner's (``theirs_changed``: chunk numbers in
    ``grid``, the grid at the base shape grown to the winner's) do not overlap."""
    where = name or "the array"
    if mine_shape[1:] != base_shape[1:] or mine_shape[0] < base_shape[0] or log.reshaped:
        raise ConflictError(f"{where}: this writer reshaped it while another writer "
                            "changed it", [f"{where}: reshaped"])
    if their_shape[1:] != base_shape[1:] or their_shape[0] < base_shape[0]:
        raise ConflictError(f"{where}: another writer reshaped it (to {list(their_shape)})"
                            " while this writer changed it", [f"{where}: reshaped"])
    old_rows = base_shape[0]
    boxes = []
    for box in log.boxes:
        if box[0][0] >= old_rows:
            continue  # only rows this writer appended: replayed with them
        boxes.append(((box[0][0], min(box[0][1], old_rows)), *box[1:]))
    clash = overlapping(grid, theirs_changed, boxes)
    if clash:
        shown = ", ".join(map(str, clash[:8])) + (" ..." if len(clash) > 8 else "")
        raise ConflictError(f"{where}: another writer changed chunk(s) {shown} that this "
                            "writer changed too; refresh and apply the change again, or "
                            "discard it", [f"{where}: chunks {clash}"])
    return boxes


def box_key(box: Box, shape: tuple[int, ...]) -> OrthoKey:
    axes = tuple(range(lo, hi) for lo, hi in box)
    return OrthoKey(shape, axes, (), (), tuple(len(a) for a in axes))


__all__ = ["Box", "EditLog", "Replay", "box_key", "merge_attrs", "overlapping", "plan"]
