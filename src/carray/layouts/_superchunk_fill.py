"""Filling new superchunk files in memory and writing each with one call.

Mixed into :class:`carray.layouts.superchunk.SuperchunkLayout`.  Chunks appended
in order to a superchunk that has no file yet are kept (compressed) until the
superchunk is full, something needs its file (a read, a rewrite, a commit), or
the layout closes; the file is then written whole -- header, offsets table and
chunks -- under a temporary name, fsynced once and renamed, instead of being
created empty and grown by one ``pwrite`` per chunk.  Memory stays bounded: one
superchunk's compressed chunks (about 16 MB uncompressed by default).

Crash safety is the same as for a file grown chunk by chunk: the new file holds
only chunks past the committed length, which readers ignore, until the commit
that records them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from carray import _parallel
from carray.formats._blp_frame import HEADER_SIZE, dumps_metadata, encode_metadata_bytes
from carray.layouts._superchunk_meta import FORMAT_NAME
from carray.layouts._superchunk_state import SuperchunkParts


class _Filling:
    """The chunks of one new superchunk file, where the next one will lie in it, and
    once full, the background write of the file."""

    __slots__ = ("chunks", "end", "landing")

    def __init__(self, data_start: int) -> None:
        self.chunks: list[bytes] = []
        self.end = data_start
        self.landing: Future[int] | None = None


class Filling(SuperchunkParts):
    """Whole-file writes of new superchunks (see the module docstring)."""

    _filling: dict[int, _Filling]

    def _data_start(self, k: int) -> int:
        """Where chunks start in a new file of superchunk ``k`` (as ``_new_file`` writes
        it): after the header, the metadata section and the offsets table."""
        raw = dumps_metadata({"format": FORMAT_NAME, "superchunk": k, "first_chunk": k * self._S,
                              "superchunksize": self._S})
        section, _ = encode_metadata_bytes(raw, checksum=self._ck.id, codec=None,
                                           max_meta_size=len(raw))
        return HEADER_SIZE + len(section) + 8 * self._S

    def _fill(self, nchunk: int, data: bytes, digest: bytes) -> int | None:
        """Keep chunk ``nchunk`` for a new superchunk file when it is the next chunk of
        one (returns its offset there), else None: the caller writes it to a file."""
        k, slot = divmod(nchunk, self._S)
        filling = self._filling.get(k)
        if filling is None:
            if slot or nchunk != self._count or k in self._scs or k in self._fds or \
                    self.store.exists(self._sc_path(k)):
                return None
            filling = self._filling[k] = _Filling(self._data_start(k))
        elif slot != len(filling.chunks) or filling.landing is not None:
            return None
        off = filling.end
        filling.chunks.append(data)
        filling.end += len(data) + len(digest) + math.ceil(len(data) * self.info.spare)
        self._count = nchunk + 1
        if len(filling.chunks) == self._S:
            # The file is complete: write it on the background thread while the next
            # chunks are compressed, after the one before it (at most two files in
            # memory).  Its fsync then overlaps compression too.
            for other in [j for j, f in self._filling.items() if f.landing is not None]:
                self._write_filled(other)
            filling.landing = _parallel.submit(_parallel.background("files"), self._new_file,
                                               k, filling.chunks)
        return off

    def _write_filled(self, k: int) -> None:
        """Make sure the file of superchunk ``k`` is written (one put, one fsync) and
        loaded, when its chunks were kept back."""
        filling = self._filling.get(k)
        if filling is None:
            return
        try:
            if filling.landing is None:
                self._new_file(k, filling.chunks)
            else:
                filling.landing.result()
        finally:
            del self._filling[k]
        sc = self._get(k)
        sc.created = True  # the commit makes its directory entry durable

    def _write_all_filled(self) -> None:
        for k in sorted(self._filling):
            self._write_filled(k)

    if TYPE_CHECKING:
        def _new_file(self, k: int, chunks: Sequence[bytes] = ()) -> int: ...
