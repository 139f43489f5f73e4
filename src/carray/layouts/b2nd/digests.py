"""The digests carray keeps with the Blosc2 frames it commits, and how a reader decides
whether they apply (docs/formats/b2frame.md, "What carray adds").

A frame carray commits is followed, right after its last byte (``frame_len`` in its
header), by carray's *record* (little-endian), which c-blosc2 and python-blosc2 never
read (a frame ends where its header says)::

    "CAtl" | u32 length of what follows
    "CAdg" | version u8 | checksum id u8 | log2 page u8 | 0 u8 | nchunks u64
    frame digest                     (the checksum's size)
    stored size per chunk            u32 each: 0 not stored, 0xFFFFFFFF no digests
    chunk digest per chunk           (zeros where there is none)
    page digests of every chunk that has digests, in chunk order
    CRC-32 of everything before      u32

The frame digest covers everything of the frame but its chunk data: the header, then
every byte from the offsets chunk to the end of the trailer.

Applicability.  carray writes 0 in both thread-count fields of the header (bytes 63-64
and 66-67), a value c-blosc2 never writes (it needs at least one thread) and never
reads; every change c-blosc2 makes to a frame (chunks, metalayers, vlmeta) rewrites
the header with its own thread counts.  So a header still holding the mark was last
written by carray and the record must be there and match (anything else is damage);
a header without it was written or changed by another program since, and whatever
follows the frame is ignored.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence

import numpy as np

from carray.codecs.checksums import CHECKSUMS, Checksum, crc32, get_checksum
from carray.codecs.pages import ChunkDigests, npages
from carray.errors import ChecksumError, FormatError

#: How messages name the record.
RECORD_NAME = "carray's record of digests"
NOT_STORED, NO_DIGESTS = 0, 0xFFFFFFFF
_TAIL, _TAIL_MAGIC = struct.Struct("<4sI"), b"CAtl"
_MAGIC, _VERSION = b"CAdg", 1
_HEAD = struct.Struct("<4sBBBBQ")
_CRC = 4
_THREADS = (slice(63, 65), slice(66, 68))  # the int16 thread counts after their D1 markers
#: Record entries an entry list gives for chunks not stored or without digests.
Entry = ChunkDigests | int
#: Longest record read: a u32 length.
_MAX_RECORD = 2**32 - 1


def is_marked(header: bytes | bytearray) -> bool:
    """Whether carray made the last change to this frame header (see the module doc)."""
    return len(header) >= 68 and all(header[s] == b"\0\0" for s in _THREADS)


def set_mark(header: bytearray, marked: bool) -> None:
    """Write carray's mark into a frame header (or one thread, c-blosc2's own value)."""
    for s in _THREADS:
        header[s] = b"\0\0" if marked else b"\0\1"


def build_record(entries: Sequence[Entry], checksum: Checksum, page: int) -> bytes:
    """The body of the record for chunks described by ``entries`` (one per chunk: its
    digests, or :data:`NOT_STORED` / :data:`NO_DIGESTS`), frame digest zero: what
    :func:`seal` makes the record of."""
    d = checksum.size
    sizes = np.empty(len(entries), "<u4")
    digests, pages = [], []
    for i, e in enumerate(entries):
        if isinstance(e, ChunkDigests):
            sizes[i] = e.size
            digests.append(e.digest)
            pages.append(e.pages)
        else:
            sizes[i] = e
            digests.append(bytes(d))
    body = b"".join([_HEAD.pack(_MAGIC, _VERSION, checksum.id, page.bit_length() - 1, 0,
                                len(entries)), bytes(d), sizes.tobytes(), *digests, *pages])
    if len(body) + _CRC > _MAX_RECORD:
        raise FormatError(f"{RECORD_NAME} of {len(body)} bytes is past its 4 GiB limit")
    return body


def sealed_size(body: bytes) -> int:
    """The bytes of the record :func:`seal` makes of ``body``."""
    return _TAIL.size + len(body) + _CRC


def seal(header: bytes | bytearray, rest: bytes | bytearray, body: bytes,
         checksum: Checksum) -> bytes:
    """The record of ``body`` (:func:`build_record`) with the frame digest of ``header``
    and ``rest`` (the frame from its offsets chunk, or trailer when it has no chunks,
    to its end) filled in, and its own CRC-32 after it."""
    at = _HEAD.size
    digest = checksum.digest(bytes(header) + bytes(rest))
    out = _TAIL.pack(_TAIL_MAGIC, len(body) + _CRC) + body[:at] + digest + \
        body[at + checksum.size:]
    return out + crc32(out).to_bytes(_CRC, "little")


def read_record(pread: Callable[[int, int], bytes], frame_len: int, size: int,
                path: str | os.PathLike[str]) -> bytes:
    """The record after a frame of ``frame_len`` bytes in a file of ``size`` bytes,
    read through ``pread(length, offset)``.

    Raises
    ------
    FormatError
        None is there, or it is cut short.
    """
    head = pread(_TAIL.size, frame_len) if size >= frame_len + _TAIL.size else b""
    if len(head) != _TAIL.size or head[:4] != _TAIL_MAGIC:
        raise FormatError(f"the header carries carray's mark (thread counts 0) but no "
                          f"{RECORD_NAME} follows the frame", path, frame_len)
    length = _TAIL.unpack(head)[1]
    if frame_len + _TAIL.size + length > size:
        raise FormatError(f"{RECORD_NAME} of {length} bytes runs past the end of the file",
                          path, frame_len)
    return head + pread(length, frame_len + _TAIL.size)


class FrameDigests:
    """A frame's record, parsed: per chunk its stored size and digests.

    Parameters are those of :meth:`read`, which checks the record against the frame.
    """

    def __init__(self, checksum: Checksum, page: int, sizes: np.ndarray, record: bytes,
                 digests_at: int, pages_at: np.ndarray) -> None:
        self.checksum, self.page = checksum, page
        self.sizes = sizes
        self._record = record
        self._digests_at = digests_at
        self._pages_at = pages_at  # where each chunk's page digests start in the record

    def __len__(self) -> int:
        return len(self.sizes)

    def get(self, nchunk: int) -> ChunkDigests | None:
        """Chunk ``nchunk``'s digests (None: not stored, or written by another program)."""
        size = int(self.sizes[nchunk])
        if size in (NOT_STORED, NO_DIGESTS):
            return None
        d = self.checksum.size
        at = self._digests_at + nchunk * d
        lo = int(self._pages_at[nchunk])
        return ChunkDigests(self.checksum, self.page, size, self._record[at:at + d],
                            self._record[lo:lo + npages(size, self.page) * d])

    @classmethod
    def read(cls, record: bytes, header: bytes, rest: bytes, offsets: np.ndarray,
             path: str | os.PathLike[str], base: int) -> FrameDigests:
        """The ``record`` (as :func:`read_record` gives it, read at ``base``), once it
        matches the frame: its ``header``, ``rest`` (from its offsets chunk to its end)
        and chunk ``offsets``.

        Raises
        ------
        FormatError
            Not a record, or one that disagrees with the offsets.
        ChecksumError
            The frame does not match its digest.
        """
        if crc32(record[:-_CRC]) != int.from_bytes(record[-_CRC:], "little"):
            raise ChecksumError(f"{RECORD_NAME}: CRC-32 mismatch", path, base)
        body, base = record[_TAIL.size:-_CRC], base + _TAIL.size
        checksum, page, n = _parse_head(body, path, base)
        d = checksum.size
        if checksum.digest(bytes(header) + bytes(rest)) != body[_HEAD.size:_HEAD.size + d]:
            raise ChecksumError(f"frame header, offsets or trailer do not match their "
                                f"{checksum.name} checksum", path, base + _HEAD.size)
        if n != len(offsets):
            raise FormatError(f"{RECORD_NAME} describes {n} chunks, the frame has "
                              f"{len(offsets)}", path, base)
        sizes_at = _HEAD.size + d
        sizes = np.frombuffer(body, "<u4", n, sizes_at).astype(np.int64)
        if ((sizes == NOT_STORED) != (offsets < 0)).any():
            raise FormatError(f"{RECORD_NAME} and the chunk offsets disagree on which chunks "
                              "are stored", path, base)
        covered = (sizes != NOT_STORED) & (sizes != NO_DIGESTS)
        counts = np.where(covered, -(-sizes // page), 0) * d
        pages_at = sizes_at + n * (4 + d) + np.concatenate(([0], np.cumsum(counts)[:-1])) \
            if n else np.empty(0, np.int64)
        if sizes_at + n * (4 + d) + int(counts.sum()) != len(body):
            raise FormatError(f"{RECORD_NAME} holds {len(body)} bytes, not what its "
                              f"{n} chunks need", path, base)
        return cls(checksum, page, sizes, body, sizes_at + n * 4, pages_at)


def _parse_head(record: bytes, path: str | os.PathLike[str],
                base: int) -> tuple[Checksum, int, int]:
    """``(checksum, page size, nchunks)`` from the record's first bytes, checked."""
    if len(record) < _HEAD.size:
        raise FormatError(f"{RECORD_NAME} truncated: {len(record)} bytes", path, base)
    magic, version, ck_id, log2, zero, n = _HEAD.unpack_from(record, 0)
    if magic != _MAGIC or version != _VERSION or zero or not 0 < ck_id < len(CHECKSUMS) \
            or not 9 <= log2 <= 24:
        raise FormatError(f"{RECORD_NAME} is not a version {_VERSION} record (magic "
                          f"{magic!r}, version {version}, checksum {ck_id}, page 2**{log2})",
                          path, base)
    checksum = get_checksum(ck_id)
    if len(record) < _HEAD.size + checksum.size or n > len(record) // (4 + checksum.size):
        raise FormatError(f"{RECORD_NAME} claims {n} chunks in {len(record)} bytes", path,
                          base + 8)
    return checksum, 1 << log2, n
