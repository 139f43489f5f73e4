"""Committing a superchunk dataset: the journal, in-place writes, and compaction.

Mixed into :class:`carray.layouts.superchunk.SuperchunkLayout`; the module docstring
there describes the commit protocol this implements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from carray.codecs import blosc
from carray.errors import ChecksumError, ReadOnlyError
from carray.formats._blp_frame import BlpHeader
from carray.layouts._superchunk_meta import JOURNAL_FILE, SIZES_FILE, Journal, Sizes, dumps
from carray.layouts._superchunk_state import Superchunk, SuperchunkParts
from carray.layouts.base import ArrayMeta
from carray.stores import Handle


class Committing(SuperchunkParts):
    """Making a superchunk dataset's writes durable (see the layout's module doc)."""

    # (shape, cbytes, fill chunks) of this handle's last commit: a commit that would
    # record them again, with no chunk written since, writes nothing.
    _committed_state: tuple[object, ...] | None = None

    def _apply(self, writes: Sequence[tuple[int, int, bytes]]) -> None:
        """Make the journal's writes to superchunk files, then fsync them.

        Handles of their own: replay runs before any superchunk is loaded.  Cached
        handles on the same files are closed first (on object stores they hold
        the whole object), and reads after this go through fresh ones.
        """
        for k in {k for k, _, _ in writes}:
            h = self._fds.pop(k, None)
            if h is not None:
                h.sync()
                h.close()
        handles: dict[int, Handle] = {}
        try:
            for k, offset, data in writes:
                h = handles.get(k)
                if h is None:
                    h = handles[k] = self.store.open(self._sc_path(k), "r+")
                h.pwrite(data, offset)
            if self.fsync or self.store.remote:
                for h in handles.values():
                    h.sync()
        finally:
            for h in handles.values():
                h.close()

    def _last_nbytes(self, sc: Superchunk, nused: int) -> int:
        if nused == 0:
            return 0
        n = sc.k * self._S + nused - 1
        rec = self._inplace.get(n)
        if rec is not None:
            return blosc.read_header(rec).nbytes
        return self._head(sc, int(sc.offsets[nused - 1]), n).nbytes

    def commit(self, meta: ArrayMeta, cbytes: int) -> None:
        """Make every chunk written so far durable, then record ``meta`` (see module doc)."""
        if self.readonly:
            raise ReadOnlyError(f"{self.store.url(self.rootdir)}: opened read-only")
        self._heads.clear()  # in-place rewrites and compaction move bytes under them
        scs = list(self._scs.values())
        quiet = not (self._inplace or self._dropped or self._touched or
                     any(sc.dirty or sc.created for sc in scs))
        if self.fsync or self.store.remote:  # object stores: put written objects back
            for sc in scs:
                if sc.dirty:
                    self._fd(sc).sync()
                    sc.dirty = False
            if self.fsync and any(sc.created for sc in scs):
                self.store.sync_dir(self._datadir)
        writes: list[tuple[int, int, bytes]] = []
        for n, rec in sorted(self._inplace.items()):
            sc, off = self._locate(n)
            writes.append((sc.k, off, rec))
        new_headers: dict[int, BlpHeader] = {}
        for sc in scs:
            changed = np.flatnonzero(sc.offsets != sc.committed)
            if changed.size:
                for lo, hi in _runs(changed):
                    writes.append((sc.k, sc.offsets_pos + 8 * lo, sc.offsets[lo:hi].tobytes()))
            used = sc.offsets >= 0
            nused = int(np.argmin(used)) if not used.all() else self._S
            last = min(self._last_nbytes(sc, nused), max(self._chunk_size_field(), 0)) \
                if nused else 0
            header = BlpHeader(True, True, self._ck.id, self.info.typesize,
                               self._chunk_size_field(), last, nused, self._S - nused)
            if header != sc.header:
                new_headers[sc.k] = header
                writes.append((sc.k, 0, header.pack()))
        state = (tuple(meta.shape), int(cbytes), min(self._fill_bound, self._count))
        if quiet and not writes and state == self._committed_state:
            return
        generation = self._generation + 1
        sizes = Sizes(tuple(meta.shape), math.prod(meta.shape) * meta.dtype.itemsize,
                      int(cbytes), generation, fill_chunks=min(self._fill_bound, self._count))
        sizes_bytes = dumps(sizes.to_json())
        store = self.store
        jpath = store.join(self._metadir, JOURNAL_FILE)
        if writes:
            store.put(jpath, Journal(generation, tuple(writes), sizes_bytes).encode(),
                      fsync=self.fsync)
            if self.fsync:
                store.sync_dir(self._metadir)
            self._apply(writes)
        store.put(store.join(self._metadir, SIZES_FILE), sizes_bytes, fsync=self.fsync)
        if self.fsync:
            store.sync_dir(self._metadir)
        if writes:
            store.delete(jpath)
        self._generation = generation
        self._committed_state = state
        self._inplace.clear()
        self._inplace_bytes = 0
        for sc in scs:
            sc.committed = sc.offsets.copy()
            sc.committed_end = sc.size
            sc.created = False
            sc.header = new_headers.get(sc.k, sc.header)
        self._delete_past_end()
        touched, self._touched = self._touched, set()
        for k in sorted(touched):
            found = self._scs.get(k)
            if found is not None and self._needs_compaction(found):
                self._compact(found)

    def _delete_past_end(self) -> None:
        """Remove superchunk files wholly past the committed chunks (after a shrink)."""
        if not self._dropped:
            return
        self._dropped = False
        keep = -(-self._count // self._S)
        removed = False
        for k in self._existing_superchunks():
            if k < keep:
                continue
            self._forget(k)
            try:
                self.store.delete(self._sc_path(k))
                removed = True
            except FileNotFoundError:
                pass
        if removed and self.fsync:
            self.store.sync_dir(self._datadir)

    def _forget(self, k: int) -> None:
        self._scs.pop(k, None)
        h = self._fds.pop(k, None)
        if h is not None:
            h.close()

    def _needs_compaction(self, sc: Superchunk) -> bool:
        used = sc.offsets[sc.offsets >= 0]
        if not used.size:
            return False
        if self.info.blosc1 and self.info.spare == 0:
            # Bloscpack readers stream chunks back to back: keep the files that way.
            return not self._sequential(sc, len(used))
        area = sc.size - sc.data_start
        return bool(sc.garbage > 2**20 and sc.garbage * 2 > area)

    def _sequential(self, sc: Superchunk, nused: int) -> bool:
        pos = sc.data_start
        for slot in range(nused):
            off = int(sc.offsets[slot])
            if off != pos:
                return False
            pos += self._cbytes_of(sc, slot, off) + self._dsize
        return True

    def _compact(self, sc: Superchunk) -> None:
        """Rewrite a superchunk file with its chunks in order and no dead space.

        Runs right after a commit; the new file is renamed over the old one, so
        either version is a complete copy of the committed state.
        """
        prefix = self._pread(sc, sc.offsets_pos, 0)
        recs: list[bytes] = []
        table, pos = np.full(self._S, -1, dtype="<i8"), sc.data_start
        # Absent (fill) chunks leave gaps among the used slots.
        for slot in np.flatnonzero(sc.offsets >= 0).tolist():
            n = sc.k * self._S + slot
            off = int(sc.offsets[slot])
            cb = self._cbytes_of(sc, slot, off)
            rec = self._pread(sc, cb + self._dsize, off)
            if self.verify and self._dsize and self._ck.digest(rec[:cb]) != rec[cb:]:
                raise ChecksumError(f"chunk {n}: {self._ck.name} checksum mismatch", sc.url,
                                    off + cb)
            spare = math.ceil(cb * self.info.spare)
            recs.append(rec)
            if spare:
                recs.append(bytes(spare))
            table[slot] = pos
            pos += len(rec) + spare
        self._forget(sc.k)  # its handle's view of the old object must not be put back
        self.store.put(sc.path, (prefix, table, *recs), fsync=self.fsync)
        if self.fsync:
            self.store.sync_dir(self._datadir)
        for n in range(sc.k * self._S, (sc.k + 1) * self._S):
            self._stamps.pop(n, None)
        self._get(sc.k)


def _runs(idx: np.ndarray) -> list[tuple[int, int]]:
    """Sorted indices as [lo, hi) runs of consecutive values."""
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(idx, breaks)]


def _patch(data: bytes, offset: int, patches: list[tuple[int, bytes]]) -> bytes:
    """``data`` read at ``offset``, with the journal's pending writes laid over it."""
    out = None
    end = offset + len(data)
    for p_off, p_data in patches:
        lo, hi = max(offset, p_off), min(end, p_off + len(p_data))
        if lo < hi:
            out = bytearray(data) if out is None else out
            out[lo - offset:hi - offset] = p_data[lo - p_off:hi - p_off]
    return bytes(out) if out is not None else data
