"""Chunk indexes of versioned arrays: where each chunk of one array lies, by pages.

An array's index lists, for every chunk ``n``, an :data:`ENTRY`: the superchunk file
generation ``gen`` and offset ``off`` of its record, the record's ``room`` (bytes it
owns in the file), the chunk's compressed size ``cbytes`` and ``flags``
(:data:`HAS_PAGES`: the record carries page digests).  ``off == FILL`` marks a chunk
that holds only the fill value and is stored nowhere.

Entries are kept in *pages* of :data:`PAGE_ENTRIES` chunks, each stored once (in the
``.ix`` file of the commit that changed it) and shared by every later version that
did not change it, so a commit writes only the pages it changed, and a version is a
table of references to pages (docs/formats/superchunk.md, "Index pages").  A page
whose chunks all hold the fill value may have no reference at all (a *sparse* table
lists the numbers of the pages it refers to), so an array of any length whose chunks
were never written costs nothing to record.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

try:
    from zlib_ng import zlib_ng as _zlib
except ImportError:  # pragma: no cover - a declared dependency
    import zlib as _zlib  # type: ignore[no-redef]

from carray.codecs.checksums import crc32
from carray.errors import ChecksumError, FormatError

#: One chunk's entry (little-endian, 28 bytes).
ENTRY = np.dtype([("off", "<i8"), ("room", "<i8"), ("cbytes", "<i4"), ("gen", "<i4"),
                  ("flags", "<u4")])
#: ``flags``: the record holds page digests after the chunk digest.
HAS_PAGES = 1
#: ``off`` of a chunk holding only the fill value (nothing stored).
FILL = -1
#: Chunks per index page.
PAGE_ENTRIES = 512
#: Where a page is stored: the commit (``seq``) whose ``.ix`` file holds it, the offset
#: and length of its bytes there.
PAGEREF = np.dtype([("seq", "<i8"), ("off", "<i8"), ("len", "<i4")])

_CRC = 4


class Entry(NamedTuple):
    """One chunk's entry as Python ints."""

    off: int
    room: int
    cbytes: int
    gen: int
    flags: int

    @property
    def stored(self) -> bool:
        return self.off >= 0


FILL_ENTRY = Entry(FILL, 0, 0, 0, 0)


def fill_page(n: int = PAGE_ENTRIES) -> np.ndarray:
    """A page of ``n`` entries, every chunk the fill value."""
    page = np.zeros(n, dtype=ENTRY)
    page["off"] = FILL
    return page


def encode_page(entries: np.ndarray) -> bytes:
    """A page's stored bytes: its entries (little-endian records) deflated, then a
    CRC-32 of what is stored."""
    raw = np.ascontiguousarray(entries, dtype=ENTRY).tobytes()
    body = _zlib.compress(raw, 1)
    return body + crc32(body).to_bytes(_CRC, "little")


def decode_page(data: bytes, expected: int, path: str | os.PathLike[str] | None = None,
                offset: int | None = None) -> np.ndarray:
    """The entries of a stored page holding ``expected`` of them, checked."""
    if len(data) < _CRC + 2:
        raise FormatError(f"index page of {len(data)} bytes is too short", path, offset)
    body, crc = data[:-_CRC], int.from_bytes(data[-_CRC:], "little")
    if crc32(body) != crc:
        raise ChecksumError("index page: CRC-32 mismatch", path, offset)
    want = expected * ENTRY.itemsize
    try:
        inflater = _zlib.decompressobj()
        raw = inflater.decompress(body, want + 1)  # never more than a page can hold
    except Exception as exc:  # noqa: BLE001 - zlib.error, whichever zlib this is
        raise FormatError(f"index page does not inflate: {exc}", path, offset) from None
    if len(raw) != want or not inflater.eof:
        raise FormatError(f"index page holds {len(raw)} bytes, expected {want}", path, offset)
    return np.frombuffer(raw, dtype=ENTRY).copy()


