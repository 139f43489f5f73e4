"""Framing pieces of the Bloscpack format (version 3), independent of whole-file logic.

Byte layouts (see docs/formats/bloscpack.md; all integers little-endian):

* header, 32 bytes: ``b"blpk"``, u8 format version (3), u8 options (bit 0
  offsets present, bit 1 metadata present), u8 checksum id, u8 typesize,
  i32 chunk_size, i32 last_chunk, i64 nchunks, i64 max_app_chunks;
* metadata section: a 32-byte metadata header (8-byte serializer magic
  ``JSON`` NUL-padded, u8 options, u8 checksum id, u8 codec (0 none, 1 zlib),
  u8 level, u32 meta_size, u32 max_meta_size, u32 meta_comp_size, 8-byte user
  codec), the stored bytes, zero padding up to ``max_meta_size``, then the
  digest of the *stored* bytes;
* offsets: ``nchunks + max_app_chunks`` int64 absolute offsets, -1 when unused;
* a NumPy array's metadata (JSON): ``dtype`` (a Python literal), ``shape``,
  ``order`` (``"C"`` or ``"F"``) and ``container`` (``"numpy"``).

These pieces are shared by the single-file format (:mod:`carray.formats.bloscpack`)
and any other layout that frames Blosc chunks the Bloscpack way, so nothing here
opens files: callers pass bytes plus the path and offset used in error messages.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carray.codecs.checksums import CHECKSUMS, Checksum, get_checksum
from carray.core.dtypes import checked_dtype
from carray.core.safejson import load_json
from carray.errors import ChecksumError, FormatError

MAGIC = b"blpk"
FORMAT_VERSION = 3
HEADER_SIZE = 32
METADATA_HEADER_SIZE = 32
OFFSET_SIZE = 8
MAX_CHUNKS = 2**63 - 1
MAX_META_SIZE = 2**32 - 1
# c-blosc 1.x refuses buffers larger than this (INT32_MAX minus its 16-byte overhead).
MAX_CHUNK_SIZE = 2**31 - 1 - 16
OPT_OFFSETS = 0x01
OPT_METADATA = 0x02

_HEADER = struct.Struct("<4sBBBBiiqq")
_META_HEADER = struct.Struct("<8sBBBBIII8s")

PathLike = str | os.PathLike | None


# Checksums live with the codecs (every format with digests shares them); these names
# stay importable from here.


# -- the 32-byte file header -------------------------------------------------------------------

def _header_problem(f: dict[str, int]) -> tuple[str, int] | None:
    """The first inconsistency among header fields, as (message, byte offset) or None."""
    if f["options"] & ~(OPT_OFFSETS | OPT_METADATA):
        return f"header options 0x{f['options']:02x} set reserved bits (only 0x01, 0x02 exist)", 5
    if not 0 <= f["checksum"] < len(CHECKSUMS):
        return f"unknown checksum id {f['checksum']} (known: 0..{len(CHECKSUMS) - 1})", 6
    if not 0 <= f["typesize"] <= 255:
        return f"typesize {f['typesize']} outside 0..255", 7
    cs, last, n, apps = f["chunk_size"], f["last_chunk"], f["nchunks"], f["max_app_chunks"]
    if not -1 <= cs <= 2**31 - 1:
        return f"chunk_size {cs} is negative", 8
    if not -1 <= last <= 2**31 - 1:
        return f"last_chunk {last} is negative", 12
    if cs >= 0 and last > cs:
        return f"last_chunk {last} is larger than chunk_size {cs}", 12
    if cs == 0 and n > 1:
        return f"chunk_size 0 (empty input) but nchunks {n}", 16
    if not -1 <= n <= MAX_CHUNKS:
        return f"nchunks {n} is negative", 16
    if apps < 0:
        return f"max_app_chunks {apps} is negative", 24
    if apps and not f["options"] & OPT_OFFSETS:
        return f"max_app_chunks {apps} without an offsets table", 24
    if apps and n == -1:
        return f"max_app_chunks {apps} with an unknown number of chunks", 24
    if n == -1 and f["options"] & OPT_OFFSETS:
        return "an offsets table needs a known number of chunks (nchunks is -1)", 16
    if n + apps > MAX_CHUNKS:
        return f"nchunks {n} + max_app_chunks {apps} overflows int64", 24
    return None


@dataclass(frozen=True)
class BlpHeader:
    """The 32-byte Bloscpack (format 3) file header.

    Parameters
    ----------
    offsets, metadata : bool
        Whether an offsets table / a metadata section follow the header.
    checksum : int
        Checksum id (index into :data:`CHECKSUMS`), applied to every chunk.
    typesize : int
        Blosc typesize of the chunks, 0..255.
    chunk_size, last_chunk : int
        Uncompressed bytes of every chunk but the last, and of the last; -1 unknown.
    nchunks : int
        Number of chunks; -1 unknown (streamed).
    max_app_chunks : int
        Offset slots reserved for later appends.
    """

    offsets: bool
    metadata: bool
    checksum: int
    typesize: int
    chunk_size: int
    last_chunk: int
    nchunks: int
    max_app_chunks: int = 0
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.format_version != FORMAT_VERSION:
            raise FormatError(f"only Bloscpack format {FORMAT_VERSION} can be represented, "
                              f"got {self.format_version}")
        problem = _header_problem(self._fields())
        if problem:
            raise FormatError(problem[0])

    def _fields(self) -> dict[str, int]:
        options = (OPT_OFFSETS if self.offsets else 0) | (OPT_METADATA if self.metadata else 0)
        return {"options": options, "checksum": self.checksum, "typesize": self.typesize,
                "chunk_size": self.chunk_size, "last_chunk": self.last_chunk,
                "nchunks": self.nchunks, "max_app_chunks": self.max_app_chunks}

    @property
    def checksum_impl(self) -> Checksum:
        return CHECKSUMS[self.checksum]

    @property
    def total_slots(self) -> int:
        """Entries of the offsets table (0 without one)."""
        return self.nchunks + self.max_app_chunks if self.offsets else 0

    @property
    def nbytes(self) -> int | None:
        """Uncompressed size the header announces, None when it cannot tell."""
        if self.nchunks < 0 or self.chunk_size < 0 or self.last_chunk < 0:
            return None
        if self.nchunks == 0:
            return 0
        return self.chunk_size * (self.nchunks - 1) + self.last_chunk

    def pack(self) -> bytes:
        f = self._fields()
        return _HEADER.pack(MAGIC, self.format_version, f["options"], self.checksum,
                            self.typesize, self.chunk_size, self.last_chunk, self.nchunks,
                            self.max_app_chunks)

    @classmethod
    def unpack(cls, buf: bytes, path: PathLike = None) -> BlpHeader:
        """Decode and validate the first 32 bytes of a file.

        Raises
        ------
        FormatError
            Wrong magic, an unsupported format version or an impossible field; the
            message names ``path`` and the byte offset of the field.
        """
        if len(buf) < HEADER_SIZE:
            raise FormatError(f"not a Bloscpack file: {len(buf)} bytes, the header alone "
                              f"needs {HEADER_SIZE}", path, 0)
        magic, version, options, checksum, typesize, cs, last, n, apps = \
            _HEADER.unpack_from(buf, 0)
        if magic != MAGIC:
            raise FormatError(f"not a Bloscpack file: magic {magic!r}, expected {MAGIC!r}",
                              path, 0)
        if version != FORMAT_VERSION:
            old = {1: " (bloscpack 0.1.x / bcolz chunk files)", 2: " (bloscpack 0.2.x)"}
            raise FormatError(f"Bloscpack format version {version}{old.get(version, '')} is "
                              f"not supported; only version {FORMAT_VERSION} is", path, 4)
        fields = {"options": options, "checksum": checksum, "typesize": typesize,
                  "chunk_size": cs, "last_chunk": last, "nchunks": n, "max_app_chunks": apps}
        problem = _header_problem(fields)
        if problem:
            raise FormatError(problem[0], path, problem[1])
        return cls(bool(options & OPT_OFFSETS), bool(options & OPT_METADATA), checksum,
                   typesize, cs, last, n, apps)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": self.format_version, "offsets": self.offsets,
                "metadata": self.metadata, "checksum": self.checksum_impl.name,
                "typesize": self.typesize, "chunk_size": self.chunk_size,
                "last_chunk": self.last_chunk, "nchunks": self.nchunks,
                "max_app_chunks": self.max_app_chunks}


def calculate_chunks(nbytes: int, chunk_size: int) -> tuple[int, int, int]:
    """Split ``nbytes`` into (nchunks, chunk_size, last_chunk) as bloscpack does.

    Empty input is one empty chunk; input no larger than ``chunk_size`` is one
    chunk whose ``chunk_size`` is the input size.
    """
    if nbytes < 0:
        raise ValueError(f"size must be >= 0, got {nbytes}")
    if nbytes == 0:
        return 1, 0, 0
    if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
        raise ValueError(f"chunk_size must be 1..{MAX_CHUNK_SIZE}, got {chunk_size}")
    if chunk_size >= nbytes:
        return 1, nbytes, nbytes
    nchunks, rest = divmod(nbytes, chunk_size)
    if rest:
        return nchunks + 1, chunk_size, rest
    return nchunks, chunk_size, chunk_size


# -- metadata section -------------------------------------------------------------------------

META_CODECS = ("None", "zlib")
JSON_MAGIC = b"JSON"


@dataclass(frozen=True)
class MetadataHeader:
    """The 32-byte header in front of the metadata bytes."""

    checksum: int
    codec: int
    level: int
    meta_size: int
    max_meta_size: int
    meta_comp_size: int
    magic: bytes = JSON_MAGIC
    options: int = 0
    user_codec: bytes = b""

    @property
    def checksum_impl(self) -> Checksum:
        return CHECKSUMS[self.checksum]

    @property
    def section_size(self) -> int:
        """Bytes from the start of this header to the end of the metadata digest."""
        return METADATA_HEADER_SIZE + self.max_meta_size + self.checksum_impl.size

    def pack(self) -> bytes:
        return _META_HEADER.pack(self.magic, self.options, self.checksum, self.codec,
                                 self.level, self.meta_size, self.max_meta_size,
                                 self.meta_comp_size, self.user_codec)

    @classmethod
    def unpack(cls, buf: bytes, path: PathLike = None, offset: int = HEADER_SIZE
               ) -> MetadataHeader:
        if len(buf) < METADATA_HEADER_SIZE:
            raise FormatError(f"metadata header truncated: {len(buf)} of "
                              f"{METADATA_HEADER_SIZE} bytes", path, offset)
        magic, opts, checksum, codec, level, size, max_size, comp_size, user = \
            _META_HEADER.unpack_from(buf, 0)
        magic = magic.rstrip(b"\0")
        where = offset
        if magic != JSON_MAGIC:
            raise FormatError(f"unknown metadata serializer {magic!r} (only {JSON_MAGIC!r})",
                              path, where)
        if opts:
            raise FormatError(f"metadata options 0x{opts:02x} set reserved bits", path, where + 8)
        if checksum >= len(CHECKSUMS):
            raise FormatError(f"unknown metadata checksum id {checksum}", path, where + 9)
        if codec >= len(META_CODECS):
            raise FormatError(f"unknown metadata codec id {codec} (0 none, 1 zlib)",
                              path, where + 10)
        if level > 9:
            raise FormatError(f"metadata level {level} outside 0..9", path, where + 11)
        if comp_size > max_size:
            raise FormatError(f"metadata stored size {comp_size} exceeds its reserved "
                              f"{max_size} bytes", path, where + 20)
        if codec == 0 and comp_size != size:
            raise FormatError(f"uncompressed metadata: stored size {comp_size} != size {size}",
                              path, where + 20)
        return cls(checksum, codec, level, size, max_size, comp_size, magic, opts,
                   user.rstrip(b"\0"))

    def to_dict(self) -> dict[str, Any]:
        return {"magic_format": self.magic.decode("ascii", "replace"),
                "meta_options": self.options, "meta_checksum": self.checksum_impl.name,
                "meta_codec": META_CODECS[self.codec], "meta_level": self.level,
                "meta_size": self.meta_size, "max_meta_size": self.max_meta_size,
                "meta_comp_size": self.meta_comp_size,
                "user_codec": self.user_codec.hex()}


def dumps_metadata(obj: Any) -> bytes:
    """Compact JSON exactly as bloscpack serializes it (ASCII, no spaces)."""
    try:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata must be JSON-serializable: {exc}") from None


def encode_metadata(obj: Any, *, checksum: str | int | None = "adler32",
                    codec: str | None = "zlib",
                    level: int = 6, max_meta_size: int | None = None
                    ) -> tuple[bytes, MetadataHeader]:
    """Build a whole metadata section (header, bytes, padding, digest).

    ``max_meta_size`` defaults to ten times the JSON size, bloscpack's reserve
    for rewriting metadata in place later.  zlib is used only when it shrinks
    the JSON (the header then says codec none, but keeps ``level``).
    """
    raw = dumps_metadata(obj)
    return encode_metadata_bytes(raw, checksum=checksum, codec=codec, level=level,
                                 max_meta_size=max_meta_size)


def encode_metadata_bytes(raw: bytes, *, checksum: str | int | None = "adler32",
                          codec: str | None = "zlib", level: int = 6,
                          max_meta_size: int | None = None) -> tuple[bytes, MetadataHeader]:
    """:func:`encode_metadata` for already serialized JSON bytes."""
    impl = get_checksum(checksum)
    codec_name = "None" if codec is None else str(codec)
    if codec_name.lower() not in ("none", "zlib"):
        raise ValueError(f"metadata codec must be 'zlib' or None, got {codec!r}")
    if not isinstance(level, int) or not 0 <= level <= 9:
        raise ValueError(f"metadata level must be 0..9, got {level!r}")
    stored, codec_id = raw, 0
    if codec_name.lower() == "zlib":
        packed = zlib.compress(raw, level)
        if len(packed) <= len(raw):  # bloscpack keeps zlib unless it grows the bytes
            stored, codec_id = packed, 1
    reserve = 10 * len(raw) if max_meta_size is None else max_meta_size
    if not len(stored) <= reserve <= MAX_META_SIZE:
        raise ValueError(f"max_meta_size {reserve} cannot hold {len(stored)} bytes of metadata "
                         f"(or exceeds {MAX_META_SIZE})")
    header = MetadataHeader(impl.id, codec_id, level, len(raw), reserve, len(stored))
    section = b"".join((header.pack(), stored, bytes(reserve - len(stored)),
                        impl.digest(stored)))
    return section, header


def decode_metadata(section: bytes | memoryview, path: PathLike = None,
                    offset: int = HEADER_SIZE, verify: bool = True
                    ) -> tuple[Any, MetadataHeader]:
    """Parse a whole metadata section (as sized by :attr:`MetadataHeader.section_size`).

    Raises
    ------
    FormatError
        Bad header, a section shorter than announced, zlib data that does not
        inflate to ``meta_size`` bytes, or JSON that does not parse.
    ChecksumError
        The digest does not match the stored bytes (when ``verify``).
    """
    header = MetadataHeader.unpack(bytes(section[:METADATA_HEADER_SIZE]), path, offset)
    if len(section) < header.section_size:
        raise FormatError(f"metadata section truncated: {len(section)} of "
                          f"{header.section_size} bytes", path, offset)
    start = METADATA_HEADER_SIZE
    stored = bytes(section[start:start + header.meta_comp_size])
    digest_at = start + header.max_meta_size
    if verify and header.checksum:
        expected = bytes(section[digest_at:digest_at + header.checksum_impl.size])
        if header.checksum_impl.digest(stored) != expected:
            raise ChecksumError(f"metadata {header.checksum_impl.name} checksum mismatch",
                                path, offset + digest_at)
    raw = stored
    if header.codec == 1:
        # Inflate at most meta_size + 1 bytes: a bomb cannot blow up memory.
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(stored, header.meta_size + 1)
        except zlib.error as exc:
            raise FormatError(f"metadata does not inflate: {exc}", path, offset + start) from None
        if len(raw) != header.meta_size or not inflater.eof:
            raise FormatError(f"metadata inflates to {len(raw)} bytes or more, header says "
                              f"{header.meta_size}", path, offset + start)
    obj = load_json(raw, os.fspath(path) if path is not None else "(metadata)",
                    what="metadata", offset=offset + start)
    return obj, header


# -- offsets table ----------------------------------------------------------------------------

def encode_offsets(offsets: Sequence[int], total_slots: int) -> bytes:
    """The offsets table: the given offsets, then -1 for every free slot."""
    if len(offsets) > total_slots:
        raise ValueError(f"{len(offsets)} offsets do not fit {total_slots} slots")
    table = np.full(total_slots, -1, dtype="<i8")
    table[:len(offsets)] = offsets
    return table.tobytes()


def decode_offsets(buf: bytes, header: BlpHeader, path: PathLike = None,
                   offset: int = HEADER_SIZE, file_size: int | None = None) -> list[int]:
    """Parse and check the offsets table; returns the ``nchunks`` used entries.

    Used entries must point past the table, increase strictly and lie inside the
    file; free slots must hold -1.
    """
    slots = header.total_slots
    if len(buf) < slots * OFFSET_SIZE:
        raise FormatError(f"offsets table truncated: {len(buf)} of {slots * OFFSET_SIZE} "
                          "bytes", path, offset)
    table = np.frombuffer(buf, dtype="<i8", count=slots)
    used = table[:header.nchunks]
    end = offset + slots * OFFSET_SIZE
    if used.size:
        bad = np.flatnonzero((used < end) | ((used >= file_size) if file_size is not None
                                             else False))
        if bad.size:
            i = int(bad[0])
            raise FormatError(f"offset of chunk {i} is {int(used[i])}, outside the chunk area "
                              f"[{end}, {file_size})", path, offset + OFFSET_SIZE * i)
        steps = np.flatnonzero(np.diff(used) <= 0)
        if steps.size:
            i = int(steps[0]) + 1
            raise FormatError(f"offsets not increasing: chunk {i} at {int(used[i])} after "
                              f"{int(used[i - 1])}", path, offset + OFFSET_SIZE * i)
    free = np.flatnonzero(table[header.nchunks:] != -1)
    if free.size:
        i = header.nchunks + int(free[0])
        raise FormatError(f"unused offset slot {i} holds {int(table[i])}, expected -1",
                          path, offset + OFFSET_SIZE * i)
    return [int(x) for x in used]


# -- NumPy array metadata ---------------------------------------------------------------------

def dtype_meta(dtype: np.dtype) -> str:
    """The ``dtype`` entry bloscpack stores for an array: the repr of ``dtype.str`` (quotes
    included), or of ``dtype.descr`` for records."""
    return repr(dtype.descr) if dtype.names is not None else repr(dtype.str)


def array_spec(meta: Any, path: str) -> tuple[np.dtype, tuple[int, ...], str]:
    """dtype, shape and order from bloscpack's ndarray metadata."""
    if not isinstance(meta, dict) or meta.get("container") != "numpy":
        raise FormatError("file does not hold a NumPy array (no numpy metadata); read it with "
                          "unpack_bytes", path, HEADER_SIZE)
    # The repr of dtype.str or of a record descr; before bloscpack 0.7.2 a plain
    # dtype string or a descr as JSON lists.  Parsed literally, never eval()ed.
    dtype = checked_dtype(meta.get("dtype"), source=f"{path} (metadata dtype)")
    shape = meta.get("shape")
    if not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise FormatError(f"metadata shape {shape!r} is not a list of sizes", path, HEADER_SIZE)
    order = meta.get("order", "C")
    if order not in ("C", "F"):
        raise FormatError(f"metadata order {order!r} is neither 'C' nor 'F'", path, HEADER_SIZE)
    return dtype, tuple(shape), order
