"""Verification of a Blosc2 N-d frame (b2nd or caterva; contiguous file or sparse
directory) with the parsers its reader uses.

Opening checks the header, metalayers and offsets (and, in a frame carray last
changed, the digest of all of them); then every chunk is read (sparse chunk files
included), checked against the digest and page digests carray recorded for it, and
decoded to its full size.  Nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from carray.codecs import blosc
from carray.core.problems import Checked, Finding, Problem
from carray.errors import CArrayError
from carray.layouts.b2nd.layout import B2ndLayout
from carray.stores import Store


def verify(store: Store, path: str) -> Iterator[Finding]:
    """Yield every problem of the frame at ``path`` (and each chunk checked)."""
    try:
        layout, meta, _ = B2ndLayout.open(path, readonly=True, store=store)
    except CArrayError as exc:
        yield Problem.from_error(exc, store.url(path))
        return
    out = np.empty(meta.chunk_nbytes, dtype=np.uint8)
    try:
        for n in range(meta.nchunks):
            where = layout.chunk_path(n)
            try:
                chunk = layout.read_chunk(n)  # checks the chunk's digest
                digests = layout.stored_digests(n)
                if digests is not None:
                    digests.check_pages(chunk, where)
                blosc.validate_chunk(chunk, meta.chunk_nbytes, where)
                blosc.decompress_into(chunk, out, where)
                yield Checked(where)
            except CArrayError as exc:
                p = Problem.from_error(exc, where)
                yield Problem(p.path, p.where, f"chunk {n}: {p.what}")
    finally:
        layout.close()
