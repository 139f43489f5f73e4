"""Free space in the data files of a superchunk dataset.

A byte of a data file is free when no kept version's index and no record written
since the last commit refers to it.  New records go into free extents (first fit,
the extent a chunk left behind first) before the end of a file, so that an
edit-heavy workload reuses what it replaces instead of growing the files.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

Key = tuple[int, int]


def used_extents(superchunksize: int, pages: Iterable[tuple[int, np.ndarray]]
                 ) -> dict[Key, list[tuple[int, int]]]:
    """The extents ``(offset, room)`` per data file of the stored records that index
    ``pages`` (``(first chunk, entries)`` pairs) refer to."""
    found: list[np.ndarray] = []  # rows of (superchunk, gen, off, room)
    for first, entries in pages:
        live = np.flatnonzero(entries["off"] >= 0)
        if live.size:
            e = entries[live]
            found.append(np.stack([(first + live) // superchunksize, e["gen"], e["off"],
                                   e["room"]], axis=1).astype(np.int64))
    if not found:
        return {}
    rows = np.concatenate(found)
    rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]  # by file, offset
    cuts = np.flatnonzero(np.any(np.diff(rows[:, :2], axis=0) != 0, axis=1)) + 1
    return {(int(g[0, 0]), int(g[0, 1])): list(zip(g[:, 2].tolist(), g[:, 3].tolist(),
                                                     strict=True))
            for g in np.split(rows, cuts)}


class FreeSpace:
    """Free extents ``(offset, size)`` per data file, sorted and coalesced."""

    def __init__(self) -> None:
        self._free: dict[Key, list[list[int]]] = {}

    @classmethod
    def build(cls, files: dict[Key, tuple[int, int]],
              used: Mapping[Key, Iterable[tuple[int, int]]]) -> FreeSpace:
        """The free space of ``files`` (key -> (first record byte, size)) given the
        extents ``used`` (key -> (offset, room)) that something refers to."""
        space = cls()
        for key, (start, size) in files.items():
            pos = start
            for off, room in sorted(used.get(key, ())):
                if off > pos:
                    space.add(key, pos, off - pos)
                pos = max(pos, off + room)
            if size > pos:
                space.add(key, pos, size - pos)
        return space

    def add(self, key: Key, off: int, size: int) -> None:
        """``size`` bytes at ``off`` of file ``key`` are free."""
        if size <= 0:
            return
        ext = self._free.setdefault(key, [])
        i = bisect.bisect_left(ext, [off, 0])
        # Merge with the extent before and the one after when they touch.
        if i > 0 and ext[i - 1][0] + ext[i - 1][1] >= off:
            prev = ext[i - 1]
            end = max(prev[0] + prev[1], off + size)
            prev[1] = end - prev[0]
            i -= 1
        else:
            ext.insert(i, [off, size])
        cur = ext[i]
        while i + 1 < len(ext) and ext[i + 1][0] <= cur[0] + cur[1]:
            nxt = ext.pop(i + 1)
            cur[1] = max(cur[0] + cur[1], nxt[0] + nxt[1]) - cur[0]

    def take(self, key: Key, need: int, want: int, prefer: int | None = None
             ) -> tuple[int, int] | None:
        """An extent of file ``key`` for a record of ``need`` bytes that would like
        ``want`` (with its spare room): ``(offset, room)``, no longer free; None when
        no extent fits.  ``prefer``: an offset to use if an extent starts there."""
        ext = self._free.get(key)
        if not ext:
            return None
        pick = None
        if prefer is not None:
            i = bisect.bisect_left(ext, [prefer, 0])
            if i < len(ext) and ext[i][0] == prefer and ext[i][1] >= need:
                pick = i
        if pick is None:
            pick = next((i for i, (_, size) in enumerate(ext) if size >= need), None)
            if pick is None:
                return None
        off, size = ext[pick]
        room = size if size < want + 64 else want  # a sliver left over is kept with it
        if room == size:
            ext.pop(pick)
        else:
            ext[pick] = [off + room, size - room]
        return off, room

    def free_bytes(self, key: Key) -> int:
        return sum(size for _, size in self._free.get(key, ()))

    def tail(self, key: Key, size: int) -> int:
        """Where the free space at the end of a file of ``size`` bytes begins (``size``
        when its last byte is in use), taken out of the free list."""
        ext = self._free.get(key)
        if ext and ext[-1][0] + ext[-1][1] >= size:
            return ext.pop()[0]
        return size

    def drop(self, key: Key) -> None:
        self._free.pop(key, None)

    def files(self) -> list[Key]:
        return sorted(self._free)


class SpaceKeeper:
    """Where a superchunk dataset's new records go, and when old ones become free.

    A record replaced since the last commit was either written since (nothing refers
    to it: free at once, once the change that replaced it cannot be undone) or is
    part of the published version (it stays until no kept version refers to it:
    :meth:`reclaim` after each commit).  Free extents are learnt the first time a
    rewrite needs them, from what every kept version refers to.

    Parameters
    ----------
    files : DataFiles
        The dataset's files (sizes, where records start, appending).
    superchunksize : int
        Chunks per superchunk.
    reuse : bool
        Whether new records may go into free extents (not for Bloscpack-compatible
        files, whose records must stay in order).
    used : callable
        ``used()`` -> the extents ``{(k, gen): [(off, room), ...]}`` that the kept
        versions and the working index refer to (to learn the free space).
    """

    def __init__(self, files: Any, superchunksize: int, reuse: bool,
                 used: Callable[[], dict[Key, list[tuple[int, int]]]]) -> None:
        self._files = files
        self._S = superchunksize
        self.reuse = reuse
        self._used = used
        self._space: FreeSpace | None = None
        self._gens: dict[int, int] | None = None
        self._uncommitted: dict[tuple[int, int, int], int] = {}
        self._superseded: list[tuple[int, Any]] = []
        self._pending: list[tuple[int, Any, int]] = []
        self._deferred: list[tuple[Key, int, int]] = []
        self._log: list[tuple[str, Any]] | None = None
        self._last_free: dict[int, tuple[int, int]] = {}
        self.compact: set[int] = set()  # superchunks worth rewriting whole

    # -- generations ------------------------------------------------------------------------

    def gen(self, k: int) -> int:
        """The generation new records of superchunk ``k`` go to (its newest file)."""
        if self._gens is None:
            self._gens = {}
            for sk, g in self._files.existing():
                self._gens[sk] = max(g, self._gens.get(sk, 0))
        return self._gens.get(k, 0)

    def next_gen(self, k: int) -> int:
        """Start a new file generation for superchunk ``k`` (a compaction writes it)."""
        g = self.gen(k) + 1
        assert self._gens is not None
        self._gens[k] = g
        return g

    # -- allocating ------------------------------------------------------------------------

    def _space_map(self) -> FreeSpace:
        if self._space is None:
            keys = self._files.existing()
            sizes = {key: (self._files.file(key).data_start, self._files.file(key).size)
                     for key in keys}
            used = self._used()
            for (k, g, off), room in self._uncommitted.items():
                used.setdefault((k, g), []).append((off, room))
            self._space = FreeSpace.build(sizes, used)
        return self._space

    def allocate(self, n: int, need: int, want: int, rewrite: bool) -> tuple[int, int, int]:
        """``(gen, offset, room)`` for a new record of chunk ``n`` (``need`` bytes, ``want``
        with spare room); ``rewrite``: the chunk is stored already (free space is then
        worth learning)."""
        k = n // self._S
        gen = self.gen(k)
        key = (k, gen)
        got = None
        if self.reuse and (rewrite or self._space is not None):
            prefer = self._last_free.get(n)
            got = self._space_map().take(key, need, want,
                                         prefer[1] if prefer and prefer[0] == gen else None)
        if got is None:
            got = (self._files.end(key), want)
        off, room = got
        self._uncommitted[(k, gen, off)] = room
        if self._log is not None:
            self._log.append(("alloc", (k, gen, off, room)))
        return gen, off, room

    def written(self, k: int, gen: int, off: int, room: int) -> None:
        """A record was written at ``off`` of file ``(k, gen)`` by other means than
        :meth:`allocate` (a file written whole): it is this commit's."""
        self._uncommitted[(k, gen, off)] = room
        if self._log is not None:
            self._log.append(("alloc", (k, gen, off, room)))

    def replaced(self, n: int, old: Any) -> None:
        """Chunk ``n``'s stored record ``old`` (an index entry) is no longer its record."""
        k = n // self._S
        where = (k, old.gen, old.off)
        room = self._uncommitted.pop(where, None)
        if room is not None:  # written since the last commit: nothing else refers to it
            self._deferred.append(((k, old.gen), old.off, room))
            if self._log is not None:
                self._log.append(("free", (where, room)))
        else:
            self._superseded.append((n, old))
            if self._log is not None:
                self._log.append(("superseded", None))
        if self._log is None:
            self._apply_deferred()

    def _apply_deferred(self) -> None:
        for key, off, room in self._deferred:
            if self._space is not None:
                self._space.add(key, off, room)
        self._deferred.clear()

    # -- transactions ----------------------------------------------------------------------

    def savepoint(self) -> int:
        if self._log is None:
            self._log = []
        return len(self._log)

    def rollback(self, token: int) -> None:
        """Undo the allocations and replacements made since ``token``."""
        assert self._log is not None
        while len(self._log) > token:
            kind, what = self._log.pop()
            if kind == "alloc":
                k, gen, off, room = what
                self._uncommitted.pop((k, gen, off), None)
                if self._space is not None:
                    self._space.add((k, gen), off, room)
            elif kind == "free":
                where, room = what
                self._uncommitted[where] = room
                key = (where[0], where[1])
                self._deferred = [d for d in self._deferred if (d[0], d[1]) != (key, where[2])]
            else:
                self._superseded.pop()

    def release(self) -> None:
        """The outermost change is done: what it freed is free."""
        self._log = None
        self._apply_deferred()

    # -- commits ---------------------------------------------------------------------------

    @property
    def changed(self) -> bool:
        return bool(self._uncommitted or self._superseded)

    def published(self, seq: int) -> None:
        """The working index is now version ``seq``."""
        self._pending += [(n, old, seq) for n, old in self._superseded]
        self._superseded.clear()
        self._uncommitted.clear()
        if self._log is not None:
            self._log = []

    def reclaim(self, remaining: Sequence[int], refers: Callable[[int, Any], bool],
                min_free: int = 4096) -> None:
        """Free the pending records no remaining version (``remaining``: their seqs)
        refers to (``refers(n, entry)``), trim free file ends, delete files nothing
        refers to, and note superchunks worth compacting."""
        if not self._pending:
            return
        held = set(remaining)
        keep, touched = [], set()
        for n, old, seq in self._pending:
            # The version before the one that replaced it refers to it while it is kept.
            if seq - 1 in held or refers(n, old):
                keep.append((n, old, seq))
                continue
            k = n // self._S
            self._space_map().add((k, old.gen), old.off, old.room)
            self._last_free[n] = (old.gen, old.off)
            touched.add((k, old.gen))
        self._pending = keep
        for key in sorted(touched):
            self._tidy(key, min_free)

    def _tidy(self, key: Key, min_free: int) -> None:
        space = self._space_map()
        k, gen = key
        info = self._files.file(key)
        if space.free_bytes(key) >= info.size - info.data_start:
            self._files.delete(key)  # nothing refers to any of its records any more
            space.drop(key)
            # Records freed when the change under way is done were in it: gone with it.
            self._deferred = [d for d in self._deferred if d[0] != key]
            return
        end = space.tail(key, info.size)
        if end < info.size:
            self._files.truncate(key, end)
        area = self._files.file(key).size - info.data_start
        free = space.free_bytes(key)
        if gen == self.gen(k) and free >= min_free and free * 5 > area:
            self.compact.add(k)

    def forget_pending(self) -> None:
        self._pending.clear()
