"""Page digests: a checksum for every page of a stored chunk, so a ranged read checks
exactly what it fetches.

A stored chunk of ``size`` bytes is cut into pages of ``page`` bytes (the last one
shorter); its page digests are the checksum of each page, one after another.  A
read of bytes ``[a, b)`` fetches the pages holding them whole, checks each one and
hands out only what was asked for, so no byte reaches a decoder unchecked however
few blocks a read wants.  Pages, not Blosc blocks, because they need nothing parsed
first: the header and block table are checked by the same rule as the blocks.
(docs/formats/superchunk.md, "Records".)
"""

from __future__ import annotations

import array
import os
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from carray.codecs.checksums import Checksum
from carray.errors import ChecksumError, FormatError

#: The page size carray writes (bytes): the first read of a chunk's header and block
#: table takes one page, and a block's compressed bytes one or two more.
PAGE_SIZE = 4096
# Ranged reads at least this long go straight into the caller's buffer.
_DIRECT = 64 * 1024
# Reads of pages up to this long go through a scratch buffer per thread.
_SCRATCH = 64 * 1024
_local = threading.local()
_U32, _U32X2 = struct.Struct("<I"), struct.Struct("<2I")


def _cut(view: memoryview, page: int) -> Iterator[memoryview]:
    """The ``page``-byte pages of ``view`` (the last may be short), made in C: a long
    read has hundreds."""
    n = len(view)
    return map(view.__getitem__, map(slice, range(0, n, page), range(page, n + page, page)))


def _scratch(n: int) -> memoryview:
    """This thread's scratch buffer, ``n`` (at most :data:`_SCRATCH`) bytes of it."""
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(bytearray(_SCRATCH))
    return buf[:n]


