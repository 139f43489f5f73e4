"""Chunks kept in memory, compressed with Blosc2, and the versions of them.

Chunks are immutable bytes kept by number; runs of chunks holding only the fill
value (:meth:`MemoryLayout.grow_absent`) are one special chunk shared by all of
them, recorded in constant time.  A version in memory is the chunks at a commit
(versions share every chunk they did not change) with the array's metadata; the
same retention rules as on disk apply (:mod:`carray.versions`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from carray.codecs.fill import special_code
from carray.errors import ReadOnlyError
from carray.layouts.base import ArrayMeta, Layout
from carray.versions.dataset import VersionInfo
from carray.versions.repo import check_tag, kept_seqs, new_id


class _Chunks:
    """Chunks ``0 .. n-1``: those stored, by number, and the fill chunk of the others."""

    def __init__(self, stored: dict[int, bytes] | None = None, n: int = 0,
                 fill: bytes | None = None) -> None:
        self.stored: dict[int, bytes] = dict(stored or {})
        self.n = n
        self.fill = fill

    def __len__(self) -> int:
        return self.n

    def get(self, nchunk: int) -> bytes:
        if not 0 <= nchunk < self.n:
            raise IndexError(f"chunk {nchunk} out of range ({self.n} chunks)")
        found = self.stored.get(nchunk)
        if found is None:
            assert self.fill is not None  # a chunk is stored, or in a run of fill chunks
            return self.fill
        return found

    def snapshot(self, n: int) -> _Chunks:
        """The first ``n`` chunks, as a version keeps them."""
        return _Chunks({k: v for k, v in self.stored.items() if k < n}, min(n, self.n),
                       self.fill)

    def same(self, other: _Chunks) -> bool:
        return self.n == other.n and self.fill is other.fill and \
            self.stored.keys() == other.stored.keys() and \
            all(v is other.stored[k] for k, v in self.stored.items())


@dataclass(frozen=True)
class _Kept:
    """One version of an array in memory."""

    id: str
    seq: int
    time: float
    message: str | None
    chunks: _Chunks
    meta: ArrayMeta
    cbytes: int
    kind: str = "commit"
    retention: Any = None


class MemoryLayout(Layout):
    """An in-memory list of compressed chunks (and, once committed, its versions)."""

    blosc1 = False
    in_memory = True
    concurrent_reads = True  # list indexing
    versioned = True

    def __init__(self) -> None:
        super().__init__(readonly=False)
        self._chunks = _Chunks()
        self._kept: list[_Kept] = []
        self._tags: dict[str, str] = {}
        self.keep: int | None = 1

    def read_chunk(self, nchunk: int) -> bytes:
        return self._chunks.get(nchunk)

    def special_chunk(self, nchunk: int) -> bytes | None:
        chunk = self._chunks.get(nchunk)
        return chunk if special_code(chunk) else None

    def write_chunk(self, nchunk: int, data: bytes, digest: bytes | None = None) -> int:
        chunks = self._chunks
        if nchunk > chunks.n:
            raise IndexError(f"chunk {nchunk} written before chunk {chunks.n}")
        old = chunks.stored.get(nchunk)
        chunks.stored[nchunk] = data
        chunks.n = max(chunks.n, nchunk + 1)
        return len(data) - (len(old) if old is not None else 0)

    def grow_absent(self, first: int, count: int, fill: bytes) -> bool:
        chunks = self._chunks
        if first != chunks.n or (chunks.fill is not None and chunks.fill != fill):
            return False
        chunks.fill, chunks.n = fill, first + count
        return True

    def drop_chunks(self, first: int) -> int:
        chunks = self._chunks
        gone = [k for k in chunks.stored if k >= first]
        removed = sum(len(chunks.stored.pop(k)) for k in gone)
        chunks.n = min(chunks.n, max(first, 0))
        return -removed

    # -- versions -------------------------------------------------------------------------

    @property
    def version_id(self) -> str | None:
        return self._kept[-1].id if self._kept else None

    def record_version(self, meta: ArrayMeta, cbytes: int, message: str | None = None,
                       kind: str = "commit") -> str:
        """Keep the chunks as they are now as a new version (unless nothing changed)."""
        chunks = self._chunks.snapshot(meta.nchunks)
        last = self._kept[-1] if self._kept else None
        if last is not None and kind == "commit" and last.meta == meta and \
                last.chunks.same(chunks):
            return last.id
        seq = last.seq + 1 if last is not None else 0
        self._kept.append(_Kept(new_id(seq), seq, time.time(), message, chunks, meta, cbytes,
                                kind))
        self.prune()
        return self._kept[-1].id

    def _find(self, version: str) -> _Kept:
        for k in self._kept:
            if k.id == version:
                return k
        from carray.errors import VersionError
        raise VersionError(f"memory: version {version} is not kept (see versions())")

    def versions(self) -> list[Any]:
        import datetime as dt
        tags: dict[str, list[str]] = {}
        for name, vid in self._tags.items():
            tags.setdefault(vid, []).append(name)
        return [VersionInfo(k.id, dt.datetime.fromtimestamp(k.time, dt.UTC), k.message,
                            tuple(sorted(tags.get(k.id, ()))), tuple(k.meta.shape),
                            k.meta.dtype.itemsize * _count(k.meta.shape), k.cbytes, k.kind)
                for k in reversed(self._kept)]

    def tag(self, name: str, version_id: str, move: bool = False) -> None:
        self._find(version_id)
        held = self._tags.get(check_tag(name))
        if held is not None and held != version_id and not move:
            from carray.errors import TagExistsError
            raise TagExistsError(f"memory: tag {name!r} names version {held} already (tags "
                                 "do not move: untag it first, or pass move=True)")
        self._tags[name] = version_id

    def untag(self, name: str) -> None:
        if self._tags.pop(name, None) is None:
            from carray.errors import VersionError
            raise VersionError(f"memory: no tag {name!r}")
        self.prune()

    def restore(self, version: str) -> tuple[ArrayMeta, int]:
        old = self._find(version)
        self._chunks = old.chunks.snapshot(old.chunks.n)
        self.record_version(old.meta, old.cbytes, f"restore {version}", kind="restore")
        return old.meta, old.cbytes

    def prune(self, keep_last: int | None = None, older_than: float | None = None) -> int:
        keep = self.keep if keep_last is None else (keep_last if self.keep is None else
                                                     min(self.keep, keep_last))
        kept = kept_seqs(self._kept, self._tags, keep, older_than)  # type: ignore[arg-type]
        before = len(self._kept)
        self._kept = [k for k in self._kept if k.seq in kept]
        return before - len(self._kept)

    def commit(self, meta: ArrayMeta, cbytes: int, message: str | None = None) -> bool | None:
        if self.readonly:
            raise ReadOnlyError("memory: read-only")
        return None


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for x in shape:
        n *= x
    return n
