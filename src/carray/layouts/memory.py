"""Chunks kept in a Python list, compressed with Blosc2."""

from __future__ import annotations

from carray.codecs.fill import special_code
from carray.layouts.base import Layout


class MemoryLayout(Layout):
    """An in-memory list of compressed chunks."""

    blosc1 = False
    in_memory = True
    concurrent_reads = True  # list indexing

    def __init__(self) -> None:
        super().__init__(readonly=False)
        self._chunks: list[bytes] = []

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
