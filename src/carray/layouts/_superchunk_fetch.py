"""Reading a superchunk dataset from an object store in few requests.

Mixed into :class:`carray.layouts.superchunk.SuperchunkLayout`.  On an object
store every read is a round trip, so a read about to decode most (three
quarters) of the chunks of a superchunk file it has not opened yet fetches the
whole file in one request (header, offsets and chunks together) instead of one request for the
head and one per chunk.  The chunks are kept only for the read that asked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from carray.codecs import blosc
from carray.errors import FormatError
from carray.layouts._superchunk_state import SuperchunkParts
from carray.stores.base import BytesHandle


class Prefetching(SuperchunkParts):
    """Whole superchunk files fetched at once for reads that need most of them."""

    @contextlib.contextmanager
    def prefetched(self, nchunks: Iterable[int]) -> Iterator[None]:
        """Within the block, reads of ``nchunks`` come from whole-file fetches where
        that saves requests (object stores only)."""
        wanted = self._files_worth_fetching(nchunks)
        if not wanted:
            yield
            return
        datas = self.store.get_many([self._sc_path(k) for k in wanted])
        try:
            with self._read_lock:
                for (k, slots), data in zip(wanted.items(), datas, strict=True):
                    self._adopt_file(k, data, slots)
            yield
        finally:
            self._prefetched.clear()

    def _files_worth_fetching(self, nchunks: Iterable[int]) -> dict[int, list[int]]:
        """Superchunks not opened yet of which the read wants three quarters of the chunks."""
        if not self.store.remote or self._overlay:
            return {}
        by_file: dict[int, list[int]] = {}
        for n in nchunks:
            if 0 <= n < self._count and n not in self._inplace:
                by_file.setdefault(n // self._S, []).append(n % self._S)
        with self._read_lock:
            return {k: slots for k, slots in by_file.items() if k not in self._scs
                    and 4 * len(slots) >= 3 * min(self._S, self._count - k * self._S)
                    and self._has_file(k)}

    def _has_file(self, k: int) -> bool:
        """Whether superchunk ``k`` has a file: below the fill bound its chunks may all be
        absent, and then it has none (known once asked)."""
        if k * self._S >= self._fill_bound:
            return True
        if k in self._no_file:
            return False
        if self.store.isfile(self._sc_path(k)):
            return True
        self._no_file.add(k)
        return False

    def _adopt_file(self, k: int, data: bytes, slots: list[int]) -> None:
        """Open superchunk ``k`` from its fetched bytes and keep the chunks asked for."""
        if k in self._scs:
            return
        key = self._sc_path(k)
        self._fds[k] = BytesHandle(key, data)
        try:
            sc = self._get(k)
        finally:
            # Later reads go through a real handle, which fetches only what they need.
            handle = self._fds.pop(k, None)
            if handle is not None:
                handle.close()
        view = memoryview(data)
        for slot in slots:
            off = int(sc.offsets[slot])
            if off < 0:
                continue
            try:
                h = blosc.read_header(view[off:off + blosc.BLOSC1_HEADER], sc.url, off,
                                      size=len(data) - off)
            except FormatError:
                continue  # the usual read path reports it
            end = off + h.cbytes + self._dsize
            if end <= len(data):
                self._prefetched[k * self._S + slot] = (sc, off, h.cbytes, view[off:end])
