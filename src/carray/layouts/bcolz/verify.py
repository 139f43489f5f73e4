"""Verification of a bcolz 1.x carray directory, with the parsers its reader uses.

Checks ``meta/storage`` and ``meta/sizes`` (as opening does, with the checksum
carray keeps in ``meta/sizes``), ``meta/__attrs__``, then every chunk file the
length needs: its 16-byte header, Blosc header, the digests of the trailer carray
writes after the chunk (the chunk's and every page's), decoded size and decoding.  The work is bounded by the files on disk, not by the
length the metadata claims: a directory claiming more rows than its chunk files
can hold is one problem, and only the chunk files present are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from carray.codecs import blosc
from carray.core.problems import Checked, Finding, Problem
from carray.errors import CArrayError, FormatError
from carray.layouts.base import ArrayMeta
from carray.layouts.bcolz.layout import CHUNK_HEADER_SIZE, DATA_DIR, BcolzLayout
from carray.stores import Store

_CHUNK_FILE = re.compile(r"__(\d+)\.blp")


def _chunk_files(store: Store, root: str) -> set[int]:
    """The chunk numbers that have a file under ``data/``."""
    data = store.join(root, DATA_DIR)
    if not store.isdir(data):
        return set()
    found = set()
    for name in store.listdir(data):
        m = _CHUNK_FILE.fullmatch(name)
        if m:
            found.add(int(m.group(1)))
    return found


def verify(store: Store, root: str) -> Iterator[Finding]:
    """Yield every problem of the bcolz directory at ``root`` (and each chunk checked)."""
    try:
        # Object arrays are only decompressed here, never unpickled.
        layout, meta, _ = BcolzLayout.open(root, readonly=True, allow_pickle=True, store=store)
    except CArrayError as exc:
        yield Problem.from_error(exc, store.url(root))
        return
    try:
        try:
            layout.load_attrs()
        except CArrayError as exc:
            yield Problem.from_error(exc, store.url(root))
        present = _chunk_files(store, root)
        claimed = -(-meta.length // meta.chunklen)
        nchunks = min(claimed, max(present, default=-1) + 1)
        if claimed > nchunks:
            yield Problem(store.url(store.join(root, "meta", "sizes")), "",
                          f"claims {meta.length} rows ({claimed} chunks of {meta.chunklen}), "
                          f"but data/ holds {len(present)} chunk files, up to number "
                          f"{nchunks - 1}")
        for n in range(nchunks):
            yield from _verify_chunk(layout, meta, n, claimed, n in present)
    finally:
        layout.close()


def _verify_chunk(layout: BcolzLayout, meta: ArrayMeta, n: int, claimed: int,
                  present: bool) -> Iterator[Finding]:
    path = layout.chunk_path(n) or ""
    if not present:
        yield Problem(path, "", f"chunk file of chunk {n} is missing")
        return
    rows = meta.chunklen if n < claimed - 1 else meta.length - n * meta.chunklen
    try:
        chunk = layout.read_chunk(n)  # checks the chunk's digest
        digests = layout.stored_digests(n)
        if digests is not None:
            digests.check_pages(chunk, path, CHUNK_HEADER_SIZE)
        h = blosc.validate_chunk(chunk, None, path)
        sizes = (rows * meta.rowsize, meta.chunklen * meta.rowsize)
        if meta.dtype != np.dtype(object) and h.nbytes not in sizes:
            raise FormatError(f"holds {h.nbytes} bytes, expected {sizes[0]}", path)
        blosc.decompress(chunk, path)
        yield Checked(path)
    except CArrayError as exc:
        yield Problem.from_error(exc, path)
