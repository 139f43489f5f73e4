"""Reading a superchunk directory's chunk records, checked: a whole chunk against its
digest, a ranged read (a few blocks) against the digests of the pages it fetched.

:class:`RecordReader` is the reading side of :class:`~carray.layouts.superchunk.layout.SuperchunkLayout`:
it is handed the index entry of each chunk to read and keeps the checked first bytes
of chunks that ranged reads came back to.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from carray.codecs import blosc
from carray.codecs.checksums import Checksum
from carray.codecs.pages import PagedReader, npages, page_digests
from carray.errors import ChecksumError, FormatError
from carray.layouts.base import ChunkReader
from carray.layouts.superchunk import v2 as legacy
from carray.layouts.superchunk.files import DataFiles, Key
from carray.versions import FILL, HAS_PAGES, Entry

# Bytes a ranged read fetches first: the chunk's header and block table.
_HEAD_READ = blosc.HEAD_READ
# A record this small is read (and checked) whole by the first ranged read.
_SMALL_RECORD = 2 * _HEAD_READ
_CACHED_HEADS = 1024
# Bytes a Blosc chunk adds at most to what it holds (its header; a chunk that does
# not compress is stored as it is), with room to spare.
_MAX_OVERHEAD = 4096


class _Head(NamedTuple):
    """What the ranged reader of a chunk is made of: where it is, its first bytes, its
    page digests and the decoder's memo (parsed header and block table)."""

    key: Key
    off: int
    cbytes: int
    head: bytes
    digests: bytes | None
    memo: dict[str, Any]


