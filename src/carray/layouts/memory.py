"""Chunks kept in a Python list, compressed with Blosc2, and the versions of them.

A version in memory is the list of chunk objects at a commit (chunks are immutable
bytes, so versions share every chunk they did not change) with the array's
metadata; the same retention rules as on disk apply (:mod:`carray.versions`).
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


@dataclass(frozen=True)
class _Kept:
    """One version of an array in memory."""

    id: str
    seq: int
    time: float
    message: str | None
    chunks: tuple[bytes, ...]
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
        self._chunks: list[bytes] = []
        self._kept: list[_Kept] = []
        self._tags: dict[str, str] = {}
        self.keep: int | None = 1

    def read_chunk(self, nchunk: int) -> bytes:
        return self._chunks[nchunk]

    def special_chunk(self, nchunk: int) -> bytes | None:
        chunk = self._chunks[nchunk]
        return chunk if special_code(chunk) else None

    def write_chunk(self, nchunk: int, data: bytes, digest: bytes | None = None) -> int:
        if nchunk == len(self._chunks):
            self._chunks.append(data)
            return len(data)
        if nchunk > len(self._chunks):
            raise IndexError(f"chunk {nchunk} written before chunk {len(self._chunks)}")
        delta = len(data) - len(self._chunks[nchunk])
        self._chunks[nchunk] = data
        return delta

    def drop_chunks(self, first: int) -> int:
        removed = sum(len(c) for c in self._chunks[first:])
        del self._chunks[first:]
        return -removed

    # -- versions -------------------------------------------------------------------------

    @property
    def version_id(self) -> str | None:
        return self._kept[-1].id if self._kept else None

    def record_version(self, meta: ArrayMeta, cbytes: int, message: str | None = None,
                       kind: str = "commit") -> str:
        """Keep the chunks as they are now as a new version (unless nothing changed)."""
        chunks = tuple(self._chunks[:meta.nchunks])
        last = self._kept[-1] if self._kept else None
        if last is not None and kind == "commit" and last.meta == meta and \
                len(last.chunks) == len(chunks) and \
                all(a is b for a, b in zip(last.chunks, chunks, strict=True)):
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
        self._chunks = list(old.chunks)
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
