"""Metadata files that carry their own checksum (docs/formats/superchunk.md,
"Checksummed metadata files").

carray's own JSON metadata files (``meta/storage``, ``meta/member``, the table,
group, string and category markers) end with a ``"crc32"`` member::

    {"format": "carray-table", "format_version": 4, "crc32": "1c291ca3"}

Its value is the CRC-32 (zlib's), as 8 lowercase hex digits, of the file's bytes
as they would be without that member: the same text with ``, "crc32": "..."``
(``"crc32": "..."`` in an object with no other member) left out.  It is always the
last member, written exactly as above, so the guarded bytes are found without
re-encoding anything, and a CRC-32 catches every change of up to four bytes.

Whether a file must carry one is said by its own format version (files written
before checksums read as they were); :func:`check_keys` refuses what a reader does
not know, so a damaged key name is an error, never ignored.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Collection
from typing import Any

from carray.core.safejson import load_json
from carray.errors import ChecksumError, FormatError

#: The member holding a metadata file's checksum.
DIGEST_KEY = "crc32"
_TAIL = re.compile(rb'(, )?"crc32": "([0-9a-f]{8})"\}\n\Z')


def _crc(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def dumps_checked(obj: dict[str, Any]) -> bytes:
    """``obj`` as a metadata file: ASCII JSON, one trailing newline, its checksum last."""
    if DIGEST_KEY in obj:
        raise ValueError(f"{DIGEST_KEY!r} is the checksum's own key")
    body = json.dumps(obj, ensure_ascii=True)
    digest = _crc(body.encode("ascii") + b"\n")
    return (body[:-1] + (", " if obj else "") + f'"{DIGEST_KEY}": "{digest:08x}"}}\n'
            ).encode("ascii")


def load_checked(data: bytes, source: str, what: str) -> tuple[Any, bool]:
    """Parse a metadata file: ``(its JSON without the checksum member, whether it had
    one)``.  A checksum that does not match is a ChecksumError naming ``source``; one
    not written as :func:`dumps_checked` writes it is a FormatError."""
    obj = load_json(data, source, what=what)
    if not isinstance(obj, dict) or DIGEST_KEY not in obj:
        return obj, False
    raw = bytes(data)
    tail = _TAIL.search(raw)
    if tail is None or (tail.group(1) is None) != (len(obj) == 1):
        raise FormatError(f"{what}: the {DIGEST_KEY!r} member is not the last one, as "
                          "carray writes it", source)
    stored = int(tail.group(2), 16)
    computed = _crc(raw[:tail.start()] + b"}\n")
    if stored != computed:
        raise ChecksumError(f"{what}: checksum mismatch (stored {stored:08x}, computed "
                            f"{computed:08x}): the file is damaged", source)
    del obj[DIGEST_KEY]
    return obj, True


def require_digest(has: bool, needed: bool, source: str, what: str) -> None:
    """Refuse a file whose format version says it carries a checksum and that has none
    (and one whose version predates checksums yet has one)."""
    if needed and not has:
        raise FormatError(f"{what}: no {DIGEST_KEY!r} checksum, which its format version "
                          "requires", source)
    if has and not needed:
        raise FormatError(f"{what}: a {DIGEST_KEY!r} checksum in a format version that has "
                          "none", source)


def check_keys(obj: dict[str, Any], known: Collection[str], source: str, what: str) -> None:
    """Refuse a key a reader does not know (a damaged or foreign file)."""
    for key in obj:
        if key not in known:
            raise FormatError(f"{what}: unknown key {key!r}", source)


def is_int(value: Any) -> bool:
    """An int that is not a bool (JSON's ``true`` is one in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def load_marker(data: bytes, source: str, what: str, *, version_key: str,
                readable: Collection[int], checked_from: int,
                known: Collection[str]) -> dict[str, Any]:
    """A marker file (a small JSON object naming a format and its version): parsed, its
    checksum checked (required from version ``checked_from`` on), its keys ``known``
    (besides ``version_key``) and its version one of ``readable``."""
    obj, has = load_checked(data, source, what)
    if not isinstance(obj, dict):
        raise FormatError(f"{what} must hold a JSON object", source)
    version: Any = obj.get(version_key)
    if not is_int(version) or version not in readable:
        raise FormatError(f"{what}: unsupported version {version!r} (this build reads "
                          f"{', '.join(map(str, readable))})", source)
    check_keys(obj, {version_key, *known}, source, what)
    require_digest(has, version >= checked_from, source, what)
    return obj
