"""Small checked records of the commit protocol: a transaction's outcome and the
marker by which a dataset keeps that outcome for itself (docs/spec/commit.md).

Bytes (little-endian)::

    magic (8 bytes) | u32 n | n bytes of ASCII JSON (an object) | u32 CRC-32 of all before

The JSON is read with the size checked against the file before anything is
allocated; a record that is not whole and valid raises FormatError or ChecksumError
naming its file.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from carray.codecs.checksums import crc32
from carray.core.safejson import load_json
from carray.errors import ChecksumError, FormatError

#: A transaction's record (``.carray-transactions/ID``).
RECORD_MAGIC = b"CATXREC1"
#: A dataset's copy of the outcome of the transaction that published one of its
#: versions (``versions/NNNNNNNNNN.ok``).
MARKER_MAGIC = b"CAOUTCM1"
_HEAD = struct.Struct("<8sI")
_CRC = 4
#: Outcomes a record holds.
COMMIT, ABORT = "commit", "abort"


def encode(magic: bytes, body: dict[str, Any]) -> bytes:
    text = json.dumps(body, ensure_ascii=True, allow_nan=False, sort_keys=True).encode()
    data = _HEAD.pack(magic, len(text)) + text
    return data + crc32(data).to_bytes(_CRC, "little")


def decode(magic: bytes, data: bytes, path: str, required: dict[str, type],
           optional: dict[str, type] | None = None) -> dict[str, Any]:
    """The JSON object of a record written by :func:`encode` with ``magic``: each key of
    ``required`` present with a value of its type, those of ``optional`` of theirs when
    present, and no other key."""
    if len(data) < _HEAD.size + _CRC or data[:8] != magic:
        raise FormatError(f"not a {magic.decode()} record (bad magic or too short)", path, 0)
    body = data[:-_CRC]
    if crc32(body) != int.from_bytes(data[-_CRC:], "little"):
        raise ChecksumError("record: CRC-32 mismatch", path, len(body))
    _, n = _HEAD.unpack_from(data)
    if _HEAD.size + n != len(body):
        raise FormatError(f"record of {len(body)} bytes says its JSON holds {n}", path, 8)
    obj = load_json(body[_HEAD.size:], path, what="record")
    if not isinstance(obj, dict):
        raise FormatError("record: the JSON must be an object", path)
    optional = optional or {}
    unknown = sorted(set(obj) - set(required) - set(optional))
    if unknown:
        raise FormatError(f"record: unknown key {unknown[0]!r}", path)
    for key, kind in [*required.items(), *((k, t) for k, t in optional.items() if k in obj)]:
        value = obj.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
            raise FormatError(f"record: {key!r} must be a {kind.__name__}", path)
    return obj


__all__ = ["ABORT", "COMMIT", "MARKER_MAGIC", "RECORD_MAGIC", "decode", "encode"]
