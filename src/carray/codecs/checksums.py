"""Digests stored beside compressed bytes: the Bloscpack checksum table.

Every format that stores digests (Bloscpack files, superchunk files, carray's own
records in bcolz chunk files and Blosc2 frames) names them by these ids and names
(docs/formats/bloscpack.md, "Checksums"): 0 none, 1 adler32, 2 crc32, 3 md5,
4 sha1, 5 sha224, 6 sha256, 7 sha384, 8 sha512.  adler32 and crc32 are stored as
4 little-endian bytes of the unsigned value.
"""

from __future__ import annotations

import hashlib
import struct
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Checksum:
    """One entry of the checksum table: id stored in headers, name, digest size, function,
    and for the 32-bit ones the digest as an int (what ``digest`` packs)."""

    id: int
    name: str
    size: int
    digest: Callable[[Any], bytes]
    value: Callable[[Any], int] | None = None


def _zlib_digest(fn: Callable[[Any], int]) -> Callable[[Any], bytes]:
    return lambda data: struct.pack("<I", fn(data) & 0xFFFFFFFF)


def _hash_digest(name: str) -> Callable[[Any], bytes]:
    ctor = getattr(hashlib, name)
    return lambda data: ctor(data).digest()


_fast_zlib: types.ModuleType
try:
    # zlib-ng's SIMD adler32/crc32 give the same values as zlib's, about 10x faster:
    # the difference between checksums costing half a read and a few percent.
    from zlib_ng import zlib_ng as _fast_zlib
except ImportError:  # pragma: no cover - a declared dependency; zlib is the fallback
    _fast_zlib = zlib

CHECKSUMS: tuple[Checksum, ...] = (
    Checksum(0, "None", 0, lambda data: b""),
    Checksum(1, "adler32", 4, _zlib_digest(_fast_zlib.adler32), _fast_zlib.adler32),
    Checksum(2, "crc32", 4, _zlib_digest(_fast_zlib.crc32), _fast_zlib.crc32),
    Checksum(3, "md5", 16, _hash_digest("md5")),
    Checksum(4, "sha1", 20, _hash_digest("sha1")),
    Checksum(5, "sha224", 28, _hash_digest("sha224")),
    Checksum(6, "sha256", 32, _hash_digest("sha256")),
    Checksum(7, "sha384", 48, _hash_digest("sha384")),
    Checksum(8, "sha512", 64, _hash_digest("sha512")),
)
_CHECKSUM_BY_NAME = {c.name.lower(): c for c in CHECKSUMS}


def get_checksum(which: str | int | None) -> Checksum:
    """Look a checksum up by id or (case-insensitive) name; ``None``/"none" is no checksum."""
    if which is None:
        return CHECKSUMS[0]
    if isinstance(which, int) and not isinstance(which, bool):
        if 0 <= which < len(CHECKSUMS):
            return CHECKSUMS[which]
        raise ValueError(f"checksum id must be 0..{len(CHECKSUMS) - 1}, got {which}")
    if isinstance(which, str) and which.lower() in _CHECKSUM_BY_NAME:
        return _CHECKSUM_BY_NAME[which.lower()]
    names = ", ".join(c.name for c in CHECKSUMS)
    raise ValueError(f"unknown checksum {which!r}; choose one of {names}")


def crc32(data: Any, start: int = 0) -> int:
    """The CRC-32 of ``data`` (zlib's polynomial), continuing from ``start``."""
    return int(_fast_zlib.crc32(data, start)) & 0xFFFFFFFF
