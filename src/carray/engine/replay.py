"""An array writer's changes put on top of a version another writer published (the
rules are :mod:`carray.versions.rebase`'s): what is captured, and how it is applied.

The changes are read out of the writer's own state first (:func:`capture`), before
anything moves; :meth:`Replay.apply` then takes the newer version as the base, puts
the engine back to it and writes the changes again.  A failure part way (an I/O
error) leaves the replay with the engine, which applies it again, from the start,
at its next flush: the changes are never lost, and never published on a base they
were not put on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from carray.errors import ConflictError
from carray.versions import rebase as rebasing

if TYPE_CHECKING:
    from carray.chunks.grid import NDGrid
    from carray.chunks.keys import OrthoKey
    from carray.layouts.base import Layout


class Engine(Protocol):
    """What a replay asks of the array's engine (:class:`carray.engine.core.ArrayEngine`)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def grid(self) -> NDGrid: ...
    def describe(self) -> str: ...
    def settle(self, wait: bool = True) -> None: ...
    def reset(self) -> None: ...
    def read(self, okey: OrthoKey, out: np.ndarray | None = None) -> np.ndarray: ...
    def rows_key(self, rows: range) -> OrthoKey: ...
    def write(self, okey: OrthoKey, values: np.ndarray) -> None: ...
    def append(self, arr: np.ndarray) -> None: ...


@dataclass
class Replay:
    """The newer version, and what to write on top of it: edited boxes with their
    values, appended rows, the merged attributes.  ``index_only``: the newer version
    changed no chunk, so the working index is kept, only its base moves."""

    newer: Any
    edits: list[tuple[rebasing.Box, np.ndarray]]
    rows: np.ndarray | None
    attrs: Any
    index_only: bool = False

    def apply(self, engine: Engine, layout: Layout) -> None:
        dataset = layout.versioned_dataset()
        dataset.adopt_newer(self.newer)
        if self.index_only:
            layout.rebase_index(self.newer.member(getattr(layout, "member_name", "")))
            layout.take_attrs(self.attrs)
            return
        engine.reset()
        for box, values in self.edits:
            engine.write(rebasing.box_key(box, engine.shape), values)
        if self.rows is not None:
            engine.append(self.rows)
        layout.take_attrs(self.attrs)


def capture(engine: Engine, layout: Layout, newer: Any) -> Replay:
    """What of ``engine``'s pending changes goes on top of ``newer`` (ConflictError when
    they overlap the changes that made it)."""
    dataset = layout.versioned_dataset()
    name = getattr(layout, "member_name", "")
    base = dataset.state(name)
    try:
        theirs = newer.member(name)
    except KeyError:
        raise ConflictError(f"{engine.describe()}: another writer removed it",
                            [name]) from None
    engine.settle()
    where = name or engine.describe()
    attrs = rebasing.merge_attrs(base.attrs, layout.stored_attrs, theirs.attrs, where)
    changed = layout.chunks_between(base, theirs)
    if not changed and tuple(theirs.shape) == tuple(base.shape):
        return Replay(newer, [], None, attrs, index_only=True)
    mine, old, their_shape = engine.shape, tuple(base.shape), tuple(theirs.shape)
    boxes = rebasing.plan(where, engine.grid.resized(their_shape), old, mine, their_shape,
                          changed, layout.edits)
    edits = [(box, engine.read(rebasing.box_key(box, mine))) for box in boxes]
    rows = engine.read(engine.rows_key(range(old[0], mine[0]))) if mine[0] > old[0] \
        else None
    return Replay(newer, edits, rows, attrs)


__all__ = ["Replay", "capture"]
