"""Manifests: what one version of a versioned dataset holds.

A manifest names its version (``id``, ``seq``, ``parent``, ``time``, ``message``) and,
for every *member* (an array: the dataset itself, a table's column, a group's
array), its shape, sizes, attributes and the references of its index pages
(:mod:`carray.versions.index`).  Containers keep what else they need under
``meta`` (a table's column order, say).  Bytes (docs/formats/superchunk.md,
"Manifests"; little-endian):

    b"CAVERS02" | u32 n | n bytes of ASCII JSON (the header)
    | for each member, in the header's order: its page references (20 bytes each)
    | u32 CRC-32 of everything before

(``CAVERS01``, read as well, is the same but for page files without tokens and
transaction records without outcomes: :mod:`.repo`, :mod:`.outcomes`.)

The JSON header holds ``id``, ``seq``, ``parent``, ``time`` (seconds since the epoch),
``message``, ``kind``, ``meta``, ``retention`` and ``members``: a list of
``{"name", "path", "shape", "nbytes", "cbytes", "nchunks", "attrs"}``, with
``"sparse_pages": k`` for a member whose table lists ``k`` pages only (the others hold
fill entries alone): its table is then ``k`` int64 page numbers, ascending, and their
``k`` references.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from carray.codecs.checksums import crc32
from carray.core.safejson import load_json
from carray.errors import ChecksumError, FormatError
from carray.versions.index import PAGE_ENTRIES, PAGEREF

#: Written since page files carry tokens and transactions record their outcome: a
#: reader that knows only the first magic refuses these instead of misreading them.
MAGIC = b"CAVERS02"
_MAGICS = (b"CAVERS01", MAGIC)
_HEAD = struct.Struct("<8sI")
_CRC = 4


@dataclass(frozen=True)
class MemberState:
    """One array of a version: where it lives, its size and its index pages."""

    name: str
    path: str
    shape: tuple[int, ...]
    nbytes: int
    cbytes: int
    nchunks: int
    pages: np.ndarray  # PAGEREF, one per page (or per page of ``page_numbers``)
    attrs: Any = field(default_factory=dict)  # as stored (typed JSON)
    #: The pages ``pages`` refer to, ascending (None: one per page, all of them).
    page_numbers: np.ndarray | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "path": self.path, "shape": list(self.shape),
               "nbytes": self.nbytes, "cbytes": self.cbytes, "nchunks": self.nchunks,
               "attrs": self.attrs}
        if self.page_numbers is not None:
            out["sparse_pages"] = len(self.page_numbers)
        return out

    def page_tables(self) -> bytes:
        """The member's page table as the manifest stores it."""
        refs = np.ascontiguousarray(self.pages, dtype=PAGEREF).tobytes()
        if self.page_numbers is None:
            return refs
        return np.ascontiguousarray(self.page_numbers, "<i8").tobytes() + refs

    def replace(self, **changes: Any) -> MemberState:
        return replace(self, **changes)


