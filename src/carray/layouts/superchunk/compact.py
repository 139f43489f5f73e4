"""Rewriting superchunk files whole: compaction, Bloscpack-compatible files, and the
files parallel writers make.

* A superchunk file whose free space passed a fifth of it is *compacted*: its live
  records are copied (checked first) into the next generation's file, back to back,
  and the index points there; the old file goes once no kept version refers to it.
  A commit compacts the files it would leave so (:meth:`SpaceKeeper.crowded`) and
  those an earlier reclaim found so.
* A Bloscpack-compatible file (Blosc1 chunks, no spare room) must hold its chunks in
  order, back to back, under a header and offsets table bloscpack reads: a commit that
  broke the order compacts the superchunk, and after publishing, the header and table
  of each file it touched are made to say what the new version holds (:func:`mirror`).
* Parallel writers write a superchunk's file whole (:func:`write_unit`), in a layout
  :func:`adopt_units` reads back into the index.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from carray.codecs import blosc
from carray.codecs.pages import npages
from carray.errors import ChecksumError, FormatError
from carray.versions import HAS_PAGES, PAGE_ENTRIES, Entry

if TYPE_CHECKING:
    from carray.codecs.checksums import Checksum
    from carray.layouts.superchunk.files import DataFiles
    from carray.layouts.superchunk.meta import StorageInfo
    from carray.layouts.superchunk.space import SpaceKeeper
    from carray.versions import WorkingIndex


class Compacted(Protocol):
    """What compaction needs of its layout (a superchunk layout being written)."""

    info: StorageInfo
    files: DataFiles

    @property
    def working_index(self) -> WorkingIndex: ...

    @property
    def space(self) -> SpaceKeeper: ...

    @property
    def page_size(self) -> int: ...

    @property
    def digest_size(self) -> int: ...

    @property
    def checksum(self) -> Checksum: ...

    def read_chunk(self, nchunk: int) -> memoryview: ...
    def chunk_digest(self, data: bytes) -> bytes: ...
    def replace_entry(self, nchunk: int, entry: Entry, old: Entry | None) -> None: ...


def _live(layout: Compacted, k: int) -> list[tuple[int, Entry]]:
    """``(n, entry)`` of the stored chunks of superchunk ``k`` in the working index."""
    S = layout.info.superchunksize
    index = layout.working_index
    return [(n, e) for n in range(k * S, min((k + 1) * S, index.nchunks))
            if (e := index.entry(n)).stored]


def _record(layout: Compacted, n: int, e: Entry) -> tuple[bytes, bytes]:
    """Chunk ``n``'s bytes, checked, and the tail its new record carries (digest, and
    page digests when the dataset writes them)."""
    chunk = bytes(layout.read_chunk(n))
    return chunk, layout.chunk_digest(chunk)


def compact(layout: Compacted, ks: Iterable[int]) -> None:
    """Rewrite superchunks ``ks`` into files of their next generation (see the module doc)."""
    keeper = layout.space
    spare, compat = layout.info.spare, layout.files.compat
    for k in ks:
        keeper.compact.discard(k)
        live = _live(layout, k)
        if not live:
            continue
        gen = keeper.next_gen(k)
        key = (k, gen)
        pos = layout.files.data_start(key)
        parts: list[bytes] = []
        placed: list[tuple[int, Entry, Entry]] = []
        table = np.full(layout.info.superchunksize, -1, dtype="<i8")
        for n, e in live:
            chunk, tail = _record(layout, n, e)
            room = len(chunk) + len(tail) + math.ceil(len(chunk) * spare)
            parts += [chunk, tail, bytes(room - len(chunk) - len(tail))]
            flags = HAS_PAGES if layout.page_size else 0
            placed.append((n, e, Entry(pos, room, len(chunk), gen, flags)))
            table[n - k * layout.info.superchunksize] = pos
            pos += room
        last = blosc.read_header(parts[-3]).nbytes if compat else 0
        layout.files.new_file(key, parts, table if compat else None, last)
        for n, old, new in placed:
            keeper.written(k, gen, new.off, new.room)
            layout.replace_entry(n, new, old)


def out_of_order(layout: Compacted, k: int) -> bool:
    """Whether superchunk ``k``'s records are not what bloscpack reads: its chunks in
    order, back to back from the start of its newest file."""
    live = _live(layout, k)
    gen = layout.space.gen(k)
    S = layout.info.superchunksize
    pos = layout.files.data_start((k, gen))
    for i, (n, e) in enumerate(live):
        if n != k * S + i or e.gen != gen or e.off != pos:
            return True
        pos += e.cbytes + layout.digest_size
    return False


def mirror(layout: Compacted, ks: Iterable[int]) -> None:
    """Make the header and offsets table of superchunks ``ks``' files say where their
    chunks are in the newest version (what bloscpack reads)."""
    S = layout.info.superchunksize
    for k in ks:
        live = _live(layout, k)
        if not live:
            continue
        table = np.full(S, -1, dtype="<i8")
        for n, e in live:
            table[n - k * S] = e.off
        key = (k, layout.space.gen(k))
        head = layout.files.pread(key, blosc.BLOSC1_HEADER, live[-1][1].off)
        layout.files.rewrite_prefix(key, table,
                                    blosc.read_header(head, size=live[-1][1].cbytes).nbytes)
    layout.files.sync()


def touched(pages: dict[int, np.ndarray], superchunksize: int) -> set[int]:
    """Superchunks holding a chunk of the changed index ``pages``."""
    out: set[int] = set()
    for p, entries in pages.items():
        first = p * PAGE_ENTRIES
        out |= set(range(first // superchunksize, (first + len(entries) - 1) // superchunksize
                         + 1))
    return out


def write_unit(layout: Compacted, unit: int, chunks: Sequence[bytes],
               digests: Sequence[bytes | None] | None = None) -> int:
    """Write superchunk ``unit``'s file (generation 0) holding ``chunks`` back to back
    (``digests``: each one's :meth:`chunk_digest`, when worked out already)."""
    spare = layout.info.spare
    parts: list[bytes] = []
    table = np.full(layout.info.superchunksize, -1, dtype="<i8")
    pos = layout.files.data_start((unit, 0))
    for i, chunk in enumerate(chunks):
        given = digests[i] if digests is not None else None
        tail = given if given is not None else layout.chunk_digest(chunk)
        room = len(chunk) + len(tail) + math.ceil(len(chunk) * spare)
        parts += [chunk, tail, bytes(room - len(chunk) - len(tail))]
        table[i] = pos
        pos += room
    last = blosc.read_header(chunks[-1]).nbytes if chunks else 0
    layout.files.new_file((unit, 0), parts, table if layout.files.compat else None, last)
    return sum(len(c) for c in chunks)


def adopt_units(layout: Compacted, nchunks: int) -> None:
    """Index the chunks that :func:`write_unit` calls wrote: ``nchunks`` of them, read
    back record by record from the files of generation 0."""
    S, dsize, page = layout.info.superchunksize, layout.digest_size, layout.page_size
    spare = layout.info.spare
    # One buffer read into for every record: a new one per chunk of tens of MB would
    # leave the allocator holding freed memory.
    buf = np.empty(0, dtype=np.uint8)
    layout.files.forget_all()
    for k in range(-(-nchunks // S)):
        key = (k, 0)
        info = layout.files.file(key)
        pos = info.data_start
        for n in range(k * S, min((k + 1) * S, nchunks)):
            url = layout.files.url(key)
            head = layout.files.pread(key, blosc.BLOSC1_HEADER, pos)
            h = blosc.read_header(head, url, pos, size=info.size - pos)
            tail = dsize + (npages(h.cbytes, page) * dsize if page else 0)
            room = h.cbytes + tail + math.ceil(h.cbytes * spare)
            if pos + h.cbytes + tail > info.size:
                raise FormatError(f"chunk {n} runs past the end of the file", url, pos)
            if dsize:
                if len(buf) < h.cbytes + dsize:
                    buf = np.empty(h.cbytes + dsize, dtype=np.uint8)
                got = layout.files.pread_into(key, buf[:h.cbytes + dsize], pos)
                rec = buf.data[:got]
                if layout.checksum.digest(rec[:h.cbytes]) != rec[h.cbytes:]:
                    raise ChecksumError(f"chunk {n}: checksum mismatch", url, pos + h.cbytes)
            layout.replace_entry(n, Entry(pos, room, h.cbytes, 0, HAS_PAGES if page else 0),
                                 None)
            layout.space.written(k, 0, pos, room)
            pos += room