class PageSource:
    """Loads stored pages by reference (the repository's ``.ix`` files), keeping the most
    recently used ones decoded; shared by every index of one repository.

    ``read(seq, offset, length) -> bytes`` fetches stored bytes; ``path_of(seq)`` names
    the file for messages.
    """

    def __init__(self, read: Callable[[int, int, int], bytes], path_of: Callable[[int], str],
                 capacity: int = 256) -> None:
        self._read = read
        self._path_of = path_of
        self._capacity = capacity
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def page(self, ref: Any, expected: int) -> np.ndarray:
        """The entries of the page ``ref`` (a :data:`PAGEREF` record), read-only."""
        seq, off, length = int(ref["seq"]), int(ref["off"]), int(ref["len"])
        key = (seq, off)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        data = self._read(seq, off, length)
        if len(data) != length:
            raise FormatError(f"index page truncated: {len(data)} of {length} bytes",
                              self._path_of(seq), off)
        page = decode_page(data, expected, self._path_of(seq), off)
        if len(page) and (page["off"] < FILL).any() | (page["cbytes"] < 0).any() | \
                (page["room"] < 0).any() | (page["gen"] < 0).any():
            raise FormatError("index page holds impossible entries", self._path_of(seq), off)
        page.flags.writeable = False
        self._keep(key, page)
        return page

    def remember(self, ref: Any, entries: np.ndarray) -> None:
        """Page ``ref`` was just stored holding ``entries``: its writer, which changes the
        page it appended to next, need not read it back."""
        page = np.array(entries, dtype=ENTRY)
        page.flags.writeable = False
        self._keep((int(ref["seq"]), int(ref["off"])), page)

    def _keep(self, key: tuple[int, int], page: np.ndarray) -> None:
        with self._lock:
            self._cache[key] = page
            if len(self._cache) > self._capacity:
                self._cache.popitem(last=False)


