"""Datasets written before versions (format 1 and 2): their committed state, read.

Such a directory records its length in ``meta/sizes`` and where each chunk lies in
the offsets table of its superchunk file (docs/formats/superchunk.md, "Format 2");
a commit interrupted after its journal was written is finished by a writer
(replayed) or read through by a reader (applied in memory).  :class:`LegacyIndex`
presents that state with the interface of a version's index, so one reader serves
both; the first commit of a writer turns it into the first version.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from carray.attrs import values as attrvalues
from carray.codecs import blosc
from carray.core.safejson import load_json
from carray.errors import FormatError
from carray.layouts.bcolz.layout import read_json
from carray.layouts.superchunk.files import DataFiles, file_name
from carray.layouts.superchunk.meta import (
    ATTRS_FILE,
    JOURNAL_FILE,
    META_DIR,
    SIZES_FILE,
    Journal,
    Sizes,
)
from carray.stores import Store
from carray.versions.index import ENTRY, FILL, PAGE_ENTRIES, PAGEREF, Entry, fill_page, npages

#: An entry a reader must refuse: a chunk a format-2 dataset claims but has no offset for.
DAMAGED = -2


def read_sizes(store: Store, rootdir: str) -> Sizes:
    key = store.join(rootdir, META_DIR, SIZES_FILE)
    return Sizes.from_json(read_json(key, "meta/sizes", store), store.url(key))


def recover(store: Store, rootdir: str, readonly: bool, fsync: bool
            ) -> tuple[Sizes, dict[int, list[tuple[int, bytes]]]]:
    """The committed sizes after a leftover journal is replayed (writers), applied in
    memory (readers: the patches per superchunk returned) or discarded."""
    sizes = read_sizes(store, rootdir)
    meta = store.join(rootdir, META_DIR)
    jkey = store.join(meta, JOURNAL_FILE)
    jpath = store.url(jkey)
    try:
        buf = store.get(jkey)
    except FileNotFoundError:
        return sizes, {}
    journal = Journal.decode(buf)
    if journal is None or journal.generation != sizes.generation + 1:
        if not readonly:  # incomplete, damaged or already applied
            store.delete(jkey)
        return sizes, {}
    try:
        new_sizes = Sizes.from_json(load_json(journal.sizes, jpath, what="journal sizes"),
                                    jpath)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"journal holds bad sizes: {exc}", jpath) from None
    data = store.join(rootdir, "data")
    for k, offset, chunk in journal.writes:
        try:
            size = store.size(store.join(data, file_name(k, 0)))
        except FileNotFoundError:
            raise FormatError(f"journal writes to missing {file_name(k, 0)}", jpath) from None
        if offset + len(chunk) > size:
            raise FormatError(f"journal write [{offset}, {offset + len(chunk)}) past the "
                              f"end of {file_name(k, 0)} ({size} bytes)", jpath)
    patches: dict[int, list[tuple[int, bytes]]] = {}
    for k, offset, chunk in journal.writes:
        patches.setdefault(k, []).append((offset, chunk))
    if readonly:
        return new_sizes, patches
    for k, items in patches.items():
        with store.open(store.join(data, file_name(k, 0)), "r+") as h:
            for offset, chunk in items:
                h.pwrite(chunk, offset)
            if fsync or store.remote:
                h.sync()
    store.put(store.join(meta, SIZES_FILE), journal.sizes, fsync=fsync)
    if fsync:
        store.sync_dir(meta)
    store.delete(jkey)
    return new_sizes, {}


def patched(data: bytes, offset: int, patches: list[tuple[int, bytes]]) -> bytes:
    """``data`` read at ``offset``, with a journal's pending writes laid over it."""
    out = None
    end = offset + len(data)
    for p_off, p_data in patches:
        lo, hi = max(offset, p_off), min(end, p_off + len(p_data))
        if lo < hi:
            out = bytearray(data) if out is None else out
            out[lo - offset:hi - offset] = p_data[lo - p_off:hi - p_off]
    return bytes(out) if out is not None else data