def npages(size: int, page: int) -> int:
    """Pages a chunk of ``size`` bytes is cut into."""
    return -(-size // page) if size > 0 else 0


def page_digests(data: Any, checksum: Checksum, page: int = PAGE_SIZE) -> bytes:
    """The digest of every ``page``-byte page of ``data``, one after another."""
    view = memoryview(data).cast("B")
    pages = [view[i:i + page] for i in range(0, len(view), page)]
    if checksum.value is not None:
        # The 32-bit sums as ints, packed at once: no Python call per page.
        sums = array.array("I", map(checksum.value, pages))
        if sums.itemsize == 4:
            if sys.byteorder != "little":
                sums.byteswap()
            return sums.tobytes()
    digest = checksum.digest
    return b"".join([digest(p) for p in pages])


class PagedReader:
    """Checked ranged reads of one stored chunk of ``size`` bytes.

    Parameters
    ----------
    size : int
        The chunk's stored bytes.
    read_raw : callable
        ``read_raw(offset, length) -> bytes``: unchecked bytes of the chunk.
    digests : bytes
        The chunk's page digests (:func:`page_digests`).
    checksum : Checksum
        What made them.
    page : int
        The page size.
    path, base : str, int
        The file and the chunk's offset in it, for messages.
    read_raw_into : callable, optional
        ``read_raw_into(offset, out) -> int``: unchecked bytes of the chunk into a buffer;
        long reads then go straight into the caller's buffer instead of through a copy.
    head : bytes, optional
        The chunk's first bytes, already read: whole pages are checked here and reads
        inside them served from memory.
    read_raw_vec : callable, optional
        ``read_raw_vec(offset, buffers) -> int``: unchecked bytes of the chunk into
        ``buffers`` one after another (one scatter read); a long read then fetches the
        rest of the pages it starts and ends inside in the same read.
    """

    __slots__ = ("size", "_read", "_digests", "_checksum", "_page", "_path", "_base",
                 "_read_into", "_head", "_read_vec")

    def __init__(self, size: int, read_raw: Callable[[int, int], bytes], digests: bytes,
                 checksum: Checksum, page: int, path: str | os.PathLike[str] | None = None,
                 base: int = 0, read_raw_into: Callable[[int, Any], int] | None = None,
                 head: bytes = b"",
                 read_raw_vec: Callable[[int, Sequence[Any]], int] | None = None) -> None:
        want = npages(size, page) * checksum.size
        if len(digests) != want:
            raise FormatError(f"chunk of {size} bytes needs {want} bytes of page digests, "
                              f"found {len(digests)}", path, base + size)
        self.size = size
        self._read = read_raw
        self._digests = digests
        self._checksum = checksum
        self._page = page
        self._path = path
        self._base = base
        self._read_into = read_raw_into
        self._read_vec = read_raw_vec
        self._head = b""
        if head:
            self._head = checked_head(head, size, digests, checksum, page, path, base)

    def checked(self, data: Any, first_page: int) -> None:
        """Check ``data``, whole pages starting at page ``first_page`` (the last page of
        the chunk may be short)."""
        view = memoryview(data).cast("B")
        n, page, ck = len(view), self._page, self._checksum
        count = -(-n // page)
        # The common case, nothing wrong: every page's digest made and compared at once,
        # with no Python step per page (a long read has hundreds); 32-bit digests as
        # ints, so nothing is packed per page.  On a mismatch the pages are checked one
        # by one below to name the bad one.
        value = ck.value
        if value is not None and (first_page + count) * 4 <= len(self._digests):
            # (A ranged read of a few blocks fetches one or two pages: those without
            # setting anything up.)
            if count == 1:
                if value(view) == _U32.unpack_from(self._digests, first_page * 4)[0]:
                    return
            elif count == 2:
                if (value(view[:page]), value(view[page:])) == \
                        _U32X2.unpack_from(self._digests, first_page * 4):
                    return
            elif tuple(map(value, _cut(view, page))) == \
                    struct.unpack_from(f"<{count}I", self._digests, first_page * 4):
                return
        elif b"".join(map(ck.digest, _cut(view, page))) == \
                self._digests[first_page * ck.size:(first_page + count) * ck.size]:
            return
        width, digest = ck.size, ck.digest
        for i, lo in enumerate(range(0, n, page)):
            p = first_page + i
            if digest(view[lo:lo + page]) != self._digests[p * width:(p + 1) * width]:
                raise ChecksumError(f"page {p} of a chunk: {ck.name} checksum mismatch",
                                    self._path, self._base + p * page)

    def _fetch(self, offset: int, length: int) -> memoryview:
        """Bytes ``[offset, offset + length)`` (fewer only past the end), every one
        checked, as a view of the whole pages read (in this thread's scratch buffer
        when it fits: use it before the next read)."""
        size = self.size
        stop = offset + length if offset + length < size else size
        if offset < 0 or stop <= offset:
            return memoryview(b"")
        if stop <= len(self._head):
            return memoryview(self._head)[offset:stop]
        page = self._page
        lo = offset - offset % page
        hi = -(-stop // page) * page
        if hi > size:
            hi = size
        data = self._pages(lo, hi)
        self.checked(data, lo // page)
        return data[offset - lo:stop - lo]

    def _pages(self, lo: int, hi: int) -> memoryview:
        """The unchecked bytes ``[lo, hi)``: read into this thread's scratch buffer when
        they fit, as a new bytes object costs more than the read (its allocation)."""
        n = hi - lo
        if self._read_into is not None and n <= _SCRATCH:
            data = _scratch(n)
            got = self._read_into(lo, data)
        else:
            data = memoryview(self._read(lo, n))
            got = len(data)
        if got != n:
            raise FormatError(f"chunk truncated: {got} of {n} bytes at {lo}", self._path,
                              self._base + lo)
        return data

    def read(self, offset: int, length: int) -> bytes:
        """Bytes ``[offset, offset + length)`` (fewer only past the end), every one checked."""
        return bytes(self._fetch(offset, length))

    def read_into(self, offset: int, out: Any) -> int:
        """Fill ``out`` from ``offset`` with checked bytes; returns how many."""
        view = memoryview(out).cast("B")
        stop = min(offset + len(view), self.size)
        if self._read_into is not None and stop - offset >= _DIRECT and offset >= 0:
            return self._read_direct(offset, stop, view)
        data = self._fetch(offset, len(view))
        view[:len(data)] = data
        return len(data)

    def _read_direct(self, offset: int, stop: int, view: memoryview) -> int:
        """A long read straight into ``view``: its whole pages are checked there, and the
        pages it starts and ends inside are checked with their other bytes, read in the
        same scatter read when the reader can, else apart."""
        assert self._read_into is not None
        page, n = self._page, stop - offset
        lo, end = offset - offset % page, min(-(-stop // page) * page, self.size)
        if self._read_vec is not None:
            edges = _scratch(offset - lo + end - stop)
            before, after = edges[:offset - lo], edges[offset - lo:]
            if self._read_vec(lo, [before, view[:n], after]) != end - lo:
                raise FormatError(f"chunk truncated: fewer than {end - lo} bytes at {lo}",
                                  self._path, self._base + lo)
        else:
            if self._read_into(offset, view[:n]) != n:
                raise FormatError(f"chunk truncated: fewer than {n} bytes at {offset}",
                                  self._path, self._base + offset)
            before = memoryview(self._edge(lo, offset) if offset > lo else b"")
            after = memoryview(self._edge(stop, end) if end > stop else b"")
        first = -(-offset // page) * page
        last = stop if stop == self.size else stop - stop % page
        self.checked(view[first - offset:last - offset], first // page)
        if offset > lo:  # (a long read ends in another page than it starts in)
            self.checked(bytes(before) + bytes(view[:first - offset]), lo // page)
        if last < stop:
            self.checked(bytes(view[last - offset:n]) + bytes(after), last // page)
        return n

    def _edge(self, lo: int, hi: int) -> bytes:
        return bytes(self._pages(lo, hi))


def checked_head(head: bytes, size: int, digests: bytes, checksum: Checksum, page: int,
                 path: str | os.PathLike[str] | None = None, base: int = 0) -> bytes:
    """The first bytes of a chunk read in one piece (``head``), cut to whole pages (or the
    chunk's end) and checked; what is not a whole page is dropped."""
    keep = min(len(head), size)
    if keep < size:
        keep -= keep % page
    view, d = memoryview(head), checksum.size
    for p, lo in enumerate(range(0, keep, page)):
        if checksum.digest(view[lo:min(lo + page, keep)]) != digests[p * d:(p + 1) * d]:
            raise ChecksumError(f"page {p} of a chunk: {checksum.name} checksum mismatch",
                                path, base + lo)
    return head[:keep]


@dataclass(frozen=True)
class ChunkDigests:
    """What guards one stored chunk of ``size`` bytes: the digest of the whole chunk
    (checked by whole-chunk reads) and the digest of each of its pages (checked by
    ranged reads, :class:`PagedReader`), made by ``checksum``."""

    checksum: Checksum
    page: int
    size: int
    digest: bytes
    pages: bytes

    @classmethod
    def of(cls, data: Any, checksum: Checksum, page: int = PAGE_SIZE) -> ChunkDigests:
        """The digests of the stored chunk ``data``."""
        view = memoryview(data).cast("B")
        return cls(checksum, page, len(view), checksum.digest(view),
                   page_digests(view, checksum, page))

    @property
    def packed(self) -> bytes:
        """The chunk digest then the page digests, as layouts keep them side by side."""
        return self.digest + self.pages

    @classmethod
    def unpack(cls, packed: bytes, size: int, checksum: Checksum,
               page: int = PAGE_SIZE) -> ChunkDigests:
        """The inverse of :attr:`packed` for a chunk of ``size`` bytes."""
        d = checksum.size
        if len(packed) != d * (1 + npages(size, page)):
            raise ValueError(f"{len(packed)} bytes of digests do not fit a chunk of {size}")
        return cls(checksum, page, size, packed[:d], packed[d:])

    def check(self, data: Any, path: str | os.PathLike[str] | None = None,
              base: int = 0) -> None:
        """Raise :class:`ChecksumError` unless ``data`` is the chunk these digests guard."""
        view = memoryview(data).cast("B")
        if len(view) != self.size:
            raise FormatError(f"chunk of {len(view)} bytes, {self.size} expected", path, base)
        if self.checksum.digest(view) != self.digest:
            raise ChecksumError(f"{self.checksum.name} checksum mismatch over the chunk's "
                                f"{self.size} bytes", path, base)

    def check_pages(self, data: Any, path: str | os.PathLike[str] | None = None,
                    base: int = 0) -> None:
        """Check every page digest against the whole chunk ``data`` (what a verifier does:
        a page digest no read would accept is damage too)."""
        self.reader(lambda o, n: b"", path, base).checked(data, 0)

    def reader(self, read_raw: Callable[[int, int], bytes],
               path: str | os.PathLike[str] | None = None, base: int = 0,
               read_raw_into: Callable[[int, Any], int] | None = None,
               head: bytes = b"") -> PagedReader:
        """Checked ranged reads of the chunk through ``read_raw(offset, length)`` (and
        ``read_raw_into(offset, out)``, ``head``: see :class:`PagedReader`)."""
        return PagedReader(self.size, read_raw, self.pages, self.checksum, self.page,
                           path, base, read_raw_into, head)


__all__ = ["PAGE_SIZE", "ChunkDigests", "PagedReader", "checked_head", "npages",
           "page_digests"]