def npages(nchunks: int) -> int:
    """Pages ``nchunks`` entries take."""
    return -(-nchunks // PAGE_ENTRIES)


def page_slot(numbers: np.ndarray | None, p: int) -> int | None:
    """Where page ``p``'s reference is in a table of pages ``numbers`` (None: a dense
    table, page ``p`` at ``p``); None when the table has none (every chunk fill)."""
    if numbers is None:
        return p
    i = int(np.searchsorted(numbers, p))
    return i if i < len(numbers) and int(numbers[i]) == p else None


def _fill_page_ro(n: int) -> np.ndarray:
    page = fill_page(n)
    page.flags.writeable = False
    return page


class IndexView:
    """The index of one array at one version: ``nchunks`` entries in pages.

    Parameters
    ----------
    nchunks : int
        Chunks the array has.
    pages : numpy.ndarray
        :data:`PAGEREF` references: one per page (``ceil(nchunks / PAGE_ENTRIES)``), or
        with ``numbers``, one per page listed there.
    source : PageSource
        Where pages are loaded from.
    numbers : numpy.ndarray, optional
        The sorted page numbers ``pages`` refer to (a sparse table): every other page
        holds only fill entries.
    """

    __slots__ = ("nchunks", "pages", "numbers", "_source", "_last")

    def __init__(self, nchunks: int, pages: np.ndarray, source: PageSource | None,
                 numbers: np.ndarray | None = None) -> None:
        if numbers is None and len(pages) != npages(nchunks):
            raise FormatError(f"{len(pages)} index pages for {nchunks} chunks")
        if numbers is not None and len(numbers) != len(pages):
            raise FormatError(f"{len(numbers)} page numbers for {len(pages)} index pages")
        self.nchunks = nchunks
        self.pages = pages
        self.numbers = numbers
        self._source = source
        self._last: tuple[int, np.ndarray] | None = None

    @classmethod
    def empty(cls) -> IndexView:
        return cls(0, np.zeros(0, dtype=PAGEREF), None)

    def page(self, p: int) -> np.ndarray:
        """Entries of page ``p`` (read-only)."""
        last = self._last
        if last is not None and last[0] == p:
            return last[1]
        n = min(PAGE_ENTRIES, self.nchunks - p * PAGE_ENTRIES)
        slot = page_slot(self.numbers, p)
        if slot is None:
            page = _fill_page_ro(n)
        else:
            assert self._source is not None
            page = self._source.page(self.pages[slot], n)
        self._last = (p, page)
        return page

    def stored(self) -> Iterable[tuple[int, Any]]:
        """``(page number, reference)`` of every page the table refers to."""
        numbers = range(len(self.pages)) if self.numbers is None else self.numbers.tolist()
        return zip(numbers, self.pages, strict=True)

    def stored_chunks(self) -> Iterable[int]:
        """The numbers of the chunks stored (not the fill value), ascending: pages without
        a reference are skipped, so a sparse index costs what it stores."""
        for p, _ in self.stored():
            page = self.page(p)
            for i in np.flatnonzero(page["off"] != FILL).tolist():
                yield p * PAGE_ENTRIES + i

    def entry(self, n: int) -> Entry:
        if not 0 <= n < self.nchunks:
            raise IndexError(f"chunk {n} out of range (the index holds {self.nchunks})")
        p, i = divmod(n, PAGE_ENTRIES)
        return Entry(*self.page(p)[i].tolist())

    def entries(self) -> Iterable[np.ndarray]:
        """Every page's entries, in order (every page of the index: for a dense one)."""
        for p in range(npages(self.nchunks)):
            yield self.page(p)


class WorkingIndex:
    """A writer's index: the committed :class:`IndexView` plus the pages changed since.

    Chunks past the committed ones that were never set hold the fill value, and so do
    those the index was cut below since (a cut and a growth read fill, never the
    committed records).  Changes can be undone back to a :meth:`savepoint`.
    """

    def __init__(self, base: IndexView) -> None:
        self.base = base
        self.nchunks = base.nchunks
        self._changed: dict[int, np.ndarray] = {}
        self._undo: list[tuple[int, Entry | None, int]] | None = None
        self._horizon = base.nchunks  # chunks past it never read the base's records

    @property
    def changed(self) -> bool:
        return bool(self._changed) or self.nchunks != self.base.nchunks or \
            self._horizon < self.base.nchunks

    def rebase(self, base: IndexView) -> None:
        """Take ``base`` as the committed view the changes apply to (the chunks they
        did not change are the same in both)."""
        self.base = base
        self._horizon = min(self._horizon, base.nchunks)

    def page(self, p: int) -> np.ndarray:
        """Entries of page ``p`` as they are now (full pages; those past the end unset)."""
        page = self._changed.get(p)
        if page is not None:
            return page
        if (p + 1) * PAGE_ENTRIES <= self._horizon:
            return self.base.page(p)
        if p * PAGE_ENTRIES < self._horizon:
            return self._writable_page(p)  # the committed last page, filled up
        return _fill_page_ro(PAGE_ENTRIES)

    def entry(self, n: int) -> Entry:
        if not 0 <= n < self.nchunks:
            raise IndexError(f"chunk {n} out of range (the index holds {self.nchunks})")
        p, i = divmod(n, PAGE_ENTRIES)
        page = self._changed.get(p)
        if page is None:
            if n >= self._horizon:
                return FILL_ENTRY
            page = self.base.page(p)
        return Entry(*page[i].tolist())

    def _writable_page(self, p: int) -> np.ndarray:
        page = self._changed.get(p)
        if page is None:
            page = fill_page()
            lo = p * PAGE_ENTRIES
            if lo < self._horizon:
                old = self.base.page(p)[:self._horizon - lo]
                page[:len(old)] = old
            self._changed[p] = page
        return page

    def set(self, n: int, entry: Entry) -> None:
        """Make ``entry`` chunk ``n``'s (``n`` may be the next chunk: the index grows)."""
        if not 0 <= n <= self.nchunks:
            raise IndexError(f"chunk {n} set before chunk {self.nchunks}")
        if self._undo is not None:
            self._undo.append((n, self.entry(n) if n < self.nchunks else None, self.nchunks))
        p, i = divmod(n, PAGE_ENTRIES)
        self._writable_page(p)[i] = tuple(entry)
        self.nchunks = max(self.nchunks, n + 1)

    def resize(self, nchunks: int) -> None:
        """Grow (new chunks hold the fill value) or cut the index to ``nchunks``."""
        if nchunks == self.nchunks:
            return
        if self._undo is not None:
            if nchunks < self.nchunks:
                for n in range(self.nchunks - 1, nchunks - 1, -1):
                    self._undo.append((n, self.entry(n), self.nchunks))
            else:
                self._undo.append((self.nchunks, None, self.nchunks))
        if nchunks < self.nchunks:
            self._cut(nchunks)
        else:
            # The page the index ends inside gets fill entries after its last chunk.
            if self.nchunks % PAGE_ENTRIES:
                page = self._writable_page(self.nchunks // PAGE_ENTRIES)
                page[self.nchunks % PAGE_ENTRIES:] = fill_page(
                    PAGE_ENTRIES - self.nchunks % PAGE_ENTRIES)
        self.nchunks = nchunks

    def _cut(self, nchunks: int) -> None:
        lo = nchunks // PAGE_ENTRIES
        if nchunks % PAGE_ENTRIES:
            page = self._writable_page(lo)
            page[nchunks % PAGE_ENTRIES:] = fill_page(PAGE_ENTRIES - nchunks % PAGE_ENTRIES)
            lo += 1
        for p in [p for p in self._changed if p >= lo]:
            del self._changed[p]
        self._horizon = min(self._horizon, nchunks)

    # -- savepoints ------------------------------------------------------------------------

    def savepoint(self) -> int:
        """Start recording changes (if not yet); returns a token for :meth:`rollback`."""
        if self._undo is None:
            self._undo = []
        return len(self._undo)

    def rollback(self, token: int) -> list[tuple[int, Entry]]:
        """Undo the changes made since ``token``; returns ``(n, entry)`` for every entry
        that was replaced or dropped by them (what chunk ``n`` held meanwhile is gone)."""
        assert self._undo is not None
        replaced = []
        while len(self._undo) > token:
            n, old, count = self._undo.pop()
            if n < self.nchunks:
                replaced.append((n, self.entry(n)))
            if old is not None:
                p, i = divmod(n, PAGE_ENTRIES)
                self._writable_page(p)[i] = tuple(old)
            elif count < self.nchunks:
                self._cut(count)
            self.nchunks = count
        return replaced

    def release(self) -> None:
        """Stop recording (the outermost change finished)."""
        self._undo = None

    # -- committing ------------------------------------------------------------------------

    def changed_pages(self) -> dict[int, np.ndarray]:
        """Page number -> entries, for the pages a commit must store (cut to the length):
        the pages changed that hold a stored chunk.  Pages never set past the committed
        ones, and changed pages of fill entries only (:meth:`filled_pages`), need no
        reference; the others keep their committed ones."""
        out = {}
        top = npages(self.nchunks)
        for p in sorted(self._changed):
            if p < top:
                page = self._changed[p][:min(PAGE_ENTRIES, self.nchunks - p * PAGE_ENTRIES)]
                if (page["off"] != FILL).any():
                    out[p] = page
        return out

    def filled_pages(self) -> frozenset[int]:
        """The changed pages whose chunks now all hold the fill value (their committed
        references, if any, go)."""
        top = npages(self.nchunks)
        filled = {p for p, page in self._changed.items()
                  if p < top and not (page["off"] != FILL).any()}
        # Whole committed pages past a cut: a growth since shows them as fill.
        filled.update(p for p, _ in self.base.stored() if p < top and
                      p * PAGE_ENTRIES >= self._horizon and p not in self._changed)
        return frozenset(filled)

    def committed(self, base: IndexView) -> None:
        """The changes are stored: ``base`` is the new committed view."""
        self.base = base
        self.nchunks = base.nchunks
        self._horizon = base.nchunks
        self._changed.clear()
        if self._undo is not None:
            self._undo = []