class LegacyIndex:
    """The committed chunks of a format-2 dataset as index entries (see the module doc).

    Entries are worked out a superchunk file at a time: offsets from its table,
    ``room`` up to the next record, ``cbytes`` from each chunk's Blosc header.
    Absent chunks (offset -1, or no file) below ``fill_chunks`` hold the fill value;
    elsewhere they are damage, refused when read (:data:`DAMAGED`).
    """

    def __init__(self, files: DataFiles, nchunks: int, fill_bound: int, dsize: int,
                 patches: dict[int, list[tuple[int, bytes]]]) -> None:
        self.nchunks = nchunks
        self._files = files
        self._S = files.info.superchunksize
        self._fill_bound = fill_bound
        self._dsize = dsize
        self._patches = patches
        self._tables: dict[int, np.ndarray] = {}

    def stored(self) -> Iterator[tuple[int, None]]:
        """``(page number, None)`` for every page: a format-2 index has no page files,
        any page may hold stored chunks."""
        return ((p, None) for p in range(npages(self.nchunks)))

    def _read(self, k: int, n: int, offset: int) -> bytes:
        data = self._files.pread((k, 0), n, offset)
        patches = self._patches.get(k)
        return patched(data, offset, patches) if patches else data

    def _table(self, k: int) -> np.ndarray:
        """Entries of superchunk ``k``'s slots."""
        found = self._tables.get(k)
        if found is not None:
            return found
        table = fill_page(self._S)
        first = k * self._S
        if not self._files.exists((k, 0)):
            if min(first + self._S, self.nchunks) > self._fill_bound:
                raise FormatError(f"superchunk file {file_name(k, 0)} is missing",
                                  self._files.url((k, 0)))
        else:
            self._fill(k, table)
        self._tables[k] = table
        return table

    def _fill(self, k: int, table: np.ndarray) -> None:
        key, url = (k, 0), self._files.url((k, 0))
        info = self._files.file(key)
        if not info.offsets_pos or info.data_start - info.offsets_pos != 8 * self._S:
            raise FormatError("superchunk file of format 2 lacks its offsets table", url, 5)
        offs = np.frombuffer(self._read(k, 8 * self._S, info.offsets_pos), "<i8")
        bad = np.flatnonzero((offs < -1) | ((offs >= 0) & ((offs < info.data_start)
                                                           | (offs >= info.size))))
        if bad.size:
            i = int(bad[0])
            raise FormatError(f"offset of slot {i} is {int(offs[i])}, outside the chunk area "
                              f"[{info.data_start}, {info.size})", url, info.offsets_pos + 8 * i)
        ends = np.sort(np.append(offs[offs >= 0], info.size))
        for slot, off in enumerate(offs.tolist()):
            n = k * self._S + slot
            if n >= self.nchunks:
                break
            if off < 0:
                table[slot]["off"] = FILL if n < self._fill_bound else DAMAGED
                continue
            head = self._read(k, blosc.BLOSC1_HEADER, off)
            h = blosc.read_header(head, url, off, size=info.size - off)
            room = int(ends[np.searchsorted(ends, off, side="right")]) - off
            if h.cbytes + self._dsize > room:
                raise FormatError(f"chunk {n}: its checksum runs past its room", url,
                                  off + h.cbytes)
            table[slot] = (off, room, h.cbytes, 0, 0)

    def page(self, p: int) -> np.ndarray:
        lo = p * PAGE_ENTRIES
        hi = min(lo + PAGE_ENTRIES, self.nchunks)
        out = np.empty(hi - lo, dtype=ENTRY)
        for n in range(lo, hi, 1):
            k, slot = divmod(n, self._S)
            out[n - lo] = self._table(k)[slot]
        return out

    def entry(self, n: int) -> Entry:
        if not 0 <= n < self.nchunks:
            raise IndexError(f"chunk {n} out of range (the index holds {self.nchunks})")
        k, slot = divmod(n, self._S)
        e = Entry(*self._table(k)[slot].tolist())
        if e.off == DAMAGED:
            raise FormatError(f"chunk {n} has no offset (slot {slot} is -1)",
                              self._files.url((k, 0)))
        return e

    def entries(self) -> Iterator[np.ndarray]:
        for p in range(-(-self.nchunks // PAGE_ENTRIES)):
            yield self.page(p)

    @property
    def pages(self) -> np.ndarray:
        """No stored pages: a commit writes every page of it."""
        return np.zeros(0, dtype=PAGEREF)

    @property
    def patches(self) -> dict[int, list[tuple[int, bytes]]]:
        return self._patches

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._tables.clear()


def attrs(store: Store, rootdir: str) -> dict[str, Any]:
    """The attributes of a directory written before versions (its meta/attrs)."""
    key = store.join(rootdir, META_DIR, ATTRS_FILE)
    path = store.url(key)
    try:
        obj = load_json(store.get(key), path, what="meta/attrs")
    except FileNotFoundError:
        return {}
    if not isinstance(obj, dict):
        raise FormatError("meta/attrs must hold a JSON object", path)
    return attrvalues.load_typed(obj, path)