class RecordReader:
    """Checked reads of chunk records (see the module doc).

    Parameters
    ----------
    files : DataFiles
        The superchunk files.
    superchunksize : int
        Chunks per superchunk file.
    checksum : Checksum
        The digest of records (size 0: none).
    page_size : int
        Bytes covered by one page digest.
    verify : bool or 'full'
        Check digests; 'full' reads every chunk whole.
    absent : bytes or None
        What a chunk recorded as absent holds.
    chunk_nbytes : int
        Decoded bytes of a full stored chunk: what bounds a record's size (nothing is
        read or allocated for a size an index entry claims beyond it).
    """

    def __init__(self, files: DataFiles, superchunksize: int, checksum: Checksum,
                 page_size: int, verify: bool | str, absent: bytes | None,
                 chunk_nbytes: int) -> None:
        self._files, self._S, self._ck = files, superchunksize, checksum
        self._max_cbytes = chunk_nbytes + _MAX_OVERHEAD
        self._dsize, self._page = checksum.size, page_size
        self.verify = verify
        self._absent = absent
        self._heads: OrderedDict[int, tuple[ChunkReader, int]] = OrderedDict()
        self._lock = threading.Lock()
        # A directory of format 2 being upgraded: offset tables patched in its files.
        self.patches: dict[int, Any] = {}

    def _key(self, nchunk: int, e: Entry) -> Key:
        if e.cbytes > self._max_cbytes:
            raise FormatError(f"chunk {nchunk}: the index gives it {e.cbytes} bytes, more "
                              f"than a chunk of this array can take ({self._max_cbytes})",
                              self._files.url((nchunk // self._S, e.gen)), e.off)
        return (nchunk // self._S, e.gen)

    def read(self, key: Key, n: int, offset: int) -> bytes:
        """``n`` bytes of file ``key`` at ``offset``, as the version read sees them."""
        data = self._files.pread(key, n, offset)
        if key[1] == 0 and self.patches.get(key[0]):
            data = legacy.patched(data, offset, self.patches[key[0]])
        return data

    def forget(self, first: int = 0) -> None:
        """Drop what is kept of chunks ``first`` and above (rewritten, or another version)."""
        with self._lock:
            if not first:
                self._heads.clear()
            for n in [n for n in self._heads if n >= first]:
                del self._heads[n]

    def forget_chunk(self, nchunk: int) -> None:
        with self._lock:
            self._heads.pop(nchunk, None)

    # -- whole chunks ---------------------------------------------------------------------

    def _record_size(self, e: Entry) -> int:
        """Bytes a whole read of entry ``e``'s record fetches: the chunk, its digest and,
        when reads are checked, its page digests (checked too: every byte of a record a
        reader fetches is checked, as `carray verify` checks them)."""
        n = e.cbytes + self._dsize
        if self.verify and self._dsize and self._page and e.flags & HAS_PAGES:
            n += npages(e.cbytes, self._page) * self._dsize
        return n

    def chunk(self, nchunk: int, e: Entry) -> memoryview:
        """Chunk ``nchunk`` (entry ``e``) whole, checked."""
        if e.off == FILL:
            return memoryview(self._absent or b"")
        key = self._key(nchunk, e)
        return self._checked(nchunk, key, e, self.read(key, self._record_size(e), e.off))

    def chunk_into(self, nchunk: int, e: Entry,
                   scratch: Callable[[int], np.ndarray]) -> memoryview:
        """:meth:`chunk`, read into a buffer ``scratch(n)`` gives."""
        if e.off == FILL:
            return memoryview(self._absent or b"")
        key = self._key(nchunk, e)
        n = self._record_size(e)
        if self.patches:
            return self._checked(nchunk, key, e, self.read(key, n, e.off))
        buf = scratch(n)[:n]
        got = self._files.pread_into(key, buf, e.off)
        return self._checked(nchunk, key, e, buf.data[:got])

    def _checked(self, nchunk: int, key: Key, e: Entry, buf: Any) -> memoryview:
        """Chunk bytes from a record read whole (chunk, digest, and the page digests
        :meth:`_record_size` asks for), once checked."""
        n, cb = self._record_size(e), e.cbytes
        view = memoryview(buf).cast("B")
        url = self._files.url(key)
        if len(view) != n:
            raise FormatError(f"chunk {nchunk} truncated: {len(view)} of {n} bytes", url, e.off)
        end = cb + self._dsize
        if self.verify and self._dsize and self._ck.digest(view[:cb]) != view[cb:end]:
            raise ChecksumError(f"chunk {nchunk}: {self._ck.name} checksum mismatch", url,
                                e.off + cb)
        if n > end and view[end:] != page_digests(view[:cb], self._ck, self._page):
            raise ChecksumError(f"chunk {nchunk}: page digests do not match the chunk", url,
                                e.off + end)
        h = blosc.read_header(view[:blosc.BLOSC1_HEADER], url, e.off, size=cb)
        if h.cbytes != cb:
            raise FormatError(f"chunk {nchunk}: its header says {h.cbytes} bytes, the index "
                              f"{cb}", url, e.off)
        return view[:cb]

    # -- ranged reads ---------------------------------------------------------------------

    def cached(self, nchunk: int) -> tuple[ChunkReader, int] | None:
        """The ranged reader of chunk ``nchunk`` and its size when a ranged read made it
        already (None: not kept).  Kept only for stored chunks and dropped whenever the
        chunk's entry changes (:meth:`forget`), so the layout need not look its entry up
        again for a chunk read before."""
        with self._lock:
            got = self._heads.get(nchunk)
            if got is not None:
                self._heads.move_to_end(nchunk)
        return got

    def kept(self, nchunk: int) -> bool:
        """Whether a ranged reader of chunk ``nchunk`` is kept (so it is stored).  A
        membership test, atomic, so without the lock: what it answers may change right
        after, as the entry a caller looks up under a lock may."""
        return nchunk in self._heads

    def reader(self, nchunk: int, e: Entry) -> tuple[ChunkReader, int]:
        """A reader of ranges of chunk ``nchunk`` (entry ``e``), checking the pages it
        fetches, and the chunk's size."""
        got = self.cached(nchunk)
        if got is not None:
            return got
        if self.verify == "full" or self._needs_whole(e):
            whole = bytes(self.chunk(nchunk, e))
            return ChunkReader(len(whole), lambda o, n: whole[o:o + n]), len(whole)
        head = self._head(nchunk, e)
        if head is None:
            absent = self._absent or b""
            return ChunkReader(len(absent), lambda o, n: absent[o:o + n]), len(absent)
        # The reader itself is kept: later reads of the chunk make nothing new.
        got = (self._ranged(head), head.cbytes)
        with self._lock:
            self._heads[nchunk] = got
            if len(self._heads) > _CACHED_HEADS:
                self._heads.popitem(last=False)
        return got

    def _needs_whole(self, e: Entry) -> bool:
        """Whether a ranged read must read a record whole to check it (it has no page
        digests)."""
        return bool(self.verify and self._dsize and e.off != FILL and not e.flags & HAS_PAGES)

    def _head(self, nchunk: int, e: Entry) -> _Head | None:
        """The first bytes and page digests of chunk ``nchunk`` (None: absent); the first
        bytes are checked here when the chunk has no page digests, else by its reader."""
        if e.off == FILL:
            return None
        key, cb = self._key(nchunk, e), e.cbytes
        url = self._files.url(key)
        if not self.verify or not self._dsize:
            head = self.read(key, min(cb, _HEAD_READ), e.off)
            return _Head(key, e.off, cb, head, None, {})
        if not self._page:
            raise FormatError(f"chunk {nchunk} has page digests but the metadata gives no "
                              "page_size", url, e.off)
        ndig = npages(cb, self._page) * self._dsize
        if cb + self._dsize + ndig <= _SMALL_RECORD:
            rec = self.read(key, cb + self._dsize + ndig, e.off)
            whole = bytes(self._checked(nchunk, key, e, rec))
            return _Head(key, e.off, cb, whole, None, {})
        digests = self.read(key, ndig, e.off + cb + self._dsize)
        if len(digests) != ndig:
            raise FormatError(f"chunk {nchunk}: page digests truncated", url, e.off + cb)
        # (Checked when its reader is made, by :class:`PagedReader`.)
        head = self.read(key, min(cb, _HEAD_READ), e.off)
        return _Head(key, e.off, cb, head, digests, {})

    def _ranged(self, c: _Head) -> ChunkReader:
        """The reader of ranges of the chunk ``c`` describes (kept with the chunk)."""
        key, off, size = c.key, c.off, c.cbytes
        if self.patches:  # (an old directory being upgraded: patched reads only)
            def raw(o: int, n: int) -> bytes:
                return self.read(key, n, off + o)

            raw_into = raw_vec = None
        else:
            pread, pread_into = self._files.pread, self._files.pread_into
            preadv_into = self._files.preadv_into

            def raw(o: int, n: int) -> bytes:
                return pread(key, n, off + o)

            def raw_into(o: int, out: Any) -> int:
                return pread_into(key, out, off + o)

            def raw_vec(o: int, bufs: Sequence[Any]) -> int:
                return preadv_into(key, bufs, off + o)

        if c.digests is not None:
            # Every byte handed out is checked against its page's digest; the head is
            # checked here, once, and reads inside it served from memory.
            paged = PagedReader(size, raw, c.digests, self._ck, self._page,
                                self._files.url(key), off, raw_into, c.head, raw_vec)
            return ChunkReader(size, paged.read, paged.read_into, c.memo)
        head = c.head

        def read_at(offset: int, length: int) -> bytes:
            length = max(0, min(length, size - offset))
            if offset + length <= len(head):
                return bytes(head[offset:offset + length])
            return raw(offset, length)

        return ChunkReader(size, read_at, None, c.memo)

    # -- whole files, on object stores ----------------------------------------------------

    @contextlib.contextmanager
    def prefetched(self, entries: Sequence[tuple[int, Entry]], nchunks: int,
                   entry: Callable[[int], Entry]) -> Iterator[None]:
        """Fetch whole, in one request each, the files of which the read about to come
        decodes most (three quarters) of the chunks (``entries``: its ``(nchunk, entry)``
        pairs; ``entry(n)``: any chunk's entry); the bytes serve this read only (each
        record checked as usual)."""
        wanted: dict[Key, int] = {}
        for n, e in entries:
            if e.stored:
                key = self._key(n, e)
                wanted[key] = wanted.get(key, 0) + 1
        total = {key: sum(1 for n in range(key[0] * self._S, min((key[0] + 1) * self._S,
                                                                 nchunks))
                          if entry(n).gen == key[1]) for key in wanted}
        keys = [key for key, got in wanted.items() if 4 * got >= 3 * total[key]
                and not self._files.held(key)]
        adopted: list[Key] = []
        try:
            if keys:
                datas = self._files.store.get_many([self._files.path(k) for k in keys])
                adopted = [key for key, data in zip(keys, datas, strict=True)
                           if self._files.adopt_bytes(key, data)]
            yield
        finally:
            for key in adopted:
                self._files.forget(key)
