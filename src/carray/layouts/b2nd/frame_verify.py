"""Verification of any Blosc2 frame (SChunk, b2nd, caterva) with :class:`Frame`, the
parser its reader uses: the header, trailer and offsets, then every chunk decoded (and,
in a frame carray last changed, checked against its digest and page digests)."""

from __future__ import annotations

from collections.abc import Iterator

from carray.core.problems import Checked, Finding, Problem
from carray.errors import CArrayError
from carray.layouts.b2nd.frame import Frame
from carray.stores import Store


def verify(store: Store, path: str) -> Iterator[Finding]:
    """Yield every problem of the frame at ``path`` (and each chunk checked)."""
    try:
        frame = Frame((store, path))
    except CArrayError as exc:
        yield Problem.from_error(exc, store.url(path))
        return
    with frame:
        for i in range(frame.nchunks):
            try:
                frame.decode_chunk(i)  # checks the chunk's digest
                digests = frame.digests.get(i) if frame.digests is not None else None
                if digests is not None:
                    digests.check_pages(frame.read_chunk(i), frame.path)
                yield Checked(frame.path)
            except CArrayError as exc:
                p = Problem.from_error(exc, frame.path)
                yield Problem(p.path, p.where, f"chunk {i}: {p.what}")
