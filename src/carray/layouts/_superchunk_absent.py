"""Absent chunks of a superchunk dataset: chunks that hold only the fill value.

Mixed into :class:`carray.layouts.superchunk.SuperchunkLayout` (format:
docs/formats/superchunk.md, "Absent chunks").  ``meta/sizes`` records
``fill_chunks``: a chunk numbered below it may have offset -1 in its
superchunk file, or no superchunk file at all, and then holds only the fill
value (``dflt``).  The engine writes such chunks as Blosc2 special chunks
(:mod:`carray.codecs.fill`); they are recorded here without storing a byte,
and reads get the special chunk back.  Blosc1 datasets (plain Bloscpack files
for older readers) always store real chunks.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from carray.codecs.fill import fill_chunk
from carray.layouts._superchunk_meta import StorageInfo
from carray.layouts._superchunk_state import Superchunk, SuperchunkParts


class AbsentChunks(SuperchunkParts):
    """Finding, reading and recording absent (fill) chunks."""

    if TYPE_CHECKING:
        _filling: dict[int, Any]

    def _find(self, k: int) -> Superchunk | None:
        """Superchunk ``k``, or None when it has no file."""
        sc = self._scs.get(k)
        if sc is not None:
            return sc
        if k in self._filling:
            return self._get(k)
        if k in self._no_file:
            return None
        if k not in self._fds and not self.store.isfile(self._sc_path(k)):
            self._no_file.add(k)
            return None
        return self._get(k)

    def _lookup(self, nchunk: int) -> tuple[Superchunk, int] | None:
        """Like :meth:`_locate`, but None for a chunk that is absent and may be (a fill
        chunk: no offset, or no file, below the recorded fill bound)."""
        if not 0 <= nchunk < self._fill_bound:
            return self._locate(nchunk)
        k, slot = divmod(nchunk, self._S)
        sc = self._find(k)
        if sc is None:
            return None
        off = int(sc.offsets[slot])
        return None if off < 0 else (sc, off)

    def special_chunk(self, nchunk: int) -> bytes | None:
        if nchunk >= self._fill_bound or nchunk in self._inplace:
            return None
        with self._read_lock:
            return self._absent if self._lookup(nchunk) is None else None

    def _write_absent(self, nchunk: int) -> int:
        """Record chunk ``nchunk`` as holding only the fill value: no bytes, offset -1."""
        k, slot = divmod(nchunk, self._S)
        sc = self._find(k)
        old_cbytes = 0
        if sc is not None:
            old = int(sc.offsets[slot])
            if old >= 0 and nchunk < self._count:
                old_cbytes = self._cbytes_of(sc, slot, old)
                if old < sc.committed_end:
                    sc.garbage += self._capacity(sc, old)
            sc.offsets[slot] = -1  # the commit's journal writes it where committed
            sc.sizes.pop(slot, None)
            self._touched.add(k)
        prev = self._inplace.pop(nchunk, None)
        if prev is not None:
            self._inplace_bytes -= len(prev)
        self._stamps.pop(nchunk, None)
        self._count = max(self._count, nchunk + 1)
        self._fill_bound = max(self._fill_bound, nchunk + 1)
        return -old_cbytes


def absent_chunk(info: StorageInfo) -> tuple[bytes | None, bytes | None]:
    """The fill value's item bytes and the special chunk reads of an absent chunk get;
    ``(None, None)`` for Blosc1 datasets (their readers need real chunks)."""
    if info.blosc1 or info.dtype.itemsize == 0:
        return None, None
    item = np.asarray(info.dflt if info.dflt is not None else 0, dtype=info.dtype).tobytes()
    blocks = info.blockshape or info.chunkshape
    blocksize = info.dtype.itemsize * math.prod(blocks)
    chunk = fill_chunk(item, info.chunk_nbytes, blocksize)
    return (item, chunk) if chunk is not None else (None, None)
