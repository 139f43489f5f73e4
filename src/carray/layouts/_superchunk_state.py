"""What the parts of the superchunk layout share (see :mod:`carray.layouts.superchunk`).

:class:`Superchunk` is what is known about one superchunk file.
:class:`SuperchunkParts` declares, for the type checker, the state and helpers
of :class:`carray.layouts.superchunk.SuperchunkLayout` that its commit and
fetch halves (:mod:`._superchunk_commit`, :mod:`._superchunk_fetch`) use; the
layout itself defines them.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from carray.codecs import blosc
from carray.codecs.blosc import BLOSC1_HEADER
from carray.codecs.checksums import Checksum
from carray.formats._blp_frame import BlpHeader
from carray.layouts._superchunk_meta import StorageInfo
from carray.stores import Handle, Store


@dataclass
class Superchunk:
    """What is known about one superchunk file: committed and working offsets."""

    k: int
    path: str            # the store's path, and ``url``, the same for messages
    size: int            # file size: where new regions go
    offsets_pos: int     # file offset of the offsets table
    data_start: int      # first byte after the offsets table
    header: BlpHeader    # as committed
    offsets: np.ndarray  # working: what reads use
    committed: np.ndarray  # as in the file
    committed_end: int   # bytes at or past this are not referenced by the committed state
    dirty: bool = False  # bytes written since the last fsync
    created: bool = False
    garbage: int = 0     # bytes of moved chunks' old regions (this session only)
    sizes: dict[int, int] = field(default_factory=dict)  # slot -> cbytes, when known
    url: str = ""


#: A chunk fetched ahead of its read: (superchunk, offset, cbytes, chunk + digest).
Prefetched = tuple[Superchunk, int, int, Any]
#: The start of a chunk kept for partial reads: (superchunk, offset, cbytes, first
#: bytes, decoder memo).
CachedHead = tuple[Superchunk, int, int, bytes, dict[str, Any]]


class SuperchunkParts:
    """The layout state the commit and fetch halves read and write (declarations only)."""

    store: Store
    rootdir: str
    info: StorageInfo
    readonly: bool
    fsync: bool
    verify: bool | str
    _S: int
    _ck: Checksum
    _dsize: int
    _datadir: str
    _metadir: str
    _scs: dict[int, Superchunk]
    _fds: OrderedDict[int, Handle]
    _read_lock: threading.RLock
    _inplace: dict[int, bytes]
    _inplace_bytes: int
    _overlay: dict[int, list[tuple[int, bytes]]]
    _stamps: dict[int, tuple[int, int]]
    _heads: OrderedDict[int, CachedHead]
    _count: int
    _generation: int
    _dropped: bool
    _touched: set[int]
    _prefetched: dict[int, Prefetched]
    _fill_bound: int
    _no_file: set[int]
    _fill_item: bytes | None
    _absent: bytes | None

    if TYPE_CHECKING:
        def _sc_path(self, k: int) -> str: ...
        def _fd(self, sc: Superchunk) -> Handle: ...
        def _get(self, k: int, create: bool = False) -> Superchunk: ...
        def _locate(self, nchunk: int) -> tuple[Superchunk, int]: ...
        def _head(self, sc: Superchunk, off: int, nchunk: int) -> blosc.ChunkHeader: ...
        def _pread(self, sc: Superchunk, n: int, offset: int) -> bytes: ...
        def _cbytes_of(self, sc: Superchunk, slot: int, off: int) -> int: ...
        def _capacity(self, sc: Superchunk, off: int) -> int: ...
        def _chunk_size_field(self) -> int: ...
        def _existing_superchunks(self) -> list[int]: ...


@dataclass(frozen=True)
class ChunkSpan:
    """Where a chunk lies in its superchunk file (see :meth:`SuperchunkLayout.chunk_span`).

    ``offsets_pos`` and ``data_start`` are where the file's offsets table and its
    chunk area start; ``room`` is the bytes up to the next chunk (or the end).
    """

    path: str
    offset: int
    cbytes: int
    room: int
    offsets_pos: int
    data_start: int


def crc_stamp(off: int, head: bytes, tail: bytes) -> int:
    """What changes when the chunk at ``off`` with this head and tail is rewritten."""
    return zlib.crc32(struct.pack("<q", off) + bytes(head) + bytes(tail)) & 0x7FFFFFFF


def chunk_stamp_of(off: int, data: bytes, digest: bytes) -> tuple[int, int]:
    """The stamp of chunk bytes ``data`` (with ``digest``) stored at ``off``."""
    tail = digest if digest else data[-min(16, len(data)):]
    return (len(data), crc_stamp(off, data[:BLOSC1_HEADER], tail))
