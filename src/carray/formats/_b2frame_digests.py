"""The digests carray keeps in the Blosc2 frames it commits, and how a reader decides
whether they apply (docs/formats/b2frame.md, "What carray adds").

A frame carray commits carries one more vlmeta entry, ``_carray_check``, whose value
is what python-blosc2 stores for any entry (a Blosc2 chunk of a msgpack value): a raw
chunk holding a msgpack bin32 of this record (little-endian)::

    "CAdg" | version u8 | checksum id u8 | log2 page u8 | 0 u8 | nchunks u64
    frame digest                     (the checksum's size)
    stored size per chunk            u32 each: 0 not stored, 0xFFFFFFFF no digests
    chunk digest per chunk           (zeros where there is none)
    page digests of every chunk that has digests, in chunk order

The frame digest covers everything of the frame but its chunk data: the header, then
every byte from the offsets chunk to the end of the trailer, with the frame digest's
own bytes read as zeros.

Applicability.  carray writes 0 in both thread-count fields of the header (bytes 63-64
and 66-67), a value c-blosc2 never writes (it needs at least one thread) and never
reads; every change c-blosc2 makes to a frame (chunks, metalayers, vlmeta) rewrites
the header with its own thread counts.  So a header still holding the mark was last
written by carray and the record must be there and match (anything else is damage);
a header without it was written or changed by another program since, and the record
it may still carry (c-blosc2 copies vlmeta it does not know) is ignored.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence

import numpy as np

from carray.codecs.blosc import BLOSC2_HEADER, compress2, read_header
from carray.codecs.checksums import CHECKSUMS, Checksum, get_checksum
from carray.codecs.pages import ChunkDigests, npages
from carray.errors import ChecksumError, FormatError
from carray.params import CParams

RECORD_NAME = "_carray_check"
NOT_STORED, NO_DIGESTS = 0, 0xFFFFFFFF
_MAGIC, _VERSION = b"CAdg", 1
_HEAD = struct.Struct("<4sBBBBQ")
_BIN32 = struct.Struct(">BI")  # msgpack bin32: C6, length
#: Where the frame digest sits in the record's vlmeta value.
DIGEST_AT = BLOSC2_HEADER + _BIN32.size + _HEAD.size
_THREADS = (slice(63, 65), slice(66, 68))  # the int16 thread counts after their D1 markers
#: Record entries an entry list gives for chunks not stored or without digests.
Entry = ChunkDigests | int


def is_marked(header: bytes | bytearray) -> bool:
    """Whether carray made the last change to this frame header (see the module doc)."""
    return len(header) >= 68 and all(header[s] == b"\0\0" for s in _THREADS)


def set_mark(header: bytearray, marked: bool) -> None:
    """Write carray's mark into a frame header (or one thread, c-blosc2's own value)."""
    for s in _THREADS:
        header[s] = b"\0\0" if marked else b"\0\1"


def build_value(entries: Sequence[Entry], checksum: Checksum, page: int) -> bytes:
    """The vlmeta value of the record for chunks described by ``entries`` (one per chunk:
    its digests, or :data:`NOT_STORED` / :data:`NO_DIGESTS`), frame digest zero."""
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
    record = b"".join([_HEAD.pack(_MAGIC, _VERSION, checksum.id, page.bit_length() - 1, 0,
                                  len(entries)), bytes(d), sizes.tobytes(), *digests, *pages])
    payload = _BIN32.pack(0xC6, len(record)) + record
    # A raw chunk, so the record sits in the frame as it is (python-blosc2 reads it back
    # as bytes) and carray reads it without decoding.
    return compress2(np.frombuffer(payload, np.uint8), 1, CParams(clevel=0))


def seal(header: bytes | bytearray, rest: bytearray, at: int, checksum: Checksum) -> None:
    """Fill in the frame digest at ``rest[at:]``; ``rest`` is the frame from its offsets
    chunk (or trailer, when it has no chunks) to its end."""
    d = checksum.size
    rest[at:at + d] = bytes(d)
    rest[at:at + d] = checksum.digest(bytes(header) + bytes(rest))


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
    def read(cls, value: bytes, header: bytes, rest: bytes, at: int, offsets: np.ndarray,
             path: str | os.PathLike[str], base: int) -> FrameDigests:
        """The record in vlmeta ``value``, once it matches the frame.

        ``rest`` is the frame from its offsets chunk to its end, ``at`` where ``value``
        starts in it (``base`` in the file), ``offsets`` the chunk offsets.

        Raises
        ------
        FormatError
            The value is not a record, or it disagrees with the offsets.
        ChecksumError
            The frame does not match its digest.
        """
        record = _unwrap(value, path, base)
        checksum, page, n = _parse_head(record, path, base + DIGEST_AT - _HEAD.size)
        d = checksum.size
        sealed = bytearray(rest)
        stored = bytes(sealed[at + DIGEST_AT:at + DIGEST_AT + d])
        seal(header, sealed, at + DIGEST_AT, checksum)
        if bytes(sealed[at + DIGEST_AT:at + DIGEST_AT + d]) != stored:
            raise ChecksumError(f"frame header, offsets or trailer do not match their "
                                f"{checksum.name} checksum", path, base + DIGEST_AT)
        if n != len(offsets):
            raise FormatError(f"{RECORD_NAME} describes {n} chunks, the frame has "
                              f"{len(offsets)}", path, base)
        sizes_at = _HEAD.size + d
        sizes = np.frombuffer(record, "<u4", n, sizes_at).astype(np.int64)
        if ((sizes == NOT_STORED) != (offsets < 0)).any():
            raise FormatError(f"{RECORD_NAME} and the chunk offsets disagree on which chunks "
                              "are stored", path, base)
        covered = (sizes != NOT_STORED) & (sizes != NO_DIGESTS)
        counts = np.where(covered, -(-sizes // page), 0) * d
        pages_at = sizes_at + n * (4 + d) + np.concatenate(([0], np.cumsum(counts)[:-1])) \
            if n else np.empty(0, np.int64)
        if sizes_at + n * (4 + d) + int(counts.sum()) != len(record):
            raise FormatError(f"{RECORD_NAME} holds {len(record)} bytes, not what its "
                              f"{n} chunks need", path, base)
        return cls(checksum, page, sizes, record, sizes_at + n * 4, pages_at)


def _unwrap(value: bytes, path: str | os.PathLike[str], base: int) -> bytes:
    """The record inside its vlmeta value (a raw Blosc2 chunk of a msgpack bin32)."""
    h = read_header(value, path, base) if len(value) >= BLOSC2_HEADER else None
    if h is None or not h.memcpyed or h.cbytes != len(value) or \
            h.nbytes != len(value) - BLOSC2_HEADER:
        raise FormatError(f"{RECORD_NAME} is not a raw Blosc2 chunk", path, base)
    marker, length = _BIN32.unpack_from(value, BLOSC2_HEADER) if h.nbytes >= _BIN32.size \
        else (0, 0)
    if marker != 0xC6 or length != h.nbytes - _BIN32.size:
        raise FormatError(f"{RECORD_NAME} does not hold one msgpack bin32", path,
                          base + BLOSC2_HEADER)
    return value[BLOSC2_HEADER + _BIN32.size:]


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
