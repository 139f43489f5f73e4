"""Free space in the data files of a superchunk dataset.

A byte of a data file is free when no kept version's index and no record written
since the last commit refers to it.  New records go into free extents (first fit,
the extent a chunk left behind first) before the end of a file, so that an
edit-heavy workload reuses what it replaces instead of growing the files.
"""

from __future__ import annotations

import bisect
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Key = tuple[int, int]
#: The generations of files a commit writes for itself lie in [_OWN_GENS, 2**31).
_OWN_GENS = 1 << 24


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

    def extents(self, key: Key) -> list[tuple[int, int]]:
        return [(off, size) for off, size in self._free.get(key, ())]

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
    rewrite needs them, from what every kept version refers to.  Files freed whole
    are deleted, free ends cut off, and files left more than a fifth free compacted
    (:mod:`._sc_compact`): by the next commit, or by the commit that frees the space
    when it can tell (:meth:`crowded`).

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
    private : bool
        Every commit writes its records to files of its own (object stores, where
        several processes may write one dataset and writing part of an object rewrites
        all of it): a new generation per superchunk per commit, chosen at random so
        that writers never pick one another's, never written into once a version
        refers to it, never truncated or compacted (docs/spec/commit.md).
    """

    def __init__(self, files: Any, superchunksize: int, reuse: bool,
                 used: Callable[[], dict[Key, list[tuple[int, int]]]],
                 private: bool = False) -> None:
        self._files = files
        self._S = superchunksize
        self.private = private
        self.reuse = reuse and not private
        self._used = used
        self._own: dict[int, int] = {}  # superchunk -> the generation this commit writes
        self._space: FreeSpace | None = None
        self._gens: dict[int, int] | None = None
        self._uncommitted: dict[tuple[int, int, int], int] = {}
        self._superseded: list[tuple[int, Any]] = []
        self._pending: list[tuple[int, Any, int]] = []
        self._deferred: list[tuple[Key, int, int]] = []
        self._freed: set[Key] = set()  # files with records freed since the last tidy
        self._log: list[tuple[str, Any]] | None = None
        self._last_free: dict[int, tuple[int, int]] = {}
        self.compact: set[int] = set()  # superchunks worth rewriting whole

    # -- generations ------------------------------------------------------------------------

    def gen(self, k: int) -> int:
        """The generation new records of superchunk ``k`` go to (its newest file, or the
        file of this commit's own)."""
        if self.private:
            own = self._own.get(k)
            return self._new_own(k) if own is None else own
        if self._gens is None:
            self._gens = {}
            for sk, g in self._files.existing():
                self._gens[sk] = max(g, self._gens.get(sk, 0))
        return self._gens.get(k, 0)

    def _new_own(self, k: int) -> int:
        # No listing (a request per commit on object stores): a generation another
        # writer took already is refused when the file is created (only if absent).
        taken = {g for sk, g in self._files.known() if sk == k}
        while True:
            g = _OWN_GENS + secrets.randbelow(2**31 - _OWN_GENS)
            if g not in taken:
                self._own[k] = g
                return g

    def next_gen(self, k: int) -> int:
        """Start a new file generation for superchunk ``k`` (a compaction writes it)."""
        if self.private:
            return self._new_own(k)
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
            for key, off, room in self._deferred:  # free once the change is done
                used.setdefault(key, []).append((off, room))
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
        if self._deferred and self._space is None and self.reuse:
            # Records this session wrote are free again (a shrink, a chunk written twice):
            # learn the free space now, so the commit can see a file worth compacting.
            self._space_map()
        for key, off, room in self._deferred:
            if self._space is not None:
                self._space.add(key, off, room)
                self._freed.add(key)
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

    @property
    def superseding(self) -> bool:
        """Whether records of the published version were replaced since it, or records
        written since were freed again (either may leave a file worth compacting)."""
        return bool(self._superseded) or bool(self._freed)

    def crowded(self, elsewhere: Callable[[int, Any], bool]) -> set[int]:
        """Superchunks whose newest file will be worth compacting once this commit is
        published and the version it replaces dropped: what it replaced is free then,
        unless another kept version refers to it (``elsewhere(n, entry)``)."""
        freed: dict[Key, list[tuple[int, int]]] = {}
        for n, old in self._superseded:
            k = n // self._S
            if old.gen == self.gen(k) and not elsewhere(n, old):
                freed.setdefault((k, old.gen), []).append((old.off, old.room))
        for key, off, room in self._deferred:
            freed.setdefault(key, []).append((off, room))
        for key in self._freed:  # records written and freed since the last commit
            freed.setdefault(key, [])
        out = set()
        for key, extents in freed.items():
            if key[1] != self.gen(key[0]):
                continue
            after = FreeSpace()  # the file's free space after the commit
            for off, size in self._space_map().extents(key) + extents:
                after.add(key, off, size)
            info = self._files.file(key)
            end = after.tail(key, info.size)  # a free end is cut off, not compacted
            if self._worth_compacting(end - info.data_start, after.free_bytes(key)):
                out.add(key[0])
        return out

    @staticmethod
    def _worth_compacting(area: int, free: int, min_free: int = 4096) -> bool:
        """Whether a file whose records take ``area`` bytes, ``free`` of them free, is
        worth rewriting whole: more than a fifth of it free bounds the space an edited
        dataset takes (and the rewrites amortize over the edits that freed it)."""
        return 0 < free < area and free >= min_free and free * 5 > area

    def published(self, seq: int) -> None:
        """The working index is now version ``seq``."""
        self._pending += [(n, old, seq) for n, old in self._superseded]
        self._superseded.clear()
        self._uncommitted.clear()
        self._own.clear()  # what a version refers to is never written into again
        if self._log is not None:
            self._log = []
        # Records written and replaced before the commit are in no version, and the
        # commit cannot be undone: free now, before reclaim tidies their files.
        self._apply_deferred()

    def discard(self) -> list[Key]:
        """Forget every change since the last commit (the writer goes back to it): the
        records written since are free, those they replaced are in use again.  Returns
        the files this commit wrote for itself (private mode), which nothing refers to."""
        for (k, gen, off), room in self._uncommitted.items():
            self._deferred.append(((k, gen), off, room))
        self._uncommitted.clear()
        self._superseded.clear()
        self._log = None
        self._apply_deferred()
        own = [(k, g) for k, g in self._own.items()]
        self._own.clear()
        return own

    def reclaim(self, remaining: Sequence[int], refers: Callable[[int, Any], bool],
                min_free: int = 4096) -> None:
        """Free the pending records no remaining version (``remaining``: their seqs)
        refers to (``refers(n, entry)``), trim free file ends, delete files nothing
        refers to, and note superchunks worth compacting."""
        held = set(remaining)
        keep, touched = [], self._freed
        self._freed = set()
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
        if not self._files.exists(key):  # emptied and deleted already
            space.drop(key)
            return
        info = self._files.file(key)
        if space.free_bytes(key) >= info.size - info.data_start:
            self._files.delete(key)  # nothing refers to any of its records any more
            space.drop(key)
            # Records freed when the change under way is done were in it: gone with it.
            self._deferred = [d for d in self._deferred if d[0] != key]
            return
        if self.private:
            return  # partly used files stay as they are: other writers may read them
        end = space.tail(key, info.size)
        if end < info.size:
            self._files.truncate(key, end)
        area = self._files.file(key).size - info.data_start
        if gen == self.gen(k) and self._worth_compacting(area, space.free_bytes(key),
                                                         min_free):
            self.compact.add(k)

    def relearn(self) -> None:
        """Versions were dropped whose records this keeper never saw replaced: learn the
        free space again from what is kept, and tidy every file at this reclaim."""
        self._space = None
        if not self.private:  # files nothing refers to may be another writer's, unpublished
            self._freed |= set(self._files.existing())
