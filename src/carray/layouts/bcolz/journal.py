"""The commit journal of the bcolz layout (see :mod:`carray.layouts.bcolz.layout`).

bcolz readers know only ``meta/sizes`` and ``data/__N.blp``, so a commit must
never leave those half-changed.  Between commits, a chunk that replaces one the
committed state refers to is written to ``data/__N.blp.staged`` (bcolz never
looks at that name); chunks past the committed end go straight to their own
names, which nothing refers to yet.  A commit then

1. fsyncs every chunk file written since the last commit (and ``data/``);
2. writes ``meta/journal``: the staged files to rename and the new
   ``meta/sizes``, with a CRC, atomically (only when something is staged);
3. renames each staged file over its chunk file;
4. replaces ``meta/sizes``;
5. deletes chunk files past the new end (after a shrink), then the journal.

Opening for writing finishes a complete journal (renames whose staged file is
still there, then ``meta/sizes``: both harmless to repeat) and discards a
damaged one; opening read-only reads through it without changing anything.
A writer holding the lock also removes staged and temporary files nothing
refers to.  Interrupted at any point, the directory reopens at its last
complete commit, as bcolz and carray both read it.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import dataclass

from carray.stores.tempnames import is_temporary

JOURNAL_FILE = "journal"
STAGED_SUFFIX = ".staged"
_MAGIC = b"CAJB"
_HEAD = struct.Struct("<4sI")  # magic, crc32 of the JSON that follows
_STAGED = re.compile(r"__(\d+)\.blp\.staged")


def staged_name(nchunk: int) -> str:
    """The name a chunk replacing a committed one is written under until the commit."""
    return f"__{nchunk}.blp{STAGED_SUFFIX}"


def is_leftover(name: str) -> bool:
    """Whether a file in ``data/`` is a staged or temporary file of an unfinished write."""
    return bool(_STAGED.fullmatch(name)) or is_temporary(name)


@dataclass(frozen=True)
class Journal:
    """A commit about to be applied: staged chunks to rename, then the new sizes."""

    renames: tuple[int, ...]
    sizes: bytes

    def encode(self) -> bytes:
        body = json.dumps({"renames": list(self.renames),
                           "sizes": self.sizes.decode("ascii")}).encode("ascii")
        return _HEAD.pack(_MAGIC, zlib.crc32(body)) + body

    @classmethod
    def decode(cls, buf: bytes) -> Journal | None:
        """The journal in ``buf``, or None when it is incomplete or damaged."""
        if len(buf) < _HEAD.size:
            return None
        magic, crc = _HEAD.unpack_from(buf, 0)
        body = buf[_HEAD.size:]
        if magic != _MAGIC or zlib.crc32(body) != crc:
            return None
        try:
            obj = json.loads(body)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        renames, sizes = obj.get("renames"), obj.get("sizes")
        if not isinstance(renames, list) or not isinstance(sizes, str) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in renames):
            return None
        try:
            return cls(tuple(renames), sizes.encode("ascii"))
        except UnicodeEncodeError:
            return None
