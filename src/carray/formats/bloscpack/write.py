"""Putting a ``.blp`` file (or a file unpacked from one) in place as its chunks arrive.

Split from :mod:`carray.formats.bloscpack`: the chunks come from a generator that
compresses (or decodes) them on worker threads, a few in flight, and are written here
on the caller's thread in order, so writing overlaps compressing and memory holds a few
chunks.  A local file is written under a temporary name, one system call per chunk
(its bytes and its digest together), and put in place by
:func:`carray.formats.local_write.replace`; an object store gets one put.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from carray.formats.bloscpack.frame import OFFSET_SIZE, encode_offsets
from carray.formats.local_write import write_file
from carray.stores import LocalStore, Store


def _flat(groups: Iterable[list[Any]]) -> Iterator[Any]:
    for group in groups:
        yield from group


def put_stream(store: Store, key: str, parts: Iterable[Any], fsync: bool) -> None:
    """Put ``key`` from the bytes-like ``parts``, written in order as they come."""
    if isinstance(store, LocalStore):
        write_file(key, ([p] for p in parts), fsync=fsync)
    else:
        store.put(key, parts, fsync=fsync)


def put_blp(store: Store, key: str, front: list[bytes], slots: int,
            chunks: Iterable[tuple[bytes, bytes]], fsync: bool, *,
            kept: Iterable[int] = (), copied: Iterable[bytes] = ()) -> None:
    """Put a ``.blp`` file: ``front`` (header and metadata), an offsets table of
    ``slots`` entries (none if 0) saying where each chunk starts, the ``copied``
    bytes of chunks kept from an older file (starting at the offsets ``kept``),
    then the new chunks, given as (compressed bytes, digest) pairs."""
    table_at = sum(len(p) for p in front)
    starts = list(kept)

    def body() -> Iterator[list[Any]]:
        pos = table_at + slots * OFFSET_SIZE
        for part in copied:
            pos += len(part)
            yield [part]
        for piece, digest in chunks:
            starts.append(pos)
            pos += len(piece) + len(digest)
            yield [piece, digest] if digest else [piece]

    if isinstance(store, LocalStore):
        # The table precedes the chunks: they stream out behind a blank table as they are
        # compressed, and the table is filled in before the file gets its name.
        head = [[*front, bytes(slots * OFFSET_SIZE)]]
        write_file(key, _chain(head, body()), fsync=fsync,
                   patch=(lambda: (encode_offsets(starts, slots), table_at)) if slots
                   else None)
    elif not slots:
        store.put(key, _chain(front, _flat(body())), fsync=fsync)
    else:
        # One request puts the whole object anyway: all chunks first, then the table.
        rest = list(_flat(body()))
        store.put(key, [*front, encode_offsets(starts, slots), *rest], fsync=fsync)


def _chain(*iterables: Iterable[Any]) -> Iterator[Any]:
    for it in iterables:
        yield from it
