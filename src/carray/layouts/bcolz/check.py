"""What carray adds to the bcolz files it writes so that reads can check them
(docs/formats/bcolz-dir.md, "What carray adds").

bcolz reads a chunk file as its 16-byte prefix and the ``cbytes`` bytes of the
Blosc chunk that follows, and ``meta/sizes`` by key; it looks at nothing else.
carray appends a trailer to every chunk file it writes::

    | page digests | chunk digest | id u8 | log2 page u8 | version u8 | 0 u8 | length u32 | "caDG" |

(little-endian; ``length`` counts the whole trailer; the chunk digest covers the
Blosc chunk and the page digests after it, so a whole-chunk read, which checks it,
also finds damage to the page digests that ranged reads rely on), and adds a last key,
``carray_check``, to ``meta/sizes``: the checksum's name, the digest of the other
three keys as bcolz would write them, and the digest of ``meta/storage``.

Whether a file carries them is told by the file alone: a chunk file of exactly
``16 + cbytes`` bytes is bcolz's (bcolz writes no trailer, and rewrites whole files),
anything longer must end in a valid trailer; a ``meta/sizes`` without the key was
written by bcolz (which rewrites the file without it).  So a file bcolz wrote, or
rewrote over carray's, reads as before, and damage to one carray wrote is an error.
"""

from __future__ import annotations

import json
import os
import re
import struct
from typing import Any

from carray.codecs.checksums import CHECKSUMS, Checksum, get_checksum
from carray.codecs.pages import PAGE_SIZE, ChunkDigests, npages, page_digests
from carray.errors import ChecksumError, FormatError

TRAILER_MAGIC = b"caDG"
_TAIL = struct.Struct("<BBBBI4s")  # checksum id, log2 page, version, 0, length, magic
_VERSION = 1
SIZES_KEY = "carray_check"
_SIZES_CHECK = re.compile(r"([a-z0-9]+) ([0-9a-f]{1,128}) ([0-9a-f]{1,128})")
_SIZES_KEYS = ("shape", "nbytes", "cbytes")


def build_trailer(chunk: Any, checksum: Checksum, page: int = PAGE_SIZE) -> bytes:
    """The trailer carray writes after the Blosc chunk ``chunk`` in its chunk file."""
    pages = page_digests(chunk, checksum, page)
    length = len(pages) + checksum.size + _TAIL.size
    return pages + checksum.digest(bytes(chunk) + pages) + _TAIL.pack(
        checksum.id, page.bit_length() - 1, _VERSION, 0, length, TRAILER_MAGIC)


def check_chunk(file: memoryview, start: int, digests: ChunkDigests,
                path: str | os.PathLike[str]) -> None:
    """Check the chunk at ``file[start:]`` and the page digests after it against the
    chunk digest of its trailer (``file``: the whole chunk file)."""
    covered = file[start:start + digests.size + len(digests.pages)]
    if digests.checksum.digest(covered) != digests.digest:
        raise ChecksumError(f"{digests.checksum.name} checksum mismatch over the chunk and "
                            "its page digests", path, start)


def trailer_length(cbytes: int, checksum: Checksum, page: int = PAGE_SIZE) -> int:
    """Bytes of the trailer of a chunk of ``cbytes`` bytes."""
    return (npages(cbytes, page) + 1) * checksum.size + _TAIL.size


def parse_trailer(tail: bytes, cbytes: int, path: str | os.PathLike[str],
                  base: int) -> ChunkDigests:
    """The digests in ``tail``, all the bytes after a chunk of ``cbytes`` bytes, which
    start at ``base`` in the file.

    Raises
    ------
    FormatError
        ``tail`` is not exactly one valid trailer for that chunk.
    """
    if len(tail) < _TAIL.size:
        raise FormatError(f"{len(tail)} bytes after the Blosc chunk, which is not a carray "
                          "trailer", path, base)
    ck_id, log2, version, zero, length, magic = _TAIL.unpack_from(tail, len(tail) - _TAIL.size)
    end = base + len(tail) - _TAIL.size
    if magic != TRAILER_MAGIC:
        raise FormatError(f"{len(tail)} bytes after the Blosc chunk do not end in a carray "
                          f"trailer (magic {magic!r})", path, end + 8)
    if version != _VERSION or zero or ck_id == 0 or ck_id >= len(CHECKSUMS) \
            or not 9 <= log2 <= 24:
        raise FormatError(f"carray trailer version {version}, checksum {ck_id}, page 2**{log2}"
                          " is not one this reader knows", path, end)
    checksum, page = get_checksum(ck_id), 1 << log2
    if length != len(tail) or length != trailer_length(cbytes, checksum, page):
        raise FormatError(f"carray trailer of {length} bytes after a {cbytes}-byte chunk, "
                          f"{len(tail)} found and {trailer_length(cbytes, checksum, page)} "
                          "expected", path, end + 4)
    d = checksum.size
    body = tail[:len(tail) - _TAIL.size]
    return ChunkDigests(checksum, page, cbytes, body[-d:], body[:-d])


def sizes_digest(sizes: dict[str, Any], checksum: Checksum) -> bytes:
    """The digest of ``meta/sizes``' own keys, serialised as bcolz writes them."""
    own = {k: sizes[k] for k in _SIZES_KEYS}
    return checksum.digest(json.dumps(own, ensure_ascii=True).encode("ascii"))


def seal_sizes(sizes: dict[str, Any], storage: bytes, checksum: Checksum) -> dict[str, Any]:
    """``sizes`` with the ``carray_check`` key carray adds (bcolz ignores it)."""
    check = f"{checksum.name.lower()} {sizes_digest(sizes, checksum).hex()} " \
            f"{checksum.digest(storage).hex()}"
    return {**{k: sizes[k] for k in _SIZES_KEYS}, SIZES_KEY: check}


def check_sizes(sizes: dict[str, Any], storage: bytes, sizes_path: str,
                storage_path: str) -> None:
    """Check ``meta/sizes`` and ``meta/storage`` against the ``carray_check`` key of
    ``sizes``, when it has one (a file bcolz wrote has none).

    Raises
    ------
    FormatError, ChecksumError
        The key is malformed, or a file does not match it.
    """
    check = sizes.get(SIZES_KEY)
    if check is None:
        return
    m = _SIZES_CHECK.fullmatch(check) if isinstance(check, str) else None
    try:
        checksum = get_checksum(m.group(1)) if m else None
    except ValueError:
        checksum = None
    if m is None or checksum is None or checksum.id == 0 \
            or not len(m.group(2)) == len(m.group(3)) == 2 * checksum.size:
        raise FormatError(f"{SIZES_KEY} {check!r} is not a checksum name and two digests",
                          sizes_path)
    if not all(k in sizes for k in _SIZES_KEYS) or \
            sizes_digest(sizes, checksum).hex() != m.group(2):
        raise ChecksumError(f"meta/sizes does not match its {checksum.name} checksum",
                            sizes_path)
    if checksum.digest(storage).hex() != m.group(3):
        raise ChecksumError(f"meta/storage does not match the {checksum.name} checksum in "
                            "meta/sizes", storage_path)