@dataclass(frozen=True)
class Manifest:
    """One version: its identity, when and why it was made, and its members."""

    id: str
    seq: int
    parent: str | None
    time: float
    message: str | None
    members: tuple[MemberState, ...]
    kind: str = "commit"
    meta: Any = field(default_factory=dict)
    retention: Any = field(default_factory=dict)
    #: Published by a transaction over several datasets: the record (a path relative to
    #: the dataset's root) whose existence says it committed.
    txn: str | None = None

    def member(self, name: str) -> MemberState:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)

    def replace(self, **changes: Any) -> Manifest:
        return replace(self, **changes)

    def encode(self) -> bytes:
        header = {"id": self.id, "seq": self.seq, "parent": self.parent, "time": self.time,
                  "message": self.message, "kind": self.kind, "meta": self.meta,
                  "retention": self.retention,
                  "members": [m.to_json() for m in self.members]}
        if self.txn is not None:
            header["txn"] = self.txn
        text = json.dumps(header, ensure_ascii=True, allow_nan=False).encode("ascii")
        parts = [_HEAD.pack(MAGIC, len(text)), text]
        parts += [m.page_tables() for m in self.members]
        body = b"".join(parts)
        return body + crc32(body).to_bytes(_CRC, "little")

    @classmethod
    def decode(cls, data: bytes, path: str | os.PathLike[str] | None = None) -> Manifest:
        """The manifest in ``data``; FormatError or ChecksumError naming ``path`` if it is
        not a whole, valid one."""
        if len(data) < _HEAD.size + _CRC or bytes(data[:8]) not in _MAGICS:
            raise FormatError("not a carray manifest (bad magic or too short)", path, 0)
        body = data[:-_CRC]
        if crc32(body) != int.from_bytes(data[-_CRC:], "little"):
            raise ChecksumError("manifest: CRC-32 mismatch", path, len(body))
        _, n = _HEAD.unpack_from(data)
        if _HEAD.size + n > len(body):
            raise FormatError(f"manifest header of {n} bytes runs past the end", path, 8)
        header = load_json(body[_HEAD.size:_HEAD.size + n], os.fspath(path or "manifest"),
                           what="manifest header")
        try:
            return cls._from_header(header, memoryview(body)[_HEAD.size + n:], path)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, FormatError):
                raise
            raise FormatError(f"manifest header is not as expected: {exc}", path) from None

    @classmethod
    def _from_header(cls, h: Any, tables: memoryview,
                     path: str | os.PathLike[str] | None) -> Manifest:
        def need(cond: bool, what: str) -> None:
            if not cond:
                raise FormatError(f"manifest: {what}", path)

        need(isinstance(h, dict), "the header must be a JSON object")
        need(isinstance(h["id"], str) and _is_int(h["seq"]) and h["seq"] >= 0,
             "id must be a string and seq an int >= 0")
        need(h["parent"] is None or isinstance(h["parent"], str), "parent must be an id")
        need(isinstance(h["time"], (int, float)) and math.isfinite(h["time"]),
             "time must be a number")
        need(h["message"] is None or isinstance(h["message"], str), "message must be text")
        need(h.get("txn") is None or isinstance(h["txn"], str), "txn must be a path")
        need(isinstance(h["members"], list), "members must be a list")
        members, pos = [], 0
        for m in h["members"]:
            need(isinstance(m, dict), "a member must be a JSON object")
            shape = m["shape"]
            need(isinstance(m["name"], str) and isinstance(m["path"], str), "member names")
            need(isinstance(shape, list) and all(_is_int(x) and x >= 0 for x in shape),
                 f"member {m['name']!r}: shape must be ints >= 0")
            sizes = [m["nbytes"], m["cbytes"], m["nchunks"]]
            need(all(_is_int(x) and x >= 0 for x in sizes),
                 f"member {m['name']!r}: nbytes, cbytes and nchunks must be ints >= 0")
            top = -(-m["nchunks"] // PAGE_ENTRIES)
            sparse = m.get("sparse_pages")
            need(sparse is None or (_is_int(sparse) and 0 <= sparse <= top),
                 f"member {m['name']!r}: sparse_pages must be an int of at most {top}")
            count = top if sparse is None else sparse
            size = count * (PAGEREF.itemsize + (8 if sparse is not None else 0))
            need(pos + size <= len(tables), f"member {m['name']!r}: page table runs past "
                 "the end")
            numbers = None
            if sparse is not None:
                numbers = np.frombuffer(tables[pos:pos + 8 * count], "<i8").astype(np.int64)
                need(bool(count == 0 or (numbers[0] >= 0 and numbers[-1] < top
                                         and (np.diff(numbers) > 0).all())),
                     f"member {m['name']!r}: page numbers not ascending below {top}")
                pos += 8 * count
            pages = np.frombuffer(tables[pos:pos + count * PAGEREF.itemsize],
                                  dtype=PAGEREF).copy()
            pos += count * PAGEREF.itemsize
            need(bool((pages["seq"] >= 0).all() and (pages["off"] >= 0).all()
                      and (pages["len"] > 0).all()),
                 f"member {m['name']!r}: impossible page references")
            members.append(MemberState(m["name"], m["path"], tuple(shape), m["nbytes"],
                                       m["cbytes"], m["nchunks"], pages, m.get("attrs", {}),
                                       numbers))
        need(pos == len(tables), f"{len(tables) - pos} bytes after the page tables")
        return cls(h["id"], h["seq"], h["parent"], float(h["time"]), h["message"],
                   tuple(members), kind=str(h.get("kind", "commit")), meta=h.get("meta", {}),
                   retention=h.get("retention", {}), txn=h.get("txn"))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
